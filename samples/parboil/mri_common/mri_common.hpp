#pragma once
// What mri_q and mri_fhd share (Parboil's two MRI benchmarks: the same k-space trajectory and voxel grid, the same
// file formats, the same check): the input (Parboil's binary file, or generated in the datasets' shape), the output
// file, Parboil's compare rule, the sin/cos of the CPU versions and the program around the computation. No apgas and
// no CUDA here: nvcc compiles this header as host code too.
//
// Input file (little-endian): i32 numK, i32 numX, f32 kx[numK], ky[numK], kz[numK], x[numX], y[numX], z[numX],
// phiR[numK], phiI[numK], and for mri-fhd dR[numK], dI[numK]. Output file: u32 numX, f32 real[numX], imag[numX].
#include "parboil.hpp"

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define MRI_HD __host__ __device__
#else
#define MRI_HD
#endif

namespace mri {

inline constexpr float pi2 = 6.2831853071795864769252867665590058f;  // Parboil's PIx2

/// sin and cos of a (radians). On a GPU sinf and cosf, which the benchmarks' --use_fast_math (Parboil's flags) makes
/// the hardware's approximations (MUFU). On the CPU the counterpart: a branch-free approximation that vectorises
/// (glibc's sinf and cosf are calls the compiler cannot vectorise): a = n pi/2 + r with |r| <= pi/4 (Cody-Waite in
/// three parts, exact for |a| < 2^16), Cephes' polynomials for sin r and cos r (about 1e-7 absolute), and the
/// quadrant n mod 4 choosing and negating them. read() refuses inputs whose arguments can reach 2^16
/// (max_argument).
MRI_HD inline void sin_cos(float a, float& s, float& c) {
#if defined(__CUDA_ARCH__)
  s = sinf(a);
  c = cosf(a);
#else
  const float big = a * 0.636619772f + 12582912.0f;  // 1.5 * 2^23 + round(a / (pi/2)): n in its low bits
  const float n = big - 12582912.0f;
  const float r = ((a - n * 1.5703125f) - n * 4.837512969970703125e-4f) - n * 7.54978995489188216e-8f;
  const float r2 = r * r;
  const float sr = r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
  const float cr = 1.0f - 0.5f * r2 +
                   r2 * r2 * (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
  const auto q = std::bit_cast<std::uint32_t>(big);  // n mod 4 in bits 0 and 1
  s = std::bit_cast<float>(std::bit_cast<std::uint32_t>(q & 1 ? cr : sr) ^ ((q & 2) << 30));
  c = std::bit_cast<float>(std::bit_cast<std::uint32_t>(q & 1 ? sr : cr) ^ (((q + 1) & 2) << 30));
#endif
}

/// Blocks of `size` threads for n threads (the last one partly idle).
inline int blocks(long long n, int size) { return static_cast<int>((n + size - 1) / size); }

/// v in tiles of at most n elements (one launch each).
template <class T>
std::vector<std::span<const T>> tiles(std::span<const T> v, std::size_t n) {
  std::vector<std::span<const T>> out;
  for (std::size_t k = 0; k < v.size(); k += n) out.push_back(v.subspan(k, std::min(n, v.size() - k)));
  return out;
}

/// A generated input's shape: edge^3 voxels, numK k-space samples.
struct size_set {
  const char* name;
  int edge, numK;
};
/// small and default are Parboil's datasets (32_32_32: 3072 samples; 64_64_64, "large": 2048); h100 is parboil.md
/// §7's (1.7e10 voxel-sample pairs, ~8 ms on an H100).
inline constexpr size_set sizes[] = {{"small", 32, 3072}, {"default", 64, 2048}, {"h100", 128, 8192}};

/// The input arrays (Parboil's names). The voxels' coordinates are one array, x, then y, then z (as in the file);
/// dR and dI are empty for mri-q.
struct input {
  std::vector<float> kx, ky, kz, xyz, phiR, phiI, dR, dI;
  int numK() const { return static_cast<int>(kx.size()); }
  int numX() const { return static_cast<int>(xyz.size() / 3); }
  const float* x() const { return xyz.data(); }
  const float* y() const { return xyz.data() + numX(); }
  const float* z() const { return xyz.data() + 2 * static_cast<std::size_t>(numX()); }
};

/// An input of Parboil's datasets' shape: voxels on the regular grid [-0.5, 0.5)^3 (x fastest), k-space samples
/// uniform in the datasets' box (|kx| <= 10.9, |ky| <= 16, |kz| <= 0.59), phi uniform in their range [0.31, 0.48];
/// for mri-fhd the data dR, dI uniform in [-1, 1).
inline input generate(const size_set& s, bool with_d) {
  parboil::random rng(0x5eed0000u + static_cast<unsigned>(s.numK));
  input in;
  const std::size_t k = static_cast<std::size_t>(s.numK), n = static_cast<std::size_t>(s.edge) * s.edge * s.edge;
  auto fill = [&](std::vector<float>& v, std::size_t count, float lo, float hi) {
    v.resize(count);
    for (float& e : v) e = rng.uniform(lo, hi);
  };
  fill(in.kx, k, -10.9f, 10.9f);
  fill(in.ky, k, -16.0f, 16.0f);
  fill(in.kz, k, -0.59f, 0.59f);
  in.xyz.resize(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto e = static_cast<std::size_t>(s.edge);
    in.xyz[i] = static_cast<float>(i % e) / static_cast<float>(s.edge) - 0.5f;
    in.xyz[n + i] = static_cast<float>(i / e % e) / static_cast<float>(s.edge) - 0.5f;
    in.xyz[2 * n + i] = static_cast<float>(i / e / e) / static_cast<float>(s.edge) - 0.5f;
  }
  fill(in.phiR, k, 0.31f, 0.48f);
  fill(in.phiI, k, 0.31f, 0.48f);
  if (with_d) {
    fill(in.dR, k, -1.0f, 1.0f);
    fill(in.dI, k, -1.0f, 1.0f);
  }
  return in;
}

/// The largest argument of sin and cos an input can give, 2 pi |kx x + ky y + kz z|, bounded from the largest
/// magnitudes of each coordinate (a little above any float evaluation of it: it is computed in double).
inline double max_argument(const input& in) {
  auto most = [](std::span<const float> v) {
    double m = 0;
    for (const float e : v) m = std::fmax(m, std::fabs(static_cast<double>(e)));
    return m;
  };
  const std::size_t n = static_cast<std::size_t>(in.numX());
  const std::span<const float> xyz(in.xyz);
  const double sum =
      most(in.kx) * most(xyz.first(n)) + most(in.ky) * most(xyz.subspan(n, n)) + most(in.kz) * most(xyz.subspan(2 * n));
  return 6.2831853071795865 * sum * (1 + 1e-6);
}

/// Reads an input file; errors name the file, the offset and what was expected. Every value must be finite, and the
/// arguments of sin and cos below 2^16 (max_argument), where the CPU versions' sin_cos is accurate.
inline input read(const std::string& path, bool with_d) {
  parboil::binary_file f(path);
  const std::int32_t numK = f.read<std::int32_t>("numK (the number of k-space samples)");
  const std::int32_t numX = f.read<std::int32_t>("numX (the number of voxels)");
  if (numK < 1) f.fail(0, "numK = " + std::to_string(numK) + ": expected at least 1 k-space sample");
  if (numX < 1) f.fail(4, "numX = " + std::to_string(numX) + ": expected at least 1 voxel");
  const std::size_t k_arrays = with_d ? 7 : 5;
  const std::size_t need = 4 * (k_arrays * static_cast<std::size_t>(numK) + 3 * static_cast<std::size_t>(numX));
  if (need > f.left()) {
    f.fail(8, "numK = " + std::to_string(numK) + " and numX = " + std::to_string(numX) + " need " +
                  std::to_string(need) + " bytes of arrays, but only " + std::to_string(f.left()) + " bytes follow");
  }
  input in;
  auto arr = [&](std::span<float> v, const char* name) {
    const std::size_t at = f.offset();
    f.read(v, name);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        f.fail(at + 4 * i, std::string(name) + "[" + std::to_string(i) + "] is not a finite number");
      }
    }
  };
  const auto k = static_cast<std::size_t>(numK), n = static_cast<std::size_t>(numX);
  for (auto* v : {&in.kx, &in.ky, &in.kz, &in.phiR, &in.phiI}) v->resize(k);
  in.xyz.resize(3 * n);
  arr(in.kx, "kx");
  arr(in.ky, "ky");
  arr(in.kz, "kz");
  arr(std::span<float>(in.xyz).first(n), "x");
  arr(std::span<float>(in.xyz).subspan(n, n), "y");
  arr(std::span<float>(in.xyz).subspan(2 * n), "z");
  arr(in.phiR, "phiR");
  arr(in.phiI, "phiI");
  if (with_d) {
    in.dR.resize(k);
    in.dI.resize(k);
    arr(in.dR, "dR");
    arr(in.dI, "dI");
  }
  f.expect_end();
  if (const double a = max_argument(in); !(a < 65536)) {
    char most[32];
    std::snprintf(most, sizeof most, "%.6g", a);
    f.fail(8, std::string("kx, ky, kz and x, y, z give sin/cos arguments 2 pi |kx x + ky y + kz z| up to ") + most +
                  ": expected them below 2^16 = 65536, where the CPU versions' sin/cos reduce them exactly");
  }
  return in;
}

/// Writes an input file (--write-input).
inline void write(const std::string& path, const input& in) {
  parboil::output_file f(path, true);
  f.write(static_cast<std::int32_t>(in.numK()));
  f.write(static_cast<std::int32_t>(in.numX()));
  for (const auto* v : {&in.kx, &in.ky, &in.kz, &in.xyz, &in.phiR, &in.phiI, &in.dR, &in.dI}) {
    f.write(std::span<const float>(*v));
  }
  f.close();
}

/// Parboil's optional parameter (after --): use only the first numK samples.
inline void limit_samples(input& in, int numK) {
  for (auto* v : {&in.kx, &in.ky, &in.kz, &in.phiR, &in.phiI, &in.dR, &in.dI}) {
    if (v->size() > static_cast<std::size_t>(numK)) v->resize(static_cast<std::size_t>(numK));
  }
}

/// The result, as in the output file: the real parts at every voxel, then the imaginary parts (mri-q: Qr, Qi;
/// mri-fhd: rFhD, iFhD).
using output = std::vector<float>;

inline void write_output(const std::string& path, const output& out) {
  parboil::output_file f(path, true);
  f.write(static_cast<std::uint32_t>(out.size() / 2));
  f.write(std::span<const float>(out));
  f.close();
}

inline output read_output(const std::string& path) {
  parboil::binary_file f(path);
  const auto n = f.read<std::uint32_t>("numX (the number of voxels)");
  if (static_cast<std::size_t>(n) * 8 != f.left()) {
    f.fail(0, "numX = " + std::to_string(n) + " needs " + std::to_string(static_cast<std::size_t>(n) * 8) +
                  " bytes of values, but " + std::to_string(f.left()) + " bytes follow");
  }
  return f.read_vector<float>(2 * static_cast<std::size_t>(n), "the real, then the imaginary parts");
}

/// Parboil's compare rule, on each of the two parts: a value passes when |d| <= 1e-4 * max |ref| or |d| < 0.2 % of
/// |ref|, or equals it (infinities too). `ref` holds the voxels 0, stride, 2 stride, ... of `out` (real parts,
/// then imaginary parts).
inline void compare(parboil::check_result& c, const output& out, const output& ref, std::size_t stride) {
  const std::size_t n = out.size() / 2, m = ref.size() / 2;
  for (std::size_t part = 0; part < 2; ++part) {
    double max = 0;
    for (std::size_t j = 0; j < m; ++j) max = std::fmax(max, std::fabs(static_cast<double>(ref[part * m + j])));
    for (std::size_t j = 0; j < m; ++j) {
      const float mine = out[part * n + j * stride], theirs = ref[part * m + j];
      const double d = std::fabs(static_cast<double>(mine) - theirs);
      c.expect(mine == theirs || d <= 1e-4 * max || d < 0.002 * std::fabs(static_cast<double>(theirs)), [&] {
        return std::string(part == 0 ? "real" : "imaginary") + " part at voxel " + std::to_string(j * stride) + ": " +
               std::to_string(mine) + ", reference " + std::to_string(theirs);
      });
    }
  }
}

/// The serial reference visits every voxel up to 2^27 voxel-sample pairs (the datasets' small set), else every
/// stride-th voxel (default: every 5th, 0.9 s of libm's sinf and cosf); the check then covers those voxels.
inline std::size_t reference_stride(const input& in) {
  const double pairs = static_cast<double>(in.numX()) * in.numK();
  return static_cast<std::size_t>(std::ceil(pairs / 134217728.0));
}

/// The whole program around `compute(in, out)`, which fills `out` (2 numX zeros on entry): the options, the
/// input (read, or generated and perhaps written), the timer around compute, -o, the check against
/// `reference(in, stride)` (every stride-th voxel) or --check FILE, and the report line. `fields` are the program's
/// own report fields (places, threads).
template <class Compute, class Reference>
int run(const parboil::options& o, const char* prog, const char* name, bool with_d, const std::string& fields,
        Compute&& compute, Reference&& reference) {
  parboil::expect_inputs(o, 1, with_d ? "the mri-fhd input" : "the mri-q input");
  if (o.params.size() > 1) throw parboil::usage_error("expected at most one parameter after --: numK");
  const size_set* s = nullptr;
  for (const size_set& e : sizes) {
    if (o.size == e.name || (o.size.empty() && std::string(e.name) == "default")) s = &e;
  }
  input in = o.inputs.empty() ? generate(*s, with_d) : read(o.inputs[0], with_d);
  if (!o.params.empty()) limit_samples(in, static_cast<int>(parboil::to_integer(o.params[0], 1, INT_MAX, "numK")));
  if (!o.write_inputs.empty()) {
    write(o.write_inputs[0], in);
    return 0;
  }
  output out(2 * in.xyz.size() / 3, 0.0f);
  parboil::timer t;
  t.start();
  compute(static_cast<const input&>(in), out);
  t.stop();
  if (!o.output.empty()) write_output(o.output, out);
  parboil::check_result c;
  if (o.check && o.check_file.empty()) {
    const std::size_t stride = reference_stride(in);
    compare(c, out, reference(static_cast<const input&>(in), stride), stride);
    c.print(prog, stride == 1 ? "the serial reference" : ("the serial reference (every " + std::to_string(stride) +
                                                           "th voxel)").c_str());
  } else if (o.check) {
    const output ref = read_output(o.check_file);
    if (ref.size() == out.size()) {
      compare(c, out, ref, 1);
    } else {
      c.fail("'" + o.check_file + "' holds " + std::to_string(ref.size() / 2) + " voxels, this run " +
             std::to_string(out.size() / 2));
    }
    c.print(prog, ("'" + o.check_file + "'").c_str());
  }
  const std::string size = "numX=" + std::to_string(in.numX()) + " numK=" + std::to_string(in.numK());
  return parboil::report(name, size + (fields.empty() ? "" : " " + fields), t.seconds(), o, c.ok());
}

/// The usage text of the six programs.
inline std::string usage(const char* prog, const char* what) {
  return std::string("usage: ") + prog + " [-i " + what + "] [-o OUT] [--size small|default|h100] [--check FILE] " +
         "[--no-check] [--cpu] [-q] [-- numK]\n" + parboil::common_usage +
         "  -- numK          use only the first numK k-space samples (as Parboil; --write-input writes only those)\n";
}

}  // namespace mri
