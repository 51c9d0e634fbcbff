// Launch-shape rules of GPU places as plain arithmetic (cuda_place/src/launch_shape.cpp): the pre-launch checks of
// an explicit grid, and X10's automatic (blocks, threads) table, the documented fallback of auto_grid when the
// occupancy API does not answer. No CUDA: the limits are fed by hand.
//
// The expected shapes below are worked out by hand from X10's table (its CUDA back end's automatic shape, Fermi era)
// — try (blocks per SM, threads per block) in this order and take the first that fits the threads, registers and shared memory of one
// SM; blocks = chosen x SM count:
//   (8,128) (4,256) (2,512) (5,192) (3,320) (7,128) (2,448) (6,128) (4,192) (3,256) (2,384) (5,128) (2,320) (3,192)
//   (8,64) (4,128) (2,256) (1,512) (7,64) (1,448) (6,64) (3,128) (2,192) (1,384) (5,64) (1,320) (4,64) (2,128)
//   (1,256) (3,64) (1,192) (2,64) (1,128) (1,64)
// and the code's fit rules: threads <= the function's and the device's per-block limits; blocks * threads <= threads
// per SM; blocks * threads * regs <= registers per SM; threads * regs <= registers per block; static + dynamic shared
// memory <= the per-block opt-in limit; blocks * (static + dynamic) <= shared memory per SM.
#include "launch_shape.hpp"

#include <apgas/error.hpp>
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using apgas::grid;
using apgas::kernel_launch_error;
using apgas::detail::gpu::check_launch;
using apgas::detail::gpu::device_limits;
using apgas::detail::gpu::function_limits;
using apgas::detail::gpu::x10_auto_grid;

constexpr int place = 5;

// A Fermi-class device (Tesla C2050-like: 14 SMs).
device_limits fermi() {
  device_limits d;
  d.sms = 14;
  d.max_threads_per_block = 1024;
  d.max_blocks = 65535;
  d.max_shared_optin = 48 * 1024;
  d.shared_per_sm = 48 * 1024;
  d.threads_per_sm = 1536;
  d.regs_per_sm = 32768;
  d.regs_per_block = 32768;
  return d;
}

// An H100 SXM-like device: 132 SMs, 228 KiB shared per SM of which 227 KiB per block with the opt-in.
device_limits h100() {
  device_limits d;
  d.sms = 132;
  d.max_threads_per_block = 1024;
  d.max_blocks = 2147483647;
  d.max_shared_optin = 227 * 1024;
  d.shared_per_sm = 228 * 1024;
  d.threads_per_sm = 2048;
  d.regs_per_sm = 65536;
  d.regs_per_block = 65536;
  return d;
}

function_limits fn(int regs, std::size_t static_shared = 0, int max_threads = 1024) {
  function_limits f;
  f.max_threads_per_block = max_threads;
  f.regs_per_thread = regs;
  f.static_shared = static_shared;
  return f;
}

// The message of the kernel_launch_error f() throws (with its code checked), or a test failure.
std::string launch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const kernel_launch_error& e) {
    EXPECT_EQ(e.code(), 1) << "CUDA_ERROR_INVALID_VALUE, what the driver would have said: " << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected kernel_launch_error, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected kernel_launch_error, nothing was thrown";
  return "";
}

void expect_mentions(const std::string& what, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' missing in: " << what;
}

// (blocks, threads), comparable and printable by gtest.
std::pair<int, int> shape(const grid& g) { return {g.blocks.x, g.threads.x}; }

// ---- check_launch ------------------------------------------------------------------------------------------------

TEST(CheckLaunch, InRangeLaunchesPass) {
  const device_limits d = fermi();
  EXPECT_NO_THROW(check_launch(grid{1, 1}, 0, d, fn(20), place));
  EXPECT_NO_THROW(check_launch(grid{65535, 1024}, 0, d, fn(20), place));  // both limits exactly
  EXPECT_NO_THROW(check_launch(grid{100, 256}, 48 * 1024, d, fn(20), place));  // all the opt-in memory
  EXPECT_NO_THROW(check_launch(grid{100, 256}, 48 * 1024 - 1000, d, fn(20, 1000), place));  // opt-in minus static
  EXPECT_NO_THROW(check_launch(grid{7, 256}, 0, d, fn(20, 0, 256), place));  // the function's own limit exactly
  const device_limits h = h100();
  EXPECT_NO_THROW(check_launch(grid{2147483647, 1024}, 227 * 1024, h, fn(32), place));
  EXPECT_NO_THROW(check_launch(grid{1056, 128}, 100 * 1024, h, fn(32, 4096), place));
}

TEST(CheckLaunch, ZeroAndNegativeBlocks) {
  for (int blocks : {0, -1, -65536}) {
    const std::string what = launch_error([&] { check_launch(grid{blocks, 32}, 0, fermi(), fn(20), place); });
    expect_mentions(what, {"grid of " + std::to_string(blocks) + " blocks", "expected 1 to 65535", "place 5"});
  }
}

TEST(CheckLaunch, TooManyBlocks) {
  const std::string what = launch_error([] { check_launch(grid{65536, 32}, 0, fermi(), fn(20), place); });
  expect_mentions(what, {"65536 blocks", "expected 1 to 65535", "GPU place 5"});
  device_limits small = fermi();
  small.max_blocks = 1000;
  const std::string w2 = launch_error([&] { check_launch(grid{1001, 32}, 0, small, fn(20), place); });
  expect_mentions(w2, {"1001 blocks", "expected 1 to 1000"});
  EXPECT_NO_THROW(check_launch(grid{1000, 32}, 0, small, fn(20), place));
}

TEST(CheckLaunch, ThreadsAboveTheFunctionsLimit) {
  // The device allows 1024, the function (registers, launch bounds) only 256: the smaller one is the limit.
  const std::string what = launch_error([] { check_launch(grid{4, 257}, 0, fermi(), fn(20, 0, 256), place); });
  expect_mentions(what, {"257 threads per block", "expected 1 to 256", "the device allows 1024", "this kernel 256"});
}

TEST(CheckLaunch, ThreadsAboveTheDevicesLimit) {
  const std::string what = launch_error([] { check_launch(grid{4, 1025}, 0, fermi(), fn(20), place); });
  expect_mentions(what, {"1025 threads per block", "expected 1 to 1024", "the device allows 1024"});
  device_limits d = fermi();
  d.max_threads_per_block = 512;  // a device below the function's limit
  const std::string w2 = launch_error([&] { check_launch(grid{4, 513}, 0, d, fn(20, 0, 1024), place); });
  expect_mentions(w2, {"513 threads per block", "expected 1 to 512", "the device allows 512", "this kernel 1024"});
  EXPECT_NO_THROW(check_launch(grid{4, 512}, 0, d, fn(20, 0, 1024), place));
}

TEST(CheckLaunch, ZeroThreads) {
  for (int threads : {0, -32}) {
    const std::string what = launch_error([&] { check_launch(grid{4, threads}, 0, fermi(), fn(20), place); });
    expect_mentions(what, {std::to_string(threads) + " threads per block", "expected 1 to 1024"});
  }
}

TEST(CheckLaunch, DynamicSharedMemoryAboveOptInMinusStatic) {
  // 48 KiB opt-in, 1000 B static: room for 48152 B.
  const std::string what = launch_error([] { check_launch(grid{4, 128}, 48153, fermi(), fn(20, 1000), place); });
  expect_mentions(what, {"dynamic shared memory 48153 B", "exceeds 48152 B", "49152 B per block",
                         "1000 B used statically", "place 5"});
  EXPECT_NO_THROW(check_launch(grid{4, 128}, 48152, fermi(), fn(20, 1000), place));
  // No static memory: the whole opt-in limit, not a byte more.
  const std::string w2 = launch_error([] { check_launch(grid{4, 128}, 49153, fermi(), fn(20), place); });
  expect_mentions(w2, {"49153 B", "exceeds 49152 B"});
  // H100: 227 KiB with the opt-in (above the 48 KiB default, which is not the limit).
  EXPECT_NO_THROW(check_launch(grid{4, 128}, 200 * 1024, h100(), fn(32, 8192), place));
  const std::string w3 = launch_error([] { check_launch(grid{4, 128}, 224 * 1024, h100(), fn(32, 8192), place); });
  expect_mentions(w3, {std::to_string(224 * 1024) + " B", "exceeds " + std::to_string(227 * 1024 - 8192) + " B"});
  // Static memory already above the opt-in limit: no room at all.
  const std::string w4 = launch_error([] { check_launch(grid{1, 32}, 1, fermi(), fn(20, 50000), place); });
  expect_mentions(w4, {"dynamic shared memory 1 B", "exceeds 0 B"});
}

TEST(CheckLaunch, TheFirstViolationIsReported) {
  // Blocks are checked before threads, threads before shared memory.
  const std::string what = launch_error([] { check_launch(grid{0, 5000}, 1 << 20, fermi(), fn(20), place); });
  expect_mentions(what, {"grid of 0 blocks"});
  const std::string w2 = launch_error([] { check_launch(grid{1, 5000}, 1 << 20, fermi(), fn(20), place); });
  expect_mentions(w2, {"5000 threads per block"});
}

// ---- x10_auto_grid -----------------------------------------------------------------------------------------------

struct auto_case {
  const char* why;
  int regs;
  std::size_t static_shared;
  std::size_t dynamic_shared;
  int fn_max_threads;
  grid expect;
};

TEST(X10AutoGrid, FermiLimits) {
  const device_limits d = fermi();  // 14 SMs, 1536 threads, 32768 registers, 48 KiB shared per SM
  const auto_case cases[] = {
      {"16 regs: (8,128) fits easily", 16, 0, 0, 1024, {112, 128}},
      {"32 regs: (8,128) uses exactly 32768 registers", 32, 0, 0, 1024, {112, 128}},
      {"33 regs: 1024-thread entries need 33792 registers; (5,192) = 960 threads, 31680", 33, 0, 0, 1024, {70, 192}},
      {"40 regs: 960 threads need 38400, 896 need 35840; (6,128) = 768 threads, 30720", 40, 0, 0, 1024, {84, 128}},
      {"63 regs: at most 520 threads per SM; the first such entry is (8,64)", 63, 0, 0, 1024, {112, 64}},
      {"255 regs: at most 128 threads per SM and per block; (2,64) before (1,128)", 255, 0, 0, 1024, {28, 64}},
      {"10000 B shared: at most 4 blocks per SM, (4,256)", 16, 0, 10000, 1024, {56, 256}},
      {"4000 static + 16000 dynamic: at most 2 blocks, (2,512)", 16, 4000, 16000, 1024, {28, 512}},
      {"6000 static + 6000 dynamic: 4 blocks (8 without the static part), (4,256)", 16, 6000, 6000, 1024, {56, 256}},
      {"30000 B shared: one block per SM, the first is (1,512)", 16, 0, 30000, 1024, {14, 512}},
      {"48 KiB shared: one block", 16, 0, 48 * 1024, 1024, {14, 512}},
      {"launch bounds 256: (8,128) fits", 16, 0, 0, 256, {112, 128}},
      {"launch bounds 128 and one block per SM: (1,128)", 16, 0, 30000, 128, {14, 128}},
      {"launch bounds 64, 63 regs: (8,64)", 63, 0, 0, 64, {112, 64}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(shape(x10_auto_grid(d, fn(c.regs, c.static_shared, c.fn_max_threads), c.dynamic_shared, place)),
              shape(c.expect))
        << c.why;
  }
}

TEST(X10AutoGrid, FermiDeviceThreadLimitAndRegistersPerBlock) {
  device_limits d = fermi();
  d.max_threads_per_block = 128;  // every entry above 128 threads is skipped
  // 33 regs: (8,128) = 1024 threads need 33792 registers; (7,128) = 896, 29568.
  EXPECT_EQ(shape(x10_auto_grid(d, fn(33), 0, place)), (std::pair{98, 128}));
  // Registers per block: 4096 per block, 40 per thread: 128 threads need 5120, 64 need 2560.
  device_limits r = h100();
  r.regs_per_block = 4096;
  EXPECT_EQ(shape(x10_auto_grid(r, fn(40), 0, place)), (std::pair{1056, 64}));
  r.regs_per_block = 5120;  // exactly 128 x 40
  EXPECT_EQ(shape(x10_auto_grid(r, fn(40), 0, place)), (std::pair{1056, 128}));
}

TEST(X10AutoGrid, H100Limits) {
  const device_limits d = h100();  // 132 SMs, 2048 threads, 65536 registers, 228 KiB shared per SM, 227 KiB opt-in
  const auto_case cases[] = {
      {"32 regs: (8,128)", 32, 0, 0, 1024, {1056, 128}},
      {"64 regs: (8,128) uses exactly 65536", 64, 0, 0, 1024, {1056, 128}},
      {"65 regs: 1024 threads need 66560; (5,192) = 960, 62400", 65, 0, 0, 1024, {660, 192}},
      {"128 regs: at most 512 threads per SM; (8,64)", 128, 0, 0, 1024, {1056, 64}},
      {"255 regs: at most 257 threads per SM; (4,64)", 255, 0, 0, 1024, {528, 64}},
      {"100 KiB dynamic: at most 2 blocks per SM; (2,512)", 32, 0, 100 * 1024, 1024, {264, 512}},
      {"64 regs + 60000 B shared: 3 blocks by memory, (2,512) by order", 64, 0, 60000, 1024, {264, 512}},
      {"60000 B shared, 16 regs: at most 3 blocks; (2,512) comes before (3,320)", 16, 0, 60000, 1024, {264, 512}},
      {"200 KiB dynamic (above 48 KiB: opted in): one block, (1,512)", 32, 0, 200 * 1024, 1024, {132, 512}},
      {"1 KiB static + 226 KiB dynamic = the opt-in limit exactly", 32, 1024, 226 * 1024, 1024, {132, 512}},
      {"launch bounds 192 and 50000 B: 4 blocks by memory, (4,192)", 32, 0, 50000, 192, {528, 192}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(shape(x10_auto_grid(d, fn(c.regs, c.static_shared, c.fn_max_threads), c.dynamic_shared, place)),
              shape(c.expect))
        << c.why;
  }
}

TEST(X10AutoGrid, NothingFits) {
  // Shared memory above the opt-in limit.
  std::string what = launch_error([] { (void)x10_auto_grid(fermi(), fn(16), 48 * 1024 + 1, place); });
  expect_mentions(what, {"auto_grid", "place 5", "not even one block of 64 threads fits", "16 registers per thread",
                         std::to_string(48 * 1024 + 1) + " B of shared memory per block"});
  what = launch_error([] { (void)x10_auto_grid(h100(), fn(32, 1024), 226 * 1024 + 1, place); });
  expect_mentions(what, {std::to_string(227 * 1024 + 1) + " B of shared memory per block"});  // static + dynamic
  // Registers: 64 threads x 600 registers > 32768.
  what = launch_error([] { (void)x10_auto_grid(fermi(), fn(600), 0, place); });
  expect_mentions(what, {"600 registers per thread", "0 B of shared memory"});
  // The function allows fewer than 64 threads per block: no entry of the table has so few.
  what = launch_error([] { (void)x10_auto_grid(fermi(), fn(16, 0, 32), 0, place); });
  expect_mentions(what, {"not even one block of 64 threads fits"});
  // An SM with fewer than 64 threads.
  device_limits tiny = fermi();
  tiny.threads_per_sm = 63;
  what = launch_error([&] { (void)x10_auto_grid(tiny, fn(16), 0, place); });
  expect_mentions(what, {"not even one block"});
}

}  // namespace
