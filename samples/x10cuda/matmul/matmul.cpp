// apgas_x10cuda_matmul: the X10 paper's CUDAMatMul (Volkov's sgemmNN) as an apgas kernel closure (matmul.hpp has the
// problem, the input and the check). The rows of C are cut in blocks of 64 over the compute places of every host; a
// part holds its rows of A and C and all of B (place 0's own matrices where the part is place 0's CPU place), runs
// one untimed launch, then ITERATIONS timed ones in an in-order queue, and its rows of C come back to place 0.
#include "matmul.hpp"
#include "x10cuda_apgas.hpp"

#include <array>

#if defined(__CUDA_ARCH__)  // nvcc's device pass; host passes warn about one form or the other, and vectorise anyway
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

namespace {

using apgas::remote_array;

// A part's rows of C at its compute place: A (rows x n, leading dimension ld), B (n x n), C (rows x n, ld).
struct slice {
  x10cuda::part p;
  remote_array<float> a, b, c;
  int ld;
  bool home;  // place 0's CPU place: place 0's own matrices (then p.lo == 0)
};

// sgemmNN of the X10 sample: C = alpha A B + beta C (m x n, column-major), 64 threads per 64 x 16 tile of C; each
// thread keeps a row of the tile (16 floats) in registers, the block stages 16 x 16 of B in shared memory (rows
// padded to 17 floats) and both barriers frame each 16-wide step along k.
void sgemm_nn(apgas::in_order_queue& q, slice s, int n) {
  const int m = static_cast<int>(s.p.size()), k = n, lda = s.ld, ldb = n, ldc = s.ld;
  q.async(apgas::cuda_kernel(apgas::grid{m / 64 * (n / 16), {16, 4}}, apgas::shared_uninit<float, 16 * 17>(),
                             [=] APGAS_KERNEL(apgas::thread_block blk, apgas::shared_span<float, 16 * 17> bs) {
    const int ibx = static_cast<int>(blk.block() % (m / 64)) * 64, iby = static_cast<int>(blk.block() / (m / 64)) * 16;
    const float* A = s.a.data() + ibx;  // row ibx + thread of A
    const float* B = s.b.data() + static_cast<long>(iby) * ldb;
    float* C = s.c.data() + ibx + static_cast<long>(iby) * ldc;
    auto c = blk.per_thread<std::array<float, 16>>({});  // the thread's row of the tile
    for (int k0 = 0; k0 < k; k0 += 16) {
      blk.for_threads([&](apgas::thread_index t) {  // bs(i, j) = B(k0 + i, iby + j)
        UNROLL for (int i = 0; i < 4; ++i) bs[t.x * 17 + t.y + 4 * i] = B[k0 + t.x + (t.y + 4 * i) * ldb];
      });
      blk.sync();
      blk.for_threads([&](apgas::thread_index t) {
        std::array<float, 16> r = c[t];
        UNROLL for (int i = 0; i < 16; ++i) {
          const float a = A[t.linear + static_cast<long>(k0 + i) * lda];
          UNROLL for (int j = 0; j < 16; ++j) r[j] += a * bs[i * 17 + j];
        }
        c[t] = r;
      });
      blk.sync();
    }
    blk.for_threads([&](apgas::thread_index t) {
      UNROLL for (int j = 0; j < 16; ++j) {
        float& out = C[t.linear + static_cast<long>(j) * ldc];
        out = matmul::alpha * c[t][j] + matmul::beta * out;
      }
    });
  }));
}

// Rows [r0, r0 + rows) of the n columns of src (leading dimension sld) into rows [d0, d0 + rows) of dst (dld): one
// copy where both hold whole columns, else one per column.
void copy_rows(remote_array<float> src, long sld, long r0, remote_array<float> dst, long dld, long d0, long rows,
               long n) {
  if (rows == sld && rows == dld) return apgas::async_copy(src, r0, dst, d0, rows * n);
  for (long j = 0; j < n; ++j) apgas::async_copy(src, r0 + j * sld, dst, d0 + j * dld, rows);
}

// `launches` launches of the kernel at the slice's compute place, then (with `back`) its rows of C into place 0's C.
void run(slice s, int n, int launches, remote_array<float> c0, bool back) {
  apgas::finish([&] {
    auto q = apgas::in_order(s.p.at);
    for (int i = 0; i < launches; ++i) sgemm_nn(q, s, n);
  });
  if (back && !s.home) apgas::finish([&] { copy_rows(s.c, s.ld, 0, c0, n, s.p.lo, s.p.size(), n); });
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_matmul";
  return parboil::main(argc, argv, prog, matmul::usage(prog).c_str(), {"default", "small", "h100"},
                       [](const parboil::options& o) {
    const auto p = matmul::prepare(o);
    if (!p) return 0;
    const int n = p->n;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    const apgas::place here = apgas::here();
    const auto a0 = apgas::make_remote_array(here, std::span<const float>(p->a));
    const auto b0 = apgas::make_remote_array(here, std::span<const float>(p->b));
    const auto c0 = apgas::make_remote_array(here, std::span<const float>(p->c));
    std::vector<slice> slices;
    for (const x10cuda::part& part : x10cuda::parts(n, o.cpu, 64)) {
      slice s{part, a0, b0, c0, n, part.at == here};
      if (!s.home) {  // its rows of A and C, and B
        s.ld = static_cast<int>(part.size());
        s.a = apgas::make_remote_array<float>(part.at, static_cast<std::size_t>(s.ld) * n);
        s.b = apgas::make_remote_array<float>(part.at, nn);
        s.c = apgas::make_remote_array<float>(part.at, static_cast<std::size_t>(s.ld) * n);
        apgas::finish([&] {
          apgas::async_copy(b0, 0, s.b, 0, nn);
          copy_rows(a0, n, part.lo, s.a, s.ld, 0, s.ld, n);
          copy_rows(c0, n, part.lo, s.c, s.ld, 0, s.ld, n);
        });
      }
      slices.push_back(s);
    }
    const auto all = [&](int launches, bool back) {
      apgas::finish([&] {
        for (const slice& s : slices) apgas::async_at(s.p.at.parent(), [=] { run(s, n, launches, c0, back); });
      });
    };
    all(1, false);  // the untimed first launch
    parboil::timer timer;
    timer.start();
    all(p->iterations, true);
    timer.stop();
    const int rc = matmul::finish(o, *p, {c0.data(), nn}, timer.seconds(), parboil::places_field(o.cpu));
    for (slice& s : slices) {
      if (!s.home) apgas::free_remote_array(s.a), apgas::free_remote_array(s.b), apgas::free_remote_array(s.c);
    }
    for (auto a : {a0, b0, c0}) apgas::free_remote_array(a);
    return rc;
  });
}
