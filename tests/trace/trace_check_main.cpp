// apgas_trace_check: the tests' structural checks of a trace file (support/trace_check.hpp), as a program for the
// tests that trace a whole sample run (kmeans_trace.cmake):
//   apgas_trace_check FILE [--places N] [--flows CATEGORY=MIN]... [--starts NAME=MIN]...
// --places N: processes 1..N are named "place <i>: host ..."; --flows: at least MIN complete flows of the category;
// --starts: at least MIN complete events of that name that are not resumptions. Prints what it found; exit status 0
// when the file is well formed and meets every expectation, 1 otherwise, 2 for a bad command line.
#include "support/trace_check.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: apgas_trace_check FILE [--places N] [--flows CAT=MIN]... [--starts NAME=MIN]...\n");
    return 2;
  }
  const apgas_test::trace_facts f = apgas_test::check_trace(argv[1]);
  int bad = 0;
  for (const std::string& p : f.problems) {
    std::printf("problem: %s\n", p.c_str());
    ++bad;
  }
  std::printf("%ld events, %zu processes, %zu thread tracks, %ld async slices, dropped %.0f\n", f.events,
              f.processes.size(), f.tracks.size(), f.async_slices, f.dropped);
  for (const auto& [pid, name] : f.processes) std::printf("process %d: %s\n", pid, name.c_str());
  for (const auto& [cat, n] : f.starts_by_cat) std::printf("spans %s: %ld\n", cat.c_str(), n);
  for (const auto& [cat, n] : f.flows) std::printf("flows %s: %ld\n", cat.c_str(), n);
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "apgas_trace_check: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--places") {
      const int n = std::atoi(v.c_str());
      for (int p = 0; p < n; ++p) {
        const auto it = f.processes.find(p + 1);
        if (it == f.processes.end() || it->second.rfind("place " + std::to_string(p) + ": host ", 0) != 0) {
          std::printf("expected: process %d named \"place %d: host ...\"\n", p + 1, p);
          ++bad;
        }
      }
      continue;
    }
    const std::size_t eq = v.rfind('=');
    if ((a != "--flows" && a != "--starts") || eq == std::string::npos) {
      std::fprintf(stderr, "apgas_trace_check: unknown option or value: %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
    const std::string key = v.substr(0, eq);
    const long min = std::atol(v.c_str() + eq + 1);
    const auto& m = a == "--flows" ? f.flows : f.starts;
    const auto it = m.find(key);
    const long got = it == m.end() ? 0 : it->second;
    if (got < min) {
      std::printf("expected: at least %ld %s %s, found %ld\n", min, a == "--flows" ? "flows" : "spans named",
                  key.c_str(), got);
      ++bad;
    }
  }
  std::printf("%s\n", bad == 0 ? "trace ok" : "trace NOT ok");
  return bad == 0 ? 0 : 1;
}
