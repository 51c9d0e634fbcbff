// apgas_parboil_sgemm: Parboil's sgemm (C = A * B^T, column-major) on the GPU places of every host, or on the
// CPU places of the hosts without GPUs. C is split by blocks of 128 rows over every computing place of the run
// (each host's GPUs, or the host itself); a place gets its rows of A and all of B^T, computes its rows of C and
// sends them back to place 0. Input, output and the check: sgemm.hpp.
#include "sgemm.hpp"

#include "parboil_apgas.hpp"

#include <vector>

namespace {

constexpr const char* prog = "apgas_parboil_sgemm";

struct row_tile {  // a thread's 16 partial sums: registers on a GPU
  float c[sgemm::tile_n];
};

// Parboil's mysgemmNT (src/cuda/sgemm_kernel.cu): a (16, 8) block computes 128 rows x 16 columns of C, a thread one
// row x 16 columns; per k step of 8 the block stages an 8 x 16 tile of B^T in shared memory between two barriers.
void multiply_at(apgas::place p, apgas::remote_array<float> a, apgas::remote_array<float> bt,
                 apgas::remote_array<float> c, int m, int n, int k) {
  using namespace sgemm;
  apgas::at(p, apgas::cuda_kernel(
                   apgas::grid{{m / tile_m, n / tile_n}, {tile_n, tile_k}}, apgas::shared_uninit<float, tile_k * tile_n>(),
                   [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float, tile_k * tile_n> b_s) {
                     const float* A = a.data();
                     const float* B = bt.data();
                     float* C = c.data();
                     const int row0 = b.block_idx().x * tile_m, col0 = b.block_idx().y * tile_n;
                     auto acc = b.per_thread<row_tile>(row_tile{});
                     for (int l0 = 0; l0 < k; l0 += tile_k) {
                       b.for_threads([&](apgas::thread_index t) {
                         b_s[t.y * tile_n + t.x] = B[col0 + t.x + (l0 + t.y) * n];
                       });
                       b.sync();
                       b.for_threads([&](apgas::thread_index t) {
                         row_tile r = acc[t];
                         for (int j = 0; j < tile_k; ++j) {
                           const float av = A[row0 + t.linear + (l0 + j) * m];
                           for (int q = 0; q < tile_n; ++q) r.c[q] += av * b_s[j * tile_n + q];
                         }
                         acc[t] = r;
                       });
                       b.sync();
                     }
                     b.for_threads([&](apgas::thread_index t) {
                       for (int q = 0; q < tile_n; ++q) C[row0 + t.linear + (col0 + q) * m] = acc[t].c[q];
                     });
                   }));
}

// Rows [r0, r0 + rows) of C at place p: A's rows and B^T there, the kernel, C's rows back into c.
void part(apgas::place p, const sgemm::problem& in, int r0, int rows, float* c) {
  const int m = in.m, n = in.n, k = in.k;
  std::vector<float> a_rows;  // the part's rows of A (the whole of A when it is one part: no copy)
  if (rows != m) {
    a_rows.resize(static_cast<std::size_t>(rows) * k);
    for (int l = 0; l < k; ++l) std::copy_n(&in.a[r0 + static_cast<std::size_t>(l) * m], rows, &a_rows[l * rows]);
  }
  auto a = apgas::make_remote_array(p, std::span<const float>(rows == m ? in.a : a_rows));
  auto bt = apgas::make_remote_array(p, std::span<const float>(in.bt));
  auto cp = apgas::make_remote_array<float>(p, static_cast<std::size_t>(rows) * n);
  apgas::at(p.is_cuda() ? p.parent() : p, [=] { multiply_at(p, a, bt, cp, rows, n, k); });
  if (rows == m) {
    apgas::finish([&] { apgas::async_copy(cp, 0, std::span<float>(c, static_cast<std::size_t>(m) * n)); });
  } else {
    std::vector<float> c_rows(static_cast<std::size_t>(rows) * n);
    apgas::finish([&] { apgas::async_copy(cp, 0, std::span<float>(c_rows)); });
    for (int j = 0; j < n; ++j) std::copy_n(&c_rows[j * rows], rows, c + r0 + static_cast<std::size_t>(j) * m);
  }
  apgas::free_remote_array(a);
  apgas::free_remote_array(bt);
  apgas::free_remote_array(cp);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = sgemm::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const auto in = sgemm::start(o);
    if (!in) return 0;
    std::vector<apgas::place> where;  // every computing place of the run, host by host
    for (const apgas::place h : apgas::places()) {
      const bool cpu = o.cpu;
      const auto mine = apgas::at(h, [cpu] { return parboil::compute_places(cpu); });
      where.insert(where.end(), mine.begin(), mine.end());
    }
    std::vector<float> c(static_cast<std::size_t>(in->m) * in->n);
    parboil::timer time;
    time.start();
    apgas::finish([&] {
      for (int i = 0; i < static_cast<int>(where.size()); ++i) {
        const auto rows = parboil::share(in->m, i, static_cast<int>(where.size()), sgemm::tile_m);
        const int r0 = static_cast<int>(rows.first), r1 = static_cast<int>(rows.second);
        if (r1 > r0) apgas::async([&, i, r0, r1] { part(where[i], *in, r0, r1 - r0, c.data()); });
      }
    });
    time.stop();
    return sgemm::finish(prog, o, *in, c, time.seconds(), parboil::places_field(o.cpu));
  });
}
