// apgas_bench_trace: what the trace (APGAS_TRACE) costs, measured side by side in one run.
//   ratio trace_off_fib30   fib(30), this build (trace compiled in, off) / a build without it (APGAS_TRACE_BUILD=OFF,
//                           --anchor: its apgas_bench_trace; bench/run_trace.sh builds it); target <= 1.01
//   ratio trace_on_fib30    fib(30) traced / not traced, this build (every activity, spawn and finish recorded)
//   ratio trace_on_kmeans   the k-means sample's iterations (its total_s) traced / not traced; target <= 1.10
// and, for the traced fib: events recorded per second of the run, bytes per event in the buffers and in the file, and
// how long writing the file took. Every figure is the median of --repeats runs (default 7), the two sides
// interleaved; every run is a process of its own (`--child`), timed inside it (start-up and the file written at the
// end are not in the time).
//   apgas_bench_trace [--repeats N] [--only fib|kmeans] [--anchor PATH] [--kmeans PATH] [--fib N]
#include <apgas/apgas.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const std::string& name, const std::vector<double>& ours, const std::vector<double>& anchor) {
  const double o = median(ours);
  const double a = median(anchor);
  std::printf("ratio %s %.3f (ours %.4f s, anchor %.4f s)\n", name.c_str(), o / a, o, a);
  std::fflush(stdout);
}

// Runs a shell command, returns its whole output (stdout and stderr); exits on failure.
std::string run(const std::string& cmd) {
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    std::fprintf(stderr, "apgas_bench_trace: cannot run %s\n", cmd.c_str());
    std::exit(1);
  }
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (::pclose(p) != 0) {
    std::fprintf(stderr, "apgas_bench_trace: failed: %s\n%s\n", cmd.c_str(), out.c_str());
    std::exit(1);
  }
  return out;
}

// The number after `key` in `text` (e.g. "time_s=" or "total_s="), or -1.
double field(const std::string& text, const std::string& key) {
  const std::size_t at = text.rfind(key);
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + key.size());
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("apgas_bench_trace");
}

long long file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

int child_fib(int argc, char** argv, int n) {
  return apgas::run(argc, argv, [n] {
    (void)fib(20);  // warm: stacks, caches
    const auto t0 = clock_type::now();
    const long v = fib(n);
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    std::printf("fib(%d)=%ld time_s=%.6f\n", n, v, s);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  int n = 30;
  std::string only, anchor, kmeans;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "apgas_bench_trace: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--child") return child_fib(argc, argv, std::atoi(value().c_str()));
    if (a == "--repeats") repeats = std::max(1, std::atoi(value().c_str()));
    else if (a == "--only") only = value();
    else if (a == "--anchor") anchor = value();
    else if (a == "--kmeans") kmeans = value();
    else if (a == "--fib") n = std::atoi(value().c_str());
    else {
      std::fprintf(stderr, "usage: apgas_bench_trace [--repeats N] [--only fib|kmeans] [--anchor PATH] "
                   "[--kmeans PATH] [--fib N]\n");
      return 2;
    }
  }
  const std::string self = self_path();
  const std::string dir = self.substr(0, self.rfind('/'));
  const std::string tmp = (std::getenv("TMPDIR") != nullptr ? std::string(std::getenv("TMPDIR")) : "/tmp") +
                          "/apgas-bench-trace-" + std::to_string(::getpid()) + ".json";
  const std::string fibs = std::to_string(n);
  // Enough buffer for every event of the traced fib (about 6 per activity): nothing dropped, nothing uncounted.
  const std::string traced = "APGAS_TRACE=" + tmp + " APGAS_TRACE_BUFFER=1G ";

  if (only.empty() || only == "fib") {
    if (!anchor.empty()) {
      std::vector<double> ours, base;
      for (int r = 0; r < repeats; ++r) {
        ours.push_back(field(run(self + " --child " + fibs), "time_s="));
        base.push_back(field(run(anchor + " --child " + fibs), "time_s="));
      }
      report("trace_off_fib" + fibs, ours, base);
    } else {
      std::printf("(ratio trace_off_fib%s: needs --anchor, a build with APGAS_TRACE_BUILD=OFF: bench/run_trace.sh)\n",
                  fibs.c_str());
    }
    std::vector<double> on, off, write_s;
    double events = 0, json_events = 0;
    long long bytes = 0;
    for (int r = 0; r < repeats; ++r) {
      off.push_back(field(run(self + " --child " + fibs), "time_s="));
      const auto t0 = clock_type::now();
      const std::string out = run(traced + self + " --child " + fibs);
      const double total = std::chrono::duration<double>(clock_type::now() - t0).count();
      on.push_back(field(out, "time_s="));
      write_s.push_back(total - on.back());
      json_events = field(out, "': ");
      events = field(out, "JSON events from ");
      bytes = file_size(tmp);
      std::remove(tmp.c_str());
    }
    report("trace_on_fib" + fibs, on, off);
    const double t = median(on);
    std::printf("trace fib%s: %.0f events recorded in %.4f s: %.3g events/s (%.1f ns per event over the traced "
                "run), 32 bytes per event in the buffers, %.0f bytes per JSON event (%lld bytes, %.0f JSON events); "
                "start-up, merge and writing the file %.2f s\n",
                fibs.c_str(), events, t, events / t, (t - median(off)) * 1e9 / events,
                json_events > 0 ? static_cast<double>(bytes) / json_events : 0.0, bytes, json_events,
                median(write_s));
  }

  if (only.empty() || only == "kmeans") {
    if (kmeans.empty()) kmeans = dir + "/../samples/kmeans/apgas_kmeans";
    if (::access(kmeans.c_str(), X_OK) != 0) {
      std::printf("(ratio trace_on_kmeans: no k-means sample at %s: --kmeans PATH)\n", kmeans.c_str());
      return 0;
    }
    std::vector<double> on, off;
    for (int r = 0; r < repeats; ++r) {
      off.push_back(field(run(kmeans + " -q --no-check"), "total_s="));
      on.push_back(field(run(traced + kmeans + " -q --no-check"), "total_s="));
      std::remove(tmp.c_str());
    }
    report("trace_on_kmeans", on, off);
  }
  return 0;
}
