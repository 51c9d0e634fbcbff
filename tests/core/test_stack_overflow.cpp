// Fiber stacks: an overflow hits the guard page and is reported as a stack overflow (never silent corruption), and
// config::stack_size really sets the depth an activity can reach.
#include "support/run.hpp"

#include <csignal>
#include <cstddef>
#include <cstdio>

namespace {

// Recursion the optimiser cannot turn into a loop: each frame's 1 KiB volatile array is read after the call.
long deep(long n) {
  volatile long frame[128];
  frame[0] = n;
  frame[127] = n;
  if (n == 0) return frame[0];
  const long below = deep(n - 1);
  return below + frame[127];
}

// The same with 16 KiB frames, each touched at its two ends only: without stack-clash protection a frame could step
// over the guard page.
long deep_wide(long n) {
  volatile char frame[16 * 1024];
  frame[0] = static_cast<char>(n);
  frame[sizeof frame - 1] = static_cast<char>(n);
  if (n == 0) return frame[0];
  const long below = deep_wide(n - 1);
  return below + frame[sizeof frame - 1];
}

constexpr long unbounded = 1L << 40;

// Runs `body` as an activity (a child of the main activity) in a fresh run; only returns if body does.
template <class F>
int run_in_async(std::size_t stack_size, F body) {
  apgas::config cfg;
  cfg.nthreads = 2;
  cfg.stack_size = stack_size;
  return apgas::run(cfg, [&] { apgas::finish([&] { apgas::async([&] { body(); }); }); });
}

template <class F>
int run_in_main(std::size_t stack_size, F body) {
  apgas::config cfg;
  cfg.nthreads = 1;
  cfg.stack_size = stack_size;
  return apgas::run(cfg, [&] { body(); });
}

}  // namespace

class StackOverflowDeathTest : public testing::Test {
 protected:
  void SetUp() override { testing::FLAGS_gtest_death_test_style = "threadsafe"; }
};

TEST_F(StackOverflowDeathTest, UnboundedRecursionInAnActivity) {
  // The process dies by SIGSEGV (as documented; it used to exit with status 139, the signal still blocked).
  EXPECT_EXIT((void)run_in_async(apgas::config::default_stack_size, [] { (void)deep(unbounded); }),
              testing::KilledBySignal(SIGSEGV), "stack overflow");
}

TEST_F(StackOverflowDeathTest, UnboundedRecursionInTheMainActivity) {
  EXPECT_DEATH((void)run_in_main(apgas::config::default_stack_size, [] { (void)deep(unbounded); }), "stack overflow");
}

TEST_F(StackOverflowDeathTest, UnboundedRecursionAfterTheActivityParked) {
  // The activity first blocks (so it now owns its fiber), then overflows.
  EXPECT_DEATH((void)run_in_async(apgas::config::default_stack_size,
                                  [] {
                                    apgas::finish([] { apgas::async([] {}); });
                                    int go = 0;
                                    apgas::finish([&] {
                                      apgas::async([&] { apgas::atomic([&] { go = 1; }); });
                                      apgas::when([&] { return go == 1; }, [] {});
                                    });
                                    (void)deep(unbounded);
                                  }),
               "stack overflow");
}

TEST_F(StackOverflowDeathTest, FramesLargerThanAPageStillHitTheGuardPage) {
  EXPECT_DEATH((void)run_in_async(apgas::config::default_stack_size, [] { (void)deep_wide(unbounded); }),
               "stack overflow");
}

TEST_F(StackOverflowDeathTest, DefaultStackIsTooSmallForSixHundredKiB) {
  // The counterpart of the test below: the same recursion does not fit the default 256 KiB.
  EXPECT_DEATH((void)run_in_async(apgas::config::default_stack_size, [] { (void)deep(600); }), "stack overflow");
}

TEST_F(StackOverflowDeathTest, MinimumStackSizeOverflowsEarly) {
  EXPECT_DEATH((void)run_in_async(apgas::config::min_stack_size, [] { (void)deep(128); }), "stack overflow");
}

TEST(StackOverflow, LargerStacksAllowDeeperRecursion) {
  long in_async = -1;
  ASSERT_EQ(run_in_async(std::size_t{1} << 20, [&] { in_async = deep(600); }), 0);  // ~600 KiB of frames
  EXPECT_EQ(in_async, 600L * 601L / 2);
  long in_main = -1;
  ASSERT_EQ(run_in_main(std::size_t{1} << 20, [&] { in_main = deep(600); }), 0);
  EXPECT_EQ(in_main, 600L * 601L / 2);
}

TEST(StackOverflow, ModestRecursionFitsTheDefaultStack) {
  long result = -1;
  ASSERT_EQ(run_in_async(apgas::config::default_stack_size, [&] { result = deep(150); }), 0);  // ~150 KiB
  EXPECT_EQ(result, 150L * 151L / 2);
}

namespace {
// Each activity spawns the next, then blocks for good (a condition that never holds): one more blocked fiber per
// activity, until no more can be made.
void blocked_chain() {
  apgas::async([] { blocked_chain(); });
  apgas::when([] { return false; }, [] {});
}

long max_map_count() {
  long v = 0;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v;
}
}  // namespace

// At the fiber limit the abort names what limits it: the memory mappings (vm.max_map_count), not the stack size.
TEST_F(StackOverflowDeathTest, TheFiberLimitNamesVmMaxMapCount) {
  const long limit = max_map_count();
  if (limit <= 0 || limit > 262144) GTEST_SKIP() << "vm.max_map_count is " << limit << ": too many fibers to reach it";
  EXPECT_DEATH(
      {
        apgas::config cfg;
        cfg.nthreads = 1;
        cfg.stack_size = apgas::config::min_stack_size;
        (void)apgas::run(cfg, [] { blocked_chain(); });
      },
      "cannot create a fiber for a blocking activity .*the limit vm.max_map_count is [0-9]+ .*raise vm.max_map_count");
}
