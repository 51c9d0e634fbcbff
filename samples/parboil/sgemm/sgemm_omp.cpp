// parboil_sgemm_omp: Parboil's sgemm (C = A * B^T, column-major) in plain C++ and OpenMP, the CPU baseline of
// apgas_parboil_sgemm. The same algorithm as the optimised CUDA kernel: C is cut into tiles of 128 rows x 16
// columns (one per thread at a time, a static schedule: the tiles are equal), each tile accumulated over k in
// registers and L1 (a 16 x 128 accumulator, vectorised over the 128 rows), then stored once.
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
    for (int l = 0; l < k; ++l) {
      const float* a_col = a + row0 + static_cast<long>(l) * m;
      for (int q = 0; q < sgemm::tile_n; ++q) {
        const float b = bt[col0 + q + static_cast<long>(l) * n];
#pragma omp simd
        for (int r = 0; r < sgemm::tile_m; ++r) acc[q][r] += a_col[r] * b;
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
