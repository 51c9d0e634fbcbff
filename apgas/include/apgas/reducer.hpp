#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file reducer.hpp
/// Reducers for collecting finishes (finish_collect). A reducer is any type with
///   - `value_type`,
///   - `value_type zero() const` (the identity),
///   - `value_type operator()(const value_type&, const value_type&) const` (associative and commutative).
/// For offers from other host places the reducer travels with the activities: it must then be trivially copyable, or
/// serializable (the project's archive) and default-constructible (apgas::reducer is when its value is serializable
/// and its operation trivially copyable and default-constructible: a lambda without captures, a function object
/// without members), and its value_type serializable and default-constructible. (A reducer of a trivially copyable
/// value, e.g. `apgas::reducer{0L, [scale](long a, long b) { ... }}`, is itself trivially copyable: captures are
/// fine there.)

#include <apgas/serialization/archive.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <type_traits>

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

/// An apgas::reducer travels as its identity (archive) and the bytes of its operation (trivially copyable, like a
/// shipped closure).
template <class T, class Op>
  requires(std::is_trivially_copyable_v<Op> && std::is_default_constructible_v<Op> && ser::is_serializable_v<T> &&
           !std::is_trivially_copyable_v<T>)
struct serializer<reducer<T, Op>> {
  static void save(writer& w, const reducer<T, Op>& r) {
    w & r.identity;
    w.write_bytes(&r.op, sizeof(Op));
  }
  static void load(reader& in, reducer<T, Op>& r) {
    in & r.identity;
    in.read_bytes(&r.op, sizeof(Op), "reducer operation");
  }
};

template <class T>
reducer<T, std::plus<T>> sum() {
  return {T{}, {}};
}
/// The smallest value offered; its identity is +infinity where T has one (an offered infinity is kept), else T's
/// largest value.
template <class T>
auto min() {
  using limits = std::numeric_limits<T>;
  auto op = [](const T& a, const T& b) { return std::min(a, b); };
  if constexpr (limits::has_infinity) {
    return reducer<T, decltype(op)>{limits::infinity(), op};
  } else {
    return reducer<T, decltype(op)>{limits::max(), op};
  }
}
/// The largest value offered; its identity is -infinity where T has one, else T's lowest value.
template <class T>
auto max() {
  using limits = std::numeric_limits<T>;
  auto op = [](const T& a, const T& b) { return std::max(a, b); };
  if constexpr (limits::has_infinity) {
    return reducer<T, decltype(op)>{-limits::infinity(), op};
  } else {
    return reducer<T, decltype(op)>{limits::lowest(), op};
  }
}

}  // namespace apgas
#pragma GCC visibility pop
