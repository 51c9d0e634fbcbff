// The DMA-slice spooler (cuda_place/src/spooler.cpp) against a fake DMA engine: no CUDA, no GPU.
//
// The fake's "device memory" is host memory (a device address is a host pointer). h2d/d2h only *enqueue* a copy:
// one background thread per direction performs the copies in FIFO order, each after a small random delay, counts
// the bytes that have landed, and then completes the copy's marker. wait(marker) parks the calling activity on an
// apgas::detail::completion that the thread signals (from a foreign thread) and throws dead_place_exception if the
// copy was made to fail. The fake also checks the spooler's side of the contract as it goes (every slice address
// inside the right ring, never two DMAs in flight on one slice, at most `slices` DMAs in flight per direction, every
// marker waited for exactly once) and records violations, which every test asserts to be empty.
#include "spooler.hpp"
#include "support/run.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using apgas::detail::gpu::dma_engine;
using apgas::detail::gpu::spooler;
using apgas_test::run_on;

constexpr int fake_place = 7;  // the GPU place id the fake reports in its dead_place_exceptions

class fake_dma final : public dma_engine {
 public:
  struct options {
    int min_delay_us = 0;
    int max_delay_us = 20;
  };

  fake_dma(std::byte* ring_memory, std::size_t slice_bytes, int slices, options o)
      : base_(ring_memory), slice_(slice_bytes), slices_(slices), opt_(o) {
    for (int d = 0; d < 2; ++d) threads_[d] = std::thread([this, d] { serve(d); });
  }
  fake_dma(const fake_dma&) = delete;
  fake_dma& operator=(const fake_dma&) = delete;
  ~fake_dma() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  marker h2d(std::uintptr_t dst, const void* src, std::size_t n) override {
    return enqueue(0, reinterpret_cast<std::byte*>(dst), static_cast<const std::byte*>(src), n);
  }
  marker d2h(void* dst, std::uintptr_t src, std::size_t n) override {
    return enqueue(1, static_cast<std::byte*>(dst), reinterpret_cast<const std::byte*>(src), n);
  }

  void wait(marker m) override {
    op* o = nullptr;
    {
      std::lock_guard lock(m_);
      auto it = ops_.find(m);
      if (it == ops_.end()) {
        violations_.push_back("wait(" + std::to_string(m) + "): unknown or already released marker");
        throw std::logic_error("fake_dma: unknown marker");
      }
      o = it->second.get();
    }
    o->done.wait();  // parks the activity until the fake's thread signals it
    bool failed = false;
    {
      std::lock_guard lock(m_);
      failed = o->failed;
      outstanding_[o->dir] -= 1;
      in_flight_slices_.erase(o->slice);
      ops_.erase(m);
    }
    if (failed) {
      throw apgas::dead_place_exception(fake_place, "fake GPU place " + std::to_string(fake_place) +
                                                        ": injected DMA failure");
    }
  }

  // ---- failure injection ----
  /// Every DMA performed from now on fails (the GPU "died"); false: healthy again.
  void fail_all(bool on) {
    std::lock_guard lock(m_);
    fail_all_ = on;
  }
  /// The GPU dies after `k` more DMAs have been performed successfully.
  void die_after(int k) {
    std::lock_guard lock(m_);
    die_after_ = k;
  }
  /// DMAs touching device bytes [begin, begin + n) fail.
  void poison(const std::byte* begin, std::size_t n) {
    std::lock_guard lock(m_);
    poison_.push_back({begin, begin + n});
  }
  void heal() {
    std::lock_guard lock(m_);
    fail_all_ = false;
    die_after_ = -1;
    poison_.clear();
  }

  /// Hold every DMA until `k` are in flight at once (enqueued, not yet released by wait), or until 10 s passed.
  /// gathered() then says whether k were reached. One shot.
  void gather(int k) {
    std::lock_guard lock(m_);
    gather_ = k;
    gathered_ = false;
  }
  bool gathered() {
    std::lock_guard lock(m_);
    return gathered_;
  }

  // ---- observations ----
  std::uint64_t landed_bytes() const { return landed_.load(std::memory_order_acquire); }
  std::uint64_t enqueued_bytes() {
    std::lock_guard lock(m_);
    return enqueued_bytes_;
  }
  std::uint64_t dmas(int dir) {
    std::lock_guard lock(m_);
    return count_[dir];
  }
  int max_in_flight(int dir) {
    std::lock_guard lock(m_);
    return max_outstanding_[dir];
  }
  int max_in_flight_total() {
    std::lock_guard lock(m_);
    return max_total_;
  }
  void reset_max() {
    std::lock_guard lock(m_);
    max_outstanding_[0] = max_outstanding_[1] = max_total_ = 0;
  }
  std::size_t unreleased() {
    std::lock_guard lock(m_);
    return ops_.size();
  }
  std::vector<std::string> violations() {
    std::lock_guard lock(m_);
    return violations_;
  }

 private:
  struct op {
    int dir = 0;
    std::byte* dst = nullptr;
    const std::byte* src = nullptr;
    std::size_t n = 0;
    const std::byte* slice = nullptr;
    const std::byte* device = nullptr;
    bool failed = false;
    apgas::detail::completion done;
  };

  marker enqueue(int dir, std::byte* dst, const std::byte* src, std::size_t n) {
    std::lock_guard lock(m_);
    const marker id = next_++;
    auto o = std::make_unique<op>();
    o->dir = dir;
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->slice = dir == 0 ? src : dst;
    o->device = dir == 0 ? dst : src;
    check_slice(dir, o->slice, n);
    if (!in_flight_slices_.insert(o->slice).second) {
      violations_.push_back("two DMAs in flight on one slice (offset " + std::to_string(o->slice - base_) + ")");
    }
    outstanding_[dir] += 1;
    if (outstanding_[dir] > slices_) {
      violations_.push_back("more DMAs in flight in one direction than slices: " + std::to_string(outstanding_[dir]));
    }
    max_outstanding_[dir] = std::max(max_outstanding_[dir], outstanding_[dir]);
    max_total_ = std::max(max_total_, outstanding_[0] + outstanding_[1]);
    count_[dir] += 1;
    enqueued_bytes_ += n;
    queue_[dir].push_back(o.get());
    ops_.emplace(id, std::move(o));
    cv_.notify_all();
    return id;
  }

  void check_slice(int dir, const std::byte* s, std::size_t n) {
    const std::byte* ring = base_ + static_cast<std::size_t>(dir) * static_cast<std::size_t>(slices_) * slice_;
    const std::byte* ring_end = ring + static_cast<std::size_t>(slices_) * slice_;
    if (s < ring || s >= ring_end || static_cast<std::size_t>(s - ring) % slice_ != 0) {
      violations_.push_back(std::string(dir == 0 ? "h2d" : "d2h") + " from/to memory that is not a slice of its ring");
    }
    if (n == 0 || n > slice_) violations_.push_back("a DMA of " + std::to_string(n) + " bytes (slice " +
                                                    std::to_string(slice_) + ")");
  }

  bool poisoned(const op& o) const {
    for (const auto& [b, e] : poison_) {
      if (o.device < e && o.device + o.n > b) return true;
    }
    return false;
  }

  void serve(int dir) {
    ::prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: the delays below are meant to be short
    std::mt19937 rng(1234u + static_cast<unsigned>(dir));
    std::uniform_int_distribution<int> delay(opt_.min_delay_us, opt_.max_delay_us);
    std::unique_lock lock(m_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_[dir].empty(); });
      if (queue_[dir].empty()) return;  // stop_ and nothing left
      if (gather_ > 0) {
        const int k = gather_;
        (void)cv_.wait_for(lock, std::chrono::seconds(10),
                           [&] { return stop_ || gather_ != k || outstanding_[0] + outstanding_[1] >= k; });
        if (gather_ == k) {  // the first thread to get here ends the gathering, for both
          gathered_ = outstanding_[0] + outstanding_[1] >= k;
          gather_ = 0;
          cv_.notify_all();
        }
      }
      op* o = queue_[dir].front();
      queue_[dir].pop_front();
      lock.unlock();
      const int us = delay(rng);
      if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
      lock.lock();
      bool fail = fail_all_ || poisoned(*o);
      if (!fail && die_after_ >= 0) {
        if (die_after_ == 0) {
          fail_all_ = true;
          fail = true;
        } else {
          die_after_ -= 1;
        }
      }
      lock.unlock();
      if (fail) {
        o->failed = true;
      } else {
        std::memcpy(o->dst, o->src, o->n);
        landed_.fetch_add(o->n, std::memory_order_acq_rel);
      }
      o->done.signal();  // o may be gone from here on (the waiter releases it)
      lock.lock();
    }
  }

  std::byte* base_;
  std::size_t slice_;
  int slices_;
  options opt_;

  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  marker next_ = 1;
  std::unordered_map<marker, std::unique_ptr<op>> ops_;
  std::deque<op*> queue_[2];
  std::set<const std::byte*> in_flight_slices_;
  int outstanding_[2] = {0, 0};
  int max_outstanding_[2] = {0, 0};
  int max_total_ = 0;
  std::uint64_t count_[2] = {0, 0};
  std::uint64_t enqueued_bytes_ = 0;
  std::atomic<std::uint64_t> landed_{0};
  bool fail_all_ = false;
  int die_after_ = -1;
  std::vector<std::pair<const std::byte*, const std::byte*>> poison_;
  int gather_ = 0;
  bool gathered_ = false;
  std::vector<std::string> violations_;
  std::thread threads_[2];
};

// A hang (a lost slice, a lost wake-up) ends the test binary with a message after 60 s instead of at the ctest
// time-out.
class watchdog {
 public:
  watchdog() : t_([this] {
    std::unique_lock lock(m_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [this] { return done_; })) {
      const auto* info = testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "test_spooler: HANG: %s.%s did not finish within 60 s\n",
                   info != nullptr ? info->test_suite_name() : "?", info != nullptr ? info->name() : "?");
      std::fflush(stderr);
      std::_Exit(3);
    }
  }) {}
  ~watchdog() {
    {
      std::lock_guard lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

// A spooler with its ring memory and its fake device; built inside a test body (inside apgas::run), so that the
// fake's threads are joined before the run ends.
struct rig {
  watchdog dog;
  std::vector<std::byte> rings;
  fake_dma dev;
  spooler sp;
  rig(std::size_t slice, int slices, fake_dma::options o = {})
      : rings(2 * static_cast<std::size_t>(slices) * slice),
        dev(rings.data(), slice, slices, o),
        sp(dev, rings.data(), slice, slices) {}
  ~rig() {
    EXPECT_EQ(dev.unreleased(), 0u) << "markers the spooler never waited for";
    for (const auto& v : dev.violations()) ADD_FAILURE() << "spooler broke the DMA contract: " << v;
  }
};

std::uintptr_t addr(const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

// A buffer with `guard` canary bytes on both sides; the payload starts at an odd address.
struct guarded {
  static constexpr std::size_t guard = 61;
  static constexpr std::byte canary{0xEE};
  std::vector<std::byte> v;
  explicit guarded(std::size_t n) : v(n + 2 * guard, canary) {}
  std::byte* data() { return v.data() + guard; }
  std::size_t size() const { return v.size() - 2 * guard; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < guard; ++i) {
      if (v[i] != canary || v[v.size() - 1 - i] != canary) return false;
    }
    return true;
  }
  bool equals(const std::vector<std::byte>& w) const {
    return std::memcmp(v.data() + guard, w.data(), w.size()) == 0 && w.size() == size();
  }
};

/// The DMAs a copy of n bytes takes: one per chunk of the spooler's chunk size.
std::size_t chunks(const apgas::detail::gpu::spooler& sp, std::size_t n) {
  const std::size_t c = sp.chunk_bytes(n);
  return (n + c - 1) / c;
}

class Spooler : public testing::TestWithParam<int> {};

// Every size from 1 byte to a few MiB, both directions, 3 slices of 4 KiB: whole slices, partial last slices, fewer
// chunks than slices, many more. The finish ends with every byte landed, and exactly one DMA per chunk was made.
TEST_P(Spooler, ContentOfEverySizeBothWays) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    rig r(slice, 3);
    std::uint64_t total = 0;
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{4095}, std::size_t{4096},
                          std::size_t{4097}, std::size_t{8192}, std::size_t{12288}, std::size_t{12289},
                          std::size_t{16384 + 5}, std::size_t{100000}, std::size_t{1} << 20,
                          (std::size_t{3} << 20) + 17}) {
      const std::vector<std::byte> src = pattern(n, static_cast<unsigned>(n));
      guarded device(n);
      const std::uint64_t h2d_before = r.dev.dmas(0);
      apgas::finish([&] { r.sp.put(addr(device.data()), src.data(), n); });
      total += n;
      EXPECT_EQ(r.dev.landed_bytes(), total) << n << " bytes: the finish ended before every DMA landed";
      EXPECT_TRUE(device.equals(src)) << n << " bytes host -> device";
      EXPECT_TRUE(device.guards_intact()) << n << " bytes host -> device wrote outside the destination";
      EXPECT_EQ(r.dev.dmas(0) - h2d_before, chunks(r.sp, n)) << n << " bytes";

      // The device data changes on the device side; read it back into a fresh buffer.
      const std::vector<std::byte> on_device = pattern(n, static_cast<unsigned>(n) + 99);
      std::memcpy(device.data(), on_device.data(), n);
      guarded back(n);
      const std::uint64_t d2h_before = r.dev.dmas(1);
      apgas::finish([&] { r.sp.get(back.data(), addr(device.data()), n); });
      total += n;
      EXPECT_EQ(r.dev.landed_bytes(), total) << n << " bytes";
      EXPECT_TRUE(back.equals(on_device)) << n << " bytes device -> host";
      EXPECT_TRUE(back.guards_intact()) << n << " bytes device -> host wrote outside the destination";
      EXPECT_EQ(r.dev.dmas(1) - d2h_before, chunks(r.sp, n)) << n << " bytes";
    }
    EXPECT_LE(r.dev.max_in_flight(0), 3);
    EXPECT_LE(r.dev.max_in_flight(1), 3);
  });
}

// A copy smaller than all the slices together is spread over them (chunk_bytes), so that several pumps copy on the
// host at once: 8 slices of 1 MiB take a 1 MiB copy as 8 chunks of 128 KiB, 200 KiB as 2 (the 128 KiB floor), 3 MiB
// as 8 of 384 KiB, 40 MiB as whole slices.
TEST_P(Spooler, SmallCopiesAreSpreadOverTheSlices) {
  run_on(GetParam(), [] {
    constexpr std::size_t MiB = std::size_t{1} << 20;
    rig r(MiB, 8);
    EXPECT_EQ(r.sp.chunk_bytes(MiB), 128 * 1024u);
    EXPECT_EQ(r.sp.chunk_bytes(200 * 1024), 128 * 1024u);
    EXPECT_EQ(r.sp.chunk_bytes(3 * MiB), 384 * 1024u);
    EXPECT_EQ(r.sp.chunk_bytes(40 * MiB), MiB);
    EXPECT_EQ(r.sp.chunk_bytes(1), 128 * 1024u);
    for (std::size_t n : {MiB, std::size_t{200 * 1024}, 3 * MiB + 5, 40 * MiB}) {
      const std::vector<std::byte> src = pattern(n, static_cast<unsigned>(n) + 7);
      guarded device(n);
      const std::uint64_t before = r.dev.dmas(0);
      apgas::finish([&] { r.sp.put(addr(device.data()), src.data(), n); });
      EXPECT_TRUE(device.equals(src)) << n << " bytes host -> device";
      EXPECT_TRUE(device.guards_intact()) << n;
      EXPECT_EQ(r.dev.dmas(0) - before, chunks(r.sp, n)) << n << " bytes";
      guarded back(n);
      apgas::finish([&] { r.sp.get(back.data(), addr(device.data()), n); });
      EXPECT_TRUE(back.equals(src)) << n << " bytes device -> host";
      EXPECT_TRUE(back.guards_intact()) << n;
    }
    EXPECT_EQ(chunks(r.sp, MiB), 8u);
    EXPECT_LE(r.dev.max_in_flight(0), 8);
    EXPECT_LE(r.dev.max_in_flight(1), 8);
  });
}

// A zero-byte copy makes no DMA and starts nothing.
TEST_P(Spooler, ZeroBytesIsNothing) {
  run_on(GetParam(), [] {
    rig r(4096, 2);
    std::byte b{};
    apgas::finish([&] {
      r.sp.put(addr(&b), &b, 0);
      r.sp.get(&b, addr(&b), 0);
    });
    EXPECT_EQ(r.dev.dmas(0) + r.dev.dmas(1), 0u);
    EXPECT_EQ(r.dev.landed_bytes(), 0u);
  });
}

// Far more copies than slices, in both directions at once, each of its own size, in one finish, several issued from
// nested asyncs: nothing deadlocks, every byte is right, never more DMAs in flight than slices.
TEST_P(Spooler, MoreConcurrentCopiesThanSlices) {
  run_on(GetParam(), [] {
    for (int slices : {1, 3}) {
      constexpr std::size_t slice = 4096;
      rig r(slice, slices);
      constexpr int copies = 24;
      std::vector<std::vector<std::byte>> src(copies), expect_back(copies);
      std::vector<std::unique_ptr<guarded>> device(copies), back(copies);
      std::uint64_t total = 0;
      for (int i = 0; i < copies; ++i) {
        const std::size_t n = 1 + static_cast<std::size_t>(i) * 2111 + (i % 5 == 0 ? 3 * slice : 0);
        src[i] = pattern(n, 1000u + static_cast<unsigned>(i));
        device[i] = std::make_unique<guarded>(n);
        back[i] = std::make_unique<guarded>(n);
        if (i % 2 == 1) {  // odd copies go device -> host from data already "on the device"
          expect_back[i] = pattern(n, 5000u + static_cast<unsigned>(i));
          std::memcpy(device[i]->data(), expect_back[i].data(), n);
        }
        total += n;
      }
      apgas::finish([&] {
        for (int i = 0; i < copies; ++i) {
          const std::size_t n = src[i].size();
          if (i % 2 == 0) {
            if (i % 4 == 0) {
              r.sp.put(addr(device[i]->data()), src[i].data(), n);
            } else {
              apgas::async([&, i, n] { r.sp.put(addr(device[i]->data()), src[i].data(), n); });
            }
          } else {
            apgas::async([&, i, n] { r.sp.get(back[i]->data(), addr(device[i]->data()), n); });
          }
        }
      });
      EXPECT_EQ(r.dev.landed_bytes(), total) << slices << " slices";
      for (int i = 0; i < copies; ++i) {
        if (i % 2 == 0) {
          EXPECT_TRUE(device[i]->equals(src[i])) << "copy " << i << ", " << slices << " slices";
          EXPECT_TRUE(device[i]->guards_intact()) << "copy " << i;
        } else {
          EXPECT_TRUE(back[i]->equals(expect_back[i])) << "copy " << i << ", " << slices << " slices";
          EXPECT_TRUE(back[i]->guards_intact()) << "copy " << i;
        }
      }
      EXPECT_LE(r.dev.max_in_flight(0), slices);
      EXPECT_LE(r.dev.max_in_flight(1), slices);
    }
  });
}

// THE promise: when the finish around async copies returns, every DMA has landed. Slow DMAs (1-3 ms each) make a
// spooler that ends its pumps on enqueue (X10's race) return while bytes are still in flight. Also from inside
// several concurrent finishes, each checking its own copy.
TEST_P(Spooler, FinishReturnsOnlyWhenEveryDmaHasLanded) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    rig r(slice, 3, {1000, 3000});
    const std::size_t n = 7 * slice + 100;  // 8 chunks, more than the 3 slices
    const std::vector<std::byte> src = pattern(n, 42);
    std::vector<std::byte> device(n), back(n);
    apgas::finish([&] { r.sp.put(addr(device.data()), src.data(), n); });
    EXPECT_EQ(r.dev.landed_bytes(), n);
    EXPECT_EQ(r.dev.landed_bytes(), r.dev.enqueued_bytes());
    EXPECT_TRUE(device == src);
    apgas::finish([&] { apgas::async([&] { r.sp.get(back.data(), addr(device.data()), n); }); });
    EXPECT_EQ(r.dev.landed_bytes(), 2 * n);
    EXPECT_TRUE(back == src);

    // Four finishes at once, each around its own copies: each sees its own bytes complete when it ends.
    constexpr int k = 4;
    std::vector<std::vector<std::byte>> dev(k, std::vector<std::byte>(n)), out(k, std::vector<std::byte>(n));
    std::atomic<int> good{0};
    apgas::finish([&] {
      for (int i = 0; i < k; ++i) {
        apgas::async([&, i] {
          const std::vector<std::byte> mine = pattern(n, 77u + static_cast<unsigned>(i));
          apgas::finish([&] { r.sp.put(addr(dev[i].data()), mine.data(), n); });
          const bool put_ok = dev[i] == mine;  // read immediately after the finish, no other synchronisation
          apgas::finish([&] { r.sp.get(out[i].data(), addr(dev[i].data()), n); });
          if (put_ok && out[i] == mine) good += 1;
        });
      }
    });
    EXPECT_EQ(good.load(), k);
    EXPECT_EQ(r.dev.landed_bytes(), r.dev.enqueued_bytes());
  });
}

// Copies overlap: the fake holds every DMA until as many are in flight as there are slices (10 s at most), so it
// is reached only if the spooler fills every slice while the others wait for their DMA. Both directions at once:
// 2 x slices.
TEST_P(Spooler, CopiesOverlapOnEverySlice) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    constexpr int slices = 3;
    rig r(slice, slices);
    const std::size_t n = 12 * slice;
    const std::vector<std::byte> src = pattern(n, 3);
    std::vector<std::byte> device(n), back(n);
    r.dev.gather(slices);
    apgas::finish([&] { r.sp.put(addr(device.data()), src.data(), n); });
    EXPECT_TRUE(r.dev.gathered()) << "never " << slices << " DMAs in flight at once (max " << r.dev.max_in_flight(0)
                                  << ")";
    EXPECT_GT(r.dev.max_in_flight(0), 1);
    EXPECT_EQ(r.dev.max_in_flight(0), slices);
    EXPECT_TRUE(device == src);

    const std::vector<std::byte> src2 = pattern(n, 4);
    std::vector<std::byte> device2(n);
    r.dev.reset_max();
    r.dev.gather(2 * slices);
    apgas::finish([&] {
      r.sp.put(addr(device2.data()), src2.data(), n);
      r.sp.get(back.data(), addr(device.data()), n);
    });
    EXPECT_TRUE(r.dev.gathered()) << "both rings were not busy at once (max " << r.dev.max_in_flight_total() << ")";
    EXPECT_EQ(r.dev.max_in_flight_total(), 2 * slices);
    EXPECT_TRUE(device2 == src2);
    EXPECT_TRUE(back == src);
  });
}

// Overlap without holding anything back: with random DMA delays and several copies, more than one slice is owned at
// some moment.
TEST_P(Spooler, SeveralSlicesInFlightUnderRandomDelays) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    rig r(slice, 4, {50, 200});
    const std::size_t n = 64 * slice + 1;
    const std::vector<std::byte> src = pattern(n, 8);
    std::vector<std::byte> device(n);
    apgas::finish([&] { r.sp.put(addr(device.data()), src.data(), n); });
    EXPECT_GT(r.dev.max_in_flight(0), 1) << "the pumps ran one after the other";
    EXPECT_TRUE(device == src);
  });
}

void expect_dead_places(const std::exception_ptr& e, std::size_t n, const char* what) {
  ASSERT_TRUE(e) << what << ": the finish did not throw";
  const bool multiple = apgas_test::inspect_as<apgas::multiple_exceptions>(e, [&](const apgas::multiple_exceptions& m) {
    EXPECT_EQ(m.size(), n) << what << ": one exception per failed copy";
    const auto dead = m.of_type<apgas::dead_place_exception>();
    EXPECT_EQ(dead.size(), n) << what;
    for (const auto* d : dead) EXPECT_EQ(d->where(), fake_place) << what;
  });
  EXPECT_TRUE(multiple) << what << ": expected multiple_exceptions";
}

// Failing DMAs: the finish throws multiple_exceptions with exactly one dead_place_exception per failed copy (however
// many of its chunks failed), the healthy copies of the same finish complete, nothing hangs, and afterwards every
// slice is back in its ring (a later copy gets every slice in flight at once again).
TEST_P(Spooler, FailedDmasAreOneDeadPlacePerCopyAndReturnTheirSlices) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    constexpr int slices = 2;
    rig r(slice, slices);

    // (a) Per-copy failures: copies touching a poisoned device buffer fail; the others in the same finish succeed.
    const std::size_t n = 5 * slice + 9;
    std::vector<std::byte> bad(4 * n), good(4 * n, std::byte{0});
    r.dev.poison(bad.data(), bad.size());
    std::vector<std::byte> src = pattern(4 * n, 11);
    std::vector<std::byte> from_good = pattern(n, 12);
    std::memcpy(good.data() + 3 * n, from_good.data(), n);
    std::vector<std::byte> sink_bad(n), sink_good(n);
    std::exception_ptr caught;
    try {
      apgas::finish([&] {
        for (int i = 0; i < 3; ++i) r.sp.put(addr(bad.data() + i * n), src.data() + i * n, i == 1 ? 10 : n);  // 3 fail
        r.sp.get(sink_bad.data(), addr(bad.data() + 3 * n), n);                                        // 1 fails
        for (int i = 0; i < 3; ++i) {
          apgas::async([&, i] { r.sp.put(addr(good.data() + i * n), src.data() + i * n, n); });  // 3 succeed
        }
        r.sp.get(sink_good.data(), addr(good.data() + 3 * n), n);  // succeeds
      });
    } catch (...) {
      caught = std::current_exception();
    }
    expect_dead_places(caught, 4, "poisoned buffer");
    EXPECT_EQ(std::memcmp(good.data(), src.data(), 3 * n), 0) << "a healthy copy next to failing ones";
    EXPECT_TRUE(sink_good == from_good);

    // (b) The GPU dies: every copy in flight fails, each once.
    r.dev.heal();
    r.dev.fail_all(true);
    caught = nullptr;
    try {
      apgas::finish([&] {
        for (int i = 0; i < 4; ++i) {
          apgas::async([&, i] { r.sp.put(addr(good.data() + i * n), src.data() + i * n, n); });
        }
        r.sp.get(sink_good.data(), addr(good.data()), n);
      });
    } catch (...) {
      caught = std::current_exception();
    }
    expect_dead_places(caught, 5, "dead GPU");

    // (c) It dies in the middle of one long copy: chunks before the failure landed, one exception.
    r.dev.heal();
    r.dev.die_after(5);
    caught = nullptr;
    std::vector<std::byte> long_dev(40 * slice);
    const std::vector<std::byte> long_src = pattern(long_dev.size(), 13);
    try {
      apgas::finish([&] { r.sp.put(addr(long_dev.data()), long_src.data(), long_src.size()); });
    } catch (...) {
      caught = std::current_exception();
    }
    expect_dead_places(caught, 1, "died during a copy");

    // (d) Healthy again: every slice of both rings is free — a copy in each direction gets all of them in flight
    // at once — and the data is right.
    r.dev.heal();
    const std::size_t m = 8 * slice;
    const std::vector<std::byte> again = pattern(m, 14);
    const std::vector<std::byte> up = pattern(m, 15);
    std::vector<std::byte> dev_in(m), dev_out(up), host_out(m);
    r.dev.reset_max();
    r.dev.gather(2 * slices);
    apgas::finish([&] {
      r.sp.put(addr(dev_in.data()), again.data(), m);
      r.sp.get(host_out.data(), addr(dev_out.data()), m);
    });
    EXPECT_TRUE(r.dev.gathered()) << "a slice was lost after the failures (max in flight "
                                  << r.dev.max_in_flight_total() << " of " << 2 * slices << ")";
    EXPECT_TRUE(dev_in == again);
    EXPECT_TRUE(host_out == up);
  });
}

// Failures while more copies than slices wait for a slice: the failing pumps hand their slices on, so the waiting
// copies still run; one slice per direction makes every copy queue behind the failing ones.
TEST_P(Spooler, FailuresDoNotStarveWaitingCopies) {
  run_on(GetParam(), [] {
    constexpr std::size_t slice = 4096;
    rig r(slice, 1, {0, 50});
    const std::size_t n = 3 * slice + 1;
    std::vector<std::byte> bad(6 * n), good(6 * n);
    r.dev.poison(bad.data(), bad.size());
    const std::vector<std::byte> src = pattern(6 * n, 21);
    std::exception_ptr caught;
    try {
      apgas::finish([&] {
        for (int i = 0; i < 6; ++i) {
          apgas::async([&, i] { r.sp.put(addr(bad.data() + i * n), src.data() + i * n, n); });
          apgas::async([&, i] { r.sp.put(addr(good.data() + i * n), src.data() + i * n, n); });
        }
      });
    } catch (...) {
      caught = std::current_exception();
    }
    expect_dead_places(caught, 6, "one slice, six failing copies");
    EXPECT_TRUE(good == src);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Spooler, testing::ValuesIn(apgas_test::worker_counts), apgas_test::workers_name);

// The spooler reports its shape.
TEST(SpoolerShape, SliceBytesAndCount) {
  run_on(1, [] {
    rig r(65536, 5);
    EXPECT_EQ(r.sp.slice_bytes(), 65536u);
    EXPECT_EQ(r.sp.slices(), 5);
  });
}

}  // namespace
