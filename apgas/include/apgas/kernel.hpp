#pragma once
/// @file kernel.hpp
/// Annotated kernel closures: the X10 `@CUDA` block/thread/clocked pattern as a C++ type.
///
/// `cuda_kernel(grid, resources..., body)` builds a closure whose type says "this is a kernel". Sent with
/// async_at/at to a GPU place it is launched as a CUDA kernel (cuda_place/, in files compiled by nvcc); sent to a
/// host place it runs there: blocks as activities spread over the workers, the threads of a plain kernel as a loop,
/// the threads of a clocked kernel as fibers that switch at every advance(). Results are the same.
/// @code
///   apgas::finish([&] {
///     apgas::async_at(p, apgas::cuda_kernel(apgas::grid{8, 64}, apgas::shared<float>(64),
///         [=] APGAS_KERNEL (apgas::clocked_thread t, std::span<float> tmp) {
///           tmp[t.thread()] = f(t.global_id());
///           t.advance();                       // __syncthreads() on a GPU, a fiber switch on a CPU place
///           if (t.thread() == 0) out[t.block()] = tmp[0] + tmp[t.threads() - 1];
///         }));
///   });
/// @endcode
///
/// Resources, evaluated on the host when the kernel is sent (async_at/at), in order, each giving the body one
/// parameter after the thread handle:
///   - shared<T>(n), shared<T>(n, value)  -> std::span<T>: a per-block array (zero-filled or filled with value);
///   - shared_from(span)                  -> std::span<T>: a per-block array filled from host data;
///   - constant_from(span)                -> std::span<const T>: read-only data for all blocks (at most 64 KiB);
///   - global_from(span)                  -> std::span<T>: one buffer for the launch, filled from host data and
///                                           freed after it (writes are discarded).
/// The host data is copied when the kernel is sent: later changes to it do not affect the launch.
///
/// On a CPU place, blocking apgas operations (async, finish, at, when, atomic, clock operations) inside a body throw
/// illegal_operation_exception, as they cannot exist on a GPU. An exception that leaves a body ends that thread's
/// block (a plain block stops its loop; the other threads of a clocked block run on without it): each failed block
/// contributes one exception to the governing finish.
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

#if defined(__CUDACC__)
#define APGAS_KERNEL __host__ __device__
#define APGAS_DETAIL_HD __host__ __device__
#else
#define APGAS_KERNEL
#define APGAS_DETAIL_HD
#endif

namespace apgas {

/// An explicit launch shape: `blocks` blocks of `threads` threads (1-D, as in X10).
struct grid {
  int blocks = 1;
  int threads = 1;
};

/// Let the runtime choose the shape: on a GPU place from the occupancy of the kernel (the block size that maximises
/// it, times the blocks per SM that fit, times the SMs; X10's table as the fallback); on a CPU place one block per
/// worker with one thread each (kernels are written with grid-stride loops, so any shape computes the same result).
struct auto_grid_t {};
constexpr auto_grid_t auto_grid() noexcept { return {}; }

/// Maximum bytes of constant memory per launch (the CUDA limit).
inline constexpr std::size_t max_constant_bytes = 64 * 1024;

/// The thread handle of a plain kernel (`apgas::thread`; the class has another name only so that it can have a
/// member function called thread()).
class thread_handle {
 public:
  APGAS_DETAIL_HD thread_handle(int block, int thread, int blocks, int threads) noexcept
      : block_(block), thread_(thread), blocks_(blocks), threads_(threads) {}
  APGAS_DETAIL_HD int block() const noexcept { return block_; }
  APGAS_DETAIL_HD int thread() const noexcept { return thread_; }
  APGAS_DETAIL_HD int blocks() const noexcept { return blocks_; }
  APGAS_DETAIL_HD int threads() const noexcept { return threads_; }
  /// block() * threads() + thread()
  APGAS_DETAIL_HD long global_id() const noexcept { return static_cast<long>(block_) * threads_ + thread_; }
  /// blocks() * threads()
  APGAS_DETAIL_HD long global_count() const noexcept { return static_cast<long>(blocks_) * threads_; }

 private:
  int block_, thread_, blocks_, threads_;
};
using thread = thread_handle;

namespace detail {
/// CPU execution of clocked blocks (apgas/src/kernel_cpu.cpp): the barrier of the block the calling thread is in.
void cpu_block_advance(void* block);
}  // namespace detail

/// The thread handle of a clocked kernel: adds advance(), the block-wide barrier (X10 `next` on the block's clock).
class clocked_thread : public thread_handle {
 public:
  APGAS_DETAIL_HD clocked_thread(int block, int thread, int blocks, int threads, void* cpu_block) noexcept
      : thread_handle(block, thread, blocks, threads), cpu_block_(cpu_block) {}
  /// Wait until every thread of the block has arrived: __syncthreads() on a GPU, a fiber switch on a CPU place.
  APGAS_DETAIL_HD void advance() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#else
    detail::cpu_block_advance(cpu_block_);
#endif
  }

 private:
  void* cpu_block_;
};

// ---- resources -------------------------------------------------------------------------------------------------

template <class T>
struct shared_array {  ///< per-block array, n elements of value
  static_assert(std::is_trivially_copyable_v<T>, "apgas::shared<T>: T must be trivially copyable");
  std::size_t n;
  T value;
};
template <class T>
shared_array<T> shared(std::size_t n, const T& value = T{}) {
  return {n, value};
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
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */, "apgas::constant_from: " + std::to_string(src.size_bytes()) +
                                     " bytes exceed the constant memory limit of " +
                                     std::to_string(max_constant_bytes) + " bytes");
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
template <class T>
struct resource_traits<shared_array<T>> : std::true_type {
  using param = std::span<T>;
};
template <class T>
struct resource_traits<shared_copy<T>> : std::true_type {
  using param = std::span<T>;
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

template <class G>
inline constexpr bool is_grid_v = std::is_same_v<G, grid> || std::is_same_v<G, auto_grid_t>;

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
  static constexpr bool clocked =
      !plain && std::is_invocable_v<const Body&, clocked_thread, typename detail::resource_traits<Resources>::param...>;
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
                "apgas::cuda_kernel: between the grid and the body only resources may appear (shared, shared_from, "
                "constant_from, global_from)");
  static_assert(!is_nvcc_device_lambda<Body>(),
                "apgas::cuda_kernel: the body is a __device__ lambda; write it as [=] APGAS_KERNEL (...) "
                "(__host__ __device__): the same closure also runs on CPU places");
  static_assert(shippable_v<Body> || is_nvcc_host_device_lambda<Body>(),
                "apgas::cuda_kernel: the body must be trivially copyable (it is shipped to the device): capture "
                "scalars, place, remote_array; pass host data through resources");
  using K = kernel_closure<Grid, Body, std::decay_t<std::tuple_element_t<I, std::decay_t<Tuple>>>...>;
  static_assert(K::clocked || K::plain,
                "apgas::cuda_kernel: the body must take (apgas::thread or apgas::clocked_thread, then one parameter "
                "per resource, in order: std::span<T> for shared/shared_from/global_from, std::span<const T> for "
                "constant_from)");
  return K{g, {std::get<I>(std::forward<Tuple>(args))...}, std::get<last>(std::forward<Tuple>(args))};
}
}  // namespace detail

/// Build a kernel closure: a grid (grid{b, t} or auto_grid()), resources, and the body last.
template <class Grid, class... Rest>
auto cuda_kernel(Grid g, Rest&&... rest) {
  static_assert(detail::is_grid_v<Grid>, "apgas::cuda_kernel: the first argument is apgas::grid{b, t} or auto_grid()");
  static_assert(sizeof...(Rest) >= 1, "apgas::cuda_kernel: the body (last argument) is missing");
  return detail::make_kernel(g, std::forward_as_tuple(std::forward<Rest>(rest)...),
                             std::make_index_sequence<sizeof...(Rest) - 1>{});
}

// ---- CPU execution ---------------------------------------------------------------------------------------------

namespace detail {

/// The grid a kernel gets on a CPU place (auto_grid: one block per worker, one thread each). Throws
/// kernel_launch_error for a non-positive shape.
grid cpu_grid(const grid* explicit_shape);
/// Run `threads` clocked threads of one block as fibers; thread_fn(ctx, t, block) runs thread t.
void run_clocked_block_cpu(int threads, void (*thread_fn)(void* ctx, int t, void* block), void* ctx);
/// Spawn `blocks` activities, block_fn(ctx, b) each, governed like an async of the caller; `keep` is released
/// when the last block has ended.
void spawn_blocks_cpu(int blocks, std::shared_ptr<void> keep, void (*block_fn)(void* ctx, int b));

template <class R>
struct block_storage {  // what one block holds for resource R
  explicit block_storage(const R&) {}
};
template <class T>
struct block_storage<shared_array<T>> {
  std::vector<T> v;
  explicit block_storage(const shared_array<T>& r) : v(r.n, r.value) {}
  std::span<T> param(const shared_array<T>&) { return v; }
};
template <class T>
struct block_storage<shared_copy<T>> {
  std::vector<T> v;
  explicit block_storage(const shared_copy<T>& r) : v(*r.data) {}
  std::span<T> param(const shared_copy<T>&) { return v; }
};
template <class T>
struct block_storage<constant_copy<T>> {
  explicit block_storage(const constant_copy<T>&) {}
  std::span<const T> param(const constant_copy<T>& r) { return *r.data; }
};
template <class T>
struct block_storage<global_copy<T>> {
  explicit block_storage(const global_copy<T>&) {}
  // One writable buffer for the whole launch on the device; on a CPU place the launch record owns it.
  std::span<T> param(const global_copy<T>& r) { return std::span<T>(const_cast<T*>(r.data->data()), r.data->size()); }
};

template <class K>
struct cpu_launch {
  K k;
  grid g;

  template <std::size_t... I>
  void run_block(int b, std::index_sequence<I...>) {
    using storage_t = std::tuple<block_storage<std::tuple_element_t<I, decltype(k.resources)>>...>;
    storage_t st(std::get<I>(k.resources)...);
    if constexpr (K::clocked) {
      struct ctx_t {
        cpu_launch* self;
        int b;
        storage_t* st;
      } ctx{this, b, &st};
      run_clocked_block_cpu(
          g.threads,
          [](void* c, int t, void* block) {
            auto& x = *static_cast<ctx_t*>(c);
            x.self->k.body(clocked_thread(x.b, t, x.self->g.blocks, x.self->g.threads, block),
                           std::get<I>(*x.st).param(std::get<I>(x.self->k.resources))...);
          },
          &ctx);
    } else {
      for (int t = 0; t < g.threads; ++t) {
        k.body(thread_handle(b, t, g.blocks, g.threads), std::get<I>(st).param(std::get<I>(k.resources))...);
      }
    }
  }
};

/// Validate kernel `k` for the caller's host place and copy what it needs (throws kernel_launch_error).
template <class K>
std::shared_ptr<cpu_launch<K>> prepare_kernel_cpu(const K& k) {
  const grid* explicit_shape = nullptr;
  if constexpr (std::is_same_v<decltype(k.shape), grid>) explicit_shape = &k.shape;
  return std::make_shared<cpu_launch<K>>(cpu_launch<K>{k, cpu_grid(explicit_shape)});
}

/// Start a prepared launch: one activity per block, governed by the caller's innermost finish.
template <class K>
void start_kernel_cpu(std::shared_ptr<cpu_launch<K>> launch) {
  const int blocks = launch->g.blocks;
  spawn_blocks_cpu(blocks, std::move(launch), [](void* c, int b) {
    auto* l = static_cast<cpu_launch<K>*>(c);
    l->run_block(b, std::make_index_sequence<std::tuple_size_v<decltype(l->k.resources)>>{});
  });
}

// ---- sending a kernel: here, to a GPU of this host, or to another host ----------------------------------------

/// bad_place_exception for an invalid place; illegal_operation_exception outside an activity, inside atomic/when or
/// inside a kernel body.
void check_kernel_place(place p);
/// The same on the receiving host for a routed kernel: p must be this host or one of its GPUs.
void check_routed_kernel_place(place p);
[[noreturn]] void kernel_not_compiled_by_nvcc(place p);
[[noreturn]] void kernel_body_not_rebuildable(place p);
void run_finish(function_ref<void()> body);

template <class T>
void write_resource(writer& w, const shared_array<T>& r) {
  w & static_cast<std::uint64_t>(r.n) & r.value;
}
template <class R>
void write_resource(writer& w, const R& r) {  // shared_copy, constant_copy, global_copy: the host data
  w & *r.data;
}
template <class T>
void read_resource(reader& in, shared_array<T>& r) {
  std::uint64_t n = 0;
  in & n & r.value;
  r.n = static_cast<std::size_t>(n);
}
template <class R>
void read_resource(reader& in, R& r) {
  auto v = std::make_shared<std::remove_const_t<typename decltype(r.data)::element_type>>();
  in & *v;
  r.data = std::move(v);
}

template <class K>
void launch_kernel_gpu(place p, const K& k);  // apgas/cuda/kernel.cuh (files compiled by nvcc)
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

}  // namespace detail
}  // namespace apgas

#if defined(__CUDACC__)
#include <apgas/cuda/kernel.cuh>
#endif
