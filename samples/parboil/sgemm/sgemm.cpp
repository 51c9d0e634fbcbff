// apgas_parboil_sgemm: Parboil's sgemm (C = A * B^T, column-major) on the GPU places of every host, or on the CPU
// places of the hosts without GPUs. C is split by blocks of 128 rows over every computing place of the run (each
// host's GPUs, or the host itself, dist::parts): a place gets its rows of A and all of B^T, and gives its rows of C
// back to place 0 (at place 0's CPU place they are place 0's own matrices: nothing copied). Input, output and the
// check: sgemm.hpp.
#include "dist.hpp"
#include "sgemm.hpp"

#include <array>

namespace {

using namespace sgemm;
constexpr const char* prog = "apgas_parboil_sgemm";

// Parboil's mysgemmNT (src/cuda/sgemm_kernel.cu): a (16, 8) block computes 128 rows x 16 columns of C, a thread one
// row x 16 columns; per k step of 8 the block stages an 8 x 16 tile of B^T in shared memory between two barriers.
// Rows of C and A: m, with leading dimension ld.
void multiply_at(apgas::place p, apgas::remote_array<float> a, apgas::remote_array<float> bt,
                 apgas::remote_array<float> c, int m, int ld, int n, int k) {
  const apgas::grid g{{m / tile_m, n / tile_n}, {tile_n, tile_k}};
  apgas::at(p, apgas::cuda_kernel(g, apgas::shared_uninit<float>(tile_k * tile_n),
                                  [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float> b_s) {
    const float *A = a.data(), *B = bt.data();
    const int row0 = b.block_idx().x * tile_m, col0 = b.block_idx().y * tile_n;
    auto acc = b.per_thread<std::array<float, tile_n>>();  // a thread's 16 sums: registers on a GPU
    for (int l0 = 0; l0 < k; l0 += tile_k) {
      b.for_threads([&](apgas::thread_index t) { b_s[t.y * tile_n + t.x] = B[col0 + t.x + (l0 + t.y) * n]; });
      b.sync();
      b.for_threads([&](apgas::thread_index t) {
        float av[tile_k];  // the thread's row of A in this k step
        for (int j = 0; j < tile_k; ++j) av[j] = A[row0 + t.linear + (l0 + j) * ld];
        for (int q = 0; q < tile_n; ++q) {
          float s = acc[t][q];
          for (int j = 0; j < tile_k; ++j) s += av[j] * b_s[j * tile_n + q];
          acc[t][q] = s;
        }
      });
      b.sync();
    }
    b.for_threads([&](apgas::thread_index t) {
      for (int q = 0; q < tile_n; ++q) c.data()[row0 + t.linear + (col0 + q) * ld] = acc[t][q];
    });
  }));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = sgemm::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const auto in = sgemm::start(o);
    if (!in) return 0;
    const int m = in->m, n = in->n, k = in->k;
    const auto at0 = [](std::span<const float> v) { return apgas::make_remote_array(apgas::here(), v); };
    const auto a0 = at0(in->a), bt0 = at0(in->bt), c0 = apgas::make_remote_array<float>(apgas::here(), 1L * m * n);
    parboil::timer time;
    time.start();
    dist::for_parts(dist::parts(m, o.cpu, tile_m), [=](dist::part p) {  // C's rows [p.lo, p.hi) at place p.at
      const auto a = dist::borrow_rows(p.at, a0, p.lo, p.size(), m, k), bt = dist::borrow(p.at, bt0, 0, bt0.size());
      const auto c = dist::borrow_rows(p.at, c0, p.lo, p.size(), m, n, false);
      multiply_at(p.at, a, bt, c, int(p.size()), int(dist::ld_of(a, a0, p.size(), m)), n, k);
      dist::give_back_rows(a, a0, p.lo, p.size(), m, k, false), dist::give_back(bt, bt0, 0, 0, 0, false);
      dist::give_back_rows(c, c0, p.lo, p.size(), m, n);
    });
    time.stop();
    const int code = sgemm::finish(prog, o, *in, {c0.data(), c0.size()}, time.seconds(), parboil::places_field(o.cpu));
    for (auto x : {a0, bt0, c0}) apgas::free_remote_array(x);
    return code;
  });
}
