#pragma once
// Test support: run a body as the main activity of a fresh apgas::run with a given number of workers.
#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace apgas_test {

/// Run `body` inside apgas::run with `nthreads` workers; the run must succeed.
template <class F>
void run_on(int nthreads, F&& body) {
  apgas::config cfg;
  cfg.nthreads = nthreads;
  const int rc = apgas::run(cfg, [&] { body(); });
  ASSERT_EQ(rc, 0) << "apgas::run failed (exceptions printed above)";
}

/// Run `body`; return the exception it throws (caught inside the main activity), or null.
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

/// The message of an exception of type E thrown by f() inside an activity; fails the test otherwise.
template <class E, class F>
std::string expect_throw_in_run(int nthreads, F&& f) {
  std::string what;
  bool thrown = false;
  run_on(nthreads, [&] {
    try {
      f();
    } catch (const E& e) {
      thrown = true;
      what = e.what();
    }
  });
  EXPECT_TRUE(thrown) << "expected an exception";
  return what;
}

/// Worker counts every multi-worker behaviour is checked with.
inline constexpr int worker_counts[] = {1, 2, 4};

}  // namespace apgas_test
