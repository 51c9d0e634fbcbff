#include "scheduler.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/spin_mutex.hpp>
#include <apgas/error.hpp>

#include <atomic>
#include <mutex>
#include <vector>

namespace apgas::detail {

void completion::wait() {
  if (ready()) return;
  if (current_task() == nullptr) require_activity("apgas::detail::completion::wait");  // throws
  if (have_progress_hooks() &&
      poll_until([](const void* c) { return static_cast<const completion*>(c)->ready(); }, this)) {
    return;
  }
  park(
      [](fiber_ctx* self, void* arg) {
        auto* c = static_cast<completion*>(arg);
        std::uintptr_t expected = pending;
        // If signal() came first, we are not parked for anyone: wake ourselves.
        if (!c->state_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(self),
                                               std::memory_order_acq_rel, std::memory_order_acquire)) {
          wake(self);
        }
      },
      this);
}

void completion::signal() noexcept {
  const std::uintptr_t prev = state_.exchange(signalled, std::memory_order_acq_rel);
  if (prev != pending && prev != signalled) wake(reinterpret_cast<fiber_ctx*>(prev));
}

namespace {

struct hook {
  int id;
  progress_fn fn;
  void* ctx;
};
// Hooks run under the registry mutex: one poller at a time (backends need not be thread-safe against themselves),
// and remove_progress_hook, which takes the mutex, returns only once no hook runs.
spin_mutex g_hooks_mutex;  // taken on every idle poll: a spin lock, no futex
std::vector<hook> g_hooks;
std::atomic<int> g_hook_count{0};
int g_next_hook_id = 1;

}  // namespace

int add_progress_hook(progress_fn fn, void* ctx) {
  std::lock_guard lock(g_hooks_mutex);
  const int id = g_next_hook_id++;
  g_hooks.push_back({id, fn, ctx});
  g_hook_count.store(static_cast<int>(g_hooks.size()), std::memory_order_release);
  return id;
}

void remove_progress_hook(int id) {
  std::lock_guard lock(g_hooks_mutex);
  std::erase_if(g_hooks, [id](const hook& h) { return h.id == id; });
  g_hook_count.store(static_cast<int>(g_hooks.size()), std::memory_order_release);
}

bool have_progress_hooks() noexcept { return g_hook_count.load(std::memory_order_acquire) > 0; }

bool poll_progress() noexcept {
  if (!have_progress_hooks()) return false;
  std::unique_lock lock(g_hooks_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool progressed = false;
  for (const hook& h : g_hooks) progressed = h.fn(h.ctx) || progressed;
  return progressed;
}

}  // namespace apgas::detail
