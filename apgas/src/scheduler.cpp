#include "scheduler.hpp"

#include "finish.hpp"
#include "obs.hpp"
#include "runtime.hpp"
#include "stack.hpp"

#include <apgas/error.hpp>

#include <cxxabi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace apgas::detail {
namespace {

std::atomic<scheduler*> g_scheduler{nullptr};
thread_local worker* t_worker = nullptr;
std::atomic<long> g_live_fibers{0};  // for diagnostics

// Spin rounds an idle worker makes before it goes to sleep: the first round of a search looks at up to max_scan
// deques, the later ones at steal_victims (a scan of every deque per round made 2048 idle workers take seconds to
// start). On an oversubscribed host a spinning worker takes the CPU from one with work: few rounds, each ending with
// a yield.
constexpr int idle_spin_rounds = 256;
constexpr int oversubscribed_spin_rounds = 16;
constexpr std::size_t steal_victims = 8;  // per round, beyond the first round of each search
// At most this many deques in a round's steals: a place with thousands of workers (APGAS_NTHREADS up to 4096) would
// otherwise spend seconds of CPU in scans at start-up and shut-down alone. The last look before sleeping (last_look)
// reads every started deque's size and steals only where it sees an item: a worker never sleeps while an item it
// could take is visible (its owner may be held in the operating system for as long as the item waits: items left
// behind by a worker blocked in read() hung a place of 700 workers).
constexpr std::size_t max_scan = 256;
// The idle poller's naps (with a polled backend): from the first, doubled after each fruitless one up to the cap
// (on an oversubscribed host; otherwise the CPUs are there to spare and the nap stays short, for latency).
constexpr int first_nap_us = 50;
constexpr int oversubscribed_nap_cap_us = 1000;

int usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Stack allocator that also tells the sanitizers where the new stack is.
struct marking_allocator {
  guarded_stack_allocator inner;
  fiber_ctx* ctx;
  boost::context::stack_context allocate() {
    boost::context::stack_context sc = inner.allocate();
    ctx->marks.stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    ctx->marks.stack_size = sc.size;
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept { inner.deallocate(sc); }
};

// Every switch is a plain resume(); the fiber that gets control completes the *handoff* its predecessor left in the
// worker: it stores the predecessor's continuation (returned by resume(), or passed to a new fiber's entry) and
// then runs the predecessor's publish function. So publish runs only once the predecessor is fully suspended.
void complete_handoff(fiber_ctx* self, boost::context::fiber&& back) {
  worker* w = this_worker();
  const handoff h = w->pending;
  san::after_switch(self->marks, &h.from->marks);
  h.from->cont = std::move(back);
  w->running = self;
  w->current_task = self->current;
  if (obs::on(obs::cat_all)) [[unlikely]] obs::switched(h.from, self);  // before publish: `from` is not yet findable
  if (h.publish != nullptr) h.publish(h.from, h.arg);
}

// Switch from `from` (running now on worker `w`) to `to` (suspended); returns when `from` is resumed, perhaps on
// another worker (complete_handoff reads that one).
// The thread's exception-handling state goes with the fiber (eh_state.hpp): saved into `from`, `to`'s installed; when
// `from` is resumed, whoever resumes it has installed its state on that thread.
void switch_to(worker* w, fiber_ctx* from, fiber_ctx* to, publish_fn publish, void* arg) {
  w->pending = handoff{from, publish, arg};
  eh_state* const eh = w->eh;
  from->eh = *eh;
  *eh = to->eh;
  san::before_switch(from->marks, to->marks);
  boost::context::fiber back = std::move(to->cont).resume();
  complete_handoff(from, std::move(back));
}

boost::context::fiber loop_main(fiber_ctx* self);

fiber_ctx* make_loop_fiber(worker* w) {
  scheduler* s = the_scheduler();
  auto ctx_owner = std::make_unique<fiber_ctx>();
  fiber_ctx* ctx = ctx_owner.get();
  san::create_fiber(ctx->marks);
  san::tsan_enter(ctx->marks);  // Boost's constructor briefly enters the new stack
  try {
    ctx->cont = boost::context::fiber(std::allocator_arg,
                                      marking_allocator{guarded_stack_allocator(s->stack_size()), ctx},
                                      [ctx](boost::context::fiber&& back) {
                                        complete_handoff(ctx, std::move(back));
                                        return loop_main(ctx);
                                      });
  } catch (...) {
    san::tsan_enter(w->running->marks);
    san::destroy_fiber(ctx->marks);
    throw;
  }
  san::tsan_enter(w->running->marks);
  g_live_fibers.fetch_add(1, std::memory_order_relaxed);
  return ctx_owner.release();
}

// Resume a woken fiber from the top of a loop; this loop fiber goes into the worker's pool.
void resume_parked(worker* w, fiber_ctx* target) {
  fiber_ctx* self = w->running;
  self->current = nullptr;
  switch_to(w, self, target, [](fiber_ctx* from, void*) { the_scheduler()->pool_fiber(this_worker(), from); },
            nullptr);
}

boost::context::fiber loop_main(fiber_ctx* self) {
  for (;;) {
    worker* w = this_worker();  // re-read each round: this fiber may have moved to another thread
    const work_deque::item it = the_scheduler()->find_work(w);
    if (it == 0) break;
    if (is_fiber(it)) {
      resume_parked(w, item_fiber(it));
    } else {
      run_task(item_task(it));
    }
  }
  worker* w = this_worker();
  w->exited = self;
  san::before_switch(self->marks, w->thread_ctx.marks, /*leaving_for_good=*/true);
  return std::move(w->thread_ctx.cont);
}

// Enter `f` from the thread's own stack and come back when a loop fiber has ended on this thread.
void run_until_exit(worker* w, fiber_ctx* f) {
  w->pending = handoff{&w->thread_ctx, nullptr, nullptr};
  eh_state* const eh = w->eh;
  w->thread_ctx.eh = *eh;  // (a thread that calls apgas::run from a catch handler keeps its handler)
  *eh = f->eh;
  san::before_switch(w->thread_ctx.marks, f->marks);
  // Only a loop fiber that ends comes back here (Boost frees its stack on the way); nothing to take over.
  (void)std::move(f->cont).resume();
  san::after_switch(w->thread_ctx.marks, nullptr);
  *eh = w->thread_ctx.eh;  // (the loop fiber ended at the top of its loop: no handler open)
  fiber_ctx* dead = std::exchange(w->exited, nullptr);
  san::destroy_fiber(dead->marks);
  delete dead;  // its stack was released by Boost when it ended
  g_live_fibers.fetch_sub(1, std::memory_order_relaxed);
  w->running = &w->thread_ctx;
  w->current_task = nullptr;
}

}  // namespace

scheduler* the_scheduler() noexcept { return g_scheduler.load(std::memory_order_acquire); }
void set_scheduler(scheduler* s) noexcept { g_scheduler.store(s, std::memory_order_release); }

[[gnu::noipa]] worker* this_worker() noexcept { return t_worker; }

[[gnu::noipa]] eh_state* thread_eh_state() noexcept {
  return reinterpret_cast<eh_state*>(abi::__cxa_get_globals());
}

[[gnu::noipa]] task* current_task() noexcept {
  worker* w = t_worker;
  return w != nullptr ? w->current_task : nullptr;
}

task& require_activity(const char* what) {
  task* t = current_task();
  if (t == nullptr) {
    throw illegal_operation_exception(std::string(what) +
                                      " must be called by an activity (inside apgas::run), not from this thread");
  }
  return *t;
}

task& require_unrestricted_activity(const char* what) {
  task& t = require_activity(what);
  if (t.atomic_depth > 0) {
    throw illegal_operation_exception(std::string(what) + " is illegal inside an atomic or when body");
  }
  if (t.in_kernel) {
    throw illegal_operation_exception(std::string(what) +
                                      " is illegal inside a kernel body (kernels may not spawn, wait or synchronise "
                                      "except through advance())");
  }
  return t;
}

scheduler::scheduler(const config& cfg, int places_on_host)
    : stack_size_(cfg.stack_size), kernel_check_(cfg.kernel_check) {
  install_overflow_handler();
  const int n = cfg.nthreads > 0 ? cfg.nthreads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // This process's workers against the CPUs it may use, and all places' workers against the host's CPUs (a
  // launcher that binds each process to its own CPUs makes the first the one that counts).
  const long host_cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const int usable = usable_cpus();
  oversubscribed_ = n > usable || static_cast<long>(places_on_host) * n > host_cpus;
  // Started at once: this place's share of the host's CPUs, no more than it may use, at least one (see start()).
  const long share = std::max(1L, host_cpus / std::max(1, places_on_host));
  first_workers_ = static_cast<std::size_t>(std::min<long>({static_cast<long>(n), share, static_cast<long>(usable)}));
  workers_.resize(static_cast<std::size_t>(n));  // each made when its thread starts (a deque of 8 KiB each)
}

void scheduler::start_worker(std::size_t i) {
  auto w = std::make_unique<worker>();
  w->index = static_cast<int>(i);
  w->solo = workers_.size() == 1;
  w->rng = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
  w->thread = std::thread([this, p = w.get()] { worker_main(p); });
  workers_[i] = std::move(w);
  started_.store(i + 1, std::memory_order_release);
}

void scheduler::start() {
  std::lock_guard lock(grow_mutex_);
  for (std::size_t i = 0; i < first_workers_; ++i) start_worker(i);
}

void scheduler::grow() noexcept {
  if (started_.load(std::memory_order_relaxed) >= workers_.size()) return;
  // Not a try-lock: every caller must get its worker (or see them all started), or an item could wait behind
  // workers that block in the operating system (a test: 64 activities that wait for each other, under TSan).
  std::lock_guard lock(grow_mutex_);
  if (grow_closed_ || stopping_.load(std::memory_order_acquire)) return;
  const std::size_t i = started_.load(std::memory_order_relaxed);
  if (i >= workers_.size()) return;
  try {
    start_worker(i);
  } catch (const std::exception& e) {  // std::system_error (no thread) or std::bad_alloc
    // Nothing is lost: the started workers run every item. Say so once; the setting asked for more.
    grow_closed_ = true;
    std::fprintf(stderr,
                 "apgas: warning: this place runs with %zu of its %zu workers: another worker thread could not be "
                 "started (%s); lower APGAS_NTHREADS, or raise the limit on threads (ulimit -u, "
                 "/proc/sys/kernel/threads-max)\n",
                 i, workers_.size(), e.what());
    std::fflush(stderr);
  }
}

scheduler::~scheduler() {
  stop();
  std::size_t n = 0;
  {
    std::lock_guard lock(grow_mutex_);  // no thread is being started, and none will be: join the started ones
    grow_closed_ = true;
    n = started_.load(std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (workers_[i]->thread.joinable()) workers_[i]->thread.join();
  }
}

void scheduler::stop() {
  stopping_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  epoch_.notify_all();
}

void scheduler::worker_main(worker* w) {
  t_worker = w;
  w->eh = thread_eh_state();
  enter_signal_stack();
  san::adopt_thread(w->thread_ctx.marks);
  w->running = &w->thread_ctx;
  fiber_ctx* first = nullptr;
  try {
    first = make_loop_fiber(w);
  } catch (const std::exception& e) {
    if (static_cast<std::size_t>(w->index) < first_workers_) {  // at start-up: the configuration cannot be met
      std::fprintf(stderr,
                   "apgas: worker %d could not create its first fiber (a stack of %zu bytes, APGAS_STACK_SIZE): %s\n",
                   w->index, stack_size_, e.what());
      std::fflush(stderr);
      end_process(2);
    }
    // A worker started later, on demand (decision 0016): the place runs on with the workers it has, as when a
    // thread cannot be started. This one never took an item (its deque is its own): it just ends.
    {
      std::lock_guard lock(grow_mutex_);
      grow_closed_ = true;
    }
    std::fprintf(stderr,
                 "apgas: warning: this place runs with %d of its %zu workers: worker %d could not create its first "
                 "fiber (a stack of %zu bytes, APGAS_STACK_SIZE): %s\n",
                 w->index, workers_.size(), w->index, stack_size_, e.what());
    std::fflush(stderr);
    leave_signal_stack();
    t_worker = nullptr;
    return;
  }
  run_until_exit(w, first);
  // Every activity has ended: the pooled loop fibers sit at the top of their loops; let each one end (the spare
  // pool's too: every fiber went into a pool before the activity that resumed it ended).
  while (!w->idle_fibers.empty()) {
    fiber_ctx* f = w->idle_fibers.back();
    w->idle_fibers.pop_back();
    run_until_exit(w, f);
  }
  while (fiber_ctx* f = spare_fiber()) run_until_exit(w, f);
  leave_signal_stack();
  t_worker = nullptr;
}

void scheduler::submit(work_deque::item it) {
  worker* w = this_worker();
  if (w != nullptr && the_scheduler() == this) {
    w->deque.push(it);
    if (w->solo) return;  // the only worker is awake: it is running this
  } else {
    std::lock_guard lock(inject_mutex_);
    injected_.push_back(it);
    injected_count_.fetch_add(1, std::memory_order_release);
  }
  notify();
}

void scheduler::notify() noexcept {
  // Pairs with idle_wait: either the sleeper's scan sees the new item, or we see the sleeper (Dekker).
#if defined(APGAS_DETAIL_TSAN)  // TSan ignores fences; a seq_cst read-modify-write is a full barrier as well
  if (sleepers_.fetch_add(0, std::memory_order_seq_cst) > 0) {
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) > 0) {
#endif
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    epoch_.notify_one();
  } else if (started_.load(std::memory_order_relaxed) < workers_.size()) {
    grow();  // every started worker is busy (or still searching): one more
  }
}

work_deque::item scheduler::take_injected() {
  if (injected_count_.load(std::memory_order_acquire) == 0) return 0;
  std::lock_guard lock(inject_mutex_);
  if (injected_.empty()) return 0;
  const work_deque::item it = injected_.front();
  injected_.pop_front();
  injected_count_.fetch_sub(1, std::memory_order_relaxed);
  return it;
}

void scheduler::pool_fiber(worker* w, fiber_ctx* f) {
  if (w->idle_fibers.size() < own_idle_fibers) {
    w->idle_fibers.push_back(f);
    return;
  }
  std::lock_guard lock(spare_mutex_);
  spare_fibers_.push_back(f);
}

fiber_ctx* scheduler::spare_fiber() noexcept {
  std::lock_guard lock(spare_mutex_);
  if (spare_fibers_.empty()) return nullptr;
  fiber_ctx* f = spare_fibers_.back();
  spare_fibers_.pop_back();
  return f;
}

work_deque::item scheduler::steal_round(worker* w, std::size_t victims) {
  const std::size_t n = started();
  if (n < 2) return 0;
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 7;
  w->rng ^= w->rng << 17;
  const std::size_t start = static_cast<std::size_t>(w->rng % n);
  for (std::size_t k = 0; k < std::min(n, victims); ++k) {
    worker* v = workers_[(start + k) % n].get();
    if (v == w) continue;
    if (const work_deque::item it = v->deque.steal()) return it;
  }
  return 0;
}

work_deque::item scheduler::last_look(worker* w) {
  // (Dekker with notify(): sleepers_ was raised before this fence, the pusher's item stored before its own.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (std::size_t i = 0, n = started(); i < n; ++i) {
    worker* v = workers_[i].get();
    if (v == w) continue;
    for (int tries = 0; tries < 64 && v->deque.nonempty_hint(); ++tries) {  // (a lost race looks again)
      if (const work_deque::item it = v->deque.steal()) return it;
    }
  }
  return 0;
}

bool scheduler::has_work_for(const worker* w) const noexcept {
  if (w->deque.nonempty_hint() || injected_count_.load(std::memory_order_relaxed) != 0) return true;
  for (std::size_t i = 0, n = started(); i < n; ++i) {
    if (workers_[i].get() != w && workers_[i]->deque.nonempty_hint()) return true;
  }
  return false;
}

bool poll_until(bool (*done)(const void* ctx), const void* ctx) noexcept {
  // About as long as the idle loop spins before it naps: beyond that the wait is long anyway and parking is cheap.
  constexpr int fruitless_polls = 4096;
  worker* w = this_worker();
  scheduler* s = the_scheduler();
  if (w == nullptr || s == nullptr || !have_progress_hooks()) return done(ctx);
  struct waiting_span {  // (the trace: the activity waits here, its worker polls for it)
    bool on = obs::on(obs::cat_park);
    waiting_span() {
      if (on) obs::span_begin(obs::cat_park, "waiting (polling)");
    }
    ~waiting_span() {
      if (on) obs::span_end(obs::cat_park);
    }
  } span;
  for (int idle = 0; idle < fruitless_polls;) {
    if (done(ctx)) return true;
    if (s->has_work_for(w) || s->stopping()) return false;
    if (poll_progress()) {
      idle = 0;
    } else {
      ++idle;
    }
  }
  return done(ctx);
}

work_deque::item scheduler::find_work(worker* w) {
  obs::idle_timer idle;  // (statistics: the time from the first fruitless round to the item found)
  const int spin_rounds = oversubscribed_ ? oversubscribed_spin_rounds : idle_spin_rounds;
  for (int round = 0;; ++round) {
    if (const work_deque::item it = w->pop()) return found(w, it);
    if (const work_deque::item it = take_injected()) return found(w, it, true);
    if (const work_deque::item it = steal_round(w, round == 0 ? max_scan : steal_victims)) {
      if (obs::on(obs::stats) && !is_fiber(it)) obs::stolen();
      return found(w, it, true);
    }
    idle.begin();
    if (poll_progress()) {
      w->nap_us = 0;
      round = 0;
      continue;
    }
    if (stopping_.load(std::memory_order_acquire)) return 0;
    // With a polled backend, poll back to back (the poll is the back-off: a message is taken within a poll's time);
    // spin for about as long in both cases before napping.
    const bool polled = have_progress_hooks();
    if (round < (polled && !oversubscribed_ ? 32 * spin_rounds : spin_rounds)) {
      if (oversubscribed_) {
        std::this_thread::yield();
      } else if (!polled) {
        for (int i = 0; i < 32; ++i) APGAS_DETAIL_CPU_RELAX();
      }
      continue;
    }
    if (const work_deque::item it = idle_wait(w)) return found(w, it, true);
    round = 0;
  }
}

// Polled backends need attention even when no one notifies a worker, so one idle worker (the poller) naps and
// polls; the others sleep until notified. The poller gives the role up when it finds work, with a notify, so that
// a sleeper takes it over while it runs that work (dispatching a message makes work, which notifies as well).
//
// A worker that took an item from elsewhere (stolen, injected) while no worker sleeps starts one more, if any is left
// to start: work made faster than it is taken (or taken by workers that then block in the operating system) brings
// every configured worker in, one after another, as an eager start would.
work_deque::item scheduler::found(worker* w, work_deque::item it, bool from_others) noexcept {
  if (from_others && started_.load(std::memory_order_relaxed) < workers_.size() &&
      sleepers_.load(std::memory_order_relaxed) == 0) {
    grow();
  }
  w->nap_us = 0;
  int me = w->index;
  if (poller_.load(std::memory_order_relaxed) == me &&
      poller_.compare_exchange_strong(me, -1, std::memory_order_acq_rel)) {
    notify();
  }
  return it;
}

work_deque::item scheduler::idle_wait(worker* w) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  const std::uint32_t e = epoch_.load(std::memory_order_seq_cst);
  work_deque::item it = take_injected();
  if (it == 0) it = last_look(w);
  if (it == 0 && !stopping_.load(std::memory_order_seq_cst)) {
    int none = -1;
    const bool mine = poller_.load(std::memory_order_relaxed) == w->index;
    if (have_progress_hooks() &&
        (mine || poller_.compare_exchange_strong(none, w->index, std::memory_order_acq_rel))) {
      w->nap_us = w->nap_us == 0 ? first_nap_us
                                 : std::min(2 * w->nap_us, oversubscribed_ ? oversubscribed_nap_cap_us : first_nap_us);
      std::this_thread::sleep_for(std::chrono::microseconds(w->nap_us));
    } else {
      if (mine) {
        // Nothing needs polling now (a demand-driven hook's demand fell to 0): give the role up before sleeping, and
        // wake every sleeper, since one may have found polling needed while this worker still held the role.
        poller_.store(-1, std::memory_order_seq_cst);
        epoch_.fetch_add(1, std::memory_order_seq_cst);
        epoch_.notify_all();
      }
      epoch_.wait(e, std::memory_order_seq_cst);
    }
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  return it;
}

void park(publish_fn publish, void* arg) {
  if (obs::on(obs::stats)) obs::parked();
  worker* w = this_worker();
  fiber_ctx* self = w->running;
  self->current = w->current_task;
  fiber_ctx* next = nullptr;
  // If the next item of our deque is a woken fiber, go straight to it: one switch instead of two (via a loop fiber).
  if (const work_deque::item it = w->pop()) {
    if (is_fiber(it)) {
      next = item_fiber(it);
    } else {
      w->deque.push(it);
    }
  }
  if (next == nullptr && !w->idle_fibers.empty()) {
    next = w->idle_fibers.back();
    w->idle_fibers.pop_back();
  }
  if (next == nullptr) next = the_scheduler()->spare_fiber();
  if (next == nullptr) {
    // No unwinding from here: the caller is typically a finish waiting for children that reference its frame.
    try {
      next = make_loop_fiber(w);
    } catch (const std::exception& e) {
      // Say what limits it: usually the number of memory mappings (two per guarded stack), not the memory.
      long maps = 0, max_maps = 0;
      count_memory_mappings(maps, max_maps);
      std::fprintf(stderr,
                   "apgas: cannot create a fiber for a blocking activity (%ld fibers live, %zu-byte stacks): %s; ",
                   g_live_fibers.load(std::memory_order_relaxed), the_scheduler()->stack_size(), e.what());
      if (max_maps > 0 && maps + 16 >= max_maps) {
        std::fprintf(stderr,
                     "the process has %ld memory mappings, the limit vm.max_map_count is %ld (each fiber stack takes "
                     "two): raise vm.max_map_count (sysctl) or block fewer activities at once; a smaller "
                     "APGAS_STACK_SIZE does not help\n",
                     maps, max_maps);
      } else {
        std::fprintf(stderr,
                     "the memory for the stacks ran out (%ld memory mappings of the %ld vm.max_map_count allows): "
                     "lower APGAS_STACK_SIZE or block fewer activities at once\n",
                     maps, max_maps);
      }
      std::abort();
    }
  }
  switch_to(w, self, next, publish, arg);
  // Resumed, perhaps on another worker; the handoff set running/current_task there.
}

void wake(fiber_ctx* f) noexcept {
  if (worker* w = this_worker()) {  // the common case: woken by an activity or a progress hook on a worker
    w->deque.push(as_item(f));
    if (!w->solo) the_scheduler()->notify();
    return;
  }
  try {
    the_scheduler()->submit(as_item(f));
  } catch (...) {
    // submit allocates only when the injection queue grows; losing a wake-up would hang the program.
    std::fputs("apgas: out of memory while waking an activity\n", stderr);
    std::terminate();
  }
}

void run_task(task* t) {
  worker* w = this_worker();
  task* const saved = w->current_task;
  w->current_task = t;
  const bool observed = obs::on(obs::cat_activity | obs::cat_counter | obs::stats);
  if (observed) [[unlikely]] obs::activity_begin(w, *t);
  try {
    t->invoke();
  } catch (...) {
    if (t->governing != nullptr) t->governing->add_exception(std::current_exception());
  }
  if (t->clocks != nullptr) drop_all_clocks(*t);
  finish_state* const f = t->governing;
  // The closure's captures are destroyed inside the activity (current_task is still t, whose base part outlives its
  // closure): a destructor that calls apgas (atomic, offer, async) acts for this activity, wherever it ran from.
  delete t;
  w = this_worker();  // (the activity may have moved to another worker)
  w->current_task = saved;
  if (f != nullptr) f->complete();
  if (observed) [[unlikely]] obs::activity_end();
}

void push_task(task* t) {
  if (obs::on(obs::cat_activity)) [[unlikely]] obs::spawned(*t);
  t->governing->spawned();
  worker* w = this_worker();
  w->deque.push(as_item(t));
  if (!w->solo) the_scheduler()->notify();
}

}  // namespace apgas::detail
