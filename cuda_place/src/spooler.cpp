#include "spooler.hpp"

#include <apgas/activity.hpp>
#include <apgas/detail/obs.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

namespace apgas::detail::gpu {

// One copy. The pumps share it (each holds a reference); chunk i covers bytes [i * chunk, i * chunk + chunk).
struct spooler::job {
  bool to_device = true;
  std::uintptr_t device = 0;  // destination (put) or source (get) on the GPU
  std::byte* host = nullptr;  // source (put; never written) or destination (get)
  std::size_t n = 0;
  std::size_t chunk = 0;      // chunk_bytes(n): at most a slice
  std::size_t chunks = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};  // the first pump that fails reports it; the others stop quietly
};

spooler::spooler(dma_engine& dev, std::byte* memory, std::size_t slice_bytes, int slices)
    : dev_(dev), slice_bytes_(slice_bytes), slices_(slices) {
  for (int i = 0; i < slices; ++i) {
    to_device_.free.push_back(memory + static_cast<std::size_t>(i) * slice_bytes);
    to_host_.free.push_back(memory + static_cast<std::size_t>(slices + i) * slice_bytes);
  }
}

std::byte* spooler::acquire(ring& r) {
  waiter w;
  {
    std::lock_guard lock(r.mutex);
    if (!r.free.empty()) {
      std::byte* s = r.free.back();
      r.free.pop_back();
      return s;
    }
    r.waiters.push_back(&w);
  }
  w.ready.wait();  // release() hands a slice over directly: no retry, no lost wake-up
  return w.slice;
}

void spooler::release(ring& r, std::byte* slice) noexcept {
  waiter* w = nullptr;
  {
    std::lock_guard lock(r.mutex);
    if (r.waiters.empty()) {
      r.free.push_back(slice);
      return;
    }
    w = r.waiters.front();
    r.waiters.pop_front();
    w->slice = slice;
  }
  w->ready.signal();
}

void spooler::pump(spooler* self, job* j) {
  ring& r = j->to_device ? self->to_device_ : self->to_host_;
  const std::size_t chunk = j->chunk;
  while (!j->failed.load(std::memory_order_relaxed)) {
    const std::size_t i = j->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= j->chunks) return;
    const std::size_t off = i * chunk;
    const std::size_t len = std::min(chunk, j->n - off);
    std::byte* s = self->acquire(r);
    try {
      const bool traced = obs::on(obs::cat_copy);
      if (j->to_device) {
        if (traced) obs::span_begin(obs::cat_copy, "stage into slice", len);
        std::memcpy(s, j->host + off, len);
        if (traced) obs::span_end(obs::cat_copy);
        self->dev_.wait(self->dev_.h2d(j->device + off, s, len));
      } else {
        self->dev_.wait(self->dev_.d2h(s, j->device + off, len));
        if (traced) obs::span_begin(obs::cat_copy, "copy out of slice", len);
        std::memcpy(j->host + off, s, len);
        if (traced) obs::span_end(obs::cat_copy);
      }
    } catch (...) {
      // The slice goes back to its ring for the next pump to refill: no DMA of this chunk can still read or write it.
      // The invariant lives in the dma_engine (spooler.hpp; device::record_into): an h2d or d2h that throws has ended
      // what it enqueued before throwing, and a wait that throws means the GPU is dead.
      self->release(r, s);
      if (!j->failed.exchange(true)) throw;
      return;
    }
    self->release(r, s);
  }
}

std::size_t spooler::chunk_bytes(std::size_t n) const noexcept {
  const std::size_t even = (n + static_cast<std::size_t>(slices_) - 1) / static_cast<std::size_t>(slices_);
  const std::size_t rounded = (even + chunk_align - 1) / chunk_align * chunk_align;
  return std::min(slice_bytes_, std::max(rounded, min_chunk));
}

void spooler::start(job* raw, std::size_t n) {
  std::shared_ptr<job> j(raw);
  j->n = n;
  j->chunk = chunk_bytes(n);
  j->chunks = (n + j->chunk - 1) / j->chunk;
  const std::size_t pumps = std::min<std::size_t>(j->chunks, static_cast<std::size_t>(slices_));
  for (std::size_t p = 0; p < pumps; ++p) apgas::async([this, j] { pump(this, j.get()); });
}

void spooler::put(std::uintptr_t dst, const void* src, std::size_t n) {
  if (n == 0) return;
  auto* j = new job;
  j->to_device = true;
  j->device = dst;
  j->host = const_cast<std::byte*>(static_cast<const std::byte*>(src));  // only read (to_device)
  start(j, n);
}

void spooler::get(void* dst, std::uintptr_t src, std::size_t n) {
  if (n == 0) return;
  auto* j = new job;
  j->to_device = false;
  j->device = src;
  j->host = static_cast<std::byte*>(dst);
  start(j, n);
}

}  // namespace apgas::detail::gpu
