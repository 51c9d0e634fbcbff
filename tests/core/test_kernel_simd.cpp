// The constructs of kernel closures (tests/kernels/constructs.hpp) on CPU places, in a file compiled for the widest
// vectors the build machine runs (tests/CMakeLists.txt: -mavx512f where it runs AVX-512 code, else -march=native)
// and with shared-array instrumentation off, so that block-level for_threads loops vectorise as in a user's release
// build. Their iterations are compiled as independent (`#pragma GCC ivdep`): what is only right while they stay
// scalar shows here. The shared-memory atomics did not (atomic_add(s, i, v) became a gather and a scatter under
// AVX-512, and lanes hitting one bin lost their updates: SharedHistograms).
#define APGAS_KERNEL_CHECKS 0
#include "kernels/constructs.hpp"
#include "support/run.hpp"

#include <string>

namespace {

class KernelSimd : public testing::TestWithParam<int> {
 protected:
  template <class F>
  void run(F&& body) {
    apgas_test::run_on(GetParam(), [&] { body(apgas::here()); });
  }
};

TEST_P(KernelSimd, SharedHistograms) { run(kernel_constructs::shared_histograms); }
TEST_P(KernelSimd, Atomics) { run(kernel_constructs::atomics); }
TEST_P(KernelSimd, BlockLevel) { run(kernel_constructs::block_level); }
TEST_P(KernelSimd, BlockStrideLoops) { run(kernel_constructs::block_stride); }
TEST_P(KernelSimd, CoarseX) { run(kernel_constructs::coarse_x); }
TEST_P(KernelSimd, StagedTiles) { run(kernel_constructs::staged_tiles); }
TEST_P(KernelSimd, ClockedCollectives) { run(kernel_constructs::clocked_collectives); }
TEST_P(KernelSimd, WarpOperations) { run(kernel_constructs::warp_ops); }

INSTANTIATE_TEST_SUITE_P(Workers, KernelSimd, testing::Values(1, 2),
                         [](const testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "workers"; });

}  // namespace
