// The constructs of kernel closures on CPU places (tests/kernels/constructs.hpp), against serial results; the same
// functions run on GPU places in tests/gpu. With 1 and 2 workers; with the checking mode on, which must stay silent
// on these correct kernels (shared-array accesses instrumented in this file).
#define APGAS_KERNEL_CHECKS 1
#include "kernels/constructs.hpp"
#include "support/run.hpp"

namespace {

struct setting {
  int workers;
  bool checking;
};

class KernelConstructs : public testing::TestWithParam<setting> {
 protected:
  template <class F>
  void run(F&& body) {
    apgas::config cfg;
    cfg.nthreads = GetParam().workers;
    cfg.kernel_check = GetParam().checking;
    bool finished = false;
    ASSERT_EQ(apgas::run(cfg, [&] {
                body(apgas::here());
                finished = true;
              }),
              0);
    ASSERT_TRUE(finished);
  }
};

TEST_P(KernelConstructs, Grid3d) { run(kernel_constructs::grid_3d); }
TEST_P(KernelConstructs, Atomics) { run(kernel_constructs::atomics); }
TEST_P(KernelConstructs, SharedHistograms) { run(kernel_constructs::shared_histograms); }
TEST_P(KernelConstructs, ClockedCollectives) { run(kernel_constructs::clocked_collectives); }
TEST_P(KernelConstructs, WarpOperations) { run(kernel_constructs::warp_ops); }
TEST_P(KernelConstructs, BlockLevel) { run(kernel_constructs::block_level); }
TEST_P(KernelConstructs, BlockStrideLoops) { run(kernel_constructs::block_stride); }
TEST_P(KernelConstructs, CoarseX) { run(kernel_constructs::coarse_x); }
TEST_P(KernelConstructs, SharedForms) { run(kernel_constructs::shared_forms); }
TEST_P(KernelConstructs, StagedTiles) { run(kernel_constructs::staged_tiles); }
TEST_P(KernelConstructs, LaunchBounds) { run(kernel_constructs::launch_bounds); }
TEST_P(KernelConstructs, InOrderQueue) { run(kernel_constructs::queue_pipeline); }

INSTANTIATE_TEST_SUITE_P(Places, KernelConstructs,
                         testing::Values(setting{1, false}, setting{2, false}, setting{2, true}),
                         [](const testing::TestParamInfo<setting>& i) {
                           return std::to_string(i.param.workers) + "workers" + (i.param.checking ? "_checking" : "");
                         });

}  // namespace
