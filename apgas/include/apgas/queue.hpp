#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file queue.hpp
/// In-order queues: dependent kernels and copies at one place, issued without a finish between them.
/// @code
///   apgas::finish([&] {
///     auto q = apgas::in_order(gpu);                     // or a host place: the same program, the same order
///     q.async_copy(std::span<const float>(host), a);     // the input, before the first sweep reads it
///     for (int it = 0; it < 100; ++it) q.async(stencil_kernel(it % 2 ? b : a, it % 2 ? a : b));  // (in, out)
///     q.async_copy(a, 0, std::span<float>(result));      // sweep 99 wrote a
///   });                                                   // one finish for the 102 operations
/// @endcode
/// Each operation starts after the one issued before it on the queue has ended (its kernel's blocks, its copy's
/// data landed) and counts in the finish that governs the activity that issued it, like an activity. At a GPU the
/// queue is a stream of the GPU's own: kernels and copies with page-locked host memory are enqueued on it as they are
/// issued, with no host round trip between them. An operation that fails (an exception in a block, a launch the GPU
/// refuses) delivers its exception to its finish; the operations issued after it on the queue are not run, since they
/// depend on it: each finish they count in gets an illegal_operation_exception naming the failure (one for several). (A kernel that faults on a GPU
/// fails the GPU: the operations after it end with the GPU's error.) The queue object is a handle: copies share the queue; operations go on after the last handle
/// is gone. A queue belongs to a place of the calling host (its CPU place or one of its GPUs); work for another
/// host goes there first (e.g. inside at(host, ...)). A queue serves the run (apgas::run) it was made in: kept into a
/// later run, its operations are refused with illegal_operation_exception.

#include <apgas/activity.hpp>
#include <apgas/detail/gpu.hpp>
#include <apgas/global.hpp>
#include <apgas/kernel.hpp>
#include <apgas/place.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

namespace apgas {

namespace detail {
struct queue_state;
struct queue_access;  // (tests)
/// One operation of a queue. `blocking` operations run in the queue's driver activity and return once they have
/// ended (throwing what they failed with); the others are enqueued on the queue's GPU stream, which ends them: run
/// takes `token` once the operation is enqueued (and leaves it when it throws).
struct queue_op {
  explicit queue_op(bool blocks) noexcept : blocking(blocks) {}
  virtual ~queue_op() = default;
  virtual void run(int gpu_queue, finish_token& token) = 0;
  const bool blocking;
};
std::shared_ptr<queue_state> make_queue(place p);
/// The queue's GPU stream (gpu_make_queue), or -1 at a CPU place.
int gpu_queue_of(const queue_state& q) noexcept;
/// Count the operation in the caller's innermost finish and put it in line (illegal_operation_exception outside an
/// activity, inside atomic/when or inside a kernel).
void enqueue(const std::shared_ptr<queue_state>& q, std::unique_ptr<queue_op> op);
/// Before a blocking operation of a GPU queue: park until the queue's stream has done what it was given.
void drain_gpu_queue(const queue_state& q);

template <class F>
struct queue_op_of final : queue_op {
  queue_op_of(bool blocks, F f) : queue_op(blocks), fn(std::move(f)) {}
  void run(int gpu_queue, finish_token& token) override { fn(gpu_queue, token); }
  F fn;
};
template <class F>
std::unique_ptr<queue_op> make_queue_op(bool blocks, F f) {
  return std::make_unique<queue_op_of<F>>(blocks, std::move(f));
}

/// A copy the queue runs as a blocking operation: after the stream has drained (GPU queues), under its own finish.
template <class Copy>
std::unique_ptr<queue_op> blocking_copy(const std::shared_ptr<queue_state>& q, Copy copy) {
  return make_queue_op(true, [q = q.get(), copy](int gpu_queue, finish_token&) {
    if (gpu_queue >= 0) drain_gpu_queue(*q);
    finish(copy);
  });
}
}  // namespace detail

/// An in-order queue at a place of this host (see the file comment). Made by in_order(p).
class in_order_queue {
 public:
  place where() const noexcept { return place_; }

  /// Launch kernel closure k at the queue's place after the operations issued before it.
  template <class K>
  void async(const K& k) {
    static_assert(detail::is_kernel_v<K>, "apgas::in_order_queue::async takes a kernel closure (apgas::cuda_kernel)");
    const place p = place_;
    if (p.is_cuda()) {
#if defined(__CUDACC__)
      detail::enqueue(state_, detail::make_queue_op(false, [p, k](int gpu_queue, detail::finish_token& token) {
        detail::launch_kernel_gpu(p, k, gpu_queue, &token);
      }));
#else
      detail::kernel_not_compiled_by_nvcc(p);
#endif
    } else {
      detail::enqueue(state_, detail::make_queue_op(true, [p, k](int, detail::finish_token&) { apgas::at(p, k); }));
    }
  }
  /// The three forms of apgas::async_copy, in line with the queue's other operations. The host memory must stay
  /// valid until the copy has ended (the finish that governs the caller ends after it). On a GPU queue a copy
  /// between the queue's GPU and page-locked host memory (apgas::pinned_vector), or another GPU of this host, goes on
  /// the queue's stream; any other copy waits for the stream to drain and runs as apgas::async_copy.
  template <class T>
  void async_copy(std::span<const T> src, remote_array<T> dst, std::size_t dst_off = 0) {
    detail::check_range<T>("apgas::in_order_queue::async_copy", dst_off, src.size(), dst.size());
    if (on_stream(dst.home()) && detail::is_pinned(src.data(), src.size_bytes())) {
      const place p = place_;
      const std::uintptr_t to = dst.token() + dst_off * sizeof(T);
      const std::uint32_t serial = dst.serial();
      detail::enqueue(state_, detail::make_queue_op(false, [p, to, serial, src](int gpu_queue,
                                                                              detail::finish_token& token) {
        detail::gpu_queue_put(p, gpu_queue, to, serial, src.data(), src.size_bytes(), token);
      }));
      return;
    }
    detail::enqueue(state_, detail::blocking_copy(state_, [src, dst, dst_off] { apgas::async_copy(src, dst, dst_off); }));
  }
  template <class T>
  void async_copy(remote_array<T> src, std::size_t src_off, std::span<T> dst) {
    detail::check_range<T>("apgas::in_order_queue::async_copy", src_off, dst.size(), src.size());
    if (on_stream(src.home()) && detail::is_pinned(dst.data(), dst.size_bytes())) {
      const place p = place_;
      const std::uintptr_t from = src.token() + src_off * sizeof(T);
      const std::uint32_t serial = src.serial();
      detail::enqueue(state_, detail::make_queue_op(false, [p, from, serial, dst](int gpu_queue,
                                                                                detail::finish_token& token) {
        detail::gpu_queue_get(p, gpu_queue, dst.data(), from, serial, dst.size_bytes(), token);
      }));
      return;
    }
    detail::enqueue(state_, detail::blocking_copy(state_, [src, src_off, dst] { apgas::async_copy(src, src_off, dst); }));
  }
  template <class T>
  void async_copy(remote_array<T> src, std::size_t src_off, remote_array<T> dst, std::size_t dst_off, std::size_t n) {
    detail::check_range<T>("apgas::in_order_queue::async_copy", src_off, n, src.size());
    detail::check_range<T>("apgas::in_order_queue::async_copy", dst_off, n, dst.size());
    const place s = src.home();
    const place d = dst.home();
    detail::check_gpu_overlap<T>("apgas::in_order_queue::async_copy", s, src.token(), dst.token(), src_off, dst_off, n);
    if ((on_stream(s) && local_gpu(d)) || (on_stream(d) && local_gpu(s))) {
      const place p = place_;
      const std::uintptr_t from = src.token() + src_off * sizeof(T);
      const std::uintptr_t to = dst.token() + dst_off * sizeof(T);
      const std::size_t bytes = n * sizeof(T);
      const std::uint32_t src_serial = src.serial(), dst_serial = dst.serial();
      detail::enqueue(state_, detail::make_queue_op(false, [=](int gpu_queue, detail::finish_token& token) {
        detail::gpu_queue_copy(p, gpu_queue, s, from, src_serial, d, to, dst_serial, bytes, token);
      }));
      return;
    }
    detail::enqueue(state_, detail::blocking_copy(state_, [=] { apgas::async_copy(src, src_off, dst, dst_off, n); }));
  }

 private:
  friend in_order_queue in_order(place p);
  friend struct detail::queue_access;
  in_order_queue(place p, std::shared_ptr<detail::queue_state> s) : place_(p), state_(std::move(s)) {}
  /// Whether a copy touching array home `h` can go on the queue's stream: h is the queue's GPU.
  bool on_stream(place h) const noexcept { return place_.is_cuda() && h == place_; }
  static bool local_gpu(place h) { return h.is_cuda() && detail::is_here(h.parent()); }
  place place_;
  std::shared_ptr<detail::queue_state> state_;
};

/// A new in-order queue at place p (a place of the calling host: its CPU place or one of its GPUs). Throws
/// bad_place_exception for an invalid place, illegal_operation_exception for a place of another host or a caller that
/// is no activity (outside apgas::run).
inline in_order_queue in_order(place p) { return in_order_queue(p, detail::make_queue(p)); }

}  // namespace apgas
#pragma GCC visibility pop
