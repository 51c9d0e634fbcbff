#pragma once
// The tiled matrix product of the X10 paper (its CUDAMatMul sample: Volkov's sgemmNN): C = alpha A B + beta C for
// column-major N x N matrices, alpha = 1, beta = -1, launched ITERATIONS times on the same C. What
// apgas_x10cuda_matmul, x10cuda_matmul_native and x10cuda_matmul_omp share: sizes, the input (generated or read), the
// output file, the serial reference and the check. No apgas and no CUDA runtime here (nvcc compiles it as host code).
//
//   <program> [-i A.txt,B.txt,C.txt] [-o C.txt] [--size default|small|medium|h100] [...] [-- N [ITERATIONS]]
//
// Sizes: default N = 4096 (the X10 sample's), small 256 (tests), medium 1024 (CPU comparisons: the default takes
// minutes on a 2-core CPU place), h100 8192 (parboil.md §7); N a multiple of 64 (the kernel's 64 x 16 tiles of C and
// 16-wide steps along k). ITERATIONS (10, the X10 sample's timed loop) launches are
// timed, after one untimed launch (the X10 sample's untimed first call, commented out there): ITERATIONS + 1 launches
// of C = A B - C in all, so with the default C ends as A B - C0 (an even count would bring C back near C0 whatever
// the kernel computed, and the check could not tell).
// Input: A, B, C0 filled as the X10 sample fills them, (rand(62) - 31) / 32, from parboil::random: multiples of 1/32,
// so that every product and partial sum of A B - C is exact in float (|sum| < 2^12 with 2^-10 resolution needs 22
// bits): every version and the reference give the same bits. Files (-i, -o, --write-input, --check): Parboil's sgemm
// text format, "rows cols" then the values in column-major order.
// Check: C against C_L = A B - C_{L-1} computed in double from C0 (L launches), on every element for N <= 512 and on
// 16 columns for larger N (the serial reference costs N^2 multiply-adds per column; column j0 + s covers tile column
// s of every tile), within the float error bound of L launches: |C - ref| <= L u ((N + 2) sum_p |a_ip b_pj| +
// 2 (|(A B)_ij| + |C0_ij|)) with u = 2^-24 (Higham's bound for a recursive float sum of N products, plus the roundings
// of alpha acc + beta C), which no correct summation order exceeds (the kernels sum in order, FMA or not); a value
// equal to the reference's passes (infinities of a reference file too).
// time_s: the ITERATIONS timed launches and C back in host memory (the X10 sample timed only its launches); the
// copies of A, B and C0 to the compute places and the first launch come before.
#include "x10cuda.hpp"

#include <cmath>
#include <optional>

namespace matmul {

constexpr float alpha = 1.0f, beta = -1.0f;  // as the X10 sample
constexpr int default_iterations = 10;

inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i A.txt,B.txt,C.txt] [-o C.txt] [--size default|small|medium|h100] [-- N [ITERATIONS]]\n"
         "  C = A B - C, column-major N x N (the X10 paper's CUDAMatMul): 1 + ITERATIONS (10) launches, these timed\n" +
         parboil::common_usage;
}

/// A run: N, the number of timed launches, and A, B, C0 (column-major N x N).
struct problem {
  int n = 0, iterations = default_iterations;
  std::vector<float> a, b, c;
  int launches() const { return iterations + 1; }
};

/// Reads a matrix in Parboil's sgemm format ("rows cols", then the values in column-major order); `output`: a
/// reference C (infinities allowed).
inline std::vector<float> read_matrix(const std::string& path, int& rows, int& cols, bool output = false) {
  parboil::text_file f(path, output);
  rows = f.number<int>("the row count");
  cols = f.number<int>("the column count");
  if (rows < 1 || cols < 1) f.fail(1, "a matrix of " + std::to_string(rows) + " x " + std::to_string(cols));
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  std::vector<float> m =
      f.numbers<float>(n, [&](std::size_t i) { return "value " + std::to_string(i + 1) + " of " + std::to_string(n); });
  if (!f.at_end()) f.fail(f.line(), "more values than the " + std::to_string(m.size()) + " of the matrix");
  return m;
}

inline void write_matrix(const std::string& path, int rows, int cols, std::span<const float> m) {
  parboil::output_file f(path, false);
  f.print("%d %d\n", rows, cols);
  for (const float v : m) f.print("%.9g\n", static_cast<double>(v));
  f.close();
}

/// The problem of the command line, its matrices generated or read (-i); nullopt once --write-input has written them.
inline std::optional<problem> prepare(const parboil::options& o) {
  parboil::expect_inputs(o, 3, "A, B and C");
  x10cuda::expect_params(o, 2, "N [ITERATIONS]");
  problem p;
  p.n = o.size == "small" ? 256 : o.size == "medium" ? 1024 : o.size == "h100" ? 8192 : 4096;
  p.iterations = static_cast<int>(x10cuda::param(o, 1, default_iterations, 1, 1 << 20, "ITERATIONS"));
  if (!o.inputs.empty()) {
    std::vector<float>* m[] = {&p.a, &p.b, &p.c};
    int n = 0;
    for (int i = 0; i < 3; ++i) {
      int rows = 0, cols = 0;
      *m[i] = read_matrix(o.inputs[i], rows, cols);
      if (rows != cols || (i > 0 && rows != n) || rows % 64 != 0) {
        throw parboil::input_error("input file '" + o.inputs[i] + "': line 1: a " + std::to_string(rows) + " x " +
                                   std::to_string(cols) + " matrix; expected N x N with N a multiple of 64" +
                                   (i > 0 ? " and N = " + std::to_string(n) + " as A" : ""));
      }
      n = rows;
    }
    p.n = static_cast<int>(x10cuda::param(o, 0, n, n, n, "N (" + std::to_string(n) + ", the files')"));
    return p;
  }
  p.n = static_cast<int>(x10cuda::param(o, 0, p.n, 64, 1 << 15, "N"));
  if (p.n % 64 != 0) throw parboil::usage_error("N must be a multiple of 64, got " + std::to_string(p.n));
  parboil::random rng(4096);
  for (auto* m : {&p.a, &p.b, &p.c}) {
    m->resize(static_cast<std::size_t>(p.n) * p.n);
    for (float& v : *m) v = static_cast<float>(static_cast<int>(rng.next() % 62) - 31) / 32.0f;
  }
  if (o.write_inputs.empty()) return p;
  for (int i = 0; i < 3; ++i) write_matrix(o.write_inputs[i], p.n, p.n, i == 0 ? p.a : i == 1 ? p.b : p.c);
  return std::nullopt;
}

/// -o, the check and the report line: the program's exit code. `c` is C after all launches.
inline int finish(const parboil::options& o, const problem& p, std::span<const float> c, double seconds,
                  const std::string& where) {
  const long n = p.n;
  if (!o.output.empty()) write_matrix(o.output, p.n, p.n, c);
  parboil::check_result result;
  if (o.check) {
    std::vector<float> file;
    if (!o.check_file.empty()) {
      int rows = 0, cols = 0;
      file = read_matrix(o.check_file, rows, cols, true);
      if (rows != n || cols != n) {
        throw parboil::input_error("input file '" + o.check_file + "': line 1: a " + std::to_string(rows) + " x " +
                                   std::to_string(cols) + " matrix; this run's C is " + std::to_string(n) + " x " +
                                   std::to_string(n));
      }
    }
    std::vector<long> columns;
    for (long s = 0; s < 16 && n > 512; ++s) columns.push_back(s * (n / 16) + s);
    for (long j = 0; n <= 512 && j < n; ++j) columns.push_back(j);
    const double u = std::ldexp(1.0, -24);
    std::vector<double> prod(static_cast<std::size_t>(n)), bound(prod.size());  // (A B)_ij, sum_p |a_ip b_pj|
    for (const long j : columns) {
      std::fill(prod.begin(), prod.end(), 0.0);
      std::fill(bound.begin(), bound.end(), 0.0);
      for (long q = 0; q < n; ++q) {  // column j of A B, a column of A at a time
        const double b = p.b[q + j * n];
        for (long i = 0; i < n; ++i) {
          const double t = static_cast<double>(p.a[i + q * n]) * b;
          prod[i] += t;
          bound[i] += std::fabs(t);
        }
      }
      for (long i = 0; i < n; ++i) {
        const double c0 = p.c[i + j * n];
        double ref = c0;
        for (int l = 0; l < p.launches(); ++l) ref = alpha * prod[i] + beta * ref;
        const double tol = p.launches() * u * ((n + 2) * bound[i] + 2 * (std::fabs(prod[i]) + std::fabs(c0)));
        const double expected = file.empty() ? ref : file[i + j * n];
        const double got = c[i + j * n];
        x10cuda::expect(result, got == expected || std::fabs(got - expected) <= tol, [&] {
          return "C(" + std::to_string(i) + "," + std::to_string(j) + ") = " + std::to_string(got) + " instead of " +
                 std::to_string(expected) + " (tolerance " + std::to_string(tol) + ")";
        });
      }
    }
    const char* against = file.empty() ? "the serial double reference" : "the reference file";
    result.print("matmul", against);
    if (!o.quiet && result.ok()) {
      std::printf("matmul: %zu elements of C (%zu columns) as %s\n", result.compared(), columns.size(), against);
    }
  }
  return parboil::report("matmul",
                         "n=" + std::to_string(n) + " iterations=" + std::to_string(p.iterations) + " " + where,
                         seconds, o, result.ok());
}

}  // namespace matmul
