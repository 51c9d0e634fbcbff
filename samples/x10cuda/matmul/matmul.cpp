// apgas_x10cuda_matmul: the X10 paper's CUDAMatMul (Volkov's sgemmNN) as an apgas kernel closure (matmul.hpp has the
// problem, the input and the check). The rows of C are cut in blocks of 64 over the compute places of every host; a
// part holds its rows of A and C and all of B (place 0's own matrices where the part is place 0's CPU place), runs
// one untimed launch, then ITERATIONS timed ones in an in-order queue, and its rows of C come back to place 0.
#include "matmul.hpp"
#include "x10cuda_apgas.hpp"

#include <array>

namespace {

using apgas::remote_array;

// A part's rows of C at its compute place: its rows of A and C (leading dimension ld) and all of B.
struct slice {
  dist::part p;
  remote_array<float> a, b, c;
  int ld;
};

// sgemmNN of the X10 sample: C = alpha A B + beta C (m x n, column-major), 64 threads per 64 x 16 tile of C; each
// thread keeps a row of the tile (16 floats) in registers, the block stages 16 x 16 of B in shared memory (rows
// padded to 17 floats) and both barriers frame each 16-wide step along k. A thread reads its 16 values of A in two
// halves of 8 columns: on a CPU place a block's threads run one after the other, and the 16 cache lines of A they all
// read lie n floats apart, in one L1 set (of 8 ways) when n is a multiple of 1024: 8 stay cached, 16 did not (1.4x
// OpenMP at the default size, 0.9x now).
void sgemm_nn(apgas::in_order_queue& q, slice s, int n) {
  const int m = static_cast<int>(s.p.size()), k = n, lda = s.ld, ldb = n, ldc = s.ld;
  q.async(apgas::cuda_kernel(apgas::grid{m / 64 * (n / 16), {16, 4}}, apgas::shared_uninit<float, 16 * 17>(),
                             [=] APGAS_KERNEL(apgas::thread_block blk, apgas::shared_span<float, 16 * 17> bs) {
    const int block = static_cast<int>(blk.block()), ibx = block % (m / 64) * 64, iby = block / (m / 64) * 16;
    const float* A = s.a.data() + ibx;  // row ibx + thread of A
    const float* B = s.b.data() + static_cast<long>(iby) * ldb;
    float* C = s.c.data() + ibx + static_cast<long>(iby) * ldc;
    auto c = blk.per_thread<std::array<float, 16>>({});  // the thread's row of the tile
    for (int k0 = 0; k0 < k; k0 += 16) {
      blk.for_threads([&](apgas::thread_index t) {  // bs(i, j) = B(k0 + i, iby + j)
        APGAS_UNROLL() for (int i = 0; i < 4; ++i) bs[t.x * 17 + t.y + 4 * i] = B[k0 + t.x + (t.y + 4 * i) * ldb];
      });
      blk.sync();
      APGAS_UNROLL() for (int i0 = 0; i0 < 16; i0 += 8) {  // 8 columns of A at a time
        blk.for_threads([&](apgas::thread_index t) {
          std::array<float, 16> r = c[t];
          APGAS_UNROLL() for (int i = i0; i < i0 + 8; ++i) {
            const float a = A[t.linear + static_cast<long>(k0 + i) * lda];
            APGAS_UNROLL() for (int j = 0; j < 16; ++j) r[j] += a * bs[i * 17 + j];
          }
          c[t] = r;
        });
      }
      blk.sync();
    }
    blk.for_threads([&](apgas::thread_index t) {
      float* out = C + t.linear;
      APGAS_UNROLL() for (int j = 0; j < 16; ++j) out[j * ldc] = matmul::alpha * c[t][j] + matmul::beta * out[j * ldc];
    });
  }));
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_matmul";
  return parboil::main(argc, argv, prog, matmul::usage(prog).c_str(), {"default", "small", "medium", "h100"},
                       [](const parboil::options& o) {
    const auto p = matmul::prepare(o);
    if (!p) return 0;
    const int n = p->n;
    const auto at0 = [](std::span<const float> v) { return apgas::make_remote_array(apgas::here(), v); };
    const auto a0 = at0(p->a), b0 = at0(p->b), c0 = at0(p->c);
    std::vector<slice> slices;  // blocks of 64 rows of C over the compute places of every host
    for (const dist::part& q : dist::parts(n, o.cpu, 64)) {
      const auto a = dist::borrow_rows(q.at, a0, q.lo, q.size(), n, n);
      slices.push_back({q, a, dist::borrow(q.at, b0, 0, 1L * n * n), dist::borrow_rows(q.at, c0, q.lo, q.size(), n, n),
                        static_cast<int>(dist::ld_of(a, a0, q.size(), n))});
    }
    const auto launch = [&](int launches) {  // in line on an in-order queue at each slice's place
      dist::for_parts(slices, [=](const slice& s) {
        auto q = apgas::in_order(s.p.at);
        for (int i = 0; i < launches; ++i) sgemm_nn(q, s, n);
      });
    };
    launch(1);  // the untimed first launch
    parboil::timer timer;
    timer.start();
    launch(p->iterations);
    for (const slice& s : slices) {  // C's rows back to place 0
      if (!dist::same(s.c, c0)) dist::copy_rows(c0, s.c, s.p.lo, s.p.size(), n, n, false);
    }
    timer.stop();
    for (const slice& s : slices) {  // the borrowed arrays freed (nothing to free at place 0's CPU place)
      dist::give_back_rows(s.a, a0, 0, 0, n, n, false), dist::give_back(s.b, b0, 0, 0, 0, false);
      dist::give_back_rows(s.c, c0, 0, 0, n, n, false);
    }
    return matmul::finish(o, *p, {c0.data(), p->c.size()}, timer.seconds(), parboil::places_field(o.cpu));
  });
}
