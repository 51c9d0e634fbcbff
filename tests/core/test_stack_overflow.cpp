#include "support/run.hpp"

namespace {
// Recursion the optimiser cannot turn into a loop: each frame keeps a live volatile array.
long deep(long n) {
  volatile long frame[128];  // 1 KiB per frame
  frame[0] = n;
  if (n == 0) return frame[0];
  return deep(n - 1) + frame[0];
}

void overflow_in_an_activity() {
  apgas::config cfg;
  cfg.nthreads = 2;
  (void)apgas::run(cfg, [] {
    apgas::finish([] { apgas::async([] { (void)deep(1L << 40); }); });
  });
}
}  // namespace

TEST(StackOverflowDeathTest, GuardPageHitIsReported) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(overflow_in_an_activity(), "stack overflow in an activity");
}

TEST(StackOverflow, LargerStacksAllowDeeperRecursion) {
  apgas::config cfg;
  cfg.nthreads = 2;
  cfg.stack_size = 1 << 20;
  long result = -1;
  ASSERT_EQ(apgas::run(cfg, [&] {
              apgas::finish([&] { apgas::async([&] { result = deep(500); }); });  // ~600 KiB of frames
            }),
            0);
  EXPECT_EQ(result, 500L * 501L / 2);
}
