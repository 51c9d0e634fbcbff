// apgas_fib: prints the place tree, then computes fib(n) with one async per non-leaf call under finish and checks it
// against a serial iterative fib. The README's main job until the k-means sample exists.
//
//   apgas_fib [-n N | --n N | --n=N]      N from 0 to 50, default 30
//
// Exit status: 0 when the parallel result equals the serial one, 1 when it does not (or the run failed),
// 2 for bad options or an invalid APGAS_* environment variable. APGAS_NTHREADS sets the number of workers.
#include <apgas/apgas.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

constexpr int max_n = 50;  // fib(50) already spawns ~2e10 activities; far beyond is a typo, not a workload

// fib(n): if n < 2 return n; else finish { async { a = fib(n-1); }  b = fib(n-2); } return a + b.
// The async runs at this place, so it may capture a and b by reference: the finish outlives it.
long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    apgas::async([&a, n] { a = fib(n - 1); });
    b = fib(n - 2);
  });
  return a + b;
}

long fib_serial(int n) {
  long a = 0;
  long b = 1;
  for (int i = 0; i < n; ++i) {
    const long c = a + b;
    a = b;
    b = c;
  }
  return a;
}

int usage_error(const std::string& why) {
  std::fprintf(stderr, "apgas_fib: %s\nusage: apgas_fib [-n N] [--stats]   (N from 0 to %d, default 30)\n", why.c_str(), max_n);
  return 2;
}

// Parses a whole decimal number in [0, max_n]; false for anything else ("", "3x", "-1", "1e3", overflow).
bool parse_n(std::string_view text, int& n) {
  const std::string s(text);
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v > max_n) return false;
  n = static_cast<int>(v);
  return true;
}

void print_place_tree() {
  const auto all = apgas::all_places();
  const int hosts = apgas::num_hosts();
  const int gpus = static_cast<int>(all.size()) - hosts;
  std::printf("place tree: %zu place%s (%d host%s, %d GPU%s)\n", all.size(), all.size() == 1 ? "" : "s", hosts,
              hosts == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
  for (const apgas::place p : all) {
    std::string children;
    for (const apgas::place c : p.children()) children += (children.empty() ? "" : " ") + std::to_string(c.id());
    std::printf("  place %d: %s%s, parent %d, children [%s]\n", p.id(), p.is_cuda() ? "cuda " : "",
                apgas::describe(p).c_str(), p.parent().id(), children.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 30;
  apgas::take_stats_option(argc, argv);  // --stats: the run's statistics at the end (as APGAS_STATS=1)
  // apgas::run does not parse the command line: the other options are ours.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::printf("usage: apgas_fib [-n N] [--stats]   (N from 0 to %d, default 30)\n", max_n);
      return 0;
    }
    std::string_view value;
    if (arg == "-n" || arg == "--n") {
      if (i + 1 >= argc) return usage_error(std::string(arg) + " needs a value");
      value = argv[++i];
    } else if (arg.starts_with("--n=")) {
      value = arg.substr(4);
    } else {
      return usage_error("unknown option '" + std::string(arg) + "'");
    }
    if (!parse_n(value, n)) {
      return usage_error("invalid value '" + std::string(value) + "' for -n: expected a whole number from 0 to " +
                         std::to_string(max_n));
    }
  }

  // The main activity runs at place 0 only (other processes of an mpirun serve); a failed check ends it with an
  // exception, so every process returns the same non-zero code.
  const int rc = apgas::run(argc, argv, [&] {
    print_place_tree();
    const auto t0 = std::chrono::steady_clock::now();
    const long result = fib(n);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long serial = fib_serial(n);
    const bool ok = result == serial;
    std::printf("fib: n=%d result=%ld serial=%ld workers=%d time_s=%.3f check=%s\n", n, result, serial,
                apgas::num_workers(), seconds, ok ? "ok" : "FAIL");
    std::fflush(stdout);
    if (!ok) throw std::runtime_error("apgas_fib: the parallel result differs from the serial one");
  });
  return rc;  // 0, 1 (the run failed: printed by apgas::run) or 2 (invalid configuration)
}
