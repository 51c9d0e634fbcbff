#include "support/run.hpp"

#include <atomic>
#include <string>
#include <vector>

using apgas_test::run_on;

namespace {
struct custom_error : std::exception {
  explicit custom_error(int v) : value(v) {}
  const char* what() const noexcept override { return "custom_error"; }
  int value;
};

void tree(int depth, std::atomic<long>& count) {
  count.fetch_add(1, std::memory_order_relaxed);
  if (depth == 0) return;
  for (int i = 0; i < 3; ++i) apgas::async([depth, &count] { tree(depth - 1, count); });
}
}  // namespace

class Finish : public testing::TestWithParam<int> {};

TEST_P(Finish, NestedFinishCompletesBeforeTheCodeAfterIt) {
  run_on(GetParam(), [] {
    std::atomic<int> inner{0};
    std::atomic<int> outer{0};
    apgas::finish([&] {
      for (int i = 0; i < 10; ++i) {
        apgas::async([&] {
          apgas::finish([&] {
            for (int j = 0; j < 10; ++j) apgas::async([&] { inner++; });
          });
          // Every async of the inner finish has ended before this line.
          if (inner.load() >= 10) outer++;
        });
      }
    });
    EXPECT_EQ(inner.load(), 100);
    EXPECT_EQ(outer.load(), 10);
  });
}

TEST_P(Finish, WaitsForTransitiveDescendants) {
  run_on(GetParam(), [] {
    std::atomic<long> count{0};
    apgas::finish([&] { tree(8, count); });  // 1 + 3 + ... + 3^8 = 9841 activities
    EXPECT_EQ(count.load(), 9841);
  });
}

TEST_P(Finish, AggregatesExceptionsWithExactCounts) {
  run_on(GetParam(), [] {
    try {
      apgas::finish([] {
        for (int i = 0; i < 1000; ++i) {
          apgas::async([i] {
            if (i % 7 == 0) throw std::runtime_error("seven");
            if (i % 11 == 0) throw custom_error(i);
          });
        }
      });
      FAIL() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      // multiples of 7 below 1000: 143; multiples of 11 that are not multiples of 7: 91 - 13 = 78
      EXPECT_EQ(m.exceptions().size(), 143u + 78u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 143u);
      const auto customs = m.of_type<custom_error>();
      EXPECT_EQ(customs.size(), 78u);
      long sum = 0;
      for (const custom_error* e : customs) sum += e->value;
      long expected = 0;
      for (int i = 0; i < 1000; ++i) expected += (i % 11 == 0 && i % 7 != 0) ? i : 0;
      EXPECT_EQ(sum, expected);
    }
  });
}

TEST_P(Finish, BodyExceptionIsWrappedWithTheOthers) {
  run_on(GetParam(), [] {
    std::atomic<int> ran{0};
    try {
      apgas::finish([&] {
        for (int i = 0; i < 5; ++i) {
          apgas::async([&] {
            ran++;
            throw std::runtime_error("child");
          });
        }
        throw std::logic_error("body");
      });
      FAIL() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(ran.load(), 5);  // the finish still waited for the children
      EXPECT_EQ(m.size(), 6u);
      EXPECT_EQ(m.of_type<std::logic_error>().size(), 1u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 5u);
    }
  });
}

TEST_P(Finish, NestedMultipleExceptionsAreFlattened) {
  run_on(GetParam(), [] {
    try {
      apgas::finish([] {
        apgas::async([] {
          apgas::finish([] {
            for (int i = 0; i < 3; ++i) apgas::async([] { throw std::runtime_error("leaf"); });
          });
        });
        apgas::async([] { throw std::out_of_range("other"); });
      });
      FAIL() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 4u);
      EXPECT_EQ(m.of_type<apgas::multiple_exceptions>().size(), 0u);
      EXPECT_EQ(m.of_type<std::out_of_range>().size(), 1u);
    }
  });
}

TEST_P(Finish, EmptyFinishAndNoException) {
  run_on(GetParam(), [] {
    EXPECT_NO_THROW(apgas::finish([] {}));
    int x = 0;
    apgas::finish([&] { apgas::async([&] { x = 42; }); });
    EXPECT_EQ(x, 42);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Finish, testing::ValuesIn(apgas_test::worker_counts));

TEST(At, ReturnsValueAndRethrowsRaw) {
  run_on(2, [] {
    EXPECT_EQ(apgas::at(apgas::here(), [](int a, int b) { return a * b; }, 6, 7), 42);
    EXPECT_THROW(apgas::at(apgas::here(), [] { throw std::out_of_range("raw"); }), std::out_of_range);
    try {
      apgas::at(apgas::here(), [] { throw custom_error(5); });
    } catch (const custom_error& e) {
      EXPECT_EQ(e.value, 5);
    }
  });
}

TEST(At, CopiesArguments) {
  run_on(2, [] {
    std::vector<int> v{1, 2, 3};
    const std::size_t n = apgas::at(
        apgas::here(),
        [](std::vector<int> copy) {
          copy.push_back(4);
          return copy.size();
        },
        v);
    EXPECT_EQ(n, 4u);
    EXPECT_EQ(v.size(), 3u);  // the caller's object is untouched
    std::string s = "abc";
    std::atomic<int> len{0};
    apgas::finish([&] {
      apgas::async_at(
          apgas::here(),
          [](std::string copy, std::atomic<int>* out) {
            copy += "def";
            out->store(static_cast<int>(copy.size()));
          },
          s, &len);
      s = "changed after the call";  // the activity got a copy
    });
    EXPECT_EQ(len.load(), 6);
  });
}

TEST(At, AsyncInsideAtReportsToTheEnclosingFinish) {
  run_on(2, [] {
    std::atomic<int> done{0};
    apgas::finish([&] {
      apgas::at(apgas::here(), [](std::atomic<int>* d) {
        for (int i = 0; i < 10; ++i) apgas::async([d] { d->fetch_add(1); });
      }, &done);
    });
    EXPECT_EQ(done.load(), 10);
  });
}

TEST(FinishCollect, SumsEveryOffer) {
  for (int n : apgas_test::worker_counts) {
    run_on(n, [] {
      const long total = apgas::finish_collect(apgas::sum<long>(), [] {
        for (long i = 1; i <= 10000; ++i) apgas::async([i] { apgas::offer(i); });
      });
      EXPECT_EQ(total, 10000L * 10001L / 2);
    });
  }
}

TEST(FinishCollect, MinMaxAndCustomReducers) {
  run_on(2, [] {
    const int mn = apgas::finish_collect(apgas::min<int>(), [] {
      for (int i = 0; i < 100; ++i) apgas::async([i] { apgas::offer((i * 37) % 101 + 5); });
    });
    EXPECT_EQ(mn, 5);
    const int mx = apgas::finish_collect(apgas::max<int>(), [] {
      for (int i = 0; i < 100; ++i) apgas::async([i] { apgas::offer((i * 37) % 101 - 50); });
    });
    EXPECT_EQ(mx, 50);
    const long prod = apgas::finish_collect(apgas::reducer{1L, std::multiplies<long>{}}, [] {
      for (long i = 1; i <= 10; ++i) apgas::async([i] { apgas::offer(i); });
    });
    EXPECT_EQ(prod, 3628800L);
    EXPECT_EQ(apgas::finish_collect(apgas::sum<int>(), [] {}), 0);
  });
}

TEST(FinishCollect, OffersFromNestedFinishesAndTheBody) {
  run_on(2, [] {
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      apgas::offer(1000L);
      for (int i = 0; i < 10; ++i) {
        apgas::async([] {
          apgas::finish([] {
            for (int j = 0; j < 10; ++j) apgas::async([] { apgas::offer(1L); });
          });
        });
      }
    });
    EXPECT_EQ(total, 1100);
  });
}

TEST(FinishCollect, WrongTypeOrNoCollectingFinish) {
  run_on(1, [] {
    EXPECT_THROW(apgas::offer(1L), apgas::illegal_operation_exception);
    EXPECT_THROW(apgas::finish([] { apgas::offer(1); }), apgas::multiple_exceptions);
    try {
      (void)apgas::finish_collect(apgas::sum<long>(), [] { apgas::offer(1); });  // int, not long
      FAIL();
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 1u);
    }
  });
}
