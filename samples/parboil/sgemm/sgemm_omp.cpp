// parboil_sgemm_omp: Parboil's sgemm (C = A * B^T, column-major) in plain C++ and OpenMP, the CPU baseline of
// apgas_parboil_sgemm. The same algorithm as the optimised CUDA kernel: C is cut into tiles of 128 rows x 16
// columns (one per thread at a time, a static schedule: the tiles are equal), each accumulated in L1 (16 x 128
// partial sums) over k steps of 8, vectorised over the 128 rows, then stored once.
#include "sgemm.hpp"

#include <omp.h>

#include <cstdio>
#include <vector>

namespace {

void multiply(const sgemm::problem& p, float* c) {
  const int m = p.m, n = p.n, k = p.k;
  const float* a = p.a.data();
  const float* bt = p.bt.data();
  const int tiles_m = m / sgemm::tile_m, tiles = tiles_m * (n / sgemm::tile_n);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tiles; ++t) {
    const int row0 = t % tiles_m * sgemm::tile_m, col0 = t / tiles_m * sgemm::tile_n;
    float acc[sgemm::tile_n][sgemm::tile_m] = {};
    for (int l0 = 0; l0 < k; l0 += sgemm::tile_k) {
      const float* a_rows = a + row0 + static_cast<long>(l0) * m;
      for (int q = 0; q < sgemm::tile_n; ++q) {
        float b[sgemm::tile_k];  // B^T's column col0 + q in this k step
        for (int j = 0; j < sgemm::tile_k; ++j) b[j] = bt[col0 + q + static_cast<long>(l0 + j) * n];
#pragma omp simd
        for (int r = 0; r < sgemm::tile_m; ++r) {
          float s = acc[q][r];
#pragma GCC unroll 8
          for (int j = 0; j < sgemm::tile_k; ++j) s += a_rows[r + static_cast<long>(j) * m] * b[j];
          acc[q][r] = s;
        }
      }
    }
    for (int q = 0; q < sgemm::tile_n; ++q) {
      float* c_col = c + row0 + static_cast<long>(col0 + q) * m;
#pragma omp simd
      for (int r = 0; r < sgemm::tile_m; ++r) c_col[r] = acc[q][r];
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "parboil_sgemm_omp";
  const std::string usage = sgemm::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    const auto p = sgemm::start(o);
    if (!p) return 0;
    std::vector<float> c(static_cast<std::size_t>(p->m) * p->n);
    parboil::timer time;
    time.start();
    multiply(*p, c.data());
    time.stop();
    return sgemm::finish(prog, o, *p, c, time.seconds(), "threads=" + std::to_string(omp_get_max_threads()));
  });
}
