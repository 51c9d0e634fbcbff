// The constructs of kernel closures (tests/kernels/constructs.hpp) on a GPU place: the same kernels and checks as on
// CPU places (tests/core/test_kernel_constructs.cpp), compiled by nvcc. Each test skips, saying why, where this host
// has no GPU place; compiling this file is itself the check that every construct's device side builds.
#include "kernels/constructs.hpp"
#include "support/run.hpp"

#include <string>

namespace {

int gpu_count(std::string& why) {
  static int count = -1;
  static std::string host;
  if (count < 0) {
    apgas::config cfg;
    const int rc = apgas::run(cfg, [&] {
      count = static_cast<int>(apgas::here().children().size());
      host = apgas::describe(apgas::here());
    });
    if (rc != 0) host = "apgas::run returned " + std::to_string(rc);
    if (count < 0) count = 0;
  }
  why = host;
  return count;
}

void on_gpu(void (*check)(apgas::place)) {
  apgas_test::run_on(2, [&] { check(apgas::here().children()[0]); });
}

#define REQUIRE_GPU()                                                     \
  std::string why;                                                        \
  if (gpu_count(why) < 1) GTEST_SKIP() << "needs 1 GPU place(s); " << why

TEST(GpuConstructs, Grid3d) { REQUIRE_GPU(); on_gpu(kernel_constructs::grid_3d); }
TEST(GpuConstructs, Atomics) { REQUIRE_GPU(); on_gpu(kernel_constructs::atomics); }
TEST(GpuConstructs, SharedHistograms) { REQUIRE_GPU(); on_gpu(kernel_constructs::shared_histograms); }
TEST(GpuConstructs, ClockedCollectives) { REQUIRE_GPU(); on_gpu(kernel_constructs::clocked_collectives); }
TEST(GpuConstructs, WarpOperations) { REQUIRE_GPU(); on_gpu(kernel_constructs::warp_ops); }
TEST(GpuConstructs, BlockLevel) { REQUIRE_GPU(); on_gpu(kernel_constructs::block_level); }
TEST(GpuConstructs, BlockStrideLoops) { REQUIRE_GPU(); on_gpu(kernel_constructs::block_stride); }
TEST(GpuConstructs, CoarseX) { REQUIRE_GPU(); on_gpu(kernel_constructs::coarse_x); }
TEST(GpuConstructs, StagedTiles) { REQUIRE_GPU(); on_gpu(kernel_constructs::staged_tiles); }
TEST(GpuConstructs, SharedForms) { REQUIRE_GPU(); on_gpu(kernel_constructs::shared_forms); }
TEST(GpuConstructs, LaunchBounds) { REQUIRE_GPU(); on_gpu(kernel_constructs::launch_bounds); }
TEST(GpuConstructs, InOrderQueue) { REQUIRE_GPU(); on_gpu(kernel_constructs::queue_pipeline); }

}  // namespace
