// The OpenMP anchors of apgas_bench_kernels: the same algorithms as the kernels in bench_kernels.cpp, the CUDA
// threads of a block written as loops (OpenMP's parallel loops over the blocks), compiled with the same flags.
#include "kernels_common.hpp"

#include <omp.h>

#include <cmath>

namespace kbench {

void sgemm_omp(const float* a, const float* b, float* c, int n) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int by = 0; by < n / tile; ++by) {
    for (int bx = 0; bx < n / tile; ++bx) {
      float as[tile][tile], bs[tile][tile], acc[tile][tile] = {};
      for (int k0 = 0; k0 < n; k0 += tile) {
        for (int i = 0; i < tile; ++i) {
          for (int j = 0; j < tile; ++j) {
            as[i][j] = a[(by * tile + i) * n + k0 + j];
            bs[i][j] = b[(k0 + i) * n + bx * tile + j];
          }
        }
        for (int i = 0; i < tile; ++i) {
          for (int j = 0; j < tile; ++j) {
            float s = acc[i][j];
            for (int k = 0; k < tile; ++k) s += as[i][k] * bs[k][j];
            acc[i][j] = s;
          }
        }
      }
      for (int i = 0; i < tile; ++i) {
        for (int j = 0; j < tile; ++j) c[(by * tile + i) * n + bx * tile + j] = acc[i][j];
      }
    }
  }
}

void stencil_omp(float* a0, float* anext, int nx, int ny, int nz, int iterations) {
  for (int it = 0; it < iterations; ++it) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int k = 1; k < nz - 1; ++k) {
      for (int j = 1; j < ny - 1; ++j) {
        for (int i = 1; i < nx - 1; ++i) {
          anext[idx3(i, j, k, nx, ny)] =
              (a0[idx3(i, j, k - 1, nx, ny)] + a0[idx3(i, j, k + 1, nx, ny)] + a0[idx3(i, j - 1, k, nx, ny)] +
               a0[idx3(i, j + 1, k, nx, ny)] + a0[idx3(i - 1, j, k, nx, ny)] + a0[idx3(i + 1, j, k, nx, ny)]) *
                  stencil_c1 -
              a0[idx3(i, j, k, nx, ny)] * stencil_c0;
        }
      }
    }
    std::swap(a0, anext);
  }
}

void reduce_omp(const float* x, long n, int blocks, float* partial) {
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    // the block's threads: each sums a grid-stride slice, then the block adds the slices
    float s[reduce_threads] = {};
    for (long i = static_cast<long>(blk) * reduce_threads; i < n; i += static_cast<long>(blocks) * reduce_threads) {
      const long rest = n - i < reduce_threads ? n - i : reduce_threads;
      for (int t = 0; t < rest; ++t) s[t] += x[i + t];
    }
    float total = 0;
    for (int t = 0; t < reduce_threads; ++t) total += s[t];
    partial[blk] = total;
  }
}

void black_scholes_omp(const float* s, const float* x, const float* t, float* call, float* put, long n) {
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) black_scholes_one(s[i], x[i], t[i], call[i], put[i]);
}

int omp_threads() { return omp_get_max_threads(); }

}  // namespace kbench
