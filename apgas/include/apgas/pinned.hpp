#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file pinned.hpp
/// Page-locked host memory for fast copies to and from GPU places.
///
/// async_copy between host memory and a GPU place stages pageable memory through the DMA-slice spooler; memory from
/// pinned_allocator is page-locked, and the copy goes straight to the DMA engine instead. Where no CUDA driver can
/// be loaded (a build without CUDA, a machine without GPUs) it is ordinary memory and everything still works.
/// @code
///   apgas::pinned_vector<float> points(n);
///   apgas::finish([&] { apgas::async_copy(std::span<const float>(points), gpu_array); });   // one DMA
/// @endcode

#include <apgas/detail/gpu.hpp>

#include <cstddef>
#include <new>
#include <vector>

namespace apgas {

/// A standard allocator of page-locked memory (cuMemHostAlloc), usable from any thread, before or during a run.
/// Aligned for T (a T aligned to more than a page gets ordinary memory, copied through the spooler).
template <class T>
struct pinned_allocator {
  using value_type = T;
  pinned_allocator() noexcept = default;
  template <class U>
  pinned_allocator(const pinned_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::pinned_alloc(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { detail::pinned_free(p); }
  template <class U>
  friend bool operator==(const pinned_allocator&, const pinned_allocator<U>&) noexcept {
    return true;
  }
};

template <class T>
using pinned_vector = std::vector<T, pinned_allocator<T>>;

/// True when [p, p + bytes) is page-locked memory from pinned_allocator (copies from it skip the spooler).
inline bool is_pinned(const void* p, std::size_t bytes) noexcept { return detail::is_pinned(p, bytes); }

}  // namespace apgas
#pragma GCC visibility pop
