#pragma once
// Parboil's sgemm, what its three programs share (no apgas, no CUDA: nvcc compiles this as host code too):
// C = A * B^T in column-major layout (BLAS 'N','T', alpha 1, beta 0), A m x k, B^T given as an n x k matrix,
// C m x n: C[i + j*m] = sum over l of A[i + l*m] * Bt[j + l*n].
//
// Input: `-i A,B,Bt`, Parboil's text matrices (`rows cols`, then rows*cols floats in column-major order). Like
// Parboil the programs read A and B^T only; the middle file is not opened (Parboil's medium set passes B^T twice).
// Without -i the input is generated (--size, or the parameters `-- m n k`). Output (-o): Parboil's text, `m n ` then
// the m*n floats of C, column-major.
// Check: Parboil's rule, |d| < 0.01 or |d| < 1% of the reference value, entry by entry; equal values pass (a C that
// overflowed to the reference's infinities too, and a reference file may hold them).
//
// The optimised kernel (Parboil's src/cuda) needs m % 128 == 0, n % 16 == 0; ours also needs k % 8 == 0 (the
// shared tile's height; Parboil reads past the end of A there): other sizes are rejected with a message.
#include "parboil.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sgemm {

inline constexpr int tile_m = 128;  // rows of C per block: (16, 8) threads, one row each
inline constexpr int tile_n = 16;   // columns of C per block (and per thread)
inline constexpr int tile_k = 8;    // rows of the shared B^T tile: one k step between two barriers

struct problem {
  int m = 0, n = 0, k = 0;
  std::vector<float> a;   // m x k, column-major
  std::vector<float> bt;  // n x k, column-major
};

/// The generated sizes: Parboil's small and medium sets, and a size for an H100 (parboil.md §7).
struct dims {
  int m, n, k;
};
inline dims size_of(const std::string& name) {
  if (name == "small") return {128, 160, 96};
  if (name == "h100") return {4096, 4096, 4096};
  return {1024, 1056, 992};  // "default": Parboil's medium set
}

inline constexpr const char* usage_text =
    "usage: %s [-i A.txt,B.txt,Bt.txt] [-o C.txt] [--size small|default|h100] [options] [-- m n k]\n";

inline std::string usage(const char* prog) {
  char head[256];
  std::snprintf(head, sizeof head, usage_text, prog);
  return std::string(head) + parboil::common_usage +
         "  inputs: Parboil's column-major text matrices A (m x k), B (k x n, not read), B^T (n x k)\n"
         "  parameters: the shape of a generated input (instead of --size)\n";
}

inline void check_dims(int m, int n, int k, const std::string& where) {
  if (static_cast<long long>(m) * n >= (1LL << 31)) {
    throw parboil::input_error(where + ": C of " + std::to_string(m) + " x " + std::to_string(n) +
                               " has 2^31 elements or more (int indices)");
  }
  if (m % tile_m != 0 || n % tile_n != 0 || k % tile_k != 0) {
    throw parboil::input_error(where + ": C = A * B^T of m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                               ", k=" + std::to_string(k) + ": the kernel needs m a multiple of 128, n of 16, k of 8");
  }
}

/// A text matrix, `rows cols` then rows*cols floats (column-major); `output`: a reference C (infinities allowed).
inline std::vector<float> read_matrix(const std::string& path, int& rows, int& cols, bool output = false) {
  parboil::text_file f(path, output);
  rows = f.number<int>("the number of rows");
  cols = f.number<int>("the number of columns");
  if (rows <= 0 || cols <= 0 || static_cast<long long>(rows) * cols >= (1LL << 31)) {
    f.fail(1, "a matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                  " (expected 1 to 2^31 - 1 elements)");
  }
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  std::vector<float> v = f.numbers<float>(
      n, [&](std::size_t i) { return "element " + std::to_string(i + 1) + " of " + std::to_string(n); });
  if (!f.at_end()) f.fail(f.line(), "more than the " + std::to_string(v.size()) + " elements the header announces");
  return v;
}

/// The input: -i A,B,Bt (A and B^T read), or generated at `size`.
inline problem load(const parboil::options& o) {
  parboil::expect_inputs(o, 3, "A, B and B^T");
  problem p;
  if (!o.params.empty()) {
    if (o.params.size() != 3) throw parboil::usage_error("expected 3 parameters after --: m n k");
    if (!o.inputs.empty() || !o.size.empty()) throw parboil::usage_error("the parameters m n k exclude -i and --size");
    p.m = static_cast<int>(parboil::to_integer(o.params[0], 1, 1 << 20, "m"));
    p.n = static_cast<int>(parboil::to_integer(o.params[1], 1, 1 << 20, "n"));
    p.k = static_cast<int>(parboil::to_integer(o.params[2], 1, 1 << 20, "k"));
    if (static_cast<long long>(p.m) * p.k >= (1LL << 31) || static_cast<long long>(p.n) * p.k >= (1LL << 31)) {
      throw parboil::usage_error("m * k and n * k must be below 2^31 (int indices)");
    }
    check_dims(p.m, p.n, p.k, "the parameters");
  } else if (o.inputs.empty()) {
    const dims d = size_of(o.size);
    p.m = d.m, p.n = d.n, p.k = d.k;
  }
  if (o.inputs.empty()) {
    p.a.resize(static_cast<std::size_t>(p.m) * p.k);
    p.bt.resize(static_cast<std::size_t>(p.n) * p.k);
    parboil::random ra(1), rb(2);
    for (float& v : p.a) v = ra.uniform(-1, 1);
    for (float& v : p.bt) v = rb.uniform(-1, 1);
    return p;
  }
  int k_bt = 0;
  p.a = read_matrix(o.inputs[0], p.m, p.k);
  p.bt = read_matrix(o.inputs[2], p.n, k_bt);
  if (k_bt != p.k) {
    throw parboil::input_error("input file '" + o.inputs[2] + "': B^T is " + std::to_string(p.n) + " x " +
                               std::to_string(k_bt) + ", but A ('" + o.inputs[0] + "') has k=" + std::to_string(p.k) +
                               " columns (expected " + std::to_string(p.n) + " x " + std::to_string(p.k) + ")");
  }
  check_dims(p.m, p.n, p.k, "input files '" + o.inputs[0] + "' and '" + o.inputs[2] + "'");
  return p;
}

/// A text matrix as Parboil writes it (`rows cols ` then the values, each followed by a space): C with Parboil's six
/// digits, the inputs of --write-input with nine (they read back as the same floats).
inline void write_matrix(const std::string& path, int rows, int cols, const float* v, const char* format = "%g ") {
  parboil::output_file f(path, false);
  f.print("%d %d ", rows, cols);
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = 0; i < n; ++i) f.print(format, static_cast<double>(v[i]));
  f.print("\n");
  f.close();
}

/// --write-input A,B,Bt: the generated input as Parboil's three files (B = the transpose of B^T, k x n).
inline void write_input(const parboil::options& o, const problem& p) {
  write_matrix(o.write_inputs[0], p.m, p.k, p.a.data(), "%.9g ");
  std::vector<float> b(p.bt.size());
  for (int l = 0; l < p.k; ++l) {
    for (int j = 0; j < p.n; ++j) b[l + std::size_t(j) * p.k] = p.bt[j + std::size_t(l) * p.n];
  }
  write_matrix(o.write_inputs[1], p.k, p.n, b.data(), "%.9g ");
  write_matrix(o.write_inputs[2], p.n, p.k, p.bt.data(), "%.9g ");
}

/// The columns of C the check compares: all of them, or for large products (above 2^30 multiply-adds, the h100
/// size) every s-th column, so that the serial reference stays under 2^30 multiply-adds (a second or so).
inline int check_stride(const problem& p) {
  const double work = static_cast<double>(p.m) * p.n * p.k;
  const double limit = 1073741824.0;
  return work <= limit ? 1 : static_cast<int>((work + limit - 1) / limit);
}

/// The serial reference for the checked columns (column j of C is ref[j / stride] * m...): in the kernel's order,
/// the sum over l in increasing l.
inline std::vector<float> reference(const problem& p, int stride) {
  const int cols = (p.n + stride - 1) / stride;
  std::vector<float> ref(static_cast<std::size_t>(p.m) * cols, 0.0f);
  for (int c = 0; c < cols; ++c) {
    const int j = c * stride;
    float* out = ref.data() + static_cast<std::size_t>(c) * p.m;
    for (int l = 0; l < p.k; ++l) {
      const float b = p.bt[j + static_cast<std::size_t>(l) * p.n];
      const float* a = p.a.data() + static_cast<std::size_t>(l) * p.m;
      for (int i = 0; i < p.m; ++i) out[i] += a[i] * b;
    }
  }
  return ref;
}

/// Parboil's compare-output rule on the checked columns of C against the serial reference.
inline parboil::check_result check(const problem& p, std::span<const float> c) {
  const int stride = check_stride(p);
  const std::vector<float> ref = reference(p, stride);
  parboil::check_result r;
  for (int j = 0, col = 0; j < p.n; j += stride, ++col) {
    for (int i = 0; i < p.m; ++i) {
      const float x = c[i + static_cast<std::size_t>(j) * p.m], y = ref[i + static_cast<std::size_t>(col) * p.m];
      r.expect(parboil::close(x, y, 0.01, 0.01), [&] {
        return "C(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(x) + ", reference " +
               std::to_string(y);
      });
    }
  }
  return r;
}

/// --check FILE: Parboil's rule against a reference output file (text, `m n` then C).
inline parboil::check_result check_file(const problem& p, std::span<const float> c, const std::string& path) {
  int rows = 0, cols = 0;
  const std::vector<float> ref = read_matrix(path, rows, cols, true);
  parboil::check_result r;
  if (rows != p.m || cols != p.n) {
    r.fail("reference '" + path + "' is " + std::to_string(rows) + " x " + std::to_string(cols) + ", C is " +
           std::to_string(p.m) + " x " + std::to_string(p.n));
    return r;
  }
  for (std::size_t q = 0; q < ref.size(); ++q) {
    r.expect(parboil::close(c[q], ref[q], 0.01, 0.01), [&] {
      return "C[" + std::to_string(q) + "] = " + std::to_string(c[q]) + ", reference file " + std::to_string(ref[q]);
    });
  }
  return r;
}

/// The start of every program: the input, or nothing after --write-input has written it.
inline std::optional<problem> start(const parboil::options& o) {
  problem p = load(o);
  if (o.write_inputs.empty()) return p;
  write_input(o, p);
  return std::nullopt;
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
inline int finish(const char* prog, const parboil::options& o, const problem& p, std::span<const float> c,
                  double seconds, const std::string& places) {
  if (!o.output.empty()) write_matrix(o.output, p.m, p.n, c.data());
  if (!o.quiet) std::printf("%s: result fnv1a=%016llx\n", prog, static_cast<unsigned long long>(fnv1a(c)));
  bool ok = true;
  if (o.check) {
    const parboil::check_result r = o.check_file.empty() ? check(p, c) : check_file(p, c, o.check_file);
    r.print(prog, o.check_file.empty() ? "the serial reference" : o.check_file.c_str());
    ok = r.ok();
  }
  std::string fields = "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
  if (!places.empty()) fields += " " + places;
  return parboil::report("sgemm", fields, seconds, o, ok);
}

}  // namespace sgemm
