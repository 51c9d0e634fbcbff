// Clocks, at one host place or across several (docs/decisions/0011-clocks-across-hosts.md).
//
// A clock is named by a 64-bit id: its home place (where clock::make ran) and a serial number there. State:
//  - per activity (task::clocks): for each clock, its phase and whether it has arrived ("resumed") in that phase;
//  - per place with registrations (clock_node, found by id in this place's table): the phase this place knows, the
//    number of registrations here and how many of them have arrived in that phase, the activities parked in
//    advance(), and the changes not yet reported to the home (`pending`: per place, registrations made/dropped and
//    arrivals counted);
//  - at the home only (clock_home, owned by the home's node): the phase, and per place the registrations and the
//    arrivals in the phase that the home has been told of.
//
// Protocol:
//  - A node reports its pending changes to the home, in one message tagged with its phase, when it is *complete*:
//    every registration here has arrived (or there is none left). In the steady state that is one message per place
//    per phase. At the home a change is applied to the record at once (there, program order is report order).
//  - The home moves to the next phase when, for every place, arrivals == registrations (and some registration is
//    left), and then announces the phase once to every place with registrations. An announcement that finds a
//    place already in that phase does nothing.
//  - A registration made for another place (clocked_async_at, or one that moves with `at`) is counted by the place
//    that makes it (+1 registration there, +1 arrival there when the parent has arrived in the current phase) in
//    that place's next report; the parent (or the mover) is still counted as not arrived until that report, so the
//    home cannot move on without the child. This is the counting argument of the distributed finish: a registration
//    not yet known to the home is always covered by one that is known and has not arrived.
//  - Arrivals in a report count only when its tag is the home's phase (older arrivals are moot: their phase is
//    over). A report with an older tag, or one that registers a child in an older phase, makes the home send its
//    phase to the places concerned, so a place that joined late learns the phase it missed.
//  - A place receiving a registration in a phase newer than its own moves to that phase first (the sender had
//    learnt it from the home). A new node at another place reports once when complete, even with nothing to say,
//    so the home can tell it a phase it missed.
//
// Invariants (under clock_node::mutex):
//  - 0 <= arrived <= reg; `arrived` counts the registrations here with phase == node phase that have resumed;
//  - complete (arrived == reg) implies pending is empty and sync is false (a complete node reports at once);
//  - at the home: the node's phase is the home's phase.
#include "clock_dist.hpp"
#include "finish.hpp"
#include "runtime.hpp"
#include "scheduler.hpp"
#include <apgas/detail/spin_mutex.hpp>

#include <apgas/clock.hpp>
#include <apgas/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace apgas::detail {

struct clock_home {
  int phase = 1;
  std::vector<long> reg, arr;  // per host place
  int unbalanced = 0;          // places with reg != arr
  int nonzero = 0;             // places with reg != 0

  void add(int q, long dr, long da) {
    long& r = reg[static_cast<std::size_t>(q)];
    long& a = arr[static_cast<std::size_t>(q)];
    const bool ub = r != a;
    const bool nz = r != 0;
    r += dr;
    a += da;
    unbalanced += static_cast<int>(r != a) - static_cast<int>(ub);
    nonzero += static_cast<int>(r != 0) - static_cast<int>(nz);
  }
};

struct clock_node {
  std::uint64_t id = 0;
  int home = 0;
  int refs = 0;  // registrations here, messages being handled, +1 while `rec` lives; under the table's mutex
  spin_mutex mutex;
  std::atomic<int> phase{1};  // written under mutex; read without it by a poller in advance()
  int reg = 0;
  int arrived = 0;
  bool sync = false;
  bool changed = false;  // at the home: rec changed since the last decision
  std::vector<fiber_ctx*> waiters;
  std::vector<clock_delta> pending;
  clock_home* rec = nullptr;  // at the home, while the clock lives

  bool complete() const noexcept { return arrived == reg; }
  // A change for the home: at the home applied at once (program order is report order there), elsewhere kept for
  // the next report.
  void add_pending(int q, long dr, long da) {
    if (rec != nullptr) {
      rec->add(q, dr, da);
      changed = true;
      return;
    }
    for (auto& d : pending) {
      if (d.place == q) {
        d.reg += dr;
        d.arr += da;
        return;
      }
    }
    pending.push_back({q, dr, da});
  }
};

struct clock_registration {
  std::uint64_t id;
  clock_node* node;
  int phase;
  bool resumed;
};

struct clock_registrations {
  std::vector<clock_registration> regs;
  std::uint64_t implicit = 0;  // the clock of the innermost clocked_finish (registered or not)
};

namespace {

// ---- this place's table of nodes ----

struct node_table {
  spin_mutex mutex;
  std::unordered_map<std::uint64_t, clock_node*> nodes;
  std::atomic<std::uint64_t> next_serial{1};
};

node_table& table() {
  static auto* t = new node_table;  // never destroyed: handlers may run during static destruction of other TUs
  return *t;
}

int here_rank() noexcept { return tree().here_host; }
int host_count() noexcept { return tree().num_hosts; }

clock_node* find_node_retained(std::uint64_t id) {
  node_table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.nodes.find(id);
  if (it == t.nodes.end()) return nullptr;
  it->second->refs += 1;
  return it->second;
}

void release_node(clock_node* n) noexcept {
  node_table& t = table();
  bool gone = false;
  {
    std::lock_guard lock(t.mutex);
    if (--n->refs == 0) {
      t.nodes.erase(n->id);
      gone = true;
    }
  }
  if (gone) {
    delete n->rec;
    delete n;
  }
}

// What a change under a node's lock leaves to do once it is unlocked: wake, send, release.
struct after_unlock {
  std::vector<fiber_ctx*> woken;
  std::vector<clock_delta> report;  // to the home (another place)
  std::int32_t report_tag = 0;
  std::uint64_t report_seq = 0;
  bool send_report = false;
  std::vector<int> announce;        // at the home: places to send the phase to
  std::int32_t announce_phase = 0;
  bool release_rec = false;         // at the home: the clock ended, the record's reference goes

  void run(clock_node& n) {
    // The other places first: they are further away than the activities woken here.
    if (send_report) clock_send_report(n.home, report_seq, n.id, report_tag, report);
    for (int q : announce) clock_send_phase(q, n.id, announce_phase);
    for (fiber_ctx* f : woken) wake(f);
    if (release_rec) release_node(&n);
  }
};

// Under n.mutex: move the node to phase p (> its phase): wake the activities parked in advance(); arrivals pending
// for the old phase are moot.
void advance_node_locked(clock_node& n, int p, after_unlock& out) {
  n.phase.store(p, std::memory_order_release);
  n.arrived = 0;
  if (out.woken.empty()) {
    out.woken.swap(n.waiters);  // no copy, no allocation
  } else {
    out.woken.insert(out.woken.end(), n.waiters.begin(), n.waiters.end());
    n.waiters.clear();
  }
  for (auto& d : n.pending) d.arr = 0;
  std::erase_if(n.pending, [](const clock_delta& d) { return d.reg == 0 && d.arr == 0; });
}

void add_announce(after_unlock& out, int q) {
  if (std::find(out.announce.begin(), out.announce.end(), q) == out.announce.end()) out.announce.push_back(q);
}

void decide_locked(clock_node& n, after_unlock& out);

// Under n.mutex, at the home: apply a report from `src`.
void apply_locked(clock_node& n, int src, std::int32_t tag, const std::vector<clock_delta>& ds, after_unlock& out) {
  clock_home& h = *n.rec;
  const int here = here_rank();
  for (const auto& d : ds) {
    h.add(d.place, d.reg, tag == h.phase ? d.arr : 0);
    if (tag < h.phase && d.reg > 0 && d.place != here) add_announce(out, d.place);
  }
  if (tag < h.phase && src != here) add_announce(out, src);
  decide_locked(n, out);
}

// Under n.mutex, at the home, after a change of the record: the next phase, or the end of the clock.
void decide_locked(clock_node& n, after_unlock& out) {
  clock_home& h = *n.rec;
  const int here = here_rank();
  if (h.unbalanced == 0 && h.nonzero > 0) {
    h.phase += 1;
    std::fill(h.arr.begin(), h.arr.end(), 0L);
    h.unbalanced = h.nonzero;
    for (int q = 0; q < static_cast<int>(h.reg.size()); ++q) {
      if (q != here && h.reg[static_cast<std::size_t>(q)] > 0) add_announce(out, q);
    }
    advance_node_locked(n, h.phase, out);
  }
  out.announce_phase = h.phase;
  if (h.nonzero == 0 && n.reg == 0 && n.pending.empty()) {
    // Every registration everywhere is gone: the clock has ended. The node goes with its last reference.
    delete n.rec;
    n.rec = nullptr;
    out.release_rec = true;
  }
}

// Under n.mutex, after any change: a complete node reports (at the home: applies) what it has pending.
void settle_locked(clock_node& n, after_unlock& out) {
  if (n.rec != nullptr) {
    if (n.changed) {
      n.changed = false;
      decide_locked(n, out);
    }
    return;
  }
  if (!n.complete() || (n.pending.empty() && !n.sync)) return;
  std::vector<clock_delta> ds = std::move(n.pending);
  n.pending.clear();
  n.sync = false;
  const std::int32_t tag = n.phase.load(std::memory_order_relaxed);
  if (n.home == here_rank()) {
    std::fprintf(stderr, "apgas: clock %llu: a change at its home after it ended; ignored\n",
                 static_cast<unsigned long long>(n.id));
  } else {
    // Numbered here, under the lock: the home applies this place's reports in the order they were made.
    for (auto& d : ds) {
      bool merged = false;
      for (auto& e : out.report) {
        if (e.place == d.place) {
          e.reg += d.reg;
          e.arr += d.arr;
          merged = true;
        }
      }
      if (!merged) out.report.push_back(d);
    }
    out.report_tag = tag;
    if (!out.send_report) out.report_seq = clock_next_seq(n.home);  // one number per message sent
    out.send_report = true;
  }
}

template <class Change>
void with_node(clock_node& n, Change change) {
  after_unlock out;
  {
    std::lock_guard lock(n.mutex);
    change(out);
    settle_locked(n, out);
  }
  out.run(n);
}

// ---- registrations of an activity ----

clock_registration* find(task& t, std::uint64_t id) noexcept {
  if (t.clocks == nullptr || id == 0) return nullptr;
  for (auto& r : t.clocks->regs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

clock_registration& registered_or_throw(task& t, std::uint64_t id, const char* op) {
  clock_registration* r = find(t, id);
  if (r == nullptr) {
    throw clock_use_exception(std::string("apgas::clock::") + op + ": the calling activity (at place " +
                              std::to_string(here_rank()) +
                              ") is not registered on this clock (never registered, dropped, or a moved-from "
                              "clock)");
  }
  return *r;
}

clock_registrations& regs_of(task& t) {
  if (t.clocks == nullptr) t.clocks = new clock_registrations;
  return *t.clocks;
}

void remove_registration(task& t, clock_registration* r) {
  auto& v = t.clocks->regs;
  v.erase(v.begin() + (r - v.data()));
}

void drop_registration(task& t, clock_registration* r) noexcept {
  clock_node& n = *r->node;
  const int here = here_rank();
  const int rphase = r->phase;
  const bool resumed = r->resumed;
  with_node(n, [&](after_unlock&) {
    n.reg -= 1;
    const bool counted = resumed && rphase == n.phase.load(std::memory_order_relaxed);
    if (counted) n.arrived -= 1;
    n.add_pending(here, -1, counted ? -1 : 0);
  });
  remove_registration(t, r);
  release_node(&n);
}

void arrive(clock_registration& r) {
  clock_node& n = *r.node;
  r.resumed = true;
  with_node(n, [&](after_unlock&) {
    if (r.phase == n.phase.load(std::memory_order_relaxed)) {
      n.arrived += 1;
      n.add_pending(here_rank(), 0, +1);
    }
  });
}

struct wait_ctx {
  clock_node* node;
  int phase;
};

void wait_phase_after(clock_registration& r) {
  clock_node& n = *r.node;
  wait_ctx ctx{&n, r.phase};
  auto passed = [](const void* c) {
    const auto* w = static_cast<const wait_ctx*>(c);
    return w->node->phase.load(std::memory_order_acquire) > w->phase;
  };
  if (!passed(&ctx) && !(host_count() > 1 && poll_until(passed, &ctx))) {
    n.mutex.lock();
    if (n.phase.load(std::memory_order_relaxed) > r.phase) {
      n.mutex.unlock();
    } else {
      park(
          [](fiber_ctx* self, void* arg) {
            auto* node = static_cast<clock_node*>(arg);
            node->waiters.push_back(self);
            node->mutex.unlock();
          },
          &n);
    }
  }
  r.phase += 1;
  r.resumed = false;
}

void advance_registration(clock_registration& r) {
  if (!r.resumed) arrive(r);
  wait_phase_after(r);
}

// The parent's registrations on the clocks `cs`; clock_use_exception (nothing changed, `what` names the spawn) if it
// lacks one.
std::vector<clock_registration*> parent_registrations(task& parent, const std::uint64_t* cs, std::size_t n,
                                                      const char* what = "apgas::clocked_async") {
  std::vector<clock_registration*> prs;
  prs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    clock_registration* pr = find(parent, cs[i]);
    if (pr == nullptr) {
      throw clock_use_exception(
          std::string(what) + ": the calling activity (at place " + std::to_string(here_rank()) +
          ") is not registered on one of the clocks (an activity can only register a child on a clock it is "
          "registered on itself)");
    }
    if (std::find(prs.begin(), prs.end(), pr) == prs.end()) prs.push_back(pr);  // the same clock listed twice
  }
  return prs;
}

std::vector<std::uint64_t> ids_of(task& parent, const clock* cs, std::size_t n, bool implicit,
                                  const char* what = "apgas::clocked_async") {
  if (implicit) {
    const std::uint64_t c = parent.clocks != nullptr ? parent.clocks->implicit : 0;
    if (c == 0) throw clock_use_exception(std::string(what) + "(f) without a clock list must be inside a clocked_finish");
    return {c};
  }
  std::vector<std::uint64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = cs[i].id();
  return ids;
}

// Register `child` (here) on the parent's clocks with the parent's phase and arrival state.
void inherit_here(task& parent, task& child, const std::vector<std::uint64_t>& ids, const char* what) {
  std::vector<clock_registration*> prs = parent_registrations(parent, ids.data(), ids.size(), what);
  auto& cr = regs_of(child);
  const int here = here_rank();
  for (clock_registration* pr : prs) {
    clock_node& n = *pr->node;
    {
      std::lock_guard lock(table().mutex);
      n.refs += 1;
    }
    const int phase = pr->phase;
    const bool resumed = pr->resumed;
    with_node(n, [&](after_unlock&) {
      n.reg += 1;
      const bool counted = resumed && phase == n.phase.load(std::memory_order_relaxed);
      if (counted) n.arrived += 1;
      n.add_pending(here, +1, counted ? +1 : 0);
    });
    cr.regs.push_back({pr->id, &n, phase, resumed});
  }
}

void spawn_registered(task& parent, task* t, const std::vector<std::uint64_t>& ids, const char* what) {
  t->governing = parent.innermost;
  t->innermost = parent.innermost;
  try {
    inherit_here(parent, *t, ids, what);
  } catch (...) {
    if (t->clocks != nullptr) drop_all_clocks(*t);
    delete t;
    throw;
  }
  if (parent.clocks != nullptr && parent.clocks->implicit != 0) regs_of(*t).implicit = parent.clocks->implicit;
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

void write_registration(writer& w, const clock_registration& r) {
  w & r.id & static_cast<std::int32_t>(r.phase) & static_cast<std::uint8_t>(r.resumed ? 1 : 0);
}

}  // namespace

void drop_all_clocks(task& t) noexcept {
  while (!t.clocks->regs.empty()) drop_registration(t, &t.clocks->regs.back());
  delete t.clocks;
  t.clocks = nullptr;
}

void spawn_clocked(task* t, const clock* clocks, std::size_t n, const char* what) {
  task& parent = clock_caller(what, t);
  std::vector<std::uint64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = clocks[i].id();
  spawn_registered(parent, t, ids, what);
}

void spawn_implicit_clocked(task* t, const char* what) {
  task& parent = clock_caller(what, t);
  std::vector<std::uint64_t> ids;
  try {
    ids = ids_of(parent, nullptr, 0, true, what);
  } catch (...) {
    delete t;
    throw;
  }
  spawn_registered(parent, t, ids, what);
}

void check_clocked_spawn(const clock* cs, std::size_t n, bool implicit) {
  task& parent = clock_caller("apgas::clocked_async_at");
  std::vector<std::uint64_t> ids = ids_of(parent, cs, n, implicit, "apgas::clocked_async_at");
  (void)parent_registrations(parent, ids.data(), ids.size(), "apgas::clocked_async_at");
}

void clock_write_child(task& parent, const clock* cs, std::size_t n, bool implicit, int dst, writer& w) {
  std::vector<std::uint64_t> ids = ids_of(parent, cs, n, implicit, "apgas::clocked_async_at");
  std::vector<clock_registration*> prs = parent_registrations(parent, ids.data(), ids.size(), "apgas::clocked_async_at");
  w & (parent.clocks != nullptr ? parent.clocks->implicit : std::uint64_t{0});
  w.write_length(prs.size());
  for (clock_registration* pr : prs) {
    clock_node& n = *pr->node;
    with_node(n, [&](after_unlock&) {
      const bool counted = pr->resumed && pr->phase == n.phase.load(std::memory_order_relaxed);
      n.add_pending(dst, +1, counted ? +1 : 0);
    });
    write_registration(w, *pr);
  }
}

bool clock_carried(const task& t) noexcept {
  return t.clocks != nullptr && (!t.clocks->regs.empty() || t.clocks->implicit != 0);
}

void clock_write_moved(task& t, int dst, writer& w) {
  w & (t.clocks != nullptr ? t.clocks->implicit : std::uint64_t{0});
  const std::size_t count = t.clocks != nullptr ? t.clocks->regs.size() : 0;
  w.write_length(count);
  if (count == 0) return;
  const int here = here_rank();
  for (clock_registration& r : t.clocks->regs) {
    clock_node& n = *r.node;
    with_node(n, [&](after_unlock&) {
      n.reg -= 1;
      const bool counted = r.resumed && r.phase == n.phase.load(std::memory_order_relaxed);
      if (counted) n.arrived -= 1;
      n.add_pending(here, -1, counted ? -1 : 0);
      n.add_pending(dst, +1, counted ? +1 : 0);
    });
    write_registration(w, r);
    release_node(&n);
  }
  t.clocks->regs.clear();
}

void clock_read_into(task& t, reader& r, bool keep_implicit) {
  std::uint64_t implicit = 0;
  r & implicit;
  const int hosts = host_count();
  const int here = here_rank();
  struct entry {
    std::uint64_t id;
    std::int32_t phase;
    std::uint8_t resumed;
  };
  // Read and check everything first: a malformed trailer changes nothing.
  std::vector<entry> es(r.read_length(13, "clock registrations"));
  for (auto& e : es) {
    r & e.id & e.phase & e.resumed;
    if (e.id == 0 || static_cast<int>(e.id >> 48) >= hosts || e.phase < 1 || e.resumed > 1) {
      throw serialization_error("apgas: malformed message: clock registration (clock " + std::to_string(e.id) +
                                ", phase " + std::to_string(e.phase) + ", " + std::to_string(hosts) +
                                " host places)");
    }
  }
  auto& regs = regs_of(t);
  if (!keep_implicit) regs.implicit = implicit;
  for (const entry& e : es) {
    const int home = static_cast<int>(e.id >> 48);
    clock_node* n = nullptr;
    {
      node_table& tb = table();
      std::lock_guard lock(tb.mutex);
      clock_node*& slot = tb.nodes[e.id];
      if (slot == nullptr) {
        slot = new clock_node;
        slot->id = e.id;
        slot->home = home;
        slot->phase.store(e.phase, std::memory_order_relaxed);
        slot->sync = home != here;  // tell the home we are here: it answers with its phase if we missed one
        if (home == here) {
          std::fprintf(stderr, "apgas: place %d: a registration on clock %llu, which has ended here\n", here,
                       static_cast<unsigned long long>(e.id));
        }
      }
      slot->refs += 1;
      n = slot;
    }
    with_node(*n, [&](after_unlock& out) {
      if (e.phase > n->phase.load(std::memory_order_relaxed)) advance_node_locked(*n, e.phase, out);
      n->reg += 1;
      // An arrival the sender has counted already.
      if (e.resumed != 0 && e.phase == n->phase.load(std::memory_order_relaxed)) n->arrived += 1;
    });
    regs.regs.push_back({e.id, n, e.phase, e.resumed != 0});
  }
}

void clock_apply_report(int src, std::uint64_t id, std::int32_t tag, const std::vector<clock_delta>& ds) {
  const int hosts = host_count();
  for (const auto& d : ds) {
    if (d.place < 0 || d.place >= hosts) {
      throw serialization_error("apgas: malformed clock report: place " + std::to_string(d.place) + " (there are " +
                                std::to_string(hosts) + ")");
    }
  }
  clock_node* n = find_node_retained(id);
  if (n == nullptr || n->home != here_rank()) {
    std::fprintf(stderr, "apgas: place %d: a report from place %d for clock %llu, which is not alive here\n",
                 here_rank(), src, static_cast<unsigned long long>(id));
    if (n != nullptr) release_node(n);
    return;
  }
  after_unlock out;
  {
    std::lock_guard lock(n->mutex);
    if (n->rec != nullptr) {
      apply_locked(*n, src, tag, ds, out);
      settle_locked(*n, out);
    }
  }
  out.run(*n);
  release_node(n);
}

void clock_apply_phase(std::uint64_t id, std::int32_t phase) {
  clock_node* n = find_node_retained(id);
  if (n == nullptr) return;  // no registration here any more (or not yet: the newcomer's report will ask)
  with_node(*n, [&](after_unlock& out) {
    if (phase > n->phase.load(std::memory_order_relaxed)) advance_node_locked(*n, phase, out);
  });
  release_node(n);
}

void run_clocked_finish(function_ref<void()> body) {
  task& cur = clock_caller("apgas::clocked_finish");
  clock c = clock::make();
  auto& regs = regs_of(cur);
  const std::uint64_t saved = regs.implicit;
  regs.implicit = c.id();
  struct restore {
    task& cur;
    std::uint64_t saved;
    std::uint64_t mine;
    ~restore() {
      // The body drops the implicit clock when it ends (it may have dropped it already).
      if (clock_registration* r = find(cur, mine)) drop_registration(cur, r);
      if (cur.clocks != nullptr) cur.clocks->implicit = saved;
    }
  };
  run_finish([&] {
    restore r{cur, saved, c.id()};
    body();
  });
}

}  // namespace apgas::detail

namespace apgas {

using detail::clock_node;

clock clock::make() {
  detail::task& cur = detail::clock_caller("apgas::clock::make");
  const int here = detail::here_rank();
  auto& tb = detail::table();
  const std::uint64_t id =
      (static_cast<std::uint64_t>(here) << 48) | tb.next_serial.fetch_add(1, std::memory_order_relaxed);
  auto* n = new clock_node;
  n->id = id;
  n->home = here;
  n->reg = 1;
  n->refs = 2;  // the registration and the home record
  n->rec = new detail::clock_home;
  n->rec->reg.assign(static_cast<std::size_t>(detail::host_count()), 0);
  n->rec->arr.assign(static_cast<std::size_t>(detail::host_count()), 0);
  n->rec->add(here, +1, 0);
  {
    std::lock_guard lock(tb.mutex);
    tb.nodes.emplace(id, n);
  }
  detail::regs_of(cur).regs.push_back({id, n, 1, false});
  return clock(id);
}

void clock::advance() const {
  detail::task& cur = detail::clock_caller("apgas::clock::advance");
  detail::advance_registration(detail::registered_or_throw(cur, id_, "advance"));
}

void clock::resume() const {
  detail::task& cur = detail::clock_caller("apgas::clock::resume");
  detail::clock_registration& r = detail::registered_or_throw(cur, id_, "resume");
  if (!r.resumed) detail::arrive(r);
}

void clock::drop() const {
  detail::task& cur = detail::clock_caller("apgas::clock::drop");
  detail::drop_registration(cur, &detail::registered_or_throw(cur, id_, "drop"));
  if (cur.clocks->regs.empty() && cur.clocks->implicit == 0) {
    delete cur.clocks;
    cur.clocks = nullptr;
  }
}

bool clock::registered() const {
  detail::task& cur = detail::require_activity("apgas::clock::registered");
  return detail::find(cur, id_) != nullptr;
}

int clock::phase() const {
  detail::task& cur = detail::clock_caller("apgas::clock::phase");
  // An activity that has arrived is still in its phase until it advances.
  return detail::registered_or_throw(cur, id_, "phase").phase;
}

void advance_all() {
  detail::task& cur = detail::clock_caller("apgas::advance_all");
  if (cur.clocks == nullptr) return;
  // Arrive on every clock first, then wait on each: waiting on one before arriving on another could deadlock.
  for (auto& r : cur.clocks->regs) {
    if (!r.resumed) detail::arrive(r);
  }
  for (std::size_t i = 0; i < cur.clocks->regs.size(); ++i) detail::wait_phase_after(cur.clocks->regs[i]);
}

void resume_all() {
  detail::task& cur = detail::clock_caller("apgas::resume_all");
  if (cur.clocks == nullptr) return;
  for (auto& r : cur.clocks->regs) {
    if (!r.resumed) detail::arrive(r);
  }
}

}  // namespace apgas
