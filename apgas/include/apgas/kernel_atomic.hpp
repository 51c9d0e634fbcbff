#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file kernel_atomic.hpp
/// Atomic read-modify-write operations for kernel bodies, on global memory (remote_array elements, global_from
/// buffers) and on shared arrays alike: CUDA's atomic functions on a GPU, std::atomic_ref on CPU places. Each returns
/// the value the object held before (as CUDA's do). Relaxed ordering, as CUDA's atomics: use a barrier to order
/// other memory around them.
/// @code
///   apgas::atomic_add(histogram[bin], 1u);              // CUDA: atomicAdd(&histogram[bin], 1u)
///   apgas::atomic_add(shared_hist, bin, 1u);            // the same on a shared_span (no lock on a CPU place)
///   int old = apgas::atomic_max(best[i], candidate);    // CUDA: atomicMax (integer types only, as CUDA's)
/// @endcode
/// Types: add and sub take int, unsigned, long long, unsigned long long (and long, unsigned long where they are 8
/// bytes), float and double; min, max, and, or, xor take the integer types (CUDA has no floating-point
/// atomicMin/Max); exchange and compare_exchange take 4- and 8-byte types. A type outside these is a compile-time
/// error naming the operation.

#include <apgas/kernel_thread.hpp>

#include <atomic>
#include <type_traits>

namespace apgas {
namespace detail {

template <class T>
inline constexpr bool atomic_integer_v =
    std::is_same_v<T, int> || std::is_same_v<T, unsigned> || std::is_same_v<T, long long> ||
    std::is_same_v<T, unsigned long long> || (std::is_same_v<T, long> && sizeof(long) == 8) ||
    (std::is_same_v<T, unsigned long> && sizeof(unsigned long) == 8);
template <class T>
inline constexpr bool atomic_arith_v = atomic_integer_v<T> || std::is_same_v<T, float> || std::is_same_v<T, double>;

#if defined(__CUDA_ARCH__)
// CUDA's atomics are declared for int, unsigned, unsigned long long (and long long for some); long and unsigned
// long are the 64-bit types on the LP64 hosts nvcc supports, so they go through unsigned long long / long long.
template <class T>
__device__ auto* cuda_ptr(T& x) {
  if constexpr (std::is_same_v<T, long>) {
    return reinterpret_cast<long long*>(&x);
  } else if constexpr (std::is_same_v<T, unsigned long>) {
    return reinterpret_cast<unsigned long long*>(&x);
  } else {
    return &x;
  }
}
template <class T, class U>
__device__ T from_cuda(U v) {
  return static_cast<T>(v);
}
#endif

/// The checking mode's note that x was accessed atomically (no race), where shared accesses are watched.
template <class T>
inline void note_atomic(const T& x) noexcept {
#if APGAS_KERNEL_CHECKS && !defined(__CUDA_ARCH__)
  cpu_atomic_note(&x);
#else
  (void)x;
#endif
}

}  // namespace detail

/// x += v atomically; the old value.
template <class T>
APGAS_DETAIL_HD T atomic_add(T& x, T v) {
  static_assert(detail::atomic_arith_v<T>, "apgas::atomic_add: T must be int, unsigned, long long, unsigned long long, "
                                           "long or unsigned long (of 8 bytes), float or double");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicAdd(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).fetch_add(v, std::memory_order_relaxed);
#endif
}

/// s[i] += v atomically, on an element of a shared array (a shared_span parameter); the old value. On a GPU the same
/// as atomic_add(s[i], v); on a CPU place no locked instruction: a block's shared memory is only touched by the OS
/// thread that runs the block (its threads are loop iterations or fibers that switch at barriers only), and a locked
/// instruction costs about 20 cycles (tpacf's shared-memory histograms: 1.4x the OpenMP version with it).
///
/// Invariant: on a CPU place the load and the store are each atomic (relaxed: plain moves on x86-64 and AArch64),
/// never plain accesses. Inside for_threads the threads of a block are a loop compiled as independent iterations
/// (`#pragma GCC ivdep`), which the compiler may vectorise: a plain `x = x + v` became a gather and a scatter under
/// AVX-512, and lanes of one vector that hit one element lost all their updates but one (a histogram's counts
/// halved). Compilers do not vectorise atomic accesses, so each thread's update stays whole.
template <class T, std::size_t E, bool C>
APGAS_DETAIL_HD T atomic_add(const detail::basic_shared_span<T, E, C>& s, std::size_t i, T v) {
  static_assert(detail::atomic_arith_v<T>, "apgas::atomic_add: T must be int, unsigned, long long, unsigned long long, "
                                           "long or unsigned long (of 8 bytes), float or double");
#if defined(__CUDA_ARCH__)
  return atomic_add(s[i], v);
#else
  T& x = s[i];
  detail::note_atomic(x);
  const std::atomic_ref<T> a(x);
  const T old = a.load(std::memory_order_relaxed);
  a.store(static_cast<T>(old + v), std::memory_order_relaxed);
  return old;
#endif
}

/// x -= v atomically; the old value.
template <class T>
APGAS_DETAIL_HD T atomic_sub(T& x, T v) {
  static_assert(detail::atomic_arith_v<T>, "apgas::atomic_sub: T must be int, unsigned, long long, unsigned long long, "
                                           "long or unsigned long (of 8 bytes), float or double");
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, unsigned>) {
    return atomicSub(&x, v);
  } else {
    return atomic_add(x, static_cast<T>(-v));  // two's complement wraps for the unsigned types, as atomicSub does
  }
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).fetch_sub(v, std::memory_order_relaxed);
#endif
}

namespace detail {
template <class T, class Better>
T cpu_fetch_update(T& x, T v, Better better) {
  std::atomic_ref<T> a(x);
  T old = a.load(std::memory_order_relaxed);
  while (better(v, old) && !a.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
  }
  return old;
}
}  // namespace detail

/// x = min(x, v) atomically (integer types); the old value.
template <class T>
APGAS_DETAIL_HD T atomic_min(T& x, T v) {
  static_assert(detail::atomic_integer_v<T>, "apgas::atomic_min: T must be an integer type of 4 or 8 bytes (CUDA has "
                                             "no floating-point atomicMin)");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicMin(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return detail::cpu_fetch_update(x, v, [](T a, T b) { return a < b; });
#endif
}

/// x = max(x, v) atomically (integer types); the old value.
template <class T>
APGAS_DETAIL_HD T atomic_max(T& x, T v) {
  static_assert(detail::atomic_integer_v<T>, "apgas::atomic_max: T must be an integer type of 4 or 8 bytes (CUDA has "
                                             "no floating-point atomicMax)");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicMax(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return detail::cpu_fetch_update(x, v, [](T a, T b) { return b < a; });
#endif
}

/// x &= v, x |= v, x ^= v atomically (integer types); the old value.
template <class T>
APGAS_DETAIL_HD T atomic_and(T& x, T v) {
  static_assert(detail::atomic_integer_v<T>, "apgas::atomic_and: T must be an integer type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicAnd(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).fetch_and(v, std::memory_order_relaxed);
#endif
}
template <class T>
APGAS_DETAIL_HD T atomic_or(T& x, T v) {
  static_assert(detail::atomic_integer_v<T>, "apgas::atomic_or: T must be an integer type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicOr(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).fetch_or(v, std::memory_order_relaxed);
#endif
}
template <class T>
APGAS_DETAIL_HD T atomic_xor(T& x, T v) {
  static_assert(detail::atomic_integer_v<T>, "apgas::atomic_xor: T must be an integer type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using U = std::remove_pointer_t<decltype(detail::cuda_ptr(x))>;
  return detail::from_cuda<T>(atomicXor(detail::cuda_ptr(x), static_cast<U>(v)));
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).fetch_xor(v, std::memory_order_relaxed);
#endif
}

/// x = v atomically; the old value. 4- and 8-byte trivially copyable T.
template <class T>
APGAS_DETAIL_HD T atomic_exchange(T& x, T v) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "apgas::atomic_exchange: T must be a trivially copyable type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using W = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
  W w;
  memcpy(&w, &v, sizeof(T));
  const W old = atomicExch(reinterpret_cast<W*>(&x), w);
  T r;
  memcpy(&r, &old, sizeof(T));
  return r;
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(x).exchange(v, std::memory_order_relaxed);
#endif
}

/// If x equals `expected` (bitwise), x = desired; either way the old value (CUDA's atomicCAS). 4- and 8-byte T.
template <class T>
APGAS_DETAIL_HD T atomic_compare_exchange(T& x, T expected, T desired) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "apgas::atomic_compare_exchange: T must be a trivially copyable type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using W = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
  W e, d;
  memcpy(&e, &expected, sizeof(T));
  memcpy(&d, &desired, sizeof(T));
  const W old = atomicCAS(reinterpret_cast<W*>(&x), e, d);
  T r;
  memcpy(&r, &old, sizeof(T));
  return r;
#else
  detail::note_atomic(x);
  std::atomic_ref<T>(x).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  return expected;  // on failure compare_exchange stored the value it saw; on success it equals the old value
#endif
}

/// x read atomically (a volatile load on a GPU, CUDA's idiom; relaxed on a CPU place). 4- and 8-byte trivially
/// copyable T. The first read of a compare-exchange loop, or a read of a counter other threads update atomically
/// between two barriers: a plain read there races with them (the checking mode reports it).
template <class T>
APGAS_DETAIL_HD T atomic_load(const T& x) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "apgas::atomic_load: T must be a trivially copyable type of 4 or 8 bytes");
#if defined(__CUDA_ARCH__)
  using W = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
  const W w = *reinterpret_cast<const volatile W*>(&x);
  T r;
  memcpy(&r, &w, sizeof(T));
  return r;
#else
  detail::note_atomic(x);
  return std::atomic_ref<T>(const_cast<T&>(x)).load(std::memory_order_relaxed);
#endif
}

}  // namespace apgas
#pragma GCC visibility pop
