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
  const std::atomic<int>* demand;  // null: always needs polling
};
// Hooks run under the registry mutex: one poller at a time (backends need not be thread-safe against themselves),
// and remove_progress_hook, which takes the mutex, returns only once no hook runs.
spin_mutex g_hooks_mutex;  // taken on every idle poll: a spin lock, no futex
std::vector<hook> g_hooks;
std::atomic<int> g_hook_count{0};
int g_next_hook_id = 1;
// What have_progress_hooks() reads without the mutex: how many hooks always need polling, and the demand counters
// of the others (a fixed table: hooks are few and registered at start-up).
constexpr int max_demands = 8;
std::atomic<int> g_always{0};
std::atomic<const std::atomic<int>*> g_demands[max_demands];

void publish_locked() {
  int always = 0;
  int d = 0;
  for (const hook& h : g_hooks) {
    if (h.demand == nullptr) {
      ++always;
    } else if (d < max_demands) {
      g_demands[d++].store(h.demand, std::memory_order_release);
    } else {
      ++always;  // (beyond the table: polled always, which is safe)
    }
  }
  for (; d < max_demands; ++d) g_demands[d].store(nullptr, std::memory_order_release);
  g_always.store(always, std::memory_order_release);
  g_hook_count.store(static_cast<int>(g_hooks.size()), std::memory_order_release);
}

}  // namespace

int add_progress_hook(progress_fn fn, void* ctx, const std::atomic<int>* demand) {
  std::lock_guard lock(g_hooks_mutex);
  const int id = g_next_hook_id++;
  g_hooks.push_back({id, fn, ctx, demand});
  publish_locked();
  return id;
}

// Idle workers try the lock back to back; one that finds g_closing set stays away, so the remover gets the lock
// as soon as the poll in progress ends (without it, a shut-down on an oversubscribed host waited for a minute).
std::atomic<int> g_closing{0};

void remove_progress_hook(int id) {
  g_closing.fetch_add(1, std::memory_order_seq_cst);
  {
    std::lock_guard lock(g_hooks_mutex);
    std::erase_if(g_hooks, [id](const hook& h) { return h.id == id; });
    publish_locked();
  }
  g_closing.fetch_sub(1, std::memory_order_seq_cst);
}

// Why a worker that sleeps while this is false misses nothing: demand rises only in an activity that issues work
// (before it can wait for it), so the issuing worker itself sees the demand when it next looks for work and polls;
// the other workers need not.
bool have_progress_hooks() noexcept {
  if (g_always.load(std::memory_order_acquire) > 0) return true;
  if (g_hook_count.load(std::memory_order_acquire) == 0) return false;
  for (const auto& slot : g_demands) {
    const std::atomic<int>* d = slot.load(std::memory_order_acquire);
    if (d == nullptr) break;
    if (d->load(std::memory_order_acquire) > 0) return true;
  }
  return false;
}

bool poll_progress() noexcept {
  if (!have_progress_hooks() || g_closing.load(std::memory_order_acquire) != 0) return false;
  std::unique_lock lock(g_hooks_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool progressed = false;
  for (const hook& h : g_hooks) progressed = h.fn(h.ctx) || progressed;
  return progressed;
}

}  // namespace apgas::detail
