#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// A small test-and-test-and-set lock for the short critical sections of the runtime (monitor, clocks, finish
// exception lists). Unlike std::mutex it may be released by a different fiber of the same thread than the one that
// took it — which happens when an activity parks while the lock is held and the switch's on-top function releases
// it — and it never blocks the OS thread in the kernel.

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define APGAS_DETAIL_CPU_RELAX() _mm_pause()
#else
#define APGAS_DETAIL_CPU_RELAX() ((void)0)
#endif

namespace apgas::detail {

class spin_mutex {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < 64) {
          APGAS_DETAIL_CPU_RELAX();
        } else {
          std::this_thread::yield();
        }
        ++spins;
      }
    }
  }
  bool try_lock() noexcept { return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace apgas::detail
#pragma GCC visibility pop
