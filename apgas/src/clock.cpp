// Clocks. State per clock: phase, number of registered activities, number of them that have arrived in the current
// phase, and the activities parked in advance(). State per activity (task::clocks): for each clock, its phase and
// whether it has arrived ("resumed") in that phase.
//
// Invariants (under clock_state::mutex_):
//  - 0 <= arrived_ < registered_ whenever registered_ > 0 — the moment arrived_ reaches registered_ the phase
//    advances (arrived_ = 0, phase_ + 1, waiters woken);
//  - a registration that has not arrived is in the clock's current phase (the clock cannot pass it);
//  - a registration that has arrived is in the current phase or the one before (nobody can arrive twice in a
//    phase without advancing in between).
#include "finish.hpp"
#include "scheduler.hpp"
#include <apgas/detail/spin_mutex.hpp>

#include <apgas/clock.hpp>
#include <apgas/error.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace apgas::detail {

class clock_state {
 public:
  std::atomic<int> refs{1};
  spin_mutex mutex;
  int phase = 1;
  int registered = 0;
  int arrived = 0;
  std::vector<fiber_ctx*> waiters;

  void retain() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

struct clock_registration {
  clock_state* clock;
  int phase;
  bool resumed;
};

struct clock_registrations {
  std::vector<clock_registration> regs;
  clock_state* implicit = nullptr;  // the clock of the innermost clocked_finish (registered or not)
};

namespace {

// Under c.mutex: advance the phase; the returned waiters must be woken after unlocking.
std::vector<fiber_ctx*> next_phase_locked(clock_state& c) {
  c.phase += 1;
  c.arrived = 0;
  return std::exchange(c.waiters, {});
}

void wake_all(std::vector<fiber_ctx*>& ws) noexcept {
  for (fiber_ctx* f : ws) wake(f);
}

// Under c.mutex: record the arrival of `r` (not yet arrived).
std::vector<fiber_ctx*> arrive_locked(clock_state& c, clock_registration& r) {
  r.resumed = true;
  if (r.phase == c.phase && ++c.arrived == c.registered) return next_phase_locked(c);
  return {};
}

clock_registration* find(task& t, clock_state* c) noexcept {
  if (t.clocks == nullptr) return nullptr;
  for (auto& r : t.clocks->regs) {
    if (r.clock == c) return &r;
  }
  return nullptr;
}

clock_registration& registered_or_throw(task& t, clock_state* c, const char* op) {
  clock_registration* r = c != nullptr ? find(t, c) : nullptr;
  if (r == nullptr) {
    throw clock_use_exception(std::string("apgas::clock::") + op +
                              ": the calling activity is not registered on this clock (never registered, dropped, "
                              "or a moved-from clock)");
  }
  return *r;
}

clock_registrations& regs_of(task& t) {
  if (t.clocks == nullptr) t.clocks = new clock_registrations;
  return *t.clocks;
}

void drop_registration(task& t, clock_registration* r) noexcept {
  clock_state& c = *r->clock;
  std::vector<fiber_ctx*> ws;
  {
    std::lock_guard lock(c.mutex);
    c.registered -= 1;
    if (r->resumed && r->phase == c.phase) c.arrived -= 1;
    if (c.registered > 0 && c.arrived == c.registered) ws = next_phase_locked(c);
  }
  wake_all(ws);
  auto& v = t.clocks->regs;
  v.erase(v.begin() + (r - v.data()));
  c.release();
}

void advance_registration(clock_registration& r) {
  clock_state& c = *r.clock;
  std::vector<fiber_ctx*> ws;
  c.mutex.lock();
  if (!r.resumed) ws = arrive_locked(c, r);
  if (c.phase > r.phase) {
    c.mutex.unlock();
  } else {
    park(
        [](fiber_ctx* self, void* arg) {
          auto* cs = static_cast<clock_state*>(arg);
          cs->waiters.push_back(self);
          cs->mutex.unlock();
        },
        &c);
  }
  wake_all(ws);
  r.phase += 1;
  r.resumed = false;
}

// Register `child` on each clock of `parents` with the parent's phase and arrival state.
void inherit(task& parent, task& child, clock_state* const* cs, std::size_t n) {
  std::vector<clock_registration*> prs;
  prs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    clock_registration* pr = cs[i] != nullptr ? find(parent, cs[i]) : nullptr;
    if (pr == nullptr) {
      throw clock_use_exception(
          "apgas::clocked_async: the calling activity is not registered on one of the clocks (an activity can only "
          "register a child on a clock it is registered on itself)");
    }
    prs.push_back(pr);
  }
  auto& cr = regs_of(child);
  for (clock_registration* pr : prs) {
    if (find(child, pr->clock) != nullptr) continue;  // the same clock listed twice
    clock_state& c = *pr->clock;
    {
      std::lock_guard lock(c.mutex);
      c.registered += 1;
      if (pr->resumed && pr->phase == c.phase) c.arrived += 1;
    }
    c.retain();
    cr.regs.push_back({&c, pr->phase, pr->resumed});
  }
}

void spawn_registered(task& parent, task* t, clock_state* const* cs, std::size_t n) {
  t->governing = parent.innermost;
  t->innermost = parent.innermost;
  try {
    inherit(parent, *t, cs, n);
  } catch (...) {
    if (t->clocks != nullptr) drop_all_clocks(*t);
    delete t;
    throw;
  }
  if (parent.clocks != nullptr && parent.clocks->implicit != nullptr) regs_of(*t).implicit = parent.clocks->implicit;
  push_task(t);
}

// The calling activity, which must be outside atomic/when; `owned` (a task not yet spawned) is freed on error.
task& clock_caller(const char* what, task* owned = nullptr) {
  try {
    return require_unrestricted_activity(what);
  } catch (...) {
    delete owned;
    throw;
  }
}

}  // namespace

void drop_all_clocks(task& t) noexcept {
  while (!t.clocks->regs.empty()) drop_registration(t, &t.clocks->regs.back());
  delete t.clocks;
  t.clocks = nullptr;
}

void spawn_clocked(task* t, const clock* clocks, std::size_t n) {
  task& parent = clock_caller("apgas::clocked_async", t);
  std::vector<clock_state*> cs(n);
  for (std::size_t i = 0; i < n; ++i) cs[i] = clocks[i].state();
  spawn_registered(parent, t, cs.data(), n);
}

void spawn_implicit_clocked(task* t) {
  task& parent = clock_caller("apgas::clocked_async", t);
  clock_state* c = parent.clocks != nullptr ? parent.clocks->implicit : nullptr;
  if (c == nullptr) {
    delete t;
    throw clock_use_exception("apgas::clocked_async(f) without a clock list must be inside a clocked_finish");
  }
  spawn_registered(parent, t, &c, 1);
}

void run_clocked_finish(function_ref<void()> body) {
  task& cur = clock_caller("apgas::clocked_finish");
  clock c = clock::make();
  auto& regs = regs_of(cur);
  clock_state* const saved = regs.implicit;
  regs.implicit = c.state();
  struct restore {
    task& cur;
    clock_state* saved;
    clock_state* mine;
    ~restore() {
      // The body drops the implicit clock when it ends (it may have dropped it already).
      if (clock_registration* r = find(cur, mine)) drop_registration(cur, r);
      if (cur.clocks != nullptr) cur.clocks->implicit = saved;
    }
  };
  run_finish([&] {
    restore r{cur, saved, c.state()};
    body();
  });
}

}  // namespace apgas::detail

namespace apgas {

using detail::clock_state;

clock clock::make() {
  detail::task& cur = detail::clock_caller("apgas::clock::make");
  auto* s = new clock_state;  // refs = 1: this handle
  s->registered = 1;
  s->retain();                // the registration
  detail::regs_of(cur).regs.push_back({s, 1, false});
  return clock(s);
}

clock::clock(const clock& other) noexcept : s_(other.s_) {
  if (s_ != nullptr) s_->retain();
}

clock& clock::operator=(const clock& other) noexcept {
  if (other.s_ != nullptr) other.s_->retain();
  if (s_ != nullptr) s_->release();
  s_ = other.s_;
  return *this;
}

clock& clock::operator=(clock&& other) noexcept {
  if (this != &other) {
    if (s_ != nullptr) s_->release();
    s_ = std::exchange(other.s_, nullptr);
  }
  return *this;
}

clock::~clock() {
  if (s_ != nullptr) s_->release();
}

void clock::advance() {
  detail::task& cur = detail::clock_caller("apgas::clock::advance");
  detail::advance_registration(detail::registered_or_throw(cur, s_, "advance"));
}

void clock::resume() {
  detail::task& cur = detail::clock_caller("apgas::clock::resume");
  detail::clock_registration& r = detail::registered_or_throw(cur, s_, "resume");
  if (r.resumed) return;
  std::vector<detail::fiber_ctx*> ws;
  {
    std::lock_guard lock(s_->mutex);
    ws = detail::arrive_locked(*s_, r);
  }
  detail::wake_all(ws);
}

void clock::drop() {
  detail::task& cur = detail::clock_caller("apgas::clock::drop");
  detail::drop_registration(cur, &detail::registered_or_throw(cur, s_, "drop"));
  if (cur.clocks->regs.empty() && cur.clocks->implicit == nullptr) {
    delete cur.clocks;
    cur.clocks = nullptr;
  }
}

bool clock::registered() const {
  detail::task& cur = detail::require_activity("apgas::clock::registered");
  return s_ != nullptr && detail::find(cur, s_) != nullptr;
}

int clock::phase() const {
  detail::task& cur = detail::clock_caller("apgas::clock::phase");
  const detail::clock_registration& r = detail::registered_or_throw(cur, s_, "phase");
  // An activity that has arrived is still in its phase until it advances.
  return r.phase;
}

namespace {
// Arrive on every clock the activity is registered on (and has not arrived on yet).
void arrive_all(detail::task& cur) {
  if (cur.clocks == nullptr) return;
  for (auto& r : cur.clocks->regs) {
    if (r.resumed) continue;
    std::vector<detail::fiber_ctx*> ws;
    {
      std::lock_guard lock(r.clock->mutex);
      ws = detail::arrive_locked(*r.clock, r);
    }
    detail::wake_all(ws);
  }
}
}  // namespace

void advance_all() {
  detail::task& cur = detail::clock_caller("apgas::advance_all");
  // Arrive on every clock first, then wait on each: waiting on one before arriving on another could deadlock.
  arrive_all(cur);
  if (cur.clocks == nullptr) return;
  for (std::size_t i = 0; i < cur.clocks->regs.size(); ++i) detail::advance_registration(cur.clocks->regs[i]);
}

void resume_all() { arrive_all(detail::clock_caller("apgas::resume_all")); }

}  // namespace apgas
