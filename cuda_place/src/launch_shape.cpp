#include "launch_shape.hpp"

#include <apgas/error.hpp>

#include <string>

namespace apgas::detail::gpu {
namespace {

constexpr int invalid_value = 1;  // CUDA_ERROR_INVALID_VALUE: what the driver would have said

std::string at_place(int place_id) { return " on GPU place " + std::to_string(place_id); }

// A 1-D shape prints as its count, as in the messages of 1-D launches; others as (x,y,z).
bool one_d(dim3 d) { return d.y == 1 && d.z == 1; }
std::string dims(dim3 d) {
  if (one_d(d)) return std::to_string(d.x);
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

}  // namespace

void check_launch(const grid& g, std::size_t dynamic_shared, const device_limits& dev, const function_limits& fn,
                  int place_id) {
  const dim3 b = g.blocks;
  const dim3 max_grid(dev.max_blocks, dev.max_grid_y, dev.max_grid_z);
  if (b.x < 1 || b.y < 1 || b.z < 1 || b.x > max_grid.x || b.y > max_grid.y || b.z > max_grid.z) {
    throw kernel_launch_error(invalid_value, "apgas::cuda_kernel: grid of " + dims(b) + " blocks" + at_place(place_id) +
                                                 ": expected 1 to " +
                                                 (one_d(b) ? std::to_string(max_grid.x) : dims(max_grid) + " per dimension"));
  }
  const dim3 t = g.threads;
  const int max_threads = fn.max_threads_per_block < dev.max_threads_per_block ? fn.max_threads_per_block
                                                                                : dev.max_threads_per_block;
  if (t.x < 1 || t.y < 1 || t.z < 1 || t.count() > max_threads) {
    throw kernel_launch_error(invalid_value, "apgas::cuda_kernel: " + (one_d(t) ? std::to_string(t.x) : std::to_string(t.count()) + " (" + dims(t) + ")") +
                                                 " threads per block" + at_place(place_id) + ": expected 1 to " +
                                                 std::to_string(max_threads) + " (the device allows " +
                                                 std::to_string(dev.max_threads_per_block) + ", this kernel " +
                                                 std::to_string(fn.max_threads_per_block) + ")");
  }
  if (t.x > dev.max_block.x || t.y > dev.max_block.y || t.z > dev.max_block.z) {
    throw kernel_launch_error(invalid_value, "apgas::cuda_kernel: blocks of " + dims(t) + " threads" +
                                                 at_place(place_id) + " exceed the device's block dimensions " +
                                                 dims(dev.max_block));
  }
  const std::size_t room = dev.max_shared_optin > fn.static_shared ? dev.max_shared_optin - fn.static_shared : 0;
  if (dynamic_shared > room) {
    throw kernel_launch_error(invalid_value, "apgas::cuda_kernel: dynamic shared memory " +
                                                 std::to_string(dynamic_shared) + " B exceeds " +
                                                 std::to_string(room) + " B" + at_place(place_id) + " (" +
                                                 std::to_string(dev.max_shared_optin) + " B per block, " +
                                                 std::to_string(fn.static_shared) + " B used statically)");
  }
}

grid x10_auto_grid(const device_limits& dev, const function_limits& fn, std::size_t dynamic_shared, int place_id) {
  // (blocks per SM, threads per block), in X10's order of preference.
  static constexpr int table[][2] = {
      {8, 128}, {4, 256}, {2, 512}, {5, 192}, {3, 320}, {7, 128}, {2, 448}, {6, 128}, {4, 192}, {3, 256},
      {2, 384}, {5, 128}, {2, 320}, {3, 192}, {8, 64},  {4, 128}, {2, 256}, {1, 512}, {7, 64},  {1, 448},
      {6, 64},  {3, 128}, {2, 192}, {1, 384}, {5, 64},  {1, 320}, {4, 64},  {2, 128}, {1, 256}, {3, 64},
      {1, 192}, {2, 64},  {1, 128}, {1, 64}};
  const std::size_t per_block_shared = fn.static_shared + dynamic_shared;
  for (const auto& e : table) {
    const int blocks = e[0];
    const int threads = e[1];
    if (threads > fn.max_threads_per_block || threads > dev.max_threads_per_block) continue;
    if (blocks * threads > dev.threads_per_sm) continue;
    if (static_cast<long>(blocks) * threads * fn.regs_per_thread > dev.regs_per_sm) continue;
    if (threads * fn.regs_per_thread > dev.regs_per_block) continue;
    if (per_block_shared > dev.max_shared_optin) continue;
    if (static_cast<std::size_t>(blocks) * per_block_shared > dev.shared_per_sm) continue;
    return grid{blocks * dev.sms, threads};
  }
  throw kernel_launch_error(invalid_value, "apgas::auto_grid" + at_place(place_id) +
                                               ": not even one block of 64 threads fits (" +
                                               std::to_string(fn.regs_per_thread) + " registers per thread, " +
                                               std::to_string(per_block_shared) + " B of shared memory per block)");
}

}  // namespace apgas::detail::gpu
