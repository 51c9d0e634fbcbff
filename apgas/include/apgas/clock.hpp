#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file clock.hpp
/// Clocks (X10 `Clock`): barriers that activities register on, with split-phase arrival, at any host place.
///
/// Each registered activity holds, per clock, its phase and whether it has already arrived (resumed) in it. The
/// clock moves to the next phase when every registered activity has arrived. All operations act on behalf of the
/// calling activity; one that is not registered gets clock_use_exception. Inside atomic/when every clock operation
/// but registered() and dropped() throws illegal_operation_exception. An activity that terminates (the main activity
/// included) drops all its clocks. An activity that waits in a finish for a clocked child of the same clock, still
/// registered itself, deadlocks as in X10 2.x (the child waits for it at the barrier): drop the clock before.
///
/// Across host places (docs/decisions/0011-clocks-across-hosts.md): the clock's home place decides the phase
/// changes; every other place with registered activities combines their arrivals and sends one message per phase to
/// the home, which announces each phase change once per such place. An activity registered on clocks that calls
/// at(p, ...) takes its registrations with it for the duration of the call (X10: the body of `at` is the same
/// activity), so it may advance them there.

#include <apgas/detail/function_ref.hpp>
#include <apgas/detail/remote.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/place.hpp>

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace apgas {

/// A handle on a clock: the clock's global name (its home place, where it was made, and a serial number there). Its
/// copies are trivial (the shipping rule of async_at), so closures sent to other places (async_at, at,
/// clocked_async_at) may capture it, and it can be sent or returned as a value. The clock itself lives as long as
/// some activity, at any place, is registered on it. A moved-from handle names no clock.
class clock {
 public:
  /// A new clock, homed at the calling activity's place; the calling activity is registered on it, in phase 1.
  static clock make();

  clock() noexcept = default;  ///< refers to no clock (registered() is false; the operations throw clock_use_exception)
  clock(const clock& other) noexcept = default;
  clock& operator=(const clock& other) noexcept = default;
  clock(clock&& other) noexcept : id_(std::exchange(other.id_, 0)) {}
  clock& operator=(clock&& other) noexcept {
    id_ = std::exchange(other.id_, 0);
    return *this;
  }
  ~clock() = default;

  /// The operations are const: a handle is only a name (a copy names the same clock).
  /// X10 `c.advance()`: arrive (if not yet) and wait until every registered activity, at every place, has arrived;
  /// the caller then is in the next phase. Parks the activity, never its worker.
  void advance() const;
  /// Split phase: arrive in the current phase without waiting. A second resume in the same phase does nothing.
  void resume() const;
  /// Unregister the calling activity (counts as its arrival if it had not arrived).
  void drop() const;
  /// Whether the calling activity is registered on this clock.
  bool registered() const;
  /// Whether the calling activity is not (or no longer) registered on this clock.
  bool dropped() const { return !registered(); }
  /// The calling activity's phase on this clock (1 after make); clock_use_exception if not registered.
  int phase() const;
  /// The place where the clock was made (its home: it decides the phase changes); the invalid place for a handle
  /// that names no clock (default-constructed or moved from).
  place home() const noexcept { return id_ == 0 ? place() : place(static_cast<int>(id_ >> 48)); }

  friend bool operator==(const clock& a, const clock& b) noexcept { return a.id_ == b.id_; }

  std::uint64_t id() const noexcept { return id_; }  // not API: home place << 48 | serial at the home (0: none)
  template <class A>
  void serialize(A& a) {
    a & id_;
  }

 private:
  explicit clock(std::uint64_t id) noexcept : id_(id) {}
  std::uint64_t id_ = 0;
};

namespace detail {
// Both take ownership of t; `what` names the operation in errors.
void spawn_clocked(task* t, const clock* clocks, std::size_t n, const char* what = "apgas::clocked_async");
// On the innermost clocked_finish's clock:
void spawn_implicit_clocked(task* t, const char* what = "apgas::clocked_async");
void run_clocked_finish(function_ref<void()> body);
/// The clocks a child at another host place is registered on: `cs` checked (clock_use_exception), or the innermost
/// clocked_finish's clock when `implicit`.
void check_clocked_spawn(const clock* cs, std::size_t n, bool implicit);
/// Send a clocked activity to another host place (dist_clock.cpp): registered on `cs` (or the implicit clock).
void send_clocked_async(place p, std::uint32_t id, writer&& w, const clock* cs, std::size_t n, bool implicit);

template <class F>
void remote_clocked_async(place p, const F& f, const clock* cs, std::size_t n, bool implicit) {
  check_clocked_spawn(cs, n, implicit);
  writer w = begin_message();
  w.write_bytes(&f, sizeof(F));
  send_clocked_async(p, ser::registry::id_of(async_entry<F>::handle), std::move(w), cs, n, implicit);
}
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

/// clocked_async at place `p`, under the shipping rule of async_at. `p` may be any host place: the child is
/// registered (in the caller's phase and arrival state) before the caller can move on, wherever it runs.
template <class F>
void clocked_async_at(place p, std::initializer_list<clock> cs, F f) {
  detail::check_shippable<F>();
  if (!detail::check_at_target(p)) {
    detail::remote_clocked_async(p, f, cs.begin(), cs.size(), false);
    return;
  }
  detail::spawn_clocked(detail::make_task(f), cs.begin(), cs.size(), "apgas::clocked_async_at");
}

/// X10 `clocked async at(p) S` inside a clocked_finish: clocked_async(f) at place `p`, registered on the clock of the
/// innermost enclosing clocked_finish (clock_use_exception if the caller has none).
template <class F>
void clocked_async_at(place p, F f) {
  detail::check_shippable<F>();
  if (!detail::check_at_target(p)) {
    detail::remote_clocked_async(p, f, nullptr, 0, true);
    return;
  }
  detail::spawn_implicit_clocked(detail::make_task(f), "apgas::clocked_async_at");
}

/// X10 `clocked finish S`: a finish with a fresh clock that the body is registered on and that clocked_async(f)
/// without a list registers its children on; the body drops the clock when it ends, then the finish waits.
template <class F>
void clocked_finish(F&& body) {
  detail::run_clocked_finish(detail::function_ref<void()>(body));
}

}  // namespace apgas
#pragma GCC visibility pop
