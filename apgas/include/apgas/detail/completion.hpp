#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
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
#include <exception>

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

class finish_state;
struct task;

/// Work that runs outside the workers (a GPU kernel, a DMA) and that a finish must wait for like an activity.
/// join() counts one in the innermost finish of the calling activity; done() — exactly once, from any thread —
/// records the exception (if any) and ends it. Until done() the finish cannot terminate.
class finish_token {
 public:
  finish_token() noexcept = default;
  /// Throws illegal_operation_exception outside an activity or inside atomic/when.
  static finish_token join();
  void done(std::exception_ptr e = nullptr) noexcept;
  explicit operator bool() const noexcept { return fs_ != nullptr; }
  /// Spawn `t` (taking ownership) as an activity counted in this token's finish (which the token keeps open), not in
  /// the caller's: work done on behalf of the token's issuer (the in-order queue's driver). The caller must be an
  /// activity; deletes t before throwing.
  void spawn_counted(task* t) const;
  /// Whether both tokens count in the same finish.
  bool same_finish(const finish_token& o) const noexcept { return fs_ == o.fs_; }

 private:
  finish_state* fs_ = nullptr;
};

/// A progress hook returns true when it made progress (delivered something).
using progress_fn = bool (*)(void* ctx);
/// Register a hook that idle workers poll; returns its id. Thread-safe. `demand`, when given, says when the hook
/// needs polling at all: only while *demand > 0 (work is outstanding that only the hook can complete, e.g. GPU
/// operations in flight). Without it (a transport: a message may come at any time) idle workers always poll. While no
/// hook needs polling, an idle worker sleeps until it is given work instead of napping between polls.
int add_progress_hook(progress_fn fn, void* ctx, const std::atomic<int>* demand = nullptr);
/// Unregister; after it returns no worker is running the hook any more.
void remove_progress_hook(int id);

}  // namespace apgas::detail
#pragma GCC visibility pop
