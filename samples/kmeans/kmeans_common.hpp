#pragma once
// What apgas_kmeans, kmeans_omp and kmeans_native_cuda share, so that the three compute exactly the same thing and
// differ only in how the work is spread: the options, the point generator, the points file, the float arithmetic
// of the assignment step, the fixed-point centroid step, the serial reference and the output lines.
// No apgas here: the baselines include this header without the runtime.
//
// Exactness. Three rules make every implementation and every partition give bit-identical results:
//  1. The distance of a point to a cluster is one float expression, sum over j of (p_j - c_j)^2 accumulated in
//     order j = 0..d-1, with no fused multiply-add: the files are compiled with -ffp-contract=off (g++) and
//     -fmad=false (nvcc). The nearest cluster is the lowest index among equal distances (strict < in index order).
//  2. The centroid step accumulates coordinates as 64-bit fixed-point integers, q = trunc(x * 2^s), with s chosen
//     from the global coordinate bound and N so that no sum can overflow (fixed_scale). Integer addition is
//     associative: the sums do not depend on how the points are split over hosts, GPUs, workers or chunks. For
//     generated coordinates (multiples of 2^-24) they are exact; a file's coordinates far smaller than the largest
//     lose their low bits, which the check measures (compare: the centroids against double-precision means).
//  3. A centroid is float((double(sum) / 2^s) / double(count)), the same expression everywhere; an empty cluster
//     keeps its previous centroid.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>

#if defined(__CUDACC__)
#define KMEANS_HD __host__ __device__
#else
#define KMEANS_HD
#endif
// On the host, the distance loop is kept out of line: inlined into the callers' point loops (an OpenMP loop, a
// kernel body), g++ 12 no longer vectorises it. On a GPU it is inlined as usual.
#if defined(__CUDA_ARCH__) || !defined(__GNUC__)
#define KMEANS_HOST_NOINLINE
#else
#define KMEANS_HOST_NOINLINE __attribute__((noinline))
#endif

namespace kmeans {

// ---- limits -------------------------------------------------------------------------------------------------------
inline constexpr int max_d = 32;
/// The clusters live in shared memory (k * d floats): at most 48 KiB, the shared memory every CUDA GPU gives a
/// block without an opt-in.
inline constexpr long max_cluster_floats = 48 * 1024 / 4;
inline constexpr std::int64_t max_n = 1'000'000'000;
/// The largest coordinate magnitude of a points file. A centroid is a mean of points, so it lies within the same
/// bound, and a squared distance is at most d * (2 * 1e18)^2 = 32 * 4e36 = 1.28e38 < FLT_MAX (3.4e38): the float
/// distances cannot overflow to inf, which would make every cluster equally far (and the assignment wrong, in the
/// serial reference as well, so the check could not see it).
inline constexpr double max_coord = 1e18;
static_assert(max_coord * max_coord * 4 * max_d < 0.5 * std::numeric_limits<float>::max(),
              "max_coord: squared distances must stay finite, with room for rounding");
inline constexpr int max_iterations = 1'000'000;
/// Points of one tile of the assignment loop: a block handles tiles b, b + blocks, ...; the threads of a block
/// share a tile (coalesced on a GPU; contiguous per block on a CPU place, where a block has one thread).
inline constexpr long tile_points = 1024;

// ---- options ------------------------------------------------------------------------------------------------------
struct options {
  std::int64_t n = 200000;
  bool n_given = false;
  int k = 100;
  int d = 4;
  bool d_given = false;
  int iterations = 50;
  std::uint64_t seed = 1;
  std::string file;         // -p: read the points from this file instead of generating them
  bool check = true;        // compare with the serial reference (--no-check: skip)
  bool print_centroids = false;
  bool quiet = false;       // no per-iteration progress on stderr
  bool pairs = true;        // GPU kernels: two points per shared-memory load (--single-point-loop: one, as before)
  bool stats = false;       // --stats: apgas_kmeans prints the run statistics of every place (the baselines ignore it)
};

inline void print_usage(std::FILE* out, const char* prog) {
  std::fprintf(out,
               "usage: %s [options]\n"
               "  -n, --points N         number of points, generated from the seed (default 200000; 1..%" PRId64 ")\n"
               "  -k, --clusters K       number of clusters (default 100; 1..N, K*D <= %ld)\n"
               "  -d, --dim D            dimensions (default 4, or the file's; 1..%d)\n"
               "  -i, --iterations I     Lloyd iterations (default 50; 1..%d)\n"
               "  -s, --seed S           seed of the generated points (default 1; decimal, 0..2^64-1)\n"
               "  -p, --points-file F    read the points from F (binary format: samples/kmeans/README.md)\n"
               "      --no-check         skip the comparison with the serial reference (check=skipped)\n"
               "      --print-centroids  print the final centroids\n"
               "  -q, --quiet            no per-iteration progress on stderr\n"
               "      --single-point-loop  GPU kernels: one point per cluster load, as before (to compare)\n"
               "      --stats            apgas_kmeans: print the run statistics of every place at the end, on stderr\n"
               "                         (as APGAS_STATS=1 does; the baselines ignore it)\n"
               "  -h, --help             this text\n",
               prog, max_n, max_cluster_floats, max_d, max_iterations);
}

/// A whole decimal number in [lo, hi]; false for anything else ("", "3x", "-1" when lo >= 0, "1e3", overflow).
inline bool parse_int(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  const std::string s(text);
  if (s.empty() || !(s.front() == '-' || (s.front() >= '0' && s.front() <= '9'))) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

/// A whole decimal number from 0 to 2^64 - 1; false for anything else ("", "-1", "0x10", overflow). Decimal only, as
/// parse_int: "010" is ten, not an octal eight.
inline bool parse_u64(std::string_view text, std::uint64_t& out) {
  const std::string s(text);
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

/// Parses the command line. Returns -1 to go on, or the exit code: 0 after --help, 2 after an error (the message
/// and the usage are printed on stderr).
inline int parse_options(int argc, char** argv, const char* prog, options& o) {
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "%s: %s\n", prog, why.c_str());
    print_usage(stderr, prog);
    return 2;
  };
  struct spec {
    const char* shrt;
    const char* lng;
    char id;
  };
  static constexpr spec with_value[] = {{"-n", "--points", 'n'},    {"-k", "--clusters", 'k'},
                                        {"-d", "--dim", 'd'},       {"-i", "--iterations", 'i'},
                                        {"-s", "--seed", 's'},      {"-p", "--points-file", 'p'}};
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    if (arg == "-h" || arg == "--help") {
      print_usage(stdout, prog);
      return 0;
    }
    if (arg == "--no-check") {
      o.check = false;
      continue;
    }
    if (arg == "--print-centroids") {
      o.print_centroids = true;
      continue;
    }
    if (arg == "-q" || arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (arg == "--single-point-loop") {
      o.pairs = false;
      continue;
    }
    if (arg == "--stats") {
      o.stats = true;
      continue;
    }
    char id = 0;
    std::string_view value;
    std::string name;
    for (const spec& s : with_value) {
      const std::string_view lng = s.lng;
      if (arg == s.shrt || arg == lng) {
        if (a + 1 >= argc) return fail("option " + std::string(arg) + " needs a value");
        id = s.id;
        name = arg;
        value = argv[++a];
        break;
      }
      if (arg.size() > lng.size() && arg.substr(0, lng.size()) == lng && arg[lng.size()] == '=') {
        id = s.id;
        name = lng;
        value = arg.substr(lng.size() + 1);
        break;
      }
    }
    if (id == 0) return fail("unknown option '" + std::string(arg) + "'");
    std::int64_t v = 0;
    const std::string bad = "invalid value '" + std::string(value) + "' for " + name + ": ";
    switch (id) {
      case 'n':
        if (!parse_int(value, 1, max_n, v)) return fail(bad + "expected a whole number from 1 to " + std::to_string(max_n));
        o.n = v;
        o.n_given = true;
        break;
      case 'k':
        if (!parse_int(value, 1, max_cluster_floats, v)) {
          return fail(bad + "expected a whole number from 1 to " + std::to_string(max_cluster_floats));
        }
        o.k = static_cast<int>(v);
        break;
      case 'd':
        if (!parse_int(value, 1, max_d, v)) return fail(bad + "expected a whole number from 1 to " + std::to_string(max_d));
        o.d = static_cast<int>(v);
        o.d_given = true;
        break;
      case 'i':
        if (!parse_int(value, 1, max_iterations, v)) {
          return fail(bad + "expected a whole number from 1 to " + std::to_string(max_iterations));
        }
        o.iterations = static_cast<int>(v);
        break;
      case 's':
        if (!parse_u64(value, o.seed)) return fail(bad + "expected an unsigned 64-bit number");
        break;
      case 'p':
        if (value.empty()) return fail("option " + name + " needs a file name");
        o.file = value;
        break;
    }
  }
  if (!o.file.empty() && o.n_given) return fail("-n and -p exclude each other: the points file gives the number of points");
  if (o.file.empty()) {  // with a file these are checked once its header is known (check_shape)
    if (o.k > o.n) return fail("k=" + std::to_string(o.k) + " clusters need at least as many points, but n=" + std::to_string(o.n));
    if (static_cast<long>(o.k) * o.d > max_cluster_floats) {
      return fail("k*d=" + std::to_string(static_cast<long>(o.k) * o.d) + " floats of clusters exceed the " +
                  std::to_string(max_cluster_floats) + " (48 KiB) that fit in a GPU block's shared memory");
    }
  }
  return -1;
}

// ---- generated points ---------------------------------------------------------------------------------------------
KMEANS_HD inline std::uint64_t mix64(std::uint64_t z) {  // the splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Coordinate j of point i for `seed`, a pure function of (seed, i, j): any host generates its own slice. The value
/// is a 24-bit integer times 2^-24, a float in [0, 1).
KMEANS_HD inline float generated_coord(std::uint64_t seed, std::int64_t i, int j, int d) {
  const std::uint64_t h = mix64(mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (static_cast<std::uint64_t>(i) * d + j));
  return static_cast<float>(h >> 40) * 0x1p-24f;
}

/// Points [lo, hi) into SoA layout: coordinate j of point lo + r at out[j * stride + r].
inline void generate_points(std::uint64_t seed, int d, std::int64_t lo, std::int64_t hi, float* out, std::int64_t stride) {
  for (int j = 0; j < d; ++j) {
    float* o = out + j * stride;
    for (std::int64_t i = lo; i < hi; ++i) o[i - lo] = generated_coord(seed, i, j, d);
  }
}

// ---- the points file ------------------------------------------------------------------------------------------------
// Little-endian: 8 bytes magic "KMPOINTS", u32 version (1), u32 d, u64 n, then n records of d float32 (point after
// point). The size must be exactly 24 + n*d*4 bytes.
inline constexpr char file_magic[8] = {'K', 'M', 'P', 'O', 'I', 'N', 'T', 'S'};
inline constexpr std::uint32_t file_version = 1;
inline constexpr std::size_t header_bytes = 24;

/// A bad points file or a bad combination of options with it (exit code 2).
struct input_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct file_header {
  std::int64_t n = 0;
  int d = 0;
};

inline std::uint32_t load_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint64_t load_u64(const unsigned char* p) {
  return static_cast<std::uint64_t>(load_u32(p)) | static_cast<std::uint64_t>(load_u32(p + 4)) << 32;
}
inline void store_u32(unsigned char* p, std::uint32_t v) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<unsigned char>(v >> (8 * b));
}
inline void store_u64(unsigned char* p, std::uint64_t v) {
  store_u32(p, static_cast<std::uint32_t>(v));
  store_u32(p + 4, static_cast<std::uint32_t>(v >> 32));
}

struct file_closer {
  std::FILE* f;
  ~file_closer() {
    if (f != nullptr) std::fclose(f);
  }
};

/// A float in round-trip precision, for messages.
inline std::string format_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

inline std::FILE* open_points(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw input_error("points file '" + path + "': cannot open it: " + std::strerror(errno));
  struct stat st{};
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {  // fopen opens a directory; reading it fails
    std::fclose(f);
    throw input_error("points file '" + path + "': it is a directory, not a points file");
  }
  return f;
}

/// Reads and checks the header and the size of a points file. Throws input_error naming the file and the problem.
inline file_header read_points_header(const std::string& path) {
  file_closer fc{open_points(path)};
  unsigned char h[header_bytes];
  const std::size_t got = std::fread(h, 1, header_bytes, fc.f);
  if (got < header_bytes) {
    throw input_error("points file '" + path + "': " + std::to_string(got) + " bytes, shorter than the " +
                      std::to_string(header_bytes) + "-byte header");
  }
  if (std::memcmp(h, file_magic, sizeof file_magic) != 0) {
    throw input_error("points file '" + path + "': bad magic (the first 8 bytes must be \"KMPOINTS\")");
  }
  const std::uint32_t version = load_u32(h + 8);
  const std::uint32_t d = load_u32(h + 12);
  const std::uint64_t n = load_u64(h + 16);
  if (version != file_version) {
    throw input_error("points file '" + path + "': version " + std::to_string(version) + ", this program reads version " +
                      std::to_string(file_version));
  }
  if (d < 1 || d > static_cast<std::uint32_t>(max_d)) {
    throw input_error("points file '" + path + "': d=" + std::to_string(d) + ", expected 1 to " + std::to_string(max_d));
  }
  if (n == 0) throw input_error("points file '" + path + "': n=0, the file holds no points");
  if (n > static_cast<std::uint64_t>(max_n)) {
    throw input_error("points file '" + path + "': n=" + std::to_string(n) + " exceeds the limit of " + std::to_string(max_n));
  }
  if (std::fseek(fc.f, 0, SEEK_END) != 0) throw input_error("points file '" + path + "': cannot seek: " + std::strerror(errno));
  const long size = std::ftell(fc.f);
  const std::uint64_t want = header_bytes + n * d * 4;
  if (size < 0 || static_cast<std::uint64_t>(size) != want) {
    throw input_error("points file '" + path + "': " + std::to_string(size) + " bytes, but the header (n=" +
                      std::to_string(n) + ", d=" + std::to_string(d) + ") needs exactly " + std::to_string(want) +
                      (static_cast<std::uint64_t>(size) < want ? " (the file is truncated)" : " (trailing bytes)"));
  }
  return file_header{static_cast<std::int64_t>(n), static_cast<int>(d)};
}

/// Checks k and d against the file's shape (input_error).
inline void check_shape(const options& o, const file_header& h) {
  if (o.d_given && o.d != h.d) {
    throw input_error("points file '" + o.file + "': d=" + std::to_string(h.d) + ", but -d " + std::to_string(o.d) +
                      " was given");
  }
  if (o.k > h.n) {
    throw input_error("points file '" + o.file + "': n=" + std::to_string(h.n) + " points, fewer than k=" +
                      std::to_string(o.k) + " clusters");
  }
  if (static_cast<long>(o.k) * h.d > max_cluster_floats) {
    throw input_error("k*d=" + std::to_string(static_cast<long>(o.k) * h.d) + " floats of clusters exceed the " +
                      std::to_string(max_cluster_floats) + " (48 KiB) that fit in a GPU block's shared memory");
  }
}

/// Points [lo, hi) of the file into SoA layout (out[j * stride + r]). Rejects non-finite coordinates and magnitudes
/// above max_coord.
inline void read_points(const std::string& path, const file_header& h, std::int64_t lo, std::int64_t hi, float* out,
                        std::int64_t stride) {
  file_closer fc{open_points(path)};
  const int d = h.d;
  if (std::fseek(fc.f, static_cast<long>(header_bytes + static_cast<std::uint64_t>(lo) * d * 4), SEEK_SET) != 0) {
    throw input_error("points file '" + path + "': cannot seek: " + std::strerror(errno));
  }
  constexpr std::int64_t batch = 1 << 16;  // points per read
  std::vector<unsigned char> buf(static_cast<std::size_t>(batch) * d * 4);
  for (std::int64_t at = lo; at < hi; at += batch) {
    const std::int64_t m = std::min(batch, hi - at);
    const std::size_t bytes = static_cast<std::size_t>(m) * d * 4;
    if (std::fread(buf.data(), 1, bytes, fc.f) != bytes) {
      throw input_error("points file '" + path + "': read error at point " + std::to_string(at) +
                        " (the file changed while it was read?)");
    }
    for (std::int64_t r = 0; r < m; ++r) {
      for (int j = 0; j < d; ++j) {
        const float x = std::bit_cast<float>(load_u32(buf.data() + (static_cast<std::size_t>(r) * d + j) * 4));
        if (!std::isfinite(x)) {
          throw input_error("points file '" + path + "': coordinate " + std::to_string(j) + " of point " +
                            std::to_string(at + r) + " is not a finite number");
        }
        if (std::fabs(x) > max_coord) {
          throw input_error("points file '" + path + "': coordinate " + std::to_string(j) + " of point " +
                            std::to_string(at + r) + " is " + format_g(x) + ", beyond the limit of " +
                            format_g(max_coord) +
                            " in magnitude (larger ones could overflow the float squared distances)");
        }
        out[j * stride + (at + r - lo)] = x;
      }
    }
  }
}

/// Writes the generated points (n, d, seed) as a points file. Throws std::runtime_error.
inline void write_points_file(const std::string& path, std::int64_t n, int d, std::uint64_t seed) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
  file_closer fc{f};
  unsigned char h[header_bytes];
  std::memcpy(h, file_magic, sizeof file_magic);
  store_u32(h + 8, file_version);
  store_u32(h + 12, static_cast<std::uint32_t>(d));
  store_u64(h + 16, static_cast<std::uint64_t>(n));
  bool ok = std::fwrite(h, 1, header_bytes, f) == header_bytes;
  std::vector<unsigned char> rec(static_cast<std::size_t>(d) * 4);
  for (std::int64_t i = 0; ok && i < n; ++i) {
    for (int j = 0; j < d; ++j) store_u32(rec.data() + j * 4, std::bit_cast<std::uint32_t>(generated_coord(seed, i, j, d)));
    ok = std::fwrite(rec.data(), 1, rec.size(), f) == rec.size();
  }
  fc.f = nullptr;
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
}

// ---- the assignment step -----------------------------------------------------------------------------------------
/// The nearest of the k clusters c (SoA: coordinate j of cluster q at c[j * k + q]) to point i of the SoA points x
/// (coordinate j at x[j * stride + i]). DC is d fixed at compile time, or 0 to use d. Ties: the lowest index.
/// Every distance is the same sequence of float operations, ((0 + diff_0^2) + diff_1^2) + ..., and the minimum is
/// taken in index order with a strict <. On the host (g++), 8 clusters are done at a time with vector arithmetic
/// (GNU vector extensions: per lane the very same IEEE operations, so the same bits as the scalar loop on a GPU).
template <int DC>
KMEANS_HD KMEANS_HOST_NOINLINE int nearest_cluster(const float* x, std::int64_t stride, std::int64_t i, const float* c,
                                                   int k, int d) {
  if constexpr (DC > 0) d = DC;
  float p[DC > 0 ? DC : max_d];
  for (int j = 0; j < d; ++j) p[j] = x[j * stride + i];
  int best = 0;
  float best_dist = INFINITY;
  int q0 = 0;
#if !defined(__CUDA_ARCH__) && defined(__GNUC__)
  typedef float v4 __attribute__((vector_size(16)));
  for (; q0 + 8 <= k; q0 += 8) {
    v4 d0 = {0.0f, 0.0f, 0.0f, 0.0f};
    v4 d1 = d0;
    for (int j = 0; j < d; ++j) {
      v4 c0, c1;
      std::memcpy(&c0, c + static_cast<std::int64_t>(j) * k + q0, sizeof c0);
      std::memcpy(&c1, c + static_cast<std::int64_t>(j) * k + q0 + 4, sizeof c1);
      const v4 e0 = p[j] - c0;
      const v4 e1 = p[j] - c1;
      d0 += e0 * e0;
      d1 += e1 * e1;
    }
    const v4 m = d0 < d1 ? d0 : d1;
    const float group_min = std::min(std::min(m[0], m[1]), std::min(m[2], m[3]));
    if (group_min < best_dist) {  // rare after the first groups: find the first such cluster in index order
      float dist[8];
      std::memcpy(dist, &d0, sizeof d0);
      std::memcpy(dist + 4, &d1, sizeof d1);
      for (int l = 0; l < 8; ++l) {
        if (dist[l] < best_dist) {
          best_dist = dist[l];
          best = q0 + l;
        }
      }
    }
  }
#endif
  for (int q = q0; q < k; ++q) {
    float dist = 0.0f;
    for (int j = 0; j < d; ++j) {
      const float diff = p[j] - c[static_cast<std::int64_t>(j) * k + q];
      dist += diff * diff;
    }
    if (dist < best_dist) {
      best_dist = dist;
      best = q;
    }
  }
  return best;
}

/// The nearest clusters of two points i0 and i1 at once (DC > 0): each cluster coordinate is read once for both. Per
/// point the very same float operations as nearest_cluster's scalar loop, in the same order (so the same result);
/// what changes is the ratio of loads to arithmetic. On a GPU the clusters are in shared memory and the coordinate is
/// the same for every thread of a warp (a broadcast): with one point per thread the loop issues one shared-memory
/// load per 3 float operations (sub, mul, add: no fused multiply-add, see above) and is bound by the load unit; with
/// two points per load, by the arithmetic.
template <int DC>
KMEANS_HD void nearest_cluster_pair(const float* x, std::int64_t stride, std::int64_t i0, std::int64_t i1,
                                    const float* c, int k, int* out) {
  static_assert(DC > 0, "nearest_cluster_pair: d fixed at compile time");
  float p0[DC], p1[DC];
  for (int j = 0; j < DC; ++j) {
    p0[j] = x[j * stride + i0];
    p1[j] = x[j * stride + i1];
  }
  int best0 = 0, best1 = 0;
  float best_dist0 = INFINITY, best_dist1 = INFINITY;
  for (int q = 0; q < k; ++q) {
    float dist0 = 0.0f, dist1 = 0.0f;
    for (int j = 0; j < DC; ++j) {
      const float cq = c[static_cast<std::int64_t>(j) * k + q];
      const float diff0 = p0[j] - cq;
      const float diff1 = p1[j] - cq;
      dist0 += diff0 * diff0;
      dist1 += diff1 * diff1;
    }
    if (dist0 < best_dist0) {
      best_dist0 = dist0;
      best0 = q;
    }
    if (dist1 < best_dist1) {
      best_dist1 = dist1;
      best1 = q;
    }
  }
  out[i0] = best0;
  out[i1] = best1;
}

/// out[i] = the nearest cluster of point i, for i = first, first + step, ... below end: the inner loop of both GPU
/// kernels (apgas_kmeans's closure and kmeans_native_cuda's kernel), one thread's share of a tile. On a GPU with d
/// fixed at compile time and `pairs`, two points at a time (nearest_cluster_pair: i and i + step, so a warp's loads
/// stay coalesced); elsewhere one at a time (on the host nearest_cluster vectorises over the clusters instead).
template <int DC>
KMEANS_HD void assign_points(const float* x, std::int64_t stride, std::int64_t first, std::int64_t end,
                             std::int64_t step, const float* c, int k, int d, int* out, bool pairs) {
  std::int64_t i = first;
#if defined(__CUDA_ARCH__)
  if constexpr (DC > 0) {
    if (pairs) {
      for (; i + step < end; i += 2 * step) nearest_cluster_pair<DC>(x, stride, i, i + step, c, k, out);
    }
  }
#else
  (void)pairs;
#endif
  for (; i < end; i += step) out[i] = nearest_cluster<DC>(x, stride, i, c, k, d);
}

/// Squared distance of point i to cluster q: the same expression as in nearest_cluster.
inline float distance2(const float* x, std::int64_t stride, std::int64_t i, const float* c, int k, int q, int d) {
  float dist = 0.0f;
  for (int j = 0; j < d; ++j) {
    const float diff = x[j * stride + i] - c[static_cast<std::int64_t>(j) * k + q];
    dist += diff * diff;
  }
  return dist;
}

/// Calls f.template operator()<DC>() with DC = d for the dimensions compiled specially (4: the paper's; 2, 3), else 0.
template <class F>
decltype(auto) with_dim(int d, F&& f) {
  switch (d) {
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    default: return f.template operator()<0>();
  }
}

// ---- the centroid step, in fixed point ---------------------------------------------------------------------------
/// The scale 2^s of the fixed-point sums for n points with coordinates of magnitude at most `bound`: every
/// |trunc(x * 2^s)| < 2^(61 - ceil(log2 n)), so a sum over at most n points stays below 2^61.
inline double fixed_scale(std::int64_t n, float bound) {
  const int e_n = std::bit_width(static_cast<std::uint64_t>(n - 1));  // n <= 2^e_n
  int e_b = 0;                                                         // bound < 2^e_b
  if (bound > 0) (void)std::frexp(bound, &e_b);
  return std::ldexp(1.0, 61 - e_n - e_b);
}

KMEANS_HD inline std::int64_t to_fixed(float x, double scale) {
  return static_cast<std::int64_t>(static_cast<double>(x) * scale);
}

/// Adds points [lo, hi) (SoA, stride) to sums (k*d) and counts (k), by their nearest cluster.
template <int DC>
inline void accumulate(const float* x, std::int64_t stride, std::int64_t lo, std::int64_t hi, const int* nearest,
                       int d, double scale, std::int64_t* sums, std::int64_t* counts) {
  if constexpr (DC > 0) d = DC;
  for (std::int64_t i = lo; i < hi; ++i) {
    const int c = nearest[i];
    ++counts[c];
    std::int64_t* s = sums + static_cast<std::int64_t>(c) * d;
    for (int j = 0; j < d; ++j) s[j] += to_fixed(x[j * stride + i], scale);
  }
}

/// The new centroids (SoA, k per coordinate) from the global sums and counts (by cluster: sums[q * d + j]); an
/// empty cluster keeps its centroid. Returns the largest
/// change of a coordinate (the centroid movement).
inline float update_centroids(const std::int64_t* sums, const std::int64_t* counts, int k, int d, double scale,
                              float* centroids) {
  float moved = 0.0f;
  for (int q = 0; q < k; ++q) {
    if (counts[q] == 0) continue;
    for (int j = 0; j < d; ++j) {
      float& cur = centroids[static_cast<std::size_t>(j) * k + q];
      const float v = static_cast<float>((static_cast<double>(sums[q * d + j]) / scale) / static_cast<double>(counts[q]));
      moved = std::max(moved, std::fabs(v - cur));
      cur = v;
    }
  }
  return moved;
}

/// Largest |x| of n SoA points (stride) of d dimensions.
inline float max_abs(const float* x, std::int64_t stride, std::int64_t n, int d) {
  float m = 0.0f;
  for (int j = 0; j < d; ++j) {
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[j * stride + i]));
  }
  return m;
}

/// The initial centroids, SoA (coordinate j of cluster q at [j * k + q]): the first k points (as in the X10 sample).
inline std::vector<float> initial_centroids(const float* x, std::int64_t stride, int k, int d) {
  std::vector<float> c(static_cast<std::size_t>(k) * d);
  for (int q = 0; q < k; ++q) {
    for (int j = 0; j < d; ++j) c[static_cast<std::size_t>(j) * k + q] = x[j * stride + q];
  }
  return c;
}

// ---- the serial reference and the check ----------------------------------------------------------------------
struct reference_result {
  std::vector<float> centroids;       // after the last iteration
  std::vector<float> last_centroids;  // those the last assignment step used
  std::vector<int> nearest;           // the last assignment step's
};

/// Plain serial Lloyd iterations over all n points (SoA, stride n), with the arithmetic above.
inline reference_result serial_reference(const float* x, std::int64_t n, int k, int d, int iterations) {
  reference_result r;
  r.centroids = initial_centroids(x, n, k, d);
  r.nearest.assign(static_cast<std::size_t>(n), 0);
  const double scale = fixed_scale(n, max_abs(x, n, n, d));
  std::vector<std::int64_t> sums(static_cast<std::size_t>(k) * d), counts(static_cast<std::size_t>(k));
  with_dim(d, [&]<int DC>() {
    for (int it = 0; it < iterations; ++it) {
      for (std::int64_t i = 0; i < n; ++i) r.nearest[i] = nearest_cluster<DC>(x, n, i, r.centroids.data(), k, d);
      std::fill(sums.begin(), sums.end(), 0);
      std::fill(counts.begin(), counts.end(), 0);
      accumulate<DC>(x, n, 0, n, r.nearest.data(), d, scale, sums.data(), counts.data());
      r.last_centroids = r.centroids;
      update_centroids(sums.data(), counts.data(), k, d, scale, r.centroids.data());
    }
  });
  return r;
}

struct check_result {
  bool ok = false;
  double max_rel_diff = 0;     // over all centroid coordinates
  std::int64_t mismatches = 0;  // assignments that differ where the two clusters are not at an exact tie
  std::int64_t ties = 0;        // assignments that differ at an exact tie (allowed)
  // The fixed point's loss: max over clusters and coordinates of |reference centroid - double mean| / (the
  // cluster's largest coordinate magnitude), and where it is largest.
  double fixed_loss = 0;
  int loss_cluster = -1, loss_coord = -1;
  double loss_mean = 0, loss_centroid = 0;
};

/// The largest fixed_loss the check accepts: the truncation of each coordinate to the fixed point's step (2^-s)
/// moves a mean by less than a step, far below this for points of similar magnitudes (2^-41 of the largest for a
/// million points); a step this coarse means a cluster of small points among far larger ones lost its coordinates.
inline constexpr double max_fixed_loss = 1e-6;

/// The reference's last centroids against the double-precision means of their clusters (the reference's last
/// assignment), relative to each cluster's largest coordinate magnitude (a coordinate whose mean is near 0 has no
/// relative accuracy of its own). The serial reference sums in the same fixed point as the program, so the
/// comparison with it cannot see what the fixed point lost; this can.
inline void measure_fixed_loss(const reference_result& ref, const float* x, std::int64_t n, int d, check_result& c) {
  const std::size_t k = ref.centroids.size() / static_cast<std::size_t>(d);
  std::vector<double> sum(k * static_cast<std::size_t>(d), 0.0), big(k, 0.0);
  std::vector<std::int64_t> count(k, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto q = static_cast<std::size_t>(ref.nearest[static_cast<std::size_t>(i)]);
    ++count[q];
    for (int j = 0; j < d; ++j) {
      const double v = x[j * n + i];
      sum[static_cast<std::size_t>(j) * k + q] += v;
      big[q] = std::max(big[q], std::fabs(v));
    }
  }
  for (std::size_t q = 0; q < k; ++q) {
    if (count[q] == 0 || big[q] == 0) continue;  // (an empty cluster keeps its centroid; all-zero points are exact)
    for (int j = 0; j < d; ++j) {
      const std::size_t at = static_cast<std::size_t>(j) * k + q;
      const double mean = sum[at] / static_cast<double>(count[q]);
      const double loss = std::fabs(static_cast<double>(ref.centroids[at]) - mean) / big[q];
      if (loss > c.fixed_loss) {
        c.fixed_loss = loss;
        c.loss_cluster = static_cast<int>(q);
        c.loss_coord = j;
        c.loss_mean = mean;
        c.loss_centroid = ref.centroids[at];
      }
    }
  }
}

/// Compares centroids (1e-4 relative) and assignments (equal except at exact ties) with the reference, and the
/// reference's centroids with the means of their points (measure_fixed_loss, at most max_fixed_loss).
inline check_result compare(const reference_result& ref, const std::vector<float>& centroids,
                            const std::vector<int>& nearest, const float* x, std::int64_t n, int d) {
  check_result c;
  measure_fixed_loss(ref, x, n, d, c);
  bool centroids_ok = centroids.size() == ref.centroids.size();
  for (std::size_t q = 0; centroids_ok && q < centroids.size(); ++q) {
    const double a = centroids[q], b = ref.centroids[q];
    const double diff = std::fabs(a - b);
    const double mag = std::max(std::fabs(a), std::fabs(b));
    const double rel = diff == 0 ? 0 : (mag > 0 ? diff / mag : INFINITY);
    c.max_rel_diff = std::max(c.max_rel_diff, rel);
    if (!(rel <= 1e-4)) centroids_ok = false;
  }
  if (nearest.size() != ref.nearest.size()) return c;
  for (std::int64_t i = 0; i < n; ++i) {
    const int a = nearest[i], b = ref.nearest[i];
    if (a == b) continue;
    const float* cs = ref.last_centroids.data();
    const int k = static_cast<int>(ref.last_centroids.size() / d);
    if (a >= 0 && a < k && distance2(x, n, i, cs, k, a, d) == distance2(x, n, i, cs, k, b, d)) {
      ++c.ties;
    } else {
      ++c.mismatches;
    }
  }
  c.ok = centroids_ok && c.mismatches == 0 && c.fixed_loss <= max_fixed_loss;
  return c;
}

// ---- output ---------------------------------------------------------------------------------------------------
inline std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

/// "<prog>: centroids fnv1a=<hex>" (the bits of the final centroids, SoA) and, with --print-centroids, one line per
/// cluster with round-trip precision.
inline void print_centroids(const char* prog, const std::vector<float>& c, int k, int d, bool all) {
  std::printf("%s: centroids fnv1a=%016" PRIx64 "\n", prog, fnv1a(c.data(), c.size() * sizeof(float)));
  if (!all) return;
  for (int q = 0; q < k; ++q) {
    std::printf("centroid %d", q);
    for (int j = 0; j < d; ++j) std::printf(" %.9g", static_cast<double>(c[static_cast<std::size_t>(j) * k + q]));
    std::printf("\n");
  }
}

struct breakdown {
  double total = 0, kernel = 0, copy = 0, cpu = 0, reduce = 0;
};

inline void print_breakdown(const char* prog, const char* where, const breakdown& b, int iterations, double setup) {
  std::printf("%s: time (%s): total %.4f s = kernel %.4f + copy %.4f + cpu %.4f + reduce %.4f (+ other %.4f); "
              "per iteration %.6f s; setup %.3f s\n",
              prog, where, b.total, b.kernel, b.copy, b.cpu, b.reduce,
              std::max(0.0, b.total - b.kernel - b.copy - b.cpu - b.reduce), b.total / iterations, setup);
}

/// "<prog>: assignments fnv1a=<hex>": the final nearest[] of all points (printed when they are gathered).
inline void print_assignments(const char* prog, const std::vector<int>& nearest) {
  std::printf("%s: assignments fnv1a=%016" PRIx64 "\n", prog, fnv1a(nearest.data(), nearest.size() * sizeof(int)));
}

inline void print_check(const char* prog, const check_result& c, double seconds) {
  std::printf("%s: check against the serial reference (%.2f s): centroids max relative difference %.3g, "
              "assignments %" PRId64 " mismatches, %" PRId64 " exact ties, fixed-point loss %.3g\n",
              prog, seconds, c.max_rel_diff, c.mismatches, c.ties, c.fixed_loss);
  if (c.fixed_loss > max_fixed_loss) {
    std::printf("%s: the fixed-point centroid sums lost precision: coordinate %d of centroid %d is %.9g, the mean "
                "of its points %.9g (a loss of %.3g of the cluster's largest magnitude, above %.0e): its points are "
                "far smaller than the largest of the input, whose magnitude sets the fixed point's step; scale the "
                "data or split it\n",
                prog, c.loss_coord, c.loss_cluster, c.loss_centroid, c.loss_mean, c.fixed_loss, max_fixed_loss);
  }
}

/// The last line, parsed by kmeans_table.sh and the tests.
inline void print_result(const char* prog, std::int64_t n, int k, int d, int iterations, int hosts, int gpus,
                         double total, const char* check) {
  std::printf("%s: n=%" PRId64 " k=%d d=%d iterations=%d hosts=%d gpus=%d total_s=%.6f check=%s\n", prog, n, k, d,
              iterations, hosts, gpus, total, check);
  std::fflush(stdout);
}

}  // namespace kmeans
