// atomic and when: one monitor per place. A when() whose condition is false parks on the monitor's waiter list;
// every atomic section that ends (atomic body, or a when body that ran) wakes all waiters, which re-take the lock
// and re-test. A failed test changes nothing, so it wakes no one: there is no spinning and no lost wake-up (the
// waiter is put on the list and the lock released in one step, in park's publish).
#include "scheduler.hpp"
#include <apgas/detail/spin_mutex.hpp>

#include <apgas/atomic.hpp>
#include <apgas/error.hpp>

#include <utility>
#include <vector>

namespace apgas::detail {
namespace {

struct monitor {
  spin_mutex mutex;
  std::vector<fiber_ctx*> waiters;
};
monitor g_monitor;  // the monitor of this host place

// Release the monitor at the end of an atomic section, waking every parked when().
void end_section(task& t) noexcept {
  t.atomic_depth -= 1;
  std::vector<fiber_ctx*> ws;
  if (!g_monitor.waiters.empty()) ws = std::exchange(g_monitor.waiters, {});
  g_monitor.mutex.unlock();
  for (fiber_ctx* f : ws) wake(f);
}

// Run the body of an atomic section whose monitor is held, then end the section (also when the body throws).
void run_section(task& t, function_ref<void()> body) {
  try {
    body();
  } catch (...) {
    end_section(t);
    throw;
  }
  end_section(t);
}

}  // namespace

void run_atomic(function_ref<void()> body) {
  task& t = require_activity("apgas::atomic");
  if (t.in_kernel) {
    throw illegal_operation_exception("apgas: atomic is illegal inside a kernel body (it has no GPU equivalent)");
  }
  if (t.atomic_depth > 0) {  // nested: we already hold the monitor
    t.atomic_depth += 1;
    struct leave {
      task& t;
      ~leave() { t.atomic_depth -= 1; }
    } guard{t};
    body();
    return;
  }
  g_monitor.mutex.lock();
  t.atomic_depth = 1;
  run_section(t, body);
}

void run_when(function_ref<bool()> cond, function_ref<void()> body) {
  task& t = require_unrestricted_activity("apgas::when");
  g_monitor.mutex.lock();
  t.atomic_depth = 1;
  for (;;) {
    bool ok;
    try {
      ok = cond();
    } catch (...) {
      t.atomic_depth = 0;
      g_monitor.mutex.unlock();  // a failed test changed nothing: wake no one
      throw;
    }
    if (ok) break;
    t.atomic_depth = 0;
    park(
        [](fiber_ctx* self, void*) {
          g_monitor.waiters.push_back(self);
          g_monitor.mutex.unlock();
        },
        nullptr);
    g_monitor.mutex.lock();
    t.atomic_depth = 1;
  }
  run_section(t, body);
}

}  // namespace apgas::detail
