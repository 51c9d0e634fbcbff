// The trace and the statistics of GPU places, with the CUDA backend driven through the fake driver: kernels and DMA
// slices as spans in device time on their GPU place's stream tracks (the GPU place a process of its own, named after
// its host), flows from each launch to its kernel, the spooler's host copies, GPU memory in use; events made with
// timing only while the trace records GPU or copy spans; the statistics' kernels, copies and bytes per GPU place.
#include "cuda_fake/fake_control.hpp"
#include "cuda_fake/fake_fixture.hpp"
#include "trace/trace_support.hpp"

#include <apgas/apgas.hpp>
#include <apgas/detail/gpu.hpp>
#include <gtest/gtest.h>

#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace {

using apgas::place;
using namespace apgas_test::fake_gpu;
using apgas_test::check_trace;
using apgas_test::trace::parse_stats;
using apgas_test::trace::temp_file;

constexpr int kernels = 3;
constexpr std::size_t n = 3 * MiB / sizeof(int) + 100;  // a spooled copy of several slices each way

// Kernels, copies both ways (pageable: the spooler; pinned: one DMA), a copy to the other GPU, on GPU place 1.
void gpu_work() {
  const place g0(1), g1(2);
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), 0);
  auto a = apgas::make_remote_array<int>(g0, n);
  auto b = apgas::make_remote_array<int>(g1, n);
  apgas::finish([&] { apgas::async_copy(std::span<const int>(host), a); });
  hand_made_kernel k(&entry_a);
  k.r.name = "apgas_test_kernel";
  for (int i = 0; i < kernels; ++i) {
    apgas::finish([&] { apgas::detail::gpu_launch(g0, k.r); });
  }
  apgas::pinned_vector<int> pinned(1024);
  apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(pinned.data(), pinned.size())); });
  std::vector<int> back(n);
  apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(back)); });
  EXPECT_EQ(first_difference(back, host), -1);
  apgas::finish([&] { apgas::async_copy(a, 0, b, 0, n); });
  apgas::free_remote_array(a);
  apgas::free_remote_array(b);
}

TEST_F(FakeGpu, TheTraceShowsKernelsAndCopiesOnTheirGpuPlaces) {
  const std::string path = temp_file("gpu.json");
  apgas::config cfg = gpu_config("all", 1 * MiB);
  cfg.trace_file = path;
  run_gpu(cfg, gpu_work);
  const auto f = check_trace(path);
  ASSERT_TRUE(f.problems.empty()) << f.summary();
  // GPU places 1 and 2 are processes 2 and 3, named, under place 0.
  ASSERT_EQ(f.processes.count(2), 1u);
  EXPECT_EQ(f.processes.at(2).rfind("place 1 (GPU place of place 0): Fake GPU 0", 0), 0u) << f.processes.at(2);
  EXPECT_EQ(f.processes.at(3).rfind("place 2 (GPU place of place 0): Fake GPU 1", 0), 0u) << f.processes.at(3);
  // Each kernel in device time on a kernel stream of GPU place 1, with a flow from its launch at place 0.
  EXPECT_EQ(f.starts.at("apgas_test_kernel"), kernels);
  EXPECT_EQ(f.flows_between.at("launch 1->2"), kernels);
  EXPECT_EQ(f.backward_flows.count("launch"), 0u) << "a kernel placed before its launch: device times mis-mapped";
  bool kernel_track = false;
  for (int s = 0; s < 4; ++s) {
    if (f.tracks.count({2, 1 + s}) != 0) {
      kernel_track = true;
      EXPECT_EQ(f.threads.at({2, 1 + s}), "kernels, stream " + std::to_string(s));
    }
  }
  EXPECT_TRUE(kernel_track);
  // DMA slices both ways on the copy streams, the spooler's host copies on place 0's workers, the copy to GPU 2.
  const long slices = static_cast<long>((n * sizeof(int) + MiB - 1) / MiB);
  EXPECT_GE(f.starts.at("DMA host->GPU"), slices);
  EXPECT_GE(f.starts.at("DMA GPU->host"), slices + 1);  // (and the pinned copy, one DMA)
  EXPECT_GE(f.starts.at("stage into slice"), slices);
  EXPECT_GE(f.starts.at("copy out of slice"), slices);
  EXPECT_EQ(f.starts.at("peer copy"), 1);
  EXPECT_EQ(f.threads.at({2, 16}), "copies host->GPU");
  EXPECT_EQ(f.threads.at({2, 17}), "copies GPU->host, GPU->GPU");
  // GPU memory in use: both arrays at their peak.
  EXPECT_GE(f.counter_max.at("GPU memory in use"), static_cast<double>(n * sizeof(int)));
  // Device times came from timing events.
  EXPECT_GT(counter(-1, "timing_events"), 0);
  EXPECT_GT(counter(-1, "elapsed_queries"), 0);
}

TEST_F(FakeGpu, WithoutGpuSpansInTheTraceEventsAreMadeWithoutTiming) {
  run_gpu(gpu_config("all", 1 * MiB), gpu_work);  // (after a traced run: the pool of the other kind is replaced)
  apgas::config cfg = gpu_config("all", 1 * MiB);
  cfg.trace_file = temp_file("activities.json");
  cfg.trace_filter = "all,-gpu,-copy";
  run_gpu(cfg, gpu_work);
  EXPECT_EQ(counter(-1, "timing_events"), 0);
  EXPECT_EQ(counter(-1, "elapsed_queries"), 0);
  const auto f = check_trace(cfg.trace_file);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(f.starts.count("apgas_test_kernel"), 0u);
}

TEST_F(FakeGpu, StatisticsCountKernelsCopiesAndBytesPerGpuPlace) {
  apgas::config cfg = gpu_config("all", 1 * MiB);
  cfg.stats = true;
  testing::internal::CaptureStderr();
  run_gpu(cfg, gpu_work);
  const std::string err = testing::internal::GetCapturedStderr();
  const auto stats = parse_stats(err);
  ASSERT_EQ(stats.count(1), 1u) << err;
  const auto& g = stats.at(1).value;
  EXPECT_EQ(g.at("kernels"), kernels) << err;
  EXPECT_EQ(g.at("copies host->GPU"), 1) << err;
  EXPECT_EQ(g.at("bytes host->GPU"), static_cast<double>(n * sizeof(int))) << err;
  EXPECT_EQ(g.at("copies GPU->host"), 2) << err;
  EXPECT_EQ(g.at("bytes GPU->host"), static_cast<double>((n + 1024) * sizeof(int))) << err;
  EXPECT_EQ(g.at("copies GPU->GPU"), 1) << err;
  EXPECT_EQ(g.at("bytes GPU->GPU"), static_cast<double>(n * sizeof(int))) << err;
  EXPECT_EQ(stats.at(2).value.at("kernels"), 0) << err;
  EXPECT_NE(err.find("apgas stats: place 2: GPU place of place 0: Fake GPU 1"), std::string::npos) << err;
}

}  // namespace
