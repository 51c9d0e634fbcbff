// apgas_bench_tasks: the runtime core against its anchors, in the same run, same thread counts.
// Prints `ratio <name> <ours/anchor> (ours <x> <unit>, anchor <y> <unit>)`; above 1 means ours is slower.
// Each figure is the median of --repeats runs (default 7), ours and the anchor interleaved.
//   apgas_bench_tasks [--repeats N] [--quick]
#include <apgas/apgas.hpp>
#include <apgas/detail/completion.hpp>

#include <boost/context/fiber.hpp>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
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
// trip (A -> B -> A) is two switches. Ours: A signals B's completion and waits on its own (park), B is resumed,
// signals A's and waits on its next one; all on one worker, so every transfer is a park + resume.
void bench_fiber_switch(int rounds, int repeats) {
  std::vector<double> ours, anchor;
  for (int r = 0; r < repeats; ++r) {
    in_apgas(1, [&] {
      auto to_b = std::make_unique<apgas::detail::completion[]>(static_cast<std::size_t>(rounds));
      auto to_a = std::make_unique<apgas::detail::completion[]>(static_cast<std::size_t>(rounds));
      double elapsed = 0;
      apgas::finish([&] {
        apgas::async([&] {  // B
          for (int i = 0; i < rounds; ++i) {
            to_b[static_cast<std::size_t>(i)].wait();
            to_a[static_cast<std::size_t>(i)].signal();
          }
        });
        apgas::async([&] {  // A
          const auto t0 = clock_type::now();
          for (int i = 0; i < rounds; ++i) {
            to_b[static_cast<std::size_t>(i)].signal();
            to_a[static_cast<std::size_t>(i)].wait();
          }
          elapsed = seconds_since(t0);
        });
      });
      ours.push_back(elapsed * 1e9 / (2.0 * rounds));
    });
    {
      namespace ctx = boost::context;
      int count = 0;
      ctx::fiber f([&count, rounds](ctx::fiber&& back) {
        for (int i = 0; i < rounds; ++i) {
          ++count;
          back = std::move(back).resume();
        }
        return std::move(back);
      });
      const auto t0 = clock_type::now();
      for (int i = 0; i < rounds; ++i) f = std::move(f).resume();
      const double elapsed = seconds_since(t0);
      f = std::move(f).resume();  // let it end
      if (count != rounds) std::fprintf(stderr, "boost ping-pong miscounted\n"), std::exit(1);
      anchor.push_back(elapsed * 1e9 / (2.0 * rounds));
    }
  }
  report("fiber_switch", ours, anchor, "ns/switch");
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
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
      if (repeats < 1 || repeats > 1000) {
        std::fprintf(stderr, "apgas_bench_tasks: --repeats %s: expected 1 to 1000\n", argv[i]);
        return 2;
      }
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: apgas_bench_tasks [--repeats N] [--quick]\n");
      return 2;
    }
  }
  std::printf("# apgas_bench_tasks: hardware_concurrency=%u repeats=%d%s\n", std::thread::hardware_concurrency(),
              repeats, quick ? " (quick)" : "");
  const int fib_n = quick ? 22 : 30;
  bench_fib(1, fib_n, repeats);
  bench_fib(2, fib_n, repeats);
  bench_finish100(2, quick ? 1000 : 20000, repeats);
  bench_fiber_switch(quick ? 10000 : 1000000, repeats);
  bench_clock(quick ? 10000 : 200000, repeats);
  return 0;
}
