// In-order queues (apgas/queue.hpp): a queue runs its operations one after the other; each operation holds a finish
// token joined by the activity that issued it. Blocking operations (everything at a CPU place; copies a GPU stream
// cannot take) run in a driver activity that exists while the queue has work. At a GPU the kernels and page-locked
// copies are enqueued on the queue's stream by the activity that issues them when the queue is idle, and by the
// driver after the blocking operations before them otherwise; the stream then keeps their order.
//
// Invariants: `driving` is true exactly while one party runs the queue's operations — the issuer that found it false
// (until it meets a blocking operation or runs out) or a driver activity (until it runs out) — set and cleared under
// the lock, so operations are started (or enqueued on the stream) one at a time in issue order and none is lost;
// `ops` is empty whenever `driving` is false.
// Every operation is counted in the finish of its own issuer (its token), and so is every driver: a driver is
// counted in the finish of the operation at the front when it starts, runs operations of that finish only, and hands
// over to a new driver counted in the next operation's finish when the front belongs to another one. So a finish
// waits for its own operations and for nothing another finish issued (a driver counted in its starter's finish
// would keep that finish open while unrelated activities keep the queue busy: for ever, if they wait for it). A
// blocking operation of a GPU queue first waits for the stream to drain.
#include "runtime.hpp"
#include "scheduler.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/spin_mutex.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/error.hpp>
#include <apgas/queue.hpp>

#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>

namespace apgas::detail {

struct queued {
  std::unique_ptr<queue_op> op;
  finish_token token;
};

struct queue_state {
  place p;
  int gpu_queue = -1;  // the GPU's stream for this queue (gpu_make_queue), -1 at a CPU place
  std::uint32_t run = run_number();  // the run it was made in: it serves no other (its stream id is that run's)
  spin_mutex mutex;
  std::deque<queued> ops;
  bool driving = false;
  std::string failure;  // the first failure's message: the operations after it are not run

  queue_state() = default;
  queue_state(const queue_state&) = delete;
  queue_state& operator=(const queue_state&) = delete;
  ~queue_state() {
    // (work still on the stream goes on; after its run, the run's end released the stream: gpu_stop)
    if (gpu_queue >= 0 && run == run_number()) gpu_release_queue(p, gpu_queue);
  }
};

namespace {

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

/// Run one operation (the caller is the queue's only driver): a blocking one ends here, a stream one takes the token.
/// After a failure the operation is not run; the first of those a driver meets ends with an exception that says so,
/// the others it meets end without one (`refused`: one said it already): they count in the same finish (a driver
/// serves one finish, see run_queue), which gets one exception for them, not one each (a stencil's 2000 operations
/// after a failed copy printed 2000 lines).
void perform(queue_state& q, queued& next, bool& refused) {
  if (!q.failure.empty()) {
    if (refused) {
      next.token.done();
      return;
    }
    refused = true;
    next.token.done(std::make_exception_ptr(illegal_operation_exception(
        "apgas::in_order_queue at place " + std::to_string(q.p.id()) +
        ": operation not run, an earlier operation of the queue failed: " + q.failure +
        " (nor are the operations issued after it)")));
    return;
  }
  try {
    next.op->run(q.gpu_queue, next.token);
    if (next.token) next.token.done();
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    q.failure = what_of(e);
    if (next.token) next.token.done(e);
  }
}

void drive(const std::shared_ptr<queue_state>& q);

/// Start a driver activity for the queue's operations (driving is set, an operation is queued), counted in the finish
/// of the operation at the front.
void start_driver(const std::shared_ptr<queue_state>& q) {
  try {
    task* t = make_task([q] { drive(q); });
    std::unique_lock lock(q->mutex);
    const finish_token& front = q->ops.front().token;
    lock.unlock();  // (the front stays: only the party that is driving removes operations)
    front.spawn_counted(t);
  } catch (...) {
    // No driver could be started (no memory): end what is queued with the reason (the finishes report it) and leave
    // the queue idle.
    std::deque<queued> left;
    {
      std::lock_guard lock(q->mutex);
      q->driving = false;
      left.swap(q->ops);
    }
    for (queued& item : left) item.token.done(std::current_exception());
  }
}

/// Run the queue's operations until none is left. `issuer`: the caller is the activity that issued the first one
/// (its own, the only one queued when it found the queue idle) and runs it if it ends on the GPU's stream (enqueuing
/// it takes microseconds); what other activities issued meanwhile, or its own when blocking, goes to a driver
/// activity: the issuer must not wait, and one call must not enqueue the operations of others for as long as they
/// keep coming. `counted_in`: for a driver, a token of the finish it is counted in; it hands over to a new driver at
/// the first operation of another finish.
void run_queue(const std::shared_ptr<queue_state>& q, bool issuer, const finish_token* counted_in = nullptr) {
  bool refused = false;  // an operation not run was reported to the finish (the finish all operations here count in)
  for (bool first = true;; first = false) {
    queued next;
    {
      std::lock_guard lock(q->mutex);
      if (q->ops.empty()) {
        q->driving = false;
        return;
      }
      if (issuer && (!first || q->ops.front().op->blocking)) break;
      if (counted_in != nullptr && !q->ops.front().token.same_finish(*counted_in)) break;
      next = std::move(q->ops.front());
      q->ops.pop_front();
    }
    perform(*q, next, refused);
  }
  start_driver(q);
}

void drive(const std::shared_ptr<queue_state>& q) {
  // The front operation's finish counts this driver (start_driver): a token of it, for the comparisons. Joined here,
  // in this activity, it is a count in that same finish, given back when the driver leaves.
  finish_token mine = finish_token::join();
  try {
    run_queue(q, false, &mine);
  } catch (...) {
    mine.done();
    throw;
  }
  mine.done();
}

}  // namespace

std::shared_ptr<queue_state> make_queue(place p) {
  (void)require_activity("apgas::in_order");  // (outside a run, its later use said "made in an earlier run")
  check_place(p, "apgas::in_order");
  if (p.parent().id() != tree().here_host) {
    throw illegal_operation_exception("apgas::in_order: place " + std::to_string(p.id()) +
                                      " belongs to another host; make the queue there (inside at(" +
                                      std::to_string(p.parent().id()) + ", ...))");
  }
  auto q = std::make_shared<queue_state>();
  q->p = p;
  if (p.is_cuda()) q->gpu_queue = gpu_make_queue(p);
  return q;
}

int gpu_queue_of(const queue_state& q) noexcept { return q.gpu_queue; }

void drain_gpu_queue(const queue_state& q) { gpu_queue_drain(q.p, q.gpu_queue); }

void enqueue(const std::shared_ptr<queue_state>& q, std::unique_ptr<queue_op> op) {
  require_unrestricted_activity("apgas::in_order_queue");
  if (q->run != run_number()) {
    throw illegal_operation_exception("apgas::in_order_queue: the queue of place " + std::to_string(q->p.id()) +
                                      " was made in an earlier run (apgas::run); a queue serves the run it was made "
                                      "in: make another with apgas::in_order");
  }
  queued item{std::move(op), finish_token::join()};
  {
    std::lock_guard lock(q->mutex);
    q->ops.push_back(std::move(item));
    if (q->driving) return;  // the driver (or the issuer running the queue) gets to it
    q->driving = true;
  }
  run_queue(q, true);
}

}  // namespace apgas::detail
