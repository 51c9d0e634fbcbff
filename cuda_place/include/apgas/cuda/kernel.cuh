#pragma once
/// @file kernel.cuh
/// The device side of kernel closures (apgas/kernel.hpp), and the host code that launches them on a GPU place.
/// Included by apgas/kernel.hpp in files compiled by nvcc (never by the host compiler): a file that sends a kernel
/// to a GPU place must be compiled by nvcc (apgas_add_cuda_sources() in CMake) with --extended-lambda and
/// --expt-relaxed-constexpr (std::span and the thread handle in device code).
///
/// One kernel closure type K instantiates one __global__ function template. It takes two parameters: the body (the
/// closure's captures, by value — or, when body and descriptor would not fit in the kernel parameter space (32764
/// bytes since CUDA 12.1, param_space), a pointer to a device copy of the body: chosen at compile time) and a descriptor of the resources (offsets into the dynamic
/// shared memory, device addresses of global_from buffers and shared_from sources, offsets into the constant
/// buffer). Each block first fills its shared arrays (all threads cooperate, then __syncthreads()), then every thread
/// calls the body. The pre step on the host (gpu_launch in the core, cuda_place/src/device.cpp) resolves the
/// function, chooses or checks the grid, uploads the buffers and the constant data and launches; the post step
/// frees the buffers and notifies the finish.
///
/// Constant memory: each nvcc file has one constant buffer of APGAS_CONSTANT_BYTES (define it before including
/// apgas headers to leave room for __constant__ data of your own; default 64 KiB, the CUDA limit per file). Kernels
/// that use constant_from are launched in order on one stream per GPU, each right after its own constant copy (the
/// backend enqueues the two as one step), so a launch never overwrites the constant data of a kernel still running.
///
/// Everything here has internal linkage (an unnamed namespace): each nvcc file has its own kernel entries, its own
/// constant buffer and its own launch code, so a named functor kernel type launched from two nvcc files reads the
/// constant buffer of the file that launched it.

#if !defined(__CUDACC__)
#error "apgas/cuda/kernel.cuh is the device side of apgas kernels: include <apgas/apgas.hpp> in a file compiled by nvcc"
#endif

#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/kernel.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#ifndef APGAS_CONSTANT_BYTES
#define APGAS_CONSTANT_BYTES 65536
#endif

namespace apgas::detail::cuda {
namespace {  // (to the end of the namespace: see above)

// This file's constant buffer (one per nvcc file, in that file's module).
__constant__ __align__(16) unsigned char constant_buffer[APGAS_CONSTANT_BYTES];

template <int = 0>
void* constant_address() {
  void* p = nullptr;
  const cudaError_t e = cudaGetSymbolAddress(&p, constant_buffer);
  if (e != cudaSuccess) {
    throw cuda_error(static_cast<int>(e), std::string("apgas: cudaGetSymbolAddress (constant buffer): ") +
                                              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  return p;
}

/// The CUfunction of a kernel entry in the context current on this thread.
inline void* resolve_entry(const void* entry) {
  cudaFunction_t f = nullptr;
  const cudaError_t e = cudaGetFuncBySymbol(&f, entry);
  if (e != cudaSuccess) {
    const bool no_image = e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction;
    const bool old_driver = e == cudaErrorInsufficientDriver;
    throw cuda_error(static_cast<int>(e),
                     std::string("apgas: cudaGetFuncBySymbol: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                         ")" +
                         (no_image     ? ": the kernel has no image for this GPU (built for other "
                                         "CMAKE_CUDA_ARCHITECTURES?)"
                          : old_driver ? ": this program was built with CUDA " + std::to_string(CUDART_VERSION / 1000) +
                                             "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                                             ", newer than the CUDA driver supports (update the NVIDIA driver)"
                                       : std::string()));
  }
  return reinterpret_cast<void*>(f);
}

// ---- the descriptor: what the device needs to know about each resource ----------------------------------------

template <class R>
struct dev_res;

template <class T, std::size_t N, bool Fill>
struct dev_res<shared_array<T, N, Fill>> {  // a per-block array, filled with one value or left as it is
  std::size_t offset, n;
  T value;
  __device__ void fill(unsigned char* smem) const {
    if constexpr (Fill) {
      T* a = reinterpret_cast<T*>(smem + offset);
      for (std::size_t i = gpu_linear_thread(); i < n; i += gpu_block_threads()) a[i] = value;
    }
  }
  __device__ shared_span<T, N> param(unsigned char* smem) const {
    return {whole_shared_array_t{}, reinterpret_cast<T*>(smem + offset), n};
  }
};

template <class T>
struct dev_res<shared_copy<T>> {  // a per-block array filled from a device copy of host data
  std::size_t offset, n;
  const T* source;
  __device__ void fill(unsigned char* smem) const {
    T* a = reinterpret_cast<T*>(smem + offset);
    for (std::size_t i = gpu_linear_thread(); i < n; i += gpu_block_threads()) a[i] = source[i];
  }
  __device__ shared_span<T> param(unsigned char* smem) const {
    return {whole_shared_array_t{}, reinterpret_cast<T*>(smem + offset), n};
  }
};

template <class T>
struct dev_res<constant_copy<T>> {  // a range of this file's constant buffer
  std::size_t offset, n;
  __device__ void fill(unsigned char*) const {}
  __device__ std::span<const T> param(unsigned char*) const {
    __builtin_assume(n <= APGAS_CONSTANT_BYTES / sizeof(T));  // (lets a loop over it count in 32 bits)
    return {reinterpret_cast<const T*>(constant_buffer + offset), n};
  }
};

template <class T>
struct dev_res<global_copy<T>> {  // one device buffer for the launch
  T* data;
  std::size_t n;
  __device__ void fill(unsigned char*) const {}
  __device__ std::span<T> param(unsigned char*) const { return {data, n}; }
};

/// The resources' descriptors, in order (a plain aggregate: it is copied bytewise into the kernel parameters).
template <class... R>
struct dev_desc {};
template <class R0, class... Rest>
struct dev_desc<R0, Rest...> {
  dev_res<R0> head;
  dev_desc<Rest...> tail;
};

template <std::size_t I, class R0, class... Rest>
__host__ __device__ auto& get(dev_desc<R0, Rest...>& d) {
  if constexpr (I == 0) {
    return d.head;
  } else {
    return get<I - 1>(d.tail);
  }
}
template <std::size_t I, class R0, class... Rest>
__host__ __device__ const auto& get(const dev_desc<R0, Rest...>& d) {
  if constexpr (I == 0) {
    return d.head;
  } else {
    return get<I - 1>(d.tail);
  }
}

// Resources whose per-block array the block fills before the body runs (so a barrier must follow the fills).
template <class R>
inline constexpr bool fills_shared = false;
template <class T, std::size_t N>
inline constexpr bool fills_shared<shared_array<T, N, true>> = true;
template <class T>
inline constexpr bool fills_shared<shared_copy<T>> = true;

/// Alignment of the dynamic shared memory's base, and so the most a shared array's element type may ask for.
inline constexpr std::size_t shared_base_align = 128;
extern __shared__ __align__(128) unsigned char dynamic_shared[];

__device__ inline dim3 to_dim3(::dim3 d) { return dim3(static_cast<int>(d.x), static_cast<int>(d.y), static_cast<int>(d.z)); }

// The offset of resource I when it is known at compile time, else no_static_offset. The host lays the shared arrays
// out in order, each at the next multiple of its alignment (launch_layout::place_shared), and the constant data from
// 0 (lay_out): a shared array whose predecessors all have compile-time sizes, and the first constant_from, have
// compile-time offsets (launch_parts checks that the host put them there). Passed as constants, ptxas sees
// [dynamic_shared + imm] and c[0x3][imm + ...], as for a static __shared__ or __constant__ array of a CUDA kernel,
// and merges neighbouring loads (LDS.128, ULDC.64); with the offset read from the descriptor it cannot (x10cuda
// matmul, ptxas 13 for sm_90: 256 LDS per 16-wide step against the native kernel's 68 LDS.128; 68 with this).
inline constexpr std::size_t no_static_offset = ~std::size_t{0};
enum class res_kind { other, shared_fixed, shared_sized_at_run_time, constant };
template <class X>
struct res_layout {
  static constexpr res_kind kind = res_kind::other;
  static constexpr std::size_t bytes = 0, align = 1;
};
template <class T, std::size_t N, bool F>
struct res_layout<shared_array<T, N, F>> {
  static constexpr res_kind kind =
      N == std::dynamic_extent ? res_kind::shared_sized_at_run_time : res_kind::shared_fixed;
  static constexpr std::size_t bytes = N == std::dynamic_extent ? 0 : N * sizeof(T), align = gpu_shared_align<T>;
};
template <class T>
struct res_layout<shared_copy<T>> {
  static constexpr res_kind kind = res_kind::shared_sized_at_run_time;
  static constexpr std::size_t bytes = 0, align = gpu_shared_align<T>;
};
template <class T>
struct res_layout<constant_copy<T>> {
  static constexpr res_kind kind = res_kind::constant;
  static constexpr std::size_t bytes = 0, align = 16;
};
// (the index a function argument: a loop bound that is a template argument of 0 makes nvcc warn)
constexpr std::size_t static_offset_in(std::size_t index, const res_kind* kinds, const std::size_t* bytes,
                                       const std::size_t* aligns) {
  if (kinds[index] == res_kind::other) return no_static_offset;
  if (kinds[index] == res_kind::constant) {
    for (std::size_t i = 0; i < index; ++i) {
      if (kinds[i] == res_kind::constant) return no_static_offset;
    }
    return 0;
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < index; ++i) {
    if (kinds[i] == res_kind::shared_sized_at_run_time) return no_static_offset;
    if (kinds[i] == res_kind::shared_fixed) total = (total + aligns[i] - 1) / aligns[i] * aligns[i] + bytes[i];
  }
  return (total + aligns[index] - 1) / aligns[index] * aligns[index];
}
template <std::size_t I, class... R>
constexpr std::size_t static_offset() {
  constexpr res_kind kinds[] = {res_layout<R>::kind...};
  constexpr std::size_t bytes[] = {res_layout<R>::bytes...}, aligns[] = {res_layout<R>::align...};
  return static_offset_in(I, kinds, bytes, aligns);
}
// What the body gets for resource r, with its offset as a constant where it is known at compile time.
template <std::size_t Off, class D>
__device__ auto param_of(const D& r, unsigned char* smem) {
  if constexpr (Off == no_static_offset) {
    return r.param(smem);
  } else {
    D fixed = r;
    fixed.offset = Off;  // the value the host wrote, as a constant
    return fixed.param(smem);
  }
}

template <body_kind Kind, class Body, class... R, std::size_t... I>
__device__ void run_block(const Body& body, const dev_desc<R...>& d, std::index_sequence<I...>) {
  (get<I>(d).fill(dynamic_shared), ...);
  if constexpr ((fills_shared<R> || ...)) __syncthreads();
  const dim3 tid = to_dim3(threadIdx), bid = to_dim3(blockIdx), bdim = to_dim3(blockDim), gdim = to_dim3(gridDim);
  if constexpr (Kind == body_kind::clocked) {
    body(clocked_thread(tid, bid, bdim, gdim, nullptr),
         param_of<static_offset<I, R...>()>(get<I>(d), dynamic_shared)...);
  } else if constexpr (Kind == body_kind::block) {
    body(thread_block(bid, bdim, gdim, nullptr), param_of<static_offset<I, R...>()>(get<I>(d), dynamic_shared)...);
  } else {
    body(thread_handle(tid, bid, bdim, gdim), param_of<static_offset<I, R...>()>(get<I>(d), dynamic_shared)...);
  }
}

// In host code an [=] APGAS_KERNEL lambda is nvcc's wrapper (never trivially copyable, so kernel.hpp cannot check
// it); here, in the device pass, it is the closure itself: what is shipped to the device must be bytes that mean the
// same there.
#if defined(__CUDA_ARCH__)
#define APGAS_DETAIL_CHECK_DEVICE_BODY(Body)                                                                         \
  static_assert(std::is_trivially_copyable_v<Body>,                                                                 \
                "apgas::cuda_kernel: the body must be trivially copyable (it is shipped to the device): this lambda " \
                "captures something that is not (a std::vector, std::string, std::function...), whose device copy " \
                "would hold host pointers; capture scalars, place, remote_array, std::array; pass host data through " \
                "resources (shared_from, constant_from, global_from)")
#else
#define APGAS_DETAIL_CHECK_DEVICE_BODY(Body)
#endif

// The body and the descriptor are read where the launch put them (__grid_constant__: CUDA 11.7 on, sm_70 on, which
// every architecture CUDA 13 supports is): a body that takes the address of one of its captures (indexes a captured
// array by a run-time value, passes a capture by reference to a function not inlined) reads it there; without the
// annotation the compiler copies the whole closure into each thread's local memory first (ptxas: a stack frame as
// large as the closure). The parameters' layout is the same either way. Writing such a parameter is undefined (CUDA's
// rule), a mutable capture included: run_block gets them const. scripts/kernel-resources.sh shows the stack frame of
// every sample kernel.
#if CUDART_VERSION >= 11070 && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700)
#define APGAS_DETAIL_GRID_CONSTANT __grid_constant__
#else
#define APGAS_DETAIL_GRID_CONSTANT
#endif
template <body_kind Kind, class Body, class... R>
__global__ void entry_direct(const APGAS_DETAIL_GRID_CONSTANT Body body,
                             const APGAS_DETAIL_GRID_CONSTANT dev_desc<R...> d) {
  APGAS_DETAIL_CHECK_DEVICE_BODY(Body);
  run_block<Kind>(body, d, std::index_sequence_for<R...>{});
}

template <body_kind Kind, class Body, class... R>
__global__ void entry_spilled(const Body* body, const APGAS_DETAIL_GRID_CONSTANT dev_desc<R...> d) {
  APGAS_DETAIL_CHECK_DEVICE_BODY(Body);
  run_block<Kind>(*body, d, std::index_sequence_for<R...>{});
}

// The same with CUDA's __launch_bounds__ (launch_bounds<MaxThreads, MinBlocks>(...)): the compiler budgets registers
// so that MaxThreads threads per block (and MinBlocks blocks per SM) fit.
template <int MaxThreads, int MinBlocks, body_kind Kind, class Body, class... R>
__global__ void __launch_bounds__(MaxThreads, MinBlocks)
    entry_direct_bounded(const APGAS_DETAIL_GRID_CONSTANT Body body,
                         const APGAS_DETAIL_GRID_CONSTANT dev_desc<R...> d) {
  APGAS_DETAIL_CHECK_DEVICE_BODY(Body);
  run_block<Kind>(body, d, std::index_sequence_for<R...>{});
}

template <int MaxThreads, int MinBlocks, body_kind Kind, class Body, class... R>
__global__ void __launch_bounds__(MaxThreads, MinBlocks)
    entry_spilled_bounded(const Body* body, const APGAS_DETAIL_GRID_CONSTANT dev_desc<R...> d) {
  APGAS_DETAIL_CHECK_DEVICE_BODY(Body);
  run_block<Kind>(*body, d, std::index_sequence_for<R...>{});
}
#undef APGAS_DETAIL_CHECK_DEVICE_BODY
#undef APGAS_DETAIL_GRID_CONSTANT

/// Bytes of kernel parameters a launch may pass; a body and descriptor larger than this go by pointer. 32764 since
/// CUDA 12.1 on Volta and newer (every GPU CUDA 13 supports); 4096 before.
inline constexpr std::size_t param_space = CUDART_VERSION >= 12010 ? 32764 : 4096;

// ---- the host side: plan the resources, build the request, launch ----------------------------------------------

// Where each resource goes: its offset in the dynamic shared memory or in the constant buffer, or its upload.
struct resource_slot {
  std::size_t offset = 0;
  int upload = -1;  // index into the request's uploads
};

struct launch_layout {
  std::size_t shared_bytes = 0;
  std::vector<std::byte> constant;
  std::vector<gpu_upload> uploads;

  // n elements of elem bytes at the next multiple of align: their offset. Sizes that overflow a size_t are refused
  // as on a CPU place (add_shared): wrapped round, the launch asked for a few bytes and its arrays lay beyond them.
  std::size_t place_shared(std::size_t n, std::size_t elem, std::size_t align) {
    const std::size_t end = add_shared(shared_bytes, n, elem, align);
    shared_bytes = end;
    return end - n * elem;
  }
  int upload(const void* data, std::size_t bytes) {
    uploads.push_back(gpu_upload{data, bytes});
    return static_cast<int>(uploads.size()) - 1;
  }
};

template <class T>
constexpr std::size_t shared_alignment() {
  static_assert(alignof(T) <= shared_base_align,
                "apgas::shared/shared_from: the element type is aligned to more than 128 bytes, the alignment of the "
                "dynamic shared memory");
  return gpu_shared_align<T>;  // (kernel_cpu.hpp: the checking mode counts with it too)
}
template <class T>
inline constexpr std::size_t shared_align = shared_alignment<T>();

template <class T, std::size_t N, bool Fill>
resource_slot lay_out(launch_layout& l, const shared_array<T, N, Fill>& r) {
  if (N != std::dynamic_extent && r.n != N) {  // (a hand-made aggregate: the device code is compiled for N)
    throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE */,
                              "apgas::cuda_kernel: a shared_array<T, " + std::to_string(N) + "> of " +
                                  std::to_string(r.n) + " elements: make it with apgas::shared<T, " +
                                  std::to_string(N) + ">() or apgas::shared_uninit<T, " + std::to_string(N) + ">()");
  }
  return {l.place_shared(r.n, sizeof(T), shared_align<T>), -1};
}
template <class T>
resource_slot lay_out(launch_layout& l, const shared_copy<T>& r) {
  const std::size_t at = l.place_shared(r.data->size(), sizeof(T), shared_align<T>);
  return {at, l.upload(r.data->data(), r.data->size() * sizeof(T))};
}
template <class T>
resource_slot lay_out(launch_layout& l, const constant_copy<T>& r) {
  const std::size_t bytes = r.data->size() * sizeof(T);
  const std::size_t at = (l.constant.size() + 15) / 16 * 16;
  l.constant.resize(at + bytes);
  if (bytes != 0) std::memcpy(l.constant.data() + at, r.data->data(), bytes);
  return {at, -1};
}
template <class T>
resource_slot lay_out(launch_layout& l, const global_copy<T>& r) {
  return {0, l.upload(r.data->data(), r.data->size() * sizeof(T))};
}

template <class T, std::size_t N, bool Fill>
void describe(dev_res<shared_array<T, N, Fill>>& d, const shared_array<T, N, Fill>& r, resource_slot s,
              const std::uintptr_t*) {
  d.offset = s.offset;
  d.n = r.n;
  d.value = r.value;
}
template <class T>
void describe(dev_res<shared_copy<T>>& d, const shared_copy<T>& r, resource_slot s, const std::uintptr_t* up) {
  d.offset = s.offset;
  d.n = r.data->size();
  d.source = reinterpret_cast<const T*>(up[s.upload]);
}
template <class T>
void describe(dev_res<constant_copy<T>>& d, const constant_copy<T>& r, resource_slot s, const std::uintptr_t*) {
  d.offset = s.offset;
  d.n = r.data->size();
}
template <class T>
void describe(dev_res<global_copy<T>>& d, const global_copy<T>& r, resource_slot s, const std::uintptr_t* up) {
  d.data = reinterpret_cast<T*>(up[s.upload]);
  d.n = r.data->size();
}

template <class... R>
struct desc_context {
  const std::tuple<R...>* res;
  resource_slot slots[sizeof...(R) + 1];
};

template <class... R, std::size_t... I>
void write_desc(void* out, const desc_context<R...>& c, const std::uintptr_t* uploads, std::index_sequence<I...>) {
  [[maybe_unused]] auto* d = new (out) dev_desc<R...>;
  (describe(get<I>(*d), std::get<I>(*c.res), c.slots[I], uploads), ...);
}

/// Launch the kernel made of these parts at GPU place p of this host (the body as bytes: a routed kernel arrives
/// that way). Counted by the caller's innermost finish.
template <class K, class Shape, class... R>
void launch_parts(place p, const Shape& shape, const void* body, const std::tuple<R...>& res, int queue = -1,
                  finish_token* token = nullptr) {
  using Body = decltype(K::body);
  // The usual slip: a lambda written [=](...) without APGAS_KERNEL is host code only. Say so, instead of nvcc's
  // error about __global__ template arguments inside this file (the lambda's type and the call that sends it follow
  // in the instantiation notes).
  static_assert(device_callable_v<Body>,
                "apgas::cuda_kernel: this kernel's body cannot run on a GPU: write the lambda as [=] APGAS_KERNEL "
                "(apgas::thread t, ...) { ... } (APGAS_KERNEL makes it __host__ __device__; the same closure still runs "
                "on CPU places), or, for a named function object, derive it from apgas::device_function and declare "
                "its operator() APGAS_KERNEL");
  if constexpr (device_callable_v<Body>) {
  using desc_t = dev_desc<R...>;
  using traits = shape_traits<Shape>;
  constexpr body_kind kind = K::kind;
  constexpr bool spill = sizeof(Body) + sizeof(desc_t) > param_space;

  desc_context<R...> ctx{&res, {}};
  launch_layout layout;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((ctx.slots[I] = lay_out(layout, std::get<I>(res))), ...);
    // The device side takes the offsets it can know at compile time as constants (static_offset, run_block).
    const bool as_compiled =
        ((static_offset<I, R...>() == no_static_offset || static_offset<I, R...>() == ctx.slots[I].offset) && ...);
    if (!as_compiled) {
      throw std::logic_error("apgas: internal error: a kernel resource's offset differs from the one its device code "
                             "was compiled with (cuda/kernel.cuh: static_offset and lay_out disagree)");
    }
  }(std::index_sequence_for<R...>{});

  gpu_kernel_request r;
  if constexpr (traits::max_threads > 0) {
    if constexpr (spill) {
      r.entry = reinterpret_cast<const void*>(
          &entry_spilled_bounded<traits::max_threads, traits::min_blocks, kind, Body, R...>);
    } else {
      r.entry = reinterpret_cast<const void*>(
          &entry_direct_bounded<traits::max_threads, traits::min_blocks, kind, Body, R...>);
    }
  } else if constexpr (spill) {
    r.entry = reinterpret_cast<const void*>(&entry_spilled<kind, Body, R...>);
  } else {
    r.entry = reinterpret_cast<const void*>(&entry_direct<kind, Body, R...>);
  }
  r.what = "kernel";
  r.name = typeid(Body).name();
  r.resolve = &resolve_entry;
  r.constant_symbol = layout.constant.empty() ? nullptr : &constant_address<>;
  r.constant_capacity = APGAS_CONSTANT_BYTES;
  r.constant = std::span<const std::byte>(layout.constant);
  r.shape = traits::explicit_grid(shape);
  r.dynamic_shared = layout.shared_bytes;
  r.uploads = std::move(layout.uploads);
  r.write_desc = [](void* out, const void* c, const std::uintptr_t* uploads) {
    write_desc(out, *static_cast<const desc_context<R...>*>(c), uploads, std::index_sequence_for<R...>{});
  };
  r.desc_ctx = &ctx;
  r.desc_bytes = sizeof(desc_t);
  r.body = body;
  r.body_bytes = sizeof(Body);
  r.spilled = spill;
  r.keep = std::make_shared<const std::tuple<R...>>(res);  // the host data of the uploads, until the launch ends
  r.queue = queue;
  r.token = token;
  gpu_launch(p, r);
  }
}

}  // namespace
}  // namespace apgas::detail::cuda

namespace apgas::detail {

template <class K, class Shape, class Resources>
void launch_gpu_parts(place p, const Shape& shape, const void* body, const Resources& res) {
  cuda::launch_parts<K>(p, shape, body, res);
}

template <class K>
void launch_kernel_gpu(place p, const K& k, int queue, finish_token* token) {
  cuda::launch_parts<K>(p, k.shape, static_cast<const void*>(&k.body), k.resources, queue, token);
}

}  // namespace apgas::detail
