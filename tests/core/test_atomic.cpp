#include "support/run.hpp"

#include <atomic>
#include <deque>
#include <vector>

using apgas_test::run_on;

class Atomic : public testing::TestWithParam<int> {};

TEST_P(Atomic, PlainCounterIsExact) {
  run_on(GetParam(), [] {
    long counter = 0;  // deliberately not atomic
    apgas::finish([&] {
      for (int i = 0; i < 10000; ++i) apgas::async([&] { apgas::atomic([&] { ++counter; }); });
    });
    EXPECT_EQ(counter, 10000);
  });
}

TEST_P(Atomic, NestedAtomicIsAllowed) {
  run_on(GetParam(), [] {
    long counter = 0;
    apgas::finish([&] {
      for (int i = 0; i < 1000; ++i) {
        apgas::async([&] {
          apgas::atomic([&] {
            ++counter;
            apgas::atomic([&] { ++counter; });
          });
        });
      }
    });
    EXPECT_EQ(counter, 2000);
  });
}

TEST_P(Atomic, WhenIsReleasedByAtomicSectionsOfOthers) {
  run_on(GetParam(), [] {
    int flag = 0;
    std::vector<int> order;
    apgas::finish([&] {
      for (int i = 1; i <= 100; ++i) {
        apgas::async([&, i] { apgas::when([&] { return flag >= i; }, [&] { order.push_back(i); }); });
      }
      apgas::async([&] {
        for (int i = 1; i <= 100; ++i) apgas::atomic([&] { flag = i; });
      });
    });
    EXPECT_EQ(flag, 100);
    EXPECT_EQ(order.size(), 100u);
  });
}

TEST_P(Atomic, WhenChainRunsInOrder) {
  run_on(GetParam(), [] {
    int next = 0;
    std::vector<int> order;
    apgas::finish([&] {
      for (int i = 99; i >= 0; --i) {
        apgas::async([&, i] {
          apgas::when([&] { return next == i; }, [&] {
            order.push_back(i);
            ++next;
          });
        });
      }
    });
    ASSERT_EQ(order.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  });
}

TEST_P(Atomic, BoundedBufferProducersConsumers) {
  run_on(GetParam(), [] {
    constexpr int producers = 4;
    constexpr int items = 500;
    constexpr std::size_t capacity = 8;
    std::deque<std::pair<int, int>> buffer;
    std::vector<std::vector<int>> received(producers);
    int consumed = 0;
    apgas::finish([&] {
      for (int p = 0; p < producers; ++p) {
        apgas::async([&, p] {
          for (int i = 0; i < items; ++i) {
            apgas::when([&] { return buffer.size() < capacity; }, [&] { buffer.emplace_back(p, i); });
          }
        });
      }
      for (int c = 0; c < 3; ++c) {
        apgas::async([&] {
          for (;;) {
            bool stop = false;
            apgas::when([&] { return !buffer.empty() || consumed == producers * items; }, [&] {
              if (buffer.empty()) {
                stop = true;
                return;
              }
              const auto [p, i] = buffer.front();
              buffer.pop_front();
              received[static_cast<std::size_t>(p)].push_back(i);
              ++consumed;
            });
            if (stop) return;
          }
        });
      }
    });
    EXPECT_EQ(consumed, producers * items);
    for (const auto& r : received) {
      ASSERT_EQ(r.size(), static_cast<std::size_t>(items));
      for (int i = 0; i < items; ++i) EXPECT_EQ(r[static_cast<std::size_t>(i)], i);  // each producer's order kept
    }
  });
}

TEST_P(Atomic, WhenAlreadyTrueRunsAtOnce) {
  run_on(GetParam(), [] {
    int x = 0;
    apgas::when([] { return true; }, [&] { x = 1; });
    EXPECT_EQ(x, 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Atomic, testing::ValuesIn(apgas_test::worker_counts));

namespace {
// Every operation that is illegal inside an atomic or when body.
template <class Section>
void expect_illegal_inside(Section section) {
  const std::vector<std::pair<const char*, void (*)()>> ops = {
      {"async", [] { apgas::async([] {}); }},
      {"finish", [] { apgas::finish([] {}); }},
      {"at", [] { apgas::at(apgas::here(), [] {}); }},
      {"async_at", [] { apgas::async_at(apgas::here(), [] {}); }},
      {"when", [] { apgas::when([] { return true; }, [] {}); }},
      {"clock::make", [] { (void)apgas::clock::make(); }},
      {"clocked_finish", [] { apgas::clocked_finish([] {}); }},
      {"finish_collect", [] { (void)apgas::finish_collect(apgas::sum<int>(), [] {}); }},
  };
  for (const auto& [name, op] : ops) {
    bool thrown = false;
    section([&] {
      try {
        op();
      } catch (const apgas::illegal_operation_exception&) {
        thrown = true;
      }
    });
    EXPECT_TRUE(thrown) << name << " inside an atomic section did not throw";
  }
}
}  // namespace

TEST(Atomic, IllegalOperationsInsideAtomicAndWhen) {
  run_on(2, [] {
    expect_illegal_inside([](auto body) { apgas::atomic(body); });
    expect_illegal_inside([](auto body) { apgas::when([] { return true; }, body); });
    // clock operations on a clock the activity is registered on
    apgas::clock c = apgas::clock::make();
    for (auto op : {0, 1, 2, 3}) {
      bool thrown = false;
      apgas::atomic([&] {
        try {
          if (op == 0) c.advance();
          if (op == 1) c.resume();
          if (op == 2) c.drop();
          if (op == 3) apgas::clocked_async({c}, [] {});
        } catch (const apgas::illegal_operation_exception&) {
          thrown = true;
        }
      });
      EXPECT_TRUE(thrown) << "clock operation " << op;
    }
    EXPECT_TRUE(c.registered());
    c.drop();
    // The monitor was released every time: a later atomic section and when still work.
    int x = 0;
    apgas::finish([&] { apgas::async([&] { apgas::atomic([&] { ++x; }); }); });
    apgas::when([&] { return x == 1; }, [&] { ++x; });
    EXPECT_EQ(x, 2);
  });
}

TEST(Atomic, ExceptionLeavesTheSectionAndPropagates) {
  run_on(2, [] {
    EXPECT_THROW(apgas::atomic([] { throw std::runtime_error("in atomic"); }), std::runtime_error);
    EXPECT_THROW(apgas::when([]() -> bool { throw std::runtime_error("in cond"); }, [] {}), std::runtime_error);
    EXPECT_THROW(apgas::when([] { return true; }, [] { throw std::runtime_error("in body"); }), std::runtime_error);
    int x = 0;
    apgas::atomic([&] { x = 1; });  // the monitor is free
    EXPECT_EQ(x, 1);
  });
}
