// Stress (label `stress`): large numbers of activities, parks and phases. Assertions only on results, never on time.
#include "support/run.hpp"

#include <atomic>
#include <vector>

using apgas_test::run_on;

namespace {
std::atomic<long> g_asyncs{0};

long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    g_asyncs.fetch_add(1, std::memory_order_relaxed);
    apgas::async([&] { a = fib(n - 1); });
    b = fib(n - 2);
  });
  return a + b;
}
}  // namespace

TEST(Stress, Fib32) {
  run_on(2, [] {
    g_asyncs = 0;
    EXPECT_EQ(fib(32), 2178309);
    EXPECT_EQ(g_asyncs.load(), 3524577);  // one async per non-leaf call
  });
}

TEST(Stress, TenMillionEmptyAsyncsNoneLost) {
  run_on(2, [] {
    std::atomic<long> ran{0};
    apgas::finish([&] {
      for (long i = 0; i < 10'000'000; ++i) apgas::async([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    });
    EXPECT_EQ(ran.load(), 10'000'000);
  });
}

TEST(Stress, ThousandActivitiesThousandPhases) {
  run_on(2, [] {
    constexpr int n = 1000;
    constexpr int phases = 1000;
    std::vector<std::atomic<int>> arrivals(phases + 1);
    std::atomic<long> bad{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int i = 0; i < n; ++i) {
        apgas::clocked_async({c}, [&, c]() mutable {
          for (int p = 1; p <= phases; ++p) {
            if (c.phase() != p) bad++;
            arrivals[static_cast<std::size_t>(p)].fetch_add(1, std::memory_order_relaxed);
            c.advance();
            // nobody passed phase p before all n arrived in it
            if (arrivals[static_cast<std::size_t>(p)].load(std::memory_order_relaxed) != n) bad++;
          }
        });
      }
      c.drop();
    });
    EXPECT_EQ(bad.load(), 0);
    for (int p = 1; p <= phases; ++p) ASSERT_EQ(arrivals[static_cast<std::size_t>(p)].load(), n);
  });
}

TEST(Stress, ManyParkedWhens) {
  run_on(2, [] {
    constexpr int n = 5000;
    int stage = 0;
    int waiting = 0;
    std::atomic<int> released{0};
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&, i] {
          apgas::atomic([&] { ++waiting; });
          apgas::when([&] { return stage > i % 50; }, [&] { released++; });
        });
      }
      // Only once every activity is about to wait does the stage move: most of them park.
      apgas::when([&] { return waiting == n; }, [] {});
      for (int s = 1; s <= 50; ++s) apgas::atomic([&] { stage = s; });
    });
    EXPECT_EQ(released.load(), n);
  });
}
