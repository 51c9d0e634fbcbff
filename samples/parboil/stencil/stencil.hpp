#pragma once
// Parboil's stencil, what its three programs share (no apgas, no CUDA: nvcc compiles this as host code too): a
// 7-point Jacobi stencil on an nx x ny x nz volume of floats (x fastest), `iterations` sweeps ping-ponging between two
// volumes; the boundary (i = 0 or nx-1, j = 0 or ny-1, k = 0 or nz-1) is kept. Inside,
//   A'(i,j,k) = c1 * (A(i-1,j,k) + A(i+1,j,k) + A(i,j-1,k) + A(i,j+1,k) + A(i,j,k-1) + A(i,j,k+1)) - c0 * A(i,j,k)
// with c0 = 1/6, c1 = 1/36 (the six summed in the order of Parboil's kernel: see update()).
//
// Command line: `-i raw.bin -- nx ny nz iterations` (raw little-endian f32, x fastest, exactly nx*ny*nz finite ones);
// without -i a volume of uniform [0, 1) floats is generated, its shape from --size (small 128x128x32, default
// 512x512x64, h100 512x512x256; 100 iterations) or from the parameters. Output (-o): Parboil's, u32 count then the
// floats. Check: Parboil's rule, |d| <= 1e-3 or |d| < 0.2% of the reference, over the whole volume (Parboil's script
// looks at the first quarter only).
#include "parboil.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stencil {

inline constexpr float c0 = 1.0f / 6.0f;
inline constexpr float c1 = 1.0f / 6.0f / 6.0f;

/// The 7-point update of one point from its centre and six neighbours, the sum in the order of Parboil's kernel (the
/// kernels write the same expression; on a CPU the versions give the same bits).
inline float update(float centre, float left, float right, float down, float up, float bottom, float top) {
  return (top + bottom + up + down + right + left) * c1 - centre * c0;
}

struct problem {
  int nx = 0, ny = 0, nz = 0, iterations = 0;
  std::vector<float> a;  // nx * ny * nz
  std::size_t plane() const { return static_cast<std::size_t>(nx) * ny; }
  std::size_t cells() const { return plane() * nz; }
};


inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i raw.bin] [-o out.bin] [--size small|default|h100] [options] [-- nx ny nz iterations]\n" +
         parboil::common_usage +
         "  parameters: the volume's shape and the number of sweeps (needed with -i; without -i they replace --size)\n";
}

/// The shape and the sweeps: the parameters, or the --size set.
inline problem shape(const parboil::options& o) {
  problem p;
  if (!o.params.empty()) {
    if (o.params.size() != 4) throw parboil::usage_error("expected 4 parameters after --: nx ny nz iterations");
    if (!o.size.empty()) throw parboil::usage_error("--size and the parameters nx ny nz iterations exclude each other");
    p.nx = static_cast<int>(parboil::to_integer(o.params[0], 3, 1 << 20, "nx"));
    p.ny = static_cast<int>(parboil::to_integer(o.params[1], 3, 1 << 20, "ny"));
    p.nz = static_cast<int>(parboil::to_integer(o.params[2], 3, 1 << 20, "nz"));
    p.iterations = static_cast<int>(parboil::to_integer(o.params[3], 1, 1 << 20, "iterations"));
    if (const long long n = static_cast<long long>(p.nx) * p.ny * p.nz; n >= (1LL << 31)) {
      throw parboil::usage_error("nx * ny * nz = " + std::to_string(n) +
                                 ": must be below 2^31 = 2147483648 (int indices)");
    }
  } else if (!o.inputs.empty()) {
    throw parboil::usage_error("-i needs the parameters: -- nx ny nz iterations");
  } else if (o.size == "small") {
    p.nx = 128, p.ny = 128, p.nz = 32, p.iterations = 100;
  } else if (o.size == "h100") {
    p.nx = 512, p.ny = 512, p.nz = 256, p.iterations = 100;
  } else {
    p.nx = 512, p.ny = 512, p.nz = 64, p.iterations = 100;
  }
  return p;
}

/// The input volume: -i raw.bin, or generated.
inline problem load(const parboil::options& o) {
  parboil::expect_inputs(o, 1, "the raw volume");
  problem p = shape(o);
  if (o.inputs.empty()) {
    p.a.resize(p.cells());
    parboil::random r(7);
    for (float& v : p.a) v = r.uniform();
    return p;
  }
  parboil::binary_file f(o.inputs[0]);
  p.a = f.read_finite<float>(p.cells(), "the " + std::to_string(p.nx) + " x " + std::to_string(p.ny) + " x " +
                                            std::to_string(p.nz) + " volume (raw f32)");
  f.expect_end();
  return p;
}

/// The start of every program: the input, or nothing after --write-input has written it.
inline std::optional<problem> start(const parboil::options& o) {
  problem p = load(o);
  if (o.write_inputs.empty()) return p;
  parboil::output_file f(o.write_inputs[0], true);
  f.write(std::span<const float>(p.a));
  f.close();
  return std::nullopt;
}

/// One sweep of the serial reference over the interior, from `in` into `out` (whose boundary is already right).
inline void reference_sweep(const problem& p, const float* in, float* out) {
  const std::size_t nx = p.nx, plane = p.plane();
  for (int k = 1; k < p.nz - 1; ++k) {
    for (int j = 1; j < p.ny - 1; ++j) {
      for (int i = 1; i < p.nx - 1; ++i) {
        const std::size_t c = i + nx * j + plane * k;
        out[c] = update(in[c], in[c - 1], in[c + 1], in[c - nx], in[c + nx], in[c - plane], in[c + plane]);
      }
    }
  }
}

/// The serial reference: the volume after p.iterations sweeps.
inline std::vector<float> reference(const problem& p) {
  std::vector<float> a = p.a, b = p.a;
  for (int it = 0; it < p.iterations; ++it) {
    reference_sweep(p, a.data(), b.data());
    std::swap(a, b);
  }
  return a;
}

inline bool close(float x, float ref) {  // (equal values pass: infinities of an overflow too)
  const double d = std::fabs(static_cast<double>(x) - ref);
  return x == ref || d <= 1e-3 || d < 0.002 * std::fabs(static_cast<double>(ref));
}

inline parboil::check_result compare(const problem& p, std::span<const float> got, std::span<const float> ref,
                                     const char* what) {
  parboil::check_result r;
  if (ref.size() != got.size()) {
    r.fail(std::string(what) + " holds " + std::to_string(ref.size()) + " floats, the result " +
           std::to_string(got.size()));
    return r;
  }
  for (std::size_t c = 0; c < got.size(); ++c) {
    if (close(got[c], ref[c])) {
      r.expect(true, nullptr);
      continue;
    }
    r.expect(false, [&] {
      const std::size_t i = c % p.nx, j = c / p.nx % p.ny, k = c / p.plane();
      return "A(" + std::to_string(i) + ", " + std::to_string(j) + ", " + std::to_string(k) + ") = " +
             std::to_string(got[c]) + ", " + what + " " + std::to_string(ref[c]);
    });
  }
  return r;
}

/// --check FILE: a Parboil output file (u32 count, then the floats).
inline parboil::check_result check_file(const problem& p, std::span<const float> got, const std::string& path) {
  parboil::binary_file f(path);
  const std::uint32_t count = f.read<std::uint32_t>("the count of floats");
  if (count != p.cells()) {
    f.fail(0, "the count " + std::to_string(count) + " is not nx*ny*nz = " + std::to_string(p.cells()));
  }
  const std::vector<float> ref = f.read_vector<float>(count, "the output volume");
  f.expect_end();
  return compare(p, got, ref, "the reference file");
}

/// FNV-1a of the result's bits: printed by every program (not with -q), so that runs on 1, 2 and 3 host places, and
/// the versions, can be compared bit for bit.
inline std::uint64_t fnv1a(std::span<const float> v) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const float x : v) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    for (int i = 0; i < 4; ++i) h = (h ^ ((bits >> (8 * i)) & 0xffu)) * 0x100000001b3ULL;
  }
  return h;
}

/// The end of every program: -o, the check, the report line; returns the exit code.
inline int finish(const char* prog, const parboil::options& o, const problem& p, std::span<const float> got,
                  double seconds, const std::string& places) {
  if (!o.output.empty()) {
    parboil::output_file f(o.output, true);
    f.write(static_cast<std::uint32_t>(p.cells()));
    f.write(got);
    f.close();
  }
  if (!o.quiet) std::printf("%s: result fnv1a=%016llx\n", prog, static_cast<unsigned long long>(fnv1a(got)));
  bool ok = true;
  if (o.check) {
    const parboil::check_result r = o.check_file.empty() ? compare(p, got, reference(p), "the serial reference")
                                                         : check_file(p, got, o.check_file);
    r.print(prog, o.check_file.empty() ? "the serial reference" : o.check_file.c_str());
    ok = r.ok();
  }
  const std::string fields = "nx=" + std::to_string(p.nx) + " ny=" + std::to_string(p.ny) + " nz=" +
                             std::to_string(p.nz) + " iterations=" + std::to_string(p.iterations) + " " + places;
  return parboil::report("stencil", fields, seconds, o, ok);
}

}  // namespace stencil
