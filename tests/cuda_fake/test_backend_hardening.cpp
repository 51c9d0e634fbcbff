// The defects of the GPU path's static review (docs/decisions/0010-gpu-hardening.md), each shown against the fake
// driver (tests/cuda_fake/fake_cuda.cpp): one host with 2 fake GPUs, places 1 and 2, unless a ctest entry of its own
// says otherwise (old driver, the node-local GPU share, the pinned-memory context: each needs a process of its own,
// since the driver is loaded once per process).
#include "cuda_fake/fake_control.hpp"
#include "cuda_fake/fake_fixture.hpp"
#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <apgas/queue.hpp>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using apgas::place;
using namespace apgas_test::fake_gpu;
using apgas_test::fake;
using apgas_test::what_of;

#define APGAS_TEST_STR2(x) #x
#define APGAS_TEST_STR(x) APGAS_TEST_STR2(x)
#define APGAS_TEST_FN(fn) const auto fn##_ = reinterpret_cast<decltype(&::fn)>(fake().symbol(APGAS_TEST_STR(fn)))

/// The exceptions of a finish that must fail, each as its what(); fails the test if the finish does not throw.
template <class F>
std::vector<std::exception_ptr> finish_failures(F&& body) {
  try {
    apgas::finish(body);
  } catch (const apgas::multiple_exceptions& m) {
    return m.exceptions();
  }
  ADD_FAILURE() << "the finish did not throw";
  return {};
}

// ---- 1: concurrent constant_from kernels on one GPU -------------------------------------------------------------
// Each kernel's constant data is copied into the one constant buffer of its nvcc file before the launch. Two launches
// from two workers must not interleave as copy A, copy B, kernel A, kernel B: kernel A would read B's constants.
// The fake records each kernel stream's operations in order and, when a kernel runs, the bytes at the constant
// buffer's address (what that kernel would read there). The first constant copy stalls after it took effect, so that
// the other launches come in between it and its kernel.
TEST_F(FakeGpu, ConcurrentConstantKernelsReadTheirOwnConstants) {
  run_gpu(gpu_config("all", apgas::config::default_dma_slice, 4), [] {
    const place g(1);
    const int dev = device_of(g);
    auto constant_buffer = apgas::make_remote_array<std::uint8_t>(g, 64 * KiB);
    g_constant_address = constant_buffer.token();
    constexpr int launches = 48;
    std::vector<std::unique_ptr<hand_made_kernel>> ks;
    std::vector<std::vector<std::uint64_t>> constants;
    for (int i = 0; i < launches; ++i) {
      const std::uint64_t id = 1000 + static_cast<std::uint64_t>(i);
      constants.push_back({id, ~id});
      ks.push_back(std::make_unique<hand_made_kernel>(&entry_a));
      ks.back()->tag(id);
      ks.back()->r.constant = std::as_bytes(std::span<const std::uint64_t>(constants.back()));
    }
    fake().watch(dev, constant_buffer.token());
    fake().trace(dev, 1);
    fake().stall_next(dev, "cuMemcpyHtoDAsync", 100000, 1);
    apgas::finish([&] {
      for (auto& k : ks) apgas::async([&k, g] { apgas::detail::gpu_launch(g, k->r); });
    });
    fake().synchronize(dev);
    const auto trace = fake().trace_of(dev);
    fake().trace(dev, 0);

    std::map<unsigned long long, std::uint64_t> last_constant;  // per stream: the tag of its latest constant copy
    std::set<unsigned long long> constant_streams;
    int kernels = 0;
    for (const auto& e : trace) {
      if (e.kind == 'h' && e.address == constant_buffer.token()) {
        last_constant[e.stream] = e.tag;
        constant_streams.insert(e.stream);
      } else if (e.kind == 'k') {
        ++kernels;
        EXPECT_EQ(last_constant[e.stream], e.tag) << "kernel " << e.tag << ": the latest constant copy before it on "
                                                  << "its stream was another launch's";
        EXPECT_EQ(e.seen, e.tag) << "kernel " << e.tag << " read the constants of kernel " << e.seen;
      }
    }
    EXPECT_EQ(kernels, launches);
    EXPECT_EQ(constant_streams.size(), 1u) << "constant copies on several streams race with each other's kernels";
    apgas::free_remote_array(constant_buffer);
  });
}

// ---- 4 and 5: launch data from page-locked memory; per-launch buffers freed in stream order right after the kernel -
// (Every FakeGpu test checks that no copy from pageable memory was made.) Small uploads, the constant data and a
// spilled body are staged in page-locked memory and copied on the kernel's stream; a large upload goes through the
// DMA spooler and has landed before the kernel is launched. The buffers of the launch are freed by stream-ordered
// frees enqueued right after the kernel (not by the poller later, behind whatever the stream got meanwhile).
TEST_F(FakeGpu, LaunchDataIsStagedInPinnedMemoryAndFreedRightAfterTheKernel) {
  run_gpu(gpu_config("all", 64 * KiB), [] {
    const place g(2);
    const int dev = device_of(g);
    const long long allocations = counter(dev, "allocations");
    std::vector<int> small(1000);
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<int>(i * 7 + 3);
    const std::vector<std::uint8_t> large = apgas_test::pattern(3 * MiB + 5, 11);
    hand_made_kernel k(&entry_b);
    k.upload(small);
    k.upload(large);
    k.tag(77);
    k.peek_device = dev;
    k.r.spilled = true;
    fake().trace(dev, 1);
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
    fake().synchronize(dev);
    const auto trace = fake().trace_of(dev);
    fake().trace(dev, 0);
    ASSERT_EQ(k.peeked.size(), 2u);
    EXPECT_TRUE(k.peeked[1].size() == large.size() && std::equal(large.begin(), large.end(), k.peeked[1].begin()))
        << "the large upload had not landed when the kernel's descriptor was written";
    // The kernel's stream: the small upload and the body copied from page-locked memory, then the kernel, then the
    // frees of its buffers, then its completion event.
    const auto kernel = std::find_if(trace.begin(), trace.end(), [](const auto& e) { return e.kind == 'k'; });
    ASSERT_NE(kernel, trace.end());
    const unsigned long long s = kernel->stream;
    bool small_copied = false;
    for (auto e = trace.begin(); e != kernel; ++e) {
      if (e->stream == s && e->kind == 'h' && e->address == k.seen[0]) {
        small_copied = true;
        EXPECT_EQ(e->host, 1) << "from page-locked memory";
        std::uint64_t first = 0;
        std::memcpy(&first, small.data(), sizeof first);
        EXPECT_EQ(e->tag, first);
      }
    }
    EXPECT_TRUE(small_copied);
    std::vector<char> after;
    std::set<unsigned long long> freed;
    for (auto e = kernel + 1; e != trace.end(); ++e) {
      if (e->stream != s) continue;
      after.push_back(static_cast<char>(e->kind));
      if (e->kind == 'f') freed.insert(e->address);
    }
    ASSERT_GE(after.size(), 4u);
    EXPECT_EQ(std::string(after.begin(), after.begin() + 4), "fffr")
        << "after the kernel: the frees of its three buffers (two uploads, the body), then its completion event";
    EXPECT_EQ(freed.count(k.seen[0]), 1u);
    EXPECT_EQ(freed.count(k.seen[1]), 1u);
    EXPECT_EQ(counter(dev, "allocations"), allocations);
  });
}

// ---- 6: apgas leaves the calling thread's context as it found it ------------------------------------------------
// A program that mixes raw CUDA with apgas must not find an apgas context current afterwards: not on the thread that
// started the run (GPU start-up), and not in an activity after apgas operations (one worker: the activity stays on
// its thread). Here the user's own context is device 1's, and the operations go to device 0.
TEST_F(FakeGpu, TheCallersContextIsLeftAsItWas) {
  APGAS_TEST_FN(cuInit);
  APGAS_TEST_FN(cuCtxSetCurrent);
  APGAS_TEST_FN(cuDevicePrimaryCtxRetain);
  APGAS_TEST_FN(cuDevicePrimaryCtxRelease);
  ASSERT_EQ(cuInit_(0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent_(nullptr), CUDA_SUCCESS);
  run_gpu(fresh_gpu_config(1), [&] {
    EXPECT_EQ(fake().current_device(), -1) << "the GPUs' start-up left a context current on the worker";
    CUcontext mine = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain_(&mine, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent_(mine), CUDA_SUCCESS);
    const place g(1);  // device 0
    const auto still_mine = [&](const char* after) {
      EXPECT_EQ(fake().current_device(), 1) << "after " << after << " the user's context is no longer current";
    };
    auto a = apgas::make_remote_array<int>(g, 100000);
    still_mine("make_remote_array");
    std::vector<int> v(100000, 3);
    apgas::finish([&] { apgas::async_copy(std::span<const int>(v), a); });
    still_mine("async_copy host -> GPU (pageable)");
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(v)); });
    still_mine("async_copy GPU -> host (pageable)");
    apgas::pinned_vector<int> p(1000, 5);
    still_mine("pinned_vector");
    apgas::finish([&] { apgas::async_copy(std::span<const int>(p), a); });
    still_mine("async_copy host -> GPU (pinned)");
    auto b = apgas::make_remote_array<int>(place(2), 1000);
    apgas::finish([&] { apgas::async_copy(a, 0, b, 0, 1000); });
    still_mine("async_copy GPU -> GPU");
    hand_made_kernel k(&entry_a);
    k.upload(v);
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
    still_mine("a kernel launch and its completion");
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
    still_mine("free_remote_array");
    ASSERT_EQ(cuCtxSetCurrent_(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease_(1), CUDA_SUCCESS);
  });
  EXPECT_EQ(fake().current_device(), -1) << "the thread that started the run has an apgas context current";
}

// ---- 8: every error after which the process must be restarted makes the place dead ------------------------------
TEST_F(FakeGpu, EveryStickyErrorOfCuda13MakesThePlaceDead) {
  for (const int code : {CUDA_ERROR_CONTAINED, CUDA_ERROR_TENSOR_MEMORY_LEAK, CUDA_ERROR_MPS_CLIENT_TERMINATED,
                         CUDA_ERROR_EXTERNAL_DEVICE}) {
    fake().reset();
    run_gpu(fresh_gpu_config(), [code] {
      const place g(2);
      const int dev = device_of(g);
      fake().fail_next(dev, "cuMemsetD8Async", code, 1);
      std::string what;
      try {
        (void)apgas::make_remote_array<int>(g, 100);
        ADD_FAILURE() << "error " << code << ": make_remote_array succeeded";
      } catch (const apgas::dead_place_exception& e) {
        what = e.what();
        EXPECT_EQ(e.where(), g.id());
      } catch (const std::exception& e) {
        ADD_FAILURE() << "error " << code << " is sticky, but the place was not made dead: " << e.what();
      }
      EXPECT_TRUE(contains(what, "GPU place 2 (device 1) is dead")) << what;
      EXPECT_THROW((void)apgas::make_remote_array<int>(g, 1), apgas::dead_place_exception) << "error " << code;
      auto ok = apgas::make_remote_array<int>(place(1), 1);  // the other GPU lives on
      apgas::free_remote_array(ok);
    });
  }
}

// ---- 9: a poller that cannot make the GPU's context current kills the place (it would otherwise wait forever) ----
TEST_F(FakeGpu, APollerThatCannotMakeTheContextCurrentKillsThePlace) {
  run_gpu(fresh_gpu_config(), [] {
    const place g(2);
    const int dev = device_of(g);
    hand_made_kernel k(&entry_a);
    fake().pause(dev, 1);
    const auto failures = finish_failures([&] {
      apgas::detail::gpu_launch(g, k.r);
      fake().fail_next(dev, "cuCtxSetCurrent", CUDA_ERROR_INVALID_CONTEXT, 1 << 30);
      fake().pause(dev, 0);
    });
    ASSERT_EQ(failures.size(), 1u);
    apgas_test::inspect_as<apgas::dead_place_exception>(failures[0], [&](const apgas::dead_place_exception& e) {
      EXPECT_EQ(e.where(), g.id());
      EXPECT_TRUE(contains(e.what(), "cuCtxSetCurrent")) << e.what();
      EXPECT_TRUE(contains(e.what(), "CUDA_ERROR_INVALID_CONTEXT")) << e.what();
    });
    fake().reset();
    EXPECT_THROW((void)apgas::make_remote_array<int>(g, 1), apgas::dead_place_exception);
  });
}

// ---- 10: remote arrays from the stream-ordered allocator; a free does not wait for the GPU ----------------------
TEST_F(FakeGpu, RemoteArraysUseTheStreamOrderedAllocatorAndAFreeDoesNotWait) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    EXPECT_EQ(fake().pool_access(0, 1), 1) << "GPU 1 may read GPU 0's pool memory (peer kernels, peer copies)";
    EXPECT_EQ(fake().pool_access(1, 0), 1);
    auto a = apgas::make_remote_array<int>(g, 1000, 4);
    EXPECT_EQ(fake().read<int>(dev, a.token(), 1000), std::vector<int>(1000, 4));
    // A kernel is queued on the paused GPU: the free must return at once, not when the GPU has finished it.
    hand_made_kernel k(&entry_a);
    std::atomic<bool> freed{false};
    bool freed_while_paused = false;
    fake().pause(dev, 1);
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      freed_while_paused = freed.load();
      fake().pause(dev, 0);
    });
    apgas::finish([&] {
      apgas::detail::gpu_launch(g, k.r);
      apgas::free_remote_array(a);
      freed = true;
    });
    releaser.join();
    EXPECT_TRUE(freed_while_paused) << "free_remote_array waited for the GPU's other work";
    EXPECT_EQ(counter(-1, "sync_allocs"), 0) << "cuMemAlloc: an implicit synchronisation point";
    EXPECT_EQ(counter(-1, "sync_frees"), 0) << "cuMemFree: waits for every kernel of the GPU";
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "allocations"), 0);
  });
}

// ---- a GPU host whose GPUs have nothing in flight lets its idle workers sleep -----------------------------------
namespace {
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
}  // namespace

TEST_F(FakeGpu, IdleWorkersSleepWhileNoGpuWorkIsInFlight) {
  run_gpu(gpu_config("all", apgas::config::default_dma_slice, 4), [] {
    // Three of the four workers have nothing to do while this activity holds its worker for 300 ms. The GPU
    // backend's hook needs polling only while GPU work is in flight: they sleep, they do not nap and poll (measured
    // on 2 cores: 0.16 s of CPU time in these 0.3 s when they polled, 0.002 s now).
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double used = cpu_seconds() - before;
    EXPECT_LT(used, 0.06) << "idle workers polled an idle GPU backend: " << used << " s of CPU time in 0.3 s";
    // Work in flight is still noticed: a kernel on a paused GPU ends once the GPU goes on.
    const place g(1);
    const int dev = device_of(g);
    hand_made_kernel k(&entry_a);
    fake().pause(dev, 1);
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      fake().pause(dev, 0);
    });
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
    releaser.join();
    EXPECT_EQ(counter(dev, "kernel_launches"), 1);
  });
}

// ---- 14: the opt-in above 48 KiB counts the function's static shared memory ------------------------------------
TEST_F(FakeGpu, SharedMemoryOptInCountsStaticSharedMemory) {
  ASSERT_EQ(fake().set_static_shared(&entry_e, static_cast<int>(8 * KiB)), 0);
  run_gpu(fresh_gpu_config(), [] {  // a fresh accelerator: the function is new to it
    const place g(1);
    const int dev = device_of(g);
    hand_made_kernel k(&entry_e);
    k.r.dynamic_shared = 44 * KiB;  // 44 + 8 > 48 KiB: only with the opt-in
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
    EXPECT_EQ(counter(dev, "kernel_launches"), 1);
    EXPECT_EQ(counter(dev, "last_shared"), static_cast<long long>(44 * KiB));
    // The most a launch may ask: the device's opt-in limit (227 KiB) less the static part; one byte more is refused
    // before anything starts.
    k.r.dynamic_shared = 219 * KiB;
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });
    EXPECT_EQ(counter(dev, "kernel_launches"), 2);
    k.r.dynamic_shared = 219 * KiB + 1;
    apgas::finish([&] {
      EXPECT_TRUE(contains(what_of<apgas::kernel_launch_error>([&] { apgas::detail::gpu_launch(g, k.r); }),
                           "dynamic shared memory"));
    });
    EXPECT_EQ(counter(dev, "kernel_launches"), 2);
  });
}

// ---- 15: a completion marker that cannot be recorded ends its operation synchronously --------------------------
// Every GPU operation is enqueued on a stream and followed by an event, its completion marker, which the poller (or
// the activity parked on it) watches. When cuEventRecord fails after the operation was enqueued, the operation is
// still queued or running: the backend synchronises the stream (cuStreamSynchronize) before it throws, so that when
// the error reaches the finish nothing of the operation is in flight (the user may free or reuse the memory, the
// spooler its slice), or, if the stream cannot be synchronised either, the place is dead. Here the GPU is paused, the
// marker's record fails once, and a helper thread lets the GPU go on after 200 ms: no error may be reported before.

TEST_F(FakeGpu, TheFakesStreamSynchronizeWaitsForItsStreamAndReportsAStickyError) {
  APGAS_TEST_FN(cuInit);
  APGAS_TEST_FN(cuCtxSetCurrent);
  APGAS_TEST_FN(cuDevicePrimaryCtxRetain);
  APGAS_TEST_FN(cuDevicePrimaryCtxRelease);
  APGAS_TEST_FN(cuStreamCreate);
  APGAS_TEST_FN(cuStreamDestroy);
  APGAS_TEST_FN(cuStreamSynchronize);
  APGAS_TEST_FN(cuMemAlloc);
  APGAS_TEST_FN(cuMemFree);
  APGAS_TEST_FN(cuMemHostAlloc);
  APGAS_TEST_FN(cuMemFreeHost);
  APGAS_TEST_FN(cuMemcpyHtoDAsync);
  ASSERT_NE(cuStreamSynchronize_, nullptr);
  ASSERT_EQ(cuInit_(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain_(&ctx, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent_(ctx), CUDA_SUCCESS);
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate_(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_(&p, 4096), CUDA_SUCCESS);
  void* h = nullptr;
  ASSERT_EQ(cuMemHostAlloc_(&h, 4096, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  std::memset(h, 7, 4096);

  // Paused: returns once another thread has let the device go on, the copy done.
  std::atomic<bool> released{false};
  fake().pause(1, 1);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, h, 4096, s), CUDA_SUCCESS);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = true;
    fake().pause(1, 0);
  });
  EXPECT_EQ(cuStreamSynchronize_(s), CUDA_SUCCESS);
  EXPECT_TRUE(released.load()) << "returned while the stream was paused";
  EXPECT_EQ(fake().read<std::uint8_t>(1, p, 4096), std::vector<std::uint8_t>(4096, 7));
  releaser.join();
  EXPECT_EQ(counter(1, "stream_syncs"), 1);

  // An injected failure returns at once, the copy still queued.
  fake().pause(1, 1);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, h, 4096, s), CUDA_SUCCESS);
  fake().fail_next(1, "cuStreamSynchronize", CUDA_ERROR_INVALID_VALUE, 1);
  EXPECT_EQ(cuStreamSynchronize_(s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(counter(1, "ops_pending"), 1);
  fake().pause(1, 0);
  EXPECT_EQ(cuStreamSynchronize_(s), CUDA_SUCCESS);
  EXPECT_EQ(counter(1, "ops_pending"), 0);

  // A device that fails while a synchronize waits on its paused stream: the sticky error, then at once every time.
  fake().pause(1, 1);
  ASSERT_EQ(cuMemcpyHtoDAsync_(p, h, 4096, s), CUDA_SUCCESS);
  std::thread killer([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fake().fail(1, CUDA_ERROR_LAUNCH_FAILED);
  });
  EXPECT_EQ(cuStreamSynchronize_(s), CUDA_ERROR_LAUNCH_FAILED);
  killer.join();
  EXPECT_EQ(counter(1, "ops_pending"), 0) << "a failed device's streams go on (moving no data)";
  EXPECT_EQ(cuStreamSynchronize_(s), CUDA_ERROR_LAUNCH_FAILED);
  fake().reset();

  EXPECT_EQ(cuStreamSynchronize_(nullptr), CUDA_SUCCESS) << "the legacy default stream: the whole device";
  EXPECT_EQ(cuMemFree_(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost_(h), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy_(s), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSetCurrent_(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuDevicePrimaryCtxRelease_(1), CUDA_SUCCESS);
}

constexpr auto release_after = std::chrono::milliseconds(200);

/// What a finish reported, and what was true the moment it ended.
struct reported {
  std::vector<std::string> errors;  // what() of each exception
  int cuda_errors = 0;              // how many were cuda_error
  int dead = 0;                     // how many were dead_place_exception
  long long pending = -1;           // the device's stream operations not yet executed
  bool released = false;            // the helper thread had let the device go on
};

/// Runs `issue` in a finish that must fail, while device `dev` is paused and its next cuEventRecord fails with
/// `error` (and, with a `sync_error`, its next cuStreamSynchronize with that); a helper thread lets the device go on
/// after release_after. `at_end` runs right after the finish has ended (outside the handler: it may park), before
/// the helper is joined.
template <class Issue, class AtEnd>
reported unrecordable_marker(int dev, Issue&& issue, AtEnd&& at_end, int error = CUDA_ERROR_INVALID_VALUE,
                             int sync_error = 0) {
  std::atomic<bool> released{false};
  fake().pause(dev, 1);
  fake().fail_next(dev, "cuEventRecord", error, 1);
  if (sync_error != 0) fake().fail_next(dev, "cuStreamSynchronize", sync_error, 1);
  std::thread releaser([&] {
    std::this_thread::sleep_for(release_after);
    released = true;
    fake().pause(dev, 0);
  });
  reported r;
  std::vector<std::exception_ptr> failures;
  try {
    apgas::finish(issue);
    ADD_FAILURE() << "the finish did not throw";
  } catch (const apgas::multiple_exceptions& m) {
    r.pending = counter(dev, "ops_pending");
    r.released = released.load();
    failures = m.exceptions();
  }
  at_end();
  releaser.join();
  for (const auto& e : failures) {
    try {
      std::rethrow_exception(e);
    } catch (const apgas::dead_place_exception& x) {
      ++r.dead;
      r.errors.emplace_back(x.what());
    } catch (const apgas::cuda_error& x) {
      ++r.cuda_errors;
      r.errors.emplace_back(x.what());
    } catch (const std::exception& x) {
      r.errors.emplace_back(x.what());
    }
  }
  return r;
}

/// One cuda_error naming cuEventRecord and the injected error, reported only once the GPU had run everything queued.
void expect_ended_then_reported(const reported& r, const std::string& what) {
  ASSERT_EQ(r.errors.size(), 1u) << what;
  EXPECT_EQ(r.cuda_errors, 1) << what << ": " << r.errors[0];
  EXPECT_TRUE(contains(r.errors[0], "cuEventRecord")) << what << ": " << r.errors[0];
  EXPECT_TRUE(contains(r.errors[0], "CUDA_ERROR_INVALID_VALUE")) << what << ": " << r.errors[0];
  EXPECT_TRUE(r.released) << what << ": the error was reported while the GPU was paused, the operation still queued";
  EXPECT_EQ(r.pending, 0) << what << ": operations were still queued when the error was reported";
}

TEST_F(FakeGpu, ACopyWhoseMarkerCannotBeRecordedHasLandedWhenItFails) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    constexpr std::size_t n = 256 * KiB;
    const std::vector<std::uint8_t> up = apgas_test::pattern(n, 21), down = apgas_test::pattern(n, 22);
    auto a = apgas::make_remote_array<std::uint8_t>(g, n);
    auto b = apgas::make_remote_array<std::uint8_t>(g, n);
    auto c = apgas::make_remote_array<std::uint8_t>(g, n);
    {  // host -> GPU, straight from page-locked memory
      const auto src = pinned_copy(up);
      std::vector<std::uint8_t> landed;
      const reported r = unrecordable_marker(
          dev, [&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); },
          [&] { landed = fake().read<std::uint8_t>(dev, a.token(), n); });
      expect_ended_then_reported(r, "host -> GPU");
      EXPECT_EQ(first_difference(landed, up), -1) << "the copy had not landed when its error was reported";
      fake().synchronize(dev);  // (before src goes)
    }
    {  // GPU -> host, into page-locked memory
      ASSERT_EQ(fake().poke(dev, b.token(), down.data(), n), 0);
      apgas::pinned_vector<std::uint8_t> dst(n, 0);
      std::vector<std::uint8_t> landed;
      const reported r = unrecordable_marker(
          dev, [&] { apgas::async_copy(b, 0, std::span<std::uint8_t>(dst)); },
          [&] { landed.assign(dst.begin(), dst.end()); });
      expect_ended_then_reported(r, "GPU -> host");
      EXPECT_EQ(first_difference(landed, down), -1) << "the copy had not landed when its error was reported";
      fake().synchronize(dev);  // (before dst goes)
    }
    {  // within the GPU
      std::vector<std::uint8_t> landed;
      const reported r = unrecordable_marker(
          dev, [&] { apgas::async_copy(b, 0, c, 0, n); },
          [&] { landed = fake().read<std::uint8_t>(dev, c.token(), n); });
      expect_ended_then_reported(r, "GPU -> GPU");
      EXPECT_EQ(first_difference(landed, down), -1) << "the copy had not landed when its error was reported";
      fake().synchronize(dev);
    }
    EXPECT_GE(counter(dev, "stream_syncs"), 3);
    // The error was not sticky: the place works on.
    const std::vector<std::uint8_t> again = apgas_test::pattern(n, 23);
    const auto pinned_again = pinned_copy(again);
    std::vector<std::uint8_t> back(n, 0);
    apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(pinned_again), a); });
    apgas::finish([&] { apgas::async_copy(a, 0, c, 0, n); });
    apgas::finish([&] { apgas::async_copy(c, 0, std::span<std::uint8_t>(back)); });
    EXPECT_EQ(first_difference(back, again), -1);
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
    apgas::free_remote_array(c);
  });
}

// Through the DMA spooler (pageable memory): the pump gives its slice back when its DMA failed, and the next copy
// refills that slice at once. Had the failed DMA still been queued, it would have copied the next copy's bytes.
TEST_F(FakeGpu, ASpooledCopyWhoseMarkerCannotBeRecordedGivesItsSliceBackOnlyOnceItsDmaRan) {
  run_gpu(gpu_config(), [] {
    const place g(2);
    const int dev = device_of(g);
    constexpr std::size_t n = 64 * KiB;  // one chunk: one pump, one slice
    const std::vector<std::uint8_t> first = apgas_test::pattern(n, 31), second = apgas_test::pattern(n, 32);
    auto a = apgas::make_remote_array<std::uint8_t>(g, n);
    auto b = apgas::make_remote_array<std::uint8_t>(g, n);
    std::vector<std::uint8_t> landed;
    const reported r = unrecordable_marker(
        dev, [&] { apgas::async_copy(std::span<const std::uint8_t>(first), a); },
        [&] {
          landed = fake().read<std::uint8_t>(dev, a.token(), n);
          apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(second), b); });
        });
    expect_ended_then_reported(r, "spooled host -> GPU");
    EXPECT_EQ(first_difference(landed, first), -1) << "the copy had not landed when its error was reported";
    fake().synchronize(dev);
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(dev, a.token(), n), first), -1)
        << "the failed copy's DMA ran after its slice had been refilled by the next copy";
    EXPECT_EQ(first_difference(fake().read<std::uint8_t>(dev, b.token(), n), second), -1);
    // Device -> host through the spooler, likewise reported once its DMA has run; then both ways work on.
    std::vector<std::uint8_t> out(n, 0);
    const reported r2 = unrecordable_marker(
        dev, [&] { apgas::async_copy(b, 0, std::span<std::uint8_t>(out)); }, [] {});
    expect_ended_then_reported(r2, "spooled GPU -> host");
    apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(second), a); });
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(out)); });
    EXPECT_EQ(first_difference(out, second), -1);
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
  });
}

// A kernel: its staged uploads, the launch and the stream-ordered frees of its buffers are queued before its
// completion event; when that cannot be recorded, all of them have run when the launch reports it.
TEST_F(FakeGpu, AKernelWhoseCompletionMarkerCannotBeRecordedHasEndedWhenItFails) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    const std::vector<int> small(1000, 5);
    hand_made_kernel k(&entry_a);
    k.upload(small);
    const long long allocations = counter(dev, "allocations");
    long long allocations_then = -1;
    const reported r = unrecordable_marker(
        dev, [&] { apgas::detail::gpu_launch(g, k.r); }, [&] { allocations_then = counter(dev, "allocations"); });
    expect_ended_then_reported(r, "kernel");
    EXPECT_EQ(allocations_then, allocations) << "the launch's buffers were not yet freed when its error was reported";
    EXPECT_EQ(counter(dev, "kernel_launches"), 1);
    apgas::finish([&] { apgas::detail::gpu_launch(g, k.r); });  // the place works on
    EXPECT_EQ(counter(dev, "kernel_launches"), 2);
    fake().synchronize(dev);
    EXPECT_EQ(counter(dev, "allocations"), allocations);
  });
}

// A copy on an in-order queue's stream, likewise.
TEST_F(FakeGpu, AQueuedCopyWhoseMarkerCannotBeRecordedHasLandedWhenItFails) {
  run_gpu(gpu_config(), [] {
    const place g(2);
    const int dev = device_of(g);
    constexpr std::size_t n = 64 * KiB;
    const std::vector<std::uint8_t> data = apgas_test::pattern(n, 41), again = apgas_test::pattern(n, 42);
    const auto src = pinned_copy(data);
    const auto src_again = pinned_copy(again);
    auto x = apgas::make_remote_array<std::uint8_t>(g, n);
    std::vector<std::uint8_t> landed;
    const reported r = unrecordable_marker(
        dev,
        [&] {
          auto q = apgas::in_order(g);
          q.async_copy(std::span<const std::uint8_t>(src), x);
        },
        [&] { landed = fake().read<std::uint8_t>(dev, x.token(), n); });
    expect_ended_then_reported(r, "queued host -> GPU");
    EXPECT_EQ(first_difference(landed, data), -1) << "the copy had not landed when its error was reported";
    apgas::pinned_vector<std::uint8_t> out(n, 0);
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      q.async_copy(std::span<const std::uint8_t>(src_again), x);
      q.async_copy(x, 0, std::span<std::uint8_t>(out));
    });
    EXPECT_EQ(first_difference(out, again), -1);
    apgas::free_remote_array(x);
  });
}

// When the stream cannot be synchronised either, nothing says the operation has ended: the place is dead (the error
// names both calls). A sticky error from cuEventRecord itself kills the place as every sticky error does.
TEST_F(FakeGpu, AMarkerThatCannotBeRecordedOnAStreamThatCannotBeSynchronisedKillsThePlace) {
  for (const bool sticky : {false, true}) {
    fake().reset();
    run_gpu(fresh_gpu_config(), [sticky] {
      const place g(2);
      const int dev = device_of(g);
      constexpr std::size_t n = 64 * KiB;
      const auto src = pinned_copy(apgas_test::pattern(n, 51));
      auto a = apgas::make_remote_array<std::uint8_t>(g, n);
      const reported r = unrecordable_marker(
          dev, [&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); }, [] {},
          sticky ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_INVALID_VALUE, sticky ? 0 : CUDA_ERROR_INVALID_HANDLE);
      ASSERT_EQ(r.errors.size(), 1u);
      EXPECT_EQ(r.dead, 1) << r.errors[0];
      const std::string& what = r.errors[0];
      EXPECT_TRUE(contains(what, "GPU place 2 (device 1) is dead")) << what;
      EXPECT_TRUE(contains(what, "cuEventRecord")) << what;
      if (sticky) {
        EXPECT_TRUE(contains(what, "CUDA_ERROR_ILLEGAL_ADDRESS")) << what;
      } else {
        EXPECT_TRUE(contains(what, "CUDA_ERROR_INVALID_VALUE")) << what;
        EXPECT_TRUE(contains(what, "cuStreamSynchronize")) << what;
        EXPECT_TRUE(contains(what, "CUDA_ERROR_INVALID_HANDLE")) << what;
      }
      fake().synchronize(
          dev);  // (the fake GPU itself is healthy in the first case: its copy runs; src must outlive it)
      EXPECT_THROW((void)apgas::make_remote_array<int>(g, 1), apgas::dead_place_exception);
      auto ok = apgas::make_remote_array<int>(place(1), 1);  // the other GPU lives on
      apgas::free_remote_array(ok);
    });
  }
}

// A place that dies for a reason that is not a sticky error (here an event query that fails in the poller) says
// nothing of the work queued on its streams: the backend synchronises the context (cuCtxSynchronize) before the
// operations fail, so that when a finish sees the dead_place_exception nothing of its operations is in flight (the
// caller may free or reuse their memory). It failed them at once, the copy still queued. When the context cannot
// be synchronised either, the error says that the work may still be running (and its staging is never reused).
TEST_F(FakeGpu, APlaceThatDiesOfANonStickyErrorEndsItsQueuedWorkBeforeItsOperationsFail) {
  for (const bool sync_fails : {false, true}) {
    fake().reset();
    run_gpu(fresh_gpu_config(), [sync_fails] {
      const place g(1);
      const int dev = device_of(g);
      constexpr std::size_t n = 64 * KiB;
      const std::vector<std::uint8_t> bytes = apgas_test::pattern(n, 61);
      const auto src = pinned_copy(bytes);
      auto a = apgas::make_remote_array<std::uint8_t>(g, n);
      std::atomic<bool> released{false};
      fake().pause(dev, 1);
      fake().fail_next(dev, "cuEventQuery", CUDA_ERROR_INVALID_VALUE, 1);
      if (sync_fails) fake().fail_next(dev, "cuCtxSynchronize", CUDA_ERROR_INVALID_VALUE, 1);
      std::thread releaser([&] {
        std::this_thread::sleep_for(release_after);
        released = true;
        fake().pause(dev, 0);
      });
      std::string what;
      long long pending = -1;
      bool released_then = false;
      std::vector<std::uint8_t> landed;
      try {
        apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
        ADD_FAILURE() << "the finish did not throw";
      } catch (const apgas::multiple_exceptions& m) {
        pending = counter(dev, "ops_pending");
        released_then = released.load();
        landed = fake().read<std::uint8_t>(dev, a.token(), n);
        ASSERT_EQ(m.of_type<apgas::dead_place_exception>().size(), 1u);
        what = m.of_type<apgas::dead_place_exception>()[0]->what();
      }
      releaser.join();
      EXPECT_TRUE(contains(what, "GPU place 1 (device 0) is dead")) << what;
      EXPECT_TRUE(contains(what, "an event query failed")) << what;
      if (!sync_fails) {
        EXPECT_GE(counter(dev, "ctx_syncs"), 1);
        EXPECT_TRUE(released_then) << "the copy failed while the GPU was paused, the copy still queued: " << what;
        EXPECT_EQ(pending, 0) << what;
        EXPECT_EQ(first_difference(landed, bytes), -1) << "the copy had not landed when it failed";
        EXPECT_FALSE(contains(what, "may still be running")) << what;
      } else {
        EXPECT_TRUE(contains(what, "cuCtxSynchronize failed): it may still be running")) << what;
      }
      fake().synchronize(dev);  // (src must outlive the copy)
      EXPECT_THROW((void)apgas::make_remote_array<int>(g, 1), apgas::dead_place_exception);
    });
  }
}

// ---- 3: a driver older than the CUDA this apgas was built with (ctest apgas.cuda_fake.old_driver) -------------
TEST(FakeOldDriver, ADriverOlderThanTheBuildGivesNoGpuPlacesAndSaysWhy) {
  if (!env_is("APGAS_FAKE_CUDA_DRIVER_VERSION", "12080")) {
    GTEST_SKIP() << "runs as ctest apgas.cuda_fake.old_driver (APGAS_FAKE_CUDA_DRIVER_VERSION=12080)";
  }
  run_gpu(gpu_config(), [] { expect_no_gpu_places({"supports CUDA 12.8", "built with CUDA 13.0"}); });
  EXPECT_EQ(fake().counter(-1, "retains"), 0) << "no context on any GPU";
}

// ---- 11: the default GPUs of a process are its node-local share (ctest apgas.cuda_fake.node_share) -------------
// Local rank 1 of 2 on a node with 4 GPUs: GPUs 2 and 3 by default, all four with APGAS_GPUS=all.
TEST(FakeNodeShare, TheDefaultIsTheLocalRanksShareOfTheGpus) {
  if (!env_is("OMPI_COMM_WORLD_LOCAL_RANK", "1") || !env_is("APGAS_FAKE_CUDA_DEVICES", "4")) {
    GTEST_SKIP() << "runs as ctest apgas.cuda_fake.node_share (local rank 1 of 2, 4 fake GPUs)";
  }
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 2;
  EXPECT_EQ(cfg.gpus, "auto");
  run_gpu(cfg, [] {
    ASSERT_EQ(apgas::all_places().size(), 3u);
    EXPECT_EQ(apgas::describe(place(1)), "Fake GPU 2 (device 2, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::describe(place(2)), "Fake GPU 3 (device 3, 132 SMs, 80 GiB)");
  });
  EXPECT_EQ(fake().counter(0, "retains"), 0) << "no context on GPU 0, which is another process's";
  cfg.gpus = "all";
  run_gpu(cfg, [] { EXPECT_EQ(apgas::all_places().size(), 5u); });
}

// ---- 13: pinned memory in the context of the run's GPU, freed in a context (ctest apgas.cuda_fake.pin_context) --
TEST(FakePin, PinnedMemoryUsesTheRunsGpuAndIsFreedInAContext) {
  if (!env_is("APGAS_TEST_PIN_CONTEXT", "1")) GTEST_SKIP() << "runs as ctest apgas.cuda_fake.pin_context";
  long long blocks_before = 0;
  run_gpu(gpu_config("1"), [&] {
    blocks_before = fake().counter(0, "pinned_blocks");
    auto* v = new apgas::pinned_vector<int>(1000, 7);
    EXPECT_TRUE(apgas::is_pinned(v->data(), v->size() * sizeof(int)));
    // Freed on a thread that never had a context current.
    std::thread([v] { delete v; }).join();
  });
  EXPECT_EQ(fake().counter(0, "host_allocs"), 0) << "page-locked memory was made in GPU 0's context, which the run "
                                                    "(APGAS_GPUS=1) does not use";
  EXPECT_EQ(fake().counter(0, "retains"), 0) << "a context on GPU 0, which the run does not use";
  EXPECT_EQ(fake().counter(-1, "host_frees_without_context"), 0);
  EXPECT_EQ(fake().counter(0, "pinned_blocks"), blocks_before) << "the pinned block was not freed";
}

// ---- a run starts with the GPUs clean of what an earlier run left --------------------------------------------------
// An array left at the end of a run is freed then (it was kept for the rest of the process, its handle refused:
// memory no run could reach); serials are not given again in a later run (each run's registry counted from 1 again,
// so a freed handle of run 1 matched run 2's array made at its address and wrote into it, then freed it).
TEST_F(FakeGpu, AnEarlierRunsGpuArraysAreFreedAndOutOfReachInTheNext) {
  const apgas::config cfg = fresh_gpu_config();
  constexpr std::size_t n = 10 << 20;  // 40 MiB
  apgas::remote_array<int> freed, left;
  long long live = 0;
  run_gpu(cfg, [&] {
    freed = apgas::make_remote_array<int>(place(1), n);
    left = apgas::make_remote_array<int>(place(1), 1 << 20);
    live = counter(0, "allocations");  // both, and what the accelerator holds of its own
    auto copy = freed;  // (free_remote_array empties the handle it is given; `freed` is a stale copy)
    apgas::free_remote_array(copy);
  });
  // (frees are stream-ordered: the fake may count them a little later)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (counter(0, "allocations") > live - 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(counter(0, "allocations"), live - 2) << "an array left at the end of the run was kept";
  run_gpu(cfg, [&] {
    auto fresh = apgas::make_remote_array<int>(place(1), n, 7);
    const std::vector<int> v(4, 42);
    const std::string write = what_of<apgas::multiple_exceptions>(
        [&] { apgas::finish([&] { apgas::async_copy(std::span<const int>(v), freed); }); });
    EXPECT_TRUE(contains(write, "not inside a live remote_array") || contains(write, "a stale copy")) << write;
    EXPECT_FALSE(what_of<apgas::illegal_operation_exception>([&] { apgas::free_remote_array(freed); }).empty());
    EXPECT_FALSE(what_of<apgas::illegal_operation_exception>([&] { apgas::free_remote_array(left); }).empty());
    std::vector<int> back(4);
    apgas::finish([&] { apgas::async_copy(fresh, 0, std::span<int>(back)); });
    EXPECT_EQ(back[0], 7) << (fresh.token() == freed.token() ? "(at the address of run 1's array)" : "");
    apgas::free_remote_array(fresh);
  });
}

// A GPU that died in a run of an error that is not sticky (a failed event query) works again in the next run with
// the same settings (it stayed dead for the rest of the process). (One that died of a sticky error stays a dead place
// of the later runs, the other GPUs usable: FakeGpu.StickyErrorKillsThatGpuPlaceOnly.)
TEST_F(FakeGpu, AGpuThatDiedOfANonStickyErrorWorksInTheNextRun) {
  const apgas::config cfg = fresh_gpu_config();
  const auto works = [] {
    auto x = apgas::make_remote_array<int>(place(1), 64, 1);
    std::vector<int> v(64);
    apgas::finish([&] { apgas::async_copy(x, 0, std::span<int>(v)); });
    apgas::free_remote_array(x);
    return v[0] == 1;
  };
  run_gpu(cfg, [&] {
    EXPECT_TRUE(works());
    fake().fail_next(0, "cuEventQuery", CUDA_ERROR_INVALID_VALUE, 1);
    EXPECT_THROW((void)works(), apgas::dead_place_exception);
  });
  run_gpu(cfg, [&] { EXPECT_TRUE(works()) << "the GPU that died in the last run is still dead"; });
}


}  // namespace
