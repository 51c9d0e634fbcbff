#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// A non-owning reference to a callable: one object pointer and one thunk. Used where the core takes a callable
// that it calls before returning (finish bodies, atomic sections), so no allocation and no std::function.
// Not API.

#if __cplusplus < 202002L
#error "apgas needs C++20 or later: compile with -std=c++20 (or a later standard)"
#endif

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace apgas::detail {

template <class Sig>
class function_ref;

template <class R, class... A>
class function_ref<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, A...>)
  function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): implicit by design, like std::function_ref
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        thunk_([](void* o, A... a) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<F>*>(o), std::forward<A>(a)...);
        }) {}

  R operator()(A... a) const { return thunk_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*thunk_)(void*, A...);
};

}  // namespace apgas::detail
#pragma GCC visibility pop
