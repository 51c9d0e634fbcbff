// The checking mode of kernels on CPU places (APGAS_KERNEL_CHECK / config::kernel_check, with shared-array accesses
// instrumented: APGAS_KERNEL_CHECKS=1 in this file): each planted bug is reported with the kernel, block, threads
// and index; correct kernels, Parboil-shaped ones among them, stay silent; launches beyond a GPU's limits are
// refused. And what happens without the checking mode: documented outcomes, never a hang.
#define APGAS_KERNEL_CHECKS 1
#include "support/run.hpp"

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

// The messages of the kernel_check_errors an at() of kernel k reported (one per failed block).
template <class K>
std::vector<std::string> reports(const K& k) {
  std::vector<std::string> out;
  try {
    apgas::at(apgas::here(), k);
  } catch (const apgas::multiple_exceptions& m) {
    for (const auto& e : m.of_type<apgas::kernel_check_error>()) out.push_back(e->what());
    EXPECT_EQ(m.of_type<apgas::kernel_check_error>().size(), m.size()) << "other exceptions than kernel_check_error";
  }
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
  });
  // Without the checking mode a CPU place runs them (its own limits are looser).
  checking([] {
    int runs = 0;
    int* r = &runs;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, {1, 1, 128}}, [=](apgas::thread t) {
      if (t.thread() == 0) *r += 1;
    }));
    EXPECT_EQ(runs, 1);
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
