#pragma once
// finish_state: the termination detector of one finish (local, one host).
//
// Protocol: count_ = 1 (the waiter's own token) + number of governed activities not yet terminated. spawn adds 1
// before the child becomes visible; a terminating child records its exception (if any) and then subtracts 1.
// The waiter first helps (runs its own children from the top of its deque), then either sees count_ == 1 (every
// child has ended; no one else touches the state) or parks and drops its token in the publish step. Whoever
// brings count_ to 0 — the waiter's publish or the last child — wakes the waiter, exactly once. After its
// decrement a child never touches the state again (the waiter may have destroyed it).
// The acq_rel decrements order every child's exception (and all its writes) before the waiter's return.
// Across hosts (dist_finish.cpp): once an activity of the finish is sent to another host the finish gets a home
// record, which holds one extra token in count_ while any remote activity (or message) is outstanding, so count_
// reaching 0 still means "terminated"; see docs/architecture.md, "Distributed finish". At other places the finish
// is represented by proxies (is_proxy()).

#include <apgas/detail/spin_mutex.hpp>

#include <apgas/activity.hpp>

#include <atomic>
#include <exception>
#include <vector>

namespace apgas::detail {

struct fiber_ctx;
struct dist_home;
/// dist_finish.cpp: a proxy's activity ended.
void proxy_complete(finish_state& fs) noexcept;
/// dist_finish.cpp: after the waiter of a distributed finish woke, forget its home record.
void home_done(finish_state& fs) noexcept;
/// dist_finish.cpp: fold an offer into the partial value of a proxy that collects (fs.is_proxy()).
void proxy_offer(finish_state& fs, const void* value, const std::type_info& type);

class finish_state {
 public:
  explicit finish_state(finish_state* parent, collector* coll = nullptr) noexcept
      : parent_(parent),
        coll_(coll),
        collecting_(coll != nullptr ? this : parent != nullptr ? parent->collecting_ : nullptr) {}
  finish_state(const finish_state&) = delete;
  finish_state& operator=(const finish_state&) = delete;

  void spawned() noexcept { count_.fetch_add(1, std::memory_order_relaxed); }
  void complete() noexcept;
  /// Distributed finish (dist_finish.cpp): the home record once an activity of this finish went to another host; null
  /// while the finish is local-only (then no message is ever sent for it).
  dist_home* dist() const noexcept { return dist_.load(std::memory_order_acquire); }
  void set_dist(dist_home* d) noexcept { dist_.store(d, std::memory_order_release); }
  /// True for a proxy: the stand-in at this place for a finish whose home is another place.
  bool is_proxy() const noexcept { return proxy_; }
  void make_proxy() noexcept {
    proxy_ = true;
    count_.store(0, std::memory_order_relaxed);
  }
  long add_count(long delta) noexcept { return count_.fetch_add(delta, std::memory_order_acq_rel) + delta; }
  long count() const noexcept { return count_.load(std::memory_order_acquire); }
  /// Move the recorded exceptions out (a proxy's report), once the count has reached 0: nobody can add one then.
  std::vector<std::exception_ptr> take_exceptions_quiescent() noexcept;
  void add_exception(std::exception_ptr e) noexcept;
  /// Copies of the exceptions recorded so far, for a report while the finish still waits; false (and nothing) if the
  /// lock is taken: the caller holds the table lock, and must not wait for this one.
  bool exceptions_so_far(std::vector<std::exception_ptr>& out);
  /// Called by the activity that owns the finish, after its body.
  void wait();
  /// Throw multiple_exceptions if anything was recorded.
  void rethrow();

  finish_state* parent() const noexcept { return parent_; }
  collector* coll() const noexcept { return coll_; }
  /// The closest collecting finish of this one's chain (itself included): a local finish_collect (coll() != null) or
  /// a proxy of a finish that collects at another place; null if none.
  finish_state* collecting() const noexcept { return collecting_; }
  void set_collecting(finish_state* f) noexcept { collecting_ = f; }
  spin_mutex& lock() noexcept { return mutex_; }

 private:
  static void publish_waiter(fiber_ctx* self, void* arg);

  std::atomic<long> count_{1};
  std::atomic<dist_home*> dist_{nullptr};
  bool proxy_ = false;
  fiber_ctx* waiter_ = nullptr;
  finish_state* parent_;
  collector* coll_;
  finish_state* collecting_;
  spin_mutex mutex_;
  std::vector<std::exception_ptr> exceptions_;
};

}  // namespace apgas::detail
