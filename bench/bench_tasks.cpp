// apgas_bench_tasks: the runtime core against its anchors, in the same run, same thread counts.
// Prints `ratio <name> <ours/anchor> (ours <x> <unit>, anchor <y> <unit>)`; above 1 means ours is slower.
// Each figure is the median of --repeats runs (default 7), ours and the anchor interleaved.
//   apgas_bench_tasks [--repeats N] [--quick]
#include <apgas/apgas.hpp>
#include <apgas/detail/completion.hpp>

#include "scheduler.hpp"  // apgas/src: park and wake, the scheduler's own primitives (not API)

#include <boost/context/fiber.hpp>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const char* name, const std::vector<double>& ours, const std::vector<double>& anchor, const char* unit) {
  const double o = median(ours);
  const double a = median(anchor);
  std::printf("ratio %s %.3f (ours %.2f %s, anchor %.2f %s)\n", name, o / a, o, unit, a, unit);
  std::fflush(stdout);
}

// ---- fib: async/finish vs task_group, the same structure ------------------------------------------------------
long fib_apgas(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    apgas::async([&] { a = fib_apgas(n - 1); });
    b = fib_apgas(n - 2);
  });
  return a + b;
}

long fib_tbb(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  tbb::task_group g;
  g.run([&] { a = fib_tbb(n - 1); });
  b = fib_tbb(n - 2);
  g.wait();
  return a + b;
}

long fib_spawns(int n) { return n < 2 ? 0 : 1 + fib_spawns(n - 1) + fib_spawns(n - 2); }

template <class F>
void in_apgas(int threads, F&& f) {
  apgas::config cfg;
  cfg.nthreads = threads;
  if (apgas::run(cfg, [&] { f(); }) != 0) {
    std::fprintf(stderr, "apgas_bench_tasks: run failed\n");
    std::exit(1);
  }
}

void bench_fib(int threads, int n, int repeats) {
  const double spawns = static_cast<double>(fib_spawns(n));
  const long expected = [&] {
    long a = 0, b = 1;
    for (int i = 0; i < n; ++i) b = std::exchange(a, b) + b;
    return a;
  }();
  std::vector<double> ours, anchor;
  tbb::task_arena arena(threads);
  for (int r = 0; r < repeats; ++r) {
    in_apgas(threads, [&] {
      const auto t0 = clock_type::now();
      const long v = fib_apgas(n);
      ours.push_back(seconds_since(t0) * 1e9 / spawns);
      if (v != expected) std::fprintf(stderr, "apgas fib wrong: %ld\n", v), std::exit(1);
    });
    arena.execute([&] {
      const auto t0 = clock_type::now();
      const long v = fib_tbb(n);
      anchor.push_back(seconds_since(t0) * 1e9 / spawns);
      if (v != expected) std::fprintf(stderr, "tbb fib wrong: %ld\n", v), std::exit(1);
    });
  }
  const std::string name = "spawn_fib" + std::to_string(n) + "_" + std::to_string(threads) + "t";
  report(name.c_str(), ours, anchor, "ns/spawn");
}

// ---- finish over 100 empty asyncs vs task_group with 100 runs + wait ------------------------------------------
void bench_finish100(int threads, int iterations, int repeats) {
  std::vector<double> ours, anchor;
  tbb::task_arena arena(threads);
  for (int r = 0; r < repeats; ++r) {
    in_apgas(threads, [&] {
      const auto t0 = clock_type::now();
      for (int it = 0; it < iterations; ++it) {
        apgas::finish([] {
          for (int i = 0; i < 100; ++i) apgas::async([] {});
        });
      }
      ours.push_back(seconds_since(t0) * 1e6 / iterations);
    });
    arena.execute([&] {
      const auto t0 = clock_type::now();
      for (int it = 0; it < iterations; ++it) {
        tbb::task_group g;
        for (int i = 0; i < 100; ++i) g.run([] {});
        g.wait();
      }
      anchor.push_back(seconds_since(t0) * 1e6 / iterations);
    });
  }
  report("finish_100_async", ours, anchor, "us/finish");
}

// ---- park/wake ping-pong vs a raw Boost.Context pair --------------------------------------------------------
// Counted the same way on both sides: one "switch" is one transfer of control from one side to the other. A round
// trip (A -> B -> A) is two switches. All on one worker, so every transfer is a park + resume of an activity.
//   fiber_switch:        the scheduler's own park/wake (the primitive every blocking construct is built on): A
//                        wakes B and parks, B resumes, wakes A and parks.
//   completion_pingpong: the same through the completion seam (apgas::detail::completion, the one-shot event a
//                        transport or GPU backend signals): adds its two atomic read-modify-writes per transfer.
//   fiber_switch_framed: ours again, against raw Boost.Context switches made one function call deep on each side
//                        (as a park is: the switch happens inside a function the activity calls). Every return
//                        after a stack switch misses the CPU's return-stack predictor; one frame each side costs
//                        the raw switch about as much as all of park/wake's own work (docs/decisions/0007).
[[gnu::noinline]] void framed_resume(boost::context::fiber& f) {
  f = std::move(f).resume();
  asm volatile("" ::: "memory");  // keeps the call a call (no tail call)
}

template <bool Framed>
double raw_boost_switch(int rounds) {
  namespace ctx = boost::context;
  auto step = [](ctx::fiber& f) {  // no run-time branch in either anchor's loop
    if constexpr (Framed) {
      framed_resume(f);
    } else {
      f = std::move(f).resume();
    }
  };
  int count = 0;
  ctx::fiber f([&count, rounds, step](ctx::fiber&& back) {
    for (int i = 0; i < rounds; ++i) {
      ++count;
      step(back);
    }
    return std::move(back);
  });
  const auto t0 = clock_type::now();
  for (int i = 0; i < rounds; ++i) step(f);
  const double elapsed = seconds_since(t0);
  f = std::move(f).resume();  // let it end
  if (count != rounds) std::fprintf(stderr, "boost ping-pong miscounted\n"), std::exit(1);
  return elapsed * 1e9 / (2.0 * rounds);
}

void bench_park_wake(int rounds, int repeats) {
  namespace d = apgas::detail;
  std::vector<double> ours, anchor, framed;
  for (int r = 0; r < repeats; ++r) {
    in_apgas(1, [&] {
      // parked[x]: side x's fiber while it is parked (one worker: plain loads and stores would do).
      std::atomic<d::fiber_ctx*> parked[2] = {nullptr, nullptr};
      auto park_as = [&](int x) {
        d::park([](d::fiber_ctx* self, void* slot) {
          static_cast<std::atomic<d::fiber_ctx*>*>(slot)->store(self, std::memory_order_relaxed);
        }, &parked[x]);
      };
      auto wake_other = [&](int x) {  // a load and a store, not exchange(): that is a locked instruction on x86
        d::fiber_ctx* f = parked[1 - x].load(std::memory_order_relaxed);
        parked[1 - x].store(nullptr, std::memory_order_relaxed);
        d::wake(f);
      };
      double elapsed = 0;
      apgas::finish([&] {
        apgas::async([&] {  // B: starts A, then parks first (so A always finds it parked)
          apgas::async([&] {  // A
            const auto t0 = clock_type::now();
            for (int i = 0; i < rounds; ++i) {
              wake_other(0);
              park_as(0);
            }
            elapsed = seconds_since(t0);
          });
          for (int i = 0; i < rounds; ++i) {
            park_as(1);
            wake_other(1);
          }
        });
      });
      ours.push_back(elapsed * 1e9 / (2.0 * rounds));
    });
    anchor.push_back(raw_boost_switch<false>(rounds));
    framed.push_back(raw_boost_switch<true>(rounds));
  }
  report("fiber_switch", ours, anchor, "ns/switch");
  report("fiber_switch_framed", ours, framed, "ns/switch");
}

void bench_completion_pingpong(int rounds, int repeats) {
  std::vector<double> ours, anchor;
  for (int r = 0; r < repeats; ++r) {
    in_apgas(1, [&] {
      // A small ring of one-shot completions, each slot rebuilt by A two rounds after both sides are done with it
      // (B signalled to_a[j] before it waited on to_b[j + 1], which A signalled after it had waited on to_a[j]):
      // the figure is the switch, not the first touch of a fresh completion per round.
      constexpr int ring = 64;
      std::array<apgas::detail::completion, ring> to_b, to_a;
      auto slot = [](int i) { return static_cast<std::size_t>(i % ring); };
      double elapsed = 0;
      apgas::finish([&] {
        apgas::async([&] {  // B
          for (int i = 0; i < rounds; ++i) {
            to_b[slot(i)].wait();
            to_a[slot(i)].signal();
          }
        });
        apgas::async([&] {  // A
          const auto t0 = clock_type::now();
          for (int i = 0; i < rounds; ++i) {
            to_b[slot(i)].signal();
            to_a[slot(i)].wait();
            const std::size_t j = slot(i + ring - 2);  // round i - 2, quiescent: reused for round i + ring - 2
            std::destroy_at(&to_b[j]);
            std::construct_at(&to_b[j]);
            std::destroy_at(&to_a[j]);
            std::construct_at(&to_a[j]);
          }
          elapsed = seconds_since(t0);
        });
      });
      ours.push_back(elapsed * 1e9 / (2.0 * rounds));
    });
    anchor.push_back(raw_boost_switch<false>(rounds));
  }
  report("completion_pingpong", ours, anchor, "ns/switch");
}

// ---- clock advance: one clock, two activities vs std::barrier, two threads ------------------------------------
void bench_clock(int phases, int repeats) {
  std::vector<double> ours, anchor;
  for (int r = 0; r < repeats; ++r) {
    in_apgas(2, [&] {
      double elapsed = 0;
      const auto t0 = clock_type::now();
      apgas::finish([&] {
        apgas::clock c = apgas::clock::make();
        for (int k = 0; k < 2; ++k) {
          apgas::clocked_async({c}, [c, phases]() mutable {
            for (int p = 0; p < phases; ++p) c.advance();
          });
        }
        c.drop();
      });
      elapsed = seconds_since(t0);
      ours.push_back(elapsed * 1e9 / phases);
    });
    {
      std::barrier<> bar(2);
      auto body = [&] {
        for (int p = 0; p < phases; ++p) bar.arrive_and_wait();
      };
      const auto t0 = clock_type::now();
      std::thread t1(body), t2(body);
      t1.join();
      t2.join();
      anchor.push_back(seconds_since(t0) * 1e9 / phases);
    }
  }
  report("clock_advance", ours, anchor, "ns/phase");
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  bool quick = false;
  std::string only;  // empty: every comparison
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
      if (repeats < 1 || repeats > 1000) {
        std::fprintf(stderr, "apgas_bench_tasks: --repeats %s: expected 1 to 1000\n", argv[i]);
        return 2;
      }
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: apgas_bench_tasks [--repeats N] [--quick] [--only spawn|finish|switch|clock]\n");
      return 2;
    }
  }
  std::printf("# apgas_bench_tasks: hardware_concurrency=%u repeats=%d%s\n", std::thread::hardware_concurrency(),
              repeats, quick ? " (quick)" : "");
  const auto want = [&](const char* what) { return only.empty() || only == what; };
  if (!only.empty() && !want("spawn") && !want("finish") && !want("switch") && !want("clock")) {
    std::fprintf(stderr, "apgas_bench_tasks: --only %s: expected spawn, finish, switch or clock\n", only.c_str());
    return 2;
  }
  const int fib_n = quick ? 22 : 30;
  if (want("spawn")) {
    bench_fib(1, fib_n, repeats);
    bench_fib(2, fib_n, repeats);
  }
  if (want("finish")) bench_finish100(2, quick ? 1000 : 20000, repeats);
  if (want("switch")) {
    bench_park_wake(quick ? 10000 : 1000000, repeats);
    bench_completion_pingpong(quick ? 10000 : 1000000, repeats);
  }
  if (want("clock")) bench_clock(quick ? 10000 : 200000, repeats);
  return 0;
}
