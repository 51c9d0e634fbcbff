// kmeans_points: writes a points file (the binary format of README.md) with the generator of apgas_kmeans, so that
// `apgas_kmeans -p FILE` and `apgas_kmeans -n N -s S` compute the same thing.
//
//   kmeans_points -n N [-d D] [-s S] -o FILE
#include "kmeans_common.hpp"

#include <cstdio>
#include <string>
#include <string_view>

int main(int argc, char** argv) {
  std::int64_t n = 0, d = 4;
  std::uint64_t seed = 1;
  std::string out;
  auto usage = [](const std::string& why) {
    if (!why.empty()) std::fprintf(stderr, "kmeans_points: %s\n", why.c_str());
    std::fprintf(why.empty() ? stdout : stderr,
                 "usage: kmeans_points -n N [-d D] [-s SEED] -o FILE\n"
                 "  writes N generated points of D dimensions (default 4) in the points-file format\n");
    return why.empty() ? 0 : 2;
  };
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    if (arg == "-h" || arg == "--help") return usage("");
    if (a + 1 >= argc) return usage("option " + std::string(arg) + " needs a value or is unknown");
    const std::string_view v = argv[++a];
    if (arg == "-n") {
      if (!kmeans::parse_int(v, 1, kmeans::max_n, n)) {
        return usage("invalid -n '" + std::string(v) + "': expected a whole number from 1 to " +
                     std::to_string(kmeans::max_n));
      }
    } else if (arg == "-d") {
      if (!kmeans::parse_int(v, 1, kmeans::max_d, d)) {
        return usage("invalid -d '" + std::string(v) + "': expected a whole number from 1 to " +
                     std::to_string(kmeans::max_d));
      }
    } else if (arg == "-s") {
      if (!kmeans::parse_u64(v, seed)) {
        return usage("invalid -s '" + std::string(v) + "': expected an unsigned 64-bit number");
      }
    } else if (arg == "-o") {
      out = v;
    } else {
      return usage("unknown option '" + std::string(arg) + "'");
    }
  }
  if (n == 0 || out.empty()) return usage("-n and -o are required");
  try {
    kmeans::write_points_file(out, n, static_cast<int>(d), seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kmeans_points: %s\n", e.what());
    return 1;
  }
  std::printf("kmeans_points: wrote %lld points of %lld dimensions (seed %llu) to %s\n", static_cast<long long>(n),
              static_cast<long long>(d), static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}
