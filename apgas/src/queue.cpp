// In-order queues (apgas/queue.hpp): a queue runs its operations one after the other in a driver activity that
// exists while the queue has work; each operation holds a finish token joined by the activity that issued it.
//
// Invariants: `driving` is true exactly while a driver activity exists for the queue (set under the lock by the
// issuer that finds it false, cleared under the lock by the driver when it finds nothing left), so at most one
// driver runs an operation at a time and none is lost; the driver itself is counted in the finish of the issuer
// that started it, and every operation in that of its own issuer.
#include "runtime.hpp"
#include "scheduler.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/spin_mutex.hpp>
#include <apgas/error.hpp>
#include <apgas/queue.hpp>

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
  spin_mutex mutex;
  std::deque<queued> ops;
  bool driving = false;
  std::string failure;  // the first failure's message: the operations after it are not run
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

void drive(const std::shared_ptr<queue_state>& q) {
  while (true) {
    queued next;
    {
      std::lock_guard lock(q->mutex);
      if (q->ops.empty()) {
        q->driving = false;
        return;
      }
      next = std::move(q->ops.front());
      q->ops.pop_front();
    }
    if (!q->failure.empty()) {
      next.token.done(std::make_exception_ptr(illegal_operation_exception(
          "apgas::in_order_queue at place " + std::to_string(q->p.id()) +
          ": operation not run, an earlier operation of the queue failed: " + q->failure)));
      continue;
    }
    try {
      next.op->run();
      next.token.done();
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      q->failure = what_of(e);
      next.token.done(e);
    }
  }
}

}  // namespace

std::shared_ptr<queue_state> make_queue(place p) {
  (void)place_of(p.id());
  if (p.parent().id() != tree().here_host) {
    throw illegal_operation_exception("apgas::in_order: place " + std::to_string(p.id()) +
                                      " belongs to another host; make the queue there (inside at(" +
                                      std::to_string(p.parent().id()) + ", ...))");
  }
  auto q = std::make_shared<queue_state>();
  q->p = p;
  return q;
}

void enqueue(const std::shared_ptr<queue_state>& q, std::unique_ptr<queue_op> op) {
  require_unrestricted_activity("apgas::in_order_queue");
  queued item{std::move(op), finish_token::join()};
  bool start = false;
  {
    std::lock_guard lock(q->mutex);
    q->ops.push_back(std::move(item));
    start = !q->driving;
    q->driving = true;
  }
  if (start) {
    try {
      async([q] { drive(q); });
    } catch (...) {
      // No driver could be started (no memory). The queue was idle, so it holds only this operation: end it with
      // the reason (its finish reports it) and leave the queue idle.
      std::lock_guard lock(q->mutex);
      q->driving = false;
      for (queued& left : q->ops) left.token.done(std::current_exception());
      q->ops.clear();
    }
  }
}

}  // namespace apgas::detail
