#pragma once
// The per-host scheduler: worker threads, work-stealing deques, lazily used fibers, park/wake.
//
// How an activity gets a fiber only when it blocks: every worker always runs on a *loop fiber* — a fiber whose
// bottom frame is the scheduling loop. A task popped from a deque runs on the current loop fiber's stack as a plain
// call. If it blocks, park() takes an idle loop fiber (from the worker's pool, or a new one) and switches to it: the
// blocked task keeps the old fiber (its frames are on it), the worker keeps scheduling on the new one. A woken
// fiber is pushed on a deque like a task; the worker that pops it switches to it and puts its own (empty) loop
// fiber into its pool. When the resumed task ends, its fiber simply goes on with the loop it was started by.
//
// Invariants:
//  - worker::running is the fiber executing on that worker's thread; worker::current_task the activity it runs
//    (null at the top of a loop). Both are set by the fiber that receives control, first thing (it completes the
//    handoff its predecessor left in worker::pending), so they are right the moment code resumes.
//  - A parked fiber is in exactly one place: the wait structure its publish function stored it in, then a deque
//    (after wake), then running. Its continuation (fiber_ctx::cont) is stored before publish runs, so a waker can
//    never resume a fiber that has not finished suspending.
//  - Thread-local state is read only through this_worker() (noipa), never cached across a park: a parked fiber
//    may resume on another thread.

#include "deque.hpp"
#include "eh_state.hpp"
#include "sanitizer.hpp"
#include <apgas/detail/spin_mutex.hpp>

#include <apgas/detail/completion.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/runtime.hpp>

#include <boost/context/fiber.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace apgas::detail {

struct fiber_ctx {
  boost::context::fiber cont;  // the suspended continuation; empty while the fiber runs
  task* current = nullptr;     // the innermost activity on this fiber when it parked (null for idle loop fibers)
  san::fiber_marks marks;
  eh_state eh;                 // its exception-handling state while suspended (eh_state.hpp; none for a new fiber)
};

/// Publish step of a park: run on the next fiber once `self` is fully suspended (see park()).
using publish_fn = void (*)(fiber_ctx* self, void* arg);

/// What a switching fiber leaves for the fiber it switches to: where to store its continuation, and what to publish.
struct handoff {
  fiber_ctx* from = nullptr;
  publish_fn publish = nullptr;
  void* arg = nullptr;
};

struct worker {
  int index = 0;
  work_deque deque;
  std::vector<fiber_ctx*> idle_fibers;  // loop fibers suspended at the top of their loop; owned by this worker
  fiber_ctx thread_ctx;                 // the OS thread's own stack: entered at start and left for good at exit
  fiber_ctx* running = nullptr;
  fiber_ctx* exited = nullptr;          // a loop fiber that just ended on this thread (to be deleted by it)
  task* current_task = nullptr;
  handoff pending;                      // set by a switching fiber, completed by the one it switches to
  eh_state* eh = nullptr;               // this OS thread's exception-handling state (eh_state.hpp)
  std::uint64_t rng = 0;
  bool solo = false;                    // the only worker: no thief and no other sleeper exist
  int nap_us = 0;                       // the idle poller's next nap (grows while naps are fruitless)
  std::thread thread;

  /// Pop from the own deque (no fence when solo).
  work_deque::item pop() { return solo ? deque.pop_unshared() : deque.pop(); }
};

class scheduler {
 public:
  /// places_on_host: how many places of the run share this host (with cfg.nthreads, whether the host's CPUs are
  /// oversubscribed: then idle workers back off instead of spinning, see find_work).
  explicit scheduler(const config& cfg, int places_on_host = 1);
  ~scheduler();  // stops and joins the workers; every activity must have ended
  /// Start the first worker threads (after set_scheduler(this): workers read it): as many as this place's share of
  /// the host's CPUs, at most size(). The others start one at a time when work is made, or taken from another
  /// worker, while no started worker sleeps (grow): a place configured with thousands of workers starts and stops
  /// as fast as one with a few, and work that needs them brings them in. Throws std::system_error when not even the
  /// first can be started.
  void start();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  /// The configured workers (config::nthreads), started or not.
  int size() const noexcept { return static_cast<int>(workers_.size()); }
  std::size_t stack_size() const noexcept { return stack_size_; }
  /// config::kernel_check of the run.
  bool kernel_check() const noexcept { return kernel_check_; }

  /// Make an item runnable from any thread (pushed on the caller's deque if it is one of our workers).
  void submit(work_deque::item it);
  /// Wake one sleeping worker, if any sleeps (after an item became visible).
  void notify() noexcept;

  /// Something for `w` to run: an item on its own deque, an injected one, or (hint) one it could steal.
  bool has_work_for(const worker* w) const noexcept;
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  // used by the worker loop
  work_deque::item find_work(worker* w);
  void stop();
  /// A loop fiber suspended at the top of its loop, to be reused: into w's own pool, or the shared spare pool when
  /// w holds own_idle_fibers already (fibers move between workers: one that keeps resuming gains them, one that
  /// keeps parking makes new ones; kept each to its worker they piled up without bound).
  void pool_fiber(worker* w, fiber_ctx* f);
  /// A fiber of the spare pool, or null.
  fiber_ctx* spare_fiber() noexcept;
  static constexpr std::size_t own_idle_fibers = 8;

 private:
  work_deque::item take_injected();
  /// Tries `victims` deques (at most all) from a random one on.
  work_deque::item steal_round(worker* w, std::size_t victims);
  work_deque::item idle_wait(worker* w);
  /// Before sleeping: every started deque that holds an item (by its hint), stolen from.
  work_deque::item last_look(worker* w);
  /// Bookkeeping when w found `it` (from_others: not from its own deque); returns it.
  work_deque::item found(worker* w, work_deque::item it, bool from_others = false) noexcept;
  void worker_main(worker* w);
  /// Start the next worker thread, if one is left and the scheduler is not stopping (waits for one being started).
  void grow() noexcept;
  /// Make worker i and start its thread (under grow_mutex_; i == started()); throws what thread creation throws.
  void start_worker(std::size_t i);
  /// Workers whose threads have started: workers_[0, started) (only these hold items, steal or sleep).
  std::size_t started() const noexcept { return started_.load(std::memory_order_acquire); }

  std::size_t stack_size_;
  bool kernel_check_;
  std::size_t first_workers_ = 1;  // started by start()
  bool oversubscribed_ = false;  // more workers on this host (all places) than CPUs this process may use
  // The idle poller: with a polled backend, one idle worker at a time naps and polls (the one whose index this
  // holds, -1: none); the other idle workers sleep until notified, so that idle places do not burn the CPUs.
  alignas(64) std::atomic<int> poller_{-1};
  std::vector<std::unique_ptr<worker>> workers_;
  spin_mutex inject_mutex_;
  std::deque<work_deque::item> injected_;
  std::atomic<std::size_t> injected_count_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  std::atomic<bool> stopping_{false};
  // Invariant: workers_[i] exists and its thread runs for every i < started_ (published after both, under
  // grow_mutex_; the destructor closes growth under it, then joins without it: a worker may be waiting in grow).
  alignas(64) std::atomic<std::size_t> started_{0};
  std::mutex grow_mutex_;
  bool grow_closed_ = false;
  spin_mutex spare_mutex_;
  std::vector<fiber_ctx*> spare_fibers_;  // (under spare_mutex_) see pool_fiber  // (under grow_mutex_) shutting down, or a thread could not be made: no more workers
};

/// The running scheduler, or null outside apgas::run.
scheduler* the_scheduler() noexcept;
void set_scheduler(scheduler* s) noexcept;

/// The worker of the calling thread (null on other threads). Never inlined nor analysed across calls, so that no
/// caller caches a thread-local address across a park.
worker* this_worker() noexcept;
/// The activity running on the calling thread, or null.
task* current_task() noexcept;
/// The calling activity; illegal_operation_exception naming `what` outside an activity.
task& require_activity(const char* what);
/// The calling activity, which must not be inside atomic/when (illegal_operation_exception naming `what`).
task& require_unrestricted_activity(const char* what);

// (Exported from the shared libapgas, which hides what its public headers do not declare: bench/bench_tasks.cpp
// measures these two directly.)
#pragma GCC visibility push(default)
/// Park the calling activity. `publish(self, arg)` runs after the switch, on another fiber of the same thread: it
/// stores `self` where a waker will find it (and, typically, releases a lock). Returns once someone wake()s it.
void park(publish_fn publish, void* arg);
/// Make a parked fiber runnable. Any thread; each park is matched by exactly one wake.
void wake(fiber_ctx* f) noexcept;
#pragma GCC visibility pop

/// Run a task to completion on the calling fiber (it may park in between), deliver its exception to its governing
/// finish, drop its clocks, free it and report its termination.
void run_task(task* t);
/// Spawn a ready-made task (fields set) on the calling worker, counting it in its governing finish first.
void push_task(task* t);

/// Progress hooks (the completion seam), polled by idle workers. have_progress_hooks: whether any hook needs polling
/// now (a transport's always; a GPU backend's while GPU work is in flight).
bool poll_progress() noexcept;
bool have_progress_hooks() noexcept;

/// Before an activity parks for something only a progress hook can bring (a message from another host, a GPU
/// event): while its worker has nothing else to run, poll from here rather than switch to an idle loop fiber that
/// would poll the same way and switch back when it arrives. Returns done(ctx): true when it came; false when the
/// worker has other work, the scheduler stops, no hook is registered, or a bounded number of fruitless polls
/// passed (then the caller parks as usual and the idle loop takes over).
bool poll_until(bool (*done)(const void* ctx), const void* ctx) noexcept;

/// Item tagging: tasks are even addresses, parked fibers have the low bit set.
inline work_deque::item as_item(task* t) noexcept { return reinterpret_cast<work_deque::item>(t); }
inline work_deque::item as_item(fiber_ctx* f) noexcept { return reinterpret_cast<work_deque::item>(f) | 1u; }
inline bool is_fiber(work_deque::item it) noexcept { return (it & 1u) != 0; }
inline task* item_task(work_deque::item it) noexcept { return reinterpret_cast<task*>(it); }
inline fiber_ctx* item_fiber(work_deque::item it) noexcept { return reinterpret_cast<fiber_ctx*>(it & ~work_deque::item{1}); }

}  // namespace apgas::detail
