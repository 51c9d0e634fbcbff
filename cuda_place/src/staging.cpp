#include "staging.hpp"

#include <bit>
#include <mutex>
#include <new>

namespace apgas::detail::gpu {

staging_cache::~staging_cache() {
  for (auto& [bytes, blocks] : free_) {
    for (std::byte* p : blocks) memory_.unpin(p);
  }
}

staging_cache::block staging_cache::take(std::size_t bytes) {
  const std::size_t size = std::bit_ceil(bytes < min_block ? min_block : bytes);
  std::vector<std::byte*> surplus;
  block b{nullptr, size};
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      b.data = it->second.back();
      it->second.pop_back();
      kept_ -= size;
    }
    // Over the limit: the largest kept blocks go (they are the least likely to fit the next launch exactly).
    while (kept_ > keep_ && !free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->second.empty()) {
        free_.erase(last);
        continue;
      }
      surplus.push_back(last->second.back());
      last->second.pop_back();
      kept_ -= last->first;
    }
  }
  for (std::byte* p : surplus) memory_.unpin(p);
  if (b.data == nullptr) {
    b.data = static_cast<std::byte*>(memory_.pin(size));
    if (b.data == nullptr) throw std::bad_alloc();
  }
  return b;
}

void staging_cache::give(block b) noexcept {
  if (b.data == nullptr) return;
  try {
    std::lock_guard lock(mutex_);
    free_[b.bytes].push_back(b.data);
    kept_ += b.bytes;
  } catch (const std::bad_alloc&) {  // no room to keep it: it goes
    memory_.unpin(b.data);
  }
}

std::size_t staging_cache::kept_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return kept_;
}

}  // namespace apgas::detail::gpu
