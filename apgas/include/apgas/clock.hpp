#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file clock.hpp
/// Clocks (X10 `Clock`): barriers that activities register on, with split-phase arrival.
///
/// Each registered activity holds, per clock, its phase and whether it has already arrived (resumed) in it. The
/// clock moves to the next phase when every registered activity has arrived. All operations act on behalf of the
/// calling activity; one that is not registered gets clock_use_exception. Inside atomic/when every clock operation
/// throws illegal_operation_exception. An activity that terminates drops all its clocks.

#include <apgas/detail/function_ref.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/place.hpp>

#include <initializer_list>
#include <type_traits>
#include <utility>

namespace apgas {

namespace detail {
class clock_state;
}

class clock {
 public:
  /// A new clock; the calling activity is registered on it, in phase 1.
  static clock make();

  clock(const clock& other) noexcept;
  clock& operator=(const clock& other) noexcept;
  clock(clock&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  clock& operator=(clock&& other) noexcept;
  ~clock();

  /// X10 `c.advance()`: arrive (if not yet) and wait until every registered activity has arrived; the caller then
  /// is in the next phase. Parks the activity, never its worker.
  void advance();
  /// Split phase: arrive in the current phase without waiting. A second resume in the same phase does nothing.
  void resume();
  /// Unregister the calling activity (counts as its arrival if it had not arrived).
  void drop();
  /// Whether the calling activity is registered on this clock.
  bool registered() const;
  /// Whether the calling activity is not (or no longer) registered on this clock.
  bool dropped() const { return !registered(); }
  /// The calling activity's phase on this clock (1 after make); clock_use_exception if not registered.
  int phase() const;

  friend bool operator==(const clock& a, const clock& b) noexcept { return a.s_ == b.s_; }

  detail::clock_state* state() const noexcept { return s_; }  // not API

 private:
  explicit clock(detail::clock_state* s) noexcept : s_(s) {}
  detail::clock_state* s_ = nullptr;
};

namespace detail {
void spawn_clocked(task* t, const clock* clocks, std::size_t n);   // takes ownership of t
/// Throws illegal_operation_exception: clocks are local to one host (no distributed clocks yet).
[[noreturn]] void clocked_to_other_host(place p);
void spawn_implicit_clocked(task* t);                              // on the innermost clocked_finish's clock
void run_clocked_finish(function_ref<void()> body);
}  // namespace detail

/// X10 `next`: advance every clock the calling activity is registered on (all arrive first, then all wait).
void advance_all();
/// Arrive on every clock the calling activity is registered on.
void resume_all();

/// Start an activity here registered on each clock of `cs`, in the caller's phase (and arrival state).
/// The caller must be registered on each of them (clock_use_exception otherwise).
template <class F>
void clocked_async(std::initializer_list<clock> cs, F&& f) {
  detail::spawn_clocked(detail::make_task(std::forward<F>(f)), cs.begin(), cs.size());
}

/// Start an activity registered on the clock of the innermost enclosing clocked_finish (clock_use_exception if
/// the caller has none).
template <class F>
void clocked_async(F&& f) {
  detail::spawn_implicit_clocked(detail::make_task(std::forward<F>(f)));
}

/// clocked_async at place `p`, under the shipping rule of async_at.
template <class F>
void clocked_async_at(place p, std::initializer_list<clock> cs, F f) {
  detail::check_shippable<F>();
  if (!detail::check_at_target(p)) detail::clocked_to_other_host(p);
  detail::spawn_clocked(detail::make_task(f), cs.begin(), cs.size());
}

/// X10 `clocked finish S`: a finish with a fresh clock that the body is registered on and that clocked_async(f)
/// without a list registers its children on; the body drops the clock when it ends, then the finish waits.
template <class F>
void clocked_finish(F&& body) {
  detail::run_clocked_finish(detail::function_ref<void()>(body));
}

}  // namespace apgas
#pragma GCC visibility pop
