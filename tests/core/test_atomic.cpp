// atomic and when: mutual exclusion, conditional waits released by other activities' atomic sections, and the
// operations that are illegal inside them.
#include "support/run.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using apgas_test::run_on;

namespace {

// True if another activity can take the monitor now (the caller must hold no atomic section). A monitor left
// locked makes this hang, which the test's timeout reports.
bool monitor_is_free() {
  int probe = 0;
  apgas::finish([&] { apgas::async([&] { apgas::atomic([&] { ++probe; }); }); });
  return probe == 1;
}

}  // namespace

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

TEST_P(Atomic, ReadModifyWriteOfSeveralVariablesIsIndivisible) {
  run_on(GetParam(), [] {
    // Two plain variables whose sum is invariant under every atomic section; a reader checks it.
    long a = 1000000;
    long b = 0;
    std::atomic<int> broken{0};
    apgas::finish([&] {
      for (int i = 0; i < 2000; ++i) {
        apgas::async([&, i] {
          if (i % 2 == 0) {
            apgas::atomic([&] {
              --a;
              ++b;
            });
          } else {
            apgas::atomic([&] {
              if (a + b != 1000000) broken++;
            });
          }
        });
      }
    });
    EXPECT_EQ(broken.load(), 0);
    EXPECT_EQ(a, 1000000 - 1000);
    EXPECT_EQ(b, 1000);
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
            apgas::atomic([&] {
              ++counter;
              apgas::atomic([&] { ++counter; });
            });
            ++counter;
          });
        });
      }
    });
    EXPECT_EQ(counter, 4000);
    EXPECT_TRUE(monitor_is_free());
  });
}

TEST_P(Atomic, AtomicInsideAWhenBodyIsAllowed) {
  run_on(GetParam(), [] {
    long counter = 0;
    apgas::finish([&] {
      for (int i = 0; i < 500; ++i) {
        apgas::async([&] {
          apgas::when([] { return true; }, [&] {
            ++counter;
            apgas::atomic([&] { ++counter; });
          });
        });
      }
    });
    EXPECT_EQ(counter, 1000);
    EXPECT_TRUE(monitor_is_free());
  });
}

TEST_P(Atomic, WhenIsReleasedByAtomicSectionsOfOtherActivities) {
  run_on(GetParam(), [] {
    constexpr int n = 100;
    int flag = 0;
    std::vector<int> seen(n + 1, -1);  // the flag value activity i saw in its body
    std::atomic<int> released{0};
    apgas::finish([&] {
      for (int i = 1; i <= n; ++i) {
        apgas::async([&, i] {
          apgas::when([&] { return flag >= i; }, [&] { seen[static_cast<std::size_t>(i)] = flag; });
          released++;
        });
      }
      apgas::async([&] {
        for (int i = 1; i <= n; ++i) apgas::atomic([&] { flag = i; });
      });
    });
    EXPECT_EQ(flag, n);
    EXPECT_EQ(released.load(), n);
    // The body runs atomically with the successful test: it saw a flag value that satisfies its condition.
    for (int i = 1; i <= n; ++i) EXPECT_GE(seen[static_cast<std::size_t>(i)], i) << "activity " << i;
  });
}

TEST_P(Atomic, WhenRetestsOnlyWhenAnAtomicSectionEnds) {
  run_on(GetParam(), [] {
    // One waiter and 10 atomic sections with a 2 ms pause after each: a spinning when would test its condition
    // thousands of times meanwhile; ours tests once on entry and at most once per ended section (each wakes it).
    int flag = 0;
    std::atomic<int> tests{0};
    apgas::finish([&] {
      apgas::async([&] {
        apgas::async([&] {
          for (int i = 1; i <= 10; ++i) {
            apgas::atomic([&] { flag = i; });
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
            while (std::chrono::steady_clock::now() < until) {
            }
          }
        });
        apgas::when([&] {
          tests++;
          return flag == 10;
        }, [] {});
      });
    });
    EXPECT_GE(tests.load(), 1);
    EXPECT_LE(tests.load(), 11);
  });
}

TEST_P(Atomic, WhenChainRunsInOrder) {
  run_on(GetParam(), [] {
    // 100 activities, spawned in reverse: activity i waits for next == i, so they must run 0, 1, ..., 99.
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

TEST_P(Atomic, WhenTestAndBodyAreOneAtomicStep) {
  run_on(GetParam(), [] {
    // 1000 consumers each take one token when one is there; a producer adds them one by one. If the test and the
    // body were not one step, two consumers could take the same token and the count would go negative.
    constexpr int n = 1000;
    int tokens = 0;
    int taken = 0;
    std::atomic<int> negative{0};
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&] {
          apgas::when([&] { return tokens > 0; }, [&] {
            --tokens;
            ++taken;
            if (tokens < 0) negative++;
          });
        });
      }
      apgas::async([&] {
        for (int i = 0; i < n; ++i) apgas::atomic([&] { ++tokens; });
      });
    });
    EXPECT_EQ(negative.load(), 0);
    EXPECT_EQ(tokens, 0);
    EXPECT_EQ(taken, n);
  });
}

TEST_P(Atomic, BoundedBufferProducersConsumers) {
  run_on(GetParam(), [] {
    constexpr int producers = 4;
    constexpr int consumers = 3;
    constexpr int items = 500;
    constexpr std::size_t capacity = 8;
    std::deque<std::pair<int, int>> buffer;
    std::vector<std::vector<int>> received(producers);
    int consumed = 0;
    std::size_t max_size = 0;
    std::atomic<int> consumers_done{0};
    apgas::finish([&] {
      for (int p = 0; p < producers; ++p) {
        apgas::async([&, p] {
          for (int i = 0; i < items; ++i) {
            apgas::when([&] { return buffer.size() < capacity; }, [&] {
              buffer.emplace_back(p, i);
              max_size = std::max(max_size, buffer.size());
            });
          }
        });
      }
      for (int c = 0; c < consumers; ++c) {
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
            if (stop) break;
          }
          consumers_done++;
        });
      }
    });
    EXPECT_EQ(consumers_done.load(), consumers);
    EXPECT_EQ(consumed, producers * items);
    EXPECT_TRUE(buffer.empty());
    EXPECT_LE(max_size, capacity);
    for (int p = 0; p < producers; ++p) {
      const auto& r = received[static_cast<std::size_t>(p)];
      ASSERT_EQ(r.size(), static_cast<std::size_t>(items)) << "producer " << p;
      // Every item exactly once, in the producer's order (one FIFO buffer).
      for (int i = 0; i < items; ++i) EXPECT_EQ(r[static_cast<std::size_t>(i)], i) << "producer " << p;
    }
  });
}

TEST_P(Atomic, WhenAlreadyTrueRunsAtOnce) {
  run_on(GetParam(), [] {
    int x = 0;
    apgas::when([] { return true; }, [&] { x = 1; });
    EXPECT_EQ(x, 1);
    int y = 5;
    apgas::when([&] { return y == 5; }, [&] { y = 6; });
    EXPECT_EQ(y, 6);
  });
}

TEST_P(Atomic, ExceptionLeavesTheSectionAndPropagates) {
  run_on(GetParam(), [] {
    EXPECT_THROW(apgas::atomic([] { throw std::runtime_error("in atomic"); }), std::runtime_error);
    EXPECT_TRUE(monitor_is_free());
    EXPECT_THROW(apgas::atomic([] { apgas::atomic([] { throw std::runtime_error("nested"); }); }), std::runtime_error);
    EXPECT_TRUE(monitor_is_free());
    EXPECT_THROW(apgas::when([]() -> bool { throw std::runtime_error("in cond"); }, [] {}), std::runtime_error);
    EXPECT_TRUE(monitor_is_free());
    EXPECT_THROW(apgas::when([] { return true; }, [] { throw std::runtime_error("in body"); }), std::runtime_error);
    EXPECT_TRUE(monitor_is_free());
    // And the activity is no longer "inside atomic": finish and async are legal again.
    int x = 0;
    apgas::finish([&] { apgas::async([&] { x = 1; }); });
    EXPECT_EQ(x, 1);
    // An exception from a when body in another activity reaches its finish and frees the monitor too.
    try {
      apgas::finish([] { apgas::async([] { apgas::when([] { return true; }, [] { throw std::out_of_range("w"); }); }); });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.of_type<std::out_of_range>().size(), 1u);
    }
    EXPECT_TRUE(monitor_is_free());
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Atomic, testing::ValuesIn(apgas_test::worker_counts), apgas_test::workers_name);

TEST(Atomic, WhenAlreadyTrueDoesNotYieldToOtherActivities) {
  // With one worker, a child can only run if the main activity blocks: a when whose condition holds must not.
  run_on(1, [] {
    int child_ran = 0;
    int seen = -1;
    apgas::finish([&] {
      apgas::async([&] { apgas::atomic([&] { child_ran = 1; }); });
      apgas::when([] { return true; }, [&] { seen = child_ran; });
    });
    EXPECT_EQ(seen, 0);
    EXPECT_EQ(child_ran, 1);
  });
}

// ---- illegal operations inside atomic and when bodies ----

namespace {

// One operation to try inside a section; `ran` must stay false (the illegal operation did nothing).
struct illegal_op {
  const char* name;
  std::function<void(bool& ran)> op;
};

std::vector<illegal_op> illegal_ops(apgas::clock& c, apgas::remote_array<int> a) {
  return {
      // Copies between arrays of this host are a memmove, but still counted work: refused like the others.
      {"async_copy(span -> local array)", [a](bool& ran) {
         static const int one[1] = {7};
         apgas::async_copy(std::span<const int>(one), a);
         ran = a.data()[0] == 7;
       }},
      {"async_copy(local array -> span)", [a](bool&) {
         int out[1] = {0};
         apgas::async_copy(a, 0, std::span<int>(out));
       }},
      {"async_copy(local array -> local array)", [a](bool&) { apgas::async_copy(a, 0, a, 1, 1); }},
      {"async", [](bool& ran) { apgas::async([&ran] { ran = true; }); }},
      {"async_at", [](bool& ran) { apgas::async_at(apgas::here(), [p = &ran] { *p = true; }); }},
      {"finish", [](bool& ran) { apgas::finish([&ran] { ran = true; }); }},
      {"finish_collect", [](bool& ran) { (void)apgas::finish_collect(apgas::sum<int>(), [&ran] { ran = true; }); }},
      {"at", [](bool& ran) { (void)apgas::at(apgas::here(), [p = &ran] { *p = true; }); }},
      {"when", [](bool& ran) { apgas::when([] { return true; }, [&ran] { ran = true; }); }},
      {"clock::make", [](bool&) { (void)apgas::clock::make(); }},
      {"clock::advance", [&c](bool&) { c.advance(); }},
      {"clock::resume", [&c](bool&) { c.resume(); }},
      {"clock::drop", [&c](bool&) { c.drop(); }},
      {"clocked_async", [&c](bool& ran) { apgas::clocked_async({c}, [&ran] { ran = true; }); }},
      {"clocked_async_at", [&c](bool& ran) { apgas::clocked_async_at(apgas::here(), {c}, [p = &ran] { *p = true; }); }},
      {"clocked_async(implicit)", [](bool& ran) { apgas::clocked_async([&ran] { ran = true; }); }},
      {"clocked_finish", [](bool& ran) { apgas::clocked_finish([&ran] { ran = true; }); }},
      {"advance_all", [](bool&) { apgas::advance_all(); }},
      {"resume_all", [](bool&) { apgas::resume_all(); }},
  };
}

// Try every illegal operation inside `section` (which runs its argument inside an atomic or when body). Each must
// throw illegal_operation_exception, do nothing, and leave the monitor free and the activity unrestricted.
template <class Section>
void expect_illegal_inside(const char* where, Section section) {
  // Inside a clocked_finish, so that the implicit clocked_async form has a clock to (wrongly) register on.
  auto a = apgas::make_remote_array<int>(apgas::here(), 2);
  apgas::clocked_finish([&] {
    apgas::clock c = apgas::clock::make();
    for (const illegal_op& o : illegal_ops(c, a)) {
      bool thrown = false;
      bool ran = false;
      std::string other;
      section([&] {
        try {
          o.op(ran);
        } catch (const apgas::illegal_operation_exception&) {
          thrown = true;
        } catch (const std::exception& e) {
          other = e.what();
        }
      });
      EXPECT_TRUE(thrown) << o.name << " inside " << where << " did not throw illegal_operation_exception"
                          << (other.empty() ? "" : ", it threw: " + other);
      EXPECT_FALSE(ran) << o.name << " inside " << where << " ran its body";
      // The clock is untouched: still registered, still in phase 1.
      EXPECT_TRUE(c.registered()) << "after " << o.name << " inside " << where;
      EXPECT_EQ(c.phase(), 1) << "after " << o.name << " inside " << where;
      // The section was released: another activity can take the monitor.
      EXPECT_TRUE(monitor_is_free()) << "after " << o.name << " inside " << where;
    }
    c.drop();
    EXPECT_FALSE(c.registered());
  });
  apgas::free_remote_array(a);
}

}  // namespace

class AtomicIllegal : public testing::TestWithParam<int> {};

TEST_P(AtomicIllegal, InsideAtomic) {
  run_on(GetParam(), [] { expect_illegal_inside("atomic", [](auto body) { apgas::atomic(body); }); });
}

TEST_P(AtomicIllegal, InsideNestedAtomic) {
  run_on(GetParam(), [] {
    expect_illegal_inside("nested atomic", [](auto body) { apgas::atomic([&] { apgas::atomic(body); }); });
  });
}

TEST_P(AtomicIllegal, InsideWhenBody) {
  run_on(GetParam(), [] { expect_illegal_inside("when", [](auto body) { apgas::when([] { return true; }, body); }); });
}

TEST_P(AtomicIllegal, InsideAWhenBodyReleasedByAnotherActivity) {
  run_on(GetParam(), [] {
    // The when parks first, and its body runs after another activity's atomic section woke it.
    expect_illegal_inside("a woken when", [](auto body) {
      int go = 0;
      apgas::finish([&] {
        apgas::async([&] {
          apgas::finish([] { apgas::async([] {}); });
          apgas::atomic([&] { go = 1; });
        });
        apgas::when([&] { return go == 1; }, body);
      });
    });
  });
}

TEST_P(AtomicIllegal, InsideAtomicInAChildActivity) {
  run_on(GetParam(), [] {
    std::atomic<int> thrown{0};
    apgas::finish([&] {
      for (int i = 0; i < 100; ++i) {
        apgas::async([&] {
          apgas::atomic([&] {
            try {
              apgas::async([] {});
            } catch (const apgas::illegal_operation_exception&) {
              thrown++;
            }
          });
          // Outside the section again: legal.
          apgas::finish([] { apgas::async([] {}); });
        });
      }
    });
    EXPECT_EQ(thrown.load(), 100);
    EXPECT_TRUE(monitor_is_free());
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, AtomicIllegal, testing::ValuesIn(apgas_test::worker_counts),
                         apgas_test::workers_name);
