#include "support/run.hpp"

#include <atomic>
#include <vector>

using apgas_test::run_on;

class Clock : public testing::TestWithParam<int> {};

TEST_P(Clock, MakeRegistersInPhaseOne) {
  run_on(GetParam(), [] {
    apgas::clock c = apgas::clock::make();
    EXPECT_TRUE(c.registered());
    EXPECT_FALSE(c.dropped());
    EXPECT_EQ(c.phase(), 1);
    c.advance();  // alone: passes at once
    EXPECT_EQ(c.phase(), 2);
    c.drop();
    EXPECT_FALSE(c.registered());
    EXPECT_TRUE(c.dropped());
  });
}

TEST_P(Clock, BarrierMakesEveryPhaseVisible) {
  run_on(GetParam(), [] {
    constexpr int n = 8;
    constexpr int phases = 50;
    std::vector<std::vector<int>> slot(phases, std::vector<int>(n, -1));
    std::atomic<int> bad{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int me = 0; me < n; ++me) {
        apgas::clocked_async({c}, [&, me, c]() mutable {
          for (int p = 0; p < phases; ++p) {
            if (c.phase() != p + 1) bad++;
            slot[static_cast<std::size_t>(p)][static_cast<std::size_t>(me)] = p * 100 + me;
            c.advance();
            for (int other = 0; other < n; ++other) {
              if (slot[static_cast<std::size_t>(p)][static_cast<std::size_t>(other)] != p * 100 + other) bad++;
            }
          }
        });
      }
      c.drop();  // the creator must not hold the others back
    });
    EXPECT_EQ(bad.load(), 0);
  });
}

TEST_P(Clock, DynamicRegistrationJoinsInTheParentsPhase) {
  run_on(GetParam(), [] {
    std::atomic<int> child_phase_at_start{0};
    std::atomic<int> child_phase_at_end{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      c.advance();
      c.advance();
      EXPECT_EQ(c.phase(), 3);
      apgas::clocked_async({c}, [&, c]() mutable {
        child_phase_at_start = c.phase();
        c.advance();
        c.advance();
        child_phase_at_end = c.phase();
      });
      c.advance();  // waits for the child to arrive in phase 3
      EXPECT_EQ(c.phase(), 4);
      c.advance();
      EXPECT_EQ(c.phase(), 5);
      c.drop();
    });
    EXPECT_EQ(child_phase_at_start.load(), 3);
    EXPECT_EQ(child_phase_at_end.load(), 5);
  });
}

TEST_P(Clock, SplitPhaseResume) {
  run_on(GetParam(), [] {
    int child_passed = 0;
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [&, c]() mutable {
        c.advance();  // completes only because the parent's resume() counts as its arrival
        apgas::atomic([&] { child_passed = 1; });
        c.advance();
      });
      c.resume();
      c.resume();  // a second resume in the same phase does nothing
      EXPECT_EQ(c.phase(), 1);  // resumed, but still in phase 1 until it advances
      // The child gets past the phase-1 barrier although this activity never called advance().
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

TEST_P(Clock, DropReleasesTheOthers) {
  run_on(GetParam(), [] {
    std::atomic<int> passes{0};
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
      apgas::clocked_async({c}, [c]() mutable { c.drop(); });  // leaves immediately
      c.drop();
    });
    EXPECT_EQ(passes.load(), 40);
  });
}

TEST_P(Clock, TerminationDropsClocks) {
  run_on(GetParam(), [] {
    std::atomic<int> passes{0};
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      apgas::clocked_async({c}, [] {});  // ends without advancing: dropped automatically
      apgas::clocked_async({c}, [&, c]() mutable {
        for (int k = 0; k < 5; ++k) {
          c.advance();
          passes++;
        }
      });
      c.drop();
    });
    EXPECT_EQ(passes.load(), 5);
  });
}

TEST_P(Clock, ClockedFinishWithImplicitClock) {
  run_on(GetParam(), [] {
    constexpr int n = 6;
    constexpr int phases = 20;
    std::vector<std::atomic<int>> arrivals(phases);
    std::atomic<int> bad{0};
    apgas::clocked_finish([&] {
      for (int i = 0; i < n; ++i) {
        apgas::clocked_async([&] {
          for (int p = 0; p < phases; ++p) {
            arrivals[static_cast<std::size_t>(p)]++;
            apgas::advance_all();
            if (arrivals[static_cast<std::size_t>(p)].load() != n) bad++;
          }
        });
      }
    });
    EXPECT_EQ(bad.load(), 0);
  });
}

TEST_P(Clock, AdvanceAllAndResumeAllWithTwoClocks) {
  run_on(GetParam(), [] {
    std::atomic<int> a_count{0};
    std::atomic<int> bad{0};
    apgas::finish([&] {
      apgas::clock a = apgas::clock::make();
      apgas::clock b = apgas::clock::make();
      for (int i = 0; i < 3; ++i) {
        apgas::clocked_async({a, b}, [&, a, b] {
          for (int k = 0; k < 10; ++k) {
            a_count++;
            apgas::advance_all();
            if (a.phase() != k + 2 || b.phase() != k + 2) bad++;
            if (a_count.load() < 3 * (k + 1)) bad++;
          }
        });
      }
      apgas::resume_all();
      a.drop();
      b.drop();
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(a_count.load(), 30);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Clock, testing::ValuesIn(apgas_test::worker_counts));

TEST(ClockMisuse, OperationsWithoutRegistration) {
  run_on(2, [] {
    apgas::clock c = apgas::clock::make();
    std::atomic<int> thrown{0};
    apgas::finish([&] {
      apgas::async([&, c]() mutable {  // a plain async is not registered
        EXPECT_FALSE(c.registered());
        try { c.advance(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { c.resume(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { c.drop(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { (void)c.phase(); } catch (const apgas::clock_use_exception&) { thrown++; }
        try { apgas::clocked_async({c}, [] {}); } catch (const apgas::clock_use_exception&) { thrown++; }
      });
    });
    EXPECT_EQ(thrown.load(), 5);
    c.drop();
    EXPECT_THROW(c.advance(), apgas::clock_use_exception);
    EXPECT_THROW(c.drop(), apgas::clock_use_exception);
    EXPECT_THROW(apgas::clocked_async({c}, [] {}), apgas::clock_use_exception);
    EXPECT_THROW(apgas::clocked_async([] {}), apgas::clock_use_exception);  // no clocked_finish
    apgas::clock moved = apgas::clock::make();
    apgas::clock taken = std::move(moved);
    EXPECT_THROW(moved.advance(), apgas::clock_use_exception);  // NOLINT(bugprone-use-after-move)
    taken.drop();
  });
}
