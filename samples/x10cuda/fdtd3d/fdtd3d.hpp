#pragma once
// 3-D finite differences of the X10 paper (its CUDA3DFD sample, the CUDA SDK's 3DFD kernel): a 25-point star stencil
// of radius 4 on an nx x ny x nz volume, out = c0 v + sum over r = 1..4 of c_r (the 6 neighbours at distance r),
// repeated STEPS times (ping-pong; the 4-plane edges of the volume keep their values). What
// apgas_x10cuda_fdtd3d, x10cuda_fdtd3d_native and x10cuda_fdtd3d_omp share: sizes, the input (generated or read), the
// output file, the serial reference and the check. No apgas and no CUDA runtime here (nvcc compiles it as host code).
//
//   <program> [-i VOLUME.raw] [-o OUT.bin] [--size default|small|h100] [...] [-- NX NY NZ [STEPS]]
//
// Sizes: default 480 x 480 x 400, 1 step (the X10 sample's, nreps 1); small 64 x 48 x 40, 3 steps (tests: the halo
// exchange between places happens between steps); h100 1024 x 1024 x 512, 1 step (parboil.md §7). NX and NY must be
// multiples of 16 (the kernel's 16 x 16 blocks), NZ at least 9, NX NY NZ below 2^31 (8 GiB a volume).
// Input: data(x, y, z) = z and all 5 coefficients 1.0, as the X10 sample. Input file (-i, --write-input): the volume
// as raw little-endian f32, x fastest (Parboil's stencil format), its size given by NX NY NZ (or the size set's).
// Output file (-o, --check): i32 nx, ny, nz, then the volume (f32, x fastest).
// Check (the X10 sample's rule): |out - ref| <= 1e-4 on the interior (4 planes from every face), the edges equal to
// the input. The X10 sample's reference summed in another order, which its integer data (z) made exact; ours sums in
// the kernels' order (point() below) and every version is built without fused multiply-adds (x10cuda_programs(EXACT)),
// so any input gives the same bits everywhere and the rule holds for -i files too.
// time_s: the two work volumes filled from the input (on a GPU: the copies to it; the second one only where no step
// writes: the apgas version the 4-plane z faces (its steps write the x and y rims), the OpenMP one the z faces and
// the x and y rims), every step (with the halo exchange between places), and the result in host memory.
#include "x10cuda.hpp"

#include <optional>

namespace fdtd3d {

constexpr int radius = 4;
constexpr float coefficients[radius + 1] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};  // c0 .. c4, as the X10 sample

inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i VOLUME.raw] [-o OUT.bin] [--size default|small|h100] [-- NX NY NZ [STEPS]]\n"
         "  25-point stencil of radius 4 (the X10 paper's CUDA3DFD), STEPS sweeps (ping-pong)\n" +
         parboil::common_usage;
}

/// A run: the volume's size, the number of steps, the input volume.
struct problem {
  int nx = 0, ny = 0, nz = 0, steps = 1;
  std::vector<float> volume;
  long long points() const { return static_cast<long long>(nx) * ny * nz; }
  long long plane() const { return static_cast<long long>(nx) * ny; }
};

/// One radius of the stencil in the kernels' order (the X10 sample's): c * (front + behind + up + down + left + right).
X10CUDA_HD inline float term(float c, float front, float behind, float up, float down, float left, float right) {
  return c * (front + behind + up + down + left + right);
}

/// The stencil at p (an interior point of a volume with rows of nx and planes of `plane` points), in the kernels'
/// order: c0 * centre, then the terms of radius 1 to 4.
inline float point(const float* c, const float* p, long long nx, long long plane) {
  float v = c[0] * p[0];
  for (int r = 1; r <= radius; ++r) {
    v += term(c[r], p[r * plane], p[-r * plane], p[-r * nx], p[r * nx], p[-r], p[r]);
  }
  return v;
}

/// One step of the serial reference: the interior of `out` from `in` (the edges are left as they are).
inline void reference_step(const problem& p, const float* in, float* out) {
  for (int z = radius; z < p.nz - radius; ++z) {
    for (int y = radius; y < p.ny - radius; ++y) {
      const long long row = z * p.plane() + static_cast<long long>(y) * p.nx;
      for (int x = radius; x < p.nx - radius; ++x) out[row + x] = point(coefficients, in + row + x, p.nx, p.plane());
    }
  }
}

/// The problem of the command line, its volume generated or read (-i); nullopt once --write-input has written it.
inline std::optional<problem> prepare(const parboil::options& o) {
  parboil::expect_inputs(o, 1, "the volume, raw f32");
  x10cuda::expect_params(o, 4, "NX NY NZ [STEPS]");
  if (!o.params.empty() && o.params.size() < 3) throw parboil::usage_error("expected NX NY NZ [STEPS] after --");
  problem p;
  if (o.size == "small") {
    p = {64, 48, 40, 3, {}};
  } else if (o.size == "h100") {
    p = {1024, 1024, 512, 1, {}};
  } else {
    p = {480, 480, 400, 1, {}};
  }
  p.nx = static_cast<int>(x10cuda::param(o, 0, p.nx, 16, 1 << 14, "NX"));
  p.ny = static_cast<int>(x10cuda::param(o, 1, p.ny, 16, 1 << 14, "NY"));
  p.nz = static_cast<int>(x10cuda::param(o, 2, p.nz, 2 * radius + 1, 1 << 14, "NZ"));
  p.steps = static_cast<int>(x10cuda::param(o, 3, p.steps, 1, 1 << 20, "STEPS"));
  if (p.nx % 16 != 0 || p.ny % 16 != 0) {
    throw parboil::usage_error("NX and NY must be multiples of 16 (the kernel's 16 x 16 blocks), got " +
                               std::to_string(p.nx) + " x " + std::to_string(p.ny));
  }
  if (p.points() >= (1LL << 31)) {
    throw parboil::usage_error("NX * NY * NZ = " + std::to_string(p.points()) + ": must be below 2^31 = 2147483648");
  }
  const std::string shape = std::to_string(p.nx) + "x" + std::to_string(p.ny) + "x" + std::to_string(p.nz);
  if (!o.inputs.empty()) {
    parboil::binary_file f(o.inputs[0]);
    p.volume = f.read_finite<float>(static_cast<std::size_t>(p.points()), "the " + shape + " volume (f32, x fastest)");
    f.expect_end();
    return p;
  }
  p.volume.resize(static_cast<std::size_t>(p.points()));
  for (long long i = 0; i < p.points(); ++i) p.volume[static_cast<std::size_t>(i)] = static_cast<float>(i / p.plane());
  if (o.write_inputs.empty()) return p;
  parboil::output_file f(o.write_inputs[0], true);
  f.write(std::span<const float>(p.volume));
  f.close();
  return std::nullopt;
}

/// -o, the check and the report line: the program's exit code. `out` is the volume after the last step.
inline int finish(const parboil::options& o, const problem& p, std::span<const float> out, double seconds,
                  const std::string& where) {
  const std::string shape = std::to_string(p.nx) + "x" + std::to_string(p.ny) + "x" + std::to_string(p.nz);
  if (!o.output.empty()) {
    parboil::output_file f(o.output, true);
    for (const int d : {p.nx, p.ny, p.nz}) f.write(static_cast<std::int32_t>(d));
    f.write(out);
    f.close();
  }
  parboil::check_result c;
  if (o.check) {
    std::vector<float> ref;
    const char* against = "the serial reference";
    if (!o.check_file.empty()) {  // a reference output file
      parboil::binary_file f(o.check_file);
      for (const int d : {p.nx, p.ny, p.nz}) {
        const std::size_t at = f.offset();
        if (f.read<std::int32_t>("the volume's size (3 x i32)") != d) f.fail(at, "the volume is not " + shape);
      }
      ref = f.read_vector<float>(static_cast<std::size_t>(p.points()), "the " + shape + " volume (f32)");
      f.expect_end();
      against = "the reference file";
    } else {
      ref = p.volume;
      std::vector<float> next = p.volume;
      for (int s = 0; s < p.steps; ++s) {
        reference_step(p, ref.data(), next.data());
        ref.swap(next);
      }
    }
    for (int z = 0; z < p.nz; ++z) {
      for (int y = 0; y < p.ny; ++y) {
        for (int x = 0; x < p.nx; ++x) {
          const std::size_t i = static_cast<std::size_t>(z * p.plane() + static_cast<long long>(y) * p.nx + x);
          const bool edge = x < radius || x >= p.nx - radius || y < radius || y >= p.ny - radius || z < radius ||
                            z >= p.nz - radius;
          const bool good = edge ? out[i] == p.volume[i] : out[i] == ref[i] || std::fabs(out[i] - ref[i]) <= 1e-4f;
          x10cuda::expect(c, good, [&] {
            return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + "): " +
                   std::to_string(out[i]) + " instead of " + std::to_string(edge ? p.volume[i] : ref[i]) +
                   (edge ? " (an edge: the input's value)" : "");
          });
        }
      }
    }
    c.print("fdtd3d", against);
    if (!o.quiet && c.ok()) std::printf("fdtd3d: %zu points as %s\n", c.compared(), against);
  }
  return parboil::report("fdtd3d", "volume=" + shape + " steps=" + std::to_string(p.steps) + " " + where, seconds, o,
                         c.ok());
}

}  // namespace fdtd3d
