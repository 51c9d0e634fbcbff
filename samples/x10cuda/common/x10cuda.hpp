#pragma once
// What the X10 paper's kernels (samples/x10cuda) share beyond ../parboil/common/parboil.hpp, for all three programs
// of each kernel: functions that the CUDA kernels call too, and the `-- PARAMETERS` of the command line. No apgas and
// no CUDA runtime here: the baselines include it, and nvcc compiles it as host code.
#include "parboil.hpp"

#include <string>
#include <vector>

#if defined(__CUDACC__)
#define X10CUDA_HD __host__ __device__  // a function the kernels (apgas bodies and native __global__s) call too
#else
#define X10CUDA_HD
#endif

namespace x10cuda {

/// Parameter i of `-- PARAMETERS` as a whole number within [lo, hi], or `fallback` where there are fewer.
inline long long param(const parboil::options& o, std::size_t i, long long fallback, long long lo, long long hi,
                       const std::string& what) {
  if (i >= o.params.size()) return fallback;
  return parboil::to_integer(o.params[i], lo, hi, "parameter " + std::to_string(i + 1) + " (" + what + ")");
}

/// At most `n` parameters after `--`.
inline void expect_params(const parboil::options& o, std::size_t n, const char* names) {
  if (o.params.size() > n) {
    throw parboil::usage_error("expected at most " + std::to_string(n) + " parameters after -- (" + names + "), got " +
                               std::to_string(o.params.size()));
  }
}

/// c.expect(good, describe) without making a std::function for the values that pass (checks of 1e8 values).
template <class F>
void expect(parboil::check_result& c, bool good, F&& describe) {
  if (good) {
    c.expect(true, {});
  } else {
    c.expect(false, describe);
  }
}

}  // namespace x10cuda
