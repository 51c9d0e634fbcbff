#pragma once
// Chase-Lev work-stealing deque (Chase & Lev 2005; memory orders after Le, Pop, Cohen, Zappa Nardelli 2013).
// The owner pushes and pops at the bottom; thieves steal at the top. Items are non-zero words.
//
// Invariants:
//  - only the owner thread calls push/pop; any thread calls steal;
//  - a buffer is replaced only by the owner when it grows; old buffers stay alive until the deque dies, because a
//    thief may still read a slot of the buffer it loaded (the slot it reads was copied, so the value is the same);
//  - bottom is stored with release and loaded with acquire by thieves, so whatever the owner wrote before a push
//    (the task's fields) is visible to the thief that takes the item (also for TSan, which ignores fences).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace apgas::detail {

class work_deque {
 public:
  using item = std::uintptr_t;  // 0 = nothing

  explicit work_deque(std::size_t log2_capacity = 10) {
    buffers_.push_back(std::make_unique<buffer>(std::size_t{1} << log2_capacity));
    buf_.store(buffers_.back().get(), std::memory_order_relaxed);
  }
  work_deque(const work_deque&) = delete;
  work_deque& operator=(const work_deque&) = delete;

  void push(item x) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_acquire);
    buffer* a = buf_.load(std::memory_order_relaxed);
    if (b - t > static_cast<std::int64_t>(a->mask)) a = grow(a, t, b);
    a->at(b).store(x, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_release);
  }

  /// True when the deque holds an item, as last seen (any thread; a hint, no ordering).
  bool nonempty_hint() const noexcept {
    return bottom_.load(std::memory_order_relaxed) > top_.load(std::memory_order_relaxed);
  }

  /// Items in the deque, as last seen (any thread; a hint for the trace's samples).
  std::size_t size_hint() const noexcept {
    const std::int64_t n = bottom_.load(std::memory_order_relaxed) - top_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

  item pop() {
    // Empty at a glance: only the owner (us) adds items and top_ only grows, so it stays empty; no fence needed
    // (an idle worker asks on every round).
    if (bottom_.load(std::memory_order_relaxed) <= top_.load(std::memory_order_relaxed)) return 0;
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    buffer* a = buf_.load(std::memory_order_relaxed);
#if defined(APGAS_DETAIL_TSAN)  // TSan ignores fences: a seq_cst exchange orders the same way (and on x86 too)
    (void)bottom_.exchange(b, std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
#else
    bottom_.store(b, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_relaxed);
#endif
    if (t > b) {
      bottom_.store(b + 1, std::memory_order_relaxed);
      return 0;
    }
    item x = a->at(b).load(std::memory_order_relaxed);
    if (t == b) {  // last item: race with thieves
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) x = 0;
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return x;
  }

  /// pop() for a deque that no thief can reach (a scheduler with one worker): no fence, no CAS.
  item pop_unshared() {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    if (b == top_.load(std::memory_order_relaxed)) return 0;
    bottom_.store(b - 1, std::memory_order_relaxed);
    return buf_.load(std::memory_order_relaxed)->at(b - 1).load(std::memory_order_relaxed);
  }

  item steal() {
#if defined(APGAS_DETAIL_TSAN)
    std::int64_t t = top_.fetch_add(0, std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
#else
    std::int64_t t = top_.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_acquire);
#endif
    if (t >= b) return 0;
    buffer* a = buf_.load(std::memory_order_acquire);
    const item x = a->at(t).load(std::memory_order_relaxed);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) return 0;
    return x;
  }

  /// Approximate (racy) emptiness, for idle heuristics only.
  bool looks_empty() const noexcept {
    return bottom_.load(std::memory_order_relaxed) <= top_.load(std::memory_order_relaxed);
  }

 private:
  struct buffer {
    explicit buffer(std::size_t cap) : mask(cap - 1), slots(new std::atomic<item>[cap]) {}
    std::atomic<item>& at(std::int64_t i) { return slots[static_cast<std::size_t>(i) & mask]; }
    std::size_t mask;
    std::unique_ptr<std::atomic<item>[]> slots;
  };

  buffer* grow(buffer* a, std::int64_t t, std::int64_t b) {
    auto bigger = std::make_unique<buffer>((a->mask + 1) * 2);
    for (std::int64_t i = t; i < b; ++i) bigger->at(i).store(a->at(i).load(std::memory_order_relaxed), std::memory_order_relaxed);
    buffer* n = bigger.get();
    buffers_.push_back(std::move(bigger));
    buf_.store(n, std::memory_order_release);
    return n;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::atomic<buffer*> buf_{nullptr};
  std::vector<std::unique_ptr<buffer>> buffers_;  // owner only; every buffer ever used
};

}  // namespace apgas::detail
