#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file atomic.hpp
/// atomic and when: one monitor per place.

#include <apgas/detail/function_ref.hpp>

namespace apgas {

namespace detail {
void run_atomic(function_ref<void()> body);
void run_when(function_ref<bool()> cond, function_ref<void()> body);
}  // namespace detail

/// Run `body` atomically with respect to every other atomic/when body of this place. Nesting is allowed.
/// Inside the body, async, finish, at, when and clock operations throw illegal_operation_exception.
/// An exception leaving the body ends the atomic section and propagates.
template <class F>
void atomic(F&& body) {
  detail::run_atomic(detail::function_ref<void()>(body));
}

/// Block the calling activity until cond() holds, then run body atomically with that successful test. The
/// condition is re-tested each time an atomic section of this place ends (the blocked activity parks; it never
/// spins and never holds its worker). Illegal inside atomic/when (illegal_operation_exception).
template <class C, class F>
void when(C&& cond, F&& body) {
  detail::run_when(detail::function_ref<bool()>(cond), detail::function_ref<void()>(body));
}

}  // namespace apgas
#pragma GCC visibility pop
