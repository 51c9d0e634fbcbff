#pragma once
// Test support: run a body as the main activity of a fresh apgas::run with a given number of workers, and inspect
// exceptions thrown inside it. Every helper asserts that apgas::run itself returned 0, so a test body that lets an
// exception escape (which run reports as 1) fails loudly instead of passing by accident.
#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <utility>

namespace apgas_test {

/// Run `body` inside apgas::run with `nthreads` workers (and `stack_size`-byte fiber stacks); the run must
/// return 0 (the body and everything it started ended without uncaught exceptions).
template <class F>
void run_on(int nthreads, F&& body, std::size_t stack_size = apgas::config::default_stack_size) {
  apgas::config cfg;
  cfg.nthreads = nthreads;
  cfg.stack_size = stack_size;
  bool finished = false;
  const int rc = apgas::run(cfg, [&] {
    body();
    finished = true;
  });
  ASSERT_EQ(rc, 0) << "apgas::run failed (its exceptions are printed above)";
  ASSERT_TRUE(finished) << "apgas::run returned 0 without running the body to its end";
}

/// True in the process of host place 0 of an MPI job, and outside one.
inline bool rank0() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank == nullptr || std::string(rank) == "0";
}

/// In every process of a (multi-process) run: run `body` as the main activity (place 0) with the environment's
/// configuration (2 workers unless APGAS_NTHREADS says otherwise) as `tweak(config&)` changes it; every place's run
/// must return 0, and place 0 must run the body to its end.
template <class Tweak, class F>
void run_everywhere_with(Tweak&& tweak, F&& body) {
  apgas::config cfg = apgas::config::from_env();
  if (cfg.nthreads == 0) cfg.nthreads = 2;
  tweak(cfg);
  bool finished = false;
  const int rc = apgas::run(cfg, [&] {
    body();
    finished = true;
  });
  ASSERT_EQ(rc, 0) << "apgas::run failed (its exceptions are printed above)";
  if (rank0()) {
    ASSERT_TRUE(finished) << "apgas::run returned 0 without running the body to its end";
  }
}

/// run_everywhere_with the environment's configuration; `slice`, if not 0, as the DMA slice size, `nthreads`, if not
/// 0, as the worker count.
template <class F>
void run_everywhere(F&& body, std::size_t slice = 0, int nthreads = 0) {
  run_everywhere_with(
      [&](apgas::config& cfg) {
        if (nthreads != 0) cfg.nthreads = nthreads;
        if (slice != 0) cfg.cuda_dma_slice = slice;
      },
      std::forward<F>(body));
}

/// Run `body` as the main activity; return the exception it throws (caught inside the main activity, so the run
/// itself still succeeds), or null if it returns normally.
template <class F>
std::exception_ptr run_catching(int nthreads, F&& body) {
  std::exception_ptr caught;
  run_on(nthreads, [&] {
    try {
      body();
    } catch (...) {
      caught = std::current_exception();
    }
  });
  return caught;
}

/// If `e` holds an exception of type E (or derived), call inspect(const E&) and return true; else return false.
template <class E, class Inspect>
bool inspect_as(const std::exception_ptr& e, Inspect&& inspect) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const E& x) {
    inspect(x);
    return true;
  } catch (...) {
    return false;
  }
}

/// The what() of the exception of type E that f() throws; records a test failure (and returns "") if f() returns
/// normally or throws something else. Call it inside an activity.
template <class E, class F>
std::string what_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << typeid(e).name() << ": " << e.what();
    return "";
  } catch (...) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got an exception not derived from std::exception";
    return "";
  }
  ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  return "";
}

/// Worker counts every multi-worker behaviour is checked with (1: everything interleaves on one thread; 2 and 4:
/// real parallelism, and more workers than the cores of the development machines).
inline constexpr int worker_counts[] = {1, 2, 4};

/// Name generator for INSTANTIATE_TEST_SUITE_P over worker counts: ".../Workers/w2".
inline std::string workers_name(const testing::TestParamInfo<int>& info) {
  std::string name = "w";  // (not "w" + to_string(): g++ 12 warns falsely about it, -Wrestrict)
  name += std::to_string(info.param);
  return name;
}

}  // namespace apgas_test
