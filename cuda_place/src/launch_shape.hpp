#pragma once
// The launch shape of a kernel at a GPU place, as plain arithmetic on the device's and the function's limits (no
// CUDA calls: the backend reads the limits from the driver, the tests feed them by hand).

#include <apgas/kernel.hpp>

#include <cstddef>

namespace apgas::detail::gpu {

struct device_limits {
  int sms = 0;                      ///< multiprocessors
  int max_threads_per_block = 0;
  int max_blocks = 0;               ///< grid x dimension
  int max_grid_y = 65535;           ///< grid y and z dimensions
  int max_grid_z = 65535;
  dim3 max_block{1024, 1024, 64};   ///< block dimensions
  std::size_t max_shared_optin = 0; ///< dynamic + static shared memory one block may opt in to
  std::size_t shared_per_sm = 0;
  int threads_per_sm = 0;
  int regs_per_sm = 0;
  int regs_per_block = 0;
};

struct function_limits {
  int max_threads_per_block = 0;    ///< the function's own limit (registers, launch bounds)
  int regs_per_thread = 0;
  std::size_t static_shared = 0;
};

/// Shared memory bytes above which a kernel needs the per-function opt-in attribute.
inline constexpr std::size_t default_shared_limit = 48 * 1024;

/// Check an explicit grid and the dynamic shared memory against the limits: kernel_launch_error naming the place,
/// the value and the limit if anything is beyond them.
void check_launch(const grid& g, std::size_t dynamic_shared, const device_limits& dev, const function_limits& fn,
                  int place_id);

/// X10's automatic shape (the table in tests/cuda/test_launch_shape.cpp): the first (blocks per SM, threads per block) of its table that fits the
/// function's threads, the registers and the shared memory of one SM, times the SM count. The documented fallback
/// when the occupancy API cannot answer; kernel_launch_error if not even one 64-thread block fits.
grid x10_auto_grid(const device_limits& dev, const function_limits& fn, std::size_t dynamic_shared, int place_id);

}  // namespace apgas::detail::gpu
