// The CUDA backend (cuda_place/src/backend.cpp, spooler.cpp) driven for real through the fake driver
// (tests/cuda_fake/fake_cuda.cpp, named by APGAS_CUDA_DRIVER): one host with 2 fake GPUs, places 1 and 2.
//
// Every test of the FakeGpu fixture (fake_fixture.hpp) ends by checking what the fake saw: no illegal address (a copy
// outside a live allocation, a use after free), no call in the wrong context, no stale handle, no double free, and no
// async copy from or to pageable memory (the backend must only hand page-locked memory to the DMA engine).
#include "cuda_fake/fake_control.hpp"
#include "cuda_fake/fake_fixture.hpp"
#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

using apgas_test::pattern;

namespace {

using apgas::place;
using namespace apgas_test::fake_gpu;
using apgas_test::fake;
using apgas_test::what_of;

// ---- the place tree -----------------------------------------------------------------------------------------------

TEST_F(FakeGpu, TreeHasOneHostAndTwoGpuPlaces) {
  run_gpu(gpu_config(), [] {
    EXPECT_EQ(apgas::num_hosts(), 1);
    EXPECT_EQ(apgas::places().size(), 1u);
    ASSERT_EQ(apgas::all_places().size(), 3u);
    const place host(0), g0(1), g1(2);
    EXPECT_EQ(apgas::here(), host);
    EXPECT_TRUE(host.is_host());
    EXPECT_FALSE(host.is_cuda());
    EXPECT_EQ(host.parent(), host);
    ASSERT_EQ(host.children().size(), 2u);
    EXPECT_EQ(host.children()[0], g0);
    EXPECT_EQ(host.children()[1], g1);
    for (place g : {g0, g1}) {
      EXPECT_TRUE(g.is_cuda());
      EXPECT_FALSE(g.is_host());
      EXPECT_EQ(g.parent(), host);
      EXPECT_TRUE(g.children().empty());
      EXPECT_EQ(apgas::place_of(g.id()), g);
    }
    EXPECT_EQ(apgas::describe(g0), "Fake GPU 0 (device 0, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::describe(g1), "Fake GPU 1 (device 1, 132 SMs, 80 GiB)");
    const std::string h = apgas::describe(host);
    EXPECT_EQ(h.rfind("host ", 0), 0u) << h;
    EXPECT_FALSE(contains(h, "no GPU places")) << h;
    EXPECT_TRUE(contains(what_of<apgas::bad_place_exception>([] { (void)apgas::place_of(3); }), "3 places"));
    EXPECT_THROW((void)apgas::describe(place(3)), apgas::bad_place_exception);
    EXPECT_THROW((void)apgas::describe(place(-1)), apgas::bad_place_exception);
    EXPECT_FALSE(place(3).is_cuda());
    EXPECT_FALSE(place(3).is_host());
  });
  // Streams of the two GPUs exist in the fake (4 kernel streams, 2 copy streams each), in their own contexts.
  EXPECT_EQ(counter(0, "streams"), 6);
  EXPECT_EQ(counter(1, "streams"), 6);
}

TEST_F(FakeGpu, GpuListChoosesDevicesInOrder) {
  run_gpu(gpu_config("1"), [] {
    ASSERT_EQ(apgas::all_places().size(), 2u);
    EXPECT_TRUE(place(1).is_cuda());
    EXPECT_EQ(place(1).parent(), place(0));
    EXPECT_EQ(apgas::describe(place(1)), "Fake GPU 1 (device 1, 132 SMs, 80 GiB)");
    // Its memory is device 1's.
    auto a = apgas::make_remote_array<int>(place(1), 16);
    EXPECT_EQ(fake().read<int>(1, a.token(), 16), std::vector<int>(16, 0));
    apgas::free_remote_array(a);
  });
  run_gpu(gpu_config("1,0"), [] {
    ASSERT_EQ(apgas::all_places().size(), 3u);
    EXPECT_EQ(apgas::describe(place(1)), "Fake GPU 1 (device 1, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::describe(place(2)), "Fake GPU 0 (device 0, 132 SMs, 80 GiB)");
  });
}

TEST_F(FakeGpu, GpusNoneGivesNoGpuPlaces) {
  run_gpu(gpu_config("none"), [] {
    EXPECT_EQ(apgas::all_places().size(), 1u);
    EXPECT_TRUE(place(0).children().empty());
    const std::string h = apgas::describe(place(0));
    EXPECT_TRUE(contains(h, "no GPU places: APGAS_GPUS=none")) << h;
    EXPECT_THROW((void)apgas::place_of(1), apgas::bad_place_exception);
  });
}

TEST_F(FakeGpu, MissingGpuStopsStartUp) {
  bool ran = false;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(gpu_config("5"), [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  EXPECT_TRUE(contains(err, "APGAS_GPUS='5'")) << err;
  EXPECT_TRUE(contains(err, "GPU 5 does not exist")) << err;
  EXPECT_TRUE(contains(err, "2 GPUs")) << err;
  // The next run starts normally.
  run_gpu(gpu_config(), [] { EXPECT_EQ(apgas::all_places().size(), 3u); });
}

// ---- remote arrays on GPU places ------------------------------------------------------------------------------------

// Each GPU's default memory pool keeps what it reserved (release threshold: everything) and was grown once at
// start-up and given back to the pool, so the first make_remote_array of a run does not pay the pool's growth.
TEST_F(FakeGpu, DefaultPoolKeepsItsMemoryAndIsWarmedAtStartUp) {
  run_gpu(fresh_gpu_config(), [] {  // a fresh accelerator: its devices are set up by this run
    for (place g : {place(1), place(2)}) {
      const int dev = device_of(g);
      EXPECT_EQ(fake().pool_release_threshold(dev), ~0ULL) << "device " << dev;
      EXPECT_GE(counter(dev, "allocs_total"), 1) << "device " << dev;
      fake().synchronize(dev);
      EXPECT_EQ(counter(dev, "allocations"), 0) << "device " << dev;  // the warm-up's block went back to the pool
    }
  });
}

TEST_F(FakeGpu, MakeRemoteArrayIsZeroFilledAndFreeReleasesIt) {
  run_gpu(gpu_config(), [] {
    for (place g : {place(1), place(2)}) {
      const int dev = device_of(g);
      const long long before = counter(dev, "allocations");
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{1023},
                            std::size_t{1024}, std::size_t{65537}, std::size_t{1} << 20}) {
        auto a = apgas::make_remote_array<int>(g, n);
        EXPECT_EQ(a.home(), g);
        EXPECT_EQ(a.size(), n);
        EXPECT_NE(a.token(), 0u);
        EXPECT_EQ(counter(dev, "allocations"), before + 1);
        EXPECT_THROW((void)a.data(), apgas::bad_place_exception);  // device memory: not usable on the host
        if (n > 0) {
          // On the device itself: zeros, not the 0xA5 the fake fills fresh allocations with.
          const std::vector<int> direct = fake().read<int>(dev, a.token(), n);
          EXPECT_EQ(first_difference(direct, std::vector<int>(n, 0)), -1) << "n = " << n;
          std::vector<int> back(n, -1);
          apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(back)); });
          EXPECT_EQ(first_difference(back, std::vector<int>(n, 0)), -1) << "n = " << n;
        }
        apgas::free_remote_array(a);
        EXPECT_EQ(a.token(), 0u);
        EXPECT_EQ(a.size(), 0u);
        fake().synchronize(dev);  // (a stream-ordered free: done when the stream gets there)
        EXPECT_EQ(counter(dev, "allocations"), before) << "n = " << n;
        apgas::free_remote_array(a);  // an empty array: nothing to do
      }
      // Freed twice through a stale copy: refused before the driver sees the address (with stream-ordered pools it
      // may already be a new array's).
      auto a = apgas::make_remote_array<int>(g, 100);
      const auto stale = a;
      apgas::free_remote_array(a);
      const long long bad = counter(dev, "invalid_frees");
      auto again = stale;
      EXPECT_THROW(apgas::free_remote_array(again), apgas::illegal_operation_exception);
      EXPECT_EQ(counter(dev, "invalid_frees"), bad);
      // Copies through the stale copy are refused the same way, before anything is enqueued (a real GPU would write
      // into whatever the pool gave that memory to, or fault and take the place down), by async_copy and by an
      // in-order queue; the place goes on working.
      std::vector<int> host(100, 1), back(100, 0);
      const auto live = apgas::make_remote_array<int>(g, 100);
      for (int k = 0; k < 3; ++k) {
        try {
          apgas::finish([&] {
            if (k == 0) apgas::async_copy(std::span<const int>(host), stale);
            if (k == 1) apgas::async_copy(stale, 0, std::span<int>(back));
            if (k == 2) apgas::async_copy(stale, 0, live, 0, 100);
          });
          ADD_FAILURE() << "copy " << k << " through a freed array";
        } catch (const apgas::illegal_operation_exception& e) {
          EXPECT_NE(std::string(e.what()).find("not inside a live remote_array at GPU place"), std::string::npos)
              << e.what();
        } catch (const apgas::multiple_exceptions& m) {
          ASSERT_EQ(m.size(), 1u) << m.what();
          EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 1u) << m.what();
        }
      }
      try {
        apgas::finish([&] {
          auto q = apgas::in_order(g);
          q.async_copy(std::span<const int>(host), stale);
        });
        ADD_FAILURE() << "queued copy through a freed array";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 1u) << m.what();
      } catch (const apgas::illegal_operation_exception&) {
      }
      apgas::finish([&] { apgas::async_copy(std::span<const int>(host), live); });
      apgas::finish([&] { apgas::async_copy(live, 0, std::span<int>(back)); });
      EXPECT_EQ(back, host);
      auto done = live;
      apgas::free_remote_array(done);
    }
  });
}

TEST_F(FakeGpu, MakeRemoteArrayFilledClonedAndGenerated) {
  run_gpu(gpu_config(), [] {
    for (place g : {place(1), place(2)}) {
      const int dev = device_of(g);
      const long long before = counter(dev, "allocations");
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300001}}) {
        auto filled = apgas::make_remote_array<double>(g, n, 3.25);
        EXPECT_EQ(filled.size(), n);
        EXPECT_EQ(first_difference(fake().read<double>(dev, filled.token(), n), std::vector<double>(n, 3.25)), -1);

        std::vector<std::uint64_t> init(n);
        for (std::size_t i = 0; i < n; ++i) init[i] = i * 1000003u + 17u;
        auto clone = apgas::make_remote_array(g, std::span<const std::uint64_t>(init));
        EXPECT_EQ(clone.size(), n);
        EXPECT_EQ(first_difference(fake().read<std::uint64_t>(dev, clone.token(), n), init), -1);
        std::vector<std::uint64_t> back(n);
        apgas::finish([&] { apgas::async_copy(clone, 0, std::span<std::uint64_t>(back)); });
        EXPECT_EQ(first_difference(back, init), -1);

        auto gen = apgas::make_remote_array<int>(g, n, [](std::size_t i) { return static_cast<int>(i * i % 65521); });
        std::vector<int> expect(n);
        for (std::size_t i = 0; i < n; ++i) expect[i] = static_cast<int>(i * i % 65521);
        EXPECT_EQ(first_difference(fake().read<int>(dev, gen.token(), n), expect), -1);

        // The fill form at a GPU place: written into a host buffer of value-initialised elements, then copied.
        auto fill = apgas::make_remote_array<int>(g, n, [](std::span<int> out) {
          for (std::size_t i = 0; i < out.size(); ++i) out[i] += static_cast<int>(i * i % 65521);
        });
        EXPECT_EQ(first_difference(fake().read<int>(dev, fill.token(), n), expect), -1);

        apgas::free_remote_array(filled);
        apgas::free_remote_array(clone);
        apgas::free_remote_array(gen);
        apgas::free_remote_array(fill);
      }
      fake().synchronize(dev);
      EXPECT_EQ(counter(dev, "allocations"), before);
    }
  });
}

// ---- async_copy host <-> GPU ---------------------------------------------------------------------------------------

class FakeGpuCopy : public FakeGpu, public testing::WithParamInterface<std::size_t> {};

// Sizes from 1 byte to 64 MiB, at offsets 0 and 5, from pageable and from pinned memory, both ways; the content is
// checked on the device itself and after the way back, and the bytes around the destination range stay zero.
TEST_P(FakeGpuCopy, HostToGpuAndBackAllSizes) {
  const std::size_t slice = GetParam();
  run_gpu(gpu_config("all", slice), [slice] {
    const place g(2);
    const int dev = device_of(g);
    unsigned seed = 1;
    for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4095}, std::size_t{4096}, std::size_t{65535},
                          std::size_t{65536}, std::size_t{65537}, 3 * std::size_t{65536} + 17, MiB + 13,
                          4 * MiB + 1, 64 * MiB}) {
      for (std::size_t off : {std::size_t{0}, std::size_t{5}}) {
        if (n == 64 * MiB && off == 0) continue;  // (time: one 64 MiB run per direction and kind is enough)
        for (bool pinned : {false, true}) {
          // (not SCOPED_TRACE: its stack is per thread, and an activity that waits may resume on another worker)
          std::string where = "n = " + std::to_string(n);
          where += ", offset " + std::to_string(off);
          where += pinned ? ", pinned" : ", pageable";
          where += ", slice " + std::to_string(slice);
          const std::vector<std::uint8_t> src = pattern(n, seed++);
          auto a = apgas::make_remote_array<std::uint8_t>(g, off + n + 7);
          const long long ops = counter(dev, "h2d_ops");
          const long long bytes = counter(dev, "h2d_bytes");
          // Pageable copies go through the spooler in chunks of at most a slice; one smaller than all the slices
          // together is spread over them in chunks of at least 128 KiB (spooler::chunk_bytes).
          const std::size_t fewest = (n + slice - 1) / slice;
          const std::size_t most = std::max(fewest, (n + 128 * KiB - 1) / (128 * KiB));
          const auto chunked = [&](long long ops) {
            return ops >= static_cast<long long>(fewest) && ops <= static_cast<long long>(most);
          };
          if (pinned) {
            const apgas::pinned_vector<std::uint8_t> p = pinned_copy(src);
            ASSERT_TRUE(apgas::is_pinned(p.data(), p.size())) << where;
            apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(p), a, off); });
            EXPECT_EQ(counter(dev, "h2d_ops") - ops, 1) << "pinned memory: one DMA straight from it" << where;
          } else {
            ASSERT_FALSE(apgas::is_pinned(src.data(), src.size())) << where;
            apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a, off); });
            EXPECT_TRUE(chunked(counter(dev, "h2d_ops") - ops)) << "one DMA per chunk" << where;
          }
          EXPECT_EQ(counter(dev, "h2d_bytes") - bytes, static_cast<long long>(n)) << where;
          const std::vector<std::uint8_t> on_device = fake().read<std::uint8_t>(dev, a.token(), off + n + 7);
          ASSERT_EQ(on_device.size(), off + n + 7) << where;
          const auto zero = [](std::uint8_t b) { return b == 0; };
          const auto first = on_device.begin() + static_cast<std::ptrdiff_t>(off);
          EXPECT_TRUE(std::all_of(on_device.begin(), first, zero)) << where;
          EXPECT_TRUE(std::equal(src.begin(), src.end(), first)) << where;
          EXPECT_TRUE(std::all_of(on_device.end() - 7, on_device.end(), zero)) << where;

          const long long dops = counter(dev, "d2h_ops");
          if (pinned) {
            apgas::pinned_vector<std::uint8_t> back(n, 0x5A);
            apgas::finish([&] { apgas::async_copy(a, off, std::span<std::uint8_t>(back)); });
            EXPECT_EQ(first_difference(back, src), -1) << where;
            EXPECT_EQ(counter(dev, "d2h_ops") - dops, 1) << where;
          } else {
            std::vector<std::uint8_t> back(n, 0x5A);
            apgas::finish([&] { apgas::async_copy(a, off, std::span<std::uint8_t>(back)); });
            EXPECT_EQ(first_difference(back, src), -1) << where;
            EXPECT_TRUE(chunked(counter(dev, "d2h_ops") - dops)) << "one DMA per chunk" << where;
          }
          apgas::free_remote_array(a);
        }
      }
    }
  });
}

// A pinned source that is a part of a pinned block is still pinned; one that runs past it is not (spooler).
TEST_P(FakeGpuCopy, PartsOfPinnedBlocks) {
  const std::size_t slice = GetParam();
  run_gpu(gpu_config("all", slice), [] {
    const place g(1);
    const int dev = device_of(g);
    const std::vector<std::uint8_t> src = pattern(300000, 9);
    const apgas::pinned_vector<std::uint8_t> p = pinned_copy(src);
    auto a = apgas::make_remote_array<std::uint8_t>(g, src.size());
    const std::span<const std::uint8_t> part = std::span<const std::uint8_t>(p).subspan(1001, 150000);
    EXPECT_TRUE(apgas::is_pinned(part.data(), part.size()));
    const long long ops = counter(dev, "h2d_ops");
    apgas::finish([&] { apgas::async_copy(part, a, 1001); });
    EXPECT_EQ(counter(dev, "h2d_ops") - ops, 1);
    const std::vector<std::uint8_t> on_device = fake().read<std::uint8_t>(dev, a.token(), src.size());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), on_device.begin() + 1001));
    EXPECT_EQ(on_device[1000], 0);
    EXPECT_EQ(on_device[151001], 0);
    apgas::free_remote_array(a);
  });
}

// Pageable copies of at most config::cuda_direct_copy bytes go to the driver in one call each (it stages them
// itself), larger ones through the spooler; with cuda_direct_copy = 0 every pageable copy is spooled.
TEST_F(FakeGpu, SmallPageableCopiesGoStraightToTheDriver) {
  for (const std::size_t direct : {std::size_t{0}, apgas::config::default_direct_copy}) {  // (the peak only rises)
    run_gpu(gpu_config("all", 64 * KiB, 2, direct), [direct] {
      const place g(1);
      const int dev = device_of(g);
      unsigned seed = 7;
      for (const std::size_t n : {std::size_t{1}, std::size_t{4095}, 64 * KiB + 3, MiB, MiB + 1}) {
        const std::string where = "n = " + std::to_string(n) + ", cuda_direct_copy = " + std::to_string(direct);
        const bool straight = n <= direct;
        const std::vector<std::uint8_t> src = pattern(n, seed++);
        auto a = apgas::make_remote_array<std::uint8_t>(g, n);
        const long long ops = counter(dev, "h2d_ops"), pageable = counter(dev, "pageable_async_copies");
        apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
        EXPECT_EQ(first_difference(fake().read<std::uint8_t>(dev, a.token(), n), src), -1) << where;
        EXPECT_EQ(counter(dev, "pageable_async_copies") - pageable, straight ? 1 : 0) << where;
        if (straight) {
          EXPECT_EQ(counter(dev, "h2d_ops") - ops, 1) << "one driver call" << where;
        } else {
          EXPECT_GE(counter(dev, "h2d_ops") - ops, static_cast<long long>((n + 64 * KiB - 1) / (64 * KiB)))
              << "spooled: one DMA per slice" << where;
        }
        std::vector<std::uint8_t> back(n, 0x5A);
        const long long dops = counter(dev, "d2h_ops"), dpageable = counter(dev, "pageable_async_copies");
        apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(back)); });
        EXPECT_EQ(first_difference(back, src), -1) << where;
        EXPECT_EQ(counter(dev, "pageable_async_copies") - dpageable, straight ? 1 : 0) << where;
        if (straight) {
          EXPECT_EQ(counter(dev, "d2h_ops") - dops, 1) << "one driver call" << where;
        }
        apgas::free_remote_array(a);
      }
    });
    EXPECT_LE(counter(-1, "largest_pageable_async_copy"), static_cast<long long>(direct));
  }
}

INSTANTIATE_TEST_SUITE_P(Slices, FakeGpuCopy, testing::Values(64 * KiB, 4 * MiB),
                         [](const testing::TestParamInfo<std::size_t>& i) {
                           return "slice" + std::to_string(i.param / KiB) + "KiB";
                         });

class FakeGpuWorkers : public FakeGpu, public testing::WithParamInterface<int> {};

// More copies than DMA slices, both GPUs and both directions at once, in one finish: no deadlock, all data right.
TEST_P(FakeGpuWorkers, ManyConcurrentCopiesInOneFinish) {
  run_gpu(gpu_config("all", 64 * KiB, GetParam()), [] {
    constexpr int copies = 24;
    const std::size_t n = 200 * KiB + 123;  // 4 slices each
    std::vector<apgas::remote_array<std::uint8_t>> a;
    std::vector<std::vector<std::uint8_t>> src, back(copies, std::vector<std::uint8_t>(n));
    std::vector<apgas::pinned_vector<std::uint8_t>> psrc;
    for (int i = 0; i < copies; ++i) {
      a.push_back(apgas::make_remote_array<std::uint8_t>(place(1 + i % 2), n));
      src.push_back(pattern(n, 100 + static_cast<unsigned>(i)));
      psrc.push_back(pinned_copy(pattern(n, 200 + static_cast<unsigned>(i))));
    }
    apgas::finish([&] {
      for (int i = 0; i < copies; ++i) apgas::async_copy(std::span<const std::uint8_t>(src[i]), a[i]);
    });
    for (int i = 0; i < copies; ++i) {
      EXPECT_EQ(first_difference(fake().read<std::uint8_t>(device_of(a[i].home()), a[i].token(), n), src[i]), -1)
          << "copy " << i;
    }
    apgas::finish([&] {
      for (int i = 0; i < copies; ++i) apgas::async_copy(a[i], 0, std::span<std::uint8_t>(back[i]));
    });
    for (int i = 0; i < copies; ++i) EXPECT_EQ(first_difference(back[i], src[i]), -1) << "copy " << i;
    // Mixed: even arrays get new data (half of them from pinned memory), odd arrays go back to the host, at once.
    std::vector<std::vector<std::uint8_t>> back2(copies, std::vector<std::uint8_t>(n));
    apgas::finish([&] {
      for (int i = 0; i < copies; ++i) {
        if (i % 2 == 1) {
          apgas::async_copy(a[i], 0, std::span<std::uint8_t>(back2[i]));
        } else if (i % 4 == 0) {
          apgas::async_copy(std::span<const std::uint8_t>(psrc[i]), a[i]);
        } else {
          apgas::async_copy(std::span<const std::uint8_t>(src[i + 1]), a[i]);
        }
      }
    });
    for (int i = 0; i < copies; ++i) {
      const std::vector<std::uint8_t> dev = fake().read<std::uint8_t>(device_of(a[i].home()), a[i].token(), n);
      if (i % 2 == 1) {
        EXPECT_EQ(first_difference(back2[i], src[i]), -1) << "copy " << i;
      } else if (i % 4 == 0) {
        EXPECT_TRUE(std::equal(psrc[i].begin(), psrc[i].end(), dev.begin())) << "copy " << i;
      } else {
        EXPECT_EQ(first_difference(dev, src[i + 1]), -1) << "copy " << i;
      }
    }
    for (auto& x : a) apgas::free_remote_array(x);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, FakeGpuWorkers, testing::ValuesIn(apgas_test::worker_counts),
                         apgas_test::workers_name);

// ---- GPU <-> GPU, GPU <-> host array --------------------------------------------------------------------------------

TEST_F(FakeGpu, GpuToGpuOnTheSameAndTheOtherGpu) {
  run_gpu(gpu_config(), [] {
    const std::size_t n = 300001;
    std::vector<int> src(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<int>(i * 7 + 1);
    auto a = apgas::make_remote_array(place(1), std::span<const int>(src));
    auto same = apgas::make_remote_array<int>(place(1), n + 10);
    auto other = apgas::make_remote_array<int>(place(2), n + 10);
    const long long d2d = counter(0, "d2d_ops");
    const long long peer = counter(0, "peer_ops");
    apgas::finish([&] {
      apgas::async_copy(a, 0, same, 7, n);
      apgas::async_copy(a, 0, other, 3, n);
    });
    EXPECT_EQ(counter(0, "d2d_ops") - d2d, 1);
    EXPECT_EQ(counter(0, "peer_ops") - peer, 1);
    EXPECT_EQ(counter(-1, "peer_copies_without_access"), 0) << "peer access is enabled at start-up";
    std::vector<int> expect_same(n + 10, 0), expect_other(n + 10, 0);
    std::copy(src.begin(), src.end(), expect_same.begin() + 7);
    std::copy(src.begin(), src.end(), expect_other.begin() + 3);
    EXPECT_EQ(first_difference(fake().read<int>(0, same.token(), n + 10), expect_same), -1);
    EXPECT_EQ(first_difference(fake().read<int>(1, other.token(), n + 10), expect_other), -1);

    // The other way (GPU 2 -> GPU 1), a part, into the middle; and single elements.
    apgas::finish([&] { apgas::async_copy(other, 3 + 100, a, 50, 1000); });
    std::vector<int> expect_a = src;
    std::copy(src.begin() + 100, src.begin() + 1100, expect_a.begin() + 50);
    EXPECT_EQ(first_difference(fake().read<int>(0, a.token(), n), expect_a), -1);
    apgas::finish([&] {
      apgas::async_copy(a, 0, other, n + 9, 1);
      apgas::async_copy(other, 3, same, 0, 1);
    });
    EXPECT_EQ(fake().read<int>(1, other.token() + (n + 9) * sizeof(int), 1), std::vector<int>{expect_a[0]});
    EXPECT_EQ(fake().read<int>(0, same.token(), 1), std::vector<int>{src[0]});
    // Overlapping ranges within one GPU array: refused (the driver leaves them undefined; at a host place they are a
    // memmove), on an in-order queue too; apart they are a device copy as any.
    EXPECT_THROW(apgas::async_copy(a, 0, a, 10, 500), apgas::illegal_operation_exception);  // (before anything runs)
    apgas::finish([&] {
      auto q = apgas::in_order(place(1));
      EXPECT_THROW(q.async_copy(a, 10, a, 0, 500), apgas::illegal_operation_exception);
    });
    apgas::finish([&] { apgas::async_copy(a, 0, a, 1000, 1000); });
    std::copy(expect_a.begin(), expect_a.begin() + 1000, expect_a.begin() + 1000);
    EXPECT_EQ(first_difference(fake().read<int>(0, a.token(), n), expect_a), -1);
    // n == 0: nothing.
    const long long ops = counter(-1, "ops_executed");
    apgas::finish([&] { apgas::async_copy(a, 0, other, 0, 0); });
    EXPECT_EQ(counter(-1, "ops_executed"), ops);
    apgas::free_remote_array(a);
    apgas::free_remote_array(same);
    apgas::free_remote_array(other);
  });
}

TEST_F(FakeGpu, GpuArrayToHostArrayAndBack) {
  run_gpu(gpu_config("all", 64 * KiB), [] {
    const std::size_t n = 100003;
    std::vector<std::int64_t> src(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::int64_t>(i) * -3;
    auto g = apgas::make_remote_array(place(2), std::span<const std::int64_t>(src));
    auto h = apgas::make_remote_array<std::int64_t>(apgas::here(), n);
    apgas::finish([&] { apgas::async_copy(g, 10, h, 0, n - 10); });
    for (std::size_t i = 0; i + 10 < n; ++i) {
      if (h[i] != src[i + 10]) {
        ADD_FAILURE() << "host array differs at " << i;
        break;
      }
    }
    EXPECT_EQ(h[n - 1], 0);
    // Host array -> GPU array (another GPU), at an offset.
    auto g2 = apgas::make_remote_array<std::int64_t>(place(1), n);
    apgas::finish([&] { apgas::async_copy(h, 0, g2, 5, n - 10); });
    std::vector<std::int64_t> expect(n, 0);
    std::copy(src.begin() + 10, src.end(), expect.begin() + 5);
    EXPECT_EQ(first_difference(fake().read<std::int64_t>(0, g2.token(), n), expect), -1);
    apgas::free_remote_array(g);
    apgas::free_remote_array(g2);
    apgas::free_remote_array(h);
  });
}

// ---- the data has landed when the finish returns --------------------------------------------------------------------

// Every stream operation of the fake waits APGAS_FAKE_CUDA_DELAY_US (ctest apgas.cuda_fake.backend_delay sets 200)
// or, in the plain run, a delay this test sets: a completion signalled before the bytes landed would show as wrong
// data read on the device (or in host memory) the moment the finish returns.
class FakeDelay : public FakeGpu {
 protected:
  void SetUp() override {
    FakeGpu::SetUp();
    if (fake().delay_us() < 100) fake().set_delay_us(200);
  }
};

TEST_F(FakeDelay, DataHasLandedWhenTheFinishReturns) {
  const int delay = fake().delay_us();
  ASSERT_GE(delay, 100);
  run_gpu(gpu_config("all", 64 * KiB), [delay] {
    const place g(2), other(1);
    const std::size_t n = 256 * KiB + 77;  // 5 slices
    const std::size_t chunks = 5;
    auto a = apgas::make_remote_array<std::uint8_t>(g, n);  // the zero fill (a delayed memset) has landed
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(1, a.token(), n), std::vector<std::uint8_t>(n, 0)), -1);

    const std::vector<std::uint8_t> src = pattern(n, 42);
    const auto t0 = std::chrono::steady_clock::now();
    apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(1, a.token(), n), src), -1) << "pageable -> GPU";
    // One copy stream per direction: the chunks' DMAs run one after the other, each after the delay.
    EXPECT_GE(took, std::chrono::microseconds(delay) * static_cast<int>(chunks));

    const apgas::pinned_vector<std::uint8_t> psrc = pinned_copy(pattern(n, 43));
    apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(psrc), a); });
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), fake().read<std::uint8_t>(1, a.token(), n).begin()))
        << "pinned -> GPU";

    std::vector<std::uint8_t> back(n);
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(back)); });
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), back.begin())) << "GPU -> pageable";
    apgas::pinned_vector<std::uint8_t> pback(n);
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(pback)); });
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), pback.begin())) << "GPU -> pinned";

    auto filled = apgas::make_remote_array<std::uint8_t>(other, n, std::uint8_t{7});
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(0, filled.token(), n), std::vector<std::uint8_t>(n, 7)), -1);
    apgas::finish([&] { apgas::async_copy(a, 0, filled, 0, n); });  // peer copy
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), fake().read<std::uint8_t>(0, filled.token(), n).begin()))
        << "GPU -> other GPU";
    auto same = apgas::make_remote_array<std::uint8_t>(g, n);
    apgas::finish([&] { apgas::async_copy(a, 0, same, 0, n); });
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), fake().read<std::uint8_t>(1, same.token(), n).begin()))
        << "GPU -> same GPU";
    auto h = apgas::make_remote_array<std::uint8_t>(apgas::here(), n);
    apgas::finish([&] { apgas::async_copy(a, 0, h, 0, n); });
    EXPECT_TRUE(std::equal(psrc.begin(), psrc.end(), &h[0])) << "GPU -> host array";
    for (auto* x : {&a, &filled, &same, &h}) apgas::free_remote_array(*x);
  });
}

// ---- a dead GPU place -----------------------------------------------------------------------------------------------

TEST_F(FakeGpu, StickyErrorKillsThatGpuPlaceOnly) {
  const apgas::config cfg = fresh_gpu_config();  // (see the top)
  const place dead(2), alive(1);
  const int dev = 1;
  run_gpu(cfg, [&] {
    const std::size_t n = 3 * cfg.cuda_dma_slice + 5;  // 4 slices
    std::vector<apgas::remote_array<std::uint8_t>> a;
    for (int i = 0; i < 4; ++i) a.push_back(apgas::make_remote_array<std::uint8_t>(dead, n));
    auto h = apgas::make_remote_array<std::uint8_t>(alive, n);
    const std::vector<std::uint8_t> src = pattern(n, 7);
    const apgas::pinned_vector<std::uint8_t> psrc = pinned_copy(src);
    std::vector<std::uint8_t> dst(n);
    apgas::pinned_vector<std::uint8_t> pdst(n);

    // The GPU executes nothing until the failure: every copy is in flight when it hits. The failure comes once the
    // two direct copies (DMA + event each) and at least one slice of each spooled copy are queued.
    ASSERT_EQ(fake().pause(dev, 1), 0);
    std::thread injector([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (counter(dev, "ops_pending") < 8 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      EXPECT_GE(counter(dev, "ops_pending"), 8);
      fake().fail(dev, CUDA_ERROR_ILLEGAL_ADDRESS);
    });
    std::exception_ptr caught;
    try {
      apgas::finish([&] {
        apgas::async_copy(std::span<const std::uint8_t>(src), a[0]);   // spooler
        apgas::async_copy(std::span<const std::uint8_t>(psrc), a[1]);  // direct
        apgas::async_copy(a[2], 0, std::span<std::uint8_t>(dst));      // spooler
        apgas::async_copy(a[3], 0, std::span<std::uint8_t>(pdst));     // direct
        apgas::async_copy(std::span<const std::uint8_t>(src), h);      // the other GPU
      });
    } catch (...) {
      caught = std::current_exception();
    }
    injector.join();
    const bool is_multiple = apgas_test::inspect_as<apgas::multiple_exceptions>(caught, [&](const auto& m) {
      EXPECT_EQ(m.size(), 4u) << "one dead_place_exception per failed async_copy";
      const auto deads = m.template of_type<apgas::dead_place_exception>();
      EXPECT_EQ(deads.size(), m.size());
      for (const apgas::dead_place_exception* d : deads) {
        EXPECT_EQ(d->where(), dead.id());
        EXPECT_TRUE(contains(d->what(), "GPU place 2 (device 1) is dead")) << d->what();
        EXPECT_TRUE(contains(d->what(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << d->what();
      }
    });
    EXPECT_TRUE(is_multiple) << "the finish must throw multiple_exceptions";
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(0, h.token(), n), src), -1) << "the other GPU's copy";

    // Every later operation on the dead place throws dead_place_exception at once.
    auto dead_now = [&](auto&& op) {
      bool thrown = false;
      try {
        op();
      } catch (const apgas::dead_place_exception& e) {
        thrown = true;
        EXPECT_EQ(e.where(), dead.id());
      }
      EXPECT_TRUE(thrown);
    };
    dead_now([&] { (void)apgas::make_remote_array<int>(dead, 10); });
    apgas::finish([&] {
      dead_now([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a[0]); });
      dead_now([&] { apgas::async_copy(std::span<const std::uint8_t>(psrc), a[0]); });
      dead_now([&] { apgas::async_copy(a[0], 0, std::span<std::uint8_t>(dst)); });
      dead_now([&] { apgas::async_copy(a[0], 0, h, 0, n); });
      dead_now([&] { apgas::async_copy(h, 0, a[0], 0, n); });
    });
    dead_now([&] { apgas::free_remote_array(a[0]); });
    EXPECT_EQ(a[0].home(), dead) << "a failed free leaves the array as it was";

    // The other GPU keeps working.
    auto b = apgas::make_remote_array(alive, std::span<const std::uint8_t>(src));
    std::vector<std::uint8_t> back(n);
    apgas::finish([&] { apgas::async_copy(b, 0, std::span<std::uint8_t>(back)); });
    EXPECT_EQ(first_difference(back, src), -1);
    apgas::free_remote_array(b);
    apgas::free_remote_array(h);
  });
  // Once dead, never alive again: a later run with the same accelerator still has a dead place 2.
  run_gpu(cfg, [&] {
    EXPECT_THROW((void)apgas::make_remote_array<int>(dead, 1), apgas::dead_place_exception);
    auto ok = apgas::make_remote_array<int>(alive, 1);
    apgas::free_remote_array(ok);
  });
  EXPECT_EQ(fake().device_error(0), 0);
  EXPECT_EQ(fake().device_error(dev), CUDA_ERROR_ILLEGAL_ADDRESS);
}

// ---- errors that do not kill the place ------------------------------------------------------------------------------

// A stale copy of a freed GPU array, once another array was made at the same device address: copies and the free
// through it are refused by the GPU's host (the address alone named the new array), and the new array is untouched.
// The stale handle is the live array's address with another serial, which is what a handle of the freed array is
// (the host places' tests wait for a real reuse: Places.AStaleRemoteArrayIsRefused..., Remote.AStaleArray...).
TEST_F(FakeGpu, AStaleGpuArrayIsRefusedAfterAnotherIsMadeAtItsAddress) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    constexpr std::size_t n = 4096;
    auto fresh = apgas::make_remote_array<std::uint8_t>(g, n);
    auto other = apgas::make_remote_array<std::uint8_t>(place(2), n);
    ASSERT_NE(fresh.serial(), 0u);
    const auto stale = apgas::remote_array<std::uint8_t>::from_token(g.id(), fresh.token(), n, fresh.serial() + 1);
    const std::vector<std::uint8_t> data(64, 1);
    std::vector<std::uint8_t> out(64, 5);
    const apgas::pinned_vector<std::uint8_t> pdata(64, 1);
    for (int way = 0; way < 5; ++way) {
      try {
        apgas::finish([&] {
          if (way == 0) apgas::async_copy(std::span<const std::uint8_t>(data), stale);
          if (way == 1) apgas::async_copy(stale, 0, std::span<std::uint8_t>(out));
          if (way == 2) apgas::async_copy(stale, 0, other, 0, 64);
          if (way == 3) apgas::async_copy(other, 0, stale, 0, 64);
          if (way == 4) {
            auto q = apgas::in_order(g);
            q.async_copy(std::span<const std::uint8_t>(pdata), stale);
          }
        });
        ADD_FAILURE() << "copy " << way << " through a stale GPU array was accepted";
      } catch (const apgas::multiple_exceptions& m) {
        const auto errs = m.of_type<apgas::illegal_operation_exception>();
        ASSERT_EQ(errs.size(), 1u) << way;
        EXPECT_TRUE(contains(errs[0]->what(), "of GPU place 1 belong to an array made after")) << errs[0]->what();
      }
    }
    auto s = stale;
    EXPECT_TRUE(contains(what_of<apgas::illegal_operation_exception>([&] { apgas::free_remote_array(s); }),
                         "another array made at its address since"));
    EXPECT_EQ(fake().read<std::uint8_t>(device_of(g), fresh.token(), 64), std::vector<std::uint8_t>(64, 0));
    EXPECT_EQ(out, std::vector<std::uint8_t>(64, 5));
    apgas::free_remote_array(fresh);  // (still live: the stale free freed nothing)
    apgas::free_remote_array(other);
  });
}

TEST_F(FakeGpu, NonStickyFailuresAreCudaErrorsAndThePlaceStaysUsable) {
  run_gpu(gpu_config(), [] {
    const place g(2);
    const int dev = 1;
    fake().synchronize(dev);  // start-up's stream-ordered pool warm-up (an allocation and its free) is over
    const long long allocations = counter(dev, "allocations");

    // Out of device memory (the fake has 80 GiB).
    try {
      (void)apgas::make_remote_array<char>(g, std::size_t{81} << 30);
      ADD_FAILURE() << "81 GiB on an 80 GiB GPU";
    } catch (const apgas::cuda_error& e) {
      EXPECT_EQ(e.code(), CUDA_ERROR_OUT_OF_MEMORY);
      EXPECT_EQ(dynamic_cast<const apgas::kernel_launch_error*>(&e), nullptr);
      EXPECT_TRUE(contains(e.what(), "out of device memory")) << e.what();
      EXPECT_TRUE(contains(e.what(), "GPU place 2")) << e.what();
    }
    EXPECT_EQ(counter(dev, "allocations"), allocations);

    // A copy call that fails: one cuda_error in the finish, from the spooler and from the direct path.
    const std::size_t n = 200 * KiB;
    const std::vector<std::uint8_t> src = pattern(n, 3);
    const apgas::pinned_vector<std::uint8_t> psrc = pinned_copy(src);
    auto a = apgas::make_remote_array<std::uint8_t>(g, n);
    auto expect_one_cuda_error = [&](const char* call, auto&& body) {
      try {
        apgas::finish(body);
        ADD_FAILURE() << call << ": the finish did not throw";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(m.size(), 1u) << call;
        const auto errors = m.of_type<apgas::cuda_error>();
        ASSERT_EQ(errors.size(), 1u) << call;
        EXPECT_TRUE(m.of_type<apgas::dead_place_exception>().empty()) << call;
        EXPECT_EQ(errors[0]->code(), CUDA_ERROR_INVALID_VALUE);
        EXPECT_TRUE(contains(errors[0]->what(), call)) << errors[0]->what();
        EXPECT_TRUE(contains(errors[0]->what(), "CUDA_ERROR_INVALID_VALUE")) << errors[0]->what();
      }
    };
    fake().fail_next(dev, "cuMemcpyHtoDAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyHtoDAsync", [&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
    fake().fail_next(dev, "cuMemcpyHtoDAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyHtoDAsync", [&] { apgas::async_copy(std::span<const std::uint8_t>(psrc), a); });
    std::vector<std::uint8_t> back(n);
    apgas::pinned_vector<std::uint8_t> pback(n);
    fake().fail_next(dev, "cuMemcpyDtoHAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyDtoHAsync", [&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(back)); });
    fake().fail_next(dev, "cuMemcpyDtoHAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyDtoHAsync", [&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(pback)); });
    auto other = apgas::make_remote_array<std::uint8_t>(place(1), n);
    fake().fail_next(dev, "cuMemcpyPeerAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyPeerAsync", [&] { apgas::async_copy(a, 0, other, 0, n); });
    fake().fail_next(dev, "cuMemcpyDtoDAsync", CUDA_ERROR_INVALID_VALUE, 1);
    expect_one_cuda_error("cuMemcpyDtoDAsync", [&] { apgas::async_copy(a, 0, a, n / 2, n / 2); });

    // The zero fill of a new array fails: cuda_error from make_remote_array, and the memory is given back.
    const long long before = counter(dev, "allocations");
    fake().fail_next(dev, "cuMemsetD8Async", CUDA_ERROR_INVALID_VALUE, 1);
    EXPECT_THROW((void)apgas::make_remote_array<int>(g, 100), apgas::cuda_error);
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "allocations"), before);
    // (Remote arrays come from the stream-ordered allocator: cuMemAllocAsync and cuMemFreeAsync.)
    fake().fail_next(dev, "cuMemAllocAsync", CUDA_ERROR_OUT_OF_MEMORY, 1);
    EXPECT_TRUE(contains(what_of<apgas::cuda_error>([&] { (void)apgas::make_remote_array<int>(g, 100); }),
                         "out of device memory"));
    fake().fail_next(dev, "cuMemFreeAsync", CUDA_ERROR_INVALID_VALUE, 1);
    auto c = apgas::make_remote_array<int>(g, 100);
    EXPECT_THROW(apgas::free_remote_array(c), apgas::cuda_error);
    EXPECT_EQ(c.home(), g);
    apgas::free_remote_array(c);  // the failed free left the array: this one releases it

    EXPECT_EQ(counter(dev, "injected_failures"), 9);
    EXPECT_EQ(fake().device_error(dev), 0);
    // Still usable.
    apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(back)); });
    EXPECT_EQ(first_difference(back, src), -1);
    apgas::finish([&] { apgas::async_copy(a, 0, other, 0, n); });
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(0, other.token(), n), src), -1);
    apgas::free_remote_array(a);
    apgas::free_remote_array(other);
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "allocations"), allocations);
  });
}

// ---- the kernel launch path, through the core's seam (detail::gpu_launch) ------------------------------------------
// A file compiled by g++ cannot send a kernel to a GPU place; under nvcc, apgas/cuda/kernel.cuh builds a
// gpu_kernel_request and resolves its CUfunction through the CUDA runtime, which the fake cannot stand in for. So the
// request is built here by hand, as kernel.cuh would build it, with a made-up CUfunction (the fake only uses it as a
// handle, and runs the kernel as a no-op): this tests the backend's pre step (limits, shared-memory opt-in, uploads,
// constant data, spilled bodies), its completion and post step (the launch's buffers freed), and its errors.

TEST_F(FakeGpu, KernelLaunchesThroughTheSeam) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    auto constant_buffer = apgas::make_remote_array<std::uint8_t>(g, 64 * KiB);
    g_constant_address = constant_buffer.token();
    fake().synchronize(dev);  // start-up's stream-ordered pool warm-up (an allocation and its free) is over
    const long long allocations = counter(dev, "allocations");
    const std::vector<int> up0(1000, 3), up1(10, 4);

    // An explicit grid, two uploads, constant data: launched, counted by the finish, its buffers freed afterwards.
    {
      hand_made_kernel k(&entry_a);
      k.upload(up0);
      k.upload(up1);
      std::vector<std::uint8_t> constant(100, 0x77);
      k.r.constant = std::as_bytes(std::span<const std::uint8_t>(constant));
      const long long h2d = counter(dev, "h2d_bytes");
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "kernel_launches"), 1);
      EXPECT_NE(k.seen[0], 0u);
      EXPECT_NE(k.seen[1], 0u);
      EXPECT_NE(k.seen[0], k.seen[1]);
      EXPECT_EQ(counter(dev, "h2d_bytes") - h2d, 4000 + 40 + 100);
      EXPECT_EQ(first_difference(fake().read<std::uint8_t>(dev, constant_buffer.token(), 100), constant), -1);
      fake().synchronize(dev);  // the post step's stream-ordered frees
      EXPECT_EQ(counter(dev, "allocations"), allocations) << "the launch's upload buffers are freed";
    }
    // The occupancy API's shape; a spilled body (passed through a device copy, freed afterwards).
    {
      hand_made_kernel k(&entry_a);
      k.r.shape = nullptr;
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      hand_made_kernel s(&entry_b);
      s.r.spilled = true;
      const long long h2d = counter(dev, "h2d_bytes");
      apgas::finish([&] { apgas::detail::gpu_launch(g, s.r); });
      EXPECT_EQ(counter(dev, "h2d_bytes") - h2d, 96);
      EXPECT_EQ(counter(dev, "kernel_launches"), 3);
      fake().synchronize(dev);
      EXPECT_EQ(counter(dev, "allocations"), allocations);
    }
    // auto_grid: the occupancy API's answer (the fake's: 2 blocks of 1024 threads per SM, 132 SMs); when it does
    // not answer, X10's table (8 blocks of 128 threads per SM fit first).
    {
      hand_made_kernel k(&entry_a);
      k.r.shape = nullptr;
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "last_grid"), 2 * 132);
      EXPECT_EQ(counter(dev, "last_block"), 1024);
      fake().fail_next(dev, "cuOccupancyMaxPotentialBlockSize", CUDA_ERROR_INVALID_VALUE, 1);
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "last_grid"), 8 * 132);
      EXPECT_EQ(counter(dev, "last_block"), 128);
      EXPECT_EQ(counter(dev, "kernel_launches"), 5);
    }
    // More than 48 KiB of dynamic shared memory: the function is opted in first (the fake refuses the launch
    // otherwise, as a GPU does), and stays opted in.
    {
      hand_made_kernel k(&entry_c);
      k.r.dynamic_shared = 100 * KiB;
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "last_shared"), static_cast<long long>(100 * KiB));
      k.r.dynamic_shared = 60 * KiB;
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "kernel_launches"), 7);
      EXPECT_EQ(counter(dev, "last_shared"), static_cast<long long>(60 * KiB));
    }
    // Beyond the limits: kernel_launch_error from the pre step, nothing started, nothing counted, nothing left.
    {
      hand_made_kernel k(&entry_a);
      k.upload(up0);
      const auto refused = [&](const char* what) {
        std::string w;
        apgas::finish([&] { w = what_of<apgas::kernel_launch_error>([&] { apgas::detail::gpu_launch(g, k.r); }); });
        EXPECT_TRUE(contains(w, what)) << w;
        EXPECT_TRUE(contains(w, "GPU place 1")) << w;
      };
      k.shape = apgas::grid{0, 32};
      refused("grid of 0 blocks");
      k.shape = apgas::grid{1, 2048};
      refused("2048 threads per block");
      k.shape = apgas::grid{4, 128};
      k.r.dynamic_shared = 228 * KiB;
      refused("dynamic shared memory");
      k.r.dynamic_shared = 0;
      std::vector<std::uint8_t> big(64 * KiB + 1);
      k.r.constant = std::as_bytes(std::span<const std::uint8_t>(big));
      refused("exceed the constant buffer");
      k.r.constant = {};
      // The driver refuses the launch (not sticky): kernel_launch_error, the uploads given back, the place usable.
      fake().fail_next(dev, "cuLaunchKernel", CUDA_ERROR_INVALID_VALUE, 1);
      refused("cuLaunchKernel");
      EXPECT_EQ(counter(dev, "kernel_launches"), 7);
      fake().synchronize(dev);
      EXPECT_EQ(counter(dev, "allocations"), allocations);
      // An upload that cannot be copied: a cuda_error, the buffer allocated for it given back.
      fake().fail_next(dev, "cuMemcpyHtoDAsync", CUDA_ERROR_INVALID_VALUE, 1);
      apgas::finish([&] { EXPECT_THROW(apgas::detail::gpu_launch(g, k.r), apgas::cuda_error); });
      fake().synchronize(dev);
      EXPECT_EQ(counter(dev, "allocations"), allocations);
      apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      EXPECT_EQ(counter(dev, "kernel_launches"), 8);
      EXPECT_EQ(counter(dev, "last_grid"), 4);
      EXPECT_EQ(counter(dev, "last_block"), 128);
    }
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "allocations"), allocations);
    apgas::free_remote_array(constant_buffer);
  });
}

// Several kernels in flight on one GPU (X10 allowed one): with the device paused, four launches from four
// activities are all queued at once (a kernel and its completion event each), and all complete once it runs.
TEST_F(FakeGpu, SeveralKernelsAreInFlightOnOneGpu) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    fake().synchronize(dev);
    const long long launches = counter(dev, "kernel_launches");
    const long long pending = counter(dev, "ops_pending");
    std::vector<std::unique_ptr<hand_made_kernel>> ks;
    for (int i = 0; i < 4; ++i) ks.push_back(std::make_unique<hand_made_kernel>(&entry_a));
    ASSERT_EQ(fake().pause(dev, 1), 0);
    long long peak = 0;
    std::thread releaser([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while ((peak = counter(dev, "ops_pending") - pending) < 8 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      fake().pause(dev, 0);
    });
    apgas::finish([&] {
      for (auto& k : ks) apgas::async([&k, g] { apgas::detail::gpu_launch(g, k->r); });
    });
    releaser.join();
    EXPECT_GE(peak, 8) << "four kernels (and their events) queued at once on one paused GPU";
    EXPECT_EQ(counter(dev, "kernel_launches") - launches, 4);
  });
  fake().reset();
}

TEST_F(FakeGpu, AFaultingKernelKillsItsPlaceAndItsFinishGetsIt) {
  run_gpu(fresh_gpu_config(), [] {  // (see the top)
    const place g(2);
    const int dev = device_of(g);
    hand_made_kernel k(&entry_a);
    fake().pause(dev, 1);
    std::exception_ptr caught;
    try {
      apgas::finish([&] {
        apgas::detail::gpu_launch(g, k.r);
        fake().fail(dev, CUDA_ERROR_ILLEGAL_ADDRESS);  // while the kernel is queued: it "faults"
      });
    } catch (...) {
      caught = std::current_exception();
    }
    const bool ok = apgas_test::inspect_as<apgas::multiple_exceptions>(caught, [&](const auto& m) {
      ASSERT_EQ(m.size(), 1u);
      const auto deads = m.template of_type<apgas::dead_place_exception>();
      ASSERT_EQ(deads.size(), 1u);
      EXPECT_EQ(deads[0]->where(), 2);
    });
    EXPECT_TRUE(ok);
    EXPECT_THROW(apgas::detail::gpu_launch(g, k.r), apgas::dead_place_exception);  // at once, nothing counted
    apgas::at(place(0), [] {});                                                 // (the run goes on)
  });
  fake().reset();
}

// The CUDA runtime calls of a kernel's nvcc file (its CUfunction, the address of its constant buffer) fail with an
// error that cannot name the place: the backend adds it (a job of many hosts, one with a bad driver).
TEST_F(FakeGpu, ARuntimeCallOfTheKernelsFileThatFailsNamesTheGpuPlace) {
  static const char entry_f = 'f', entry_g = 'g';
  run_gpu(fresh_gpu_config(), [] {  // a fresh accelerator: the kernels are new to it
    const place g(1);
    const auto message = [&](hand_made_kernel& k) {
      std::string what;
      try {
        apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
      } catch (const apgas::cuda_error& e) {
        what = e.what();
      } catch (const apgas::multiple_exceptions& m) {
        for (const auto& e : m.of_type<apgas::cuda_error>()) what += e->what();
      }
      return what;
    };
    hand_made_kernel lookup(&entry_f);
    lookup.r.resolve = [](const void*) -> void* {
      throw apgas::cuda_error(35, "apgas: cudaGetFuncBySymbol: cudaErrorInsufficientDriver (...)");
    };
    const std::string a = message(lookup);
    EXPECT_NE(a.find("cudaGetFuncBySymbol: cudaErrorInsufficientDriver (...) (on GPU place 1 (device 0))"),
              std::string::npos)
        << a;
    hand_made_kernel constant(&entry_g);
    const std::vector<std::uint8_t> data(16, 1);
    constant.r.constant = std::as_bytes(std::span<const std::uint8_t>(data));
    constant.r.constant_symbol = []() -> void* {
      throw apgas::cuda_error(35, "apgas: cudaGetSymbolAddress (constant buffer): cudaErrorInsufficientDriver");
    };
    const std::string c = message(constant);
    EXPECT_NE(c.find("(constant buffer): cudaErrorInsufficientDriver (on GPU place 1 (device 0))"), std::string::npos)
        << c;
    apgas::at(place(0), [] {});  // (the run goes on)
  });
}

// Two launches of one kernel with different amounts (> 48 KiB) of dynamic shared memory, at the same time: each
// must run. The fake makes the first launch's cuFuncSetAttribute (100 KiB) sleep after it took effect; the second
// launch (60 KiB) comes in meanwhile.
TEST_F(FakeGpu, ConcurrentLaunchesWithDifferentLargeSharedMemory) {
  run_gpu(fresh_gpu_config(), [] {  // 2 workers; a fresh accelerator: the kernel is new to it
    const place g(1);
    const int dev = device_of(g);
    hand_made_kernel big(&entry_d), small(&entry_d);  // the same kernel (one CUfunction)
    big.r.dynamic_shared = 100 * KiB;
    small.r.dynamic_shared = 60 * KiB;
    fake().stall_next(dev, "cuFuncSetAttribute", 300000, 1);
    std::exception_ptr caught;
    try {
      apgas::finish([&] {
        apgas::async([&] { apgas::detail::gpu_launch(g, big.r); });
        apgas::async([&] {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (counter(-1, "stalling") == 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          }
          apgas::detail::gpu_launch(g, small.r);
        });
      });
    } catch (...) {
      caught = std::current_exception();
    }
    apgas_test::inspect_as<apgas::multiple_exceptions>(caught, [](const auto& m) {
      for (const auto& e : m.exceptions()) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          ADD_FAILURE() << "regression (backend.cpp, device::launch: the opt-in must cover the most any launch may "
                           "ask, or a concurrent launch lowers it below another launch's): "
                        << x.what();
        }
      }
    });
    EXPECT_EQ(counter(dev, "kernel_launches"), 2);
  });
}

// The completion event of a launch cannot be had (cuEventCreate runs out of memory, on a fresh accelerator whose
// event pool is empty): the launch must leave nothing behind — no kernel running unaccounted for, no device buffers.
TEST_F(FakeGpu, ALaunchWhoseEventCannotBeCreatedLeavesNothingBehind) {
  run_gpu(fresh_gpu_config(), [] {  // a fresh accelerator: its event pool is empty
    const place g(2);
    const int dev = device_of(g);
    fake().synchronize(dev);  // start-up's stream-ordered pool warm-up (an allocation and its free) is over
    const long long allocations = counter(dev, "allocations");
    const std::vector<int> up(1000, 5);
    hand_made_kernel k(&entry_a);
    k.upload(up);
    fake().fail_next(dev, "cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY, 1);
    apgas::finish([&] { EXPECT_THROW(apgas::detail::gpu_launch(g, k.r), apgas::cuda_error); });
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "kernel_launches"), 0)
        << "regression (backend.cpp, device::launch: the completion event must be taken before "
           "cuLaunchKernel): the caller got an exception, yet the kernel was started";
    EXPECT_EQ(counter(dev, "allocations"), allocations)
        << "regression (backend.cpp, device::launch): the failed launch's upload buffers were not freed";
    // The place is usable.
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
  });
}

// ---- what cannot run on a GPU place --------------------------------------------------------------------------------

TEST_F(FakeGpu, ClosuresKernelsAndBadRanges) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    std::string w = what_of<apgas::illegal_operation_exception>([&] { apgas::async_at(g, [] {}); });
    EXPECT_TRUE(contains(w, "place 1 is a GPU place")) << w;
    w = what_of<apgas::illegal_operation_exception>([&] { (void)apgas::at(g, [] { return 1; }); });
    EXPECT_TRUE(contains(w, "only kernel closures")) << w;

    // A kernel closure from this file (compiled by the C++ compiler, not nvcc).
    const auto k = apgas::cuda_kernel(apgas::grid{2, 32}, [](apgas::thread) {});
    w = what_of<apgas::illegal_operation_exception>([&] { apgas::async_at(g, k); });
    EXPECT_TRUE(contains(w, "GPU place 1 from a file not compiled by nvcc")) << w;
    w = what_of<apgas::illegal_operation_exception>([&] { apgas::at(place(2), k); });
    EXPECT_TRUE(contains(w, "GPU place 2 from a file not compiled by nvcc")) << w;
    w = what_of<apgas::illegal_operation_exception>(
        [&] { apgas::at(g, apgas::cuda_kernel(apgas::auto_grid(), [](apgas::thread) {})); });
    EXPECT_TRUE(contains(w, "not compiled by nvcc")) << w;
    EXPECT_EQ(counter(-1, "kernel_launches"), 0);
    // The same kernel runs on the host place.
    std::atomic<int> threads{0};
    std::atomic<int>* t = &threads;
    apgas::at(place(0), apgas::cuda_kernel(apgas::grid{2, 32}, [=](apgas::thread) { t->fetch_add(1); }));
    EXPECT_EQ(threads.load(), 64);

    // Ranges outside an array.
    auto a = apgas::make_remote_array<int>(g, 10);
    auto b = apgas::make_remote_array<int>(place(2), 10);
    std::vector<int> v11(11), v5(5);
    EXPECT_TRUE(contains(what_of<apgas::bad_place_exception>(
                             [&] { apgas::async_copy(std::span<const int>(v11), a); }),
                         "elements [0, 11) are outside the array of 10"));
    what_of<apgas::bad_place_exception>([&] { apgas::async_copy(std::span<const int>(v5), a, 6); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_copy(a, 6, std::span<int>(v5)); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_copy(a, 11, std::span<int>(v5.data(), 0)); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_copy(a, 0, b, 5, 6); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_copy(a, 5, b, 0, 6); });
    what_of<apgas::bad_place_exception>([&] { (void)apgas::make_remote_array<int>(place(7), 1); });
    what_of<apgas::bad_place_exception>([&] { (void)apgas::make_remote_array<int>(place(-1), 1); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_at(place(3), [] {}); });
    what_of<apgas::bad_place_exception>([&] { apgas::async_at(place(3), k); });
    EXPECT_EQ(counter(-1, "memset_ops"), 2) << "only the two zero fills reached a GPU";
    for (const char* c : {"h2d_ops", "d2h_ops", "d2d_ops", "peer_ops"}) EXPECT_EQ(counter(-1, c), 0) << c;
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
  });
}

// ---- no GPU at all (ctest apgas.cuda_fake.backend_no_device runs this with APGAS_FAKE_CUDA_DEVICES=0) -------------

TEST(FakeNoDevice, NoDeviceMeansNoGpuPlaces) {
  if (!env_is("APGAS_FAKE_CUDA_DEVICES", "0")) {
    GTEST_SKIP() << "runs as ctest apgas.cuda_fake.backend_no_device (APGAS_FAKE_CUDA_DEVICES=0)";
  }
  run_gpu(gpu_config(), [] { expect_no_gpu_places({"CUDA_ERROR_NO_DEVICE"}); });
  testing::internal::CaptureStderr();
  const int rc = apgas::run(gpu_config("0"), [] {});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(contains(err, "APGAS_GPUS='0'")) << err;
  EXPECT_TRUE(contains(err, "0 GPUs")) << err;
}

// ---- the fake itself: it catches what the backend must never do ---------------------------------------------------
// (Without this, the checks in FakeGpu::TearDown could pass because the fake never noticed anything.)

#define APGAS_TEST_STR2(x) #x
#define APGAS_TEST_STR(x) APGAS_TEST_STR2(x)
#define APGAS_TEST_FN(fn) const auto fn##_ = reinterpret_cast<decltype(&::fn)>(fake().symbol(APGAS_TEST_STR(fn)))

CUresult wait_event(CUresult (*query)(CUevent), CUevent e) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  CUresult r = query(e);
  while (r == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    r = query(e);
  }
  return r;
}

TEST(FakeDriver, CatchesOutOfBoundsUseAfterFreeWrongContextAndPageableCopies) {
  fake().reset();
  APGAS_TEST_FN(cuInit);
  APGAS_TEST_FN(cuDevicePrimaryCtxRetain);
  APGAS_TEST_FN(cuDevicePrimaryCtxRelease);
  APGAS_TEST_FN(cuCtxSetCurrent);
  APGAS_TEST_FN(cuStreamCreate);
  APGAS_TEST_FN(cuStreamDestroy);
  APGAS_TEST_FN(cuEventCreate);
  APGAS_TEST_FN(cuEventDestroy);
  APGAS_TEST_FN(cuEventRecord);
  APGAS_TEST_FN(cuEventQuery);
  APGAS_TEST_FN(cuMemAlloc);
  APGAS_TEST_FN(cuMemFree);
  APGAS_TEST_FN(cuMemFreeAsync);
  APGAS_TEST_FN(cuMemcpyHtoDAsync);
  APGAS_TEST_FN(cuMemcpyDtoHAsync);
  APGAS_TEST_FN(cuMemHostAlloc);
  APGAS_TEST_FN(cuMemFreeHost);
  APGAS_TEST_FN(cuGetErrorName);
  ASSERT_NE(cuInit_, nullptr);
  ASSERT_NE(cuGetErrorName_, nullptr);
  ASSERT_EQ(cuInit_(0), CUDA_SUCCESS);
  const char* name = nullptr;
  ASSERT_EQ(cuGetErrorName_(CUDA_ERROR_ILLEGAL_ADDRESS, &name), CUDA_SUCCESS);
  EXPECT_STREQ(name, "CUDA_ERROR_ILLEGAL_ADDRESS");

  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain_(&ctx0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain_(&ctx1, 1), CUDA_SUCCESS);
  ASSERT_NE(ctx0, ctx1);
  ASSERT_EQ(cuCtxSetCurrent_(nullptr), CUDA_SUCCESS);  // (this thread may have run an accelerator's start-up)
  CUdeviceptr none = 0;
  EXPECT_EQ(cuMemAlloc_(&none, 16), CUDA_ERROR_INVALID_CONTEXT) << "no context current on this thread";
  ASSERT_EQ(cuCtxSetCurrent_(ctx1), CUDA_SUCCESS);
  CUstream s = nullptr;
  CUevent e = nullptr;
  ASSERT_EQ(cuStreamCreate_(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate_(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_(&p, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc_(&p, 0), CUDA_ERROR_INVALID_VALUE) << "cuMemAlloc(0) is refused, as by the real driver";
  void* h = nullptr;
  ASSERT_EQ(cuMemHostAlloc_(&h, 8192, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  std::memset(h, 1, 8192);

  // Events: pending while the stream has not reached the record.
  fake().pause(1, 1);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, h, 4096, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord_(e, s), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery_(e), CUDA_ERROR_NOT_READY);
  fake().pause(1, 0);
  EXPECT_EQ(wait_event(cuEventQuery_, e), CUDA_SUCCESS);
  EXPECT_EQ(fake().read<std::uint8_t>(1, p, 4096), std::vector<std::uint8_t>(4096, 1));

  // One byte past the allocation: a sticky illegal address when the stream gets there (not when it is enqueued).
  fake().pause(1, 1);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, h, 4097, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord_(e, s), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery_(e), CUDA_ERROR_NOT_READY);
  fake().pause(1, 0);
  EXPECT_EQ(wait_event(cuEventQuery_, e), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(fake().device_error(1), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(fake().counter(1, "illegal_accesses"), 1);
  EXPECT_TRUE(contains(fake().last_fault(), "cuMemcpyHtoDAsync on device 1: destination")) << fake().last_fault();
  CUdeviceptr q = 0;
  EXPECT_EQ(cuMemAlloc_(&q, 16), CUDA_ERROR_ILLEGAL_ADDRESS) << "sticky: every later call fails";
  EXPECT_EQ(fake().device_error(0), 0) << "the other device is not affected";
  fake().synchronize(1);  // (the stream may not have reached the record yet when the fault was seen)
  fake().reset();
  EXPECT_EQ(cuEventQuery_(e), CUDA_SUCCESS);

  // Use after a stream-ordered free.
  ASSERT_EQ(cuMemAlloc_(&q, 256), CUDA_SUCCESS);
  fake().pause(1, 1);
  ASSERT_EQ(cuMemFreeAsync_(q, s), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync_(q, h, 16, s), CUDA_SUCCESS);  // enqueued while q is still live
  ASSERT_EQ(cuEventRecord_(e, s), CUDA_SUCCESS);
  fake().pause(1, 0);
  EXPECT_EQ(wait_event(cuEventQuery_, e), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_TRUE(contains(fake().last_fault(), "not inside a live allocation")) << fake().last_fault();
  fake().reset();

  // A stream of device 1 used while device 0's context is current.
  ASSERT_EQ(cuCtxSetCurrent_(ctx0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoDAsync_(p, h, 16, s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(fake().counter(0, "wrong_context_calls"), 1);
  ASSERT_EQ(cuCtxSetCurrent_(ctx1), CUDA_SUCCESS);
  fake().reset();

  // Pageable memory: staged (host->device) or synchronous (device->host), and counted.
  std::vector<std::uint8_t> pageable(100, 9);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, pageable.data(), 100, s), CUDA_SUCCESS);
  std::fill(pageable.begin(), pageable.end(), 0);  // allowed: the bytes were taken during the call
  std::vector<std::uint8_t> out(100);
  ASSERT_EQ(cuMemcpyDtoHAsync_(out.data(), p, 100, s), CUDA_SUCCESS);
  EXPECT_EQ(out, std::vector<std::uint8_t>(100, 9)) << "complete when the call returns";
  EXPECT_EQ(fake().counter(1, "pageable_async_copies"), 2);

  // Double free; freeing host memory that is not page-locked.
  EXPECT_EQ(cuMemFree_(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_(p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fake().counter(1, "invalid_frees"), 1);
  EXPECT_EQ(cuMemFreeHost_(pageable.data()), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFreeHost_(h), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy_(e), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy_(s), CUDA_SUCCESS);
  EXPECT_EQ(cuEventRecord_(e, nullptr), CUDA_ERROR_INVALID_HANDLE) << "a destroyed event";
  EXPECT_EQ(cuCtxSetCurrent_(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease_(0), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease_(1), CUDA_SUCCESS);
  fake().reset();
}

}  // namespace

// ---- the driver library itself (ctest entries apgas.cuda_fake.driver_*, each with its own APGAS_CUDA_DRIVER) ----

// A library that loads but is no CUDA driver: the host simply has no GPU places, and says why.
// The driver is loaded once per process: each of these runs in a process of its own, from its own ctest entry.
bool driver_is(const char* path) { return apgas_test::fake_gpu::env_is("APGAS_CUDA_DRIVER", path); }

TEST(DriverPath, ALibraryThatIsNoDriverGivesNoGpuPlaces) {
  if (!driver_is("libm.so.6")) GTEST_SKIP() << "run by apgas.cuda_fake.driver_not_a_driver";
  int places = 0;
  std::string why;
  const int rc = apgas::run(apgas::config{}, [&] {
    places = static_cast<int>(apgas::all_places().size());
    why = apgas::describe(place(0));
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(places, 1);
  EXPECT_TRUE(contains(why, "no GPU places: the CUDA driver libm.so.6 lacks cuInit")) << why;
}

// A driver path named explicitly that cannot be loaded is a configuration error: start-up stops, naming it.
TEST(DriverPath, AMissingExplicitDriverStopsStartUp) {
  if (!driver_is("/nonexistent/libcuda.so.1")) GTEST_SKIP() << "run by apgas.cuda_fake.driver_missing";
  bool ran = false;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(apgas::config{}, [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  EXPECT_TRUE(contains(err, "invalid APGAS_CUDA_DRIVER='/nonexistent/libcuda.so.1'")) << err;
}

