#pragma once
// The DMA-slice spooler: copies between pageable host memory and one GPU through rings of pinned slices.
//
// Why: the DMA engine reads and writes only page-locked memory. The driver stages pageable copies itself, but that
// staging serialises every stream of the device and does not overlap the host-side copy with the transfer. Here a
// copy of n bytes is cut into chunks of at most a slice (chunk_bytes: a copy smaller than all the slices together is
// spread over them, so that a 1 MiB copy is several memcpys in parallel, not one memcpy then one DMA); a few *pump*
// activities (at most one per slice) take chunks
// in turn: host->device, a pump memcpys its chunk into a free slice and enqueues the DMA from the slice; device->host,
// it enqueues the DMA into a slice and memcpys the chunk out once it has landed. While one pump waits for its DMA
// (parked, its worker free), the others fill slices: the host copies of later chunks overlap the DMA of earlier
// ones, and on a machine with idle workers several host copies run in parallel.
//
// Completion: every pump is an activity of the finish that governs the async_copy, and a pump ends only after the
// DMA of its last chunk has *landed* (it waits for the marker recorded after it) — so when that finish ends, every
// byte is on the device. (X10 signalled completion when the last slice was queued: a kernel on another stream could
// read data still in flight.)
//
// This file knows nothing of CUDA: the device is a dma_engine (cuda_place/src/backend.cpp for a real GPU, a fake in
// tests/cuda/test_spooler.cpp).
//
// Invariants: a slice is in exactly one of {a ring's free list, handed to a waiter, owned by one pump}; a pump owns
// at most one slice at a time and returns it before it waits for anything else, so no pump holds a slice while it
// waits for a slice (no deadlock, however many copies share the rings).

#include <apgas/detail/completion.hpp>
#include <apgas/detail/spin_mutex.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace apgas::detail::gpu {

/// What the spooler needs from one GPU: asynchronous copies on its two copy streams, and a way to wait for them.
class dma_engine {
 public:
  using marker = std::uint64_t;  ///< a completion point recorded on a copy stream after a copy (a CUDA event)
  /// Enqueue host->device from page-locked memory; the marker completes when the bytes have landed on the device.
  /// If it throws, nothing of the copy is in flight any more (device.cpp: a marker that could not be recorded ends
  /// its operation synchronously), or the GPU is dead: the slice may be reused at once.
  virtual marker h2d(std::uintptr_t dst, const void* src, std::size_t n) = 0;
  /// Enqueue device->host into page-locked memory; the marker completes when the bytes have landed in host memory.
  /// Throws as h2d does.
  virtual marker d2h(void* dst, std::uintptr_t src, std::size_t n) = 0;
  /// Park the calling activity until the marker has completed, then release the marker. Throws
  /// dead_place_exception (and releases the marker) if the GPU failed.
  virtual void wait(marker m) = 0;

 protected:
  ~dma_engine() = default;
};

class spooler {
 public:
  /// `memory`: 2 * slices * slice_bytes bytes of page-locked memory (host->device ring first), allocated and touched
  /// by the caller, who keeps it alive as long as the spooler.
  spooler(dma_engine& dev, std::byte* memory, std::size_t slice_bytes, int slices);
  spooler(const spooler&) = delete;
  spooler& operator=(const spooler&) = delete;

  /// Pageable host memory -> device: pumps governed by the caller's innermost finish; src must stay valid and
  /// unchanged until that finish ends.
  void put(std::uintptr_t dst, const void* src, std::size_t n);
  /// Device -> pageable host memory, likewise; dst is complete when the finish ends.
  void get(void* dst, std::uintptr_t src, std::size_t n);

  std::size_t slice_bytes() const noexcept { return slice_bytes_; }
  int slices() const noexcept { return slices_; }
  /// The chunk size of a copy of n bytes: n spread over all the slices (so that a copy smaller than slices * slice
  /// bytes still has several pumps copying on the host at once, instead of one memcpy then one DMA), rounded up to
  /// 4 KiB, at least min_chunk (below it a DMA's fixed cost dominates) and at most a slice.
  std::size_t chunk_bytes(std::size_t n) const noexcept;
  static constexpr std::size_t min_chunk = 128 * 1024;
  static constexpr std::size_t chunk_align = 4096;

 private:
  struct waiter {
    completion ready;
    std::byte* slice = nullptr;
  };
  struct ring {
    spin_mutex mutex;
    std::vector<std::byte*> free;
    std::deque<waiter*> waiters;  // FIFO: the oldest waiter gets the next released slice
  };
  struct job;
  static void pump(spooler* self, job* j);

  std::byte* acquire(ring& r);
  void release(ring& r, std::byte* slice) noexcept;
  void start(job* j, std::size_t n);

  dma_engine& dev_;
  std::size_t slice_bytes_;
  int slices_;
  ring to_device_;
  ring to_host_;
};

}  // namespace apgas::detail::gpu
