#pragma once
// The completion seam: how transports and the GPU backend hand results to waiting activities. Not API.
//
// A completion is a one-shot event. An activity calls wait(): if the event is not yet signalled, its fiber parks
// and its worker runs other work. Any thread (a progress hook run by an idle worker, a driver callback thread)
// calls signal() exactly once; that wakes the parked activity (it becomes runnable on some worker).
// Backends that need polling register a progress hook: idle workers call every hook before they go to sleep, and
// while any hook is registered an idle worker never sleeps for more than a short period, so polled events are
// always observed.

#include <atomic>
#include <cstdint>

namespace apgas::detail {

class completion {
 public:
  completion() noexcept = default;
  completion(const completion&) = delete;
  completion& operator=(const completion&) = delete;

  /// Called by an activity (illegal outside one); returns once signal() has been called. Parks, never spins.
  void wait();
  /// Called once, by any thread. After signal() returns the completion may already be destroyed by the waiter,
  /// so the signalling side must not touch it again.
  void signal() noexcept;
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == signalled; }

 private:
  static constexpr std::uintptr_t pending = 0;
  static constexpr std::uintptr_t signalled = 1;
  // pending, signalled, or the address of the parked fiber (aligned, so never 0 or 1).
  std::atomic<std::uintptr_t> state_{pending};
};

/// A progress hook returns true when it made progress (delivered something).
using progress_fn = bool (*)(void* ctx);
/// Register a hook that idle workers poll; returns its id. Thread-safe.
int add_progress_hook(progress_fn fn, void* ctx);
/// Unregister; after it returns no worker is running the hook any more.
void remove_progress_hook(int id);

}  // namespace apgas::detail
