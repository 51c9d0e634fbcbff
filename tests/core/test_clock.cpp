// Clocks: phases, dynamic registration, split phase, drop, termination, clocked_finish, advance_all/resume_all and
// misuse. Every test that needs parallelism runs with 1, 2 and 4 workers: with one worker every wait must park the
// activity (never the worker), or the test hangs (and ctest's timeout reports it).
#include "support/run.hpp"

#include <array>
#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using apgas_test::run_on;

namespace {

// Let other activities run for a while: a few hundred park/wake round trips of this activity.
void let_others_run() {
  for (int i = 0; i < 200; ++i) apgas::finish([] { apgas::async([] {}); });
}

std::size_t u(int i) { return static_cast<std::size_t>(i); }

}  // namespace

class Clock : public testing::TestWithParam<int> {};

TEST_P(Clock, MakeRegistersInPhaseOne) {
  run_on(GetParam(), [] {
    apgas::clock c = apgas::clock::make();
    EXPECT_TRUE(c.registered());
    EXPECT_FALSE(c.dropped());
    EXPECT_EQ(c.phase(), 1);
    c.advance();  // alone: passes at once
    EXPECT_EQ(c.phase(), 2);
    c.resume();
    EXPECT_EQ(c.phase(), 2);  // arrived, still in phase 2 until it advances
    c.advance();
    EXPECT_EQ(c.phase(), 3);
    const apgas::clock copy = c;  // handles share the clock
    EXPECT_TRUE(copy == c);
    EXPECT_EQ(copy.phase(), 3);
    EXPECT_FALSE(apgas::clock::make() == c);  // (the temporary clock's registration ends with this activity)
    c.drop();
    EXPECT_FALSE(c.registered());
    EXPECT_TRUE(c.dropped());
    EXPECT_FALSE(copy.registered());
  });
}

TEST_P(Clock, DynamicRegistrationJoinsInTheParentsPhase) {
  run_on(GetParam(), [] {
    // P (the creator) advances in phases 1-4 and then drops; A joins in phase 1 and advances in phases 1-6, then
    // ends; B joins in phase 3 (spawned by P there) and advances in phases 3-7. arrivals[p] counts the activities
    // that arrived in phase p by advancing; after its advance in phase p each checks that all expected ones had.
    constexpr std::array<int, 9> expected = {0, 2, 2, 3, 3, 2, 2, 1, 0};
    std::array<std::atomic<int>, 9> arrivals{};
    std::vector<int> a_phases;
    std::vector<int> b_phases;
    std::atomic<int> early{0};
    auto step = [&](apgas::clock& c, std::vector<int>& log) {
      const int p = c.phase();
      log.push_back(p);
      arrivals[u(p)]++;
      c.advance();
      if (arrivals[u(p)].load() != expected[u(p)]) early++;
      if (c.phase() != p + 1) early++;
    };
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        EXPECT_TRUE(c.registered());
        for (int k = 0; k < 6; ++k) step(c, a_phases);
        EXPECT_EQ(c.phase(), 7);
      });
      std::vector<int> p_phases;
      step(c, p_phases);
      step(c, p_phases);
      EXPECT_EQ(c.phase(), 3);
      apgas::clocked_async({c}, [&, c]() mutable {
        EXPECT_EQ(c.phase(), 3);  // the parent's phase, not 1
        for (int k = 0; k < 5; ++k) step(c, b_phases);
        EXPECT_EQ(c.phase(), 8);
      });
      step(c, p_phases);
      step(c, p_phases);
      EXPECT_EQ(c.phase(), 5);
      EXPECT_EQ(p_phases, (std::vector<int>{1, 2, 3, 4}));
      c.drop();
      EXPECT_TRUE(c.dropped());
    });
    EXPECT_EQ(early.load(), 0);
    EXPECT_EQ(a_phases, (std::vector<int>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(b_phases, (std::vector<int>{3, 4, 5, 6, 7}));
    for (std::size_t p = 0; p < expected.size(); ++p) EXPECT_EQ(arrivals[p].load(), expected[p]) << "phase " << p;
  });
}

TEST_P(Clock, SplitPhaseResumeThenWorkThenAdvance) {
  run_on(GetParam(), [] {
    int child_passed = 0;
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        c.advance();  // completes only because the parent's resume() counts as its arrival
        apgas::atomic([&] { child_passed = 1; });
        c.advance();
        EXPECT_EQ(c.phase(), 3);
      });
      c.resume();
      EXPECT_EQ(c.phase(), 1);  // resumed, but still in phase 1 until it advances
      // Work while resumed: the child gets past the phase-1 barrier although this activity never advanced.
      apgas::when([&] { return child_passed == 1; }, [] {});
      c.advance();  // phase 1 already complete: returns at once
      EXPECT_EQ(c.phase(), 2);
      c.advance();  // the phase-2 barrier, with the child
      EXPECT_EQ(c.phase(), 3);
      c.drop();
    });
    EXPECT_EQ(child_passed, 1);
  });
}

TEST_P(Clock, SecondResumeInAPhaseIsANoOp) {
  run_on(GetParam(), [] {
    // Three registered: P resumes twice, A advances, B arrives only when P opens a gate. If the second resume
    // counted, phase 1 would complete without B and A would pass before B arrived.
    int gate = 0;
    int a_arrived = 0;
    std::atomic<bool> b_arrived{false};
    std::atomic<int> a_saw_b{-1};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        apgas::atomic([&] { a_arrived = 1; });
        c.advance();
        a_saw_b = b_arrived.load() ? 1 : 0;
      });
      apgas::clocked_async({c}, [&, c]() mutable {
        apgas::when([&] { return gate == 1; }, [] {});
        b_arrived = true;
        c.advance();
        EXPECT_EQ(c.phase(), 2);
      });
      c.resume();
      c.resume();
      EXPECT_EQ(c.phase(), 1);
      apgas::when([&] { return a_arrived == 1; }, [] {});
      let_others_run();  // time for A to (wrongly) pass
      EXPECT_EQ(a_saw_b.load(), -1) << "A passed phase 1 before B arrived";
      apgas::atomic([&] { gate = 1; });
      c.advance();
      EXPECT_EQ(c.phase(), 2);
      c.drop();
    });
    EXPECT_EQ(a_saw_b.load(), 1);
  });
}

TEST_P(Clock, ChildInheritsTheParentsArrival) {
  run_on(GetParam(), [] {
    // P resumes, then registers B: B starts "arrived in phase 1", like its parent. A's advance then needs neither
    // P nor B to do anything more.
    int a_passed = 0;
    int b_may_go = 0;  // outside the finish body: B reads it after the body has returned
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        c.advance();
        apgas::atomic([&] { a_passed = 1; });
        EXPECT_EQ(c.phase(), 2);
      });
      c.resume();
      apgas::clocked_async({c}, [&, c]() mutable {
        apgas::when([&] { return b_may_go == 1; }, [] {});
        EXPECT_EQ(c.phase(), 1);
        c.advance();  // already arrived in phase 1, which has ended: returns at once
        EXPECT_EQ(c.phase(), 2);
        c.drop();
      });
      apgas::when([&] { return a_passed == 1; }, [] {});  // A passed phase 1 while B still waited at the gate
      apgas::atomic([&] { b_may_go = 1; });
      c.advance();
      EXPECT_EQ(c.phase(), 2);
      c.drop();
    });
    EXPECT_EQ(a_passed, 1);
  });
}

TEST_P(Clock, DropCountsAsArrivalAndReleasesTheOthers) {
  run_on(GetParam(), [] {
    std::atomic<bool> p_dropped{false};
    std::atomic<int> a_saw_drop{-1};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        c.advance();  // can only pass once P has dropped: P never arrives otherwise
        a_saw_drop = p_dropped.load() ? 1 : 0;
        for (int k = 0; k < 10; ++k) c.advance();  // alone now
        EXPECT_EQ(c.phase(), 12);
      });
      let_others_run();
      EXPECT_EQ(a_saw_drop.load(), -1);
      EXPECT_TRUE(c.registered());
      p_dropped = true;
      c.drop();
      EXPECT_FALSE(c.registered());
      EXPECT_TRUE(c.dropped());
    });
    EXPECT_EQ(a_saw_drop.load(), 1);
  });
}

TEST_P(Clock, DroppedActivitiesNoLongerHoldOthersBack) {
  run_on(GetParam(), [] {
    std::atomic<int> passes{0};
    std::atomic<int> dropper_checks{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int i = 0; i < 4; ++i) {
        apgas::clocked_async({c}, [&, c]() mutable {
          for (int k = 0; k < 10; ++k) {
            c.advance();
            passes++;
          }
        });
      }
      // Leaves at once, after checking its own registration, and goes on running (unregistered) for a while.
      apgas::clocked_async({c}, [&, c]() mutable {
        if (c.registered() && !c.dropped() && c.phase() == 1) dropper_checks++;
        c.drop();
        if (!c.registered() && c.dropped()) dropper_checks++;
        let_others_run();
      });
      // Resumed then dropped in the same phase: its arrival must not be counted twice.
      apgas::clocked_async({c}, [c]() mutable {
        c.resume();
        c.drop();
      });
      c.drop();
    });
    EXPECT_EQ(passes.load(), 40);
    EXPECT_EQ(dropper_checks.load(), 2);
  });
}

TEST_P(Clock, ResumeThenDropDoesNotCompleteAPhaseEarly) {
  run_on(GetParam(), [] {
    // A, B and P registered. P resumes then drops; A advances; B arrives late. A must wait for B.
    int gate = 0;
    std::atomic<bool> b_arrived{false};
    std::atomic<int> a_saw_b{-1};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        c.advance();
        a_saw_b = b_arrived.load() ? 1 : 0;
      });
      apgas::clocked_async({c}, [&, c]() mutable {
        apgas::when([&] { return gate == 1; }, [] {});
        b_arrived = true;
        c.advance();
      });
      c.resume();
      c.drop();
      let_others_run();
      EXPECT_EQ(a_saw_b.load(), -1) << "A passed phase 1 before B arrived";
      apgas::atomic([&] { gate = 1; });
    });
    EXPECT_EQ(a_saw_b.load(), 1);
  });
}

TEST_P(Clock, TerminationDropsClocks) {
  run_on(GetParam(), [] {
    std::atomic<int> passes{0};
    std::atomic<int> phase_bad{0};
    try {
      apgas::finish([&] {
        apgas::clock c = apgas::clock::make();
        apgas::clocked_async({c}, [] {});             // ends without advancing
        apgas::clocked_async({c}, [c]() mutable { c.resume(); });  // ends after arriving
        apgas::clocked_async({c}, [c]() mutable {     // ends by an exception in phase 3
          c.advance();
          c.advance();
          throw std::runtime_error("clocked child failed");
        });
        apgas::clocked_async({c}, [&, c]() mutable {
          for (int k = 0; k < 5; ++k) {
            if (c.phase() != k + 1) phase_bad++;
            c.advance();
            passes++;
          }
        });
        c.drop();
      });
      ADD_FAILURE() << "finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 1u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 1u);
    }
    EXPECT_EQ(passes.load(), 5);
    EXPECT_EQ(phase_bad.load(), 0);
    // The creator ending without drop releases the others as well.
    std::atomic<int> passes2{0};
    apgas::finish([&] {
      apgas::async([&] {
        apgas::clock c = apgas::clock::make();
        for (int i = 0; i < 3; ++i) {
          apgas::clocked_async({c}, [&, c]() mutable {
            for (int k = 0; k < 4; ++k) {
              c.advance();
              passes2++;
            }
          });
        }
      });
    });
    EXPECT_EQ(passes2.load(), 12);
  });
}

// The main activity is an activity: when its body ends, returning or throwing, its clocks are dropped before its
// implicit finish waits for the clocked children still advancing (the run used to hang in both cases).
TEST_P(Clock, MainActivityEndingDropsItsClocks) {
  std::atomic<int> passes{0};
  apgas::config cfg;
  cfg.nthreads = GetParam();
  EXPECT_EQ(apgas::run(cfg, [&] {
              apgas::clock c = apgas::clock::make();
              apgas::clocked_async({c}, [&, c]() mutable {
                for (int k = 0; k < 3; ++k) c.advance(), passes++;
              });
            }),
            0);
  EXPECT_EQ(passes.load(), 3);
  passes = 0;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [&] {
    apgas::clock c = apgas::clock::make();
    apgas::clocked_async({c}, [&, c]() mutable {
      for (int k = 0; k < 3; ++k) c.advance(), passes++;
    });
    throw std::runtime_error("main failed while registered");
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("main failed while registered"), std::string::npos) << err;
  EXPECT_EQ(passes.load(), 3);
}

TEST_P(Clock, BarrierWithExplicitClockMakesEveryPhaseVisible) {
  run_on(GetParam(), [] {
    constexpr int n = 8;
    constexpr int phases = 50;
    std::vector<std::vector<int>> slot(phases, std::vector<int>(n, -1));  // plain ints: the clock orders them
    std::atomic<int> bad{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int me = 0; me < n; ++me) {
        apgas::clocked_async({c}, [&, me, c]() mutable {
          for (int p = 0; p < phases; ++p) {
            if (c.phase() != p + 1) bad++;
            slot[u(p)][u(me)] = p * 100 + me;
            c.advance();
            for (int other = 0; other < n; ++other) {
              if (slot[u(p)][u(other)] != p * 100 + other) bad++;
            }
          }
        });
      }
      c.drop();  // the creator must not hold the others back
    });
    EXPECT_EQ(bad.load(), 0);
  });
}

TEST_P(Clock, ClockedFinishBarrier) {
  run_on(GetParam(), [] {
    // N children of a clocked_finish, K phases, children only use the implicit clock (advance_all). In phase i each
    // writes slot[i][me]; after advancing it reads the whole row i. The body leaves at once (drops the clock).
    constexpr int n = 6;
    constexpr int phases = 40;
    std::vector<std::vector<int>> slot(phases, std::vector<int>(n, -1));
    std::atomic<int> bad{0};
    std::atomic<int> done{0};
    apgas::clocked_finish([&] {
      for (int me = 0; me < n; ++me) {
        apgas::clocked_async([&, me] {
          for (int i = 0; i < phases; ++i) {
            slot[u(i)][u(me)] = i * 1000 + me;
            apgas::advance_all();
            for (int other = 0; other < n; ++other) {
              if (slot[u(i)][u(other)] != i * 1000 + other) bad++;
            }
          }
          done++;
        });
      }
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(done.load(), n);  // clocked_finish waited for them
  });
}

TEST_P(Clock, ClockedFinishBodyTakesPartThenLeaves) {
  run_on(GetParam(), [] {
    // The body is registered on the implicit clock: it advances with its children for 5 phases, then its end
    // drops the clock and the children go on alone. Children spawned by children (clocked_async(f) in a child)
    // join in their parent's phase.
    constexpr int n = 4;
    std::array<std::atomic<int>, 32> arrivals{};
    std::atomic<int> bad{0};
    std::atomic<int> grandchildren{0};
    apgas::clocked_finish([&] {
      for (int me = 0; me < n; ++me) {
        apgas::clocked_async([&, me] {
          for (int i = 1; i <= 20; ++i) {
            if (me == 0 && i == 10) {
              apgas::clocked_async([&] {  // joins in phase 10
                for (int j = 10; j <= 20; ++j) {
                  arrivals[u(j)]++;
                  apgas::advance_all();
                }
                grandchildren++;
              });
            }
            arrivals[u(i)]++;
            apgas::advance_all();
            // body in phases 1-5, n children in 1-20, the grandchild in 10-20
            const int expected = n + (i <= 5 ? 1 : 0) + (i >= 10 ? 1 : 0);
            if (arrivals[u(i)].load() != expected) bad++;
          }
        });
      }
      for (int i = 1; i <= 5; ++i) {
        arrivals[u(i)]++;
        apgas::advance_all();
        if (arrivals[u(i)].load() != n + 1) bad++;
      }
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(grandchildren.load(), 1);
    EXPECT_EQ(arrivals[u(1)].load(), n + 1);
    EXPECT_EQ(arrivals[u(10)].load(), n + 1);
    EXPECT_EQ(arrivals[u(20)].load(), n + 1);
  });
}

TEST_P(Clock, NestedClockedFinishes) {
  run_on(GetParam(), [] {
    std::atomic<int> inner_phases{0};
    std::atomic<int> outer_phases{0};
    apgas::clocked_finish([&] {
      for (int i = 0; i < 2; ++i) {
        apgas::clocked_async([&] {
          apgas::advance_all();  // outer phase 1
          outer_phases++;
          // An inner clocked_finish: its children register on the inner clock only.
          apgas::clocked_finish([&] {
            for (int j = 0; j < 3; ++j) {
              apgas::clocked_async([&] {
                for (int k = 0; k < 4; ++k) {
                  apgas::advance_all();
                  inner_phases++;
                }
              });
            }
          });
          // Back on the outer clock alone (the inner one was dropped at the end of its body).
          apgas::advance_all();  // outer phase 2
          outer_phases++;
          apgas::clocked_async([&] { apgas::advance_all(); });  // the outer implicit clock again
        });
      }
    });
    EXPECT_EQ(inner_phases.load(), 2 * 3 * 4);
    EXPECT_EQ(outer_phases.load(), 4);
  });
}

TEST_P(Clock, AdvanceAllAndResumeAllWithTwoClocks) {
  run_on(GetParam(), [] {
    // X is on a and b (advance_all), Y on a only, Z on b only. After each round each clock had its two arrivals.
    constexpr int rounds = 20;
    std::array<std::atomic<int>, rounds + 2> on_a{};
    std::array<std::atomic<int>, rounds + 2> on_b{};
    std::atomic<int> bad{0};
    apgas::finish([&] {
      apgas::clock a = apgas::clock::make();
      apgas::clock b = apgas::clock::make();
      apgas::clocked_async({a, b}, [&, a, b] {
        for (int k = 1; k <= rounds; ++k) {
          if (a.phase() != k || b.phase() != k) bad++;
          on_a[u(k)]++;
          on_b[u(k)]++;
          apgas::advance_all();
          if (a.phase() != k + 1 || b.phase() != k + 1) bad++;
          if (on_a[u(k)].load() != 2 || on_b[u(k)].load() != 2) bad++;
        }
      });
      apgas::clocked_async({a}, [&, a, b]() mutable {
        if (b.registered()) bad++;
        for (int k = 1; k <= rounds; ++k) {
          on_a[u(k)]++;
          a.advance();
          if (on_a[u(k)].load() != 2) bad++;
        }
      });
      apgas::clocked_async({b}, [&, a, b]() mutable {
        if (a.registered()) bad++;
        for (int k = 1; k <= rounds; ++k) {
          on_b[u(k)]++;
          b.advance();
          if (on_b[u(k)].load() != 2) bad++;
        }
      });
      apgas::resume_all();  // arrive on both in phase 1, then leave both
      EXPECT_EQ(a.phase(), 1);
      EXPECT_EQ(b.phase(), 1);
      a.drop();
      b.drop();
    });
    EXPECT_EQ(bad.load(), 0);
    for (int k = 1; k <= rounds; ++k) {
      EXPECT_EQ(on_a[u(k)].load(), 2);
      EXPECT_EQ(on_b[u(k)].load(), 2);
    }
  });
}

TEST_P(Clock, ResumeAllThenWorkThenAdvanceAll) {
  run_on(GetParam(), [] {
    // X resumes on both clocks, then waits (when) for Y and Z to pass the phase, which they can only do because
    // resume_all arrived on both; then X's advance_all returns at once.
    int y_passed = 0;
    int z_passed = 0;
    apgas::finish([&] {
      apgas::clock a = apgas::clock::make();
      apgas::clock b = apgas::clock::make();
      apgas::clocked_async({a}, [&, a]() mutable {
        a.advance();
        apgas::atomic([&] { y_passed = 1; });
      });
      apgas::clocked_async({b}, [&, b]() mutable {
        b.advance();
        apgas::atomic([&] { z_passed = 1; });
      });
      apgas::resume_all();
      apgas::resume_all();  // no-op
      apgas::when([&] { return y_passed == 1 && z_passed == 1; }, [] {});
      apgas::advance_all();
      EXPECT_EQ(a.phase(), 2);
      EXPECT_EQ(b.phase(), 2);
      apgas::advance_all();  // alone on both now (Y and Z ended)
      EXPECT_EQ(a.phase(), 3);
      EXPECT_EQ(b.phase(), 3);
      a.drop();
      b.drop();
      apgas::advance_all();  // registered on nothing: nothing to do
    });
    EXPECT_EQ(y_passed, 1);
    EXPECT_EQ(z_passed, 1);
  });
}

TEST_P(Clock, ManyActivitiesManyPhases) {
  run_on(GetParam(), [] {
    constexpr int n = 50;
    constexpr int phases = 100;
    std::vector<std::atomic<int>> arrivals(phases + 1);
    std::atomic<long> bad{0};
    apgas::clocked_finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int i = 0; i < n; ++i) {
        apgas::clocked_async({c}, [&, c]() mutable {
          for (int p = 1; p <= phases; ++p) {
            if (c.phase() != p) bad++;
            arrivals[u(p)]++;
            c.advance();
            if (arrivals[u(p)].load() != n) bad++;
          }
        });
      }
      c.drop();
    });
    EXPECT_EQ(bad.load(), 0);
  });
}

// A capture's destructor runs inside its activity after the scheduler dropped the activity's clocks: clocks it
// registers the activity on (clock::make, the children of a clocked_finish) are dropped too when it ends. The helper
// below waited for ever for its creator, which had ended registered; and each such activity leaked its records.
struct hands_over_a_phase {
  std::atomic<int>* passed;
  explicit hands_over_a_phase(std::atomic<int>* p) : passed(p) {}
  hands_over_a_phase(hands_over_a_phase&& o) noexcept : passed(std::exchange(o.passed, nullptr)) {}  // one acts
  hands_over_a_phase(const hands_over_a_phase&) = delete;
  hands_over_a_phase& operator=(const hands_over_a_phase&) = delete;
  ~hands_over_a_phase() {
    if (passed == nullptr) return;
    apgas::clock c = apgas::clock::make();
    std::atomic<int>* const p = passed;
    apgas::clocked_async({c}, [c, p] {
      c.advance();  // passes once its creator has ended (dropping c)
      p->fetch_add(1);
    });
  }
};

TEST_P(Clock, ClocksRegisteredByACapturesDestructorAreDroppedWithItsActivity) {
  run_on(GetParam(), [] {
    std::atomic<int> passed{0};
    apgas::finish([&] {
      for (int i = 0; i < 20; ++i) {
        apgas::async([h = hands_over_a_phase(&passed)] {});  // its destructor runs at the end of the activity
      }
    });
    EXPECT_EQ(passed.load(), 20);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Clock, testing::ValuesIn(apgas_test::worker_counts), apgas_test::workers_name);

// ---- misuse ----

class ClockMisuse : public testing::TestWithParam<int> {};

TEST_P(ClockMisuse, OperationsByAnUnregisteredChild) {
  run_on(GetParam(), [] {
    apgas::clock c = apgas::clock::make();
    std::atomic<int> thrown{0};
    std::atomic<int> bad{0};
    std::atomic<bool> grandchild_ran{false};
    apgas::finish([&] {
      apgas::async([&, c]() mutable {  // a plain async is not registered, even though its parent is
        if (c.registered() || !c.dropped()) bad++;
        try { c.advance(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { c.resume(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { c.drop(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { (void)c.phase(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try {
          apgas::clocked_async({c}, [&] { grandchild_ran = true; });
        } catch (const apgas::clock_use_exception&) {
          thrown++;
        }
      });
    });
    EXPECT_EQ(thrown.load(), 5);
    EXPECT_EQ(bad.load(), 0);
    EXPECT_FALSE(grandchild_ran.load());
    // The parent's registration is intact: it advances alone.
    EXPECT_EQ(c.phase(), 1);
    c.advance();
    EXPECT_EQ(c.phase(), 2);
    c.drop();
  });
}

TEST_P(ClockMisuse, OperationsAfterDrop) {
  run_on(GetParam(), [] {
    apgas::clock c = apgas::clock::make();
    c.drop();
    EXPECT_THROW(c.advance(), apgas::clock_use_exception);
    EXPECT_THROW(c.resume(), apgas::clock_use_exception);
    EXPECT_THROW(c.drop(), apgas::clock_use_exception);
    EXPECT_THROW((void)c.phase(), apgas::clock_use_exception);
    bool ran = false;
    EXPECT_THROW(apgas::clocked_async({c}, [&] { ran = true; }), apgas::clock_use_exception);
    EXPECT_THROW(apgas::clocked_async_at(apgas::here(), {c}, [p = &ran] { *p = true; }), apgas::clock_use_exception);
    try {  // named as the operation the caller used
      apgas::clocked_async_at(apgas::here(), {c}, [p = &ran] { *p = true; });
    } catch (const apgas::clock_use_exception& e) {
      EXPECT_EQ(std::string(e.what()).rfind("apgas::clocked_async_at: ", 0), 0u) << e.what();
    }
    try {
      apgas::clocked_async_at(apgas::here(), [p = &ran] { *p = true; });
      ADD_FAILURE() << "clocked_async_at(p, f) outside a clocked_finish was accepted";
    } catch (const apgas::clock_use_exception& e) {
      EXPECT_EQ(std::string(e.what()).rfind("apgas::clocked_async_at(f) without a clock list", 0), 0u) << e.what();
    }
    // A list with one good clock and one dropped one registers the child on neither.
    apgas::clock good = apgas::clock::make();
    EXPECT_THROW(apgas::clocked_async({good, c}, [&] { ran = true; }), apgas::clock_use_exception);
    apgas::finish([] {});
    EXPECT_FALSE(ran);
    good.advance();  // alone on it: no phantom child registered
    good.advance();
    EXPECT_EQ(good.phase(), 3);
    good.drop();
    EXPECT_FALSE(c.registered());
    EXPECT_TRUE(c.dropped());
    // A moved-from handle refers to no clock.
    apgas::clock moved = apgas::clock::make();
    apgas::clock taken = std::move(moved);
    EXPECT_THROW(moved.advance(), apgas::clock_use_exception);  // NOLINT(bugprone-use-after-move)
    EXPECT_FALSE(moved.registered());                            // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(moved.home(), apgas::place());  // (it said place 0) NOLINT(bugprone-use-after-move)
    EXPECT_EQ(apgas::clock().home(), apgas::place());
    EXPECT_EQ(taken.home(), apgas::here());
    EXPECT_TRUE(taken.registered());
    taken.drop();
  });
}

TEST_P(ClockMisuse, ImplicitClockedAsyncNeedsAClockedFinish) {
  run_on(GetParam(), [] {
    std::atomic<bool> ran{false};
    // Outside any clocked_finish.
    EXPECT_THROW(apgas::clocked_async([&] { ran = true; }), apgas::clock_use_exception);
    apgas::finish([&] {
      EXPECT_THROW(apgas::clocked_async([&] { ran = true; }), apgas::clock_use_exception);
    });
    // After a clocked_finish has ended.
    apgas::clocked_finish([] {});
    EXPECT_THROW(apgas::clocked_async([&] { ran = true; }), apgas::clock_use_exception);
    // From a plain async inside a clocked_finish: it is not registered on the implicit clock.
    std::atomic<int> thrown{0};
    apgas::clocked_finish([&] {
      apgas::async([&] {
        try {
          apgas::clocked_async([&] { ran = true; });
        } catch (const apgas::clock_use_exception&) {
          thrown++;
        }
      });
    });
    EXPECT_EQ(thrown.load(), 1);
    EXPECT_FALSE(ran.load());
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ClockMisuse, testing::ValuesIn(apgas_test::worker_counts),
                         apgas_test::workers_name);
