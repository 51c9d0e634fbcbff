#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file kernel.hpp
/// Annotated kernel closures: the X10 `@CUDA` block/thread/clocked pattern as a C++ type.
///
/// `cuda_kernel(grid, resources..., body)` builds a closure whose type says "this is a kernel". Sent with
/// async_at/at to a GPU place it is launched as a CUDA kernel (cuda_place/, in files compiled by nvcc); sent to a
/// host place it runs there: blocks as activities spread over the workers, the threads of a plain kernel as a loop,
/// the threads of a clocked kernel as fibers that switch at every advance(), a block-level body once per block with
/// its thread loops as plain loops. Results are the same. What the body sees is in apgas/kernel_thread.hpp; atomics
/// in apgas/kernel_atomic.hpp; docs/porting.md maps CUDA to it construct by construct.
/// @code
///   apgas::finish([&] {
///     apgas::async_at(p, apgas::cuda_kernel(apgas::grid{8, 64}, apgas::shared<float>(64),
///         [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<float> tmp) {
///           tmp[t.thread()] = f(t.global_id());
///           t.advance();                       // __syncthreads() on a GPU, a switch to the next thread on a CPU place
///           if (t.thread() == 0) out[t.block()] = tmp[0] + tmp[t.threads() - 1];
///         }));
///   });
/// @endcode
///
/// The grid: grid{blocks, threads} (dim3 each: 1-, 2- or 3-D), auto_grid(), or either wrapped in
/// launch_bounds<max_threads, min_blocks>(...) (CUDA's __launch_bounds__: the GPU compiler budgets registers for it,
/// and a launch with more threads per block is refused on every place).
///
/// Resources, evaluated on the host when the kernel is sent (async_at/at), in order, each giving the body one
/// parameter after the thread handle:
///   - shared<T>(n), shared<T>(n, value)   -> shared_span<T>: a per-block array (zero-filled or filled with value);
///   - shared<T, N>(), shared<T, N>(value) -> shared_span<T, N>: the same with a compile-time size;
///   - shared_uninit<T>(n), shared_uninit<T, N>() -> the same, not filled (the kernel fills it itself);
///   - shared_from(span)                   -> shared_span<T>: a per-block array filled from host data;
///   - constant_from(span)                 -> std::span<const T>: read-only data for all blocks (at most 64 KiB);
///   - global_from(span)                   -> std::span<T>: one buffer per launch, filled from host data and
///                                            freed after it (writes are discarded; each launch of the closure
///                                            starts from the host data).
/// The host data is copied when the kernel is sent: later changes to it do not affect the launch. A shared_span
/// parameter may be declared std::span<T> (std::span<T, N> for a compile-time size N; it converts), but only
/// shared_span accesses are watched by the checking mode.
///
/// On a CPU place, blocking apgas operations (async, finish, at, when, atomic, clock operations) inside a body throw
/// illegal_operation_exception, as they cannot exist on a GPU. An exception that leaves a body ends that thread's
/// block (a plain block stops its loop; the other threads of a clocked block run on without it): each failed block
/// contributes one exception to the governing finish. A clocked thread must not reach a barrier (advance, a
/// collective, a warp operation) inside a catch handler or while an exception unwinds: the threads of a block share
/// their OS thread's exception state, and such a block fails with kernel_check_error.
///
/// The checking mode of CPU places (config::kernel_check, which config::from_env() and apgas::run(argc, argv, ...) take
/// from APGAS_KERNEL_CHECK=1; off by default, on in the tests)
/// holds a CPU launch to a GPU's limits and reports, as kernel_check_error in the governing finish, what would be
/// undefined on a GPU: a divergent barrier, a shared-array index outside the array, a data race on a shared array,
/// for_threads or a collective called inside for_threads, different collectives at one barrier.
///
/// On a GPU place (docs/decisions/0006-gpu-places.md): the file that sends the kernel must be compiled by nvcc
/// (apgas_add_cuda_sources) and the body written `[=] APGAS_KERNEL (...)`; otherwise illegal_operation_exception says
/// why. The grid is checked against the device's and the function's limits (kernel_launch_error, nothing started);
/// auto_grid() asks the occupancy API. Remote arrays captured by the body must live at that GPU place (use data()
/// once, then index the pointer). A sticky CUDA error in the kernel makes the GPU place dead: the finish receives
/// dead_place_exception, and so does every later operation there. A kernel sent to a place of another host is
/// launched there, counted by the sender's finish; a body from an nvcc file can go to another host's GPU places
/// but not to its CPU place.

#include <apgas/detail/function_ref.hpp>
#include <apgas/detail/remote.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/error.hpp>
#include <apgas/kernel_atomic.hpp>
#include <apgas/kernel_thread.hpp>
#include <apgas/place.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace apgas {

/// Maximum bytes of constant memory per launch (the CUDA limit).
inline constexpr std::size_t max_constant_bytes = 64 * 1024;

/// CUDA's __launch_bounds__(MaxThreads, MinBlocks) for a kernel: wraps its grid. @code
///   apgas::cuda_kernel(apgas::launch_bounds<256>(apgas::grid{n / 256, 256}), body)
/// @endcode
template <int MaxThreads, int MinBlocks, class Shape>
struct bounded_shape {
  static_assert(MaxThreads >= 1 && MaxThreads <= 1024, "apgas::launch_bounds: max_threads must be 1 to 1024");
  static_assert(MinBlocks >= 0, "apgas::launch_bounds: min_blocks must not be negative");
  Shape shape;
};
template <int MaxThreads, int MinBlocks = 0, class Shape>
bounded_shape<MaxThreads, MinBlocks, Shape> launch_bounds(Shape s) {
  static_assert(std::is_same_v<Shape, grid> || std::is_same_v<Shape, auto_grid_t>,
                "apgas::launch_bounds wraps a grid{...} or auto_grid()");
  return {s};
}

// ---- resources -------------------------------------------------------------------------------------------------

namespace detail {
/// n, for a shared array of n elements of T; refused (kernel_launch_error naming n) where n * sizeof(T) bytes do not
/// fit in a size_t: the size would wrap around, to a few bytes (an array of 2^61 + 1 doubles was 8 bytes long).
template <class T>
std::size_t shared_elements(const char* what, std::size_t n) {
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) {
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */,
                              std::string(what) + ": a shared array of " + std::to_string(n) + " elements of " +
                                  std::to_string(sizeof(T)) + " bytes: its size in bytes overflows (at most " +
                                  std::to_string(static_cast<std::size_t>(-1) / sizeof(T)) + " elements)");
  }
  return n;
}
}  // namespace detail

/// A per-block array of n elements (N elements when N is given at compile time), filled with `value` when Fill.
template <class T, std::size_t N, bool Fill>
struct shared_array {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::shared<T>: T must be trivially copyable");
  std::size_t n;
  T value;
};
template <class T>
shared_array<T, std::dynamic_extent, true> shared(std::size_t n, const T& value = T{}) {
  return {detail::shared_elements<T>("apgas::shared", n), value};
}
template <class T, std::size_t N>
shared_array<T, N, true> shared(const T& value = T{}) {
  return {N, value};
}
template <class T>
shared_array<T, std::dynamic_extent, false> shared_uninit(std::size_t n) {
  return {detail::shared_elements<T>("apgas::shared_uninit", n), T{}};
}
template <class T, std::size_t N>
shared_array<T, N, false> shared_uninit() {
  return {N, T{}};
}

template <class T>
struct shared_copy {  ///< per-block array filled from host data (copied when the kernel is sent)
  static_assert(std::is_trivially_copyable_v<T>, "apgas::shared_from: T must be trivially copyable");
  std::shared_ptr<const std::vector<T>> data;
};
template <class T>
shared_copy<std::remove_const_t<T>> shared_from(std::span<T> src) {
  return {std::make_shared<const std::vector<std::remove_const_t<T>>>(src.begin(), src.end())};
}

template <class T>
struct constant_copy {  ///< read-only launch data
  static_assert(std::is_trivially_copyable_v<T>, "apgas::constant_from: T must be trivially copyable");
  std::shared_ptr<const std::vector<T>> data;
};
template <class T>
constant_copy<std::remove_const_t<T>> constant_from(std::span<T> src) {
  if (src.size_bytes() > max_constant_bytes) {
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */,
                              "apgas::constant_from: " + std::to_string(src.size_bytes()) +
                                  " bytes exceed the constant memory limit of " + std::to_string(max_constant_bytes) +
                                  " bytes");
  }
  return {std::make_shared<const std::vector<std::remove_const_t<T>>>(src.begin(), src.end())};
}

template <class T>
struct global_copy {  ///< one buffer for the launch, from host data
  static_assert(std::is_trivially_copyable_v<T>, "apgas::global_from: T must be trivially copyable");
  std::shared_ptr<const std::vector<T>> data;
};
template <class T>
global_copy<std::remove_const_t<T>> global_from(std::span<T> src) {
  return {std::make_shared<const std::vector<std::remove_const_t<T>>>(src.begin(), src.end())};
}

namespace detail {

template <class R>
struct resource_traits : std::false_type {};
template <class T, std::size_t N, bool Fill>
struct resource_traits<shared_array<T, N, Fill>> : std::true_type {
  using param = shared_span<T, N>;
};
template <class T>
struct resource_traits<shared_copy<T>> : std::true_type {
  using param = shared_span<T>;
};
template <class T>
struct resource_traits<constant_copy<T>> : std::true_type {
  using param = std::span<const T>;
};
template <class T>
struct resource_traits<global_copy<T>> : std::true_type {
  using param = std::span<T>;
};

// nvcc's extended lambdas: in host code a __host__ __device__ lambda is a wrapper that owns a heap copy of the
// closure (so it is not trivially copyable there), while its device image is the captures alone.
template <class B>
constexpr bool is_nvcc_host_device_lambda() {
#if defined(__CUDACC__)
  return __nv_is_extended_host_device_lambda_closure_type(B);
#else
  return false;
#endif
}
template <class B>
constexpr bool is_nvcc_device_lambda() {
#if defined(__CUDACC__)
  return __nv_is_extended_device_lambda_closure_type(B);
#else
  return false;
#endif
}

}  // namespace detail

/// Base of a named function object used as a kernel body sent to GPU places (its operator() declared APGAS_KERNEL):
/// lambdas say __host__ __device__ through APGAS_KERNEL, a class says it by deriving from this.
struct device_function {};

namespace detail {
/// Whether nvcc can run a body on a GPU: an extended __host__ __device__ lambda, or a device_function.
template <class B>
inline constexpr bool device_callable_v = is_nvcc_host_device_lambda<B>() || std::is_base_of_v<device_function, B>;

template <class G>
struct shape_traits : std::false_type {};
template <>
struct shape_traits<grid> : std::true_type {
  static constexpr int max_threads = 0;  // no bound
  static constexpr int min_blocks = 0;
  static const grid* explicit_grid(const grid& g) noexcept { return &g; }
};
template <>
struct shape_traits<auto_grid_t> : std::true_type {
  static constexpr int max_threads = 0;
  static constexpr int min_blocks = 0;
  static const grid* explicit_grid(const auto_grid_t&) noexcept { return nullptr; }
};
template <int M, int B, class S>
struct shape_traits<bounded_shape<M, B, S>> : std::true_type {
  static constexpr int max_threads = M;
  static constexpr int min_blocks = B;
  static const grid* explicit_grid(const bounded_shape<M, B, S>& g) noexcept {
    return shape_traits<S>::explicit_grid(g.shape);
  }
};

/// What kind of body a kernel has (apgas/kernel_thread.hpp).
enum class body_kind { plain, clocked, block };

}  // namespace detail

/// The annotated closure built by cuda_kernel. Not constructed directly.
template <class Grid, class Body, class... Resources>
struct kernel_closure {
  Grid shape;
  std::tuple<Resources...> resources;
  Body body;

  /// A body that takes apgas::thread is plain (even if it would also accept a clocked_thread).
  static constexpr bool plain =
      std::is_invocable_v<const Body&, thread_handle, typename detail::resource_traits<Resources>::param...>;
  static constexpr bool block_level =
      !plain && std::is_invocable_v<const Body&, thread_block, typename detail::resource_traits<Resources>::param...>;
  static constexpr bool clocked = !plain && !block_level &&
                                  std::is_invocable_v<const Body&, clocked_thread,
                                                      typename detail::resource_traits<Resources>::param...>;
  static constexpr detail::body_kind kind =
      plain ? detail::body_kind::plain : (block_level ? detail::body_kind::block : detail::body_kind::clocked);
};

namespace detail {
template <class F>
struct is_kernel : std::false_type {};
template <class G, class B, class... R>
struct is_kernel<kernel_closure<G, B, R...>> : std::true_type {};
template <class F>
inline constexpr bool is_kernel_v = is_kernel<std::decay_t<F>>::value;

template <class Grid, class Tuple, std::size_t... I>
auto make_kernel(Grid g, Tuple&& args, std::index_sequence<I...>) {
  constexpr std::size_t last = std::tuple_size_v<std::decay_t<Tuple>> - 1;
  using Body = std::decay_t<std::tuple_element_t<last, std::decay_t<Tuple>>>;
  static_assert((resource_traits<std::decay_t<std::tuple_element_t<I, std::decay_t<Tuple>>>>::value && ...),
                "apgas::cuda_kernel: between the grid and the body only resources may appear (shared, shared_uninit, "
                "shared_from, constant_from, global_from)");
  static_assert(!is_nvcc_device_lambda<Body>(),
                "apgas::cuda_kernel: the body is a __device__ lambda; write it as [=] APGAS_KERNEL (...) "
                "(__host__ __device__): the same closure also runs on CPU places");
  static_assert(shippable_v<Body> || is_nvcc_host_device_lambda<Body>(),
                "apgas::cuda_kernel: the body must be trivially copyable (it is shipped to the device): capture "
                "scalars, place, remote_array; pass host data through resources");
  using K = kernel_closure<Grid, Body, std::decay_t<std::tuple_element_t<I, std::decay_t<Tuple>>>...>;
  static_assert(K::clocked || K::plain || K::block_level,
                "apgas::cuda_kernel: the body must take (apgas::thread, apgas::clocked_thread or apgas::thread_block, "
                "then one parameter per resource, in order: apgas::shared_span<T> (or std::span<T>) for shared, "
                "shared_uninit and shared_from, apgas::shared_span<T, N> (or std::span<T, N>) for shared<T, N> and "
                "shared_uninit<T, N>, std::span<const T> for constant_from, std::span<T> for global_from)");
  return K{g, {std::get<I>(std::forward<Tuple>(args))...}, std::get<last>(std::forward<Tuple>(args))};
}
}  // namespace detail

/// Build a kernel closure: a grid (grid{b, t}, auto_grid(), or launch_bounds<...>(either)), resources, and the body
/// last.
template <class Grid, class... Rest>
auto cuda_kernel(Grid g, Rest&&... rest) {
  static_assert(detail::shape_traits<Grid>::value,
                "apgas::cuda_kernel: the first argument is apgas::grid{blocks, threads}, apgas::auto_grid() or "
                "apgas::launch_bounds<max_threads>(either)");
  static_assert(sizeof...(Rest) >= 1, "apgas::cuda_kernel: the body (last argument) is missing");
  return detail::make_kernel(g, std::forward_as_tuple(std::forward<Rest>(rest)...),
                             std::make_index_sequence<sizeof...(Rest) - 1>{});
}

}  // namespace apgas

#include <apgas/detail/kernel_cpu.hpp>
#include <apgas/detail/kernel_send.hpp>

#if defined(__CUDACC__)
#include <apgas/cuda/kernel.cuh>
#endif
#pragma GCC visibility pop
