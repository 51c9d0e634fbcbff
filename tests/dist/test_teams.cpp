// Collecting finishes with offers from every place, and every team operation, in real processes: run under mpirun
// with 2 and 3 processes, over mpi and over libfabric (ctest apgas.dist.teams_*). Each TEST is one apgas::run whose
// main activity runs at place 0 while the other places serve; the team tests run one activity per place (SPMD).
#include "support/run.hpp"

#include <gtest/gtest.h>
#include <apgas/apgas.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using apgas_test::run_everywhere;

namespace {

int nplaces() { return apgas::num_hosts(); }

// Every member of w went through every operation so far: an allreduce of the team ranks comes out right.
void expect_in_step(apgas::team& w) {
  std::vector<long> s(2, w.rank());
  w.allreduce(std::span<long>(s), [](long x, long y) { return x + y; });
  EXPECT_EQ(s[1], static_cast<long>(w.size()) * (w.size() - 1) / 2);
}

// ---- collecting finish ----

struct pair2 {  // X10 CF6's struct value
  long a = 0;
  long b = 0;
};
auto pair_sum() {
  return apgas::reducer{pair2{}, [](const pair2& x, const pair2& y) { return pair2{x.a + y.a, x.b + y.b}; }};
}

// X10 CF6: every place offers (1, 2) a hundred times (from ten activities each) -> (100 P, 200 P).
TEST(CollectingFinish, EveryPlaceOffersAStruct) {
  run_everywhere([] {
    for (int round = 0; round < 3; ++round) {
      const pair2 r = apgas::finish_collect(pair_sum(), [] {
        for (apgas::place p : apgas::places()) {
          apgas::async_at(p, [] {
            for (int a = 0; a < 10; ++a) {
              apgas::async([] {
                for (int i = 0; i < 10; ++i) apgas::offer(pair2{1, 2});
              });
            }
          });
        }
      });
      EXPECT_EQ(r.a, 100L * nplaces());
      EXPECT_EQ(r.b, 200L * nplaces());
    }
  });
}

// A place whose partial value cannot be written (its serialize throws) reports that exception instead, its value
// dropped; it aborted the job (exit 3 everywhere).
struct unwritable {
  long n = 0;
  template <class A>
  void serialize(A& a) {
    if constexpr (std::is_same_v<A, apgas::writer>) {
      if (n == 666) throw std::runtime_error("cannot write 666");
    }
    a & n;
  }
};
TEST(CollectingFinish, AValueThatCannotBeWrittenIsThatPlacesException) {
  run_everywhere([] {
    if (nplaces() < 2) return;  // (the home's own offers are never written)
    auto sum = apgas::reducer{unwritable{}, [](const unwritable& x, const unwritable& y) { return unwritable{x.n + y.n}; }};
    try {
      (void)apgas::finish_collect(sum, [] {
        apgas::async_at(apgas::places().back(), [] { apgas::offer(unwritable{666}); });
      });
      ADD_FAILURE() << "nothing was thrown";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      EXPECT_NE(std::string(m.what()).find("cannot write 666"), std::string::npos) << m.what();
    }
    const unwritable r = apgas::finish_collect(sum, [] {
      for (apgas::place p : apgas::places()) apgas::async_at(p, [] { apgas::offer(unwritable{1}); });
    });
    EXPECT_EQ(r.n, nplaces());
  });
}

// X10 CF8: a class value (a serialized vector: count and sum), the offers made under a plain finish nested in the
// collecting one, at every place, and inside an outer finish.
TEST(CollectingFinish, ClassValuesThroughANestedPlainFinish) {
  run_everywhere([] {
    auto vec_sum = apgas::reducer{std::vector<long>{0, 0}, [](const std::vector<long>& x, const std::vector<long>& y) {
                                    return std::vector<long>{x[0] + y[0], x[1] + y[1]};
                                  }};
    std::vector<long> r;
    apgas::finish([&] {
      r = apgas::finish_collect(vec_sum, [] {
        apgas::finish([] {
          for (apgas::place p : apgas::places()) {
            apgas::async_at(p, [] {
              for (int i = 0; i < 100; ++i) {
                apgas::async([i] { apgas::offer(std::vector<long>{1, i + 100L * apgas::here().id()}); });
              }
            });
          }
        });
      });
    });
    const long n = nplaces();
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0], 100 * n);
    EXPECT_EQ(r[1], n * 4950 + 100 * 100 * n * (n - 1) / 2);
  });
}

// X10 CF9: nested collecting finishes: the inner one gets every place's offers, the outer one only its own two.
TEST(CollectingFinish, NestedCollectingFinishes) {
  run_everywhere([] {
    pair2 inner{};
    const pair2 outer = apgas::finish_collect(pair_sum(), [&] {
      apgas::offer(pair2{1, 1});
      inner = apgas::finish_collect(pair_sum(), [] {
        for (apgas::place p : apgas::places()) {
          apgas::async_at(p, [] {
            for (int i = 0; i < 100; ++i) apgas::offer(pair2{1, 2});
          });
        }
      });
      apgas::offer(pair2{1, 1});
    });
    EXPECT_EQ(outer.a, 2);
    EXPECT_EQ(outer.b, 2);
    EXPECT_EQ(inner.a, 100L * nplaces());
    EXPECT_EQ(inner.b, 200L * nplaces());
  });
}

// Offers that travel several hops: place 0 -> 1 -> 2 (a local finish at place 1 homes the last hop), and offers
// made inside `at`, which belong to the caller's collecting finish.
TEST(CollectingFinish, OffersAcrossSeveralHopsAndInsideAt) {
  run_everywhere([] {
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      for (apgas::place p : apgas::places()) {
        apgas::async_at(p, [] {
          apgas::finish([] {
            const apgas::place q((apgas::here().id() + 1) % apgas::num_hosts());
            apgas::async_at(q, [] {
              apgas::offer(1000L);
              apgas::async_at(apgas::place((apgas::here().id() + 1) % apgas::num_hosts()), [] { apgas::offer(1L); });
            });
          });
          apgas::offer(10L);
        });
      }
      for (apgas::place p : apgas::places()) apgas::at(p, [] { apgas::offer(100000L); });
    });
    EXPECT_EQ(total, nplaces() * 101011L);
  });
}

// User reducers whose value is a std::string (serialized with the archive): the fold order at one place is the order
// of its offers; the home's value comes first when it offers before it starts the remote activity. One reducer is an
// empty struct; the other carries a separator (a serialize member).
struct concat {
  using value_type = std::string;
  std::string zero() const { return {}; }
  std::string operator()(const std::string& a, const std::string& b) const { return a + b; }
};
struct joiner {
  using value_type = std::string;
  std::string sep;
  std::string zero() const { return {}; }
  std::string operator()(const std::string& a, const std::string& b) const {
    return a.empty() ? b : b.empty() ? a : a + sep + b;
  }
  template <class A>
  void serialize(A& a) {
    a& sep;
  }
};

TEST(CollectingFinish, UserReducersWithStringValuesFoldInOfferOrder) {
  run_everywhere([] {
    const auto body = [] {
      apgas::offer(std::string("x"));
      apgas::async_at(apgas::place(1), [] {
        apgas::offer(std::string("a"));
        apgas::offer(std::string("b"));
        apgas::offer(std::string("c"));
      });
    };
    EXPECT_EQ(apgas::finish_collect(concat{}, body), "xabc");
    EXPECT_EQ(apgas::finish_collect(joiner{"--"}, body), "x--a--b--c");
  });
}

// X10 CF10's fold order, with the offers made at another place: "Hello" and "CF" fold into that place's partial value
// (zero ⊕ Hello ⊕ CF), which folds into the finish's zero at home: exactly X10's "[,[[,Hello],CF]]".
struct bracket {
  using value_type = std::string;
  std::string zero() const { return {}; }
  std::string operator()(const std::string& a, const std::string& b) const { return "[" + a + "," + b + "]"; }
};

TEST(CollectingFinish, X10FoldOrderAcrossPlaces) {
  run_everywhere([] {
    const std::string s = apgas::finish_collect(bracket{}, [] {
      apgas::async_at(apgas::place(1), [] {
        apgas::offer(std::string("Hello"));
        apgas::offer(std::string("CF"));
      });
    });
    EXPECT_EQ(s, "[,[[,Hello],CF]]");
  });
}

// A place whose activities threw drops its partial value (X10's rule): the finish throws; an enclosing collecting
// finish that catches it gets the other places' values only.
TEST(CollectingFinish, APlaceThatThrowsDropsItsValue) {
  run_everywhere([] {
    try {
      (void)apgas::finish_collect(apgas::sum<long>(), [] {
        for (apgas::place p : apgas::places()) {
          apgas::async_at(p, [] {
            apgas::offer(1L);
            if (apgas::here().id() == 1) throw std::runtime_error("place 1 fails");
          });
        }
      });
      ADD_FAILURE() << "finish_collect did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      EXPECT_EQ(m.of_type<std::runtime_error>().size(), 1u);
    }
    const long total = apgas::finish_collect(apgas::sum<long>(), [] {
      try {
        apgas::finish([] {
          for (apgas::place p : apgas::places()) {
            apgas::async_at(p, [] {
              for (int i = 0; i < 5; ++i) apgas::async([] { apgas::offer(10L); });
              if (apgas::here().id() == 1) throw std::runtime_error("place 1 fails");
            });
          }
        });
        ADD_FAILURE() << "the finish did not throw";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(m.size(), 1u);
      }
    });
    EXPECT_EQ(total, 50L * (nplaces() - 1));
  });
}

// Misuse at another place raises the documented exception there (and so reaches the finish).
TEST(CollectingFinish, MisuseAtAnotherPlaceThrowsThere) {
  run_everywhere([] {
    auto expect_illegal = [](auto body, const std::string& text) {
      try {
        body();
        ADD_FAILURE() << "no exception; expected one saying " << text;
      } catch (const apgas::multiple_exceptions& m) {
        ASSERT_EQ(m.size(), 1u);
        const auto e = m.of_type<apgas::illegal_operation_exception>();
        ASSERT_EQ(e.size(), 1u);
        EXPECT_NE(std::string(e[0]->what()).find(text), std::string::npos) << e[0]->what();
      }
    };
    // A value of the wrong type.
    expect_illegal(
        [] {
          (void)apgas::finish_collect(apgas::sum<long>(),
                                      [] { apgas::async_at(apgas::place(1), [] { apgas::offer(1); }); });
        },
        "of type int to a collecting finish whose reducer takes long");  // (demangled, as at home)
    // No collecting finish at all.
    expect_illegal([] { apgas::finish([] { apgas::async_at(apgas::place(1), [] { apgas::offer(1L); }); }); },
                   "no enclosing collecting finish");
    // A reducer that cannot travel (a std::function is neither trivially copyable nor serializable).
    expect_illegal(
        [] {
          auto r = apgas::reducer{0L, std::function<long(long, long)>([](long a, long b) { return a + b; })};
          (void)apgas::finish_collect(r, [] { apgas::async_at(apgas::place(1), [] { apgas::offer(1L); }); });
        },
        "cannot be sent to another place");
    // The same reducer works at home.
    auto r = apgas::reducer{0L, std::function<long(long, long)>([](long a, long b) { return a + b; })};
    EXPECT_EQ(apgas::finish_collect(r, [] { apgas::offer(5L); }), 5L);
  });
}

// ---- teams ----

// Run f() once at every host place, inside a finish.
template <class F>
void spmd(F f) {
  apgas::finish([&] {
    for (apgas::place p : apgas::places()) apgas::async_at(p, f);
  });
}

long val(int place, std::size_t i) { return static_cast<long>(place) * 1000 + static_cast<long>(i); }

// Every operation on team t, its contents checked. Every member calls it.
void exercise(apgas::team t) {
  const int n = t.size();
  const int me = t.rank();
  const int here = apgas::here().id();
  EXPECT_EQ(t.member(me), apgas::here());
  EXPECT_EQ(t.rank_of(apgas::here()), me);
  const std::size_t k = 1000;  // 8 KB of longs
  for (int r = 0; r < n; ++r) {
    const apgas::place root = t.member(r);
    // reduce
    std::vector<long> v(k);
    for (std::size_t i = 0; i < k; ++i) v[i] = val(here, i);
    t.reduce(
        std::span<long>(v), [](long a, long b) { return a + b; }, root);
    long places_sum = 0;
    for (int i = 0; i < n; ++i) places_sum += t.member(i).id();
    for (std::size_t i = 0; i < k; i += 99) {
      EXPECT_EQ(v[i], me == r ? places_sum * 1000 + n * static_cast<long>(i) : val(here, i));
    }
    // broadcast
    std::vector<long> b(k, -1);
    if (me == r) std::iota(b.begin(), b.end(), 7L);
    t.broadcast(std::span<long>(b), root);
    EXPECT_EQ(b[0], 7);
    EXPECT_EQ(b[k - 1], 7 + static_cast<long>(k) - 1);
    // gather
    std::vector<long> mine(k);
    for (std::size_t i = 0; i < k; ++i) mine[i] = val(here, i);
    std::vector<long> all(me == r ? k * static_cast<std::size_t>(n) : 0);
    t.gather(std::span<const long>(mine), std::span<long>(all), root);
    if (me == r) {
      for (int m = 0; m < n; ++m) {
        EXPECT_EQ(all[static_cast<std::size_t>(m) * k + 5], val(t.member(m).id(), 5));
        EXPECT_EQ(all[static_cast<std::size_t>(m) * k + k - 1], val(t.member(m).id(), k - 1));
      }
    }
    // gatherv: member m gives m + 1 elements
    std::vector<std::size_t> counts(static_cast<std::size_t>(n));
    for (int m = 0; m < n; ++m) counts[static_cast<std::size_t>(m)] = static_cast<std::size_t>(m) + 1;
    const std::size_t total = static_cast<std::size_t>(n) * (static_cast<std::size_t>(n) + 1) / 2;
    std::vector<long> mv(static_cast<std::size_t>(me) + 1);
    for (std::size_t i = 0; i < mv.size(); ++i) mv[i] = val(here, i);
    std::vector<long> allv(me == r ? total : 0);
    t.gatherv(std::span<const long>(mv), std::span<long>(allv), std::span<const std::size_t>(counts), root);
    if (me == r) {
      std::size_t off = 0;
      for (int m = 0; m < n; ++m) {
        for (std::size_t i = 0; i <= static_cast<std::size_t>(m); ++i)
          EXPECT_EQ(allv[off + i], val(t.member(m).id(), i));
        off += static_cast<std::size_t>(m) + 1;
      }
    }
    // scatter
    std::vector<long> src(me == r ? k * static_cast<std::size_t>(n) : 0);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<long>(i) * 3;
    std::vector<long> got(k, -1);
    t.scatter(std::span<const long>(src), std::span<long>(got), root);
    EXPECT_EQ(got[0], static_cast<long>(static_cast<std::size_t>(me) * k) * 3);
    EXPECT_EQ(got[k - 1], static_cast<long>(static_cast<std::size_t>(me) * k + k - 1) * 3);
    // scatterv: member m gets m + 1 elements
    std::vector<long> srcv(me == r ? total : 0);
    std::iota(srcv.begin(), srcv.end(), 0L);
    std::vector<long> gotv(static_cast<std::size_t>(me) + 1, -1);
    t.scatterv(std::span<const long>(srcv), std::span<const std::size_t>(counts), std::span<long>(gotv), root);
    const long first = static_cast<long>(static_cast<std::size_t>(me) * (static_cast<std::size_t>(me) + 1) / 2);
    for (std::size_t i = 0; i < gotv.size(); ++i) EXPECT_EQ(gotv[i], first + static_cast<long>(i));
  }
  // allgather
  std::vector<long> mine(k);
  for (std::size_t i = 0; i < k; ++i) mine[i] = val(here, i);
  std::vector<long> all(k * static_cast<std::size_t>(n));
  t.allgather(std::span<const long>(mine), std::span<long>(all));
  for (int m = 0; m < n; ++m) EXPECT_EQ(all[static_cast<std::size_t>(m) * k + 17], val(t.member(m).id(), 17));
  // alltoall: block j of member i holds i * 100 + j
  std::vector<long> in(k * static_cast<std::size_t>(n)), out(in.size(), -1);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = me * 100 + static_cast<long>(i / k);
  t.alltoall(std::span<const long>(in), std::span<long>(out));
  for (int m = 0; m < n; ++m) {
    EXPECT_EQ(out[static_cast<std::size_t>(m) * k], m * 100 + me);
    EXPECT_EQ(out[static_cast<std::size_t>(m) * k + k - 1], m * 100 + me);
  }
  // allreduce
  std::vector<double> d(16, me + 1.0);
  t.allreduce(std::span<double>(d), [](double a, double b) { return a + b; });
  EXPECT_DOUBLE_EQ(d[3], n * (n + 1) / 2.0);
  // index_of_max / index_of_min: values with a tie at the top and at the bottom
  EXPECT_EQ(t.index_of_max(static_cast<double>(me / 2), me + 10), 10 + ((n - 1) / 2) * 2);
  EXPECT_EQ(t.index_of_min(static_cast<double>(me / 2), me + 10), 10);
  EXPECT_EQ(t.index_of_max(-me, 100 - me), 100);
  t.barrier();
}

TEST(Team, EveryOperationOnTheWorldTeam) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      EXPECT_EQ(w.size(), apgas::num_hosts());
      EXPECT_EQ(w.rank(), apgas::here().id());
      for (int round = 0; round < 2; ++round) exercise(w);
    });
  });
}

TEST(Team, EveryOperationOnSubTeams) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const int me = apgas::here().id();
      const int n = w.size();
      // By parity: {0, 2, ...} and {1, 3, ...}, ranked by place.
      apgas::team par = w.split(me % 2, me);
      EXPECT_EQ(par.size(), (n - me % 2 + 1) / 2);
      EXPECT_EQ(par.rank(), me / 2);
      for (int i = 0; i < par.size(); ++i) EXPECT_EQ(par.member(i).id(), me % 2 + 2 * i);
      // Every place, in reverse order (the key decides the rank).
      apgas::team rev = w.split(7, -me);
      EXPECT_EQ(rev.size(), n);
      EXPECT_EQ(rev.rank(), n - 1 - me);
      EXPECT_EQ(rev.member(0).id(), n - 1);
      // Operations on the sub-teams, interleaved with the world team's: each team keeps its own sequence.
      exercise(par);
      w.barrier();
      exercise(rev);
      exercise(w);
      // A sub-team of a sub-team.
      apgas::team one = rev.split(rev.rank(), 0);
      EXPECT_EQ(one.size(), 1);
      exercise(one);
      EXPECT_THROW((void)par.member(par.size()), std::out_of_range);
    });
  });
}

TEST(Team, MisuseIsReportedWhereItHappens) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const int me = apgas::here().id();
      const int n = w.size();
      std::vector<long> v(4, 1);
      // A root that is no place, a root outside the team: refused before anything is sent, everywhere.
      try {
        w.reduce(
            std::span<long>(v), [](long a, long b) { return a + b; }, apgas::place(n + 5));
        ADD_FAILURE() << "reduce to place " << n + 5;
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_NE(std::string(e.what()).find("apgas::team::reduce: the root, place " + std::to_string(n + 5) +
                                             ", is not a place"),
                  std::string::npos)
            << e.what();
      }
      apgas::team par = w.split(me % 2, 0);
      const apgas::place outside(me % 2 == 0 ? 1 : 0);  // a place of the other parity
      try {
        par.broadcast(std::span<long>(v), outside);
        ADD_FAILURE() << "broadcast from a place outside the team";
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_NE(std::string(e.what()).find("is not in this team"), std::string::npos) << e.what();
      }
      // gather with a wrong `out` at the root: the root throws, the others have sent and go on.
      std::vector<long> out(me == 0 ? 3 : 0);
      if (me == 0) {
        try {
          w.gather(std::span<const long>(v), std::span<long>(out), apgas::place(0));
          ADD_FAILURE() << "gather into 3 elements";
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_NE(std::string(e.what()).find("out holds 3 elements at the root, expected"), std::string::npos)
              << e.what();
        }
      } else {
        w.gather(std::span<const long>(v), std::span<long>(out), apgas::place(0));
      }
      // scatter with a wrong `in` at the root: every member throws, the others naming the root.
      std::vector<long> in(me == 0 ? 5 : 0), mine(2);
      try {
        w.scatter(std::span<const long>(in), std::span<long>(mine), apgas::place(0));
        ADD_FAILURE() << "scatter of 5 elements";
      } catch (const apgas::illegal_operation_exception& e) {
        const std::string s = e.what();
        EXPECT_NE(s.find("in holds 5 elements at the root"), std::string::npos) << s;
        if (me != 0) {
          EXPECT_NE(s.find("place 0 was called with wrong arguments"), std::string::npos) << s;
        }
      }
      // scatterv with too few counts at the root.
      std::vector<std::size_t> counts(static_cast<std::size_t>(n) - 1, 1);
      std::vector<long> one(1);
      EXPECT_THROW(w.scatterv(std::span<const long>(in), std::span<const std::size_t>(counts), std::span<long>(one),
                              apgas::place(0)),
                   apgas::illegal_operation_exception);
      // gatherv whose counts wrap around SIZE_MAX to the size of `out` (2 + ... + (SIZE_MAX - n + 2) = 1): refused,
      // not a copy of 2 elements into 1.
      {
        std::vector<std::size_t> wrap(static_cast<std::size_t>(n), 1);
        wrap[0] = 2, wrap.back() = SIZE_MAX - static_cast<std::size_t>(n - 2);
        std::vector<long> give(me == 0 ? 2 : 1, me), into(me == 0 ? 1 : 0);
        try {  // (as gather: the others give their parts and return)
          w.gatherv(std::span<const long>(give), std::span<long>(into), std::span<const std::size_t>(wrap),
                    apgas::place(0));
          if (me == 0) ADD_FAILURE() << "gatherv with counts that wrap";
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_EQ(me, 0) << e.what();
          EXPECT_NE(std::string(e.what()).find("add up to more than the 1 elements"), std::string::npos) << e.what();
        }
      }
      // allgather where place 1 gives a different length: every member throws, naming the other place.
      std::vector<long> m2(me == 1 ? 3 : 2, me), all(static_cast<std::size_t>(n) * (me == 1 ? 3 : 2));
      try {
        w.allgather(std::span<const long>(m2), std::span<long>(all));
        ADD_FAILURE() << "allgather of unequal lengths";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_NE(std::string(e.what()).find(me == 1 ? "place 0 gave 2 elements, this place expects 3"
                                                     : "place 1 gave 3 elements, this place expects 2"),
                  std::string::npos)
            << e.what();
      }
      // alltoall whose input is not a multiple of the team size.
      std::vector<long> a(static_cast<std::size_t>(n) + 1), b(a.size());
      try {
        w.alltoall(std::span<const long>(a), std::span<long>(b));
        ADD_FAILURE() << "alltoall of n + 1 elements";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_NE(std::string(e.what()).find("not a multiple of the team's"), std::string::npos) << e.what();
      }
      // Members at different operations at the same point (place 0 in allreduce, the others in allgather): each
      // refuses the parts of the other operation, naming the member, instead of combining them.
      {
        std::vector<long> mine(2, me), all(static_cast<std::size_t>(n) * 2);
        try {
          if (me == 0) {
            w.allreduce(std::span<long>(mine), [](long x, long y) { return x + y; });
          } else {
            w.allgather(std::span<const long>(mine), std::span<long>(all));
          }
          ADD_FAILURE() << "allreduce against allgather";
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_NE(std::string(e.what()).find("sent a part of another operation"), std::string::npos) << e.what();
        }
      }
      // A root that receives a part of another operation (place 0 in reduce to itself, the others in a broadcast
      // from place 1, which sends to place 0 too) throws at once, naming the sender, instead of waiting for the part
      // that place 2 will never send; the broadcast is complete at the others.
      {
        std::vector<long> v2(2, me);
        try {
          if (me == 0) {
            w.reduce(std::span<long>(v2), [](long x, long y) { return x + y; }, apgas::place(0));
            ADD_FAILURE() << "reduce against broadcast";
          } else {
            w.broadcast(std::span<long>(v2), apgas::place(1));
            EXPECT_EQ(v2[0], 1);
          }
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_EQ(me, 0) << e.what();
          EXPECT_NE(std::string(e.what()).find("apgas::team::reduce (operation "), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("the member of team rank 1 (place 1) sent a part of another operation, "
                                               "or named another root"),
                    std::string::npos)
              << e.what();
        }
      }
      // The same in a sub-team whose ranks are not the places (every place, in reverse order): the error names this
      // place's operation and the sender's team rank and place.
      {
        apgas::team rev = w.split(0, -me);
        std::vector<long> mine(2, me), all(static_cast<std::size_t>(n) * 2);
        try {
          if (me == 0) {
            rev.allreduce(std::span<long>(mine), [](long x, long y) { return x + y; });
          } else {
            rev.allgather(std::span<const long>(mine), std::span<long>(all));
          }
          ADD_FAILURE() << "allreduce against allgather in a sub-team";
        } catch (const apgas::illegal_operation_exception& e) {
          const std::string s = e.what();
          EXPECT_EQ(s.find(me == 0 ? "apgas::team::allreduce" : "apgas::team::allgather"), 0u) << s;
          // (place 0 names the first member whose part came: team rank r is place n - 1 - r)
          bool named = false;
          for (int r = 0; r < n; ++r) {
            const std::string who = "the member of team rank " + std::to_string(r) + " (place " +
                                    std::to_string(n - 1 - r) + ") sent a part of another operation";
            named = named || (s.find(who) != std::string::npos && (me == 0 ? r != n - 1 : r == n - 1));
          }
          EXPECT_TRUE(named) << s;
        }
      }
      // The team still works afterwards: every member went through every operation.
      expect_in_step(w);
      w.barrier();
    });
  });
}

// A member whose root is refused (no place) still uses up the operation's number, as the others do: its next
// operation is in step with theirs. A root that receives from it learns why it got nothing.
TEST(Team, AMemberWhoseRootIsRefusedStaysInStep) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const int me = w.rank();
      const int n = w.size();
      const int bad = n + 96;  // no place
      // A broadcast from place 0, place 1 naming a root that is no place: place 1 throws, the others get the data.
      std::vector<long> v(2, me == 0 ? 111 : -1);
      try {
        w.broadcast(std::span<long>(v), apgas::place(me == 1 ? bad : 0));
        EXPECT_NE(me, 1) << "a broadcast from place " << bad;
        EXPECT_EQ(v[0], 111);
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_EQ(me, 1) << e.what();
        EXPECT_NE(std::string(e.what()).find("apgas::team::broadcast: the root, place " + std::to_string(bad)),
                  std::string::npos)
            << e.what();
      }
      // The next broadcast, from place 0 everywhere: every member gets its data, not the previous one's.
      v.assign(2, me == 0 ? 222 : -1);
      w.broadcast(std::span<long>(v), apgas::place(0));
      EXPECT_EQ(v[0], 222);
      // A reduce to place 0, place 1 naming a root that is no place: place 0 throws naming place 1 (instead of waiting
      // for its part), the others have sent theirs.
      std::vector<long> r(2, 1);
      try {
        w.reduce(
            std::span<long>(r), [](long a, long b) { return a + b; }, apgas::place(me == 1 ? -7 : 0));
        EXPECT_GE(me, 2) << "a reduce with a refused root at place 1";
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_EQ(me, 1) << e.what();
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_EQ(me, 0) << e.what();
        EXPECT_NE(std::string(e.what()).find("place 1 was called with wrong arguments: apgas::team::reduce: the root"),
                  std::string::npos)
            << e.what();
      }
      // Every member is in step.
      expect_in_step(w);
    });
  });
}

// Members passing elements of different sizes are refused, naming the sizes, instead of combining the bytes.
TEST(Team, MembersWithDifferentElementSizesAreRefused) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const int me = w.rank();
      const int n = w.size();
      // allreduce: place 0 with one long, the others with two ints (the same bytes).
      try {
        if (me == 0) {
          std::vector<long> v(1, 5);
          w.allreduce(std::span<long>(v), [](long a, long b) { return a + b; });
        } else {
          std::vector<int> v(2, 7);
          w.allreduce(std::span<int>(v), [](int a, int b) { return a + b; });
        }
        ADD_FAILURE() << "an allreduce of longs against ints";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_NE(std::string(e.what()).find(me == 0 ? "place 1 passed elements of 4 bytes, this place's are 8 bytes"
                                                     : "place 0 passed elements of 8 bytes, this place's are 4 bytes"),
                  std::string::npos)
            << e.what();
      }
      // gather to place 0, place 1 giving 16 chars for 2 longs: the root throws naming it; the others have sent.
      std::vector<long> out(me == 0 ? 2 * static_cast<std::size_t>(n) : 0);
      try {
        if (me == 1) {
          std::vector<char> c(16, 1), none;
          w.gather(std::span<const char>(c), std::span<char>(none), apgas::place(0));
        } else {
          std::vector<long> mine(2, me);
          w.gather(std::span<const long>(mine), std::span<long>(out), apgas::place(0));
        }
        EXPECT_NE(me, 0) << "a gather of longs and chars";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_EQ(me, 0) << e.what();
        EXPECT_NE(std::string(e.what()).find("apgas::team::gather: place 1 passed elements of 1 bytes, this place's "
                                             "are 8 bytes"),
                  std::string::npos)
            << e.what();
      }
      expect_in_step(w);
    });
  });
}

// Members passing elements of different types of one size (float and int) are refused as different sizes are: the
// bytes would combine into nonsense.
TEST(Team, MembersWithDifferentElementTypesOfOneSizeAreRefused) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const int me = w.rank();
      try {
        if (me == 0) {
          std::vector<float> v(2, 1.5f);
          w.allreduce(std::span<float>(v), [](float a, float b) { return a + b; });
        } else {
          std::vector<int> v(2, 7);
          w.allreduce(std::span<int>(v), [](int a, int b) { return a + b; });
        }
        ADD_FAILURE() << "an allreduce of floats against ints";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_NE(std::string(e.what()).find(me == 0 ? "place 1 passed elements of another type of 4 bytes, this "
                                                       "place's are 4 bytes (float; every member"
                                                     : "place 0 passed elements of another type of 4 bytes, this "
                                                       "place's are 4 bytes (int; every member"),
                  std::string::npos)
            << e.what();
      }
      // The same type everywhere still combines.
      std::vector<int> v(2, me + 1);
      w.allreduce(std::span<int>(v), [](int a, int b) { return a + b; });
      EXPECT_EQ(v[0], w.size() * (w.size() + 1) / 2);
      expect_in_step(w);
    });
  });
}

// A place keeps a record of a sub-team only while a copy of the team lives there.
TEST(Team, ASubTeamsRecordGoesWithItsLastCopy) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      w.barrier();
      const std::size_t before = apgas::detail::team_records();
      for (int i = 0; i < 20; ++i) {
        apgas::team t = w.split(w.rank() % 2, 0);
        t.barrier();
        const apgas::team copy = t;
        EXPECT_EQ(apgas::detail::team_records(), before + 1);
      }
      EXPECT_EQ(apgas::detail::team_records(), before);
    });
  });
}

// A team kept past its run is refused in the next: a split team's id is made again there by the first split (its
// parts would mix with that team's: wrong sums, silently), and the world team's record is the new run's.
TEST(Team, ATeamFromAnEarlierRunIsRefused) {
  static std::optional<apgas::team> kept_split, kept_world;  // (at every process)
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      kept_world = w;
      kept_split = w.split(0, w.rank());
      kept_split->barrier();
    });
  });
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      apgas::team fresh = w.split(0, w.rank());  // (the same id as the kept one)
      for (apgas::team* old : {&*kept_split, &*kept_world}) {
        std::vector<long> v(1, 1);
        try {
          old->allreduce(std::span<long>(v), [](long a, long b) { return a + b; });
          ADD_FAILURE() << "a team of an earlier run was used";
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_NE(std::string(e.what()).find("apgas::team::allreduce: this team was made in an earlier run"),
                    std::string::npos)
              << e.what();
        }
      }
      std::vector<long> v(1, 100);
      fresh.allreduce(std::span<long>(v), [](long a, long b) { return a + b; });
      EXPECT_EQ(v[0], 100L * fresh.size());
      kept_split.reset(), kept_world.reset();
    });
  });
}

// Parts of a run's last team operation that are still in flight when the run ends (members at different operations,
// large parts, one member late) are not taken in the next run, whose teams number their operations from 1 again.
TEST(Team, PartsOfAnEarlierRunAreNotTakenInTheNext) {
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      const std::size_t k = 200000;  // 1.6 MB: by rendezvous in pieces
      std::vector<long> mine(k, 7), all(k * static_cast<std::size_t>(w.size()));
      if (w.rank() == w.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      try {
        if (w.rank() == 0) {
          w.allreduce(std::span<long>(mine), [](long a, long b) { return a + b; });
        } else {
          w.allgather(std::span<const long>(mine), std::span<long>(all));
        }
        ADD_FAILURE() << "allreduce against allgather";
      } catch (const apgas::illegal_operation_exception&) {
      }
    });
  });
  run_everywhere([] {
    spmd([] {
      apgas::team w = apgas::team::world();
      for (int i = 0; i < 3; ++i) {
        std::vector<long> mine(4, 1000 + w.rank()), all(4 * static_cast<std::size_t>(w.size()));
        w.allgather(std::span<const long>(mine), std::span<long>(all));
        for (int m = 0; m < w.size(); ++m) EXPECT_EQ(all[4 * static_cast<std::size_t>(m)], 1000 + m);
      }
    });
  });
}

}  // namespace
