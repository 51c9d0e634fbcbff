// The page-locked staging cache of kernel launches (cuda_place/src/staging.cpp) against fake page-locked memory: blocks
// of power-of-two sizes are reused, the cache keeps no more than its limit between launches, and everything it holds
// goes back when it is destroyed.
#include "staging.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <set>

namespace {

using apgas::detail::gpu::host_memory;
using apgas::detail::gpu::staging_cache;

constexpr std::size_t KiB = 1024;

struct fake_memory final : host_memory {
  std::set<void*> live;
  int pins = 0;
  bool refuse = false;
  void* pin(std::size_t bytes) override {
    if (refuse) return nullptr;
    ++pins;
    void* p = std::malloc(bytes);
    live.insert(p);
    return p;
  }
  void unpin(void* p) noexcept override {
    EXPECT_EQ(live.erase(p), 1u) << "unpinned twice, or never pinned";
    std::free(p);
  }
};

TEST(Staging, BlocksArePowersOfTwoFrom64KiBAndAreReused) {
  fake_memory m;
  {
    staging_cache c(m, 1024 * KiB);
    auto a = c.take(1);
    EXPECT_EQ(a.bytes, 64 * KiB);
    auto b = c.take(64 * KiB + 1);
    EXPECT_EQ(b.bytes, 128 * KiB);
    EXPECT_EQ(m.pins, 2);
    c.give(a);
    c.give(b);
    EXPECT_EQ(c.kept_bytes(), 192 * KiB);
    auto a2 = c.take(100);  // the kept 64 KiB block
    EXPECT_EQ(a2.data, a.data);
    auto b2 = c.take(100 * KiB);
    EXPECT_EQ(b2.data, b.data);
    EXPECT_EQ(m.pins, 2);
    EXPECT_EQ(c.kept_bytes(), 0u);
    c.give(a2);
    c.give(b2);
    c.give({});  // a null block: nothing
  }
  EXPECT_TRUE(m.live.empty()) << "the cache's destructor must give back what it keeps";
}

TEST(Staging, TheCacheKeepsNoMoreThanItsLimit) {
  fake_memory m;
  staging_cache c(m, 256 * KiB);
  auto big = c.take(1024 * KiB);
  auto small = c.take(64 * KiB);
  c.give(big);
  c.give(small);
  EXPECT_EQ(c.kept_bytes(), 1088 * KiB);  // giving back never frees (the poller gives back)
  auto again = c.take(64 * KiB);          // taking trims: the 1 MiB block goes
  EXPECT_EQ(again.data, small.data);
  EXPECT_EQ(c.kept_bytes(), 0u);
  EXPECT_EQ(m.live.size(), 1u);
  c.give(again);
}

TEST(Staging, NoPageLockedMemoryIsBadAlloc) {
  fake_memory m;
  staging_cache c(m, 256 * KiB);
  m.refuse = true;
  EXPECT_THROW((void)c.take(10), std::bad_alloc);
}

}  // namespace
