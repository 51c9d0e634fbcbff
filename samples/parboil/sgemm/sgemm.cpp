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
                         float av[tile_k];  // the thread's row of A in this k step
                         for (int j = 0; j < tile_k; ++j) av[j] = A[row0 + t.linear + (l0 + j) * m];
                         row_tile& r = acc[t];
                         for (int q = 0; q < tile_n; ++q) {
                           float s = r.c[q];
                           for (int j = 0; j < tile_k; ++j) s += av[j] * b_s[j * tile_n + q];
                           r.c[q] = s;
                         }
                       });
                       b.sync();
                     }
                     b.for_threads([&](apgas::thread_index t) {
                       for (int q = 0; q < tile_n; ++q) C[row0 + t.linear + (col0 + q) * m] = acc[t].c[q];
                     });
                   }));
}

// Rows [r0, r0 + rows) of C, computed at place p; the arrays there and the host-side staging are made before the
// timed part (a fresh page costs more than its copy), the staging only when the part is not all of C.
struct part {
  apgas::place p;
  int r0 = 0, rows = 0;
  apgas::remote_array<float> a, bt, c;
  std::vector<float> a_rows, c_rows;  // the part's rows of A and of C, column-major
};

part make_part(apgas::place p, const sgemm::problem& in, int r0, int rows) {
  part pt{p, r0, rows, apgas::make_remote_array<float>(p, static_cast<std::size_t>(rows) * in.k),
          apgas::make_remote_array<float>(p, in.bt.size()),
          apgas::make_remote_array<float>(p, static_cast<std::size_t>(rows) * in.n), {}, {}};
  if (rows != in.m) {
    pt.a_rows.resize(static_cast<std::size_t>(rows) * in.k);
    pt.c_rows.resize(static_cast<std::size_t>(rows) * in.n);
  }
  return pt;
}

// The timed part: A's rows and B^T to p, the kernel there, C's rows back into c (m x n).
void run_part(part& pt, const sgemm::problem& in, float* c) {
  const int m = in.m, n = in.n, k = in.k, rows = pt.rows;
  if (rows != m) {
    for (int l = 0; l < k; ++l) std::copy_n(&in.a[pt.r0 + std::size_t(l) * m], rows, &pt.a_rows[std::size_t(l) * rows]);
  }
  apgas::finish([&] {
    apgas::async_copy(std::span<const float>(rows == m ? in.a : pt.a_rows), pt.a);
    apgas::async_copy(std::span<const float>(in.bt), pt.bt);
  });
  const apgas::place p = pt.p;
  const auto a = pt.a, bt = pt.bt, cp = pt.c;
  apgas::at(p.is_cuda() ? p.parent() : p, [=] { multiply_at(p, a, bt, cp, rows, n, k); });
  float* out = rows == m ? c : pt.c_rows.data();
  apgas::finish([&] { apgas::async_copy(cp, 0, std::span<float>(out, std::size_t(rows) * n)); });
  if (rows != m) {
    for (int j = 0; j < n; ++j) std::copy_n(&pt.c_rows[std::size_t(j) * rows], rows, c + pt.r0 + std::size_t(j) * m);
  }
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
    std::vector<part> parts;
    for (int i = 0; i < static_cast<int>(where.size()); ++i) {
      const auto rows = parboil::share(in->m, i, static_cast<int>(where.size()), sgemm::tile_m);
      if (rows.second > rows.first) parts.push_back(make_part(where[i], *in, int(rows.first), int(rows.second - rows.first)));
    }
    std::vector<float> c(static_cast<std::size_t>(in->m) * in->n);
    parboil::timer time;
    time.start();
    apgas::finish([&] {
      for (part& pt : parts) apgas::async([&] { run_part(pt, *in, c.data()); });
    });
    time.stop();
    for (part& pt : parts) {
      apgas::free_remote_array(pt.a);
      apgas::free_remote_array(pt.bt);
      apgas::free_remote_array(pt.c);
    }
    return sgemm::finish(prog, o, *in, c, time.seconds(), parboil::places_field(o.cpu));
  });
}
