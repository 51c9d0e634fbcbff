// The checking mode of kernels on CPU places (APGAS_KERNEL_CHECK / config::kernel_check, with shared-array accesses
// instrumented: APGAS_KERNEL_CHECKS=1 in this file): each planted bug is reported with the kernel, block, threads
// and index; correct kernels, Parboil-shaped ones among them, stay silent; launches beyond a GPU's limits are
// refused. And what happens without the checking mode: documented outcomes, never a hang.
#define APGAS_KERNEL_CHECKS 1
#include "support/run.hpp"

#include <algorithm>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

template <class F>
void checking(F&& body, bool on = true) {
  apgas::config cfg;
  cfg.nthreads = 2;
  cfg.kernel_check = on;
  bool finished = false;
  ASSERT_EQ(apgas::run(cfg, [&] {
              body();
              finished = true;
            }),
            0);
  ASSERT_TRUE(finished);
}

// The messages of the kernel_check_errors an at() of kernel k reported (one per failed block), sorted: blocks run
// on any worker in any order, so the order they fail in is not the order of their numbers.
template <class K>
std::vector<std::string> reports(const K& k) {
  std::vector<std::string> out;
  try {
    apgas::at(apgas::here(), k);
  } catch (const apgas::multiple_exceptions& m) {
    for (const auto& e : m.of_type<apgas::kernel_check_error>()) out.push_back(e->what());
    EXPECT_EQ(m.of_type<apgas::kernel_check_error>().size(), m.size()) << "other exceptions than kernel_check_error";
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_mentions(const std::string& what, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' missing in: " << what;
}

TEST(KernelCheck, DivergentBarrierIsReported) {
  checking([] {
    const auto r = reports(apgas::cuda_kernel(apgas::grid{2, 8}, [](apgas::clocked_thread t) {
      if (t.thread() == 5) return;  // never reaches the barrier the others reach
      t.advance();
    }));
    ASSERT_EQ(r.size(), 2u);  // both blocks
    expect_mentions(r[0], {"divergent barrier", "thread 5 reached 0 block barrier(s)", "reached 1",
                           "lambda(apgas::clocked_thread)"});  // the kernel by its demangled name
    const auto r2 = reports(apgas::cuda_kernel(apgas::grid{1, 4}, [](apgas::clocked_thread t) {
      if (t.thread() == 0) t.advance();  // an extra barrier only thread 0 reaches
      t.advance();
    }));
    ASSERT_EQ(r2.size(), 1u);
    expect_mentions(r2[0], {"divergent barrier", "block 0", "reached 2"});
  });
}

TEST(KernelCheck, SharedRaceIsReported) {
  checking([] {
    // Clocked: each thread writes its element and reads its neighbour's with no barrier between.
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 16}, apgas::shared<int>(16),
                                              [](apgas::clocked_thread t, apgas::shared_span<int> sh) {
      const auto me = static_cast<std::size_t>(t.thread());
      sh[me] = t.thread() + 1;
      const int n = sh[(me + 1) % 16];
      (void)n;
    }));
    ASSERT_EQ(r.size(), 1u);
    expect_mentions(r[0], {"data race on shared array 0", "block 0", "between two barriers"});
    // Block level: the same mistake inside one for_threads.
    const auto r2 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<float>(32),
                                               [](apgas::thread_block b, apgas::shared_span<float> sh) {
      b.for_threads([&](apgas::thread_index t) {
        sh[static_cast<std::size_t>(t.linear)] = 1.0f;
        if (t.linear > 0) sh[static_cast<std::size_t>(t.linear - 1)] += 1.0f;
      });
    }));
    ASSERT_EQ(r2.size(), 1u);
    expect_mentions(r2[0], {"data race on shared array 0", "threads"});
    // A block-stride loop (for_range) whose iteration i reads i - 1: another thread's, with no barrier between (a
    // thread's own earlier iteration, i - 32, would be no race).
    const auto r2b = reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<int>(100),
                                                [](apgas::thread_block b, apgas::shared_span<int> sh) {
      b.for_range(100, [&](int i) {
        sh[static_cast<std::size_t>(i)] = i > 0 ? sh[static_cast<std::size_t>(i - 1)] + 1 : 1;
      });
    }));
    ASSERT_EQ(r2b.size(), 1u);
    expect_mentions(r2b[0], {"data race on shared array 0", "threads"});
    // With the barrier in between: silent.
    const auto r3 = reports(apgas::cuda_kernel(apgas::grid{1, 16}, apgas::shared<int>(16),
                                               [](apgas::clocked_thread t, apgas::shared_span<int> sh) {
      const auto me = static_cast<std::size_t>(t.thread());
      sh[me] = t.thread() + 1;
      t.advance();
      const int n = sh[(me + 1) % 16];
      (void)n;
    }));
    EXPECT_TRUE(r3.empty());
  });
}

TEST(KernelCheck, SharedIndexOutOfRangeIsReportedAndNothingIsWritten) {
  checking([] {
    std::vector<int> after(1, 0);
    int* a = after.data();
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 8}, apgas::shared<int>(8, 5),
                                              [=](apgas::clocked_thread t, apgas::shared_span<int> sh) {
      sh[static_cast<std::size_t>(t.thread()) + 1] = 9;  // thread 7 writes element 8 of 8
      t.advance();
      if (t.thread() == 0) *a = sh[0];
    }));
    ASSERT_EQ(r.size(), 1u);
    expect_mentions(r[0], {"index 8 outside shared array 0 of 8 elements", "thread 7"});
    EXPECT_EQ(after[0], 9);  // the out-of-range write went to element 0, inside the array (thread 7 wrote there)
  });
}

// stage in the checking mode copies as a GPU does: a window larger than its shared array, or than the part of one it
// is given (subspan), is reported; the tile reads the copy.
TEST(KernelCheck, AStagedWindowLargerThanItsSharedArrayIsReported) {
  checking([] {
    std::vector<float> v(64);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    const float* src = v.data();
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 8}, apgas::shared_uninit<float>(12),
                                              [=](apgas::thread_block b, apgas::shared_span<float> sh) {
      const apgas::tile<float> t = b.stage(sh, src, 8, {0, 0}, {4, 4});  // 16 elements: a GPU writes 4 past sh
      b.sync();
      b.for_threads([&](apgas::thread_index i) { (void)t(i.x % 4, 0); });
    }));
    ASSERT_EQ(r.size(), 1u);
    expect_mentions(r[0], {"index 12 outside shared array 0 of 12 elements", "thread 4"});
    std::vector<float> got(4, -1.0f);
    float* out = got.data();
    const auto r2 = reports(apgas::cuda_kernel(apgas::grid{1, 4}, apgas::shared_uninit<float>(24),
                                               [=](apgas::thread_block b, apgas::shared_span<float> sh) {
      const apgas::tile<float> t = b.stage(sh.subspan(12, 12), src, 8, {1, 1}, {3, 3});  // 4 elements: fits
      const apgas::tile<float> u = b.stage(sh.subspan(0, 12), src, 8, {0, 0}, {4, 4});   // 16: 4 into the other
      b.sync();
      b.for_threads([&](apgas::thread_index i) { out[i.linear] = t(1 + i.x % 2, 1 + i.x / 2) + 0.0f * u(0, 0); });
    }));
    ASSERT_EQ(r2.size(), 1u);
    expect_mentions(r2[0], {"index 12 outside elements [0, 12) of shared array 0 (24 elements)"});
  });
}

TEST(KernelCheck, LaunchesBeyondAGpusLimitsAreRefused) {
  checking([] {
    auto body = [](apgas::thread) {};
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, {1, 1, 128}}, body));
      ADD_FAILURE() << "a block of (1,1,128) threads was not refused";
    } catch (const apgas::kernel_launch_error& e) {
      expect_mentions(e.what(), {"(1,1,128)", "(1024,1024,64)", "checking mode"});
    }
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<char>(300000),
                                                  [](apgas::thread, apgas::shared_span<char>) {}));
      ADD_FAILURE() << "300000 B of shared memory were not refused";
    } catch (const apgas::kernel_launch_error& e) {
      expect_mentions(e.what(), {"300000 B", "232448 B"});
    }
    // Shared arrays as a GPU lays them out, each at a 16-byte boundary: 1 + 15 (padding) + 232432 bytes fit exactly,
    // one more does not (232434 bytes without the padding: the checking mode passed what a GPU refuses).
    auto two = [](std::size_t second) {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<char>(1), apgas::shared<char>(second),
                                                  [](apgas::thread, apgas::shared_span<char>, apgas::shared_span<char>) {}));
    };
    EXPECT_NO_THROW(two(232432));
    try {
      two(232433);
      ADD_FAILURE() << "1 + 15 + 232433 B of shared memory were not refused";
    } catch (const apgas::kernel_launch_error& e) {
      expect_mentions(e.what(), {"232449 B", "232448 B"});
    }
    // Constant memory as a GPU lays it out, each constant_from at a 16-byte boundary: 32767 + 1 + 32768 bytes fit
    // in 64 KiB, 32769 + 15 + 32768 do not.
    std::vector<char> a(32769, 1), b(32768, 2);
    std::vector<int> got(2, 0);
    int* g = got.data();
    const auto both = [=](apgas::thread, std::span<const char> x, std::span<const char> y) {
      g[0] = x.back();
      g[1] = y.back();
    };
    apgas::at(apgas::here(),
              apgas::cuda_kernel(apgas::grid{1, 1}, apgas::constant_from(std::span<const char>(a).first(32767)),
                                 apgas::constant_from(std::span<const char>(b)), both));
    EXPECT_EQ(got, (std::vector<int>{1, 2}));
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, apgas::constant_from(std::span<const char>(a)),
                                                  apgas::constant_from(std::span<const char>(b)), both));
      ADD_FAILURE() << "65552 B of constant memory were not refused";
    } catch (const apgas::kernel_launch_error& e) {
      expect_mentions(e.what(), {"constant memory of 65552 B", "65536 B", "checking mode"});
    }
    try {  // with auto_grid too
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::auto_grid(), apgas::shared<char>(300000),
                                                  [](apgas::thread, apgas::shared_span<char>) {}));
      ADD_FAILURE() << "300000 B of shared memory were not refused with auto_grid";
    } catch (const apgas::kernel_launch_error& e) {
      expect_mentions(e.what(), {"300000 B", "232448 B"});
    }
  });
  // Without the checking mode a CPU place runs them (its own limits are looser).
  checking([] {
    int runs = 0;
    int* r = &runs;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, {1, 1, 128}}, [=](apgas::thread t) {
      if (t.thread() == 0) *r += 1;
    }));
    EXPECT_EQ(runs, 1);
    std::vector<char> a(40000, 1);
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, apgas::constant_from(std::span<const char>(a)),
                                                apgas::constant_from(std::span<const char>(a)),
                                                [=](apgas::thread, std::span<const char> x, std::span<const char> y) {
      *r += x[0] + y[0];
    }));
    EXPECT_EQ(runs, 3);
  }, false);
}

// Parboil-shaped kernels (a stencil's z-sweep over a shared plane, a tiled matrix product, shared-memory histograms
// with atomics, a tree reduction): correct, so the checking mode must not report anything.
TEST(KernelCheck, CorrectParboilShapedKernelsAreSilent) {
  checking([] {
    constexpr int n = 32;
    std::vector<float> a(n * n, 1.0f), b(n * n, 2.0f), c(n * n, 0.0f);
    const float* pa = a.data();
    const float* pb = b.data();
    float* pc = c.data();
    EXPECT_TRUE(reports(apgas::cuda_kernel(apgas::grid{{n / 8, n / 8}, {8, 8}}, apgas::shared<float, 64>(),
                                           apgas::shared<float, 64>(),
                                           [=](apgas::clocked_thread t, apgas::shared_span<float, 64> as,
                                               apgas::shared_span<float, 64> bs) {
      const int tx = t.thread_idx().x, ty = t.thread_idx().y;
      const int row = t.block_idx().y * 8 + ty, col = t.block_idx().x * 8 + tx;
      float acc = 0;
      for (int k0 = 0; k0 < n; k0 += 8) {
        as[static_cast<std::size_t>(ty * 8 + tx)] = pa[row * n + k0 + tx];
        bs[static_cast<std::size_t>(ty * 8 + tx)] = pb[(k0 + ty) * n + col];
        t.advance();
        for (int k = 0; k < 8; ++k) acc += as[static_cast<std::size_t>(ty * 8 + k)] * bs[static_cast<std::size_t>(k * 8 + tx)];
        t.advance();
      }
      pc[row * n + col] = acc;
    })).empty());
    for (float v : c) EXPECT_EQ(v, 2.0f * n);

    // z-sweep with a shared plane and its halo (the stencil of Parboil), 8x4 threads per block
    constexpr int nx = 16, ny = 8, nz = 6;
    std::vector<float> in(nx * ny * nz), out(nx * ny * nz, 0.0f);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 13);
    const float* pin = in.data();
    float* pout = out.data();
    EXPECT_TRUE(reports(apgas::cuda_kernel(apgas::grid{{nx / 8, ny / 4}, {8, 4}}, apgas::shared_uninit<float, 60>(),
                                           [=](apgas::clocked_thread t, apgas::shared_span<float, 60> sh) {
      const int tx = t.thread_idx().x, ty = t.thread_idx().y;
      const int i = t.block_idx().x * 8 + tx, j = t.block_idx().y * 4 + ty;
      auto at = [&](int x, int y, int z) { return pin[(z * ny + y) * nx + x]; };
      for (int k = 1; k < nz - 1; ++k) {
        sh[static_cast<std::size_t>((ty + 1) * 10 + tx + 1)] = at(i, j, k);
        if (tx == 0 && i > 0) sh[static_cast<std::size_t>((ty + 1) * 10)] = at(i - 1, j, k);
        if (tx == 7 && i + 1 < nx) sh[static_cast<std::size_t>((ty + 1) * 10 + 9)] = at(i + 1, j, k);
        if (ty == 0 && j > 0) sh[static_cast<std::size_t>(tx + 1)] = at(i, j - 1, k);
        if (ty == 3 && j + 1 < ny) sh[static_cast<std::size_t>(50 + tx + 1)] = at(i, j + 1, k);
        t.advance();
        if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
          pout[(k * ny + j) * nx + i] = sh[static_cast<std::size_t>((ty + 1) * 10 + tx)] +
                                        sh[static_cast<std::size_t>((ty + 1) * 10 + tx + 2)] +
                                        sh[static_cast<std::size_t>(ty * 10 + tx + 1)] +
                                        sh[static_cast<std::size_t>((ty + 2) * 10 + tx + 1)] + at(i, j, k - 1) +
                                        at(i, j, k + 1);
        }
        t.advance();
      }
    })).empty());
    for (int k = 1; k < nz - 1; ++k) {
      for (int j = 1; j < ny - 1; ++j) {
        for (int i = 1; i < nx - 1; ++i) {
          auto x = [&](int p, int q, int r) { return in[(r * ny + q) * nx + p]; };
          EXPECT_EQ(out[(k * ny + j) * nx + i],
                    x(i - 1, j, k) + x(i + 1, j, k) + x(i, j - 1, k) + x(i, j + 1, k) + x(i, j, k - 1) + x(i, j, k + 1));
        }
      }
    }

    // per-block histograms in shared memory with atomics (tpacf), then a tree reduction (rpes)
    std::vector<unsigned> hist(4 * 20, 0);
    unsigned* ph = hist.data();
    EXPECT_TRUE(reports(apgas::cuda_kernel(apgas::grid{4, 64}, apgas::shared<unsigned, 20>(), apgas::shared<unsigned, 64>(),
                                           [=](apgas::clocked_thread t, apgas::shared_span<unsigned, 20> h,
                                               apgas::shared_span<unsigned, 64> red) {
      for (int i = t.thread(); i < 200; i += t.threads()) apgas::atomic_add(h[static_cast<std::size_t>(i % 20)], 1u);
      red[static_cast<std::size_t>(t.thread())] = 1;
      t.advance();
      for (int s = 32; s > 0; s /= 2) {
        if (t.thread() < s) red[static_cast<std::size_t>(t.thread())] += red[static_cast<std::size_t>(t.thread() + s)];
        t.advance();
      }
      if (t.thread() < 20) ph[t.block() * 20 + t.thread()] = h[static_cast<std::size_t>(t.thread())] + red[0] - 64;
    })).empty());
    for (unsigned v : hist) EXPECT_EQ(v, 10u);
  });
}

// A warp operation that not every thread of its warp reaches cannot run as written on a CPU place: the block is
// cancelled (its threads unwind) and fails with kernel_check_error, checking mode or not. No hang.
TEST(KernelCheck, DivergentWarpOperationFailsTheBlock) {
  for (bool on : {false, true}) {
    checking([] {
      const auto r = reports(apgas::cuda_kernel(apgas::grid{2, 64}, [](apgas::clocked_thread t) {
        int v = t.thread();
        if (t.lane() != 3) v = t.shfl(v, 0);
        t.advance();
        (void)v;
      }));
      ASSERT_EQ(r.size(), 2u);
      expect_mentions(r[0], {"divergent barrier", "warp operation"});
      // The place goes on working.
      int x = 0;
      int* px = &x;
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::clocked_thread t) {
        const int s = t.reduce(1, apgas::plus{});
        if (t.thread() == 0) *px = s;
      }));
      EXPECT_EQ(x, 32);
    }, on);
  }
}

// Without the checking mode a divergent barrier does what the documentation says: a thread that has ended no longer
// takes part; the others go on, and the kernel ends.
TEST(KernelCheck, WithoutCheckingAnEndedThreadLeavesTheBarrier) {
  checking([] {
    std::vector<int> seen(8, -1);
    int* s = seen.data();
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 8}, apgas::shared<int>(8),
                                                [=](apgas::clocked_thread t, apgas::shared_span<int> sh) {
      const auto me = static_cast<std::size_t>(t.thread());
      sh[me] = t.thread() * 2;
      if (t.thread() == 3) return;
      t.advance();
      t.advance();
      s[me] = sh[(me + 1) % 8];
    }));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i == 3 ? -1 : ((i + 1) % 8) * 2);
  }, false);
}

// Without checking, a clocked scan with a thread that has ended: the others scan over the threads still there, in
// thread order (the ended one's slot is neither read nor counted; it used to be read, and crash).
TEST(KernelCheck, WithoutCheckingAScanSkipsAnEndedThread) {
  checking([] {
    std::vector<int> incl(4, -1), excl(4, -1);
    int* pi = incl.data();
    int* pe = excl.data();
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 4}, [=](apgas::clocked_thread t) {
      const int me = t.thread();
      if (me == 0 || me == 2) return;
      pi[me] = t.inclusive_scan(10 * me, apgas::plus{});
      pe[me] = t.exclusive_scan(10 * me, me, apgas::plus{});  // each thread's own init, as on a GPU
    }));
    EXPECT_EQ(incl, (std::vector<int>{-1, 10, -1, 40}));
    EXPECT_EQ(excl, (std::vector<int>{-1, 1, -1, 13}));
  }, false);
}

// Inside the function given to for_threads (or to single, or to a collective), a GPU runs what that function calls
// from each thread on its own: a nested for_threads is one call, a collective or single a barrier. A CPU place would
// run them for the whole block once per call, and compute something else: the checking mode reports them, once per
// block. Whose accesses follow is restored after each loop, also when an exception leaves it: a nested loop reset it
// to the block's own (a race after it went unreported), and one left by an exception left it to a thread (a sync()
// after it was reported as inside for_threads).
TEST(KernelCheck, ConstructsInsideForThreadsAreReported) {
  checking([] {
    const auto r = reports(apgas::cuda_kernel(apgas::grid{2, 32}, apgas::shared<int>(32),
                                              [](apgas::thread_block b, apgas::shared_span<int> s) {
      b.for_threads([&](apgas::thread_index) {
        b.for_threads([&](apgas::thread_index u) { s[static_cast<std::size_t>(u.linear)] += 1; });
      });
    }));
    ASSERT_EQ(r.size(), 2u);  // both blocks
    for (const auto& w : r) {
      expect_mentions(w, {"found 1 problem(s)", "for_threads inside for_threads in kernel", "(thread 0)",
                          "one call of its function, with that thread's index"});
    }
    const auto inside_for_threads = [](const char* what, auto call) {
      const auto r2 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::thread_block b) {
        b.for_threads([&](apgas::thread_index) { call(b); });
      }));
      ASSERT_EQ(r2.size(), 1u) << what;
      expect_mentions(r2[0], {"found 1 problem(s)", std::string(what) + " inside for_threads", "__syncthreads()"});
    };
    inside_for_threads("reduce", [](apgas::thread_block b) {
      (void)b.reduce([](apgas::thread_index) { return 1; }, apgas::plus{});
    });
    inside_for_threads("all", [](apgas::thread_block b) { (void)b.all([](apgas::thread_index) { return true; }); });
    inside_for_threads("exclusive_scan", [](apgas::thread_block b) {
      (void)b.exclusive_scan([](apgas::thread_index) { return 1; }, 0, apgas::plus{});
    });
    inside_for_threads("single", [](apgas::thread_block b) { b.single([] {}); });
    const auto sync_inside = reports(apgas::cuda_kernel(apgas::grid{1, 8}, [](apgas::thread_block b) {
      b.for_threads([&](apgas::thread_index) { b.sync(); });
    }));
    ASSERT_EQ(sync_inside.size(), 1u);
    expect_mentions(sync_inside[0], {"found 1 problem(s)", "sync() inside for_threads"});  // once, not once a thread
    const auto r3 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [](apgas::thread_block b) {
      b.single([&] { b.for_threads_in({0, 0, 0}, {4, 1, 1}, [](apgas::thread_index) {}); });
    }));
    ASSERT_EQ(r3.size(), 1u);
    expect_mentions(r3[0], {"for_threads_in inside single", "only thread 0 runs the function given to single"});
    const auto r3b = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [](apgas::thread_block b) {
      b.for_threads([&](apgas::thread_index) { b.for_range(4, [](int) {}); });
    }));
    ASSERT_EQ(r3b.size(), 1u);
    expect_mentions(r3b[0], {"found 1 problem(s)", "for_range inside for_threads",
                             "runs that thread's share of the range only"});
    const auto r3c = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [](apgas::thread_block b) {
      b.for_threads([&](apgas::thread_index) {
        b.for_threads_coarse_x(2, {0, 0, 0}, {4, 1, 1}, [](apgas::thread_index, int) {});
      });
    }));
    ASSERT_EQ(r3c.size(), 1u);
    expect_mentions(r3c[0], {"found 1 problem(s)", "for_threads_coarse_x inside for_threads"});
    // After a nested loop the accesses are the outer thread's again: every thread writing element 0 is a race.
    const auto r4 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<int>(32),
                                               [](apgas::thread_block b, apgas::shared_span<int> s) {
      b.for_threads([&](apgas::thread_index t) {
        b.for_threads_in({0, 0, 0}, {1, 1, 1}, [](apgas::thread_index) {});
        s[0] = t.linear;
      });
    }));
    ASSERT_EQ(r4.size(), 1u);
    expect_mentions(r4[0], {"found 2 problem(s)", "for_threads_in inside for_threads",
                            "data race on shared array 0", "element 0"});
    // An exception caught around for_threads: what follows is the block's own again.
    const auto r5 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<int>(32),
                                               [](apgas::thread_block b, apgas::shared_span<int> s) {
      try {
        b.for_threads([&](apgas::thread_index t) {
          if (t.linear == 5) throw std::runtime_error("5");
          s[static_cast<std::size_t>(t.linear)] = 1;
        });
      } catch (const std::runtime_error&) {
      }
      b.sync();
      b.for_threads([&](apgas::thread_index t) { s[static_cast<std::size_t>(t.linear)] = 2; });
    }));
    EXPECT_TRUE(r5.empty()) << r5.front();
  });
}

// Two more things that are undefined on a GPU and ran here: threads of a block reaching different collectives at one
// barrier (a reduction and advance(), a reduction and a broadcast, sums and maxima), and a warp operation reading a
// lane that has ended (without the checking mode it gets the caller's own value).
TEST(KernelCheck, DifferentCollectivesAtOneBarrierAndEndedLanesAreReported) {
  checking([] {
    const auto mixed = [](const char* what, auto body) {
      const auto r = reports(apgas::cuda_kernel(apgas::grid{2, 64}, body));
      ASSERT_EQ(r.size(), 2u) << what;
      expect_mentions(r[0], {"found 1 problem(s)", "different collectives at one barrier", what});
    };
    mixed("thread 1 reached advance() where thread 0 reached a reduction or a scan", [](apgas::clocked_thread t) {
      if (t.thread() == 0) {
        (void)t.reduce(1, apgas::plus{});
      } else {
        t.advance();
      }
    });
    mixed("thread 32 reached a broadcast where thread 0 reached a reduction or a scan", [](apgas::clocked_thread t) {
      (void)(t.thread() < 32 ? t.reduce(1, apgas::plus{}) : t.broadcast(t.thread(), 40));
    });
    mixed("thread 32 reached a reduction or a scan of another kind, type or operation than thread 0's",
          [](apgas::clocked_thread t) {
            (void)(t.thread() < 32 ? t.reduce(1, apgas::plus{}) : t.reduce(1, apgas::maximum{}));
          });
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [](apgas::clocked_thread t) {
      if (t.lane() >= 16) return;
      (void)t.shfl_down(t.lane(), 1);
    }));
    ASSERT_EQ(r.size(), 1u);
    expect_mentions(r[0], {"found 1 problem(s)", "a warp operation of thread 15 reads lane 16 of its warp, which has "
                                                 "ended"});
  });
}

// A plain access races with an atomic one of another thread (on a GPU the plain store or load is not ordered with
// the atomic read-modify-write): a histogram zeroed without a barrier before its atomic counts, read without one
// after them, is reported; atomic counts alone, and a thread's plain access to its own element, are not.
TEST(KernelCheck, PlainAccessesRaceWithAtomicOnes) {
  checking([] {
    using counts = apgas::shared_span<unsigned>;
    const auto zero_then_count = reports(apgas::cuda_kernel(apgas::grid{1, 64}, apgas::shared_uninit<unsigned>(4),
                                                            [](apgas::clocked_thread t, counts h) {
      if (t.thread() < 4) h[static_cast<std::size_t>(t.thread())] = 0;  // no barrier before the counts
      apgas::atomic_add(h, static_cast<std::size_t>(t.thread() % 4), 1u);
    }));
    ASSERT_EQ(zero_then_count.size(), 1u);
    expect_mentions(zero_then_count[0], {"data race on shared array 0", "between two barriers"});
    const auto read_without_barrier = reports(apgas::cuda_kernel(apgas::grid{1, 64}, apgas::shared<unsigned>(1),
                                              [](apgas::thread_block b, apgas::shared_span<unsigned> h) {
      b.for_threads([&](apgas::thread_index t) {
        apgas::atomic_add(h, 0, 1u);
        if (t.linear == 63) (void)h[0];  // the total, read before the others' adds are sure to be done
      });
    }));
    ASSERT_EQ(read_without_barrier.size(), 1u);
    expect_mentions(read_without_barrier[0], {"data race on shared array 0"});
    const auto correct = reports(apgas::cuda_kernel(apgas::grid{2, 64}, apgas::shared_uninit<unsigned>(4),
                                                    [](apgas::clocked_thread t, apgas::shared_span<unsigned> h) {
      const auto me = static_cast<std::size_t>(t.thread());
      if (me < 4) h[me] = 0;
      t.advance();
      apgas::atomic_add(h, me % 4, 1u);
      apgas::atomic_add(h[me % 4], 1u);  // the other form: the element by reference
      t.advance();
      if (me < 4 && h[me] != 32) throw std::runtime_error("wrong count");
    }));
    EXPECT_TRUE(correct.empty()) << correct.front();
    // The CUDA Programming Guide's compare-exchange loop, its first read with atomic_load: silent; with a plain read
    // (old = h[0]), reported.
    for (const bool plain_first_read : {false, true}) {
      const auto cas = reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<float>(1),
                                                  [=](apgas::clocked_thread t, apgas::shared_span<float> h) {
        t.advance();
        float old = plain_first_read ? h[0] : apgas::atomic_load(h[0]), assumed = 0;
        do {
          assumed = old;
          old = apgas::atomic_compare_exchange(h[0], assumed, assumed + 1.0f);
        } while (assumed != old);
        t.advance();
        if (t.thread() == 0 && h[0] != 32.0f) throw std::runtime_error("wrong sum");
      }));
      if (plain_first_read) {
        ASSERT_EQ(cas.size(), 1u);
        expect_mentions(cas[0], {"data race on shared array 0"});
      } else {
        EXPECT_TRUE(cas.empty()) << cas.front();
      }
    }
  });
}

// Reads through the tile that thread_block::stage returns are watched as the staged shared array's (the checking
// mode copies the window there): a read before the sync() after the staging, or a staging again while the tile is
// still read, is a race; with the barriers, silent.
TEST(KernelCheck, ReadsOfAStagedTileAreWatched) {
  checking([] {
    static float in[16];
    for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i);
    const float* src = in;
    const auto kernel = [=](bool sync_after_stage, bool sync_before_restage) {
      return apgas::cuda_kernel(apgas::grid{1, 8}, apgas::shared<float>(8),
                                [=](apgas::thread_block b, apgas::shared_span<float> s) {
        float got = 0;
        for (int row = 0; row < 2; ++row) {
          const apgas::tile<float> p = b.stage(s, src + 8 * row, 8, {0, 0}, {8, 1});
          if (sync_after_stage) b.sync();
          b.for_threads([&](apgas::thread_index t) { got += p(7 - t.linear, 0); });  // another thread's element
          if (sync_before_restage) b.sync();
        }
        (void)got;
      });
    };
    const auto missing_after = reports(kernel(false, true));
    ASSERT_EQ(missing_after.size(), 1u);
    expect_mentions(missing_after[0], {"data race on shared array 0"});
    const auto missing_before = reports(kernel(true, false));
    ASSERT_EQ(missing_before.size(), 1u);
    expect_mentions(missing_before[0], {"data race on shared array 0"});
    const auto correct = reports(kernel(true, true));
    EXPECT_TRUE(correct.empty()) << correct.front();
  });
}

// An epoch in which every thread only read an element is judged at the barrier that ends it, not later against a
// value a correctly synchronised write through an unwatched std::span changed (reported as a race once).
APGAS_KERNEL inline void set_first(std::span<float> v, float x) { v[0] = x; }
TEST(KernelCheck, AnEpochIsJudgedAtItsBarrier) {
  checking([] {
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 4}, apgas::shared<float>(4, 1.0f),
                                              [](apgas::thread_block b, apgas::shared_span<float> s) {
      float seen = 0;
      b.for_threads([&](apgas::thread_index) { seen += s[0]; });  // every thread reads s[0]: no race
      b.sync();
      b.for_threads([&](apgas::thread_index t) {
        if (t.linear == 0) set_first(s, 5.0f);  // one writer, after a barrier
      });
      b.sync();
      b.for_threads([&](apgas::thread_index) { seen += s[0]; });
      (void)seen;
    }));
    EXPECT_TRUE(r.empty()) << r.front();
  });
}

// A warp shuffle that reads a lane past the block's last thread (blocks of 48 threads: the second warp has 16 lanes)
// is undefined on a GPU: reported; a ballot, where such a lane counts false on a GPU too, is not. Without the
// checking mode the shuffle gives the caller's own value.
TEST(KernelCheck, AShuffleReadingALaneThatDoesNotExistIsReported) {
  checking([] {
    const auto r = reports(apgas::cuda_kernel(apgas::grid{1, 48}, [](apgas::clocked_thread t) {
      (void)t.shfl_down(t.thread(), 16);
    }));
    ASSERT_EQ(r.size(), 1u);
    expect_mentions(r[0], {"found 1 problem(s)", "a warp shuffle of thread 32 reads lane 16 of its warp, which does "
                                                 "not exist (the block has 48 threads; its last warp 16 lanes)"});
    const auto vote = reports(apgas::cuda_kernel(apgas::grid{1, 48}, [](apgas::clocked_thread t) {
      if (t.ballot(true) != (t.thread() < 32 ? 0xffffffffu : 0xffffu)) throw std::runtime_error("wrong ballot");
    }));
    EXPECT_TRUE(vote.empty()) << vote.front();
  });
  checking(
      [] {
        std::vector<int> got(48);
        int* out = got.data();
        apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 48}, [=](apgas::clocked_thread t) {
          out[t.thread()] = t.shfl_down(t.thread(), 16);
        }));
        EXPECT_EQ(got[0], 16);
        EXPECT_EQ(got[32], 32);  // its own value
      },
      false);
}

// A per_thread value (and a block scan's result) is the calling thread's own on a GPU, whatever index names it: an
// index of another thread, or one used outside for_threads, is reported.
TEST(KernelCheck, APerThreadValueOfAnotherThreadIsReported) {
  checking([] {
    std::vector<int> sums(2);
    int* out = sums.data();
    const auto last = reports(apgas::cuda_kernel(apgas::grid{2, 64}, [=](apgas::thread_block b) {
      const auto s = b.inclusive_scan([](apgas::thread_index) { return 1; }, apgas::plus{});
      b.single([&] { out[b.block()] = s[apgas::thread_index{63, 0, 0, 63}]; });  // on a GPU thread 0 reads its own
    }));
    ASSERT_EQ(last.size(), 2u);
    expect_mentions(last[0], {"per_thread value of thread 63 read by thread 0", "block 0"});
    const auto neighbour = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::thread_block b) {
      auto v = b.per_thread<int>(0);
      b.for_threads([&](apgas::thread_index t) { v[t] = t.linear; });
      b.sync();
      b.for_threads([&](apgas::thread_index t) {
        if (t.linear > 0) (void)v[apgas::thread_index{t.x - 1, 0, 0, t.linear - 1}];  // the neighbour's
      });
    }));
    ASSERT_EQ(neighbour.size(), 1u);
    expect_mentions(neighbour[0], {"per_thread value of thread 0 read by thread 1"});
    const auto own = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::thread_block b) {
      auto v = b.per_thread<int>(1);
      const auto s = b.exclusive_scan([&](apgas::thread_index t) { return v[t]; }, 0, apgas::plus{});
      b.for_threads([&](apgas::thread_index t) { v[t] += s[t]; });
    }));
    EXPECT_TRUE(own.empty()) << own.front();
  });
}

// The threads of a clocked block share their OS thread's C++ exception-handling state: a barrier reached inside a
// catch handler (advance, a block collective, a warp operation), or from a destructor while an exception unwinds,
// fails the block with kernel_check_error, checking mode or not, and its threads unwind. (It used to switch with the
// handler open: `throw;` rethrew another thread's exception, and ending the handlers freed exceptions still in use.)
struct advance_at_exit {
  apgas::clocked_thread t;
  ~advance_at_exit() noexcept(false) { t.advance(); }
};

TEST(KernelCheck, ABarrierInsideACatchHandlerFailsTheBlock) {
  for (bool on : {false, true}) {
    checking([] {
      std::vector<int> after(8, 0);
      int* a = after.data();
      const auto r = reports(apgas::cuda_kernel(apgas::grid{2, 4}, [=](apgas::clocked_thread t) {
        try {
          throw std::runtime_error("thread " + std::to_string(t.thread()));
        } catch (const std::exception&) {
          t.advance();
          if (t.thread() == 0) throw;  // would have rethrown thread 3's exception
          a[t.global_id()] = 1;
        }
      }));
      ASSERT_EQ(r.size(), 2u);  // both blocks
      for (const auto& w : r) {
        expect_mentions(w, {"advance() or a block collective reached inside a catch handler (or while an exception "
                            "unwinds)", ", thread 0: not supported on CPU places",
                            "share one OS thread's exception state", "lambda(apgas::clocked_thread)"});
      }
      for (int v : after) EXPECT_EQ(v, 0);  // no thread went on past the barrier
      const auto r2 = reports(apgas::cuda_kernel(apgas::grid{1, 8}, [=](apgas::clocked_thread t) {
        int v = 1;
        try {
          if (t.thread() == 5) throw std::runtime_error("5");
        } catch (const std::exception&) {
          v = t.reduce(v, apgas::plus{});
        }
        a[t.thread()] = t.reduce(v, apgas::plus{});
      }));
      ASSERT_EQ(r2.size(), 1u);
      expect_mentions(r2[0], {"advance() or a block collective reached inside a catch handler", "thread 5"});
      const auto r3 = reports(apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::clocked_thread t) {
        try {
          throw 7;
        } catch (int) {
          a[t.thread() % 8] = t.shfl(t.thread(), 0);
        }
      }));
      ASSERT_EQ(r3.size(), 1u);
      expect_mentions(r3[0], {"a warp operation reached inside a catch handler", "thread 0"});
      // From a destructor while thread 2's exception unwinds: the barrier cannot throw there; the block still fails
      // with the report, not with thread 2's exception.
      const auto r4 = reports(apgas::cuda_kernel(apgas::grid{1, 4}, [=](apgas::clocked_thread t) {
        const advance_at_exit last{t};
        if (t.thread() == 2) throw std::runtime_error("2");
      }));
      ASSERT_EQ(r4.size(), 1u);
      expect_mentions(r4[0], {"advance() or a block collective reached inside a catch handler (or while an exception "
                              "unwinds)", "thread 2"});
      // A handler that has ended before the barrier is fine, and so is a kernel launched from inside a handler,
      // whose handler still holds its own exception after it.
      std::vector<int> sums(16, 0);
      int* ps = sums.data();
      try {
        throw std::logic_error("the launcher's");
      } catch (const std::logic_error&) {
        EXPECT_TRUE(reports(apgas::cuda_kernel(apgas::grid{2, 8}, [=](apgas::clocked_thread t) {
          int v = 0;
          try {
            throw std::runtime_error(std::to_string(t.thread()));
          } catch (const std::exception& e) {
            v = std::stoi(e.what());
          }
          t.advance();
          ps[t.global_id()] = t.reduce(v, apgas::plus{});
        })).empty());
        try {
          throw;
        } catch (const std::logic_error& e) {
          EXPECT_STREQ(e.what(), "the launcher's");
        }
      }
      for (int v : sums) EXPECT_EQ(v, 28);
      EXPECT_EQ(std::uncaught_exceptions(), 0);
    }, on);
  }
}

// An operation that throws inside a clocked collective (reduce, a scan) fails the block with its exception, as in a
// block-level reduce, and the block's threads unwind (it ended the process: the combine runs inside the barrier).
struct plus_up_to_10 {
  template <class T>
  T operator()(const T& a, const T& b) const {
    if (a + b > 10) throw std::range_error("over 10");
    return a + b;
  }
};

TEST(KernelCheck, AnOperationThatThrowsInAClockedCollectiveFailsTheBlock) {
  for (bool on : {false, true}) {
    checking([] {
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<int> after(64, 0);
        int* a = after.data();
        try {
          apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{2, 32}, [=](apgas::clocked_thread t) {
            const int small = t.reduce(1, apgas::minimum{});  // an operation that does not throw first
            if (kind == 0) (void)t.reduce(small, plus_up_to_10{});
            if (kind == 1) (void)t.inclusive_scan(small, plus_up_to_10{});
            if (kind == 2) (void)t.exclusive_scan(small, 0, plus_up_to_10{});
            a[t.global_id()] = 1;
          }));
          ADD_FAILURE() << "collective " << kind << ": the operation's exception did not reach the finish";
        } catch (const apgas::multiple_exceptions& m) {
          EXPECT_EQ(m.size(), 2u) << "collective " << kind;  // one per block
          EXPECT_EQ(m.of_type<std::range_error>().size(), m.size()) << "collective " << kind;
        }
        for (int v : after) EXPECT_EQ(v, 0) << "collective " << kind;
      }
      int x = 0;  // the place goes on working
      int* px = &x;
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::clocked_thread t) {
        const int s = t.inclusive_scan(1, apgas::plus{});
        if (t.thread() == 31) *px = s;
      }));
      EXPECT_EQ(x, 32);
    }, on);
  }
}

// Block-level collectives hold a barrier on a GPU (__syncthreads inside reduce, count, all, any, the scans and
// single): what threads wrote before one and read after it is no race, and the checking mode says nothing.
TEST(KernelCheck, BlockCollectivesAreBarriers) {
  checking([] {
    std::vector<int> out(32, 0);
    int* o = out.data();
    const auto after = [&](auto collective) {
      return reports(apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<int>(32),
                                        [=](apgas::thread_block b, apgas::shared_span<int> s) {
        b.for_threads([&](apgas::thread_index t) { s[static_cast<std::size_t>(t.linear)] = t.linear + 1; });
        collective(b);
        b.for_threads([&](apgas::thread_index t) { o[t.linear] = s[static_cast<std::size_t>((t.linear + 1) % 32)]; });
      }));
    };
    EXPECT_TRUE(after([](apgas::thread_block b) {
      (void)b.reduce([](apgas::thread_index) { return 1; }, apgas::plus{});
    }).empty());
    EXPECT_TRUE(after([](apgas::thread_block b) { (void)b.count([](apgas::thread_index) { return true; }); }).empty());
    EXPECT_TRUE(after([](apgas::thread_block b) { (void)b.any([](apgas::thread_index) { return false; }); }).empty());
    EXPECT_TRUE(after([](apgas::thread_block b) {
      (void)b.inclusive_scan([](apgas::thread_index) { return 1; }, apgas::plus{});
    }).empty());
    EXPECT_TRUE(after([](apgas::thread_block b) { b.single([] {}); }).empty());
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], (i + 1) % 32 + 1);
  });
}

}  // namespace
