// Stress (label `stress`): large numbers of activities, parks and phases. Assertions only on results (exact counts),
// never on time. Each test takes a few seconds in a Release build on 2 cores.
#include "support/run.hpp"

#include <atomic>
#include <memory>
#include <vector>

using apgas_test::run_on;

namespace {

constexpr long total = 10'000'000;  // asyncs in the "ten million" tests

std::atomic<long> g_issued{0};
std::atomic<long> g_ran{0};

// One async per non-leaf call, each under its own finish.
long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    g_issued.fetch_add(1, std::memory_order_relaxed);
    apgas::async([&] {
      g_ran.fetch_add(1, std::memory_order_relaxed);
      a = fib(n - 1);
    });
    b = fib(n - 2);
  });
  return a + b;
}

// Per-worker counters, each on its own cache line and written only by its worker's thread: plain longs, made
// visible to the waiter by finish alone.
struct alignas(64) padded_count {
  long value = 0;
};

// Spawn [lo, hi) as a binary tree of activities; every leaf increments its worker's counter.
void spawn_range(long lo, long hi, padded_count* counts) {
  while (hi - lo > 1) {
    const long mid = lo + (hi - lo) / 2;
    apgas::async([mid, hi, counts] { spawn_range(mid, hi, counts); });
    hi = mid;
  }
  counts[apgas::worker_index()].value++;
}

}  // namespace

TEST(Stress, Fib32OneAsyncPerCall) {
  for (int n : {1, 2, 4}) {
    run_on(n, [] {
      g_issued = 0;
      g_ran = 0;
      EXPECT_EQ(fib(32), 2178309);
      EXPECT_EQ(g_issued.load(), 3524577);  // fib(33) - 1 non-leaf calls
      EXPECT_EQ(g_ran.load(), 3524577);
    });
  }
}

TEST(Stress, TenMillionEmptyAsyncsNoneLost) {
  for (int n : {2, 4}) {
    run_on(n, [n] {
      std::vector<padded_count> counts(static_cast<std::size_t>(n));
      padded_count* c = counts.data();
      apgas::finish([c] {
        for (long i = 0; i < total; ++i) apgas::async([c] { c[apgas::worker_index()].value++; });
      });
      long sum = 0;
      for (const auto& x : counts) sum += x.value;
      EXPECT_EQ(sum, total) << n << " workers";
    });
  }
}

TEST(Stress, TenMillionAsyncsSpawnedAsATree) {
  run_on(2, [] {
    std::vector<padded_count> counts(2);
    padded_count* c = counts.data();
    apgas::finish([c] { spawn_range(0, total, c); });
    EXPECT_EQ(counts[0].value + counts[1].value, total);
  });
}

TEST(Stress, ThousandActivitiesThousandPhases) {
  run_on(2, [] {
    constexpr int n = 1000;
    constexpr int phases = 1000;
    // arrivals[p]: activities that arrived in phase p. Nobody may run ahead: after advancing out of phase p, an
    // activity must see all n arrivals of phase p.
    auto arrivals = std::make_unique<std::atomic<int>[]>(phases + 1);
    std::atomic<long> wrong_phase{0};
    std::atomic<long> ran_ahead{0};
    std::atomic<int> finished{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int i = 0; i < n; ++i) {
        apgas::clocked_async({c}, [&, c]() mutable {
          for (int p = 1; p <= phases; ++p) {
            if (c.phase() != p) wrong_phase++;
            arrivals[p].fetch_add(1, std::memory_order_relaxed);
            c.advance();
            if (arrivals[p].load(std::memory_order_relaxed) != n) ran_ahead++;
          }
          if (c.phase() != phases + 1) wrong_phase++;
          finished++;
        });
      }
      c.drop();  // the parent leaves: it must not hold the others back
    });
    EXPECT_EQ(wrong_phase.load(), 0);
    EXPECT_EQ(ran_ahead.load(), 0);
    EXPECT_EQ(finished.load(), n);
    for (int p = 1; p <= phases; ++p) ASSERT_EQ(arrivals[p].load(), n) << "phase " << p;
  });
}

TEST(Stress, ClockedFinishManyPhasesWithDrops) {
  // 200 activities on the implicit clock of a clocked_finish; activity i leaves after i phases (by ending), so the
  // number of arrivals in phase p is the number still there: 200 - (p - 1).
  run_on(2, [] {
    constexpr int n = 200;
    auto arrivals = std::make_unique<std::atomic<int>[]>(n + 1);
    std::atomic<long> bad{0};
    apgas::clocked_finish([&] {
      for (int i = 1; i <= n; ++i) {
        apgas::clocked_async([&, i] {
          for (int p = 1; p <= i; ++p) {
            arrivals[p].fetch_add(1, std::memory_order_relaxed);
            apgas::advance_all();
            if (arrivals[p].load(std::memory_order_relaxed) != n - (p - 1)) bad++;
          }
        });
      }
    });
    EXPECT_EQ(bad.load(), 0);
    for (int p = 1; p <= n; ++p) ASSERT_EQ(arrivals[p].load(), n - (p - 1)) << "phase " << p;
  });
}

TEST(Stress, ManyParkedWhens) {
  run_on(2, [] {
    constexpr int n = 5000;
    int stage = 0;
    int waiting = 0;
    std::atomic<int> released{0};
    std::atomic<int> early{0};
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&, i] {
          apgas::atomic([&] { ++waiting; });
          apgas::when([&] { return stage > i % 50; }, [&] {
            if (stage <= i % 50) early++;
            released++;
          });
        });
      }
      // Only once every activity is about to wait does the stage move: most of them park.
      apgas::when([&] { return waiting == n; }, [] {});
      for (int s = 1; s <= 50; ++s) apgas::atomic([&] { stage = s; });
    });
    EXPECT_EQ(released.load(), n);
    EXPECT_EQ(early.load(), 0);
  });
}

TEST(Stress, ContendedAtomicCounter) {
  run_on(4, [] {
    long counter = 0;
    apgas::finish([&] {
      for (int t = 0; t < 100; ++t) {
        apgas::async([&] {
          for (int i = 0; i < 10000; ++i) apgas::atomic([&] { ++counter; });
        });
      }
    });
    EXPECT_EQ(counter, 1'000'000);
  });
}
