#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file reducer.hpp
/// Reducers for collecting finishes (finish_collect) and, later, team collectives. A reducer is any type with
///   - `value_type`,
///   - `value_type zero() const` (the identity),
///   - `value_type operator()(const value_type&, const value_type&) const` (associative and commutative).

#include <algorithm>
#include <functional>
#include <limits>

namespace apgas {

template <class R>
concept reducer_type = requires(const R& r, const typename R::value_type& v) {
  { r.zero() } -> std::convertible_to<typename R::value_type>;
  { r(v, v) } -> std::convertible_to<typename R::value_type>;
};

/// A reducer from an identity and a binary operation. @code auto r = apgas::reducer{0L, std::plus<long>{}}; @endcode
template <class T, class Op>
struct reducer {
  using value_type = T;
  T identity;
  Op op;
  T zero() const { return identity; }
  T operator()(const T& a, const T& b) const { return op(a, b); }
};
template <class T, class Op>
reducer(T, Op) -> reducer<T, Op>;

template <class T>
reducer<T, std::plus<T>> sum() {
  return {T{}, {}};
}
template <class T>
auto min() {
  auto op = [](const T& a, const T& b) { return std::min(a, b); };
  return reducer<T, decltype(op)>{std::numeric_limits<T>::max(), op};
}
template <class T>
auto max() {
  auto op = [](const T& a, const T& b) { return std::max(a, b); };
  return reducer<T, decltype(op)>{std::numeric_limits<T>::lowest(), op};
}

}  // namespace apgas
#pragma GCC visibility pop
