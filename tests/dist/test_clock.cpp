// Clocks across host places, in real processes: run under mpirun with 2 and 3 processes, over mpi and ofi (ctest
// apgas.dist.clock_*). Every process runs the same gtest sequence; each TEST is one apgas::run whose main activity
// runs at place 0 while the other places serve. The shapes are X10's multi-place clock tests (TestClockedFinish over
// all places, RemoteRef, a clock made at a remote place), pipelines and barriers with exact phase checks, and every
// misuse at another place.
#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <vector>

using apgas_test::run_everywhere;

namespace {

int nplaces() { return apgas::num_hosts(); }
apgas::place place_at(int i) { return apgas::place(i % apgas::num_hosts()); }

// Per-process state (one process per host place): written through `at` by activities of other places.
std::atomic<long> g_counter{0};
constexpr int max_slots = 64;
std::array<std::atomic<long>, max_slots> g_slot{};
std::atomic<long> g_bad{0};      // failed checks at a place other than 0, read back at the end
std::atomic<long> g_sent{0};     // messages sent, measured at some place

void reset_everywhere() {
  for (apgas::place p : apgas::places()) {
    apgas::at(p, [] {
      g_counter = 0;
      g_bad = 0;
      g_sent = 0;
      for (auto& s : g_slot) s = -1;
    });
  }
}

long bad_everywhere() {
  long bad = 0;
  for (apgas::place p : apgas::places()) bad += apgas::at(p, [] { return g_bad.load(); });
  return bad;
}

void check(bool ok) {
  if (!ok) g_bad.fetch_add(1);
}

long counter_at0() {
  return apgas::at(apgas::place(0), [] { return g_counter.load(); });
}

void bump_at0() {
  apgas::at(apgas::place(0), [] { g_counter.fetch_add(1); });
}

// X10 TestClockedFinish over all places: every activity bumps a counter at place 0 in each phase; after the phase
// change each sees exactly the bumps of every activity of every earlier phase.
TEST(ClockDist, ClockedFinishOverAllPlaces) {
  run_everywhere([] {
    reset_everywhere();
    constexpr int phases = 6;
    constexpr int per_place = 2;
    const int n = nplaces() * per_place;
    apgas::clocked_finish([&] {
      for (apgas::place p : apgas::places()) {
        for (int k = 0; k < per_place; ++k) {
          apgas::clocked_async_at(p, [n] {
            for (int i = 0; i < phases; ++i) {
              bump_at0();
              apgas::advance_all();
              const long seen = counter_at0();
              check(seen >= static_cast<long>(i + 1) * n && seen <= static_cast<long>(i + 2) * n);
            }
          });
        }
      }
    });
    EXPECT_EQ(counter_at0(), static_cast<long>(phases) * n);
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// Clocked activities at every place offer to a collecting finish around the clocked finish: their messages carry
// the collector and the clock trailer together (also through an `at` made by a clocked activity).
TEST(ClockDist, ClockedActivitiesOfferToACollectingFinish) {
  run_everywhere([] {
    constexpr int phases = 4;
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      apgas::clocked_finish([] {
        for (apgas::place p : apgas::places()) {
          apgas::clocked_async_at(p, [] {
            for (int i = 0; i < phases; ++i) {
              apgas::offer(1L);
              apgas::advance_all();
            }
            const apgas::place next = place_at(apgas::here().id() + 1);
            apgas::at(next, [] { apgas::offer(100L); });
          });
        }
      });
    });
    EXPECT_EQ(total, static_cast<long>(nplaces()) * (phases + 100));
  });
}

// Exact phases: in phase i every activity writes i into its slot at place 0, advances, and then reads every slot:
// each must hold i (nobody can have written i+1 before everyone has read: a second clock separates the read).
TEST(ClockDist, BarrierAcrossPlacesWithExactPhases) {
  run_everywhere([] {
    reset_everywhere();
    constexpr int phases = 8;
    const int n = nplaces();
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int k = 1; k < n; ++k) {
        apgas::clocked_async_at(apgas::place(k), {c}, [c, k, n] {
          for (int i = 1; i <= phases; ++i) {
            check(c.phase() == 2 * i - 1);
            apgas::at(apgas::place(0), [](int slot, int v) { g_slot[static_cast<std::size_t>(slot)] = v; }, k, i);
            c.advance();
            for (int j = 0; j < n; ++j) {
              check(apgas::at(apgas::place(0), [](int s) { return g_slot[static_cast<std::size_t>(s)].load(); },
                              j) == i);
            }
            c.resume();  // split phase: arrive, then work, then wait
            check(c.phase() == 2 * i);
            c.advance();
          }
          check(c.phase() == 2 * phases + 1);
        });
      }
      for (int i = 1; i <= phases; ++i) {
        EXPECT_EQ(c.phase(), 2 * i - 1);
        g_slot[0] = i;
        c.advance();
        for (int j = 0; j < n; ++j) EXPECT_EQ(g_slot[static_cast<std::size_t>(j)].load(), i);
        c.advance();
      }
      EXPECT_EQ(c.phase(), 2 * phases + 1);
      c.drop();
    });
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// X10 RemoteRef: one activity advances 20 times inside at(next place) while the others advance locally; everyone
// counts at place 0 in each phase and sees exactly the earlier phases' counts.
TEST(ClockDist, AdvanceInsideAtWhileOthersAdvanceLocally) {
  run_everywhere([] {
    reset_everywhere();
    constexpr int phases = 20;
    const int n = nplaces();
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int k = 0; k < n; ++k) {
        apgas::clocked_async_at(apgas::place(k), {c}, [c, n] {
          for (int i = 1; i <= phases; ++i) {
            check(c.phase() == i);
            bump_at0();
            c.advance();
            check(counter_at0() >= static_cast<long>(i) * (n + 1));
          }
        });
      }
      apgas::at(place_at(1), [c, n] {
        // The calling activity, now at place 1, still registered on c.
        check(c.registered());
        for (int i = 1; i <= phases; ++i) {
          check(c.phase() == i);
          bump_at0();
          c.advance();
          check(counter_at0() >= static_cast<long>(i) * (n + 1));
        }
      });
      EXPECT_TRUE(c.registered());
      EXPECT_EQ(c.phase(), phases + 1);
      c.drop();
    });
    EXPECT_EQ(counter_at0(), static_cast<long>(phases) * (nplaces() + 1));
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// A clock made at another place: returned from `at` (the body's registration comes back with it), then used by
// children at every place; also a clock made by a remote activity for its own children.
TEST(ClockDist, ClockMadeAtARemotePlace) {
  run_everywhere([] {
    reset_everywhere();
    const int n = nplaces();
    apgas::finish([&] {
      apgas::clock c = apgas::at(place_at(n - 1), [] { return apgas::clock::make(); });
      EXPECT_EQ(c.home(), place_at(n - 1));
      EXPECT_TRUE(c.registered());
      EXPECT_EQ(c.phase(), 1);
      for (apgas::place p : apgas::places()) {
        apgas::clocked_async_at(p, {c}, [c] {
          for (int i = 1; i <= 5; ++i) {
            check(c.phase() == i);
            bump_at0();
            c.advance();
            check(counter_at0() >= static_cast<long>(i) * (apgas::num_hosts() + 1));
          }
        });
      }
      for (int i = 1; i <= 5; ++i) {
        bump_at0();
        c.advance();
        EXPECT_GE(counter_at0(), static_cast<long>(i) * (n + 1));
      }
      EXPECT_EQ(c.phase(), 6);
    });
    EXPECT_EQ(counter_at0(), 5L * (nplaces() + 1));
    // A remote activity makes a clock and registers children at every place on it, then leaves.
    apgas::finish([] {
      apgas::async_at(place_at(1), [] {
        apgas::clock d = apgas::clock::make();
        for (apgas::place p : apgas::places()) {
          apgas::clocked_async_at(p, {d}, [d] {
            for (int i = 1; i <= 4; ++i) {
              check(d.phase() == i);
              d.advance();
            }
            check(d.phase() == 5);
          });
        }
        d.advance();
        check(d.phase() == 2);
        d.drop();
        check(!d.registered());
      });
    });
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// A pipeline: stage s runs at place s % n; in phase i it takes item i - s from its inbox (written by stage s - 1 in
// phase i - 1 at this place), checks it, and writes it on to the next stage's place.
TEST(ClockDist, PipelineAcrossPlaces) {
  run_everywhere([] {
    reset_everywhere();
    constexpr int items = 10;
    const int stages = nplaces() + 1;  // one place runs two stages
    ASSERT_LE(items + stages, max_slots / 2);
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int s = 0; s < stages; ++s) {
        apgas::clocked_async_at(place_at(s), {c}, [c, s, stages] {
          for (int i = 0; i < items + stages - 1; ++i) {
            check(c.phase() == i + 1);
            const int j = i - s;  // the item this stage handles in this phase
            if (j >= 0 && j < items) {
              long v = j * 100;
              if (s > 0) {
                // Stage s's inbox for item j: slot (s % 2) * 32 + j at place s % n (two stages may share a place).
                v = g_slot[static_cast<std::size_t>((s % 2) * 32 + j)].load();
                check(v == j * 100 + s - 1);
                v += (s > 0 ? 1 : 0);
              }
              if (s + 1 < stages) {
                apgas::at(place_at(s + 1), [](int slot, long x) { g_slot[static_cast<std::size_t>(slot)] = x; },
                          ((s + 1) % 2) * 32 + j, s == 0 ? v : v);
              } else {
                check(v == j * 100 + s);
                apgas::at(apgas::place(0), [] { g_counter.fetch_add(1); });
              }
            }
            c.advance();
          }
        });
      }
      c.drop();
    });
    EXPECT_EQ(counter_at0(), items);
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// advance_all/resume_all over two clocks homed at different places, with children at every place on both.
TEST(ClockDist, AdvanceAllOverClocksOfTwoHomes) {
  run_everywhere([] {
    reset_everywhere();
    const int n = nplaces();
    apgas::finish([&] {
      apgas::clock a = apgas::clock::make();
      apgas::clock b = apgas::at(place_at(1), [] { return apgas::clock::make(); });
      for (apgas::place p : apgas::places()) {
        apgas::clocked_async_at(p, {a, b}, [a, b] {
          for (int i = 1; i <= 6; ++i) {
            check(a.phase() == i && b.phase() == i);
            bump_at0();
            if (i % 2 == 0) {
              apgas::resume_all();
              check(a.phase() == i);
            }
            apgas::advance_all();
            check(counter_at0() >= static_cast<long>(i) * (apgas::num_hosts() + 1));
          }
          a.drop();
          b.advance();
          check(b.phase() == 8);
        });
      }
      for (int i = 1; i <= 6; ++i) {
        bump_at0();
        apgas::advance_all();
        EXPECT_GE(counter_at0(), static_cast<long>(i) * (n + 1));
      }
      a.drop();
      b.advance();
      EXPECT_EQ(b.phase(), 8);
      EXPECT_FALSE(a.registered());
    });
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// A parent that has resumed registers a child at the next place (the child has arrived in the parent's phase) and
// leaves at once: the child must still hold the next phase back (under the reordering shim the parent's drop may
// reach the home before the child's registration does).
TEST(ClockDist, ChildOfAResumedParentIsCountedInTheNextPhase) {
  run_everywhere([] {
    reset_everywhere();
    const int n = nplaces();
    for (int round = 0; round < 5; ++round) {
      apgas::at(apgas::place(0), [] { g_counter = 0; });
      apgas::finish([&] {
        apgas::clock c = apgas::clock::make();
        for (apgas::place p : apgas::places()) {
          apgas::clocked_async_at(p, {c}, [c] {
            c.resume();
            apgas::clocked_async_at(place_at(apgas::here().id() + 1), {c}, [c] {
              check(c.phase() == 1);
              c.advance();
              check(c.phase() == 2);
              bump_at0();
              c.advance();
              check(counter_at0() == apgas::num_hosts() + 1);
            });
            c.drop();
          });
        }
        c.advance();
        bump_at0();
        c.advance();
        EXPECT_EQ(counter_at0(), n + 1);
        EXPECT_EQ(c.phase(), 3);
        c.drop();
      });
    }
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

// An activity that ends at another place drops its clocks (and its finish counts it): the others go on alone.
TEST(ClockDist, ActivitiesEndingElsewhereDropTheirClocks) {
  run_everywhere([] {
    reset_everywhere();
    apgas::finish([] {
      apgas::clock c = apgas::clock::make();
      for (apgas::place p : apgas::places()) {
        // Place p's child takes part in p.id() + 1 phases and ends registered.
        apgas::clocked_async_at(p, {c}, [c] {
          for (int i = 0; i <= apgas::here().id(); ++i) c.advance();
          apgas::at(apgas::place(0), [] { g_counter.fetch_add(1); });
        });
      }
      for (int i = 1; i <= 10; ++i) c.advance();
      EXPECT_EQ(c.phase(), 11);
      EXPECT_EQ(counter_at0(), nplaces());
    });
    // A clocked_finish whose children at every place end without advancing.
    apgas::clocked_finish([] {
      for (apgas::place p : apgas::places()) {
        apgas::clocked_async_at(p, [] { apgas::at(apgas::place(0), [] { g_counter.fetch_add(1); }); });
      }
      apgas::advance_all();
    });
    EXPECT_EQ(counter_at0(), 2L * nplaces());
  });
}

// In the steady state each place sends one message per phase: the non-home place its report (exactly: it sends it
// itself before it waits), the home one announcement per other place.
TEST(ClockDist, OneMessagePerPlacePerPhase) {
  run_everywhere([] {
    reset_everywhere();
    constexpr int phases = 50;
    const int n = nplaces();
    apgas::finish([&] {
      apgas::clock c = apgas::clock::make();
      for (int k = 1; k < n; ++k) {
        apgas::clocked_async_at(apgas::place(k), {c}, [c] {
          c.advance();  // warm: every place knows the clock
          const std::uint64_t before = apgas::detail::messages_sent();
          for (int i = 0; i < phases; ++i) c.advance();
          g_sent = static_cast<long>(apgas::detail::messages_sent() - before);
        });
      }
      c.advance();
      const std::uint64_t before = apgas::detail::messages_sent();
      for (int i = 0; i < phases; ++i) c.advance();
      const std::uint64_t sent = apgas::detail::messages_sent() - before;
      // The home's announcements are sent by whichever worker completes a phase, and this activity may see the
      // phase (and read the count) just before they go: one phase's worth at either end of the window.
      const auto per_phase = static_cast<std::uint64_t>(n - 1);
      EXPECT_GE(sent, static_cast<std::uint64_t>(phases - 1) * per_phase);
      EXPECT_LE(sent, static_cast<std::uint64_t>(phases + 1) * per_phase);
      c.drop();
    });
    for (int k = 1; k < n; ++k) EXPECT_EQ(apgas::at(apgas::place(k), [] { return g_sent.load(); }), phases);
  });
}

template <class E>
bool holds(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const apgas::multiple_exceptions& m) {
    for (const auto& x : m.exceptions()) {
      if (holds<E>(x)) return true;
    }
    return false;
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Every misuse raises the documented exception at the place where it happens, and it reaches the finish.
TEST(ClockDist, MisuseAtAnotherPlace) {
  run_everywhere([] {
    reset_everywhere();
    const apgas::place there = place_at(1);
    // A child registered on nothing uses a clock captured in its closure.
    apgas::clock c0;
    std::exception_ptr e;
    try {
      apgas::finish([&] {
        apgas::clock c = apgas::clock::make();
        c0 = c;
        apgas::async_at(there, [c] { c.advance(); });
        apgas::async_at(there, [c] { c.resume(); });
        apgas::async_at(there, [c] { c.drop(); });
        apgas::async_at(there, [c] { (void)c.phase(); });
        apgas::async_at(there, [c] { apgas::clocked_async_at(apgas::place(0), {c}, [] {}); });
        apgas::async_at(there, [c] { check(!c.registered() && c.dropped()); });
        c.drop();
      });
    } catch (...) {
      e = std::current_exception();
    }
    ASSERT_TRUE(e);
    apgas_test::inspect_as<apgas::multiple_exceptions>(e, [](const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.exceptions().size(), 5u);
      for (const auto& x : m.exceptions()) EXPECT_TRUE(holds<apgas::clock_use_exception>(x));
    });
    // The clock has ended: its handle names no registration anywhere.
    EXPECT_THROW(apgas::clocked_async_at(there, {c0}, [] {}), apgas::clock_use_exception);
    EXPECT_FALSE(c0.registered());

    // A registered child that dropped, then uses the clock; one inside atomic; one without a clocked_finish.
    e = nullptr;
    try {
      apgas::finish([&] {
        apgas::clock c = apgas::clock::make();
        apgas::clocked_async_at(there, {c}, [c] {
          c.drop();
          c.advance();
        });
        apgas::clocked_async_at(there, {c}, [c] { apgas::atomic([&] { c.advance(); }); });
        apgas::async_at(there, [] { apgas::clocked_async_at(apgas::place(0), [] {}); });
        apgas::async_at(there, [] { apgas::clocked_async([] {}); });
        c.advance();
        c.drop();
      });
    } catch (...) {
      e = std::current_exception();
    }
    ASSERT_TRUE(e);
    apgas_test::inspect_as<apgas::multiple_exceptions>(e, [](const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.exceptions().size(), 4u);
      int use = 0, illegal = 0;
      for (const auto& x : m.exceptions()) {
        use += holds<apgas::clock_use_exception>(x) ? 1 : 0;
        illegal += holds<apgas::illegal_operation_exception>(x) ? 1 : 0;
      }
      EXPECT_EQ(use, 3);
      EXPECT_EQ(illegal, 1);
    });

    // At the caller: a clock it is not registered on, and the implicit form outside a clocked_finish.
    apgas::clock mine = apgas::clock::make();
    mine.drop();
    EXPECT_THROW(apgas::clocked_async_at(there, {mine}, [] {}), apgas::clock_use_exception);
    EXPECT_THROW(apgas::clocked_async_at(there, [] {}), apgas::clock_use_exception);
    // Misuse inside a remote at comes back raw.
    apgas::clock d = apgas::clock::make();
    EXPECT_THROW(apgas::at(there, [] {
                   apgas::clock e2;
                   e2.advance();
                 }),
                 apgas::clock_use_exception);
    EXPECT_TRUE(d.registered());  // the registration went there and came back, exception or not
    EXPECT_THROW(apgas::at(there, [d] { d.drop(); d.phase(); }), apgas::clock_use_exception);
    EXPECT_FALSE(d.registered());  // dropped there
    EXPECT_EQ(bad_everywhere(), 0);
  });
}

}  // namespace
