#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// The task: the record of one activity, from spawn to termination. Installed because async/async_at are templates
// that must build one; not API. Only the runtime (apgas/src) reads or writes the fields.

#include <apgas/place.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace apgas::detail {

class finish_state;
struct clock_registrations;
struct task;
/// Drops every clock registration of t and frees its record (apgas/src/clock.cpp).
void drop_all_clocks(task& t) noexcept;

/// One activity. Created by async/async_at (task_of<F>), owned by the scheduler from spawn() on, destroyed by the
/// worker that runs it to completion. Invariant: while an activity runs, the worker's current-task pointer designates
/// its task; the fields below are touched only by the thread currently running the activity (or, before it starts,
/// by the spawning activity), so they need no synchronisation.
struct task {
  task() noexcept = default;
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  /// The scheduler drops an activity's clocks when its body ends (run_task); its closure's captures are destroyed
  /// after that, still inside the activity, and a destructor may register it on clocks again (clock::make, a
  /// clocked_finish): those are dropped here, before the activity's finish learns that it ended (an activity that
  /// terminates drops all its clocks; the others waited on them for ever).
  virtual ~task() {
    if (clocks != nullptr) [[unlikely]] drop_all_clocks(*this);
  }

  /// Run the activity's body. May throw: the scheduler delivers the exception to the governing finish.
  virtual void invoke() = 0;

  /// The activity's name in a trace (APGAS_TRACE): the type of its closure, as typeid names it (demangled when the
  /// trace is written). Called only while tracing.
  virtual const char* trace_name() const noexcept { return typeid(*this).name(); }

  /// Tasks are small and short-lived: they come from a per-worker cache (see apgas/src/task_alloc.cpp).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
  /// A closure with an over-aligned capture (alignas(64), an AVX vector) gets memory of its alignment, from the global
  /// allocator: without these the cache's 16-byte-aligned blocks were used, and the closure was built misaligned.
  static void* operator new(std::size_t size, std::align_val_t al) { return ::operator new(size, al); }
  static void operator delete(void* p, std::align_val_t al) noexcept { ::operator delete(p, al); }

  finish_state* governing = nullptr;          ///< the finish this activity reports its termination to
  finish_state* innermost = nullptr;          ///< the finish new asyncs join: governing, or a nested finish
  clock_registrations* clocks = nullptr;      ///< clocks this activity is registered on; null in the common case
  int atomic_depth = 0;                       ///< > 0 inside atomic/when bodies
  bool in_kernel = false;                     ///< a block of a kernel closure run on a CPU place
  std::uint64_t trace_flow = 0;               ///< while tracing: the spawn flow that ends where it starts, or 0
};

template <class F>
struct task_of final : task {
  template <class G>
  explicit task_of(G&& g) : fn(std::forward<G>(g)) {}
  void invoke() override { fn(); }
  F fn;
};

/// bad_place_exception for an invalid place; illegal_operation_exception for a target that cannot run a plain
/// closure (a GPU place) or when called inside atomic/when or outside apgas::run. Returns true when p is the host
/// place of the caller, false for another host place (reached through the transport).
bool check_at_target(place p);

/// Make a task from any callable (decay-copied into the task).
template <class F>
task* make_task(F&& f) {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&>, "apgas: an activity body must be callable with no arguments");
  return new task_of<Fn>(std::forward<F>(f));
}

/// What the shipping rule needs: the object can be copied as bytes and dropped without running code. Spelled with
/// these two traits rather than std::is_trivially_copyable because g++ 12 answers the latter wrongly (false, and
/// cached) for a closure type when it is first asked inside a template.
template <class T>
inline constexpr bool shippable_v = std::is_trivially_copy_constructible_v<T> && std::is_trivially_destructible_v<T>;

/// The shipping rule of async_at/at: the closure itself must be trivially copyable.
template <class F>
constexpr void check_shippable() {
  static_assert(shippable_v<std::decay_t<F>>,
                "apgas::async_at/at: the closure must be trivially copyable (capture only scalars, place, global_ref, "
                "remote_array and other trivially copyable values); pass anything else as an explicit argument "
                "after the closure");
}

}  // namespace apgas::detail
#pragma GCC visibility pop
