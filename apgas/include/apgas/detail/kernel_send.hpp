#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// Sending a kernel closure: here (a CPU launch), to a GPU of this host, or to another host (included by
// apgas/kernel.hpp after the types it uses; not API).

#include <apgas/detail/completion.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

namespace apgas::detail {

/// bad_place_exception for an invalid place; illegal_operation_exception outside an activity, inside atomic/when or
/// inside a kernel body.
void check_kernel_place(place p);
/// The same on the receiving host for a routed kernel: p must be this host or one of its GPUs.
void check_routed_kernel_place(place p);
[[noreturn]] void kernel_not_compiled_by_nvcc(place p);
[[noreturn]] void kernel_body_not_rebuildable(place p);
void run_finish(function_ref<void()> body);

template <class T, std::size_t N, bool Fill>
void write_resource(writer& w, const shared_array<T, N, Fill>& r) {
  w & static_cast<std::uint64_t>(r.n) & r.value;
}
template <class R>
void write_resource(writer& w, const R& r) {  // shared_copy, constant_copy, global_copy: the host data
  w & *r.data;
}
template <class T, std::size_t N, bool Fill>
void read_resource(reader& in, shared_array<T, N, Fill>& r) {
  std::uint64_t n = 0;
  in & n & r.value;
  if (N != std::dynamic_extent && n != N) {
    throw serialization_error("apgas: malformed message: a shared array of compile-time size " + std::to_string(N) +
                              " arrived with size " + std::to_string(n));
  }
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "apgas: kernel closures need a 64-bit size_t");
  // A size whose bytes overflow is refused here, before the place that runs the kernel computes n * sizeof(T).
  r.n = shared_elements<T>("apgas::cuda_kernel (routed to this host)", static_cast<std::size_t>(n));
}
template <class R>
void read_resource(reader& in, R& r) {
  auto v = std::make_shared<std::remove_const_t<typename decltype(r.data)::element_type>>();
  in & *v;
  r.data = std::move(v);
}

/// Launch at GPU place p of this host (apgas/cuda/kernel.cuh, files compiled by nvcc): on in-order queue `queue` of
/// the GPU when not -1, counted by `token` when given (taken once the kernel is enqueued), else by the caller's
/// innermost finish.
template <class K>
void launch_kernel_gpu(place p, const K& k, int queue = -1, finish_token* token = nullptr);
template <class K, class Shape, class Resources>
void launch_gpu_parts(place p, const Shape& shape, const void* body, const Resources& res);  // likewise
/// Run launch() under a finish and wait; an exception launch() throws means nothing was started, so it is rethrown
/// raw, not wrapped by the finish (what at() promises for errors of the pre step).
template <class F>
void launch_and_wait(F&& launch) {
  std::exception_ptr pre;
  auto body = [&] {
    try {
      launch();
    } catch (...) {
      pre = std::current_exception();
    }
  };
  run_finish(function_ref<void()>(body));
  if (pre) std::rethrow_exception(pre);
}

/// A kernel that travels to another host: the target place, the grid, the bytes of the body, the resources' data.
/// It is rebuilt and launched inside an activity at the target host (so a failure there is that activity's).
template <class K>
struct kernel_route {
  using body_type = decltype(K::body);

  static void write(writer& w, place target, const K& k) {
    w & static_cast<std::int32_t>(target.id());
    w.write_bytes(&k.shape, sizeof(k.shape));
    const std::size_t at = w.size();
    w.write_bytes(&k.body, sizeof(body_type));
    // An nvcc __host__ __device__ lambda is, in host code, a wrapper whose last member points to a host copy of the
    // lambda: only the captures before it mean anything elsewhere, so the address itself never goes on the wire.
    if constexpr (requires { requires std::is_same_v<decltype(k.body.data), void*>; }) {
      const std::size_t off = static_cast<std::size_t>(reinterpret_cast<const char*>(&k.body.data) -
                                                       reinterpret_cast<const char*>(&k.body));
      std::memset(w.bytes().data() + at + off, 0, sizeof(void*));
    }
    std::apply([&](const auto&... r) { (write_resource(w, r), ...); }, k.resources);
  }

  static void run(reader& in, bool wait) {
    std::int32_t id = 0;
    in & id;
    const place p(id);
    check_routed_kernel_place(p);
    decltype(K::shape) shape{};
    in.read_bytes(&shape, sizeof(shape), "kernel grid");
    alignas(body_type) unsigned char body[sizeof(body_type)];
    in.read_bytes(body, sizeof(body_type), "kernel body");
    decltype(K::resources) res;
    std::apply([&](auto&... r) { (read_resource(in, r), ...); }, res);
    if (p.is_cuda()) {
#if defined(__CUDACC__)
      auto launch = [&] { launch_gpu_parts<K>(p, shape, body, res); };
      if (wait) {
        launch_and_wait(launch);
      } else {
        launch();
      }
#else
      kernel_not_compiled_by_nvcc(p);
#endif
    } else if constexpr (shippable_v<body_type>) {
      const K k{shape, std::move(res), *std::launder(reinterpret_cast<body_type*>(body))};
      auto launch = [&] { start_kernel_cpu(prepare_kernel_cpu(k)); };
      if (wait) {
        launch_and_wait(launch);
      } else {
        launch();
      }
    } else {
      kernel_body_not_rebuildable(p);
    }
  }
};

template <class K>
struct kernel_async_entry {
  static void invoke(reader& in) { kernel_route<K>::run(in, false); }
  static inline const std::size_t handle =
      ser::registry::add(type_name<kernel_async_entry*>(), reinterpret_cast<ser::registry::fn>(&invoke));
};
template <class K>
struct kernel_at_entry {
  static void invoke(reader& in, writer&) { kernel_route<K>::run(in, true); }
  static inline const std::size_t handle =
      ser::registry::add(type_name<kernel_at_entry*>(), reinterpret_cast<ser::registry::fn>(&invoke));
};

/// async_at(p, kernel): launch it, counted by the caller's innermost finish like an activity. Errors of the pre
/// step (grid, shared memory, a dead GPU) are thrown here when p is on this host; for another host they become the
/// exception of the routed activity, reported to the finish.
template <class K>
void send_kernel(place p, const K& k) {
  check_kernel_place(p);
  if (!is_here(p.parent())) {
#if !defined(__CUDACC__)
    if (p.is_cuda()) kernel_not_compiled_by_nvcc(p);
#endif
    writer w = begin_message();
    kernel_route<K>::write(w, p, k);
    send_async(p.parent(), ser::registry::id_of(kernel_async_entry<K>::handle), std::move(w));
  } else if (p.is_cuda()) {
#if defined(__CUDACC__)
    launch_kernel_gpu(p, k);
#else
    kernel_not_compiled_by_nvcc(p);
#endif
  } else {
    start_kernel_cpu(prepare_kernel_cpu(k));
  }
}

/// at(p, kernel): launch and wait. Pre-step errors are thrown raw (nothing was started); failures of the kernel
/// itself (a faulting GPU kernel, an exception in a CPU block) arrive as multiple_exceptions, as from a finish.
template <class K>
void at_kernel(place p, const K& k) {
  check_kernel_place(p);
  if (!is_here(p.parent())) {
#if !defined(__CUDACC__)
    if (p.is_cuda()) kernel_not_compiled_by_nvcc(p);
#endif
    writer w = begin_message();
    kernel_route<K>::write(w, p, k);
    (void)send_at(p.parent(), ser::registry::id_of(kernel_at_entry<K>::handle), std::move(w));
    return;
  }
  launch_and_wait([&] { send_kernel(p, k); });
}

}  // namespace apgas::detail
#pragma GCC visibility pop
