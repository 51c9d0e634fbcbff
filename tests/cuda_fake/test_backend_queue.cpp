// In-order queues at a GPU place (apgas/queue.hpp) against the fake driver: a queue is a stream of the GPU's own;
// kernels and copies with page-locked memory are enqueued on it as they are issued (no host wait between them), a
// kernel with constant data runs on the constant stream between two event waits, copies the stream cannot take wait
// for it to drain, and a refused launch stops the operations after it.
//
// Kernels are built by hand (fake_fixture.hpp: a file compiled by g++ cannot send a kernel closure to a GPU) and put
// on the queue as queue.hpp does under nvcc: an operation that hands the queue's stream and its finish token to
// detail::gpu_launch.
#include "cuda_fake/fake_fixture.hpp"
#include "support/run.hpp"

#include <apgas/queue.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// The tests' way to the queue's state (queue.hpp names this class a friend).
struct apgas::detail::queue_access {
  static const std::shared_ptr<queue_state>& state(const in_order_queue& q) { return q.state_; }
};

namespace {

using namespace apgas_test::fake_gpu;
using apgas_test::fake;
using apgas::place;

/// Put hand-made kernel k on queue q, as in_order_queue::async does for a kernel closure under nvcc.
void queue_kernel(const apgas::in_order_queue& q, hand_made_kernel& k) {
  const place p = q.where();
  apgas::detail::enqueue(apgas::detail::queue_access::state(q),
                         apgas::detail::make_queue_op(false, [p, &k](int gpu_queue, apgas::detail::finish_token& t) {
                           k.r.queue = gpu_queue;
                           k.r.token = &t;
                           apgas::detail::gpu_launch(p, k.r);
                         }));
}

/// The 8 bytes at index 0 of a pinned vector, as the fake's trace shows a copy's tag.
std::uint64_t tag_of(const apgas::pinned_vector<std::uint64_t>& v) { return v[0]; }

std::vector<apgas_fake_cuda_trace_entry> on_stream(const std::vector<apgas_fake_cuda_trace_entry>& trace,
                                                   unsigned long long s) {
  std::vector<apgas_fake_cuda_trace_entry> out;
  for (const auto& e : trace) {
    if (e.stream == s) out.push_back(e);
  }
  return out;
}

// Put, kernel, put, kernel, get: issued while the GPU's streams are paused, so nothing the issuer did waited for an
// operation to end; all on one stream, in issue order; each kernel reads what the put before it wrote.
TEST_F(FakeGpu, QueueOperationsGoOnOneStreamInIssueOrderWithoutHostWaits) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    auto x = apgas::make_remote_array<std::uint64_t>(g, 4);
    const apgas::pinned_vector<std::uint64_t> a(4, 0xA1), b(4, 0xB2);
    apgas::pinned_vector<std::uint64_t> out(4, 0);
    hand_made_kernel k1(&entry_a), k2(&entry_b);
    k1.tag(1);
    k2.tag(2);
    fake().watch(dev, x.token());
    fake().trace(dev, 1);
    fake().set_delay_us(300);
    fake().pause(dev, 1);
    std::size_t enqueued_while_paused = 0;
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      q.async_copy(std::span<const std::uint64_t>(a), x);
      queue_kernel(q, k1);
      q.async_copy(std::span<const std::uint64_t>(b), x);
      queue_kernel(q, k2);
      q.async_copy(x, 0, std::span<std::uint64_t>(out));
      for (const auto& e : fake().trace_of(dev)) enqueued_while_paused += e.kind != 'r' ? 1 : 0;
      fake().pause(dev, 0);
    });
    fake().set_delay_us(0);
    fake().synchronize(dev);
    const auto trace = fake().trace_of(dev);
    fake().trace(dev, 0);
    EXPECT_EQ(out[0], 0xB2u) << "the get ran after the second put";
    const auto put = std::find_if(trace.begin(), trace.end(), [&](const auto& e) { return e.kind == 'h'; });
    ASSERT_NE(put, trace.end());
    std::string kinds;
    for (const auto& e : on_stream(trace, put->stream)) {
      if (e.kind == 'r') continue;  // (each operation's completion event)
      kinds += static_cast<char>(e.kind);
      if (e.kind == 'k') {
        EXPECT_EQ(e.seen, e.tag == 1 ? tag_of(a) : tag_of(b)) << "kernel " << e.tag;
      }
      if (e.kind == 'h') {
        EXPECT_EQ(e.host, 1) << "straight from page-locked memory";
      }
    }
    EXPECT_EQ(kinds, "hkhkd") << "put, kernel, put, kernel, get, in issue order on the queue's stream";
    EXPECT_EQ(enqueued_while_paused, 5u) << "every operation was enqueued before the first one ran";
    apgas::free_remote_array(x);
  });
}

// A kernel with constant data runs on the GPU's constant stream (its constant copy and the kernel as one step); the
// queue's order holds across: the constant stream waits for what the queue got before, the queue waits for the kernel.
TEST_F(FakeGpu, AQueuedKernelWithConstantsIsOrderedBothWays) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    auto constant_buffer = apgas::make_remote_array<std::uint8_t>(g, 64 * KiB);
    g_constant_address = constant_buffer.token();
    auto x = apgas::make_remote_array<std::uint64_t>(g, 4);
    // Four puts before the kernel: the queue's stream is busy for four delays when the constant stream, idle, would
    // otherwise run the kernel after two (its constant copy, itself).
    std::vector<apgas::pinned_vector<std::uint64_t>> before;
    for (std::uint64_t v = 1; v <= 4; ++v) before.emplace_back(4, 0xA0 + v);
    const apgas::pinned_vector<std::uint64_t> b(4, 0xB2);
    apgas::pinned_vector<std::uint64_t> out(4, 0);
    hand_made_kernel k(&entry_c);
    k.tag(3);
    const std::vector<std::uint64_t> constant{42, 43};
    k.r.constant = std::as_bytes(std::span<const std::uint64_t>(constant));
    fake().watch(dev, x.token());
    fake().trace(dev, 1);
    fake().set_delay_us(2000);
    const long long waits = counter(dev, "stream_waits");
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      for (const auto& v : before) q.async_copy(std::span<const std::uint64_t>(v), x);
      queue_kernel(q, k);
      q.async_copy(std::span<const std::uint64_t>(b), x);  // must not overtake the kernel
      q.async_copy(x, 0, std::span<std::uint64_t>(out));
    });
    fake().set_delay_us(0);
    fake().synchronize(dev);
    const auto trace = fake().trace_of(dev);
    fake().trace(dev, 0);
    EXPECT_EQ(counter(dev, "stream_waits") - waits, 2) << "one event wait each way";
    const auto kernel = std::find_if(trace.begin(), trace.end(), [](const auto& e) { return e.kind == 'k'; });
    ASSERT_NE(kernel, trace.end());
    EXPECT_EQ(kernel->seen, 0xA4u) << "the kernel ran after the puts before it and before the put after it";
    EXPECT_EQ(out[0], 0xB2u);
    apgas::free_remote_array(x);
    apgas::free_remote_array(constant_buffer);
  });
}

// A copy from pageable memory goes through the DMA spooler: the queue drains its stream first, and the next kernel
// waits for the copy.
TEST_F(FakeGpu, APageableCopyOnAQueueWaitsForTheStreamAndHoldsTheNextKernel) {
  run_gpu(gpu_config(), [] {
    const place g(2);
    const int dev = device_of(g);
    auto x = apgas::make_remote_array<std::uint64_t>(g, 1000);
    const apgas::pinned_vector<std::uint64_t> a(1000, 0xA1);
    const std::vector<std::uint64_t> b(1000, 0xB2);  // pageable
    std::vector<std::uint64_t> out(1000, 0);         // pageable
    hand_made_kernel k(&entry_d);
    k.tag(4);
    fake().watch(dev, x.token());
    fake().trace(dev, 1);
    fake().set_delay_us(300);
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      q.async_copy(std::span<const std::uint64_t>(a), x);
      q.async_copy(std::span<const std::uint64_t>(b), x);
      queue_kernel(q, k);
      q.async_copy(x, 0, std::span<std::uint64_t>(out));
    });
    fake().set_delay_us(0);
    fake().synchronize(dev);
    const auto trace = fake().trace_of(dev);
    fake().trace(dev, 0);
    const auto kernel = std::find_if(trace.begin(), trace.end(), [](const auto& e) { return e.kind == 'k'; });
    ASSERT_NE(kernel, trace.end());
    EXPECT_EQ(kernel->seen, 0xB2u) << "the kernel read what the pageable copy before it wrote";
    EXPECT_EQ(first_difference(out, b), -1);
    apgas::free_remote_array(x);
  });
}

// A launch the GPU refuses (more shared memory than a block may have) fails its operation; the operations after it on
// the queue are not run and each says why; the GPU place stays usable, and so does a new queue.
TEST_F(FakeGpu, ARefusedLaunchStopsTheQueueAfterIt) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    auto x = apgas::make_remote_array<std::uint64_t>(g, 4);
    const apgas::pinned_vector<std::uint64_t> a(4, 0xA1);
    apgas::pinned_vector<std::uint64_t> out(4, 0);
    hand_made_kernel bad(&entry_e);
    bad.r.dynamic_shared = 1 * MiB;
    std::vector<std::string> errors;
    try {
      apgas::finish([&] {
        auto q = apgas::in_order(g);
        queue_kernel(q, bad);
        q.async_copy(std::span<const std::uint64_t>(a), x);
      });
      ADD_FAILURE() << "the finish reported nothing";
    } catch (const apgas::multiple_exceptions& m) {
      for (const auto& e : m.exceptions()) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          errors.emplace_back(x.what());
        }
      }
    }
    ASSERT_EQ(errors.size(), 2u);
    const bool first_is_launch = contains(errors[0], "shared memory");
    const std::string& later = first_is_launch ? errors[1] : errors[0];
    EXPECT_TRUE(contains(first_is_launch ? errors[0] : errors[1], "shared memory")) << errors[0] << " | " << errors[1];
    EXPECT_TRUE(contains(later, "not run, an earlier operation of the queue failed")) << later;
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      q.async_copy(std::span<const std::uint64_t>(a), x);
      q.async_copy(x, 0, std::span<std::uint64_t>(out));
    });
    EXPECT_EQ(out[0], 0xA1u);
    apgas::free_remote_array(x);
  });
}

// Copies between the GPUs of the host go on the stream of the queue's GPU, whichever side it is.
TEST_F(FakeGpu, QueuedGpuToGpuCopies) {
  run_gpu(gpu_config(), [] {
    const place g1(1), g2(2);
    auto x = apgas::make_remote_array<std::uint64_t>(g1, 8);
    auto y = apgas::make_remote_array<std::uint64_t>(g2, 8);
    auto z = apgas::make_remote_array<std::uint64_t>(g1, 8);
    const apgas::pinned_vector<std::uint64_t> a{1, 2, 3, 4, 5, 6, 7, 8};
    apgas::pinned_vector<std::uint64_t> out(8, 0);
    fake().set_delay_us(200);
    apgas::finish([&] {
      auto q = apgas::in_order(g2);
      q.async_copy(std::span<const std::uint64_t>(a), y);
      q.async_copy(y, 0, x, 0, 8);  // source: the queue's GPU
      q.async_copy(x, 0, y, 0, 8);  // destination: the queue's GPU
      q.async_copy(x, 2, z, 0, 6);  // neither: waits for the stream, then runs as apgas::async_copy
      q.async_copy(z, 0, std::span<std::uint64_t>(out));  // not the queue's GPU: likewise
    });
    fake().set_delay_us(0);
    EXPECT_EQ(out[0], 3u);
    EXPECT_EQ(out[5], 8u);
    EXPECT_EQ(counter(device_of(g2), "peer_ops"), 2);
    apgas::free_remote_array(x);
    apgas::free_remote_array(y);
    apgas::free_remote_array(z);
  });
}

// A constant kernel of a queue: after the kernel, an event wait makes the queue wait for it. If that wait cannot be
// enqueued, the queue would not wait for the kernel and nothing would see it end: the kernel's stream is synchronised
// before the launch fails, so the kernel has run when its error is reported. The GPU is paused; while the launch call
// stalls (the kernel enqueued), the next event wait is made to fail; a helper lets the GPU go on after 200 ms.
TEST_F(FakeGpu, AQueueThatCannotBeMadeToWaitForItsConstantKernelReportsItOnceTheKernelRan) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    auto constant_buffer = apgas::make_remote_array<std::uint8_t>(g, 64 * KiB);
    g_constant_address = constant_buffer.token();
    auto x = apgas::make_remote_array<std::uint64_t>(g, 4, std::uint64_t{0x5EE});
    hand_made_kernel k(&entry_c);
    k.tag(9);
    const std::vector<std::uint64_t> constant{7, 8};
    k.r.constant = std::as_bytes(std::span<const std::uint64_t>(constant));
    const long long launches = counter(dev, "kernel_launches");
    fake().watch(dev, x.token());
    fake().trace(dev, 1);
    fake().pause(dev, 1);
    fake().stall_next(dev, "cuLaunchKernel", 50000, 1);
    const auto start = std::chrono::steady_clock::now();
    std::atomic<bool> released{false};
    std::thread helper([&] {
      while (counter(-1, "stalling") == 0 && std::chrono::steady_clock::now() < start + std::chrono::seconds(5)) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      fake().fail_next(dev, "cuStreamWaitEvent", CUDA_ERROR_INVALID_VALUE, 1);
      std::this_thread::sleep_until(start + std::chrono::milliseconds(200));
      released = true;
      fake().pause(dev, 0);
    });
    std::vector<std::string> errors;
    bool released_then = false;
    std::vector<apgas_fake_cuda_trace_entry> trace_then;
    try {
      apgas::finish([&] {
        auto q = apgas::in_order(g);
        queue_kernel(q, k);
      });
      ADD_FAILURE() << "the finish reported nothing";
    } catch (const apgas::multiple_exceptions& m) {
      released_then = released.load();
      trace_then = fake().trace_of(dev);
      for (const auto& e : m.exceptions()) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          errors.emplace_back(x.what());
        }
      }
    }
    helper.join();
    fake().trace(dev, 0);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(contains(errors[0], "cuStreamWaitEvent")) << errors[0];
    EXPECT_TRUE(contains(errors[0], "CUDA_ERROR_INVALID_VALUE")) << errors[0];
    EXPECT_TRUE(released_then) << "the error was reported while the GPU was paused, the kernel still queued";
    EXPECT_EQ(counter(dev, "kernel_launches") - launches, 1);
    const auto kernel = std::find_if(trace_then.begin(), trace_then.end(), [](const auto& e) { return e.kind == 'k'; });
    ASSERT_NE(kernel, trace_then.end());
    EXPECT_EQ(kernel->seen, 0x5EEu) << "the kernel had not run when its error was reported";
    // The place and its queues work on.
    const apgas::pinned_vector<std::uint64_t> a(4, 0xA1);
    apgas::pinned_vector<std::uint64_t> out(4, 0);
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      queue_kernel(q, k);
      q.async_copy(std::span<const std::uint64_t>(a), x);
      q.async_copy(x, 0, std::span<std::uint64_t>(out));
    });
    EXPECT_EQ(out[0], 0xA1u);
    EXPECT_EQ(counter(dev, "kernel_launches") - launches, 2);
    apgas::free_remote_array(x);
    apgas::free_remote_array(constant_buffer);
  });
}

// One activity's call costs one enqueue, however fast others issue: while the issuer's own copy is being enqueued
// (the driver call stalled for 20 ms), another activity issues copies until the issuer's call has returned. The issuer
// ran them all before returning (the feeder reached its cap, hundreds of milliseconds later: with no cap, for ever);
// now a driver activity takes what others issued.
TEST_F(FakeGpu, AnIssuerDoesNotRunTheOperationsOthersKeepIssuing) {
  run_gpu(gpu_config(), [] {
    const place g(1);
    const int dev = device_of(g);
    constexpr long cap = 1000000;
    auto x = apgas::make_remote_array<std::uint64_t>(g, 16);
    const apgas::pinned_vector<std::uint64_t> a(16, 1);
    std::atomic<bool> calling{false}, returned{false};
    std::atomic<long> fed{0};
    apgas::finish([&] {
      auto q = apgas::in_order(g);
      apgas::async([&, q]() mutable {  // the feeder
        while (!calling.load()) std::this_thread::yield();
        while (!returned.load() && fed.load() < cap) {
          q.async_copy(std::span<const std::uint64_t>(a), x);
          fed.fetch_add(1);
        }
      });
      apgas::async([&, q]() mutable {  // the issuer
        fake().stall_next(dev, "cuMemcpyHtoDAsync", 20000, 1);
        calling = true;
        q.async_copy(std::span<const std::uint64_t>(a), x);
        returned = true;
      });
    });
    EXPECT_TRUE(returned.load());
    EXPECT_LT(fed.load(), cap) << "the issuer's call returned only when the others stopped issuing";
    apgas::free_remote_array(x);
  });
}

// A queue serves the run it was made in: a handle kept into the next run is refused there (it was accepted, on a
// stream id of the earlier run), and its release in that run gives nothing back to the new run's streams (the id was
// put on the free list while a queue of the new run held it: two queues on one stream).
TEST_F(FakeGpu, AQueueOfAnEarlierRunIsRefused) {
  std::optional<apgas::in_order_queue> kept;
  run_gpu(gpu_config(), [&] { kept.emplace(apgas::in_order(place(1))); });
  run_gpu(gpu_config(), [&] {
    const place g(1);
    auto x = apgas::make_remote_array<std::uint64_t>(g, 4);
    const apgas::pinned_vector<std::uint64_t> a(4, 3);
    EXPECT_TRUE(contains(apgas_test::what_of<apgas::illegal_operation_exception>([&] {
                           kept->async_copy(std::span<const std::uint64_t>(a), x);
                         }),
                         "was made in an earlier run"));
    auto q1 = apgas::in_order(g);
    kept.reset();  // (its release in this run)
    auto q2 = apgas::in_order(g);
    const auto stream_of = [](const apgas::in_order_queue& q) {
      return apgas::detail::gpu_queue_of(*apgas::detail::queue_access::state(q));
    };
    EXPECT_NE(stream_of(q1), stream_of(q2)) << "two queues of one run on one stream";
    apgas::free_remote_array(x);
  });
}

}  // namespace
