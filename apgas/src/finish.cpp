#include "finish.hpp"

#include "obs.hpp"
#include "scheduler.hpp"
#include "type_name.hpp"

#include <apgas/error.hpp>

#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace apgas::detail {

void finish_state::add_exception(std::exception_ptr e) noexcept {
  // (a multiple_exceptions is kept whole: the one the finish throws takes its leaves, error.cpp)
  std::lock_guard lock(mutex_);
  try {
    exceptions_.push_back(std::move(e));
  } catch (...) {
    std::fputs("apgas: out of memory while recording an exception in a finish\n", stderr);
    std::terminate();
  }
}

bool finish_state::exceptions_so_far(std::vector<std::exception_ptr>& out) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  out.insert(out.end(), exceptions_.begin(), exceptions_.end());
  return true;
}

void finish_state::complete() noexcept {
  if (proxy_) {
    proxy_complete(*this);
    return;
  }
  if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) wake(waiter_);
}

std::vector<std::exception_ptr> finish_state::take_exceptions_quiescent() noexcept {
  // No lock: every activity has ended (count 0), and each recorded its exception before its count decrement, whose
  // acquire-release chain the caller's decrement to 0 read.
  return std::exchange(exceptions_, {});
}

void finish_state::publish_waiter(fiber_ctx* self, void* arg) {
  auto* fs = static_cast<finish_state*>(arg);
  fs->waiter_ = self;
  fs->complete();  // drop the waiter's token; if every child has ended, this wakes the waiter itself
}

void finish_state::wait() {
  const bool observed = obs::on(obs::cat_finish | obs::stats);
  if (observed) [[unlikely]] obs::finish_wait_begin();
  // Help first: run our own children while they are on top of our deque. Only children of *this* finish: running
  // an unrelated task here would tie this finish's completion to it (a deadlock if it waits for code that follows
  // this finish). A child that blocks parks this whole fiber, which is fine: this finish cannot end before it.
  worker* w = this_worker();
  while (count_.load(std::memory_order_acquire) != 1) {
    const work_deque::item it = w->pop();
    if (it == 0) break;
    if (is_fiber(it) || item_task(it)->governing != this) {
      w->deque.push(it);
      break;
    }
    run_task(item_task(it));
    w = this_worker();
  }
  // With remote activities outstanding the home record holds a token (dist_finish.cpp), so count_ == 1 means done
  // either way. With a home record, what is left may be only other hosts' reports: wait by polling while the worker
  // is free.
  if (count_.load(std::memory_order_acquire) != 1 && dist() != nullptr) {
    poll_until([](const void* fs) { return static_cast<const finish_state*>(fs)->count() == 1; }, this);
  }
  if (count_.load(std::memory_order_acquire) != 1) park(&publish_waiter, this);
  if (dist() != nullptr) home_done(*this);
  if (observed) [[unlikely]] obs::finish_wait_end();
}

void finish_state::rethrow() {
  if (!exceptions_.empty()) throw multiple_exceptions(std::move(exceptions_));
}

namespace {

void finish_with(task& cur, finish_state& fs, function_ref<void()> body) {
  finish_state* const saved = cur.innermost;
  cur.innermost = &fs;
  try {
    body();
  } catch (...) {
    fs.add_exception(std::current_exception());
  }
  cur.innermost = saved;
  fs.wait();
  fs.rethrow();
}

}  // namespace

void run_finish(function_ref<void()> body) {
  task& cur = require_unrestricted_activity("apgas::finish");
  finish_state fs(cur.innermost);
  finish_with(cur, fs, body);
}

void run_finish_collect(collector& c, function_ref<void()> body) {
  task& cur = require_unrestricted_activity("apgas::finish_collect");
  finish_state fs(cur.innermost, &c);
  finish_with(cur, fs, body);
}

void offer(const void* value, const std::type_info& type) {
  task& cur = require_activity("apgas::offer");
  finish_state* fs = cur.innermost != nullptr ? cur.innermost->collecting() : nullptr;
  if (fs == nullptr) {
    throw illegal_operation_exception("apgas::offer of a value of type " + type_name(type) +
                                      ": the activity has no enclosing collecting finish (finish_collect)");
  }
  if (fs->is_proxy()) {  // the collecting finish is at another place: fold into this place's partial value
    proxy_offer(*fs, value, type);
    return;
  }
  collector* c = fs->coll();
  if (*c->type != type) {
    throw illegal_operation_exception("apgas::offer of a value of type " + type_name(type) +
                                      " to a collecting finish whose reducer takes " + type_name(*c->type));
  }
  std::lock_guard lock(fs->lock());
  c->combine(c->accumulator, c->reducer, value);
}

finish_token finish_token::join() {
  task& cur = require_unrestricted_activity("apgas: starting work outside the workers");
  finish_token t;
  t.fs_ = cur.innermost;
  t.fs_->spawned();
  return t;
}

void finish_token::spawn_counted(task* t) const {
  try {
    (void)require_unrestricted_activity("apgas: starting work for a finish token");
  } catch (...) {
    delete t;
    throw;
  }
  t->governing = fs_;
  t->innermost = fs_;
  push_task(t);
}

void finish_token::done(std::exception_ptr e) noexcept {
  finish_state* fs = std::exchange(fs_, nullptr);
  if (e) fs->add_exception(std::move(e));
  fs->complete();
}

void spawn(task* t) {
  task* cur;
  try {
    cur = &require_unrestricted_activity("apgas::async");
  } catch (...) {
    delete t;
    throw;
  }
  t->governing = cur->innermost;
  t->innermost = cur->innermost;
  push_task(t);
}

}  // namespace apgas::detail
