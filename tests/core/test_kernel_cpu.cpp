// Kernel closures (cuda_kernel) executed on a CPU place.
#include "support/run.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using apgas_test::run_on;

class KernelCpu : public testing::TestWithParam<int> {};

TEST_P(KernelCpu, PlainKernelCoversTheGrid) {
  run_on(GetParam(), [] {
    constexpr int blocks = 5;
    constexpr int threads = 33;
    std::vector<int> hits(blocks * threads, 0);
    int* h = hits.data();
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{blocks, threads}, [=](apgas::thread t) {
                EXPECT_EQ(t.blocks(), blocks);
                EXPECT_EQ(t.threads(), threads);
                EXPECT_EQ(t.global_count(), blocks * threads);
                EXPECT_EQ(t.global_id(), t.block() * threads + t.thread());
                h[t.global_id()] += 1;
              }));
    for (int v : hits) EXPECT_EQ(v, 1);
  });
}

TEST_P(KernelCpu, ClockedBlockTreeReduction) {
  // The shape of Parboil RPES's reduction: each thread sums a grid-stride slice, then the block halves its shared
  // array with a barrier between steps.
  run_on(GetParam(), [] {
    constexpr int blocks = 6;
    constexpr int threads = 128;
    constexpr long n = 1'000'003;
    std::vector<long> per_block(blocks, -1);
    long* out = per_block.data();
    apgas::finish([&] {
      apgas::async_at(apgas::here(),
                      apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared<long>(threads),
                                         [=](apgas::clocked_thread t, std::span<long> sh) {
                                           long s = 0;
                                           for (long i = t.global_id(); i < n; i += t.global_count()) s += i % 1000;
                                           sh[static_cast<std::size_t>(t.thread())] = s;
                                           t.advance();
                                           for (int stride = t.threads() / 2; stride > 0; stride /= 2) {
                                             if (t.thread() < stride) {
                                               sh[static_cast<std::size_t>(t.thread())] +=
                                                   sh[static_cast<std::size_t>(t.thread() + stride)];
                                             }
                                             t.advance();
                                           }
                                           if (t.thread() == 0) out[t.block()] = sh[0];
                                         }));
    });
    long expected = 0;
    for (long i = 0; i < n; ++i) expected += i % 1000;
    EXPECT_EQ(std::accumulate(per_block.begin(), per_block.end(), 0L), expected);
  });
}

TEST_P(KernelCpu, BarrierExchangesDataBetweenThreads) {
  run_on(GetParam(), [] {
    constexpr int threads = 64;
    std::vector<int> result(threads, -1);
    int* r = result.data();
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, threads}, apgas::shared<int>(threads, 7),
                                                [=](apgas::clocked_thread t, std::span<int> sh) {
                                                  const auto me = static_cast<std::size_t>(t.thread());
                                                  EXPECT_EQ(sh[me], 7);  // shared<T>(n, value) fills
                                                  sh[me] = t.thread() * 10;
                                                  t.advance();
                                                  // read the neighbour's write: visible only after the barrier
                                                  r[me] = sh[(me + 1) % threads];
                                                }));
    for (int i = 0; i < threads; ++i) EXPECT_EQ(result[static_cast<std::size_t>(i)], ((i + 1) % threads) * 10);
  });
}

TEST_P(KernelCpu, SharedArraysArePerBlockAndFilledFromHostData) {
  run_on(GetParam(), [] {
    std::vector<float> host{1.5f, 2.5f, 3.5f};
    std::vector<float> sums(4, 0.f);
    float* s = sums.data();
    auto k = apgas::cuda_kernel(apgas::grid{4, 3}, apgas::shared_from(std::span<const float>(host)),
                                [=](apgas::clocked_thread t, std::span<float> sh) {
                                  sh[static_cast<std::size_t>(t.thread())] += static_cast<float>(t.block());
                                  t.advance();
                                  if (t.thread() == 0) s[t.block()] = sh[0] + sh[1] + sh[2];
                                });
    host[0] = 100.f;  // the kernel copied the data when it was built
    apgas::at(apgas::here(), k);
    for (int b = 0; b < 4; ++b) EXPECT_FLOAT_EQ(sums[static_cast<std::size_t>(b)], 7.5f + 3.f * b);
  });
}

// shared_span<T, N>::operator[] tells the compiler the array is 64-byte aligned on a CPU place: every shared array
// of every block is, and an element type aligned beyond 64 bytes gets its own alignment; values survive the barrier.
TEST_P(KernelCpu, SharedArraysOfCompileTimeSizeAreAligned) {
  struct alignas(128) wide {
    float v[4];
  };
  run_on(GetParam(), [] {
    constexpr int blocks = 6, threads = 16;
    std::vector<std::uintptr_t> addr(blocks * 3, 1);
    std::vector<float> got(blocks * threads, 0.f);
    std::uintptr_t* a = addr.data();
    float* g = got.data();
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared_uninit<float, 3>(),
                                                apgas::shared<float, threads>(), apgas::shared_uninit<wide, 2>(),
                                                [=](apgas::thread_block b, apgas::shared_span<float, 3> odd,
                                                    apgas::shared_span<float, threads> s,
                                                    apgas::shared_span<wide, 2> w) {
      const long k = b.block();
      a[k * 3] = reinterpret_cast<std::uintptr_t>(odd.data()) % 64;
      a[k * 3 + 1] = reinterpret_cast<std::uintptr_t>(s.data()) % 64;
      a[k * 3 + 2] = reinterpret_cast<std::uintptr_t>(w.data()) % 128;
      b.for_threads([&](apgas::thread_index t) { s[static_cast<std::size_t>(t.linear)] += 2.f * t.linear + k; });
      b.sync();
      b.for_threads([&](apgas::thread_index t) {
        g[k * threads + t.linear] = s[static_cast<std::size_t>(threads - 1 - t.linear)];
      });
    }));
    for (std::uintptr_t r : addr) EXPECT_EQ(r, 0u);
    for (int k = 0; k < blocks; ++k) {
      for (int t = 0; t < threads; ++t) EXPECT_EQ(got[k * threads + t], 2.f * (threads - 1 - t) + k);
    }
  });
}

TEST_P(KernelCpu, ConstantAndGlobalResources) {
  run_on(GetParam(), [] {
    std::vector<int> table(256);
    std::iota(table.begin(), table.end(), 0);
    std::vector<int> input(1000);
    std::iota(input.begin(), input.end(), 1);
    std::vector<long> out(1000, 0);
    long* o = out.data();
    apgas::at(apgas::here(),
              apgas::cuda_kernel(apgas::auto_grid(), apgas::constant_from(std::span<const int>(table)),
                                 apgas::global_from(std::span<const int>(input)),
                                 [=](apgas::thread t, std::span<const int> c, std::span<int> g) {
                                   for (long i = t.global_id(); i < 1000; i += t.global_count()) {
                                     o[i] = static_cast<long>(c[static_cast<std::size_t>(i % 256)]) *
                                            g[static_cast<std::size_t>(i)];
                                   }
                                 }));
    for (long i = 0; i < 1000; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], (i % 256) * (i + 1));
  });
}

// A global_from buffer belongs to one launch, as on a GPU (a fresh upload each time): a closure launched twice, in
// turn or at once, starts from the host data each time and never sees another launch's writes.
TEST_P(KernelCpu, EachLaunchHasItsOwnGlobalBuffer) {
  run_on(GetParam(), [] {
    const std::vector<int> start{5};
    std::array<int, 4> seen{};
    int* s = seen.data();
    const auto k = [&](int slot) {
      return apgas::cuda_kernel(apgas::grid{1, 1}, apgas::global_from(std::span<const int>(start)),
                                [=](apgas::thread, std::span<int> g) { s[slot] = ++g[0]; });
    };
    const auto twice = k(0);
    apgas::at(apgas::here(), twice);
    apgas::at(apgas::here(), twice);  // the same closure again
    apgas::finish([&] {
      const auto at_once = k(2);
      apgas::async_at(apgas::here(), at_once);
      apgas::async_at(apgas::here(), at_once);
    });
    EXPECT_EQ(seen[0], 6);
    EXPECT_EQ(seen[2], 6);
    EXPECT_EQ(start[0], 5);  // the host data is not written either
  });
}

// A block-level reduce gives its working space back: a block that reduces in a loop takes no more scratch than one
// that reduces once (the next per_thread array lies right after the one made before the loop).
TEST_P(KernelCpu, BlockReduceInALoopKeepsItsScratch) {
  run_on(GetParam(), [] {
    std::ptrdiff_t gap = -1;
    float last = 0;
    std::ptrdiff_t* g = &gap;
    float* l = &last;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 256}, [=](apgas::thread_block b) {
      auto before = b.per_thread<float>(1.0f);
      float x = 0;
      for (int i = 0; i < 2000; ++i) {
        x = b.reduce([&](apgas::thread_index t) { return before[t] + static_cast<float>(i); }, apgas::maximum{});
      }
      auto after = b.per_thread<float>();
      *g = after.data() - before.data();
      *l = x;
    }));
    EXPECT_EQ(gap, 256);
    EXPECT_EQ(last, 2000.0f);
  });
}

// Per-block scratch of exactly the limit, of a type aligned to 64 bytes, fits (chunks start on a 64-byte boundary);
// one aligned to more than a fresh chunk can give is refused, naming the size and the alignment (it used to allocate
// chunks without end).
TEST(KernelCpu, PerBlockScratchAtTheLimitFitsAndBeyondIsRefused) {
  run_on(2, [] {
    struct alignas(64) line {
      float v[64];
    };
    int ok = 0;
    int* p = &ok;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1024}, [=](apgas::thread_block b) {
      auto a = b.per_thread<line>();  // 1024 x 256 bytes: 256 KiB
      b.for_threads([&](apgas::thread_index t) { a[t].v[0] = 1.0f; });
      b.single([&] { *p = static_cast<int>(a[apgas::thread_index{1023, 0, 0, 1023}].v[0]); });
    }));
    EXPECT_EQ(ok, 1);
    struct alignas(128) wide {
      float v[64];
    };
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1024}, [=](apgas::thread_block b) {
        auto c = b.per_thread<wide>();
        (void)c;
      }));
      ADD_FAILURE() << "256 KiB aligned to 128 bytes was not refused";
    } catch (const apgas::multiple_exceptions& m) {
      const auto errors = m.of_type<apgas::kernel_launch_error>();
      ASSERT_EQ(errors.size(), 1u);
      ASSERT_EQ(m.size(), 1u);
      const std::string what = errors.front()->what();
      EXPECT_NE(what.find("262144 bytes of per-block scratch aligned to 128 bytes"), std::string::npos) << what;
    }
  });
}

TEST_P(KernelCpu, AutoGridFillsTheWorkers) {
  run_on(GetParam(), [] {
    int blocks = 0;
    int threads = 0;
    int* bp = &blocks;
    int* tp = &threads;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::auto_grid(), [=](apgas::thread t) {
                if (t.global_id() == 0) {
                  *bp = t.blocks();
                  *tp = t.threads();
                }
              }));
    EXPECT_EQ(blocks, apgas::num_workers());
    EXPECT_EQ(threads, 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, KernelCpu, testing::ValuesIn(apgas_test::worker_counts));

TEST(KernelCpu, LaunchErrorsAndIllegalOperations) {
  run_on(2, [] {
    auto empty = [](apgas::thread) {};
    EXPECT_THROW(apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{0, 32}, empty)), apgas::kernel_launch_error);
    EXPECT_THROW(apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1025}, empty)), apgas::kernel_launch_error);
    EXPECT_THROW(apgas::async_at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, -1}, empty)),
                 apgas::kernel_launch_error);
    std::vector<char> big(apgas::max_constant_bytes + 1);
    EXPECT_THROW((void)apgas::constant_from(std::span<const char>(big)), apgas::kernel_launch_error);
    // Blocking operations inside a kernel body are illegal (they have no GPU equivalent).
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{2, 2}, [](apgas::thread) { apgas::finish([] {}); }));
      FAIL() << "finish inside a kernel did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 2u);  // an exception ends its block: one per block
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 2u);
    }
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 4}, [](apgas::clocked_thread t) {
                  t.advance();
                  apgas::async([] {});
                }));
      FAIL() << "async inside a clocked kernel did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 1u);  // one exception per block
    }
    // The place is still usable.
    int x = 0;
    int* px = &x;
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, [=](apgas::thread) { *px = 1; }));
    EXPECT_EQ(x, 1);
  });
}

// Sizes that would overflow are refused before anything runs, with kernel_launch_error naming the value and the
// limit: a shared array whose bytes do not fit in a size_t (2^61 + 1 doubles wrapped around to 8 bytes, and the
// kernel wrote past them), made by shared_uninit or by hand, two whose sum does not, and one that arrives in a routed
// kernel's message; a grid whose block count would wrap around (2^21 x 2^21 x 2^22 blocks ran no block at all): a
// GPU's grid limits, y and z at most 65535, hold on CPU places in every mode, as they do on GPU places; block
// dimensions whose product would overflow.
TEST(KernelCpu, SizesThatWouldOverflowAreRefused) {
  run_on(2, [] {
    const auto refused = [](const auto& launch, const std::vector<std::string>& parts) {
      try {
        launch();
        ADD_FAILURE() << "not refused: " << parts.front();
      } catch (const apgas::kernel_launch_error& e) {
        for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      }
    };
    int runs = 0;
    int* r = &runs;
    const std::size_t huge = (std::size_t{1} << 61) + 1;
    refused([&] { (void)apgas::shared_uninit<double>(huge); },
            {"apgas::shared_uninit: a shared array of 2305843009213693953 elements of 8 bytes",
             "at most 2305843009213693951 elements"});
    refused([&] { (void)apgas::shared<double>(huge, 1.0); }, {"apgas::shared: a shared array of 2305843009213693953"});
    refused([&] {
      apgas::at(apgas::here(),
                apgas::cuda_kernel(apgas::grid{1, 4}, apgas::shared_array<double, std::dynamic_extent, false>{huge, 0.0},
                                   [=](apgas::thread, apgas::shared_span<double>) { *r += 1; }));
    }, {"a shared array of 2305843009213693953 elements of 8 bytes", "overflows"});
    refused([&] {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 4}, apgas::shared_uninit<char>(std::size_t{1} << 63),
                                                  apgas::shared_uninit<char>(std::size_t{1} << 63),
                                                  [=](apgas::thread, apgas::shared_span<char>, apgas::shared_span<char>) {
                                                    *r += 1;
                                                  }));
    }, {"9223372036854775808 elements of 1 bytes after 9223372036854775808 bytes", "overflows"});
    refused([&] {
      apgas::writer w;
      w & std::uint64_t{huge} & 0.0;
      apgas::reader in(w.bytes());
      apgas::shared_array<double, std::dynamic_extent, false> a{};
      apgas::detail::read_resource(in, a);
    }, {"routed", "2305843009213693953 elements of 8 bytes"});
    const auto empty = [=](apgas::thread) { *r += 1; };
    refused([&] { apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{{1 << 21, 1 << 21, 1 << 22}, 1}, empty)); },
            {"grid of (2097152,2097152,4194304) blocks", "(2147483647,65535,65535)"});
    refused([&] { apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{{1, 1, 65536}, 1}, empty)); },
            {"grid of (1,1,65536) blocks", "(2147483647,65535,65535)"});
    refused([&] { apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, {1 << 21, 1 << 21, 1 << 22}}, empty)); },
            {"blocks of (2097152,2097152,4194304) threads", "1 to 1024"});
    EXPECT_EQ(runs, 0);
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{{2, 65535, 1}, 1}, [=](apgas::thread t) {
      if (t.block() == 2L * 65535 - 1) *r += 1;  // the last block
    }));
    EXPECT_EQ(runs, 1);
  });
}

// Block-level reductions combine without presence marks (detail::tree_reduce_all): the same float sums, bit for bit,
// as the tree with marks that GPUs and clocked threads follow, for every block size up to 1024.
TEST(KernelCpu, BlockReductionWithoutPresenceMarksGivesTheSameBits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1000, 1000);
  for (int n = 1; n <= 1024; n += (n < 70 ? 1 : 37)) {
    std::vector<float> a(static_cast<std::size_t>(n));
    for (float& x : a) x = u(rng) * (rng() % 3 == 0 ? 1e-6f : 1.0f);  // mixed magnitudes: the order shows
    std::vector<float> b = a;
    std::vector<char> present(static_cast<std::size_t>(n), 1);
    apgas::detail::tree_reduce(a.data(), reinterpret_cast<bool*>(present.data()), n, apgas::plus{});
    const float all = apgas::detail::tree_reduce_all(b.data(), n, apgas::plus{});
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a[0], 4);
    std::memcpy(&y, &all, 4);
    EXPECT_EQ(x, y) << n << " values";
  }
}
