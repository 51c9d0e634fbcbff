// finish, async, at, async_at, finish_collect/offer, and the worker queries.
#include "support/run.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using apgas_test::run_on;

namespace {

struct custom_error : std::exception {
  explicit custom_error(int v) : value(v) {}
  const char* what() const noexcept override { return "custom_error"; }
  int value;
};

// A tree of activities: every node counts itself and spawns `fan` children until depth 0.
void tree(int depth, int fan, std::atomic<long>& count) {
  count.fetch_add(1, std::memory_order_relaxed);
  if (depth == 0) return;
  for (int i = 0; i < fan; ++i) apgas::async([depth, fan, &count] { tree(depth - 1, fan, count); });
}

// A chain: each activity spawns the next one and ends at once, so the last one runs long after its ancestors ended.
void chain(int remaining, std::atomic<int>& count, std::atomic<bool>& last_done) {
  count++;
  if (remaining == 0) {
    last_done = true;
    return;
  }
  apgas::async([remaining, &count, &last_done] { chain(remaining - 1, count, last_done); });
}

// Nested finishes, one per level: level k's finish ends only after level k+1's. Returns the depth reached.
int nested(int depth) {
  if (depth == 0) return 0;
  int below = -1;
  apgas::finish([&] { apgas::async([&] { below = nested(depth - 1); }); });
  return below + 1;
}

}  // namespace

class Finish : public testing::TestWithParam<int> {};

TEST_P(Finish, EmptyFinishAndPlainAsync) {
  run_on(GetParam(), [] {
    EXPECT_NO_THROW(apgas::finish([] {}));
    int x = 0;  // plain int: finish orders the child's write before the code after it
    apgas::finish([&] { apgas::async([&] { x = 42; }); });
    EXPECT_EQ(x, 42);
  });
}

// A closure's captures are destroyed as part of its activity: a destructor may call apgas (here atomic, which
// needs an activity). They used to be destroyed after the worker had left the activity when it ran from a worker's
// loop (the call threw, and from a destructor that is std::terminate).
TEST_P(Finish, CapturesAreDestroyedInsideTheirActivity) {
  run_on(GetParam(), [] {
    std::atomic<int> inside{0}, outside{0};
    struct probe {
      std::atomic<int>* in;
      std::atomic<int>* out;
      bool armed = false;
      probe(std::atomic<int>* i, std::atomic<int>* o) : in(i), out(o) {}
      probe(const probe& p) : in(p.in), out(p.out), armed(true) {}
      ~probe() {
        if (!armed) return;
        try {
          apgas::atomic([] {});
          ++*in;
        } catch (const apgas::illegal_operation_exception&) {
          ++*out;
        }
      }
    };
    const probe p(&inside, &outside);
    apgas::finish([&] {
      for (int i = 0; i < 1000; ++i) apgas::async([p] { (void)p; });
    });
    EXPECT_EQ(outside.load(), 0);
    EXPECT_GE(inside.load(), 1000);
  });
}

namespace {
struct alignas(64) padded_counter {
  long value = 0;
};
// (out of line: the compiler cannot assume the alignment the type promises and fold the test away)
[[gnu::noinline]] bool aligned_64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }
}  // namespace

// A capture of an over-aligned type is built at its alignment (the task cache's blocks are 16-byte aligned: 3 of 4
// such closures were misaligned, and an AVX vector captured by value crashed on an aligned store).
TEST_P(Finish, OverAlignedCapturesAreAligned) {
  run_on(GetParam(), [] {
    std::atomic<int> misaligned{0}, ran{0};
    apgas::finish([&] {
      for (int i = 0; i < 1000; ++i) {
        const padded_counter c{i};
        apgas::async([c, &misaligned, &ran] {
          if (!aligned_64(&c)) misaligned.fetch_add(1);
          if (c.value >= 0) ran.fetch_add(1);
        });
      }
    });
    EXPECT_EQ(ran.load(), 1000);
    EXPECT_EQ(misaligned.load(), 0);
  });
}

TEST_P(Finish, NestedFinishCompletesBeforeTheCodeAfterIt) {
  run_on(GetParam(), [] {
    constexpr int outer_n = 20;
    constexpr int inner_n = 25;
    std::vector<std::atomic<int>> inner(outer_n);  // children of each inner finish
    std::vector<int> seen_after(outer_n, -1);       // what the code after each inner finish saw
    apgas::finish([&] {
      for (int i = 0; i < outer_n; ++i) {
        apgas::async([&, i] {
          apgas::finish([&, i] {
            for (int j = 0; j < inner_n; ++j) apgas::async([&, i] { inner[static_cast<std::size_t>(i)]++; });
          });
          seen_after[static_cast<std::size_t>(i)] = inner[static_cast<std::size_t>(i)].load();
        });
      }
    });
    for (int i = 0; i < outer_n; ++i) {
      EXPECT_EQ(seen_after[static_cast<std::size_t>(i)], inner_n) << "inner finish " << i << " returned early";
      EXPECT_EQ(inner[static_cast<std::size_t>(i)].load(), inner_n);
    }
  });
}

TEST_P(Finish, ThreeLevelsOfNestingInOrder) {
  run_on(GetParam(), [] {
    std::atomic<int> leaves{0};
    std::atomic<int> bad{0};
    apgas::finish([&] {
      for (int a = 0; a < 4; ++a) {
        apgas::async([&] {
          std::atomic<int> mine{0};
          apgas::finish([&] {
            for (int b = 0; b < 4; ++b) {
              apgas::async([&] {
                std::atomic<int> mine2{0};
                apgas::finish([&] {
                  for (int c = 0; c < 8; ++c) {
                    apgas::async([&] {
                      mine2++;
                      mine++;
                      leaves++;
                    });
                  }
                });
                if (mine2.load() != 8) bad++;
              });
            }
          });
          if (mine.load() != 32) bad++;
        });
      }
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(leaves.load(), 128);
  });
}

TEST_P(Finish, WaitsForATreeOfTenThousandActivities) {
  run_on(GetParam(), [] {
    std::atomic<long> count{0};
    apgas::finish([&] { tree(8, 3, count); });  // 1 + 3 + ... + 3^8 = 9841 activities
    EXPECT_EQ(count.load(), 9841);
    count = 0;
    apgas::finish([&] { tree(13, 2, count); });  // 2^14 - 1 = 16383 activities
    EXPECT_EQ(count.load(), 16383);
  });
}

TEST_P(Finish, WaitsForGrandchildrenThatOutliveTheirParents) {
  run_on(GetParam(), [] {
    std::atomic<int> count{0};
    std::atomic<bool> last_done{false};
    apgas::finish([&] { chain(2000, count, last_done); });
    EXPECT_TRUE(last_done.load());
    EXPECT_EQ(count.load(), 2001);

    // A grandchild that is blocked (in when) after its parent and grandparent ended; a sibling releases it.
    int gate = 0;
    bool grandchild_done = false;
    apgas::finish([&] {
      apgas::async([&] {
        apgas::async([&] {
          apgas::async([&] { apgas::when([&] { return gate == 1; }, [&] { grandchild_done = true; }); });
        });
      });
      apgas::async([&] {
        for (int i = 0; i < 100; ++i) apgas::finish([] { apgas::async([] {}); });  // let the chain above start
        apgas::atomic([&] { gate = 1; });
      });
    });
    EXPECT_TRUE(grandchild_done);
  });
}

TEST_P(Finish, DeeplyNestedFinishes) {
  run_on(GetParam(), [] { EXPECT_EQ(nested(200), 200); });
}

TEST_P(Finish, AggregatesExceptionsOfEveryAsyncWithExactCounts) {
  run_on(GetParam(), [] {
    std::atomic<int> ran{0};
    const std::exception_ptr e = [&]() -> std::exception_ptr {
      try {
        apgas::finish([&] {
          for (int i = 0; i < 1000; ++i) {
            apgas::async([i, &ran] {
              ran++;
              if (i % 7 == 0) throw std::runtime_error("every seventh");
              throw custom_error(i);
            });
          }
        });
      } catch (...) {
        return std::current_exception();
      }
      return nullptr;
    }();
    EXPECT_EQ(ran.load(), 1000);  // an exception cancels nothing: every sibling ran
    const bool is_multiple = apgas_test::inspect_as<apgas::multiple_exceptions>(e, [](const auto& m) {
      EXPECT_EQ(m.size(), 1000u);
      EXPECT_EQ(m.exceptions().size(), 1000u);
      EXPECT_EQ(m.template of_type<std::runtime_error>().size(), 143u);  // 0, 7, ..., 994
      const auto customs = m.template of_type<custom_error>();
      EXPECT_EQ(customs.size(), 857u);
      long sum = 0;
      for (const custom_error* c : customs) sum += c->value;
      long expected = 0;
      for (int i = 0; i < 1000; ++i) expected += (i % 7 != 0) ? i : 0;
      EXPECT_EQ(sum, expected);  // each custom exception exactly once
      EXPECT_EQ(m.template of_type<std::exception>().size(), 1000u);
      EXPECT_EQ(m.template of_type<apgas::multiple_exceptions>().size(), 0u);
    });
    EXPECT_TRUE(is_multiple) << "finish did not throw multiple_exceptions";
  });
}

TEST_P(Finish, AggregatesSomeFailuresAmongSuccesses) {
  run_on(GetParam(), [] {
    std::atomic<int> ok{0};
    try {
      apgas::finish([&] {
        for (int i = 0; i < 1000; ++i) {
          apgas::async([i, &ok] {
            if (i % 7 == 0) throw std::runtime_error("seven");
            if (i % 11 == 0) throw custom_error(i);
            ok++;
          });
        }
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      // multiples of 7 below 1000: 143; multiples of 11 that are not multiples of 7: 91 - 13 = 78
      EXPECT_EQ(m.size(), 143u + 78u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 143u);
      EXPECT_EQ(m.of_type<custom_error>().size(), 78u);
    }
    EXPECT_EQ(ok.load(), 1000 - 143 - 78);
  });
}

TEST_P(Finish, CollectsExceptionsNotDerivedFromStdException) {
  run_on(GetParam(), [] {
    try {
      apgas::finish([] {
        for (int i = 0; i < 30; ++i) {
          apgas::async([i] {
            if (i % 3 == 0) throw i;
            if (i % 3 == 1) throw std::string("text");
          });
        }
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 20u);
      const auto ints = m.of_type<int>();
      ASSERT_EQ(ints.size(), 10u);
      int sum = 0;
      for (const int* v : ints) sum += *v;
      EXPECT_EQ(sum, 0 + 3 + 6 + 9 + 12 + 15 + 18 + 21 + 24 + 27);
      EXPECT_EQ(m.of_type<std::string>().size(), 10u);
      EXPECT_EQ(m.of_type<std::exception>().size(), 0u);
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
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(ran.load(), 5);  // the finish still waited for the children
      EXPECT_EQ(m.size(), 6u);
      EXPECT_EQ(m.of_type<std::logic_error>().size(), 1u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 5u);
    }
  });
}

TEST_P(Finish, BodyExceptionAloneIsWrappedAndTheChildrenAreAwaited) {
  run_on(GetParam(), [] {
    std::atomic<int> ran{0};
    try {
      apgas::finish([&] {
        for (int i = 0; i < 50; ++i) apgas::async([&] { ran++; });
        throw custom_error(7);
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(ran.load(), 50);
      ASSERT_EQ(m.size(), 1u);
      const auto c = m.of_type<custom_error>();
      ASSERT_EQ(c.size(), 1u);
      EXPECT_EQ(c[0]->value, 7);
    } catch (const custom_error&) {
      ADD_FAILURE() << "the body's exception escaped the finish unwrapped";
    }
  });
}

TEST_P(Finish, NestedMultipleExceptionsAreFlattened) {
  run_on(GetParam(), [] {
    // An inner finish throws 3; uncaught in an async of the outer finish: the outer has exactly those 3 leaves.
    try {
      apgas::finish([] {
        apgas::async([] {
          apgas::finish([] {
            for (int i = 0; i < 3; ++i) apgas::async([i] { throw custom_error(i); });
          });
        });
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 3u);
      EXPECT_EQ(m.of_type<apgas::multiple_exceptions>().size(), 0u);
      const auto c = m.of_type<custom_error>();
      ASSERT_EQ(c.size(), 3u);
      EXPECT_EQ(c[0]->value + c[1]->value + c[2]->value, 0 + 1 + 2);
    }
    // The same with a sibling's own exception and with the inner finish in the body of the outer one.
    try {
      apgas::finish([] {
        apgas::async([] {
          apgas::finish([] {
            for (int i = 0; i < 3; ++i) apgas::async([] { throw std::runtime_error("leaf"); });
          });
        });
        apgas::async([] { throw std::out_of_range("other"); });
        apgas::finish([] {
          apgas::async([] { throw std::length_error("in body 1"); });
          apgas::async([] { throw std::length_error("in body 2"); });
        });
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 6u);
      EXPECT_EQ(m.of_type<apgas::multiple_exceptions>().size(), 0u);
      EXPECT_EQ(m.of_type<std::out_of_range>().size(), 1u);
      EXPECT_EQ(m.of_type<std::length_error>().size(), 2u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 3u);  // length_error and out_of_range are logic_errors
    }
  });
}

TEST_P(Finish, FlatteningThroughThreeLevels) {
  run_on(GetParam(), [] {
    try {
      apgas::finish([] {
        for (int a = 0; a < 2; ++a) {
          apgas::async([] {
            apgas::finish([] {
              for (int b = 0; b < 3; ++b) {
                apgas::async([] {
                  apgas::finish([] {
                    for (int c = 0; c < 4; ++c) apgas::async([] { throw custom_error(1); });
                  });
                });
              }
            });
          });
        }
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 24u);
      EXPECT_EQ(m.of_type<custom_error>().size(), 24u);
    }
  });
}

TEST_P(Finish, ACaughtInnerFailureDoesNotReachTheOuterFinish) {
  run_on(GetParam(), [] {
    std::atomic<int> caught{0};
    EXPECT_NO_THROW(apgas::finish([&] {
      for (int i = 0; i < 10; ++i) {
        apgas::async([&] {
          try {
            apgas::finish([] { apgas::async([] { throw std::runtime_error("handled"); }); });
          } catch (const apgas::multiple_exceptions& m) {
            if (m.size() == 1) caught++;
          }
        });
      }
    }));
    EXPECT_EQ(caught.load(), 10);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Finish, testing::ValuesIn(apgas_test::worker_counts), apgas_test::workers_name);

// ---- at / async_at at the current place ----

class At : public testing::TestWithParam<int> {};

TEST_P(At, ReturnsTheValue) {
  run_on(GetParam(), [] {
    EXPECT_EQ(apgas::at(apgas::here(), [](int a, int b) { return a * b; }, 6, 7), 42);
    EXPECT_EQ(apgas::at(apgas::place_of(0), [] { return 2.5; }), 2.5);
    const std::string s = apgas::at(apgas::here(), [](std::string x) { return x + "!"; }, std::string("hi"));
    EXPECT_EQ(s, "hi!");
    int out = 0;
    int* po = &out;
    apgas::at(apgas::here(), [po] { *po = 9; });  // void
    EXPECT_EQ(out, 9);
    // at inside activities
    std::atomic<long> sum{0};
    apgas::finish([&] {
      for (int i = 0; i < 100; ++i) {
        apgas::async([i, &sum] { sum += apgas::at(apgas::here(), [](int v) { return v * 2; }, i); });
      }
    });
    EXPECT_EQ(sum.load(), 2 * 4950);
  });
}

TEST_P(At, RethrowsTheExceptionRaw) {
  run_on(GetParam(), [] {
    try {
      (void)apgas::at(apgas::here(), [] { throw custom_error(5); });
      ADD_FAILURE() << "at did not throw";
    } catch (const custom_error& e) {
      EXPECT_EQ(e.value, 5);
    } catch (const apgas::multiple_exceptions&) {
      ADD_FAILURE() << "at wrapped its exception in multiple_exceptions";
    }
    try {
      (void)apgas::at(apgas::here(), [](int v) -> int { throw std::out_of_range("raw " + std::to_string(v)); }, 3);
      ADD_FAILURE() << "at did not throw";
    } catch (const apgas::multiple_exceptions&) {
      ADD_FAILURE() << "at wrapped its exception in multiple_exceptions";
    } catch (const std::out_of_range& e) {
      EXPECT_STREQ(e.what(), "raw 3");
    }
  });
}

TEST_P(At, CopiesItsArguments) {
  run_on(GetParam(), [] {
    std::vector<int> v{1, 2, 3};
    // Taken by value...
    const std::size_t n1 = apgas::at(
        apgas::here(),
        [](std::vector<int> copy) {
          copy.push_back(4);
          return copy.size();
        },
        v);
    EXPECT_EQ(n1, 4u);
    // ...or by reference: the reference is to at's copy, never to the caller's object.
    const std::size_t n2 = apgas::at(
        apgas::here(),
        [](std::vector<int>& ref) {
          ref.push_back(5);
          ref[0] = 100;
          return ref.size();
        },
        v);
    EXPECT_EQ(n2, 4u);
    EXPECT_EQ(v, (std::vector<int>{1, 2, 3}));  // the caller's object is untouched
    std::string s = "abc";
    (void)apgas::at(apgas::here(), [](std::string& r) { return r.append("def").size(); }, s);
    EXPECT_EQ(s, "abc");
  });
}

TEST_P(At, AsyncsInsideAtReportToTheCallersFinish) {
  run_on(GetParam(), [] {
    std::atomic<int> done{0};
    apgas::finish([&] {
      // A pointer may be captured (the closure is trivially copyable) but not passed as an argument: arguments
      // are serialized, and an address means nothing at another place.
      apgas::at(apgas::here(), [d = &done] {
        for (int i = 0; i < 10; ++i) {
          apgas::async([d] {
            apgas::finish([d] { apgas::async([d] { d->fetch_add(1); }); });
            d->fetch_add(1);
          });
        }
      });
    });
    EXPECT_EQ(done.load(), 20);
    // Their exceptions go to that finish too; at itself returns normally.
    bool at_returned = false;
    try {
      apgas::finish([&] {
        apgas::at(apgas::here(), [] { apgas::async([] { throw custom_error(11); }); });
        at_returned = true;
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      ASSERT_EQ(m.of_type<custom_error>().size(), 1u);
      EXPECT_EQ(m.of_type<custom_error>()[0]->value, 11);
    }
    EXPECT_TRUE(at_returned);
  });
}

TEST_P(At, AsyncAtCopiesTheClosureAndTheArguments) {
  run_on(GetParam(), [] {
    // The activity waits (when) until the caller has changed its objects, so a reference would see the change.
    std::string s = "abc";
    int k = 7;
    int gate = 0;
    int* g = &gate;
    std::string seen_s;
    int seen_k = 0;
    std::string* out_s = &seen_s;
    int* out_k = &seen_k;
    apgas::finish([&] {
      apgas::async_at(
          apgas::here(),
          [k, g, out_s, out_k](std::string copy, std::vector<int> v) {
            apgas::when([g] { return *g == 1; }, [] {});
            copy += "def";
            *out_s = copy + std::to_string(v.size());
            *out_k = k;
          },
          s, std::vector<int>(3, 0));
      s = "changed after async_at";
      k = -1;
      apgas::atomic([&] { gate = 1; });
    });
    EXPECT_EQ(seen_s, "abcdef3");
    EXPECT_EQ(seen_k, 7);
  });
}

TEST_P(At, AsyncAtIsGovernedByTheEnclosingFinish) {
  run_on(GetParam(), [] {
    std::atomic<int> count{0};
    apgas::finish([&] {
      for (int i = 0; i < 1000; ++i) {
        apgas::async_at(apgas::here(), [c = &count](int v) { c->fetch_add(v); }, 1);
      }
    });
    EXPECT_EQ(count.load(), 1000);
    try {
      apgas::finish([] {
        for (int i = 0; i < 4; ++i) apgas::async_at(apgas::here(), [](int v) { throw custom_error(v); }, i);
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.of_type<custom_error>().size(), 4u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, At, testing::ValuesIn(apgas_test::worker_counts), apgas_test::workers_name);

// ---- collecting finish ----

class FinishCollect : public testing::TestWithParam<int> {};

TEST_P(FinishCollect, SumsEveryOfferExactly) {
  run_on(GetParam(), [] {
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      for (long i = 1; i <= 10000; ++i) apgas::async([i] { apgas::offer(i); });
    });
    EXPECT_EQ(total, 10000L * 10001L / 2);
    // Offers from a tree of activities (grandchildren and deeper) and from the body.
    const long tree_total = apgas::finish_collect(apgas::sum<long>(), [] {
      apgas::offer(1L);
      for (int a = 0; a < 10; ++a) {
        apgas::async([] {
          for (int b = 0; b < 10; ++b) {
            apgas::async([] {
              for (int c = 0; c < 100; ++c) apgas::async([] { apgas::offer(1L); });
            });
          }
        });
      }
    });
    EXPECT_EQ(tree_total, 10001);
  });
}

TEST_P(FinishCollect, MinMaxAndCustomReducers) {
  run_on(GetParam(), [] {
    const int mn = apgas::finish_collect(apgas::min<int>(), [] {
      for (int i = 0; i < 100; ++i) apgas::async([i] { apgas::offer((i * 37) % 101 + 5); });
    });
    EXPECT_EQ(mn, 5);  // i * 37 % 101 takes the value 0 (at i = 0)
    const int mx = apgas::finish_collect(apgas::max<int>(), [] {
      for (int i = 0; i < 100; ++i) apgas::async([i] { apgas::offer((i * 37) % 101 - 50); });
    });
    EXPECT_EQ(mx, 100 - 50);  // i -> i * 37 % 101 is a bijection of 0..100; i < 100 misses only 64
    const double dmin = apgas::finish_collect(apgas::min<double>(), [] {
      for (int i = 1; i <= 64; ++i) apgas::async([i] { apgas::offer(-1.0 / i); });
    });
    EXPECT_EQ(dmin, -1.0);
    const double dmax = apgas::finish_collect(apgas::max<double>(), [] {
      for (int i = 1; i <= 64; ++i) apgas::async([i] { apgas::offer(-1.0 / i); });
    });
    EXPECT_EQ(dmax, -1.0 / 64);
    const long prod = apgas::finish_collect(apgas::reducer{1L, std::multiplies<long>{}}, [] {
      for (long i = 1; i <= 10; ++i) apgas::async([i] { apgas::offer(i); });
    });
    EXPECT_EQ(prod, 3628800L);
    // No offer: the identity.
    EXPECT_EQ(apgas::finish_collect(apgas::sum<int>(), [] {}), 0);
    EXPECT_EQ(apgas::finish_collect(apgas::min<int>(), [] { apgas::async([] {}); }), std::numeric_limits<int>::max());
    // Floating types start from the infinities: an offered infinity is the result, not the largest finite value.
    constexpr double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(apgas::finish_collect(apgas::min<double>(),
                                    [] { apgas::async([] { apgas::offer(std::numeric_limits<double>::infinity()); }); }),
              inf);
    EXPECT_EQ(apgas::finish_collect(apgas::max<float>(), [] { apgas::offer(-std::numeric_limits<float>::infinity()); }),
              -std::numeric_limits<float>::infinity());
    EXPECT_EQ(apgas::finish_collect(apgas::max<double>(), [] {}), -inf);
  });
}

TEST_P(FinishCollect, OffersFromNestedPlainFinishesReachIt) {
  run_on(GetParam(), [] {
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      apgas::offer(1000L);
      for (int i = 0; i < 10; ++i) {
        apgas::async([] {
          apgas::finish([] {
            for (int j = 0; j < 10; ++j) {
              apgas::async([] {
                apgas::finish([] { apgas::async([] { apgas::offer(1L); }); });
                apgas::offer(10L);
              });
            }
          });
        });
      }
      apgas::finish([] { apgas::offer(5L); });
    });
    EXPECT_EQ(total, 1000 + 100 * 1 + 100 * 10 + 5);
  });
}

TEST_P(FinishCollect, OffersGoToTheClosestCollectingFinish) {
  run_on(GetParam(), [] {
    long inner_total = 0;
    const long outer_total = apgas::finish_collect(apgas::sum<long>(), [&] {
      apgas::async([] { apgas::offer(1L); });
      inner_total = apgas::finish_collect(apgas::sum<long>(), [] {
        for (int i = 0; i < 50; ++i) apgas::async([] { apgas::offer(100L); });
      });
      apgas::offer(2L);
    });
    EXPECT_EQ(inner_total, 5000);
    EXPECT_EQ(outer_total, 3);
    // The closest collecting finish decides the type: a long offered inside an int finish is refused, even though
    // an enclosing finish collects longs.
    std::atomic<int> refused{0};
    const long outer2 = apgas::finish_collect(apgas::sum<long>(), [&] {
      const int inner = apgas::finish_collect(apgas::sum<int>(), [&] {
        apgas::async([&] {
          try {
            apgas::offer(5L);
          } catch (const apgas::illegal_operation_exception&) {
            refused++;
          }
          apgas::offer(3);
        });
      });
      EXPECT_EQ(inner, 3);
      apgas::offer(static_cast<long>(inner));
    });
    EXPECT_EQ(refused.load(), 1);
    EXPECT_EQ(outer2, 3);
  });
}

TEST_P(FinishCollect, FailuresAreThrownAsMultipleExceptions) {
  run_on(GetParam(), [] {
    try {
      (void)apgas::finish_collect(apgas::sum<long>(), [] {
        for (int i = 0; i < 100; ++i) {
          apgas::async([i] {
            if (i % 10 == 0) throw custom_error(i);
            apgas::offer(1L);
          });
        }
      });
      ADD_FAILURE() << "finish_collect did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 10u);
      EXPECT_EQ(m.of_type<custom_error>().size(), 10u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, FinishCollect, testing::ValuesIn(apgas_test::worker_counts),
                         apgas_test::workers_name);

TEST(FinishCollect, WrongTypeOrNoCollectingFinishIsIllegal) {
  run_on(1, [] {
    // No collecting finish at all (the main activity's implicit finish does not collect).
    const std::string what = apgas_test::what_of<apgas::illegal_operation_exception>([] { apgas::offer(1L); });
    EXPECT_NE(what.find("apgas::offer of a value of type long:"), std::string::npos) << what;  // demangled
    std::string wrong;
    (void)apgas::finish_collect(apgas::sum<long>(), [&] {
      try {
        apgas::offer(1U);
      } catch (const apgas::illegal_operation_exception& e) {
        wrong = e.what();
      }
    });
    EXPECT_NE(wrong.find("of type unsigned int to a collecting finish whose reducer takes long"), std::string::npos)
        << wrong;
    try {
      apgas::finish([] { apgas::async([] { apgas::offer(1); }); });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 1u);
    }
    // The wrong type: int and unsigned long offered to a finish collecting longs.
    long total = -1;
    try {
      total = apgas::finish_collect(apgas::sum<long>(), [] {
        apgas::offer(1L);
        apgas::async([] { apgas::offer(1); });
        apgas::async([] { apgas::offer(1UL); });
      });
      ADD_FAILURE() << "finish_collect did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 2u);
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 2u);
    }
    EXPECT_EQ(total, -1);
    // Caught where it is thrown, the wrong offer changes nothing.
    const long ok = apgas::finish_collect(apgas::sum<long>(), [] {
      apgas::offer(4L);
      EXPECT_THROW(apgas::offer(4), apgas::illegal_operation_exception);
      EXPECT_THROW(apgas::offer(4.0), apgas::illegal_operation_exception);
    });
    EXPECT_EQ(ok, 4);
  });
}

// ---- workers ----

class Workers : public testing::TestWithParam<int> {};

TEST_P(Workers, CountAndIndexInRange) {
  const int n = GetParam();
  run_on(n, [n] {
    EXPECT_EQ(apgas::num_workers(), n);
    const int main_index = apgas::worker_index();
    EXPECT_GE(main_index, 0);
    EXPECT_LT(main_index, n);
    std::atomic<int> bad{0};
    std::atomic<int> ran{0};
    apgas::finish([&] {
      for (int i = 0; i < 2000; ++i) {
        apgas::async([&] {
          int w = apgas::worker_index();
          if (w < 0 || w >= n) bad++;
          apgas::finish([] { apgas::async([] {}); });  // may block and move to another worker
          w = apgas::worker_index();
          if (w < 0 || w >= n) bad++;
          if (apgas::num_workers() != n) bad++;
          ran++;
        });
      }
    });
    EXPECT_EQ(ran.load(), 2000);
    EXPECT_EQ(bad.load(), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Workers, testing::Values(1, 2, 3, 4, 8), apgas_test::workers_name);

// An activity that waits inside a catch handler (here a `when`, released only once all of them have caught their
// own exception, so each parks there while the others throw and catch on the same threads) still handles its own
// exception afterwards, on whatever thread it resumed: the exception it names, `throw;` rethrowing it, and
// std::uncaught_exceptions() in a destructor run by unwinding after a wait. (The C++ run-time keeps the exceptions
// being handled per OS thread; fibers used to share them: `throw;` rethrew another activity's exception.)
TEST_P(Workers, AnActivityWaitingInACatchHandlerKeepsItsOwnException) {
  run_on(GetParam(), [] {
    constexpr int n = 48;
    int caught = 0;
    std::atomic<int> wrong{0}, right{0};
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&, i] {
          try {
            throw custom_error(i);
          } catch (const custom_error& e) {
            apgas::atomic([&] { ++caught; });
            apgas::when([&] { return caught == n; }, [] {});  // parks here
            if (e.value != i) wrong++;
            try {
              throw;
            } catch (const custom_error& again) {
              (again.value == i ? right : wrong)++;
            }
          }
        });
      }
    });
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(right.load(), n);

    // Unwinding through a destructor that waits (until the other half has looked): inside it the activity sees its
    // own exception in flight; the others, running meanwhile on the same threads, see none.
    int unwinding = 0, looked = 0;
    std::atomic<int> in_flight{0}, clean{0};
    struct waits_in_destructor {
      int& unwinding;
      int& looked;
      std::atomic<int>& in_flight;
      ~waits_in_destructor() {
        apgas::atomic([&] { ++unwinding; });
        apgas::when([&] { return looked == n / 2; }, [] {});  // parks here, mid-unwind
        if (std::uncaught_exceptions() == 1) in_flight++;
      }
    };
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&, i] {
          if (i % 2 == 0) {
            try {
              waits_in_destructor w{unwinding, looked, in_flight};
              throw custom_error(i);
            } catch (const custom_error&) {
            }
          } else {
            apgas::when([&] { return unwinding == n / 2; }, [] {});
            if (std::uncaught_exceptions() == 0) clean++;
            apgas::atomic([&] { ++looked; });
          }
        });
      }
    });
    EXPECT_EQ(in_flight.load(), n / 2);
    EXPECT_EQ(clean.load(), n / 2);
  });
}

namespace {
int threads_of_this_process() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}
}  // namespace

// Loop fibers move between workers: in this pattern one worker keeps parking (making a new fiber when its pool is
// empty) and the other keeps resuming (pooling the one it leaves). Kept each to its worker they piled up without
// bound (some 360 stacks in 10 000 rounds, never more than two activities blocked at once); now a worker keeps at
// most a few and the rest go to a shared pool that parking workers draw from. Counted as memory mappings (two per
// guarded stack).
TEST(WorkersStart, FiberStacksDoNotPileUpBetweenWorkers) {
  const auto mappings = [] {
    std::ifstream f("/proc/self/maps");
    long n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
  };
  apgas::config cfg;
  cfg.nthreads = 2;
  long grew = 0;
  ASSERT_EQ(apgas::run(cfg, [&] {
              const long before = mappings();
              for (int i = 0; i < 10000; ++i) {
                bool flag = false;
                apgas::finish([&] {
                  apgas::async([&] { apgas::when([&] { return flag; }, [] {}); });
                  apgas::async([&] {
                    for (int k = 0; k < 100; ++k) std::this_thread::yield();
                    apgas::atomic([&] { flag = true; });
                  });
                });
              }
              grew = mappings() - before;
            }),
            0);
  EXPECT_LT(grew, 200) << "memory mappings made by 10 000 rounds with at most two activities blocked at once";
}

namespace {
// n activities that each hold their OS thread until all n run at once, at a place of `workers` workers; a missing
// worker fails the test after a minute instead of hanging it.
void all_at_once(int workers, int n) {
  const int before = threads_of_this_process();
  run_on(workers, [&] {
    EXPECT_EQ(apgas::num_workers(), workers);
    const int idle = threads_of_this_process() - before;
    EXPECT_LE(idle, static_cast<int>(std::thread::hardware_concurrency()) + 4) << "threads of an idle place";
    std::atomic<int> running{0}, gave_up{0};
    apgas::finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::async([&] {
          running.fetch_add(1);
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          while (running.load() < n) {
            if (std::chrono::steady_clock::now() > deadline) {
              gave_up.fetch_add(1);
              break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // holds the thread: no park
          }
        });
      }
    });
    EXPECT_EQ(running.load(), n);
    EXPECT_EQ(gave_up.load(), 0) << "fewer than " << n << " workers ran at once";
    EXPECT_GE(threads_of_this_process() - before, n);
  });
}
}  // namespace

// A place configured with many workers starts only its share of the CPUs' threads; the others start when work
// needs them (here: 64 activities that each hold their OS thread until all 64 run at once, which only 64 started
// workers can do).
TEST(WorkersStart, OnlyWhenWorkNeedsThem) { all_at_once(512, 64); }

// More workers than one look covers (an idle worker's rounds look at a few hundred deques): the items left on the
// deque of a worker that holds its thread must still be found before the idle workers sleep. They were not: with 700
// workers, 600 activities that all had to run at once hung (the idle workers slept, having missed them).
TEST(WorkersStart, ItemsAreFoundBeyondOneLooksWidth) { all_at_once(700, 600); }
