// apgas_fib: prints the place tree, then computes fib(n) with one async per non-leaf call and checks it against
// the serial answer. The README's main job until the k-means sample exists.
//   apgas_fib [-n N]      (default 30; N from 0 to 50)
#include <apgas/apgas.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  apgas::finish([&] {
    apgas::async([&] { a = fib(n - 1); });
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

int usage(const char* why) {
  std::fprintf(stderr, "apgas_fib: %s\nusage: apgas_fib [-n N]   (N from 0 to 50, default 30)\n", why);
  return 2;
}

void print_tree() {
  std::printf("places: %zu (%d host%s)\n", apgas::all_places().size(), apgas::num_hosts(),
              apgas::num_hosts() == 1 ? "" : "s");
  for (apgas::place p : apgas::all_places()) {
    std::printf("  place %d: %s, parent %d, %zu child%s\n", p.id(), p.is_host() ? "host" : "cuda", p.parent().id(),
                p.children().size(), p.children().size() == 1 ? "" : "ren");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 30;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-n") == 0 || std::strcmp(argv[i], "--n") == 0) {
      if (i + 1 >= argc) return usage("-n needs a value");
      const std::string v = argv[++i];
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < 0 || x > 50) return usage(("invalid -n '" + v + "'").c_str());
      n = static_cast<int>(x);
    } else {
      return usage((std::string("unknown option '") + argv[i] + "'").c_str());
    }
  }
  bool ok = false;
  const int rc = apgas::run(argc, argv, [&] {
    print_tree();
    const auto t0 = std::chrono::steady_clock::now();
    const long result = fib(n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long serial = fib_serial(n);
    ok = result == serial;
    std::printf("fib: n=%d result=%ld serial=%ld workers=%d time_s=%.3f check=%s\n", n, result, serial,
                apgas::num_workers(), s, ok ? "ok" : "FAIL");
  });
  if (rc != 0) return rc;
  return ok ? 0 : 1;
}
