#pragma once
// cp (Parboil 1): the Coulombic potential of a set of point charges on one plane of a lattice,
//   E(x, y) = sum over atoms of q / sqrt(dx^2 + dy^2 + dz^2),
// what apgas_parboil_cp, parboil_cp_native and parboil_cp_omp share: the sizes, the atoms as Parboil generates them
// (glibc's srand(54321)/rand(), quirks included), the arithmetic of one atom for one thread's eight points (the
// optimised kernel's, so that every version adds the same floats in the same order), the serial reference, the
// output file and Parboil's check. No apgas and no CUDA here: nvcc compiles this header as host code too.
//
// The optimised kernel (Parboil's cuenergy_pre8_coalesce.cu): blocks of 16 x 8 threads, each thread eight points of
// a row, 16 apart (so a warp's stores are coalesced): a block covers 128 x 8 points. The atoms go to constant memory
// in chunks of 4000 (64,000 bytes), one launch per chunk; each launch sums its chunk into registers from 0 and adds
// the sums to the plane (`+=`), so the plane is the sum over chunks of the sum over the chunk's atoms.
#include "parboil.hpp"

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define CP_HD __host__ __device__
#else
#define CP_HD
#endif

namespace cp {

inline constexpr float spacing = 0.1f;   // lattice spacing (Angstrom)
inline constexpr int max_atoms = 4000;   // atoms per launch: 4000 x 16 bytes of constant memory
inline constexpr int block_x = 16;       // threads of a block in x (BLOCKSIZEX)
inline constexpr int block_y = 8;        // in y (BLOCKSIZEY)
inline constexpr int unroll_x = 8;       // points per thread, block_x apart (UNROLLX)
inline constexpr int tile_x = block_x * unroll_x;  // points of a row per block: the plane's width is a multiple
inline constexpr int output_rows = 17;   // rows Parboil writes (and checks)
inline constexpr float clamp = 20.0f;    // the checksum adds each value clamped to [-20, 20]

/// A size set: the plane (nx x ny points) and the atoms. "default" is Parboil's; "h100" a plane 16 times larger
/// (parboil.md §7: ~40 ms on an H100 with precise division).
struct size_set {
  const char* name;
  int nx, ny, atoms;
};
inline constexpr size_set sizes[] = {
    {"small", 128, 128, 10000},  // three launches, the last one of a partial chunk
    {"default", 512, 512, 40000},
    {"h100", 2048, 2048, 40000},
};
inline const size_set& find_size(const std::string& name) {
  for (const size_set& s : sizes) {
    if (name == s.name || (name.empty() && std::string(s.name) == "default")) return s;
  }
  throw parboil::usage_error("--size '" + name + "': unknown");
}

/// An atom as the kernel reads it from constant memory (Parboil's float4 atominfo): x, y, (z - zplane)^2, charge.
struct atom {
  float x, y, dz2, q;
};

/// glibc's rand() after srand(seed): the additive feedback generator r[i] = r[i-3] + r[i-31] (mod 2^32), seeded by
/// the Lehmer generator 16807 x mod (2^31 - 1), the first 310 outputs discarded, each output r[i] >> 1. Parboil
/// generates cp's atoms with the C library's rand(); this is that sequence on every platform.
class glibc_rand {
 public:
  static constexpr std::int32_t max = 2147483647;  // RAND_MAX
  explicit glibc_rand(std::uint32_t seed) {
    std::int64_t word = seed == 0 ? 1 : seed;
    r_[0] = static_cast<std::uint32_t>(word);
    for (int i = 1; i < 31; ++i) {  // Schrage's form of 16807 * word mod (2^31 - 1), as glibc computes it
      word = 16807 * (word % 127773) - 2836 * (word / 127773);
      if (word < 0) word += 2147483647;
      r_[i] = static_cast<std::uint32_t>(word);
    }
    for (int i = 0; i < 310; ++i) (void)(*this)();
  }
  std::int32_t operator()() {
    r_[f_] += r_[b_];
    const std::uint32_t v = r_[f_];
    f_ = (f_ + 1) % 31;
    b_ = (b_ + 1) % 31;
    return static_cast<std::int32_t>(v >> 1);
  }

 private:
  std::uint32_t r_[31];
  int f_ = 3, b_ = 0;
};

/// The atoms as Parboil's initatoms() makes them: x, y, z, charge per atom. The box size goes through a dim3 (unsigned
/// fields), so 0.1 * 512 = 51.2 becomes 51 and the plane's z extent 0.1 becomes 0: every atom lies in the plane
/// (dz = 0), and a lattice point next to an atom gets a huge value (hence the clamp in the checksum). The charge is
/// computed in double ((r / RAND_MAX) * 2.0 - 1.0) and stored as float.
inline std::vector<float> generate_atoms(int count, int nx, int ny) {
  glibc_rand rng(54321);
  const auto box = [](int n) { return static_cast<float>(static_cast<unsigned>(spacing * static_cast<float>(n))); };
  const float sx = box(nx), sy = box(ny), sz = box(1);
  const float rand_max = static_cast<float>(glibc_rand::max);  // (float) RAND_MAX: 2^31
  std::vector<float> a(static_cast<std::size_t>(count) * 4);
  for (std::size_t i = 0; i < a.size(); i += 4) {
    a[i] = (static_cast<float>(rng()) / rand_max) * sx;
    a[i + 1] = (static_cast<float>(rng()) / rand_max) * sy;
    a[i + 2] = (static_cast<float>(rng()) / rand_max) * sz;
    a[i + 3] = static_cast<float>(static_cast<double>(static_cast<float>(rng()) / rand_max) * 2.0 - 1.0);
  }
  return a;
}

/// The atoms as the kernel reads them for the plane z = 0 (Parboil's copyatomstoconstbuf): dz^2 precomputed.
inline std::vector<atom> plane_atoms(std::span<const float> xyzq) {
  std::vector<atom> out(xyzq.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float dz = 0.0f - xyzq[4 * i + 2];
    out[i] = atom{xyzq[4 * i], xyzq[4 * i + 1], dz * dz, xyzq[4 * i + 3]};
  }
  return out;
}

/// One thread's eight sums (registers on a GPU).
struct sums {
  float e[unroll_x];
};

/// One atom's contribution to one thread's eight points: lattice point (px, py) is the first, the others follow 16
/// points apart in x (the kernel's dx2 = dx1 + gu, ...); precise 1.0f / sqrtf as Parboil (no fast math).
/// (e(k): the thread's k-th sum, a float&: sums' e[k], or a per_thread_array's [k][t].)
template <class E>
  requires std::invocable<E, int>
CP_HD inline void add_atom(const atom& a, int px, int py, E&& e) {
  const float gu = spacing * block_x;
  const float dy = spacing * static_cast<float>(py) - a.y;
  const float dyz2 = dy * dy + a.dz2;
  float dx = spacing * static_cast<float>(px) - a.x;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < unroll_x; ++k) {
    e(k) += a.q * (1.0f / sqrtf(dx * dx + dyz2));
    dx += gu;
  }
}
CP_HD inline void add_atom(const atom& a, int px, int py, sums& s) {
  add_atom(a, px, py, [&](int k) -> float& { return s.e[k]; });
}

/// A thread's sums added to its points of the plane (`out` at its first point).
template <class E>
  requires std::invocable<E, int>
CP_HD inline void add_sums(E&& e, float* out) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < unroll_x; ++k) out[block_x * k] += e(k);
}
CP_HD inline void add_sums(const sums& s, float* out) {
  add_sums([&](int k) { return s.e[k]; }, out);
}

/// The atoms in chunks of max_atoms, one launch each.
inline std::vector<std::span<const atom>> chunks(std::span<const atom> atoms) {
  std::vector<std::span<const atom>> out;
  for (std::size_t c = 0; c < atoms.size(); c += max_atoms) {
    out.push_back(atoms.subspan(c, std::min<std::size_t>(max_atoms, atoms.size() - c)));
  }
  return out;
}

/// The plane's size: points at (x * spacing, y * spacing), and what the programs report.
struct problem {
  int nx, ny;
  std::vector<float> atoms;  // x, y, z, q per atom (generate_atoms)
  int count() const { return static_cast<int>(atoms.size() / 4); }
};

/// The serial reference for rows [0, rows) of the plane, in the kernels' order of additions (chunks of max_atoms,
/// each summed from 0 per point, then added), so that a CPU place gives the same bits.
inline std::vector<float> reference(const problem& pb, int rows) {
  const std::vector<atom> atoms = plane_atoms(pb.atoms);
  std::vector<float> out(static_cast<std::size_t>(rows) * pb.nx, 0.0f);
  for (int y = 0; y < rows; ++y) {
    for (int x0 = 0; x0 < pb.nx; x0 += tile_x) {
      for (int j = 0; j < block_x; ++j) {  // the thread of x0 + j: points x0 + j + 16 k
        for (const std::span<const atom> chunk : chunks(atoms)) {
          sums s{};
          for (const atom& a : chunk) add_atom(a, x0 + j, y, s);
          add_sums(s, out.data() + static_cast<std::size_t>(y) * pb.nx + x0 + j);
        }
      }
    }
  }
  return out;
}

/// Parboil's checksum: the sum, in double, of every value clamped to [-20, 20] (of the rows given).
inline double checksum(std::span<const float> values) {
  double sum = 0.0;
  for (const float v : values) sum += std::fmax(-20.0, std::fmin(20.0, static_cast<double>(v)));
  return sum;
}

/// Parboil's output file: "nx ny 1 atoms", the checksum (%.4g), then the first 17 rows (%.4g, each value followed
/// by a space).
inline void write_output(const std::string& path, const problem& pb, std::span<const float> energy) {
  parboil::output_file f(path, false);
  f.print("%d %d %d %d\n", pb.nx, pb.ny, 1, pb.count());
  f.print("%.4g\n", checksum(energy));
  for (int y = 0; y < std::min(output_rows, pb.ny); ++y) {
    for (int x = 0; x < pb.nx; ++x) f.print("%.4g ", static_cast<double>(energy[static_cast<std::size_t>(y) * pb.nx + x]));
    f.print("\n");
  }
  f.close();
}

/// Parboil's compare-output rule: the checksums within 0.5 %, and every value of the rows within 0.005 or 0.5 %.
/// `ref_sum` is the checksum over the same rows as `sum`.
inline void compare(parboil::check_result& c, double sum, double ref_sum, std::span<const float> rows,
                    std::span<const float> ref_rows, int nx) {
  c.expect(std::fabs(sum - ref_sum) <= 0.005 * std::fabs(ref_sum), [&] {
    return "checksum " + std::to_string(sum) + ", reference " + std::to_string(ref_sum) + " (0.5 % allowed)";
  });
  for (std::size_t i = 0; i < ref_rows.size(); ++i) {
    c.expect(parboil::close(rows[i], ref_rows[i], 0.005, 0.005), [&] {
      return "point (" + std::to_string(i % nx) + ", " + std::to_string(i / nx) + "): " + std::to_string(rows[i]) +
             ", reference " + std::to_string(ref_rows[i]);
    });
  }
}

/// --check FILE: compares with a Parboil output file (its header must name the same plane and atoms).
inline bool check_file(const char* prog, const std::string& path, const problem& pb, std::span<const float> energy) {
  parboil::text_file f(path, true);
  const int nx = f.number<int>("the plane's width"), ny = f.number<int>("the plane's height");
  const int nz = f.number<int>("the lattice's depth"), count = f.number<int>("the number of atoms");
  const double ref_sum = f.number<double>("the checksum");
  parboil::check_result c;
  if (nx != pb.nx || ny != pb.ny || nz != 1 || count != pb.count()) {
    c.fail("'" + path + "' is for a " + std::to_string(nx) + " x " + std::to_string(ny) + " x " + std::to_string(nz) +
           " lattice and " + std::to_string(count) + " atoms, this run " + std::to_string(pb.nx) + " x " +
           std::to_string(pb.ny) + " x 1 and " + std::to_string(pb.count()));
  } else {
    const int rows = std::min(output_rows, ny);
    std::vector<float> ref(static_cast<std::size_t>(rows) * nx);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ref[i] = f.number<float>("the value of point (" + std::to_string(i % nx) + ", " + std::to_string(i / nx) + ")");
    }
    if (!f.at_end()) f.fail(f.line(), "expected the end of the file after " + std::to_string(rows) + " rows");
    compare(c, checksum(energy), ref_sum, energy, ref, nx);
  }
  c.print(prog, ("'" + path + "'").c_str());
  return c.ok();
}

/// The check against the serial reference. The reference costs as much as the kernels (nx * ny * atoms pairs), so
/// above 2^28 pairs it is computed for the 17 rows Parboil writes and checks only, and the checksum is then compared
/// over those rows.
inline bool check_reference(const char* prog, const problem& pb, std::span<const float> energy) {
  const bool full = static_cast<double>(pb.nx) * pb.ny * pb.count() <= 268435456.0;
  const int rows = full ? pb.ny : std::min(output_rows, pb.ny);
  const std::vector<float> ref = reference(pb, rows);
  const auto mine = energy.first(ref.size());
  parboil::check_result c;
  compare(c, checksum(mine), checksum(ref), mine, ref, pb.nx);
  c.print(prog, full ? "the serial reference" : "the serial reference (first 17 rows)");
  return c.ok();
}

/// The whole program around `compute(pb, energy)`, which fills the plane (nx * ny floats, zero on entry): options,
/// atoms, the timer around compute, -o, the check and the report line. `fields` are the program's own report
/// fields (places, threads).
template <class Compute>
int run(const parboil::options& o, const char* prog, const std::string& fields, Compute&& compute) {
  parboil::expect_inputs(o, 0, "cp generates its atoms as Parboil does: there is nothing to read or write");
  if (!o.params.empty()) throw parboil::usage_error("cp takes no parameters after --");
  const size_set& s = find_size(o.size);
  problem pb{s.nx, s.ny, generate_atoms(s.atoms, s.nx, s.ny)};
  std::vector<float> energy(static_cast<std::size_t>(pb.nx) * pb.ny, 0.0f);
  parboil::timer t;
  t.start();
  compute(static_cast<const problem&>(pb), std::span<float>(energy));
  t.stop();
  if (!o.output.empty()) write_output(o.output, pb, energy);
  bool ok = true;
  if (o.check) ok = o.check_file.empty() ? check_reference(prog, pb, energy) : check_file(prog, o.check_file, pb, energy);
  const std::string size = "nx=" + std::to_string(pb.nx) + " ny=" + std::to_string(pb.ny) + " atoms=" +
                           std::to_string(pb.count());
  return parboil::report("cp", size + (fields.empty() ? "" : " " + fields), t.seconds(), o, ok);
}

/// The usage text of the three programs: no -i or --write-input (cp generates its atoms, as Parboil does).
inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-o OUT] [--size small|default|h100] [--check FILE] [--no-check] [--cpu] [-q]\n" +
         "  no input files: the atoms are generated as Parboil generates them (-i and --write-input are refused)\n" +
         parboil::option_usage;
}

}  // namespace cp
