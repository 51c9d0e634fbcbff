#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file kernel_thread.hpp
/// What a kernel body sees: launch shapes (dim3, grid), the thread handles of the three kinds of body, shared arrays,
/// and the block- and warp-level operations. Included by apgas/kernel.hpp; see there for cuda_kernel itself.
///
/// Three kinds of body, told apart by the type of their first parameter:
///  - `apgas::thread t` (plain): every thread runs the body once, with no barrier. On a CPU place the threads of a
///    block are a loop.
///  - `apgas::clocked_thread t` (X10's clocked pattern, CUDA's `__syncthreads()` style): the threads of a block share
///    a barrier, `t.advance()`, and the block and warp collectives below. On a CPU place each thread is a fiber; a
///    barrier switches straight to the next thread of the block (decision 0009).
///  - `apgas::thread_block b` (block level, Kokkos' TeamPolicy style): the body runs once per block and splits its
///    work over the block's threads with `b.for_threads(f)`; `b.sync()` is the barrier. On a GPU every thread runs the
///    body and `for_threads` is one call of f; on a CPU place `for_threads` is a plain loop the compiler vectorises.
/// docs/porting.md maps each CUDA construct to its form here.

#include <apgas/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define APGAS_KERNEL __host__ __device__
#define APGAS_DETAIL_HD __host__ __device__
#else
#define APGAS_KERNEL
#define APGAS_DETAIL_HD
#endif

/// APGAS_UNROLL(n) before a loop in a kernel body: CUDA's `#pragma unroll n` in a GPU's code (APGAS_UNROLL() unrolls
/// it fully), nothing elsewhere: on a CPU place GCC and Clang at -O2/-O3 unroll short loops of constant trip count
/// themselves, and what vectorises there is the loop over a block's threads (nvcc's host pass warns about both
/// `#pragma unroll` and `#pragma GCC unroll`).
/// @code
///   APGAS_UNROLL(4) for (int k = 0; k < 4; ++k) s += a[k] * b[k];
/// @endcode
#define APGAS_DETAIL_PRAGMA(x) _Pragma(#x)
#if defined(__CUDA_ARCH__)
#define APGAS_UNROLL(...) APGAS_DETAIL_PRAGMA(unroll __VA_ARGS__)
#else
#define APGAS_UNROLL(...)
#endif

/// APGAS_CPU_NOINLINE before a function that a kernel body calls: a function of its own in a CPU place's code
/// (`[[gnu::noinline]]`), inlined as any other in a GPU's. For a hot inner loop that the compiler, once it is inlined
/// into the loops of a block-level body (the loop over the threads, the body's own), leaves short of registers: out
/// of line it has them to itself (Parboil's tpacf: its binary search kept two of its values on the stack inside the
/// kernel's loops, none in a function of its own; 1.13x to 1.05x the OpenMP version's time on one worker). Pass it
/// values, not a closure: captures reached through a reference are loaded from memory at each use.
/// @code
///   APGAS_CPU_NOINLINE APGAS_KERNEL inline void count(const float (&d)[16], int n, apgas::shared_span<unsigned> h);
/// @endcode
#if defined(__CUDA_ARCH__)
#define APGAS_CPU_NOINLINE
#else
#define APGAS_CPU_NOINLINE [[gnu::noinline]]
#endif

// The loop over a block's threads on a CPU place: GPU threads of a block are independent between barriers, so the
// iterations are too; tell the compiler (it need not prove the absence of aliasing to vectorise).
#if defined(__clang__)
#define APGAS_DETAIL_INDEPENDENT _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define APGAS_DETAIL_INDEPENDENT _Pragma("GCC ivdep")
#else
#define APGAS_DETAIL_INDEPENDENT
#endif

namespace apgas {

/// A launch extent in up to three dimensions (CUDA's dim3): x fastest. Converts from an int for 1-D shapes.
struct dim3 {
  int x = 1;
  int y = 1;
  int z = 1;
  APGAS_DETAIL_HD constexpr dim3(int x_ = 1, int y_ = 1, int z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
  /// x * y * z
  APGAS_DETAIL_HD constexpr long count() const noexcept { return static_cast<long>(x) * y * z; }
  APGAS_DETAIL_HD friend constexpr bool operator==(dim3 a, dim3 b) noexcept {
    return a.x == b.x && a.y == b.y && a.z == b.z;
  }
};

/// An explicit launch shape: `blocks` blocks of `threads` threads. `grid{8, 64}` is 1-D (as in X10);
/// `grid{{64, 64}, {16, 16}}` is a 2-D grid of 2-D blocks.
struct grid {
  dim3 blocks;
  dim3 threads;
};

/// Let the runtime choose the shape (1-D): on a GPU place from the occupancy of the kernel (the block size that
/// maximises it, times the blocks per SM that fit, times the SMs; X10's table as the fallback); on a CPU place one
/// block per worker with one thread each (kernels are written with grid-stride loops, so any shape computes the same
/// result). Block-level bodies get 32-thread blocks on a CPU place.
struct auto_grid_t {};
constexpr auto_grid_t auto_grid() noexcept { return {}; }

/// Threads per warp, on a GPU and on CPU places alike.
inline constexpr int warp_size = 32;

// ---- combining operations for the collectives (usable in device code) ----------------------------------------
struct plus {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a + b; }
};
struct multiplies {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a * b; }
};
struct minimum {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
struct maximum {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
struct bit_and {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a & b; }
};
struct bit_or {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a | b; }
};
struct bit_xor {
  template <class T>
  APGAS_DETAIL_HD constexpr T operator()(const T& a, const T& b) const { return a ^ b; }
};

/// Bytes a value of a block or warp collective may have (the CPU runtime keeps one slot of this size per thread).
inline constexpr std::size_t max_collective_bytes = 64;

namespace detail {

template <class...>
inline constexpr bool dependent_false = false;

template <class T>
constexpr void check_collective_type() {
  static_assert(std::is_trivially_copyable_v<T>, "apgas: values of block and warp collectives must be trivially copyable");
  static_assert(sizeof(T) <= max_collective_bytes && alignof(T) <= 16,
                "apgas: values of block and warp collectives are at most 64 bytes (alignment at most 16)");
}

// ---- the CPU runtime's entry points (apgas/src/kernel_cpu.cpp); `self` is the calling kernel thread ----------------
using combine_fn = void (*)(void* slots, const bool* present, int n, void* result, const void* op);
[[noreturn]] void cpu_cancelled();

extern "C" {
/// A clocked thread arrives at a barrier of its block (kind 0) or of its warp (kind 1); the thread whose arrival
/// completes it first runs combine(slots, present, n, result, op) when given. Returns the completed phase's result
/// area, or null when the block was cancelled (the thread must unwind).
__attribute__((visibility("default"))) const void* apgas_detail_kernel_barrier_arrive(void* self, long kind,
                                                                                    combine_fn combine,
                                                                                    const void* op) noexcept;
}

/// The barrier as a clocked body calls it. On x86-64 it goes through a stub that keeps xmm6-xmm15 (ymm/zmm in
/// translation units built for AVX/AVX-512) across the switch to the other threads of the block: a body's
/// floating-point values that live across a barrier — an accumulator, a stencil's neighbours — then stay in
/// registers. With an ordinary call (System V keeps no vector register) GCC may instead keep such a value in memory
/// for the whole loop nest around the barrier: measured 2x on a tiled SGEMM (decision 0009).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define APGAS_DETAIL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define APGAS_DETAIL_SANITIZED 1
#endif
#endif
inline const void* cpu_barrier(void* self, long kind, combine_fn combine = nullptr, const void* op = nullptr) {
  // Under ASan or TSan the sanitizers must hear of every stack switch: the plain call, which tells them, is used.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(APGAS_DETAIL_SANITIZED)
#if defined(__AVX512F__)
  register long width asm("r8") = 64;
#elif defined(__AVX__)
  register long width asm("r8") = 32;
#else
  register long width asm("r8") = 16;
#endif
  const void* r;
  // 128 bytes below rsp first: the red zone may hold the caller's values.
  asm volatile("sub $128, %%rsp\n\tcall apgas_detail_kernel_barrier@PLT\n\tadd $128, %%rsp"
               : "=a"(r), "+D"(self), "+S"(kind), "+d"(combine), "+c"(op), "+r"(width)
               :
               : "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "st", "st(1)", "st(2)",
                 "st(3)", "st(4)", "st(5)", "st(6)", "st(7)", "memory", "cc"
#if defined(__AVX512F__)
                 , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26",
                 "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#endif
  );
#else
  const void* r = apgas_detail_kernel_barrier_arrive(self, kind, combine, op);
#endif
  if (r == nullptr) cpu_cancelled();
  return r;
}

/// Where the calling clocked thread deposits its value (`bytes` long, the same for every thread) for the next block
/// collective; the slots of one collective are dense, so a combine function sees an array of the value type (tagged with the phase).
void* cpu_block_slot(void* self, std::size_t bytes) noexcept;
/// After the barrier: thread t's slot of the completed phase (null if t did not deposit); per-thread results (scans).
const void* cpu_block_slot_of(void* self, int t) noexcept;
/// The same for a warp operation (cpu_barrier kind 1: a barrier of the calling thread's warp only).
void* cpu_warp_slot(void* self, std::size_t bytes) noexcept;
const void* cpu_warp_slot_of(void* self, int lane, bool shuffle = false) noexcept;
/// Block-level bodies on a CPU place: per-block scratch memory (valid until the block ends; align: a power of two, as
/// every alignof is) and the checking hooks.
void* cpu_block_alloc(void* block, std::size_t bytes, std::size_t align);
void cpu_block_sync(void* block);
/// The checking mode's barrier count, advanced (what cpu_block_sync does, without its report).
void cpu_block_epoch(void* block) noexcept;
/// The first member of the CPU runtime's block state, read inline by block-level bodies so that for_threads and sync
/// make no call unless the checking mode is on (a call the compiler cannot see into would make it reload everything).
struct cpu_block_head {
  bool checking = false;
  std::size_t arena_chunk = 0;  // the per-block scratch (cpu_block_alloc): the chunk in use, and bytes used in it
  std::size_t arena_used = 0;
};
inline bool cpu_block_checking(const void* block) noexcept {
  return static_cast<const cpu_block_head*>(block)->checking;
}
/// Where the scratch stands, and a return there: what was allocated after the mark is given back (a collective's
/// working space, so that one called in a loop takes no more memory than one called once).
struct cpu_arena_mark {
  std::size_t chunk, used;
};
inline cpu_arena_mark cpu_block_mark(const void* block) noexcept {
  const auto* h = static_cast<const cpu_block_head*>(block);
  return {h->arena_chunk, h->arena_used};
}
inline void cpu_block_release(void* block, cpu_arena_mark m) noexcept {
  auto* h = static_cast<cpu_block_head*>(block);
  h->arena_chunk = m.chunk;
  h->arena_used = m.used;
}
void cpu_block_set_thread(void* block, int t) noexcept;
/// Checking mode, block-level bodies: a per_thread value of thread t is accessed (reported unless t is the thread
/// whose code runs).
void cpu_per_thread_index(void* block, int t) noexcept;
/// Checking mode, block-level bodies: the per-thread code of `what` (for_threads, for_threads_in, single, a
/// collective's function, stage's copy) starts; reported when that is inside another's per-thread code (a GPU runs
/// it from each thread: for_threads there is one call, a collective or single a barrier). The block's state — whose
/// shared accesses follow (-1: the block's own) and whose per-thread code runs — is saved, and cpu_block_leave
/// restores it; every enter has its leave, also when an exception leaves the code (a nested for_threads that reset it
/// to "the block's own" made its caller's accesses the block's, and one left by an exception made the block's
/// accesses after it a thread's). The saved states are the library's: nothing stays live in the body across the loop.
void cpu_block_enter(void* block, const char* what) noexcept;
void cpu_block_leave(void* block) noexcept;
/// In the checking mode's loop over a box of threads: thread t's iteration starts; in the first, `entering` is the
/// construct (cpu_block_enter), null in the others (one call per iteration, none before the loop: see cpu_for_box).
void cpu_block_loop_thread(void* block, int t, const char* entering) noexcept;
/// enter and leave for a scope.
class cpu_thread_scope {
 public:
  cpu_thread_scope(void* block, const char* what) noexcept : block_(block) { cpu_block_enter(block, what); }
  ~cpu_thread_scope() { cpu_block_leave(block_); }
  cpu_thread_scope(const cpu_thread_scope&) = delete;
  cpu_thread_scope& operator=(const cpu_thread_scope&) = delete;

 private:
  void* block_;
};
/// A shared-array access seen by the checking mode: range check (returns false when i is outside) and race tracking.
struct shared_check;
bool cpu_shared_access(shared_check* c, std::size_t i) noexcept;
/// The same through a part [off, off + n) of the array (shared_span::subspan): i outside the part is reported too.
bool cpu_shared_access_in(shared_check* c, std::size_t off, std::size_t i, std::size_t n) noexcept;
/// In checking mode: the access just recorded at `addr` (if it is in a watched shared array) was atomic, which is no
/// race (apgas/kernel_atomic.hpp calls it where APGAS_KERNEL_CHECKS is on).
void cpu_atomic_note(const void* addr) noexcept;

/// The tree in which a block reduction combines values: per warp (32 lanes) a halving tree (lane i takes lane
/// i + 16, 8, 4, 2, 1 where that lane exists), then the same tree over the warps' results. A GPU computes it with warp
/// shuffles; CPU places compute exactly this order, so results are bit-identical on both. Slots without a value
/// (present[i] false: a thread that did not take part) are left out.
template <class T, class Op>
APGAS_DETAIL_HD bool tree_reduce(T* v, bool* present, int n, const Op& op) {
  const int warps = (n + warp_size - 1) / warp_size;
  for (int w = 0; w < warps; ++w) {
    T* a = v + w * warp_size;
    bool* p = present + w * warp_size;
    const int active = n - w * warp_size < warp_size ? n - w * warp_size : warp_size;
    for (int off = warp_size / 2; off > 0; off /= 2) {
      for (int lane = 0; lane + off < active; ++lane) {
        if (!p[lane + off]) continue;
        a[lane] = p[lane] ? op(a[lane], a[lane + off]) : a[lane + off];
        p[lane] = true;
      }
    }
    v[w] = a[0];  // w <= w * warp_size: never overwrites a warp not yet reduced
    present[w] = p[0];
  }
  for (int off = warp_size / 2; off > 0; off /= 2) {
    for (int lane = 0; lane + off < warps; ++lane) {
      if (!present[lane + off]) continue;
      v[lane] = present[lane] ? op(v[lane], v[lane + off]) : v[lane + off];
      present[lane] = true;
    }
  }
  return present[0];
}

/// One step of a whole warp's tree and the steps after it: each a loop of a compile-time trip count, which the
/// compiler unrolls into a few vector operations (a loop over `off` as a variable: 1.7x the instructions of rpes'
/// block reductions).
template <int Off, class T, class Op>
APGAS_DETAIL_HD void tree_steps(T* a, const Op& op) {
  for (int lane = 0; lane < Off; ++lane) a[lane] = op(a[lane], a[lane + Off]);
  if constexpr (Off > 1) tree_steps<Off / 2>(a, op);
}

/// tree_reduce when every slot has a value (a block-level body: all threads take part), without presence marks: the
/// same combinations in the same order, so the same bits. Only the slots that feed slot 0 are combined (at each
/// step the lanes below the offset), with constant trip counts for whole warps, which the compiler vectorises.
template <class T, class Op>
APGAS_DETAIL_HD T tree_reduce_all(T* v, int n, const Op& op) {
  const int warps = (n + warp_size - 1) / warp_size;
  for (int w = 0; w < warps; ++w) {
    T* a = v + w * warp_size;
    const int active = n - w * warp_size < warp_size ? n - w * warp_size : warp_size;
    if (active == warp_size) {
      tree_steps<warp_size / 2>(a, op);
    } else {
      for (int off = warp_size / 2; off > 0; off /= 2) {
        for (int lane = 0; lane < off && lane + off < active; ++lane) a[lane] = op(a[lane], a[lane + off]);
      }
    }
    v[w] = a[0];  // w <= w * warp_size: never overwrites a warp not yet reduced
  }
  for (int off = warp_size / 2; off > 0; off /= 2) {
    for (int lane = 0; lane < off && lane + off < warps; ++lane) v[lane] = op(v[lane], v[lane + off]);
  }
  return v[0];
}

/// The order of an inclusive block scan: per warp, lane i combines with lane i - 1, 2, 4, 8, 16 (Hillis-Steele, as
/// warp shuffles compute it), then the warps' totals are scanned the same way and each warp's prefix is put in front.
template <class T, class Op>
APGAS_DETAIL_HD void tree_scan(T* v, int n, const Op& op) {
  const int warps = (n + warp_size - 1) / warp_size;
  alignas(16) unsigned char raw[warp_size * sizeof(T)];  // T need not be default-constructible
  T* totals = reinterpret_cast<T*>(raw);
  for (int w = 0; w < warps; ++w) {
    T* a = v + w * warp_size;
    const int active = n - w * warp_size < warp_size ? n - w * warp_size : warp_size;
    for (int off = 1; off < warp_size; off *= 2) {
      for (int lane = active - 1; lane >= off; --lane) a[lane] = op(a[lane - off], a[lane]);
    }
    totals[w] = a[active - 1];
  }
  for (int off = 1; off < warp_size; off *= 2) {
    for (int lane = warps - 1; lane >= off; --lane) totals[lane] = op(totals[lane - off], totals[lane]);
  }
  for (int w = 1; w < warps; ++w) {
    T* a = v + w * warp_size;
    const int active = n - w * warp_size < warp_size ? n - w * warp_size : warp_size;
    for (int lane = 0; lane < active; ++lane) a[lane] = op(totals[w - 1], a[lane]);
  }
}

#if defined(__CUDACC__)
// ---- device side (declared in both of nvcc's passes: __device__ code of either pass may name them) --------------
__device__ inline int gpu_linear_thread() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
__device__ inline int gpu_block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
/// The lanes of the calling thread's warp that exist (a block's last warp may be partial).
__device__ inline unsigned gpu_warp_mask() {
  const int rest = gpu_block_threads() - (gpu_linear_thread() & ~(warp_size - 1));
  return rest >= warp_size ? 0xffffffffu : (1u << rest) - 1u;
}

/// A warp shuffle of any trivially copyable value, as 32-bit words.
template <class T, class Shuffle>
__device__ T gpu_shuffle(const T& v, Shuffle shuffle) {
  constexpr int words = (sizeof(T) + 3) / 4;
  unsigned in[words] = {};
  unsigned out[words];
  memcpy(in, &v, sizeof(T));
  for (int i = 0; i < words; ++i) out[i] = shuffle(in[i]);
  T r;
  memcpy(&r, out, sizeof(T));
  return r;
}

template <class T>
struct gpu_scratch {  // per instantiation: 32 warp slots and one result
  __device__ static T* get() {
    __shared__ alignas(16) unsigned char raw[(warp_size + 1) * sizeof(T)];
    return reinterpret_cast<T*>(raw);
  }
};

template <class T, class Op>
__device__ T gpu_warp_tree(T v, const Op& op, int lane, int active, unsigned mask) {
  for (int off = warp_size / 2; off > 0; off /= 2) {
    const T other = gpu_shuffle(v, [&](unsigned w) { return __shfl_down_sync(mask, w, off); });
    if (lane + off < active) v = op(v, other);
  }
  return v;
}

template <class T, class Op>
__device__ T gpu_block_reduce(T v, const Op& op) {
  T* scratch = gpu_scratch<T>::get();
  const int n = gpu_block_threads();
  const int t = gpu_linear_thread();
  const int lane = t % warp_size;
  const int warp = t / warp_size;
  const int warps = (n + warp_size - 1) / warp_size;
  const int active = n - warp * warp_size < warp_size ? n - warp * warp_size : warp_size;
  v = gpu_warp_tree(v, op, lane, active, gpu_warp_mask());
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : v;
    w = gpu_warp_tree(w, op, lane, warps, gpu_warp_mask());
    if (lane == 0) scratch[warp_size] = w;
  }
  __syncthreads();
  return scratch[warp_size];  // rewritten only after the next collective's first barrier, which every reader passes
}

template <class T, class Op>
__device__ T gpu_warp_scan(T v, const Op& op, int lane, unsigned mask) {
  for (int off = 1; off < warp_size; off *= 2) {
    const T other = gpu_shuffle(v, [&](unsigned w) { return __shfl_up_sync(mask, w, off); });
    if (lane >= off) v = op(other, v);
  }
  return v;
}

/// Inclusive scan; `before` receives the inclusive value of the previous thread (for the exclusive scan).
template <class T, class Op>
__device__ T gpu_block_scan(T v, const Op& op, T* before, bool* has_before) {
  T* scratch = gpu_scratch<T>::get();
  const int n = gpu_block_threads();
  const int t = gpu_linear_thread();
  const int lane = t % warp_size;
  const int warp = t / warp_size;
  const int warps = (n + warp_size - 1) / warp_size;
  const int active = n - warp * warp_size < warp_size ? n - warp * warp_size : warp_size;
  const unsigned mask = gpu_warp_mask();
  v = gpu_warp_scan(v, op, lane, mask);
  if (lane == active - 1) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : v;
    w = gpu_warp_scan(w, op, lane, mask);
    if (lane < warps) scratch[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v = op(scratch[warp - 1], v);
  const T prev = gpu_shuffle(v, [&](unsigned w) { return __shfl_up_sync(mask, w, 1); });
  *has_before = t > 0;
  *before = lane > 0 ? prev : (warp > 0 ? scratch[warp - 1] : v);
  __syncthreads();  // the scratch is read above: the next collective may rewrite it only after this
  return v;
}

template <class T>
__device__ T gpu_block_broadcast(const T& v, int src) {
  T* scratch = gpu_scratch<T>::get();
  if (gpu_linear_thread() == src) scratch[warp_size] = v;
  __syncthreads();
  const T r = scratch[warp_size];
  __syncthreads();
  return r;
}
#endif  // __CUDACC__

// ---- CPU side: the combine functions the last thread to arrive runs -----------------------------------------------
template <class T, class Op>
void combine_reduce(void* slots, const bool* present, int n, void* result, const void* op) {
  bool p[1024];  // tree_reduce marks what it has combined; the runtime's presence marks stay as they are
  for (int i = 0; i < n; ++i) p[i] = present[i];
  T* v = static_cast<T*>(slots);
  if (tree_reduce(v, p, n, *static_cast<const Op*>(op))) std::memcpy(result, v, sizeof(T));
}

/// A clocked scan's combine: over the threads present at the barrier (an ended thread no longer takes part), in
/// thread order. Every present slot gets its thread's inclusive value, or for an exclusive scan that of the nearest
/// present thread before it (the first present thread's slot is left alone; its id goes into `result`): each
/// thread then combines its own init, as on a GPU.
template <class Op>
struct scan_args {
  const Op* op;
  bool exclusive;
};
template <class T, class Op>
void combine_scan(void* slots, const bool* present, int n, void* result, const void* a) {
  const auto& args = *static_cast<const scan_args<Op>*>(a);
  T* v = static_cast<T*>(slots);
  int at[1024];  // at[k]: the k-th present thread (at[k] >= k: the values move down, then back up)
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (present[i]) {
      if (m != i) std::memcpy(static_cast<void*>(v + m), v + i, sizeof(T));
      at[m++] = i;
    }
  }
  tree_scan(v, m, *args.op);
  for (int k = m - 1; k >= (args.exclusive ? 1 : 0); --k) {
    std::memcpy(static_cast<void*>(v + at[k]), v + (args.exclusive ? k - 1 : k), sizeof(T));
  }
  std::memcpy(result, &at[0], sizeof(int));
}

}  // namespace detail

// ---- shared arrays ----------------------------------------------------------------------------------------------

// Whether shared_span accesses are instrumented for the checking mode in this translation unit: APGAS_KERNEL_CHECKS=1 or
// 0, by default on where NDEBUG is not defined (as assert). The instrumentation is a test and a call on every access,
// which keeps a body's loops from vectorising and its values in registers: release builds leave it out. The two
// flavours are distinct types, so translation units built either way can be linked together.
#if !defined(APGAS_KERNEL_CHECKS)
#if defined(NDEBUG)
#define APGAS_KERNEL_CHECKS 0
#else
#define APGAS_KERNEL_CHECKS 1
#endif
#endif

namespace detail {
/// The tag of the launch's own basic_shared_span constructor: a whole shared array of a launch.
struct whole_shared_array_t {
  explicit whole_shared_array_t() = default;
};

/// Invariant: on a CPU place a span of compile-time size is a whole shared array, 64-byte aligned, and operator[]
/// tells the compiler so: only the launch makes those (the tagged constructor), over its 64-byte aligned per-block
/// buffers; the untagged constructor (subspan, thread_block::stage's std::span form) makes spans of dynamic size.
template <class T, std::size_t Extent, bool Checked>
class basic_shared_span {
 public:
  using element_type = T;
  using size_type = std::size_t;
  /// Elements [off, off + n) of a shared array, p pointing at element off (dynamic size only).
  APGAS_DETAIL_HD basic_shared_span(T* p, std::size_t n, shared_check* c = nullptr, std::size_t off = 0) noexcept
    requires(Extent == std::dynamic_extent)
      : p_(p), n_(n), check_(c), off_(off) {}
  /// The whole shared array of a launch (on a CPU place 64-byte aligned: operator[] relies on it).
  APGAS_DETAIL_HD basic_shared_span(whole_shared_array_t, T* p, std::size_t n, shared_check* c = nullptr) noexcept
      : p_(p), n_(n), check_(c), off_(0) {}
  APGAS_DETAIL_HD T& operator[](std::size_t i) const noexcept {
#if !defined(__CUDA_ARCH__)
    if constexpr (Checked) {
      if (check_ != nullptr && !cpu_shared_access_in(check_, off_, i, size())) {
        return p_[-static_cast<std::ptrdiff_t>(off_)];  // reported; element 0 of the whole array, nothing outside
      }
    }
    if constexpr (Extent != std::dynamic_extent) {  // a whole array, 64-byte aligned (the class's invariant): a loop
      // over a block's threads reads and writes it with aligned vectors, which SSE folds into the arithmetic (the
      // tiled SGEMM's product: 7 % fewer instructions; tpacf 1 %). Said of every span, through the whole array's
      // start p_ - off_, the indexing cost more than it gained (tpacf: 2 % more instructions).
      return static_cast<T*>(__builtin_assume_aligned(p_, 64))[i];
    }
#endif
    return p_[i];
  }
  /// Elements [offset, offset + count), watched as part of this array (an index outside the part is reported by
  /// the checking mode); offset and count are cut to the array.
  APGAS_DETAIL_HD basic_shared_span<T, std::dynamic_extent, Checked> subspan(std::size_t offset,
                                                                             std::size_t count) const noexcept {
    const std::size_t n = size(), at = offset < n ? offset : n;
    return {p_ + at, count < n - at ? count : n - at, check_, off_ + at};
  }
  APGAS_DETAIL_HD T* data() const noexcept { return p_; }
  /// The checking mode's watch of the array (null: unwatched), and where this span starts in it.
  APGAS_DETAIL_HD shared_check* checker() const noexcept { return check_; }
  APGAS_DETAIL_HD std::size_t whole_offset() const noexcept { return off_; }
  APGAS_DETAIL_HD constexpr std::size_t size() const noexcept {
    if constexpr (Extent != std::dynamic_extent) {
      return Extent;
    } else {
      return n_;
    }
  }
  APGAS_DETAIL_HD T* begin() const noexcept { return p_; }
  APGAS_DETAIL_HD T* end() const noexcept { return p_ + size(); }
  APGAS_DETAIL_HD operator std::span<T, Extent>() const noexcept { return std::span<T, Extent>(p_, size()); }

 private:
  T* p_;
  std::size_t n_;
  shared_check* check_;
  std::size_t off_;  // of p_ in the watched array
};
}  // namespace detail

/// A per-block shared array as a kernel body receives it: a span (std::span converts from it) whose accesses the
/// checking mode of CPU places watches — an index outside the array, and two threads of a block touching one element
/// between two barriers while its value changes (a data race on a GPU) — in translation units built with
/// APGAS_KERNEL_CHECKS=1 (the default without NDEBUG). Declare the body's parameter as apgas::shared_span<T> (or
/// auto) to be checked; a std::span<T> parameter (std::span<T, N> for an array of compile-time size N) works too,
/// unchecked.
template <class T, std::size_t Extent = std::dynamic_extent>
using shared_span = detail::basic_shared_span<T, Extent, APGAS_KERNEL_CHECKS != 0>;

// ---- thread handles -------------------------------------------------------------------------------------------

/// The thread handle of a plain kernel (`apgas::thread`; the class has another name only so that it can have a
/// member function called thread()). Indices as in CUDA: thread_idx() is threadIdx, block_idx() blockIdx,
/// block_dim() blockDim, grid_dim() gridDim; the linear ones number x fastest.
class thread_handle {
 public:
  APGAS_DETAIL_HD thread_handle(dim3 thread_idx, dim3 block_idx, dim3 block_dim, dim3 grid_dim) noexcept
      : tid_(thread_idx), bid_(block_idx), bdim_(block_dim), gdim_(grid_dim) {}
  /// 1-D form: thread t of block b, in a grid of `blocks` blocks of `threads` threads.
  APGAS_DETAIL_HD thread_handle(int block, int thread, int blocks, int threads) noexcept
      : tid_(thread), bid_(block), bdim_(threads), gdim_(blocks) {}
  APGAS_DETAIL_HD dim3 thread_idx() const noexcept { return tid_; }
  APGAS_DETAIL_HD dim3 block_idx() const noexcept { return bid_; }
  APGAS_DETAIL_HD dim3 block_dim() const noexcept { return bdim_; }
  APGAS_DETAIL_HD dim3 grid_dim() const noexcept { return gdim_; }
  /// The thread's index in its block, x fastest: (z * blockDim.y + y) * blockDim.x + x.
  APGAS_DETAIL_HD int thread() const noexcept { return (tid_.z * bdim_.y + tid_.y) * bdim_.x + tid_.x; }
  /// Threads per block.
  APGAS_DETAIL_HD int threads() const noexcept { return bdim_.x * bdim_.y * bdim_.z; }
  /// The block's index in the grid, x fastest.
  APGAS_DETAIL_HD long block() const noexcept {
    return (static_cast<long>(bid_.z) * gdim_.y + bid_.y) * gdim_.x + bid_.x;
  }
  /// Blocks in the grid.
  APGAS_DETAIL_HD long blocks() const noexcept { return gdim_.count(); }
  /// block() * threads() + thread()
  APGAS_DETAIL_HD long global_id() const noexcept { return block() * threads() + thread(); }
  /// blocks() * threads()
  APGAS_DETAIL_HD long global_count() const noexcept { return blocks() * threads(); }
  /// The thread's lane in its warp and its warp in the block (warps are 32 consecutive threads, as on a GPU).
  APGAS_DETAIL_HD int lane() const noexcept { return thread() % warp_size; }
  APGAS_DETAIL_HD int warp() const noexcept { return thread() / warp_size; }

  // Barriers, collectives and warp operations need the threads of a block to run together; a plain kernel's threads
  // do not (on a CPU place they are a loop). Say so at compile time, with the way out.
#define APGAS_DETAIL_NEEDS_CLOCKED(name)                                                                               \
  template <class... A>                                                                                                \
  int name(A&&...) const {                                                                                             \
    static_assert(detail::dependent_false<A...>,                                                                       \
                  "apgas: " #name "() needs the threads of a block to run together: take apgas::clocked_thread as "  \
                  "the body's first parameter (CUDA's __syncthreads() style), or write the kernel at block level "     \
                  "with apgas::thread_block (for_threads, sync, reduce, scan)");                                       \
    return 0;                                                                                                          \
  }
  APGAS_DETAIL_NEEDS_CLOCKED(advance)
  APGAS_DETAIL_NEEDS_CLOCKED(shfl)
  APGAS_DETAIL_NEEDS_CLOCKED(shfl_up)
  APGAS_DETAIL_NEEDS_CLOCKED(shfl_down)
  APGAS_DETAIL_NEEDS_CLOCKED(shfl_xor)
  APGAS_DETAIL_NEEDS_CLOCKED(ballot)
  APGAS_DETAIL_NEEDS_CLOCKED(reduce)
  APGAS_DETAIL_NEEDS_CLOCKED(inclusive_scan)
  APGAS_DETAIL_NEEDS_CLOCKED(exclusive_scan)
  APGAS_DETAIL_NEEDS_CLOCKED(broadcast)
  APGAS_DETAIL_NEEDS_CLOCKED(advance_count)
  APGAS_DETAIL_NEEDS_CLOCKED(advance_and)
  APGAS_DETAIL_NEEDS_CLOCKED(advance_or)
  APGAS_DETAIL_NEEDS_CLOCKED(all)
  APGAS_DETAIL_NEEDS_CLOCKED(any)
#undef APGAS_DETAIL_NEEDS_CLOCKED

 private:
  dim3 tid_, bid_, bdim_, gdim_;
};
using thread = thread_handle;

/// The thread handle of a clocked kernel: adds advance(), the block-wide barrier (X10 `next` on the block's clock;
/// CUDA's __syncthreads()), the block collectives and the warp operations. Every thread of a block must take part
/// in each collective, as on a GPU; on a CPU place a thread that has ended no longer takes part in anything.
class clocked_thread : public thread_handle {
 public:
  APGAS_DETAIL_HD clocked_thread(dim3 thread_idx, dim3 block_idx, dim3 block_dim, dim3 grid_dim, void* cpu) noexcept
      : thread_handle(thread_idx, block_idx, block_dim, grid_dim), cpu_(cpu) {}
  APGAS_DETAIL_HD clocked_thread(int block, int thread, int blocks, int threads, void* cpu) noexcept
      : thread_handle(block, thread, blocks, threads), cpu_(cpu) {}

  /// Wait until every thread of the block has arrived: __syncthreads() on a GPU; on a CPU place a switch to the next
  /// thread of the block.
  APGAS_DETAIL_HD void advance() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#else
    (void)detail::cpu_barrier(cpu_, 0);
#endif
  }
  /// advance(), and how many threads of the block passed a true `pred` (__syncthreads_count).
  APGAS_DETAIL_HD int advance_count(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_count(pred);
#else
    return reduce(pred ? 1 : 0, plus{});
#endif
  }
  /// advance(), and whether every thread's / any thread's `pred` was true (__syncthreads_and / __syncthreads_or).
  APGAS_DETAIL_HD bool advance_and(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_and(pred) != 0;
#else
    return reduce(pred ? 1 : 0, minimum{}) != 0;
#endif
  }
  APGAS_DETAIL_HD bool advance_or(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_or(pred) != 0;
#else
    return reduce(pred ? 1 : 0, maximum{}) != 0;
#endif
  }

  /// The block's values combined with op (associative), every thread gets the result. The combination order is a
  /// fixed tree (detail::tree_reduce), the same on a GPU and on CPU places: results are bit-identical.
  template <class T, class Op>
  APGAS_DETAIL_HD T reduce(const T& v, const Op& op) const {
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    return detail::gpu_block_reduce(v, op);
#else
    std::memcpy(detail::cpu_block_slot(cpu_, sizeof(T)), &v, sizeof(T));
    T r;
    std::memcpy(&r, detail::cpu_barrier(cpu_, 0, &detail::combine_reduce<T, Op>, &op), sizeof(T));
    return r;
#endif
  }
  /// Inclusive prefix combination over the block's threads in thread order (Hillis-Steele per warp, as a GPU does).
  template <class T, class Op>
  APGAS_DETAIL_HD T inclusive_scan(const T& v, const Op& op) const {
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    T before;
    bool has;
    return detail::gpu_block_scan(v, op, &before, &has);
#else
    return cpu_scan(v, op, false, v);
#endif
  }
  /// Exclusive prefix: init for thread 0, op(init, inclusive value of thread t - 1) for thread t.
  template <class T, class Op>
  APGAS_DETAIL_HD T exclusive_scan(const T& v, const T& init, const Op& op) const {
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    T before;
    bool has;
    (void)detail::gpu_block_scan(v, op, &before, &has);
    return has ? op(init, before) : init;
#else
    return cpu_scan(v, op, true, init);
#endif
  }
  /// The value of thread `src` of the block, on every thread.
  template <class T>
  APGAS_DETAIL_HD T broadcast(const T& v, int src) const {
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    return detail::gpu_block_broadcast(v, src);
#else
    std::memcpy(detail::cpu_block_slot(cpu_, sizeof(T)), &v, sizeof(T));
    (void)detail::cpu_barrier(cpu_, 0);
    T r;
    const void* s = detail::cpu_block_slot_of(cpu_, src);
    std::memcpy(&r, s != nullptr ? s : &v, sizeof(T));
    return r;
#endif
  }

  // ---- warp operations (every existing lane of the warp takes part; CUDA's *_sync forms with a full mask) ----
  /// The value of lane `src` (mod 32) of the warp. On a CPU place a lane that does not exist (past the block's last
  /// thread) gives the caller's own value, which the checking mode reports: on a GPU it is undefined.
  template <class T>
  APGAS_DETAIL_HD T shfl(const T& v, int src) const {
#if defined(__CUDA_ARCH__)
    const unsigned m = detail::gpu_warp_mask();
    return detail::gpu_shuffle(v, [&](unsigned w) { return __shfl_sync(m, w, src); });
#else
    return cpu_shuffle(v, ((src % warp_size) + warp_size) % warp_size);
#endif
  }
  /// The value of lane lane() + delta; the caller's own value where that lane is past the warp.
  template <class T>
  APGAS_DETAIL_HD T shfl_down(const T& v, int delta) const {
#if defined(__CUDA_ARCH__)
    const unsigned m = detail::gpu_warp_mask();
    return detail::gpu_shuffle(v, [&](unsigned w) { return __shfl_down_sync(m, w, delta); });
#else
    return cpu_shuffle(v, lane() + delta);
#endif
  }
  /// The value of lane lane() - delta; the caller's own value where that lane is before lane 0.
  template <class T>
  APGAS_DETAIL_HD T shfl_up(const T& v, int delta) const {
#if defined(__CUDA_ARCH__)
    const unsigned m = detail::gpu_warp_mask();
    return detail::gpu_shuffle(v, [&](unsigned w) { return __shfl_up_sync(m, w, delta); });
#else
    return cpu_shuffle(v, lane() - delta);
#endif
  }
  /// The value of lane lane() ^ mask.
  template <class T>
  APGAS_DETAIL_HD T shfl_xor(const T& v, int mask) const {
#if defined(__CUDA_ARCH__)
    const unsigned m = detail::gpu_warp_mask();
    return detail::gpu_shuffle(v, [&](unsigned w) { return __shfl_xor_sync(m, w, mask); });
#else
    return cpu_shuffle(v, lane() ^ mask);
#endif
  }
  /// Bit i set when lane i's pred is true (__ballot_sync).
  APGAS_DETAIL_HD unsigned ballot(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __ballot_sync(detail::gpu_warp_mask(), pred);
#else
    *static_cast<bool*>(detail::cpu_warp_slot(cpu_, sizeof(bool))) = pred;
    (void)detail::cpu_barrier(cpu_, 1);
    unsigned bits = 0;
    for (int l = 0; l < warp_size; ++l) {
      const void* s = detail::cpu_warp_slot_of(cpu_, l);
      if (s != nullptr && *static_cast<const bool*>(s)) bits |= 1u << l;
    }
    return bits;
#endif
  }
  /// Whether pred is true on every / on any existing lane of the warp.
  APGAS_DETAIL_HD bool all(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __all_sync(detail::gpu_warp_mask(), pred) != 0;
#else
    return ballot(!pred) == 0;
#endif
  }
  APGAS_DETAIL_HD bool any(bool pred) const {
#if defined(__CUDA_ARCH__)
    return __any_sync(detail::gpu_warp_mask(), pred) != 0;
#else
    return ballot(pred) != 0;
#endif
  }

 private:
#if !defined(__CUDA_ARCH__)
  template <class T>
  T cpu_shuffle(const T& v, int src) const {
    detail::check_collective_type<T>();
    std::memcpy(detail::cpu_warp_slot(cpu_, sizeof(T)), &v, sizeof(T));
    (void)detail::cpu_barrier(cpu_, 1);
    T r = v;
    if (src >= 0 && src < warp_size) {
      const void* s = detail::cpu_warp_slot_of(cpu_, src, true);
      if (s != nullptr) std::memcpy(&r, s, sizeof(T));
    }
    return r;
  }
  template <class T, class Op>
  T cpu_scan(const T& v, const Op& op, bool exclusive, const T& init) const {
    std::memcpy(detail::cpu_block_slot(cpu_, sizeof(T)), &v, sizeof(T));
    const detail::scan_args<Op> args{&op, exclusive};
    const void* first = detail::cpu_barrier(cpu_, 0, &detail::combine_scan<T, Op>, &args);
    T r;  // the combine wrote this thread's inclusive value, or its predecessor's, into its own slot (none only in a
          // cancelled block, for a thread that reached the scan from a destructor while an exception unwinds)
    const void* mine = detail::cpu_block_slot_of(cpu_, thread());
    std::memcpy(&r, mine != nullptr ? mine : &v, sizeof(T));
    if (!exclusive) return r;
    int f;
    std::memcpy(&f, first, sizeof(int));
    return thread() == f ? init : op(init, r);
  }
#endif
  void* cpu_;
};

// ---- block-level bodies ---------------------------------------------------------------------------------------

/// The index of one thread inside a block-level body's for_threads: CUDA's threadIdx (x, y, z) and the linear index
/// (x fastest).
struct thread_index {
  int x, y, z;
  int linear;
};

namespace detail {
/// Per-thread storage of a block-level body: on a CPU place an array with one element per thread of the block.
/// Checked (APGAS_KERNEL_CHECKS): the checking mode reports an index that is not the calling thread's own (a GPU
/// gives the caller's own value whatever the index names).
template <class T, bool Checked = APGAS_KERNEL_CHECKS != 0>
class per_thread_cpu {
 public:
  per_thread_cpu(T* p, void* block) noexcept : p_(p), block_(block) {}
  T& operator[](thread_index t) const noexcept {
    if constexpr (Checked) {
      if (cpu_block_checking(block_)) cpu_per_thread_index(block_, t.linear);
    }
    return p_[t.linear];
  }
  T* data() const noexcept { return p_; }

 private:
  T* p_;
  void* block_;
};
// thread_block::per_thread returns one or the other by APGAS_KERNEL_CHECKS, which may differ between translation
// units: the same layout keeps them interchangeable.
static_assert(sizeof(per_thread_cpu<float, true>) == sizeof(per_thread_cpu<float, false>));
/// On a GPU: the thread's own value (registers); the index is the calling thread's own.
template <class T>
class per_thread_gpu {
 public:
  APGAS_DETAIL_HD explicit per_thread_gpu(const T& v) : v_(v) {}
  APGAS_DETAIL_HD T& operator[](thread_index) noexcept { return v_; }
  APGAS_DETAIL_HD const T& operator[](thread_index) const noexcept { return v_; }

 private:
  T v_;
};
}  // namespace detail

/// A block's read-only view of a window of a 2-D array, as thread_block::stage makes it: element (x, y) of the
/// array (x along a row) relative to the window's origin. Checked (APGAS_KERNEL_CHECKS, as shared_span): in the
/// checking mode, where stage copies the window into a watched shared array, the tile's reads are watched too (a
/// read before the sync() that follows the staging, or while the array is staged again, is a race; a read outside
/// the window is out of range).
template <class T, bool Checked = APGAS_KERNEL_CHECKS != 0>
class tile {
 public:
  APGAS_DETAIL_HD tile(const T* base, long offset, long stride) noexcept
      : base_(base), offset_(offset), stride_(stride) {}
  /// The checking mode's tile of a copy in a watched shared array: base is element `off` of it, n elements on.
  APGAS_DETAIL_HD tile(const T* base, long offset, long stride, detail::shared_check* c, std::size_t off,
                       std::size_t n) noexcept
      : base_(base), offset_(offset), stride_(stride) {
    if constexpr (Checked) w_ = {c, off, n};
  }
  APGAS_DETAIL_HD const T& operator()(int x, int y) const noexcept {
#if !defined(__CUDA_ARCH__)
    if constexpr (Checked) {
      if (w_.check != nullptr) {
        const long i = offset_ + static_cast<long>(y) * stride_ + x;  // (negative: out of range, reported)
        if (!detail::cpu_shared_access_in(w_.check, w_.off, static_cast<std::size_t>(i), w_.n)) {
          return base_[-static_cast<long>(w_.off)];  // reported; element 0 of the whole array, nothing outside
        }
      }
    }
#endif
    return base_[offset_ + y * stride_ + x];
  }

 private:
  struct watch {
    detail::shared_check* check = nullptr;
    std::size_t off = 0, n = 0;
  };
  struct none {};
  const T* base_;
  long offset_, stride_;  // element (0, 0) at base_[offset_], rows stride_ apart
  [[no_unique_address]] std::conditional_t<Checked, watch, none> w_{};
};

/// The handle of a block-level body (Kokkos' team member; CUDA's cooperative-groups thread_block). The body runs once
/// per block and gives work to the block's threads with for_threads; what is computed outside for_threads is the
/// block's (on a GPU every thread computes it, so it must not depend on the thread). On a CPU place for_threads is
/// a loop over the threads (x fastest) and sync() has nothing to wait for.
/// @code
///   [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<float> tile) {
///     auto acc = b.per_thread<float>(0.0f);             // one float per thread, survives sync()
///     b.for_threads([&](apgas::thread_index t) { tile[t.linear] = in[b.block() * b.threads() + t.linear]; });
///     b.sync();                                         // __syncthreads()
///     b.for_threads([&](apgas::thread_index t) { acc[t] += tile[b.threads() - 1 - t.linear]; });
///   }
/// @endcode
class thread_block {
 public:
  APGAS_DETAIL_HD thread_block(dim3 block_idx, dim3 block_dim, dim3 grid_dim, void* cpu) noexcept
      : bid_(block_idx), bdim_(block_dim), gdim_(grid_dim), cpu_(cpu) {}
  APGAS_DETAIL_HD dim3 block_idx() const noexcept { return bid_; }
  APGAS_DETAIL_HD dim3 block_dim() const noexcept { return bdim_; }
  APGAS_DETAIL_HD dim3 grid_dim() const noexcept { return gdim_; }
  APGAS_DETAIL_HD int threads() const noexcept { return bdim_.x * bdim_.y * bdim_.z; }
  APGAS_DETAIL_HD long block() const noexcept {
    return (static_cast<long>(bid_.z) * gdim_.y + bid_.y) * gdim_.x + bid_.x;
  }
  APGAS_DETAIL_HD long blocks() const noexcept { return gdim_.count(); }

  /// f(thread_index) for every thread of the block: on a GPU each thread calls it once with its own index; on a CPU
  /// place a loop (x innermost) that the compiler may vectorise — the threads of a block are independent between
  /// two sync() on a GPU, so the loop's iterations are too.
  template <class F>
  APGAS_DETAIL_HD void for_threads(F&& f) const {
#if defined(__CUDA_ARCH__)
    f(thread_index{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y), static_cast<int>(threadIdx.z),
                   detail::gpu_linear_thread()});
#else
    cpu_for_box(dim3{0, 0, 0}, bdim_, f, "for_threads");
#endif
  }
  /// f(thread_index) for the threads whose index lies in the box [lo, hi) (per dimension, clipped to the block): on
  /// a GPU those threads call it (each with its own index, as in for_threads, so a thread may rewrite what it wrote
  /// in an earlier for_threads without a sync()); on a CPU place a loop over that box only. For work that a few
  /// threads do, CUDA's `if (threadIdx.x < 4) ...`: for_threads with that test would visit every thread on a CPU.
  template <class F>
  APGAS_DETAIL_HD void for_threads_in(dim3 lo, dim3 hi, F&& f) const {
#if defined(__CUDA_ARCH__)
    const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y), z = static_cast<int>(threadIdx.z);
    if (x >= lo.x && x < hi.x && y >= lo.y && y < hi.y && z >= lo.z && z < hi.z) {
      f(thread_index{x, y, z, detail::gpu_linear_thread()});
    }
#else
    cpu_for_box(clipped(lo), clipped(hi), f, "for_threads_in");
#endif
  }
  /// f(t, h) for the threads t of the box [lo, hi) (as for_threads_in) and h = 0, ..., n - 1: the n points of a
  /// thread coarsened along x, the CUDA pattern `for (h = 0; h < n; ++h) { x = threadIdx.x + h * blockDim.x; ... }`
  /// (Parboil's stencil: two points a block's width apart, so that a warp's loads stay coalesced). On a GPU each
  /// thread of the box calls f(t, 0), ..., f(t, n - 1) in that order; on a CPU place the loop takes, row of threads by
  /// row, h outside and x inside, so that the points of a row are visited in memory order: a loop with h inside cuts
  /// each row into n interleaved runs, which the hardware prefetcher follows badly (Parboil's stencil on a Zen 4
  /// core: 1.6x the time). Each thread's points stay in order; between threads there is no order, as in for_threads.
  template <class F>
  APGAS_DETAIL_HD void for_threads_coarse_x(int n, dim3 lo, dim3 hi, F&& f) const {
#if defined(__CUDA_ARCH__)
    for_threads_in(lo, hi, [&](thread_index t) {
      for (int h = 0; h < n; ++h) f(t, h);
    });
#else
    const dim3 l = clipped(lo), u = clipped(hi);
    if (detail::cpu_block_checking(cpu_)) {  // thread by thread, each with its points (the checker tells threads apart)
      auto each = [&](thread_index t) {
        for (int h = 0; h < n; ++h) f(t, h);
      };
      cpu_for_box(l, u, each, "for_threads_coarse_x");
      return;
    }
    for (int z = l.z; z < u.z; ++z) {
      for (int y = l.y; y < u.y; ++y) {
        for (int h = 0; h < n; ++h) {
          auto g = [&](thread_index t) { f(t, h); };
          cpu_for_row(l.x, u.x, y, z, g);
        }
      }
    }
#endif
  }
  /// f(i) for every i in [0, n), the i shared out over the block's threads: CUDA's block-stride loop
  /// `for (int i = threadIdx.x; i < n; i += blockDim.x)` (threads in linear order). On a GPU each thread takes
  /// i = t.linear, t.linear + threads(), ...; on a CPU place a loop over i, taken a block's width at a time (the
  /// iterations of one such run belong to different threads, so they are independent and vectorise; a thread's own
  /// iterations stay in order). I: int, long or another integer type at least as wide as int (the index's type).
  /// Called by the whole block, outside for_threads (inside one a GPU thread would run only its share).
  template <class I, class F>
  APGAS_DETAIL_HD void for_range(I n, F&& f) const {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool> && sizeof(I) >= sizeof(int),
                  "apgas::thread_block::for_range: n must be an integer of at least int's width");
#if defined(__CUDA_ARCH__)
    // In I, as CUDA's loop (a 64-bit counter cost pack_rows in Parboil's sad 14 registers), stopping before an i +
    // step that would pass n, or overflow I.
    const I step = static_cast<I>(threads());
    for (I i = static_cast<I>(detail::gpu_linear_thread()); i < n; i += step) {
      f(i);
      if (n - i <= step) break;
    }
#else
    using wide = std::conditional_t<std::is_signed_v<I>, long long, unsigned long long>;  // no overflow in i += width
    const wide width = static_cast<wide>(threads()), end = static_cast<wide>(n);
    if (detail::cpu_block_checking(cpu_)) {  // each i as the thread that takes it on a GPU
      if (n <= 0) return;
      try {
        for (wide i = 0; i < end; ++i) {
          detail::cpu_block_loop_thread(cpu_, static_cast<int>(i % width), i == 0 ? "for_range" : nullptr);
          f(static_cast<I>(i));
        }
      } catch (...) {
        detail::cpu_block_leave(cpu_);
        throw;
      }
      detail::cpu_block_leave(cpu_);
      return;
    }
    for (wide i0 = 0; i0 < end; i0 += width) {
      const I stop = static_cast<I>(end - i0 < width ? end : i0 + width);
      APGAS_DETAIL_INDEPENDENT
      for (I i = static_cast<I>(i0); i < stop; ++i) f(i);
    }
#endif
  }
  /// A hint: the block reads [p, p + n) soon. On a CPU place each cache line of it is prefetched: a block that walks
  /// a volume plane by plane reads short runs of each plane, which the processor's prefetcher does not foresee, so
  /// fetching the next plane's runs while computing this one hides the memory's latency (the X10 paper's 3-D finite
  /// difference on one worker: 2.5 s to 1.3 s). Nothing on a GPU, where the other resident blocks hide it.
  template <class T>
  APGAS_DETAIL_HD void prefetch(const T* p, std::size_t n) const noexcept {
#if defined(__CUDA_ARCH__)
    (void)p, (void)n;
#else
    const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
    const auto end = reinterpret_cast<std::uintptr_t>(p + n);
    for (auto a = first; a < end; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
#endif
  }
  /// The window [lo.x, hi.x) x [lo.y, hi.y) of a 2-D array whose element (0, 0) is at `origin` (rows `row_stride`
  /// elements apart), as a tile the block reads after its next sync(): a CUDA kernel's shared-memory tile, without
  /// the copy on a CPU place. On a GPU the block's threads copy the window into `into` (which must hold its
  /// (hi.x - lo.x) * (hi.y - lo.y) elements) and the tile reads it there; on a CPU place nothing is copied and the
  /// tile reads the array itself, the processor's caches being the staging (a copy there costs a load and a store
  /// per element: 1.2x on Parboil's stencil), except in the checking mode, which copies as a GPU does and reports a
  /// window larger than `into`. Without the checking mode a CPU place prefetches the window's rows (as prefetch()
  /// does), so a kernel that stages a window ahead of its use has it in cache by then (Parboil's stencil, which
  /// stages two planes ahead, on an Intel core: 0.85-0.91x the time without the prefetch, measured while it still read
  /// its rows as interleaved half runs; on a Zen 4 core, rows read whole, it gains nothing there). Every element of the window must lie in the
  /// array and keep its value until the block has read it; read the tile inside the window only. Called by the whole
  /// block, outside for_threads.
  template <class T, std::size_t E, bool C>
  APGAS_DETAIL_HD tile<T> stage(detail::basic_shared_span<T, E, C> into, const T* origin, long row_stride, dim3 lo,
                                dim3 hi) const {
    const int width = hi.x - lo.x, height = hi.y - lo.y, n = width > 0 && height > 0 ? width * height : 0;
    const long offset = -(static_cast<long>(lo.y) * width + lo.x);  // of element (0, 0) in the copy
    auto element = [&](int i) -> const T& {  // element i of the window, rows of `width`
      const int y = i / width;
      return origin[static_cast<long>(lo.y + y) * row_stride + lo.x + (i - y * width)];
    };
#if defined(__CUDA_ARCH__)
    T* s = into.data();
    for (int i = detail::gpu_linear_thread(); i < n; i += threads()) s[i] = element(i);
    return tile<T>(s, offset, width);
#else
    if (!detail::cpu_block_checking(cpu_) || (!C && static_cast<std::size_t>(n) > into.size())) {
      for (int y = lo.y; n > 0 && y < hi.y; ++y) prefetch(origin + static_cast<long>(y) * row_stride + lo.x, width);
      return tile<T>(origin, 0, row_stride);  // (an unwatched `into` too small for the copy: nothing to report it)
    }
    // The checking mode stages as a GPU does, each element by the thread that would copy it on a GPU, through the
    // watched array (a window larger than `into` is reported there), and the tile reads the copy: a kernel that
    // reads outside its window, or reuses a staging array before a sync(), reads here what it would on a GPU.
    {
      const detail::cpu_thread_scope scope(cpu_, "stage");
      for (int i = 0; i < n; ++i) {
        detail::cpu_block_set_thread(cpu_, i % threads());
        into[static_cast<std::size_t>(i)] = element(i);
      }
    }
    return tile<T>(into.data(), offset, width, into.checker(), into.whole_offset(), into.size());
#endif
  }
  /// stage into a shared array received as a std::span (unwatched by the checking mode).
  template <class T, std::size_t E>
  APGAS_DETAIL_HD tile<T> stage(std::span<T, E> into, const T* origin, long row_stride, dim3 lo, dim3 hi) const {
    return stage(detail::basic_shared_span<T, std::dynamic_extent, false>(into.data(), into.size()), origin,
                 row_stride, lo, hi);
  }
  /// The block barrier (__syncthreads()): what threads wrote before it is visible to all after it.
  APGAS_DETAIL_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#else
    if (detail::cpu_block_checking(cpu_)) detail::cpu_block_sync(cpu_);
#endif
  }
  /// Per-thread storage that survives sync(): indexed by the thread_index of for_threads. One value per thread, each
  /// initialised to `init`.
  template <class T>
  APGAS_DETAIL_HD auto per_thread(const T& init = T{}) const {
#if defined(__CUDA_ARCH__)
    return detail::per_thread_gpu<T>(init);
#else
    static_assert(std::is_trivially_copyable_v<T>, "apgas::thread_block::per_thread: T must be trivially copyable");
    T* p = static_cast<T*>(detail::cpu_block_alloc(cpu_, sizeof(T) * static_cast<std::size_t>(threads()), alignof(T)));
    for (int i = 0; i < threads(); ++i) p[i] = init;
    return detail::per_thread_cpu<T>(p, cpu_);
#endif
  }
  /// N values per thread that survive sync(), indexed [k][t] (k < N): N registers of each thread on a GPU (CUDA's
  /// `float v1, ..., vN;` or `float v[N]` unrolled), N arrays of the block's threads on a CPU place, so that the k-th
  /// values of neighbouring threads are adjacent and a for_threads loop vectorises over threads without shuffles
  /// (per_thread<T[N]>-like structs put a thread's N values together instead: 4 threads' values then need a
  /// transpose per vector, measured 1.2x slower on Parboil's cp; but a loop over k at run time inside the thread
  /// loop, a[k][t], goes through N pointers: 3x slower on sgemm than per_thread<std::array>). Each value initialised
  /// to `init`.
  template <class T, std::size_t N>
  APGAS_DETAIL_HD auto per_thread_array(const T& init = T{}) const {
    return [&]<std::size_t... k>(std::index_sequence<k...>) { return std::array{((void)k, per_thread<T>(init))...}; }(
        std::make_index_sequence<N>());
  }
  /// f() computed once for the block, its result (if any) on every thread (on a GPU thread 0 computes it and shares
  /// it; a barrier either way).
  template <class F>
  APGAS_DETAIL_HD auto single(F&& f) const {
#if defined(__CUDA_ARCH__)
    using T = decltype(f());
    if constexpr (std::is_void_v<T>) {
      if (detail::gpu_linear_thread() == 0) f();
      __syncthreads();
    } else {
      T v{};
      if (detail::gpu_linear_thread() == 0) v = f();
      return detail::gpu_block_broadcast(v, 0);
    }
#else
    if (!detail::cpu_block_checking(cpu_)) return f();
    // Checking mode: f runs as thread 0, and a barrier follows, as on a GPU.
    struct as_thread_0 {
      void* b;
      explicit as_thread_0(void* block) : b(block) {
        detail::cpu_block_enter(b, "single");
        detail::cpu_block_set_thread(b, 0);
      }
      ~as_thread_0() {
        detail::cpu_block_leave(b);
        detail::cpu_block_epoch(b);
      }
      as_thread_0(const as_thread_0&) = delete;
      as_thread_0& operator=(const as_thread_0&) = delete;
    } scope(cpu_);
    return f();
#endif
  }
  /// op over f(t) of every thread, in the tree order of clocked_thread::reduce (bit-identical on GPU and CPU).
  template <class F, class Op>
  APGAS_DETAIL_HD auto reduce(F&& f, const Op& op) const {
    using T = std::decay_t<decltype(f(thread_index{}))>;
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    return detail::gpu_block_reduce(f(thread_index{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y),
                                                    static_cast<int>(threadIdx.z), detail::gpu_linear_thread()}),
                                    op);
#else
    const int n = threads();
    const detail::cpu_arena_mark mark = detail::cpu_block_mark(cpu_);  // the values' space, given back after
    T* v = static_cast<T*>(detail::cpu_block_alloc(cpu_, sizeof(T) * static_cast<std::size_t>(n), alignof(T)));
    auto fill = [&](thread_index t) { v[t.linear] = f(t); };
    cpu_for_box(dim3{0, 0, 0}, bdim_, fill, "reduce");
    const T r = detail::tree_reduce_all(v, n, op);
    detail::cpu_block_release(cpu_, mark);
    collective_barrier();
    return r;
#endif
  }
  /// How many threads' f(t) are true / whether all / any are (__syncthreads_count / _and / _or; a barrier on a GPU).
  template <class F>
  APGAS_DETAIL_HD int count(F&& f) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_count(f(gpu_index()));
#else
    return cpu_count(f, "count");
#endif
  }
  template <class F>
  APGAS_DETAIL_HD bool all(F&& f) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_and(f(gpu_index())) != 0;
#else
    return cpu_count(f, "all") == threads();
#endif
  }
  template <class F>
  APGAS_DETAIL_HD bool any(F&& f) const {
#if defined(__CUDA_ARCH__)
    return __syncthreads_or(f(gpu_index())) != 0;
#else
    return cpu_count(f, "any") != 0;
#endif
  }
  /// Inclusive / exclusive scan of f(t) over the threads in linear order (the order of clocked_thread's scans):
  /// per-thread results.
  template <class F, class Op>
  APGAS_DETAIL_HD auto inclusive_scan(F&& f, const Op& op) const {
    using T = std::decay_t<decltype(f(thread_index{}))>;
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    T before;
    bool has;
    return detail::per_thread_gpu<T>(detail::gpu_block_scan(f(gpu_index()), op, &before, &has));
#else
    T* v = scan_values(f, "inclusive_scan");
    detail::tree_scan(v, threads(), op);
    collective_barrier();
    return detail::per_thread_cpu<T>(v, cpu_);
#endif
  }
  template <class F, class T, class Op>
  APGAS_DETAIL_HD auto exclusive_scan(F&& f, const T& init, const Op& op) const {
    detail::check_collective_type<T>();
#if defined(__CUDA_ARCH__)
    T before;
    bool has;
    (void)detail::gpu_block_scan(static_cast<T>(f(gpu_index())), op, &before, &has);
    return detail::per_thread_gpu<T>(has ? op(init, before) : init);
#else
    T* v = scan_values<T>(f, "exclusive_scan");
    detail::tree_scan(v, threads(), op);
    for (int i = threads() - 1; i > 0; --i) v[i] = op(init, v[i - 1]);
    v[0] = init;
    collective_barrier();
    return detail::per_thread_cpu<T>(v, cpu_);
#endif
  }

 private:
#if defined(__CUDA_ARCH__)
  __device__ static thread_index gpu_index() {
    return thread_index{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y), static_cast<int>(threadIdx.z),
                        detail::gpu_linear_thread()};
  }
#else
  // The threads of the box [lo, hi) (inside the block), x fastest. In runs of 16 threads along x (8 where the box's
  // width is no multiple of 16): a loop of a constant trip count is one that GCC's -O2 (its "very cheap" cost model)
  // vectorises; over a run-time width it would not (measured: 4x on a tiled SGEMM; runs of 16 beat runs of 8 by 1.3x
  // there, more work per vector loop).
  // `what` is the construct whose per-thread function f is (for_threads, for_threads_in, a collective).
  //
  // The checking mode's loop: one thread at a time, their accesses told apart; `what` inside another construct's
  // per-thread function is reported as its first iteration starts, and the state before the loop (whose accesses
  // follow, whose function runs) is restored after it, also when an exception leaves it. Written so that the other
  // loop, the one without the checking mode, keeps its registers: inline, with f inlined (out of line, f's address
  // taken, the captures it reaches went to memory), one call per iteration and none before the loop. A call before
  // it, or the branch marked unlikely, made GCC allocate the other loop's registers worse (callgrind, one worker:
  // the block-level stencil of apgas_bench_kernels 43 % more instructions, spilling its row pointers; SGEMM 12 %).
  template <class F>
  void cpu_for_box(dim3 lo, dim3 hi, F& f, const char* what) const {
    if (detail::cpu_block_checking(cpu_)) {
      try {
        for (int z = lo.z; z < hi.z; ++z) {
          for (int y = lo.y; y < hi.y; ++y) {
            for (int x = lo.x; x < hi.x; ++x) {
              const int linear = (z * bdim_.y + y) * bdim_.x + x;
              detail::cpu_block_loop_thread(cpu_, linear, x == lo.x && y == lo.y && z == lo.z ? what : nullptr);
              f(thread_index{x, y, z, linear});
            }
          }
        }
      } catch (...) {
        detail::cpu_block_leave(cpu_);  // (f threw: the first iteration entered)
        throw;
      }
      if (lo.x < hi.x && lo.y < hi.y && lo.z < hi.z) detail::cpu_block_leave(cpu_);
      return;
    }
    for (int z = lo.z; z < hi.z; ++z) {
      for (int y = lo.y; y < hi.y; ++y) cpu_for_row(lo.x, hi.x, y, z, f);
    }
  }
  // A corner of a box of threads clipped to the block (for_threads_in, for_threads_coarse_x).
  dim3 clipped(dim3 c) const noexcept {
    const auto clip = [](int v, int n) { return v < 0 ? 0 : (v > n ? n : v); };
    return dim3{clip(c.x, bdim_.x), clip(c.y, bdim_.y), clip(c.z, bdim_.z)};
  }
  // The threads [x0, x1) of row (y, z), without the checking mode: cpu_for_box's inner loop.
  template <class F>
  void cpu_for_row(int x0, int x1, int y, int z, F& f) const {
    const int row = (z * bdim_.y + y) * bdim_.x;
    int x = x0;
    if ((x1 - x0) % 16 == 0) {
      for (; x < x1; x += 16) {
        APGAS_DETAIL_INDEPENDENT
        for (int j = 0; j < 16; ++j) f(thread_index{x + j, y, z, row + x + j});
      }
      return;
    }
    for (; x + 8 <= x1; x += 8) {
      APGAS_DETAIL_INDEPENDENT
      for (int j = 0; j < 8; ++j) f(thread_index{x + j, y, z, row + x + j});
    }
    for (; x < x1; ++x) f(thread_index{x, y, z, row + x});
  }
  // A collective's barrier, for the checking mode (on a GPU reduce, count, all, any and the scans hold
  // __syncthreads()): accesses before it and after it are not a race. (A collective called from a per-thread
  // function was reported as it began: cpu_for_box.)
  void collective_barrier() const {
    if (detail::cpu_block_checking(cpu_)) detail::cpu_block_epoch(cpu_);
  }
  template <class F>
  int cpu_count(F& f, const char* what) const {
    int c = 0;
    auto add = [&](thread_index t) { c += f(t) ? 1 : 0; };
    cpu_for_box(dim3{0, 0, 0}, bdim_, add, what);
    collective_barrier();
    return c;
  }
  template <class T = void, class F>
  auto* scan_values(F& f, const char* what) const {
    using V = std::conditional_t<std::is_void_v<T>, std::decay_t<decltype(f(thread_index{}))>, T>;
    V* v = static_cast<V*>(detail::cpu_block_alloc(cpu_, sizeof(V) * static_cast<std::size_t>(threads()), alignof(V)));
    auto fill = [&](thread_index t) { v[t.linear] = static_cast<V>(f(t)); };
    cpu_for_box(dim3{0, 0, 0}, bdim_, fill, what);
    return v;
  }
#endif
  dim3 bid_, bdim_, gdim_;
  void* cpu_;
};

}  // namespace apgas

#if !defined(__CUDACC__)
// CUDA's built-in index variables do not exist outside nvcc: a kernel body ported with threadIdx.x left in it gets a
// compile-time error that names what to write instead (the deleted conversion below names it), rather than
// "'threadIdx' was not declared". (In files compiled by nvcc, threadIdx in a body's host code fails at link time:
// "undefined reference to __device_builtin_variable_threadIdx"; docs/porting.md has the same table.) __syncthreads()
// alike.
namespace apgas::detail {
struct cuda_builtin_index_in_a_kernel_body_use_t_thread_idx_block_idx_block_dim_grid_dim_instead {
  operator int() const = delete;
  operator unsigned() const = delete;
  operator long() const = delete;
  operator unsigned long() const = delete;
};
struct cuda_builtin_index {
  cuda_builtin_index_in_a_kernel_body_use_t_thread_idx_block_idx_block_dim_grid_dim_instead x, y, z;
};
}  // namespace apgas::detail
[[maybe_unused]] inline constexpr apgas::detail::cuda_builtin_index threadIdx{}, blockIdx{}, blockDim{}, gridDim{};
// The same for CUDA's block barrier: the deleted function's parameter names what to write.
namespace apgas::detail {
struct cuda_syncthreads_in_a_kernel_body_use_t_advance_in_a_clocked_body_or_b_sync_in_a_block_level_body {};
}  // namespace apgas::detail
#if !defined(__syncthreads)
void __syncthreads(
    apgas::detail::cuda_syncthreads_in_a_kernel_body_use_t_advance_in_a_clocked_body_or_b_sync_in_a_block_level_body =
        {}) = delete;
#endif
#endif
#pragma GCC visibility pop
