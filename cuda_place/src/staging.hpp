#pragma once
// Page-locked staging blocks for the data of kernel launches (small global_from and shared_from uploads, the packed
// constant_from data, a spilled body). The driver copies from pageable memory by staging the bytes itself, and may
// first wait for the stream (its API-synchronisation rules): a launch would then wait for the kernels before it on
// that stream. So a launch packs its data into one page-locked block, enqueues the copies from it, and gives the
// block back when its completion event has been seen (the copies are done by then).
//
// Blocks come in power-of-two sizes from 64 KiB; a released block is kept for the next launch that fits it. The cache
// keeps at most `keep_bytes` between launches: take() frees the surplus (on the launching thread: freeing page-locked
// memory may synchronise, which the poller must not do). Plain C++ (no CUDA): the memory comes from a host_memory,
// the device in cuda_place/src/device.cpp, a fake in tests/cuda/test_staging.cpp.

#include <apgas/detail/spin_mutex.hpp>

#include <cstddef>
#include <map>
#include <vector>

namespace apgas::detail::gpu {

/// Page-locked host memory of one GPU.
class host_memory {
 public:
  /// `bytes` of page-locked memory, or null when none can be had.
  virtual void* pin(std::size_t bytes) = 0;
  virtual void unpin(void* p) noexcept = 0;

 protected:
  ~host_memory() = default;
};

class staging_cache {
 public:
  static constexpr std::size_t min_block = std::size_t{64} << 10;

  struct block {
    std::byte* data = nullptr;
    std::size_t bytes = 0;  ///< the block's size (at least what was asked)
  };

  staging_cache(host_memory& memory, std::size_t keep_bytes) : memory_(memory), keep_(keep_bytes) {}
  ~staging_cache();  ///< frees the kept blocks (blocks still handed out must have been given back)
  staging_cache(const staging_cache&) = delete;
  staging_cache& operator=(const staging_cache&) = delete;

  /// A block of at least `bytes` (> 0): a kept one of the right size, or a new one. Throws std::bad_alloc when no
  /// page-locked memory can be had.
  block take(std::size_t bytes);
  /// Back into the cache (any thread, e.g. the poller); a null block is ignored.
  void give(block b) noexcept;

  std::size_t kept_bytes() const noexcept;

 private:
  host_memory& memory_;
  std::size_t keep_;
  mutable spin_mutex mutex_;
  std::map<std::size_t, std::vector<std::byte*>> free_;  // (mutex_) by block size
  std::size_t kept_ = 0;                                 // (mutex_) bytes in free_
};

}  // namespace apgas::detail::gpu
