#pragma once
// tpacf: what apgas_parboil_tpacf, parboil_tpacf_native and parboil_tpacf_omp share — Parboil's angular two-point
// correlation function: the sizes, the point files (text, `ra dec` in degrees per line), the generator, the 20
// logarithmic angular bins (1 to 10 000 arcminutes), the 60-line output, the serial reference and Parboil's tiered
// compare-output rule. No apgas and no CUDA here.
//
// The problem: one set of data points and `sets` sets of random points, `n` points each, as unit vectors. Three
// histograms of the angle between two points, binned by its cosine (the dot product) against bin_bounds():
//   DD: pairs a < c of data points; RR: pairs a < c within each random set (summed over the sets);
//   DR: every data point with every point of each random set (summed over the sets).
// Parboil's kernel computes one histogram per thread block: block 0 DD, blocks 1..sets RR of set 1..sets (the
// "self" blocks), blocks sets+1..2*sets DR of set 1..sets. The counts are integers: any split of the work, over
// blocks, places or hosts, sums to the same histograms.
//
// Exactness: every version computes a pair's dot product as the float expression (xa * xc + ya * yc) + za * zc (a the
// "data" side: a point of the data set, or the lower index of a self pair) and bins it by comparisons with the same
// float bounds, and every file is compiled without fused multiply-add (CMakeLists.txt): the GPU versions, the CPU
// places, the OpenMP baseline and the reference give the same histograms, bit for bit. (Parboil let nvcc contract;
// pairs near a bound then move to the next bin, which the tolerances of its rule are for — but the first bins hold
// pairs closer than float resolves, and there the moves exceeded the tolerance on our generated sets.)
#include "parboil.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tpacf {

inline constexpr const char* name = "tpacf";
inline constexpr int bins = 20;  ///< NUM_BINS: 5 per decade, 1' to 10^4'
inline constexpr int bins_per_decade = 5;
inline constexpr double min_arcmin = 1.0;
inline constexpr int block = 256;           ///< points per tile = threads per block (Parboil's BLOCK_SIZE)
inline constexpr int sub_histograms = 128;  ///< per block, two threads each (Parboil: 8 warps x 16 histograms)

/// The counts of a block's histogram: 64 bits (a DR block counts n^2 pairs, 2^32 from n = 65536 on). The kernels'
/// shared sub-histograms count in 32 bits: a bin of one gets the pairs of two threads, at most 2 ceil(n / 256) n,
/// below 2^32 up to max_points points a set (-p). max_total: the points of all sets together (about 20 bytes each
/// in memory).
using bin_count = std::uint64_t;
static_assert(sizeof(bin_count) == 8);
inline constexpr int max_points = 500000;
static_assert(2.0 * ((max_points + block - 1) / block) * max_points < 4294967296.0);
inline constexpr long long max_total = 1LL << 26;

/// The size sets: Parboil's small, medium and large datasets (100 random sets each). "default" is medium: large takes
/// about a minute on two CPU cores (1.6e10 pairs), medium about ten seconds (2.5e9 pairs).
struct size_set {
  int points, sets;
};
inline size_set size_of(const std::string& name) {
  if (name == "small") return {487, 100};
  if (name == "large") return {10391, 100};
  return {4096, 100};  // "medium", "default", ""
}
inline const std::initializer_list<std::string_view> size_names = {"small", "medium", "default", "large"};

/// The usage text of a tpacf program.
inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i Datapnts,Randompnts.1,...,Randompnts.N] [-o OUT] [options] [-- -n N -p POINTS]\n"
         "  -n N        random sets (Parboil's -n; with -i: the number of random files, which it must equal)\n"
         "  -p POINTS   points per set (Parboil's -p; with -i: the first POINTS lines of every file, by default all\n"
         "              of the data file's); at most 500000, and (N + 1) * POINTS at most 2^26\n"
         "  sizes (--size): small (487 points), medium = default (4096), large (10391); 100 random sets each\n" +
         parboil::common_usage;
}

/// Bin boundaries as cosines, decreasing: binb[k] = cos(10^(log10(1') + k / 5) arcmin), k = 0..20 (Parboil's initBinB).
inline std::array<float, bins + 1> bin_bounds() {
  std::array<float, bins + 1> b{};
  const double d2r = M_PI / 180.0;
  for (int k = 0; k <= bins; ++k) {
    b[static_cast<std::size_t>(k)] =
        static_cast<float>(std::cos(std::pow(10.0, std::log10(min_arcmin) + k * 1.0 / bins_per_decade) / 60.0 * d2r));
  }
  return b;
}

/// The input: set 0 the data points, sets 1..sets the random ones, as unit vectors in one array: x of every set, then
/// y, then z (set s point i at s * n + i of each).
struct input {
  int n = 0, sets = 0;
  std::vector<float> xyz;
  std::size_t total() const { return static_cast<std::size_t>(sets + 1) * static_cast<std::size_t>(n); }
  const float* x() const { return xyz.data(); }
  const float* y() const { return xyz.data() + total(); }
  const float* z() const { return xyz.data() + 2 * total(); }
};

/// The data set and the random sets [s0, s1) of an array of `sets` sets (input::xyz's layout): the same layout with
/// s1 - s0 random sets.
inline std::vector<float> pick(const std::vector<float>& xyz, int n, int sets, int s0, int s1) {
  const long k = static_cast<long>(sets + 1) * n;
  std::vector<float> v;
  v.reserve(static_cast<std::size_t>(3) * n * (1 + s1 - s0));
  for (long c = 0; c < 3; ++c) {
    v.insert(v.end(), xyz.begin() + c * k, xyz.begin() + c * k + n);
    v.insert(v.end(), xyz.begin() + c * k + static_cast<long>(s0) * n, xyz.begin() + c * k + static_cast<long>(s1) * n);
  }
  return v;
}

/// Parboil's conversion of (ra, dec) in degrees to a unit vector (double arithmetic, stored as float).
inline void to_unit(float ra, float dec, float& x, float& y, float& z) {
  const double d2r = M_PI / 180.0;
  const float rarad = static_cast<float>(d2r * ra), decrad = static_cast<float>(d2r * dec);
  const float cd = static_cast<float>(std::cos(static_cast<double>(decrad)));
  x = static_cast<float>(std::cos(static_cast<double>(rarad)) * cd);
  y = static_cast<float>(std::sin(static_cast<double>(rarad)) * cd);
  z = static_cast<float>(std::sin(static_cast<double>(decrad)));
}

/// One point file's coordinates as text ("%.7f %.7f" per line, as Parboil's files) and as the floats that reading
/// the text gives (the generator goes through the text, so a written input reads back as the same points).
inline float through_text(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.7f", static_cast<double>(v));
  return static_cast<float>(std::strtod(buf, nullptr));
}

/// Generated points (deterministic): data points in ra 0..33 deg, dec -11..16 deg, 40% of them in small clusters so
/// that the small-angle bins are not empty; random points uniform on the sphere in ra 0..360, dec -11..69.
/// ra_dec[s] holds set s as ra, dec pairs.
inline std::vector<std::vector<float>> generate_ra_dec(int n, int sets) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(sets) + 1);
  parboil::random data(0x7ac0f);
  std::vector<float> centre;
  for (int c = 0; c < 64; ++c) {
    centre.push_back(data.uniform(1.f, 32.f));
    centre.push_back(data.uniform(-10.f, 15.f));
  }
  for (int i = 0; i < n; ++i) {
    float ra = 0, dec = 0;
    if (data.uniform() < 0.4f) {
      const std::size_t c = static_cast<std::size_t>(data.next() % 64) * 2;
      ra = centre[c] + data.uniform(-0.15f, 0.15f);
      dec = centre[c + 1] + data.uniform(-0.15f, 0.15f);
    } else {
      ra = data.uniform(0.f, 33.f);
      dec = data.uniform(-11.f, 16.f);
    }
    out[0].push_back(through_text(ra));
    out[0].push_back(through_text(dec));
  }
  const double lo = std::sin(-11.0 * M_PI / 180.0), hi = std::sin(69.0 * M_PI / 180.0);
  for (int s = 1; s <= sets; ++s) {
    parboil::random r(0x5eed0000ULL + static_cast<std::uint64_t>(s));
    for (int i = 0; i < n; ++i) {
      const float ra = r.uniform(0.f, 360.f);
      const double sd = lo + (hi - lo) * r.uniform();
      out[static_cast<std::size_t>(s)].push_back(through_text(ra));
      out[static_cast<std::size_t>(s)].push_back(through_text(static_cast<float>(std::asin(sd) * 180.0 / M_PI)));
    }
  }
  return out;
}

/// Reads the first n points of a point file (n < 0: all of them, at most max_points) as ra, dec pairs; errors name
/// the file and line.
inline std::vector<float> read_ra_dec(const std::string& path, int n) {
  parboil::text_file f(path);
  std::vector<float> v;
  for (int i = 0; n < 0 || i < n; ++i) {
    if (n < 0 && i == max_points && !f.at_end()) {
      f.fail(f.line(), "more than " + std::to_string(max_points) + " points (the most a set may have)");
    }
    if (f.at_end()) {
      if (n < 0 && i > 0) break;
      f.fail(f.line(), "expected point " + std::to_string(i + 1) + (n < 0 ? "" : " of " + std::to_string(n)) +
                           " (right ascension and declination in degrees), found the end of the file");
    }
    const float ra = f.number<float>("a right ascension in degrees");
    const float dec = f.number<float>("a declination in degrees");
    if (dec < -90.f || dec > 90.f) f.fail(f.line(), "declination " + std::to_string(dec) + " is outside -90..90");
    v.push_back(ra);
    v.push_back(dec);
  }
  return v;
}

inline void write_ra_dec(const std::string& path, const std::vector<float>& v) {
  parboil::output_file f(path, false);
  for (std::size_t i = 0; i + 1 < v.size(); i += 2)
    f.print("%.7f %.7f\n", static_cast<double>(v[i]), static_cast<double>(v[i + 1]));
  f.close();
}

inline input to_input(const std::vector<std::vector<float>>& ra_dec, int n) {
  input in;
  in.n = n;
  in.sets = static_cast<int>(ra_dec.size()) - 1;
  in.xyz.resize(3 * in.total());
  float* x = in.xyz.data();
  for (std::size_t s = 0; s < ra_dec.size(); ++s) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const std::size_t at = s * static_cast<std::size_t>(n) + i;
      to_unit(ra_dec[s][2 * i], ra_dec[s][2 * i + 1], x[at], x[in.total() + at], x[2 * in.total() + at]);
    }
  }
  return in;
}

/// The input the options ask for: read with -i, else generated (--size, -n and -p). With --write-input it writes the
/// generated point files and returns false (the program then exits with 0).
inline bool load(const parboil::options& o, input& in) {
  int n = -1, sets = -1;
  for (std::size_t i = 0; i < o.params.size(); ++i) {
    const std::string& p = o.params[i];
    if ((p != "-n" && p != "-p") || i + 1 >= o.params.size()) {
      throw parboil::usage_error("parameter '" + p + "': expected -n SETS or -p POINTS");
    }
    const long long v = parboil::to_integer(o.params[++i], 1, p == "-n" ? 100000 : max_points,
                                            p == "-n" ? "-n (random sets)" : "-p (points per set)");
    (p == "-n" ? sets : n) = static_cast<int>(v);
  }
  auto expect_total = [](long long sets, long long points) {
    if ((sets + 1) * points > max_total) {
      throw parboil::usage_error(std::to_string(sets) + " random sets and the data set of " + std::to_string(points) +
                                 " points each: " + std::to_string((sets + 1) * points) + " points, at most " +
                                 std::to_string(max_total));
    }
  };
  if (!o.inputs.empty()) {
    const int files = static_cast<int>(o.inputs.size()) - 1;
    if (files < 1) throw parboil::usage_error("-i: expected a data file and at least one random file");
    if (sets >= 0 && sets != files) {
      throw parboil::usage_error("-n " + std::to_string(sets) + ": but -i names " + std::to_string(files) +
                                 " random files");
    }
    std::vector<std::vector<float>> ra_dec;
    ra_dec.push_back(read_ra_dec(o.inputs[0], n));
    n = static_cast<int>(ra_dec[0].size() / 2);
    expect_total(files, n);
    for (int s = 1; s <= files; ++s) ra_dec.push_back(read_ra_dec(o.inputs[static_cast<std::size_t>(s)], n));
    in = to_input(ra_dec, n);
    return true;
  }
  const size_set size = size_of(o.size);
  if (n < 0) n = size.points;
  if (sets < 0) sets = size.sets;
  expect_total(sets, n);
  const auto ra_dec = generate_ra_dec(n, sets);
  if (!o.write_inputs.empty()) {
    if (o.write_inputs.size() != ra_dec.size()) {
      throw parboil::usage_error("--write-input: expected " + std::to_string(ra_dec.size()) +
                                 " files (Datapnts and one per random set), got " +
                                 std::to_string(o.write_inputs.size()));
    }
    for (std::size_t s = 0; s < ra_dec.size(); ++s) write_ra_dec(o.write_inputs[s], ra_dec[s]);
    return false;
  }
  in = to_input(ra_dec, n);
  return true;
}

/// The result: per bin DD, DR (summed over the random sets) and RR (summed), as Parboil prints them.
struct histograms {
  std::array<std::uint64_t, bins> dd{}, dr{}, rr{};
  /// The 60 values in the output's order: per bin dd, dr, rr.
  std::vector<double> values() const {
    std::vector<double> v;
    for (int b = 0; b < bins; ++b) {
      v.push_back(static_cast<double>(dd[b]));
      v.push_back(static_cast<double>(dr[b]));
      v.push_back(static_cast<double>(rr[b]));
    }
    return v;
  }
  /// Adds the histogram of one block of a grid over `sets` random sets in Parboil's order: block 0 DD, blocks
  /// 1..sets RR, blocks sets+1..2*sets DR.
  void add(int kind, int sets, const bin_count* h) {
    auto& into = kind == 0 ? dd : (kind <= sets ? rr : dr);
    for (int b = 0; b < bins; ++b) into[b] += h[b];
  }
  /// The histograms of a grid's blocks (20 counts each) in Parboil's order, over `sets` random sets: DD first when
  /// dd, then the RR of each set, then the DR of each set.
  static histograms of_blocks(const std::vector<bin_count>& h, bool dd, int sets) {
    histograms r;
    for (std::size_t b = 0; b < h.size() / bins; ++b)
      r.add(static_cast<int>(b) + (dd ? 0 : 1), sets, h.data() + b * bins);
    return r;
  }
  void add(const histograms& o) {
    for (int b = 0; b < bins; ++b) {
      dd[b] += o.dd[b];
      dr[b] += o.dr[b];
      rr[b] += o.rr[b];
    }
  }
};

/// The bin of a dot product by Parboil's binary search over the decreasing bounds, written without branches: the bin
/// b with binb[b] > d >= binb[b + 1], or -1 outside [binb[20], binb[0]) (and for NaN).
inline int find_bin(const float* binb, float d) {
  const float* lo = binb;
  for (int len = bins; len > 1;) {
    const int half = len / 2;
    lo = d < lo[half] ? lo + half : lo;
    len -= half;
  }
  return d < lo[0] && d >= lo[1] ? static_cast<int>(lo - binb) : -1;
}

/// The serial reference, written independently of the kernels: for every pair, the number of bounds above its dot
/// product; bin b then holds C(b) - C(b + 1), where C(k) counts the pairs with d < binb[k] (bounds decrease).
inline histograms reference(const input& in) {
  const auto binb = bin_bounds();
  const int n = in.n;
  std::vector<float> d(static_cast<std::size_t>(n));
  histograms h;
  for (int kind = 0; kind <= 2 * in.sets; ++kind) {
    const bool self = kind <= in.sets;
    const std::size_t a_set = self ? static_cast<std::size_t>(kind) : 0;
    const std::size_t c_set = static_cast<std::size_t>(self ? kind : kind - in.sets);
    const float* ax = in.x() + a_set * n;
    const float* ay = in.y() + a_set * n;
    const float* az = in.z() + a_set * n;
    const float* cx = in.x() + c_set * n;
    const float* cy = in.y() + c_set * n;
    const float* cz = in.z() + c_set * n;
    std::array<std::uint64_t, bins + 1> below{};  // C(k)
    for (int a = 0; a < n; ++a) {
      const int c0 = self ? a + 1 : 0;
      for (int c = c0; c < n; ++c) d[static_cast<std::size_t>(c)] = ax[a] * cx[c] + ay[a] * cy[c] + az[a] * cz[c];
      for (int k = 0; k <= bins; ++k) {
        const float bound = binb[static_cast<std::size_t>(k)];
        unsigned count = 0;
        for (int c = c0; c < n; ++c) count += d[static_cast<std::size_t>(c)] < bound ? 1u : 0u;
        below[static_cast<std::size_t>(k)] += count;
      }
    }
    histograms part;
    auto& into = kind == 0 ? part.dd : (self ? part.rr : part.dr);
    for (int b = 0; b < bins; ++b)
      into[b] = below[static_cast<std::size_t>(b)] - below[static_cast<std::size_t>(b) + 1];
    h.add(part);
  }
  return h;
}

/// Parboil's 60-line output: per bin "dd\ndr\nrr\n".
inline void write_output(const std::string& path, const histograms& h) {
  parboil::output_file f(path, false);
  for (int b = 0; b < bins; ++b) {
    f.print("%llu\n%llu\n%llu\n", static_cast<unsigned long long>(h.dd[b]), static_cast<unsigned long long>(h.dr[b]),
            static_cast<unsigned long long>(h.rr[b]));
  }
  f.close();
}

/// A Parboil reference output (60 numbers, one per line).
inline std::vector<double> read_output(const std::string& path) {
  parboil::text_file f(path);
  std::vector<double> v;
  for (int i = 0; i < 3 * bins; ++i)
    v.push_back(f.number<double>("histogram value " + std::to_string(i + 1) + " of 60"));
  if (!f.at_end()) f.fail(f.line(), "expected the end of the file after 60 values");
  return v;
}

/// Parboil's compare-output rule for tpacf: per value a relative and an absolute tolerance by position (a value fails
/// only when its difference exceeds both), and the total may fall short of the reference's by at most 0.01%.
inline parboil::check_result compare(const std::vector<double>& ref, const std::vector<double>& got) {
  parboil::check_result r;
  struct tier {
    std::size_t end;
    double rtol, atol;
  };
  static constexpr tier tiers[] = {{3, 0.10, 3},   {6, 0.35, 20},   {9, 0.05, 10},     {12, 0.02, 10},
                                   {21, 0.01, 10}, {32, 0.001, 10}, {60, 0.001, 10000}};
  std::size_t t = 0;
  double sum_ref = 0, sum_got = 0;
  for (std::size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    while (i >= tiers[t].end) ++t;
    const double diff = std::fabs(ref[i] - got[i]);
    r.expect(!(diff > tiers[t].rtol * ref[i] && diff > tiers[t].atol), [&] {
      static const char* kinds[] = {"DD", "DR", "RR"};
      return std::string(kinds[i % 3]) + " bin " + std::to_string(i / 3) + ": " + std::to_string(got[i]) +
             ", reference " + std::to_string(ref[i]);
    });
    sum_ref += ref[i];
    sum_got += got[i];
  }
  if (ref.size() != got.size()) r.fail("60 values expected");
  r.expect(sum_ref - sum_got <= 1e-4 * sum_ref, [&] {
    return "total " + std::to_string(sum_got) + " falls short of the reference's " + std::to_string(sum_ref);
  });
  return r;
}

/// The check of a run: against --check FILE, or the serial reference; prints the mismatches. True when it passes
/// (or when checking is off).
inline bool check(const parboil::options& o, const input& in, const histograms& got, const char* prog) {
  if (!o.check) return true;
  const bool from_file = !o.check_file.empty();
  const std::vector<double> ref = from_file ? read_output(o.check_file) : reference(in).values();
  const parboil::check_result r = compare(ref, got.values());
  r.print(prog, from_file ? o.check_file.c_str() : "the serial reference");
  return r.ok();
}

/// The report's fields.
inline std::string fields(const input& in) {
  return "points=" + std::to_string(in.n) + " sets=" + std::to_string(in.sets);
}

}  // namespace tpacf
