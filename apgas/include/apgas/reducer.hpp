#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file reducer.hpp
/// Reducers for collecting finishes (finish_collect). A reducer is any type with
///   - `value_type`,
///   - `value_type zero() const` (the identity),
///   - `value_type operator()(const value_type&, const value_type&) const` (associative and commutative).
/// For offers from other host places the reducer travels with the activities: it must then be trivially copyable or
/// serializable (the project's archive; apgas::reducer is when its value is serializable and its operation trivially
/// copyable), and its value_type serializable and default-constructible.

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
