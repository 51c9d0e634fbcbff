#pragma once
// rpes (Parboil 1): two-electron repulsion integrals (ab|cd) over s-type contracted Gaussian shells, summed per shell
// quartet. What the three programs share — the apgas version (rpes.cpp), the native CUDA baseline (rpes_native.cu)
// and the OpenMP baseline (rpes_omp.cpp): the sizes, the generated molecule and basis set, Parboil's input files
// (molecule + basis set, text) and output file (`i\t%e` lines), the integral of one primitive quartet, the work
// descriptors of Parboil's two kernels, the serial reference and the check.
//
// The computation: a molecule's atoms each carry the s shells of their element in the basis set; a shell is a
// contraction of 1..8 primitive Gaussians (exponent alpha, coefficient c). For every shell quartet s1 <= s2 <= s3 <= s4
// (S(S+1)(S+2)(S+3)/24 of them, in that lexicographic order) the result is the sum over its a1*a2*a3*a4 primitive
// combinations of the primitive integral (primitive_eri below). Parboil's CUDA version gives each quartet
// ceil(a1*a2*a3*a4 / 64) blocks of 64 threads, one primitive combination per thread; a block sums its 64 values with a
// shared-memory tree (one partial per block), and a second kernel, DoReduction, sums each quartet's partials.
//
// No CUDA and no apgas in this header: nvcc compiles it as host code too. The few functions the kernels call are
// marked RPES_HD (__host__ __device__ under nvcc, nothing otherwise) and use CUDA's fast division and exponential on a
// GPU, as Parboil's kernel does (__fdividef, __expf). On a CPU the exponential and erf are inline, without a branch,
// so that the loops over the integrals vectorise, in the apgas version (for_threads) and the OpenMP one (omp simd)
// alike; CMakeLists.txt adds -fno-math-errno -fno-trapping-math for that (which changes no result).
#include "parboil.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define RPES_HD __host__ __device__
#else
#define RPES_HD
#endif

namespace rpes {

inline constexpr int block_size = 64;            // Parboil's BLOCK_SIZE: threads per block = primitive combinations
inline constexpr int grid_max = 65535;           // Parboil's GRID_SIZE: blocks per launch (the grids are chunked)
inline constexpr std::size_t out_lines = 20000;  // Parboil writes (and compare-output checks) the first 20 000
inline constexpr int max_atoms = 256;            // the descriptor's 8-bit atom ids
inline constexpr int max_basis_prims = 256;      // ... its 8-bit primitive offsets
inline constexpr int max_shell_prims = 8;        // a quartet (s s|s s) has n^4 <= 4096 combinations: <= 64 blocks
inline constexpr std::uint64_t max_quartets = 1ULL << 27;  // quartets() holds them all (h100: 6.4 M)
inline constexpr std::uint64_t max_blocks = 1ULL << 29;    // 16-byte descriptors, numbered in 32 bits (h100: 186 M)
static_assert(max_blocks < (1ULL << 32));                  // distribute's `first` cannot wrap

// ---- data ---------------------------------------------------------------------------------------------------------

struct atom4 {  // Parboil's float4 coordinates (w unused)
  float x, y, z, w;
};
struct prim {  // Parboil's float2: exponent, contraction coefficient (normalisation included)
  float alpha, coeff;
};
struct shell {  // a shell of the molecule: its atom, its primitives in the basis list
  int atom, first, count;
};
struct work {  // Parboil's uint4 block descriptor: a1..a4 (4 bits each), atom ids, primitive offsets (8 bits
  std::uint32_t counts, atoms, offsets, first;  // each), the quartet's first block
};
struct range {  // Parboil's uint2 FinalReduce: a quartet's blocks [first, first + count)
  std::uint32_t first, count;
};

/// An element of the basis set: its name and its shells' primitive counts (the primitives are in input::prims).
struct element {
  std::string name;
  std::vector<int> shells;
  // clang-format off
  template <class A>
  void serialize(A& a) { a & name & shells; }  // (the apgas version ships the input to every host)
  // clang-format on
};

/// Parboil's input: the basis set (elements, their primitives in order) and the molecule (atoms and their element).
struct input {
  std::vector<element> basis;
  std::vector<prim> prims;
  std::vector<int> types;  // per atom: index into basis
  std::vector<atom4> atoms;
  std::vector<shell> shells;  // derived: the molecule's shells, atom by atom (Parboil's ComputeShell)
  // clang-format off
  template <class A>
  void serialize(A& a) { a & basis & prims & types & atoms & shells; }
  // clang-format on
};

/// The molecule's shells from its atoms' elements (each element's primitives start where the previous ones end).
inline std::vector<shell> molecule_shells(const input& in) {
  std::vector<int> first(in.basis.size() + 1, 0);
  for (std::size_t e = 0; e < in.basis.size(); ++e) {
    first[e + 1] = first[e];
    for (int n : in.basis[e].shells) first[e + 1] += n;
  }
  std::vector<shell> s;
  for (std::size_t a = 0; a < in.types.size(); ++a) {
    int at = first[in.types[a]];
    for (int n : in.basis[in.types[a]].shells) {
      s.push_back({static_cast<int>(a), at, n});
      at += n;
    }
  }
  return s;
}

// ---- the primitive integral -----------------------------------------------------------------------------------------

RPES_HD inline float fdiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
RPES_HD inline double fdiv(double a, double b) { return a / b; }
RPES_HD inline float fexp(float x) {  // (x <= 0 here)
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  // Inline, without a branch, so that the loops around the integral vectorise (a call to expf would not):
  // e^x = 2^n e^r, n = x / ln 2 rounded (by adding 1.5 * 2^23), r = x - n ln 2 (ln 2 in two parts, Cody and Waite),
  // |r| <= ln(2) / 2, e^r by its Taylor polynomial of degree 6 (relative error < 1.3e-7); 0 below -87.
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860677e-06f;
  const float e = 1 + r * (1 + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<int>(n < -126.0f ? -126.0f : n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < -87.0f ? 0.0f : e * two_n;
#endif
}
RPES_HD inline double fexp(double x) { return exp(x); }
RPES_HD inline float fsqrt(float x) { return sqrtf(x); }
RPES_HD inline double fsqrt(double x) { return sqrt(x); }
RPES_HD inline float ferf(float x) {  // (x >= 0 here)
#if defined(__CUDA_ARCH__)
  return erff(x);
#else
  // Inline for the same reason: Abramowitz and Stegun 7.1.26, |error| < 1.5e-7.
  const float t = 1.0f / (1.0f + 0.3275911f * x);
  const float p =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return 1.0f - p * fexp(-x * x);
#endif
}
RPES_HD inline double ferf(double x) { return erf(x); }

/// The Boys function F0(t) = (1/2) sqrt(pi/t) erf(sqrt t), and its series 1 - t/3 + t^2/10 - ... (error < t^3/42)
/// near 0. F0 is the weight of the one-root Rys quadrature, exact for s functions (Parboil's Root()).
template <class T>
RPES_HD inline T boys_f0(T t) {
  if (t < T(1e-3)) return T(1) - t * (T(1) / T(3) - t * T(0.1));
  const T s = fsqrt(t);
  return T(0.88622692545275801) * ferf(s) / s;  // sqrt(pi)/2
}

/// One primitive integral over s Gaussians a, b, c, d at centres A, B, C, D (Szabo & Ostlund, Modern Quantum
/// Chemistry, eq. A.41; Boys 1950):
///   (ab|cd) = 2 pi^(5/2) / (p q sqrt(p+q)) ca cb cc cd exp(-ab/p |AB|^2 - cd/q |CD|^2) F0(pq/(p+q) |PQ|^2),
///   p = a + b, P = (a A + b B) / p = A + (b/p) (B - A), and q, Q alike.
/// In T arithmetic (float: the programs; double: the reference), with the screening of Parboil's kernel: a
/// prefactor whose square is at most 1e-23 gives 0.
template <class T>
RPES_HD inline T primitive_eri(const atom4& A, const atom4& B, const atom4& C, const atom4& D, prim a, prim b, prim c,
                               prim d) {
  const T abx = T(B.x) - A.x, aby = T(B.y) - A.y, abz = T(B.z) - A.z;
  const T cdx = T(D.x) - C.x, cdy = T(D.y) - C.y, cdz = T(D.z) - C.z;
  const T p = T(a.alpha) + b.alpha, q = T(c.alpha) + d.alpha;
  const T ip = fdiv(T(1), p), iq = fdiv(T(1), q), ipq = fdiv(T(1), p + q);
  const T tb = b.alpha * ip, td = d.alpha * iq;  // P = A + tb (B - A), Q = C + td (D - C)
  const T e = a.alpha * tb * (abx * abx + aby * aby + abz * abz) + c.alpha * td * (cdx * cdx + cdy * cdy + cdz * cdz);
  const T pre = T(a.coeff) * b.coeff * c.coeff * d.coeff * fexp(-e) * ip * iq * fsqrt(ipq);
  if (!(pre * pre > T(1e-23))) return T(0);
  const T x = (T(A.x) - C.x) + tb * abx - td * cdx, y = (T(A.y) - C.y) + tb * aby - td * cdy;
  const T z = (T(A.z) - C.z) + tb * abz - td * cdz;
  return T(34.986836655249725) * pre * boys_f0(p * q * ipq * (x * x + y * y + z * z));  // 2 pi^(5/2)
}

// ---- Parboil's work descriptors -------------------------------------------------------------------------------------

/// What a thread of ComputeX reads through its block's descriptor: the quartet's primitive counts, atoms and
/// primitive offsets, and where the block's 64 primitive combinations start.
struct quartet_view {
  int a1, a2, a3, a4, o1, o2, o3, o4, k0;
  atom4 A, B, C, D;
  const prim* p;
  float r1, r2, r3;  // 1 / (a2 a3 a4), 1 / (a3 a4), 1 / a4 (see integral)
  /// Block `block` (its descriptor w), coordinates xyz, the basis set's primitives prims.
  RPES_HD quartet_view(const work& w, long block, const atom4* xyz, const prim* prims)
      : a1(w.counts >> 12 & 15),
        a2(w.counts >> 8 & 15),
        a3(w.counts >> 4 & 15),
        a4(w.counts & 15),
        o1(w.offsets >> 24),
        o2(w.offsets >> 16 & 255),
        o3(w.offsets >> 8 & 255),
        o4(w.offsets & 255),
        k0(static_cast<int>(block - w.first) * block_size),
        A(xyz[w.atoms >> 24]),
        B(xyz[w.atoms >> 16 & 255]),
        C(xyz[w.atoms >> 8 & 255]),
        D(xyz[w.atoms & 255]),
        p(prims),
        r1(fdiv(1.0f, static_cast<float>(a2 * a3 * a4))),
        r2(fdiv(1.0f, static_cast<float>(a3 * a4))),
        r3(fdiv(1.0f, static_cast<float>(a4))) {}
  /// The integral of thread t of the block: primitive combination k0 + t of the quartet, 0 past its a1 a2 a3 a4
  /// combinations (such a thread computes combination 0 and drops it: no branch around the loads, so that the CPU's
  /// loop over the threads vectorises). k is split into (n1, n2, n3, n4) as Parboil's GetNs does, by float division
  /// (here by multiplication with reciprocals): exact, since k < 4096 keeps (k + 1/2) / m at least 1/(2m) away from a
  /// whole number, far beyond float's error.
  RPES_HD float integral(int t) const {
    const bool live = k0 + t < a1 * a2 * a3 * a4;
    const int k = live ? k0 + t : 0;
    const float kf = static_cast<float>(k) + 0.5f;
    const int n1 = static_cast<int>(kf * r1), n12 = static_cast<int>(kf * r2), n123 = static_cast<int>(kf * r3);
    const float v = primitive_eri<float>(A, B, C, D, p[o1 + n1], p[o2 + n12 - n1 * a2], p[o3 + n123 - n12 * a3],
                                         p[o4 + k - n123 * a4]);
    return live ? v : 0.0f;
  }
};

/// The shell quartets s1 <= s2 <= s3 <= s4 in Parboil's order (shell numbers: the molecule has at most 256 atoms).
struct quartet {
  std::uint16_t s1, s2, s3, s4;
};
inline std::vector<quartet> quartets(std::size_t shells) {
  std::vector<quartet> q;
  q.reserve(shells * (shells + 1) * (shells + 2) * (shells + 3) / 24);
  for (std::size_t i = 0; i < shells; ++i)
    for (std::size_t j = i; j < shells; ++j)
      for (std::size_t k = j; k < shells; ++k)
        for (std::size_t l = k; l < shells; ++l)
          q.push_back({static_cast<std::uint16_t>(i), static_cast<std::uint16_t>(j), static_cast<std::uint16_t>(k),
                       static_cast<std::uint16_t>(l)});
  return q;
}
inline int combinations(const std::vector<shell>& s, quartet q) {
  return s[q.s1].count * s[q.s2].count * s[q.s3].count * s[q.s4].count;
}
inline int blocks_of(const std::vector<shell>& s, quartet q) {
  return (combinations(s, q) + block_size - 1) / block_size;
}

/// What exceeds max_quartets shell quartets or max_blocks blocks in a molecule of shells s (the count and the
/// limit), or nothing.
inline std::string size_error(const std::vector<shell>& s) {
  const double n = static_cast<double>(s.size()), quartets = n * (n + 1) * (n + 2) * (n + 3) / 24;
  if (quartets > static_cast<double>(max_quartets)) {
    char q[40];
    std::snprintf(q, sizeof q, "%.0f", quartets);
    return std::to_string(s.size()) + " shells make " + q + " shell quartets, at most " + std::to_string(max_quartets) +
           " (2^27)";
  }
  std::uint64_t blocks = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = i; j < s.size(); ++j)
      for (std::size_t k = j; k < s.size(); ++k)
        for (std::size_t l = k; l < s.size(); ++l)
          blocks += (s[i].count * s[j].count * s[k].count * s[l].count + block_size - 1) / block_size;
  if (blocks > max_blocks) {
    return std::to_string(s.size()) + " shells make " + std::to_string(blocks) + " blocks of " +
           std::to_string(block_size) + " primitive integrals, at most " + std::to_string(max_blocks) + " (2^29)";
  }
  return {};
}

/// The blocks of DoReduction: threads = the largest number of blocks of a quartet, rounded up to a power of two
/// (Parboil uses that number itself, whose halving tree skips values when it is not a power of two).
inline int reduction_threads(const std::vector<shell>& s) {
  int n = 0;
  for (const shell& x : s) n = std::max(n, x.count);
  const int most = (n * n * n * n + block_size - 1) / block_size;
  int t = 1;
  while (t < most) t *= 2;
  return t;
}

/// Parboil's DistributeBlockWork, in two steps. On the host, `distribute` makes one descriptor per quartet of qs (its
/// first block counted from qs' first quartet) and DoReduction's ranges. In each chunk of ComputeX's grid, a kernel
/// copies the descriptor of each quartet the chunk overlaps (`quartets_in`) to the chunk's blocks of that quartet
/// (`spread`): the descriptors of one chunk at a time (1 MB), where Parboil makes and copies all of them (16 bytes
/// a block: 25 MB at the default size, 3 GB at h100's).
struct distribution {
  std::vector<work> quartets;  // per quartet: its descriptor
  std::vector<range> final;    // per quartet: its blocks
  long blocks = 0;             // in all
};
inline distribution distribute(const std::vector<shell>& s, std::span<const quartet> qs) {
  distribution d;
  d.quartets.reserve(qs.size());
  d.final.reserve(qs.size());
  for (const quartet q : qs) {
    const shell &a = s[q.s1], &b = s[q.s2], &c = s[q.s3], &d4 = s[q.s4];
    const auto first = static_cast<std::uint32_t>(d.blocks), nb = static_cast<std::uint32_t>(blocks_of(s, q));
    d.quartets.push_back(
        {static_cast<std::uint32_t>(a.count << 12 | b.count << 8 | c.count << 4 | d4.count),
         static_cast<std::uint32_t>(a.atom) << 24 | static_cast<std::uint32_t>(b.atom << 16 | c.atom << 8 | d4.atom),
         static_cast<std::uint32_t>(a.first) << 24 |
             static_cast<std::uint32_t>(b.first << 16 | c.first << 8 | d4.first),
         first});
    d.final.push_back({first, nb});
    d.blocks += nb;
  }
  return d;
}
/// The quartets [first, second) whose blocks overlap the chunk [b0, b1) of ComputeX's grid (at most b1 - b0 of them).
inline std::pair<long, long> quartets_in(std::span<const range> final, long b0, long b1) {
  auto starting_below = [&](long b) {  // how many quartets start below block b
    return std::partition_point(final.begin(), final.end(), [b](const range& r) { return long{r.first} < b; }) -
           final.begin();
  };
  return {starting_below(b0 + 1) - 1, starting_below(b1)};
}
/// The threads [lo, hi) of a spread block for the quartet whose blocks are r, in the chunk [b0, b1) of ComputeX's grid:
/// thread t writes the descriptor of block r.first + t, which the chunk holds at r.first + t - b0.
struct threads_range {
  int lo, hi;
};
RPES_HD inline threads_range spread_threads(const range& r, long b0, long b1) {
  const long lo = b0 - r.first, hi = b1 - r.first;
  return {static_cast<int>(lo > 0 ? lo : 0), static_cast<int>(hi < r.count ? hi : r.count)};
}

/// Part i of `parts` of the quartets [q0, q1), cut where the running count of blocks (the work) crosses i/parts of
/// it: [first, second).
inline std::pair<long, long> share(const std::vector<shell>& s, std::span<const quartet> qs, long q0, long q1, int i,
                                   int parts) {
  std::vector<std::uint64_t> before(static_cast<std::size_t>(q1 - q0) + 1, 0);
  for (long q = q0; q < q1; ++q) before[q - q0 + 1] = before[q - q0] + blocks_of(s, qs[q]);
  auto cut = [&](int k) {
    if (k >= parts) return q1;
    const std::uint64_t target = before.back() * k / parts;
    return q0 + static_cast<long>(std::lower_bound(before.begin(), before.end(), target) - before.begin());
  };
  return {cut(i), cut(i + 1)};
}

// ---- sizes and the generated input --------------------------------------------------------------------------------

/// The sizes --size accepts (small, default, h100). Parboil ships no rpes input; these are synthetic molecules of H, C,
/// N and O atoms:
///   small:   10 atoms,  25 shells of 1-3 primitives:    20 475 quartets,    0.22 M integrals (tests);
///   default: 16 atoms,  40 shells of 3-8 primitives:   123 410 quartets,    99 M integrals,  1.6 M blocks;
///   h100:    44 atoms, 110 shells of 5-8 primitives: 6 438 740 quartets, 11.8 G integrals, 186 M blocks (3 GB of
///            descriptors; parboil.md §7 asks for >= 1e10 integrals).
/// The generated input of a size (deterministic: parboil::random).
inline input generate(std::string_view size) {
  struct kind {
    const char* name;
    float amax;                           // the largest exponent of the element
    std::vector<int> small, large, huge;  // primitives per shell, per size set
  };
  const std::vector<kind> kinds = {{"H", 20.0f, {2, 1}, {6, 3}, {7, 5}},
                                   {"C", 80.0f, {3, 2, 1}, {8, 6, 4}, {8, 7, 6}},
                                   {"N", 100.0f, {3, 2, 1}, {8, 5, 3}, {8, 6, 5}},
                                   {"O", 120.0f, {3, 2, 1}, {8, 7, 4}, {8, 8, 6}}};
  const int atoms = size == "small" ? 10 : size == "h100" ? 44 : 16;
  parboil::random r(size == "small" ? 1 : size == "h100" ? 3 : 2);
  input in;
  for (const kind& k : kinds) {
    element e{k.name, size == "small" ? k.small : size == "h100" ? k.huge : k.large};
    for (std::size_t j = 0; j < e.shells.size(); ++j) {
      // Shell j: exponents falling geometrically from amax / 10^j; coefficients in [0.2, 1) times the
      // normalisation (2 alpha / pi)^(3/4) of an s Gaussian.
      float alpha = k.amax / std::pow(10.0f, static_cast<float>(j));
      for (int n = 0; n < e.shells[j]; ++n) {
        const float a = alpha * r.uniform(0.9f, 1.1f);
        in.prims.push_back({a, r.uniform(0.2f, 1.0f) * std::pow(2.0f * a / 3.14159265f, 0.75f)});
        alpha *= 0.35f;
      }
    }
    in.basis.push_back(std::move(e));
  }
  // The atoms: C H N H O H repeated, on a jittered cubic lattice 2.2 bohr apart.
  const int side = static_cast<int>(std::ceil(std::cbrt(static_cast<double>(atoms))));
  static constexpr int pattern[] = {1, 0, 2, 0, 3, 0};
  for (int a = 0; a < atoms; ++a) {
    in.types.push_back(pattern[a % 6]);
    const float x = 2.2f * static_cast<float>(a % side) + r.uniform(-0.3f, 0.3f);
    const float y = 2.2f * static_cast<float>(a / side % side) + r.uniform(-0.3f, 0.3f);
    const float z = 2.2f * static_cast<float>(a / (side * side)) + r.uniform(-0.3f, 0.3f);
    in.atoms.push_back({x, y, z, 0.0f});
  }
  in.shells = molecule_shells(in);
  return in;
}

// ---- Parboil's input files ------------------------------------------------------------------------------------------
// molecule: `<tag> N`, then N lines `type x y z`.
// basis:    `<tag> <tag> elements`, `<tag> <tag> shells` (their total), then per element `<tag> type`,
//           `<tag> shells`, per shell `<tag> index <tag> primitives`, per primitive `<tag> <tag> <tag> alpha coeff`.
// (Parboil reads them with fscanf, skipping the tags; the words written here are ours.)

inline void write_input(const input& in, const std::string& molecule, const std::string& basis) {
  parboil::output_file m(molecule, false);
  m.print("ATOMS %d\n", static_cast<int>(in.atoms.size()));
  for (std::size_t a = 0; a < in.atoms.size(); ++a) {
    m.print("%s %.9g %.9g %.9g\n", in.basis[in.types[a]].name.c_str(), static_cast<double>(in.atoms[a].x),
            static_cast<double>(in.atoms[a].y), static_cast<double>(in.atoms[a].z));
  }
  m.close();
  parboil::output_file b(basis, false);
  int total = 0;
  for (const element& e : in.basis) total += static_cast<int>(e.shells.size());
  b.print("BASIS ELEMENTS %d\nBASIS SHELLS %d\n", static_cast<int>(in.basis.size()), total);
  std::size_t p = 0;
  for (const element& e : in.basis) {
    b.print("ELEMENT %s\nSHELLS %d\n", e.name.c_str(), static_cast<int>(e.shells.size()));
    for (std::size_t j = 0; j < e.shells.size(); ++j) {
      b.print("SHELL %d PRIMITIVES %d\n", static_cast<int>(j + 1), e.shells[j]);
      for (int n = 0; n < e.shells[j]; ++n, ++p) {
        b.print("PRIMITIVE %d S %.9g %.9g\n", n + 1, static_cast<double>(in.prims[p].alpha),
                static_cast<double>(in.prims[p].coeff));
      }
    }
  }
  b.close();
}

/// Reads Parboil's molecule and basis files; every limit of the kernels' encoding is checked with an error naming the
/// file and the line.
inline input read_input(const std::string& molecule, const std::string& basis) {
  input in;
  parboil::text_file b(basis);
  b.token();
  b.token();
  const int elements = b.number<int>("the number of elements");
  if (elements < 1) b.fail(b.line(), "expected at least 1 element, found " + std::to_string(elements));
  b.token();
  b.token();
  const int total_line = b.line();
  const int total = b.number<int>("the number of shells");
  int seen = 0;
  for (int e = 0; e < elements; ++e) {
    element el;
    b.token();
    el.name = std::string(b.token());
    if (el.name.empty())
      b.fail(b.line(), "expected the name of element " + std::to_string(e + 1) + ", found the end of the file");
    b.token();
    const int shells = b.number<int>("the number of shells of element " + el.name);
    if (shells < 1)
      b.fail(b.line(), "element " + el.name + ": expected at least 1 shell, found " + std::to_string(shells));
    for (int j = 0; j < shells; ++j) {
      b.token();
      b.number<int>("the shell number");
      b.token();
      const int line = b.line();
      const int n = b.number<int>("the number of primitives of shell " + std::to_string(j + 1) + " of " + el.name);
      if (n < 1 || n > 15)
        b.fail(line, "a shell has 1 to 15 primitives (4 bits in Parboil's descriptor), found " + std::to_string(n));
      el.shells.push_back(n);
      for (int k = 0; k < n; ++k) {
        b.token();
        b.token();
        b.token();
        const int pl = b.line();
        const float alpha = b.number<float>("a primitive's exponent");
        const float coeff = b.number<float>("a primitive's coefficient");
        if (!(alpha > 0)) b.fail(pl, "a primitive's exponent must be positive, found " + std::to_string(alpha));
        in.prims.push_back({alpha, coeff});
        if (in.prims.size() > static_cast<std::size_t>(max_basis_prims)) {
          b.fail(pl, "more than " + std::to_string(max_basis_prims) +
                         " primitives in the basis set (8-bit offsets in Parboil's descriptor)");
        }
      }
    }
    seen += shells;
    in.basis.push_back(std::move(el));
  }
  if (seen != total)
    b.fail(total_line,
           "the header says " + std::to_string(total) + " shells, the elements have " + std::to_string(seen));
  if (!b.at_end()) b.fail(b.line(), "expected the end of the file after " + std::to_string(elements) + " elements");

  parboil::text_file m(molecule);
  m.token();
  const int atoms = m.number<int>("the number of atoms");
  if (atoms < 1 || atoms > max_atoms) {
    m.fail(m.line(), "expected 1 to " + std::to_string(max_atoms) +
                         " atoms (8-bit atom ids in Parboil's descriptor), found " + std::to_string(atoms));
  }
  for (int a = 0; a < atoms; ++a) {
    const int line = (m.at_end(), m.line());
    const std::string type(m.token());
    if (type.empty())
      m.fail(line,
             "expected atom " + std::to_string(a + 1) + " of " + std::to_string(atoms) + ", found the end of the file");
    const auto e = std::find_if(in.basis.begin(), in.basis.end(), [&](const element& x) { return x.name == type; });
    if (e == in.basis.end()) m.fail(line, "element '" + type + "' is not in the basis set '" + basis + "'");
    for (int n : e->shells) {
      if (n > max_shell_prims) {
        m.fail(line, "element " + type + " has a shell of " + std::to_string(n) + " primitives; at most " +
                         std::to_string(max_shell_prims) +
                         " (a quartet of it has n^4 combinations, at most 64 blocks of 64)");
      }
    }
    in.types.push_back(static_cast<int>(e - in.basis.begin()));
    const float x = m.number<float>("the x coordinate"), y = m.number<float>("the y coordinate");
    in.atoms.push_back({x, y, m.number<float>("the z coordinate"), 0.0f});
  }
  if (!m.at_end()) m.fail(m.line(), "expected the end of the file after " + std::to_string(atoms) + " atoms");
  in.shells = molecule_shells(in);
  if (const std::string e = size_error(in.shells); !e.empty()) m.fail(1, e + " (with the basis set '" + basis + "')");
  return in;
}

// ---- output, reference and check ------------------------------------------------------------------------------------

/// Parboil's output: the first 20 000 quartet sums as `i\t%e` lines.
inline void write_output(const std::string& path, std::span<const float> sums) {
  parboil::output_file f(path, false);
  for (std::size_t i = 0; i < std::min(sums.size(), out_lines); ++i)
    f.print("%d\t%e\n", static_cast<int>(i), static_cast<double>(sums[i]));
  f.close();
}

/// A Parboil output file (the first min(20 000, n) sums).
inline std::vector<double> read_output(const std::string& path, std::size_t n) {
  parboil::text_file f(path, true);
  std::vector<double> v;
  for (std::size_t i = 0; i < std::min(n, out_lines); ++i) {
    const int line = (f.at_end(), f.line());
    const long index = f.number<long>("the index of line " + std::to_string(i + 1));
    if (index != static_cast<long>(i))
      f.fail(line, "expected index " + std::to_string(i) + ", found " + std::to_string(index));
    v.push_back(f.number<double>("the value of quartet " + std::to_string(i)));
  }
  if (!f.at_end()) f.fail(f.line(), "expected the end of the file after " + std::to_string(v.size()) + " lines");
  return v;
}

/// The serial reference in double precision, for the quartets compare-output checks (the first 20 000).
inline std::vector<double> reference(const input& in) {
  const auto qs = quartets(in.shells.size());
  std::vector<double> ref(std::min(qs.size(), out_lines));
  const auto& s = in.shells;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const shell &a = s[qs[i].s1], &b = s[qs[i].s2], &c = s[qs[i].s3], &d = s[qs[i].s4];
    const atom4 &A = in.atoms[a.atom], &B = in.atoms[b.atom], &C = in.atoms[c.atom], &D = in.atoms[d.atom];
    double sum = 0;
    for (int i1 = a.first; i1 < a.first + a.count; ++i1)
      for (int i2 = b.first; i2 < b.first + b.count; ++i2)
        for (int i3 = c.first; i3 < c.first + c.count; ++i3)
          for (int i4 = d.first; i4 < d.first + d.count; ++i4)
            sum += primitive_eri<double>(A, B, C, D, in.prims[i1], in.prims[i2], in.prims[i3], in.prims[i4]);
    ref[i] = sum;
  }
  return ref;
}

/// Parboil's compare-output rule: the first 20 000 lines, |x - ref| < 1e-9 + 2% |ref| (or x equal to ref: infinities).
inline parboil::check_result check(std::span<const float> sums, const std::vector<double>& ref) {
  parboil::check_result c;
  if (sums.size() < ref.size()) c.fail("fewer sums than the reference");
  for (std::size_t i = 0; i < std::min(sums.size(), ref.size()); ++i) {
    const double x = sums[i];
    c.expect(x == ref[i] || std::fabs(x - ref[i]) < 1e-9 + 0.02 * std::fabs(ref[i]), [&] {
      char m[120];
      std::snprintf(m, sizeof m, "quartet %zu: %.7e, expected %.7e", i, x, ref[i]);
      return std::string(m);
    });
  }
  return c;
}

/// The check of a run: against --check FILE, or the serial reference; prints what differs.
inline bool verify(const parboil::options& o, const input& in, std::span<const float> sums, const char* prog) {
  if (!o.check) return true;
  const std::size_t n = sums.size();
  const auto c = o.check_file.empty() ? check(sums, reference(in)) : check(sums, read_output(o.check_file, n));
  c.print(prog, o.check_file.empty() ? "the serial reference" : o.check_file.c_str());
  return c.ok();
}

/// The usage text of program `prog`.
inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i MOLECULE,BASIS] [-o OUT] [--size small|default|h100] [--check FILE] [--no-check] [--cpu] [-q]\n" +
         parboil::common_usage;
}

/// The input of a run into `in`: -i molecule,basis, or the generated one of --size. With --write-input it writes the
/// files and returns false (the program ends).
inline bool prepare(const parboil::options& o, input& in) {
  parboil::expect_inputs(o, 2, "molecule,basis");
  if (!o.params.empty()) throw parboil::usage_error("rpes takes no parameters after --");
  in = o.inputs.empty() ? generate(o.size.empty() ? "default" : o.size) : read_input(o.inputs[0], o.inputs[1]);
  if (o.write_inputs.empty()) return true;
  write_input(in, o.write_inputs[0], o.write_inputs[1]);
  return false;
}

/// The blocks of the launch of a chunked grid that starts at block `first` of `total`.
inline int chunk(long first, long total) { return static_cast<int>(std::min<long>(grid_max, total - first)); }

/// The end of a run: -o, the check, the report line (`places`: where it ran); returns the exit code.
inline int conclude(const parboil::options& o, const input& in, std::span<const float> sums, const char* prog,
                    const std::string& places, double seconds) {
  if (!o.output.empty()) write_output(o.output, sums);
  const bool ok = verify(o, in, sums, prog);
  const auto qs = quartets(in.shells.size());
  long long integrals = 0;
  for (const quartet q : qs) integrals += combinations(in.shells, q);
  const std::string fields = "atoms=" + std::to_string(in.atoms.size()) +
                             " shells=" + std::to_string(in.shells.size()) + " quartets=" + std::to_string(qs.size()) +
                             " integrals=" + std::to_string(integrals);
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a of all the sums' bits: equal bits, equal results
  for (const float x : sums) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    for (int i = 0; i < 4; ++i) h = (h ^ (b >> (8 * i) & 255)) * 0x100000001b3ULL;
  }
  char bits[40];
  std::snprintf(bits, sizeof bits, " bits=%016llx ", static_cast<unsigned long long>(h));
  return parboil::report("rpes", fields + bits + places, seconds, o, ok);
}

}  // namespace rpes
