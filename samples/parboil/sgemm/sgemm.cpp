// apgas_parboil_sgemm: Parboil's sgemm (C = A * B^T, column-major) on the GPU places of every host, or on the CPU
// places of the hosts without GPUs. C is split by blocks of 128 rows over every computing place of the run (each
// host's GPUs, or the host itself): a place gets its rows of A and all of B^T, and sends its rows of C back to place 0.
// Input, output and the check: sgemm.hpp.
#include "sgemm.hpp"

#include "parboil_apgas.hpp"

#include <algorithm>
#include <array>
#include <vector>

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
    struct part {  // rows [r0, r0 + rows) of C at place p, and the arrays there: A's rows, B^T, C's rows
      apgas::place p;
      int r0, rows;
      apgas::remote_array<float> a, bt, c;
      std::vector<float> a_rows, c_rows;  // A's and C's rows here, when they are not all of A and C
      bool home = false;                  // all of C on this CPU place: A and B^T made there, C used where it is
    };
    const std::vector<apgas::place> where = parboil::all_compute_places(o.cpu);
    std::vector<part> parts;  // C in blocks of 128 rows over them; all memory made before the timed part
    for (int i = 0; i < int(where.size()); ++i) {
      const auto [r0, r1] = parboil::share(m, i, int(where.size()), tile_m);
      const std::size_t rows = r1 - r0, a_rows = rows == std::size_t(m) ? 0 : rows * k;
      const apgas::place p = where[i];
      if (rows == std::size_t(m) && p == apgas::here()) {  // as the OpenMP program, which holds its input where it
        parts.push_back({p, 0, m, apgas::make_remote_array(p, std::span<const float>(in->a)),  // computes
                         apgas::make_remote_array(p, std::span<const float>(in->bt)),
                         apgas::make_remote_array<float>(p, rows * n), {}, {}, true});
        continue;
      }
      parts.push_back({p, int(r0), int(rows), apgas::make_remote_array<float>(p, rows * k),
                       apgas::make_remote_array<float>(p, in->bt.size()), apgas::make_remote_array<float>(p, rows * n),
                       std::vector<float>(a_rows), std::vector<float>(a_rows == 0 ? 0 : rows * n)});
    }
    const bool home = parts.size() == 1 && parts[0].home;
    std::vector<float> c(home ? 0 : std::size_t(m) * n);  // (at home C is used where the kernel wrote it)
    parboil::timer time;
    time.start();
    apgas::finish([&] {
      for (part& pt : parts) {
        if (pt.rows == 0) continue;
        apgas::async([&] {
          const bool all = pt.rows == m;
          for (int l = 0; l < (all ? 0 : k); ++l) {
            std::copy_n(&in->a[pt.r0 + std::size_t(l) * m], pt.rows, &pt.a_rows[std::size_t(l) * pt.rows]);
          }
          if (!pt.home) {
            apgas::finish([&] {
              apgas::async_copy(std::span(all ? in->a : pt.a_rows), pt.a);
              apgas::async_copy(std::span(in->bt), pt.bt);
            });
          }
          const apgas::place host = pt.p.is_cuda() ? pt.p.parent() : pt.p;  // the kernel is launched from there
          apgas::at(host, [p = pt.p, a = pt.a, bt = pt.bt, cr = pt.c, rows = pt.rows, n, k] {
            multiply_at(p, a, bt, cr, rows, n, k);
          });
          if (!pt.home) apgas::finish([&] { apgas::async_copy(pt.c, 0, std::span(all ? c : pt.c_rows)); });
          for (int j = 0; j < (all ? 0 : n); ++j) {
            std::copy_n(&pt.c_rows[std::size_t(j) * pt.rows], pt.rows, &c[pt.r0 + std::size_t(j) * m]);
          }
        });
      }
    });
    time.stop();
    const std::span<const float> result = home ? std::span<const float>(parts[0].c.data(), std::size_t(m) * n) : c;
    const int code = sgemm::finish(prog, o, *in, result, time.seconds(), parboil::places_field(o.cpu));
    for (part& pt : parts) {
      for (auto* x : {&pt.a, &pt.bt, &pt.c}) apgas::free_remote_array(*x);
    }
    return code;
  });
}
