#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file queue.hpp
/// In-order queues: dependent kernels and copies at one place, issued without a finish between them.
/// @code
///   apgas::finish([&] {
///     auto q = apgas::in_order(gpu);                     // or a host place: the same program, the same order
///     apgas::async_copy(std::span<const float>(host), a);   // (outside the queue: ordered by the finish only)
///     for (int it = 0; it < 100; ++it) q.async(stencil_kernel(it % 2 ? b : a, it % 2 ? a : b));
///     q.async_copy(b, 0, std::span<float>(result));
///   });                                                   // one finish for the 101 operations
/// @endcode
/// Each operation starts after the one issued before it on the queue has ended (its kernel's blocks, its copy's
/// data landed) and counts in the finish that governs the activity that issued it, like an activity. An operation
/// that fails (an exception in a block, a dead GPU) delivers its exception to its finish; the operations issued
/// after it on the queue are not run — each ends with illegal_operation_exception naming the failure — since
/// they depend on it. The queue object is a handle: copies share the queue; operations go on after the last handle
/// is gone. A queue belongs to a place of the calling host (its CPU place or one of its GPUs); work for another
/// host goes there first (e.g. inside at(host, ...)).

#include <apgas/activity.hpp>
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
/// One operation: run() performs it and returns once it has ended (throws what it failed with).
struct queue_op {
  virtual ~queue_op() = default;
  virtual void run() = 0;
};
std::shared_ptr<queue_state> make_queue(place p);
/// Count the operation in the caller's innermost finish and put it in line (illegal_operation_exception outside an
/// activity, inside atomic/when or inside a kernel).
void enqueue(const std::shared_ptr<queue_state>& q, std::unique_ptr<queue_op> op);

template <class F>
struct queue_op_of final : queue_op {
  explicit queue_op_of(F f) : fn(std::move(f)) {}
  void run() override { fn(); }
  F fn;
};
template <class F>
std::unique_ptr<queue_op> make_queue_op(F f) {
  return std::make_unique<queue_op_of<F>>(std::move(f));
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
#if !defined(__CUDACC__)
      detail::kernel_not_compiled_by_nvcc(p);
#endif
    }
    detail::enqueue(state_, detail::make_queue_op([p, k] { apgas::at(p, k); }));
  }
  /// The three forms of apgas::async_copy, in line with the queue's other operations. The host memory must stay
  /// valid until the copy has ended (the finish that governs the caller ends after it).
  template <class T>
  void async_copy(std::span<const T> src, remote_array<T> dst, std::size_t dst_off = 0) {
    detail::enqueue(state_, detail::make_queue_op([src, dst, dst_off] {
      finish([&] { apgas::async_copy(src, dst, dst_off); });
    }));
  }
  template <class T>
  void async_copy(remote_array<T> src, std::size_t src_off, std::span<T> dst) {
    detail::enqueue(state_, detail::make_queue_op([src, src_off, dst] {
      finish([&] { apgas::async_copy(src, src_off, dst); });
    }));
  }
  template <class T>
  void async_copy(remote_array<T> src, std::size_t src_off, remote_array<T> dst, std::size_t dst_off, std::size_t n) {
    detail::enqueue(state_, detail::make_queue_op([=] {
      finish([&] { apgas::async_copy(src, src_off, dst, dst_off, n); });
    }));
  }

 private:
  friend in_order_queue in_order(place p);
  in_order_queue(place p, std::shared_ptr<detail::queue_state> s) : place_(p), state_(std::move(s)) {}
  place place_;
  std::shared_ptr<detail::queue_state> state_;
};

/// A new in-order queue at place p (a place of the calling host: its CPU place or one of its GPUs). Throws
/// bad_place_exception for an invalid place, illegal_operation_exception for a place of another host.
inline in_order_queue in_order(place p) { return in_order_queue(p, detail::make_queue(p)); }

}  // namespace apgas
#pragma GCC visibility pop
