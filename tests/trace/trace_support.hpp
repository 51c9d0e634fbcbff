#pragma once
// What the trace and statistics tests share: the work they trace (fib with one async per call, whose counts are known
// exactly), temporary paths, and a reader for the statistics table (APGAS_STATS) place 0 prints on stderr.
#include "support/run.hpp"
#include "support/trace_check.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace apgas_test::trace {

/// fib(n) with finish and one async per call that is not a leaf: spawns(n) asyncs, spawns(n) finishes.
inline long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    apgas::async([&a, n] { a = fib(n - 1); });
    b = fib(n - 2);
  });
  return a + b;
}
inline long spawns(int n) { return n < 2 ? 0 : 1 + spawns(n - 1) + spawns(n - 2); }

/// A file name in the test's temporary folder, removed first.
inline std::string temp_file(const std::string& name) {
  std::string p = testing::TempDir() + "apgas-trace-" + std::to_string(::getpid()) + "-" + name;
  std::remove(p.c_str());
  return p;
}

inline bool exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f != nullptr) std::fclose(f);
  return f != nullptr;
}

/// One place's table: its counters by name ("activities run", "time idle" in seconds, "kernels", "copies host->GPU",
/// "bytes host->GPU", ...), and per peer the four message columns.
struct place_stats {
  std::map<std::string, double> value;
  struct peer {
    double msgs_sent = 0, bytes_sent = 0, msgs_recv = 0, bytes_recv = 0;
  };
  std::map<int, peer> peers;
};

/// Reads every "apgas stats: place N: ..." table of `text`.
inline std::map<int, place_stats> parse_stats(const std::string& text) {
  std::map<int, place_stats> out;
  std::istringstream in(text);
  std::string line;
  place_stats* cur = nullptr;
  bool in_peers = false;
  while (std::getline(in, line)) {
    int p = -1;
    if (std::sscanf(line.c_str(), "apgas stats: place %d:", &p) == 1) {
      cur = &out[p];
      in_peers = false;
      continue;
    }
    if (cur == nullptr) continue;
    if (line.size() < 3 || line[0] != ' ') {  // the table ended
      cur = nullptr;
      continue;
    }
    if (line.find("peer   messages sent") != std::string::npos) {
      in_peers = true;
      continue;
    }
    if (in_peers) {
      int q = -1;
      place_stats::peer x;
      if (std::sscanf(line.c_str(), " %d %lf %lf %lf %lf", &q, &x.msgs_sent, &x.bytes_sent, &x.msgs_recv,
                      &x.bytes_recv) == 5) {
        cur->peers[q] = x;
        continue;
      }
    }
    // "  name with spaces      1234" or "  copies host->GPU   4 (1024 bytes)" or "  time idle   0.01 s (...)"
    const std::size_t start = line.find_first_not_of(' ');
    const std::size_t gap = line.find("  ", start);
    if (gap == std::string::npos) continue;
    const std::string name = line.substr(start, gap - start);
    double v = 0;
    if (std::sscanf(line.c_str() + gap, " %lf", &v) == 1) cur->value[name] = v;
    const std::size_t paren = line.find('(', gap);
    double bytes = 0;
    if (name.rfind("copies ", 0) == 0 && paren != std::string::npos &&
        std::sscanf(line.c_str() + paren, "(%lf bytes)", &bytes) == 1) {
      cur->value["bytes " + name.substr(7)] = bytes;
    }
  }
  return out;
}

}  // namespace apgas_test::trace
