// Places on one host: the tree, checked lookups, here(), and what is illegal outside apgas::run.
#include "support/run.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using apgas_test::run_on;

TEST(Places, HereIsPlaceZeroInsideRun) {
  for (int n : apgas_test::worker_counts) {
    run_on(n, [] {
      EXPECT_EQ(apgas::here(), apgas::place_of(0));
      EXPECT_EQ(apgas::here().id(), 0);
      // Every activity of a one-host run is at place 0, whichever worker runs it.
      std::atomic<int> elsewhere{0};
      std::atomic<int> ran{0};
      apgas::finish([&] {
        for (int i = 0; i < 200; ++i) {
          apgas::async([&] {
            if (apgas::here() != apgas::place_of(0)) elsewhere++;
            ran++;
          });
        }
      });
      EXPECT_EQ(ran.load(), 200);
      EXPECT_EQ(elsewhere.load(), 0);
    });
  }
}

TEST(Places, TreeOfOneHost) {
  run_on(2, [] {
    ASSERT_EQ(apgas::places().size(), 1u);
    EXPECT_EQ(apgas::num_hosts(), 1);
    EXPECT_EQ(apgas::places()[0], apgas::place_of(0));
    EXPECT_EQ(apgas::places()[0].id(), 0);
    // No accelerator places in this build: all_places() is the host list.
    ASSERT_EQ(apgas::all_places().size(), 1u);
    EXPECT_EQ(apgas::all_places()[0], apgas::place_of(0));
  });
}

TEST(Places, HostPlaceProperties) {
  run_on(1, [] {
    const apgas::place p = apgas::here();
    EXPECT_TRUE(p.is_host());
    EXPECT_FALSE(p.is_cuda());
    EXPECT_EQ(p.parent(), p);  // a host is its own parent
    EXPECT_TRUE(p.children().empty());
    for (apgas::place q : apgas::places()) {
      EXPECT_TRUE(q.is_host());
      EXPECT_FALSE(q.is_cuda());
      EXPECT_EQ(q.parent(), q);
    }
  });
}

TEST(Places, ValueSemantics) {
  constexpr apgas::place a(0);
  constexpr apgas::place b(0);
  constexpr apgas::place c(3);
  static_assert(a == b && !(a == c));
  static_assert(std::is_trivially_copyable_v<apgas::place>);
  const apgas::place invalid;
  EXPECT_EQ(invalid.id(), -1);
  EXPECT_FALSE(invalid.is_host());
  EXPECT_FALSE(invalid.is_cuda());
  EXPECT_EQ(invalid.parent(), invalid);
  EXPECT_TRUE(invalid.children().empty());
}

TEST(Places, PlaceOfUnknownIdThrowsNamingTheId) {
  run_on(1, [] {
    // Ids whose decimal text cannot appear in the message by accident.
    for (int id : {-1, -17, 12345, 1 << 30, INT_MAX, INT_MIN}) {
      const std::string what = apgas_test::what_of<apgas::bad_place_exception>([id] { (void)apgas::place_of(id); });
      EXPECT_NE(what.find(std::to_string(id)), std::string::npos) << "place_of(" << id << "): " << what;
    }
    // The first id past the end.
    EXPECT_THROW((void)apgas::place_of(static_cast<int>(apgas::all_places().size())), apgas::bad_place_exception);
    // bad_place_exception is an apgas::error and a std::runtime_error.
    EXPECT_THROW((void)apgas::place_of(-1), apgas::error);
    EXPECT_THROW((void)apgas::place_of(-1), std::runtime_error);
  });
}

TEST(Places, ActivitiesAtInvalidPlacesThrow) {
  run_on(2, [] {
    std::atomic<int> ran{0};
    apgas::finish([&] {
      EXPECT_THROW(apgas::async_at(apgas::place(5), [&ran] { ran++; }), apgas::bad_place_exception);
      EXPECT_THROW(apgas::async_at(apgas::place(), [&ran] { ran++; }), apgas::bad_place_exception);
      EXPECT_THROW(apgas::async_at(apgas::place(-3), [](int) {}, 1), apgas::bad_place_exception);
    });
    EXPECT_EQ(ran.load(), 0);
    EXPECT_THROW((void)apgas::at(apgas::place(-3), [] { return 1; }), apgas::bad_place_exception);
    EXPECT_THROW((void)apgas::at(apgas::place(INT_MAX), [] { return 1; }), apgas::bad_place_exception);
  });
}

// Every operation given a place that is none names itself, the id and the ids there are (not a helper it called).
TEST(Places, AnInvalidPlaceIsReportedByTheOperationTheCallerCalled) {
  run_on(1, [] {
    const auto said = [](auto f) { return apgas_test::what_of<apgas::bad_place_exception>(f); };
    const std::string ids = "(there are 1 places, ids 0..0)";
    EXPECT_EQ(said([] { (void)apgas::make_remote_array<int>(apgas::place(99), 4); }),
              "apgas::make_remote_array: no place with id 99 " + ids);
    EXPECT_EQ(said([] { (void)apgas::make_remote_array<int>(apgas::place(-2), 4, 7); }),
              "apgas::make_remote_array: no place with id -2 " + ids);
    EXPECT_EQ(said([] { (void)apgas::in_order(apgas::place()); }), "apgas::in_order: no place with id -1 " + ids);
    EXPECT_EQ(said([] { (void)apgas::at(apgas::place(2), [] { return 1; }); }),
              "apgas::at/async_at: no place with id 2 " + ids);
    EXPECT_EQ(said([] { (void)apgas::describe(apgas::place(5)); }), "apgas::describe: no place with id 5 " + ids);
  });
}

// A copy whose array names no place of the run (a token forged, or kept from another run) is refused before
// anything is counted or sent: an exception naming the id, no hang, no stray write.
TEST(Places, CopiesWithAnArrayOfNoPlaceAreRefused) {
  run_on(2, [] {
    std::vector<int> v(10, 0);
    for (const int home : {-1, 1, 7, 100000000}) {
      const auto bad = apgas::remote_array<int>::from_token(home, 0x1000, 10);
      auto good = apgas::make_remote_array<int>(apgas::here(), 10);
      const auto names_it = [&](const apgas::bad_place_exception& e) {
        return std::string(e.what()).find("place " + std::to_string(home) + ", is no place of this run") !=
               std::string::npos;
      };
      try {
        apgas::async_copy(bad, 0, std::span<int>(v));
        ADD_FAILURE() << "get from place " << home;
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_TRUE(names_it(e)) << e.what();
      }
      try {
        apgas::async_copy(std::span<const int>(v), bad, 0);
        ADD_FAILURE() << "put to place " << home;
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_TRUE(names_it(e)) << e.what();
      }
      EXPECT_THROW(apgas::async_copy(good, 0, bad, 0, 10), apgas::bad_place_exception);
      EXPECT_THROW(apgas::async_copy(bad, 0, good, 0, 10), apgas::bad_place_exception);
      apgas::free_remote_array(good);
    }
  });
}

// A copy within one array at a host place may overlap, both ways (a halo shifted in place).
TEST(Places, ACopyWithinOneArrayMayOverlap) {
  run_on(2, [] {
    constexpr std::size_t n = 1000;
    auto a = apgas::make_remote_array<int>(apgas::here(), n, [](std::size_t i) { return static_cast<int>(i); });
    apgas::finish([&] { apgas::async_copy(a, 0, a, 1, n - 1); });  // up by one
    EXPECT_EQ(a.data()[0], 0);
    for (std::size_t i = 1; i < n; ++i) ASSERT_EQ(a.data()[i], static_cast<int>(i - 1)) << i;
    apgas::finish([&] { apgas::async_copy(a, 1, a, 0, n - 1); });  // and back down
    for (std::size_t i = 0; i + 1 < n; ++i) ASSERT_EQ(a.data()[i], static_cast<int>(i)) << i;
    apgas::free_remote_array(a);
  });
}

TEST(Places, OutsideRunIsIllegal) {
  EXPECT_THROW((void)apgas::here(), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::async([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::async_at(apgas::place(0), [] {}), apgas::illegal_operation_exception);
  EXPECT_THROW((void)apgas::at(apgas::place(0), [] { return 1; }), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::finish([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::atomic([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::when([] { return true; }, [] {}), apgas::illegal_operation_exception);
  EXPECT_THROW((void)apgas::clock::make(), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::offer(1L), apgas::illegal_operation_exception);
  EXPECT_EQ(apgas::worker_index(), -1);
  EXPECT_EQ(apgas::num_workers(), 0);
}

TEST(Places, OutsideRunIsIllegalAgainAfterARun) {
  run_on(2, [] { EXPECT_EQ(apgas::here().id(), 0); });
  EXPECT_THROW((void)apgas::here(), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::async([] {}), apgas::illegal_operation_exception);
  EXPECT_EQ(apgas::num_workers(), 0);
}

TEST(Places, OutsideRunNothingRuns) {
  bool ran = false;
  EXPECT_THROW(apgas::async([&] { ran = true; }), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::finish([&] { ran = true; }), apgas::illegal_operation_exception);
  EXPECT_FALSE(ran);
}

TEST(Places, RunsFollowEachOtherAndCannotNest) {
  for (int i = 0; i < 5; ++i) {
    for (int n : apgas_test::worker_counts) run_on(n, [n] { EXPECT_EQ(apgas::num_workers(), n); });
  }
  run_on(1, [] {
    apgas::config cfg;
    bool inner_ran = false;
    EXPECT_THROW((void)apgas::run(cfg, [&] { inner_ran = true; }), apgas::illegal_operation_exception);
    cfg.nthreads = -1;  // a nested run is misuse whatever its configuration (it returned 2, a configuration error)
    EXPECT_THROW((void)apgas::run(cfg, [&] { inner_ran = true; }), apgas::illegal_operation_exception);
    // The same through the environment (run(argc, argv, ...) read it first and returned 2).
    const char* old = std::getenv("APGAS_NTHREADS");
    const std::string saved = old != nullptr ? old : "";
    setenv("APGAS_NTHREADS", "zero", 1);
    char arg0[] = "nested";
    char* argv[] = {arg0, nullptr};
    EXPECT_THROW((void)apgas::run(1, argv, [&] { inner_ran = true; }), apgas::illegal_operation_exception);
    if (old != nullptr) {
      setenv("APGAS_NTHREADS", saved.c_str(), 1);
    } else {
      unsetenv("APGAS_NTHREADS");
    }
    EXPECT_FALSE(inner_ran);
  });
}

TEST(Places, RunReportsUncaughtExceptionsOfActivities) {
  apgas::config cfg;
  cfg.nthreads = 2;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [] {
    apgas::async([] { throw std::runtime_error("first failure"); });
    apgas::async([] { throw std::logic_error("second failure"); });
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("first failure"), std::string::npos) << err;
  EXPECT_NE(err.find("second failure"), std::string::npos) << err;
}

TEST(Places, RunReportsAnExceptionOfTheMainActivity) {
  apgas::config cfg;
  cfg.nthreads = 1;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [] { throw std::runtime_error("main body failed"); });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("main body failed"), std::string::npos) << err;
  // The runtime is usable again afterwards.
  run_on(2, [] { EXPECT_EQ(apgas::here().id(), 0); });
}

// remote_array lifetimes on one place: the registry check of every home (a double free through a copy, a copy into
// a freed or forged array) is an exception naming the array and the place, and nothing is written.
TEST(Places, ADeadRemoteArrayIsAnExceptionNotACorruption) {
  run_on(2, [] {
    auto arr = apgas::make_remote_array<double>(apgas::here(), 32, 1.5);
    auto copy = arr;
    apgas::free_remote_array(arr);
    try {
      apgas::free_remote_array(copy);
      ADD_FAILURE() << "a double free was accepted";
    } catch (const apgas::illegal_operation_exception& e) {
      EXPECT_NE(std::string(e.what()).find("of place 0 is not live"), std::string::npos) << e.what();
    }
    std::vector<double> victim(32, 7.0);
    const auto forged =
        apgas::remote_array<double>::from_token(0, reinterpret_cast<std::uintptr_t>(victim.data()), victim.size());
    const std::vector<double> data(32, 1.0);
    for (const auto& a : {forged, copy}) {
      try {
        apgas::finish([&] { apgas::async_copy(std::span<const double>(data), a); });
        ADD_FAILURE() << "a copy into a dead array was accepted";
      } catch (const apgas::multiple_exceptions& m) {
        const auto errs = m.of_type<apgas::illegal_operation_exception>();
        ASSERT_EQ(errs.size(), 1u);
        EXPECT_NE(std::string(errs[0]->what()).find("not inside a live remote_array at place 0"), std::string::npos)
            << errs[0]->what();
      }
    }
    EXPECT_EQ(victim, std::vector<double>(32, 7.0));
  });
}

// A stale copy of a freed remote_array, once another array was made at the same address: every copy and the free
// through it are refused (the address alone named the new array, which the stale handle then overwrote or freed), and
// the new array is untouched. Arrays of 2 MiB (mapped whole) are made until one lands at the freed address (the
// kernel maps the next one where the last was unmapped).
TEST(Places, AStaleRemoteArrayIsRefusedAfterAnotherIsMadeAtItsAddress) {
  bool reused = false;
  run_on(2, [&] {
    constexpr std::size_t n = std::size_t{1} << 18;
    auto old = apgas::make_remote_array<double>(apgas::here(), n, 1.5);
    const auto stale = old;
    apgas::free_remote_array(old);
    std::vector<apgas::remote_array<double>> made;
    for (int i = 0; i < 16 && !reused; ++i) {
      made.push_back(apgas::make_remote_array<double>(apgas::here(), n, 2.5));
      reused = made.back().token() == stale.token();
    }
    if (reused) {
      const auto fresh = made.back();
      EXPECT_NE(fresh.serial(), stale.serial());
      const std::vector<double> data(32, 9.0);
      std::vector<double> out(32, 0.0);
      for (int way = 0; way < 4; ++way) {
        const std::string what = apgas_test::what_of<apgas::illegal_operation_exception>([&] {
          if (way == 3) {
            auto s = stale;
            apgas::free_remote_array(s);
            return;
          }
          try {
            apgas::finish([&] {
              if (way == 0) apgas::async_copy(std::span<const double>(data), stale);
              if (way == 1) apgas::async_copy(stale, 0, std::span<double>(out));
              if (way == 2) apgas::async_copy(stale, 0, made.front(), 0, 32);
            });
          } catch (const apgas::multiple_exceptions& m) {
            if (m.size() == 1) std::rethrow_exception(m.exceptions()[0]);
            throw;
          }
        });
        EXPECT_NE(what.find(way == 3 ? "another array made at its address since" : "made after the remote_array's own"),
                  std::string::npos)
            << "way " << way << ": " << what;
      }
      EXPECT_EQ(std::vector<double>(fresh.data(), fresh.data() + 32), std::vector<double>(32, 2.5));
      EXPECT_EQ(out, std::vector<double>(32, 0.0));
    }
    for (auto& a : made) apgas::free_remote_array(a);
  });
  if (!reused) GTEST_SKIP() << "no new array was made at the freed one's address";
}

// A host place's remote arrays: zero-filled and 64-byte aligned; from 2 MiB on, mapped on whole (huge) pages at a 2 MiB
// boundary. Every size copies in and out, frees once, and the registry refuses the second free; an over-aligned element
// type gets its alignment.
// An element whose constructor throws: make_remote_array rethrows it and keeps nothing (the array was registered
// and never freed: 4 MiB a failure).
namespace {
struct fragile {
  static inline int made = 0;
  static inline std::uintptr_t first = 0;
  int v = 0;
  fragile() {
    if (made == 0) first = reinterpret_cast<std::uintptr_t>(this);
    if (++made == 1000) throw std::runtime_error("element 999 failed");
  }
};
}  // namespace

// An array of more bytes than half the address space is refused naming its size and the limit (it was a bare
// std::bad_alloc), as one whose element count overflows a size_t is.
TEST(Places, AnArrayLargerThanTheAddressSpaceIsRefusedNamingItsSize) {
  run_on(1, [] {
    const std::size_t bytes = (SIZE_MAX / 2) + 1;
    try {
      (void)apgas::make_remote_array<char>(apgas::here(), bytes);
      ADD_FAILURE() << "not refused";
    } catch (const std::length_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes) + " bytes do not fit in the address space (at most " +
                                           std::to_string(SIZE_MAX / 2) + ")"),
                std::string::npos)
          << e.what();
    }
  });
}

// An array the OS refuses is an out_of_memory (a std::bad_alloc) naming the bytes and the place (it was a bare
// std::bad_alloc): 64 TiB, more than this machine's memory and swap, which the kernel's overcommit check refuses in
// modes 0 and 2 (in mode 1 it would map it, and the touching of every page would meet the OOM killer).
TEST(Places, AnArrayTheOsRefusesIsOutOfMemoryNamingItsSize) {
  int mode = -1;
  if (std::FILE* f = std::fopen("/proc/sys/vm/overcommit_memory", "r")) {
    if (std::fscanf(f, "%d", &mode) != 1) mode = -1;
    std::fclose(f);
  }
  if (mode != 0 && mode != 2) GTEST_SKIP() << "vm.overcommit_memory is " << mode << ": the OS would not refuse";
  run_on(1, [] {
    const std::size_t bytes = std::size_t{1} << 46;
    const std::string what =
        apgas_test::what_of<apgas::out_of_memory>([&] { (void)apgas::make_remote_array<char>(apgas::here(), bytes); });
    EXPECT_NE(what.find("apgas::make_remote_array: the OS refused " + std::to_string(bytes) + " bytes at place 0 ("),
              std::string::npos)
        << what;
    EXPECT_THROW((void)apgas::make_remote_array<char>(apgas::here(), bytes), std::bad_alloc);
    auto fine = apgas::make_remote_array<char>(apgas::here(), std::size_t{4} << 20);  // nothing was left half made
    apgas::free_remote_array(fine);
  });
}

TEST(Places, AnElementThatThrowsLeavesNoArray) {
  static_assert(std::is_trivially_copyable_v<fragile> && !std::is_trivially_default_constructible_v<fragile>);
  run_on(1, [] {
    fragile::made = 0;
    EXPECT_THROW((void)apgas::make_remote_array<fragile>(apgas::here(), std::size_t{1} << 20), std::runtime_error);
    ASSERT_EQ(fragile::made, 1000);
    EXPECT_THROW(apgas::detail::check_live_array("test", fragile::first, sizeof(fragile), 0),
                 apgas::illegal_operation_exception);
  });
}

TEST(Places, RemoteArraysOfEverySizeAreZeroedAlignedAndFreedOnce) {
  struct alignas(128) wide {
    float v[32];
  };
  run_on(1, [] {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{(2u << 20) / 4},
                                std::size_t{(2u << 20) / 4 + 1}, std::size_t{3u << 20}}) {
      auto a = apgas::make_remote_array<float>(apgas::here(), n);
      const auto addr = reinterpret_cast<std::uintptr_t>(a.data());
      EXPECT_EQ(addr % 64, 0u) << n;
      if (n * sizeof(float) >= (2u << 20)) {
        EXPECT_EQ(addr % (2u << 20), 0u) << n;
      }
      EXPECT_TRUE(std::all_of(a.data(), a.data() + n, [](float x) { return x == 0.0f; })) << n;
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 977);
      std::vector<float> back(n, -1.0f);
      apgas::finish([&] { apgas::async_copy(std::span<const float>(v), a); });
      apgas::finish([&] { apgas::async_copy(a, 0, std::span<float>(back)); });
      EXPECT_EQ(back, v) << n;
      auto copy = a;
      apgas::free_remote_array(a);
      EXPECT_THROW(apgas::free_remote_array(copy), apgas::illegal_operation_exception) << n;
    }
    auto w = apgas::make_remote_array<wide>(apgas::here(), 20000);  // 2.4 MiB of 128-byte elements
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.data()) % 128, 0u);
    EXPECT_EQ(w.data()[19999].v[31], 0.0f);
    apgas::free_remote_array(w);
  });
}

// make_remote_array's fill and generator forms at the caller's own place: written straight into the array (the
// span handed to fill is the array's memory, value-initialised), the generator called once per element in order;
// a fill that throws leaves nothing allocated.
TEST(Places, FilledAndGeneratedRemoteArraysAreWrittenInPlaceAtHome) {
  run_on(2, [] {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{3u << 20}}) {
      const float* seen = nullptr;
      bool zeroed = true;
      auto a = apgas::make_remote_array<float>(apgas::here(), n, [&](std::span<float> out) {
        seen = out.data();
        EXPECT_EQ(out.size(), n);
        zeroed = std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; });
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(i % 977);
      });
      EXPECT_EQ(seen, a.data()) << n;
      EXPECT_TRUE(zeroed) << n;
      std::size_t next = 0;
      bool in_order = true;
      auto g = apgas::make_remote_array<long>(apgas::here(), n, [&](std::size_t i) {
        in_order = in_order && i == next++;
        return static_cast<long>(i) * 3;
      });
      EXPECT_TRUE(in_order) << n;
      EXPECT_EQ(next, n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(a.data()[i], static_cast<float>(i % 977)) << i;
        ASSERT_EQ(g.data()[i], static_cast<long>(i) * 3) << i;
      }
      apgas::free_remote_array(a);
      apgas::free_remote_array(g);
    }
    std::uintptr_t lost = 0;
    EXPECT_THROW(apgas::make_remote_array<int>(apgas::here(), 5000,
                                               [&](std::span<int> out) {
                                                 lost = reinterpret_cast<std::uintptr_t>(out.data());
                                                 apgas::detail::check_live_array("test", lost, 4, 0);  // the array itself
                                                 throw std::runtime_error("fill failed");
                                               }),
                 std::runtime_error);
    ASSERT_NE(lost, 0u);
    EXPECT_THROW(apgas::detail::check_live_array("test", lost, 1, 0), apgas::illegal_operation_exception);
    // A generic lambda is a generator (it compiled as one before the fill form existed).
    auto generic =
        apgas::make_remote_array<float>(apgas::here(), 3, [](auto i) { return static_cast<float>(i) * 2.0f; });
    EXPECT_EQ(generic.data()[2], 4.0f);
    apgas::free_remote_array(generic);
  });
}

// at() at the calling host: f reads the caller's arguments themselves (no copy), as const; an f that takes one by
// non-const reference gets a copy, as at another place, and the caller's object stays as it was.
struct copy_counted {
  static inline int copies = 0;
  std::vector<int> v;
  copy_counted() = default;  // (what another place would rebuild)
  explicit copy_counted(std::size_t n) : v(n, 7) {}
  copy_counted(const copy_counted& o) : v(o.v) { ++copies; }
  copy_counted& operator=(const copy_counted&) = default;
  template <class A>
  void serialize(A& a) {
    a & v;
  }
};

TEST(Places, AtTheCallingHostPassesItsArgumentsWithoutCopies) {
  run_on(2, [] {
    const copy_counted big(1 << 20);
    copy_counted::copies = 0;
    const int* seen = nullptr;
    const std::size_t n = apgas::at(
        apgas::here(),
        [&](const copy_counted& c, int k) {
          seen = c.v.data();
          return c.v.size() + static_cast<std::size_t>(k);
        },
        big, 3);
    EXPECT_EQ(n, (std::size_t{1} << 20) + 3);
    EXPECT_EQ(seen, big.v.data()) << "f read the caller's object";
    EXPECT_EQ(copy_counted::copies, 0);
    copy_counted changed(4);
    const int first = apgas::at(apgas::here(), [](copy_counted& c) { return c.v[0] = 1, c.v[0]; }, changed);
    EXPECT_EQ(first, 1);
    EXPECT_EQ(changed.v[0], 7) << "f changed a copy";
    EXPECT_EQ(copy_counted::copies, 1);
    std::vector<int> by_value(3, 2);
    EXPECT_EQ(apgas::at(apgas::here(), [](std::vector<int> v) { return v.push_back(1), v.size(); }, by_value), 4u);
    EXPECT_EQ(by_value.size(), 3u);
  });
}

// Messages name what happened: an offset near SIZE_MAX is not printed as a wrapped range, and the report of a run's
// uncaught exceptions gives demangled type names (also for a value not derived from std::exception).
TEST(Places, OutOfRangeCopiesAtHugeOffsetsPrintSensibly) {
  run_on(1, [] {
    auto a = apgas::make_remote_array<int>(apgas::here(), 4);
    std::vector<int> v(1, 0);
    for (int way = 0; way < 2; ++way) {
      const std::string what = apgas_test::what_of<apgas::bad_place_exception>([&] {
        if (way == 0) apgas::async_copy(std::span<const int>(v), a, SIZE_MAX);
        if (way == 1) apgas::async_copy(a, SIZE_MAX, std::span<int>(v));
      });
      EXPECT_NE(what.find("1 elements from offset 18446744073709551615 are outside the array of 4"), std::string::npos)
          << what;
      EXPECT_EQ(what.find(", 0)"), std::string::npos) << what;
    }
    EXPECT_NE(apgas_test::what_of<apgas::bad_place_exception>([&] { apgas::async_copy(std::span<const int>(v), a, 4); })
                  .find("elements [4, 5) are outside the array of 4"),
              std::string::npos);
    apgas::free_remote_array(a);
  });
}

struct my_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(Places, TheReportOfUncaughtExceptionsDemanglesTypeNames) {
  testing::internal::CaptureStderr();
  apgas::config cfg;
  cfg.nthreads = 2;
  const int rc = apgas::run(cfg, [] {
    apgas::async([] { throw std::bad_alloc(); });
    apgas::async([] { throw my_error("mine"); });
    apgas::async([] { throw 42; });
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("] std::bad_alloc: "), std::string::npos) << err;
  EXPECT_NE(err.find("] my_error: mine"), std::string::npos) << err;
  EXPECT_NE(err.find("] a value of type int (not derived from std::exception)"), std::string::npos) << err;
  EXPECT_EQ(err.find("St9bad_alloc"), std::string::npos) << err;
}

// Thousands of uncaught exceptions: the first 20 are printed, then how many more.
TEST(Places, TheReportOfManyUncaughtExceptionsStopsAfterTwenty) {
  testing::internal::CaptureStderr();
  apgas::config cfg;
  cfg.nthreads = 2;
  const int rc = apgas::run(cfg, [] {
    for (int i = 0; i < 1000; ++i) apgas::async([] { throw std::runtime_error("one of many"); });
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("ended with 1000 uncaught exceptions"), std::string::npos) << err;
  EXPECT_NE(err.find("[20/1000] std::runtime_error: one of many"), std::string::npos) << err;
  EXPECT_EQ(err.find("[21/1000]"), std::string::npos) << err;
  EXPECT_NE(err.find("... and 980 more, not printed"), std::string::npos) << err;
}

// pinned_allocator is a standard allocator: its memory is aligned for T, page-locked or not (here, without a CUDA
// driver, it is ordinary memory; it was 64-byte aligned whatever T asked for).
namespace {
struct alignas(256) cell256 {
  float v[64];
};
struct alignas(8192) cell8k {
  char c[8192];
};
}  // namespace

TEST(Places, PinnedVectorsAreAlignedForTheirElements) {
  for (std::size_t n = 1; n <= 17; ++n) {
    apgas::pinned_vector<cell256> a(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % alignof(cell256), 0u) << "n = " << n;
    a.back().v[63] = 1.0f;
    apgas::pinned_vector<cell8k> b(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % alignof(cell8k), 0u) << "n = " << n;
    EXPECT_FALSE(apgas::is_pinned(b.data(), sizeof(cell8k)));  // (over a page: ordinary memory)
  }
}
