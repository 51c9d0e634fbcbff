// apgas_parboil_sgemm: Parboil's sgemm (C = A * B^T, column-major) on the GPU places of every host, or on the CPU
// places of the hosts without GPUs. C is split by blocks of 128 rows over every computing place of the run (each
// host's GPUs, or the host itself): a place gets its rows of A and all of B^T, and sends its rows of C back to place 0.
// Input, output and the check: sgemm.hpp.
#include "sgemm.hpp"

#include "parboil_apgas.hpp"

#include <array>

namespace {

using namespace sgemm;
constexpr const char* prog = "apgas_parboil_sgemm";

// Parboil's mysgemmNT (src/cuda/sgemm_kernel.cu): a (16, 8) block computes 128 rows x 16 columns of C, a thread one
// row x 16 columns; per k step of 8 the block stages an 8 x 16 tile of B^T in shared memory between two barriers.
void multiply_at(apgas::place p, apgas::remote_array<float> a, apgas::remote_array<float> bt,
                 apgas::remote_array<float> c, int m, int n, int k) {
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
        for (int j = 0; j < tile_k; ++j) av[j] = A[row0 + t.linear + (l0 + j) * m];
        for (int q = 0; q < tile_n; ++q) {
          float s = acc[t][q];
          for (int j = 0; j < tile_k; ++j) s += av[j] * b_s[j * tile_n + q];
          acc[t][q] = s;
        }
      });
      b.sync();
    }
    b.for_threads([&](apgas::thread_index t) {
      for (int q = 0; q < tile_n; ++q) c.data()[row0 + t.linear + (col0 + q) * m] = acc[t][q];
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
    struct part {  // rows [r0, r0 + rows) of C at place p: A's rows, B^T and C's rows there, made before the timing
      apgas::place p;
      int r0, rows;
      apgas::remote_array<float> a, bt, c;
    };
    std::vector<apgas::place> where;  // every computing place of the run, host by host
    for (const apgas::place h : apgas::places()) {
      const auto ps = apgas::at(h, [cpu = o.cpu] { return parboil::compute_places(cpu); });
      where.insert(where.end(), ps.begin(), ps.end());
    }
    std::vector<part> parts;  // C in blocks of 128 rows over them
    for (int i = 0; i < int(where.size()); ++i) {
      const auto [r0, r1] = parboil::share(m, i, int(where.size()), tile_m);
      const apgas::place p = where[i];
      parts.push_back({p, int(r0), int(r1 - r0), apgas::make_remote_array<float>(p, (r1 - r0) * k),
                       apgas::make_remote_array<float>(p, in->bt.size()),
                       apgas::make_remote_array<float>(p, (r1 - r0) * n)});
    }
    std::vector<float> c(std::size_t(m) * n);
    parboil::timer time;
    time.start();
    apgas::finish([&] {
      for (const part& pt : parts) {
        if (pt.rows == 0) continue;
        apgas::async([&] {  // A's and C's rows: k and n columns, or one piece when they are all of A and C
          const bool all = pt.rows == m;
          const std::size_t cols_a = all ? 1 : k, cols_c = all ? 1 : n;
          apgas::finish([&] {
            for (std::size_t l = 0; l < cols_a; ++l) {
              apgas::async_copy(std::span(&in->a[pt.r0 + l * m], all ? in->a.size() : pt.rows), pt.a, l * pt.rows);
            }
            apgas::async_copy(std::span(in->bt), pt.bt);
          });
          const apgas::place host = pt.p.is_cuda() ? pt.p.parent() : pt.p;  // the kernel is launched from there
          apgas::at(host, [pt, n, k] { multiply_at(pt.p, pt.a, pt.bt, pt.c, pt.rows, n, k); });
          apgas::finish([&] {
            for (std::size_t j = 0; j < cols_c; ++j) {
              apgas::async_copy(pt.c, j * pt.rows, std::span(&c[pt.r0 + j * m], all ? c.size() : pt.rows));
            }
          });
        });
      }
    });
    time.stop();
    for (part& pt : parts) {
      for (auto* x : {&pt.a, &pt.bt, &pt.c}) apgas::free_remote_array(*x);
    }
    return sgemm::finish(prog, o, *in, c, time.seconds(), parboil::places_field(o.cpu));
  });
}
