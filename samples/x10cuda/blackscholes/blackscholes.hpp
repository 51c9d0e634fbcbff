#pragma once
// Black-Scholes of the X10 paper (its CUDABlackScholes sample, the CUDA SDK's BlackScholes kernel): the fair call and
// put prices of n European options. What apgas_x10cuda_blackscholes, x10cuda_blackscholes_native and
// x10cuda_blackscholes_omp share: sizes, the input (generated or read), the output file, the serial double reference
// and the check. No apgas and no CUDA runtime here (nvcc compiles it as host code too).
//
//   <program> [-i OPTIONS.bin] [-o PRICES.bin] [--size default|small|h100] [...] [-- ITERATIONS]
//
// Sizes: default 4 000 000 options (the X10 sample's OPT_N), small 100 000 (tests), h100 64M (parboil.md §7).
// ITERATIONS: how many times the kernel is launched over all options (each launch computes the same prices). The
// X10 sample launched 512 times on a GPU and 32 times on a CPU place; here every version and every place does the
// same work, and the default is 32: about 2 s on the CPU place of the 2-core development VM. Pass 512 to repeat the
// paper's GPU run.
// Inputs: generated with the SDK's ranges (not the X10 sample's rand() in [0,1), where X near 0 makes log(S/X)
// explode): stock price S in [5, 30], strike X in [1, 100], years T in [0.25, 10], from parboil::random; R = 0.02,
// V = 0.30 as in both. Input file (-i, --write-input; little-endian): i32 n, then f32 S[n], f32 X[n], f32 T[n].
// Output file (-o, --check): i32 n, then f32 call[n], f32 put[n].
// Check (the SDK's rule): the L1 norm sum|ours - ref| / sum|ref| below 1e-6, for the calls and for the puts, against
// prices computed in double from the same formula (or read from --check FILE); where every reference price is 0
// (options far out of the money), sum|ours - ref| itself.
// time_s: the copies of the options to the compute places, every launch, and the prices back in host memory.
#include "x10cuda.hpp"

#include <cmath>
#include <optional>

namespace blackscholes {

constexpr float riskfree = 0.02f;   // R
constexpr float volatility = 0.30f;  // V
constexpr int default_iterations = 32;

inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i OPTIONS.bin] [-o PRICES.bin] [--size default|small|h100] [-- ITERATIONS (32)]\n"
         "  Black-Scholes prices of European options (the X10 paper's CUDABlackScholes), ITERATIONS launches\n" +
         parboil::common_usage;
}

/// A run: the options (stock price, strike, years) and how many launches.
struct problem {
  long long n = 0;
  int iterations = default_iterations;
  std::vector<float> s, x, t;
};

/// The polynomial approximation of the cumulative normal distribution (Abramowitz & Stegun 26.2.17), in float as the
/// kernels compute it or in double as the reference does.
template <class F>
X10CUDA_HD inline F cnd(F d) {
  const F a1 = F(0.31938153), a2 = F(-0.356563782), a3 = F(1.781477937), a4 = F(-1.821255978),
          a5 = F(1.330274429), rsqrt2pi = F(0.39894228040143267793994605993438);
  const F k = F(1) / (F(1) + F(0.2316419) * (d < 0 ? -d : d));
  const F c = rsqrt2pi * std::exp(F(-0.5) * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
  return d > 0 ? F(1) - c : c;
}

/// The call and put prices of one option (the body of the SDK's BlackScholesGPU loop).
template <class F>
X10CUDA_HD inline void price(F s, F x, F t, F r, F v, F& call, F& put) {
  const F sqrt_t = std::sqrt(t);
  const F d1 = (std::log(s / x) + (r + F(0.5) * v * v) * t) / (v * sqrt_t);
  const F d2 = d1 - v * sqrt_t;
  const F cnd1 = cnd(d1), cnd2 = cnd(d2);
  const F exp_rt = std::exp(-r * t);
  call = s * cnd1 - x * exp_rt * cnd2;
  put = x * exp_rt * (F(1) - cnd2) - s * (F(1) - cnd1);
}

/// The problem of the command line, its options generated or read (-i); nullopt once --write-input has written them.
inline std::optional<problem> prepare(const parboil::options& o) {
  parboil::expect_inputs(o, 1, "the options file");
  x10cuda::expect_params(o, 1, "ITERATIONS");
  problem p;
  p.iterations = static_cast<int>(x10cuda::param(o, 0, default_iterations, 1, 1 << 20, "ITERATIONS"));
  if (!o.inputs.empty()) {
    parboil::binary_file f(o.inputs[0]);
    const auto n = f.read<std::int32_t>("the option count (i32)");
    if (n < 1) f.fail(0, "the option count " + std::to_string(n) + " is not positive");
    p.n = n;
    const char* names[] = {"stock prices S", "strikes X", "years T"};
    std::vector<float>* arrays[] = {&p.s, &p.x, &p.t};
    for (int a = 0; a < 3; ++a) {
      const std::size_t at = f.offset();
      *arrays[a] = f.read_vector<float>(static_cast<std::size_t>(n), std::string(names[a]) + " (f32)");
      for (std::size_t i = 0; i < arrays[a]->size(); ++i) {
        const float v = (*arrays[a])[i];
        if (!(v > 0 && std::isfinite(v))) {
          f.fail(at + 4 * i, "option " + std::to_string(i) + ": " + names[a] + " value " + std::to_string(v) +
                                 " is not a positive finite number");
        }
      }
    }
    f.expect_end();
    return p;
  }
  p.n = o.size == "small" ? 100'000 : o.size == "h100" ? 64'000'000 : 4'000'000;
  parboil::random rng(5347);  // the SDK's srand(5347), in our generator
  p.s.resize(static_cast<std::size_t>(p.n));
  p.x.resize(p.s.size());
  p.t.resize(p.s.size());
  for (std::size_t i = 0; i < p.s.size(); ++i) {
    p.s[i] = rng.uniform(5.0f, 30.0f);
    p.x[i] = rng.uniform(1.0f, 100.0f);
    p.t[i] = rng.uniform(0.25f, 10.0f);
  }
  if (o.write_inputs.empty()) return p;
  parboil::output_file f(o.write_inputs[0], true);
  f.write(static_cast<std::int32_t>(p.n));
  for (const auto* v : {&p.s, &p.x, &p.t}) f.write(std::span<const float>(*v));
  f.close();
  return std::nullopt;
}

/// The L1 norm of ours against ref (the SDK's rule: below 1e-6), relative to sum|ref|, or absolute where that is 0.
inline double l1_norm(std::span<const float> ours, const std::vector<double>& ref, double& max_error) {
  double diff = 0, sum = 0;
  max_error = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(static_cast<double>(ours[i]) - ref[i]);
    diff += d;
    sum += std::fabs(ref[i]);
    max_error = d > max_error || d != d ? d : max_error;  // NaN sticks
  }
  return sum > 0 ? diff / sum : diff;
}

/// -o, the check and the report line: the program's exit code.
inline int finish(const parboil::options& o, const problem& p, std::span<const float> call,
                  std::span<const float> put, double seconds, const std::string& where) {
  if (!o.output.empty()) {
    parboil::output_file f(o.output, true);
    f.write(static_cast<std::int32_t>(p.n));
    f.write(call);
    f.write(put);
    f.close();
  }
  bool ok = true;
  if (o.check) {
    std::vector<double> rc(static_cast<std::size_t>(p.n)), rp(rc.size());
    const char* against = "the serial double reference";
    if (!o.check_file.empty()) {  // a reference output file
      parboil::binary_file f(o.check_file);
      const auto n = f.read<std::int32_t>("the option count (i32)");
      if (n != p.n) f.fail(0, "the file has " + std::to_string(n) + " options, this run " + std::to_string(p.n));
      const auto c = f.read_vector<float>(rc.size(), "call prices (f32)");
      const auto q = f.read_vector<float>(rc.size(), "put prices (f32)");
      f.expect_end();
      rc.assign(c.begin(), c.end());
      rp.assign(q.begin(), q.end());
      against = "the reference file";
    } else {
      for (std::size_t i = 0; i < rc.size(); ++i) {
        price<double>(p.s[i], p.x[i], p.t[i], riskfree, volatility, rc[i], rp[i]);
      }
    }
    double max_c = 0, max_p = 0;
    const double l1_c = l1_norm(call, rc, max_c), l1_p = l1_norm(put, rp, max_p);
    ok = l1_c < 1e-6 && l1_p < 1e-6;
    if (!o.quiet || !ok) {
      std::fprintf(ok ? stdout : stderr,
                   "blackscholes: against %s: L1 norm calls %.3g, puts %.3g (must be < 1e-6); max absolute error "
                   "calls %.3g, puts %.3g\n",
                   against, l1_c, l1_p, max_c, max_p);
    }
  }
  return parboil::report("blackscholes",
                         "options=" + std::to_string(p.n) + " iterations=" + std::to_string(p.iterations) + " " + where,
                         seconds, o, ok);
}

}  // namespace blackscholes
