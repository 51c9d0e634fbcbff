#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file activity.hpp
/// Activities and their governing finishes: async, async_at, at, finish, finish_collect, offer.

#include <apgas/detail/function_ref.hpp>
#include <apgas/detail/remote.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/kernel.hpp>
#include <apgas/place.hpp>
#include <apgas/reducer.hpp>

#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace apgas {

namespace detail {
void spawn(task* t);                                   // takes ownership; deletes t before throwing

/// What another place needs to fold offers for a collecting finish (registered once per reducer type; looked up by
/// its registry id at the offering place): it rebuilds the reducer from its bytes and keeps that place's partial value.
struct collect_ops {
  const std::type_info* type;  // the reducer's value_type
  const char* reducer_name;
  /// A new partial value (the reducer rebuilt from `reducer_bytes`, its zero); null when the reducer or its value type
  /// cannot be serialized (offers from other places are then refused).
  void* (*make)(reader& reducer_bytes);
  void (*combine)(void* partial, const void* value);
  void (*write)(const void* partial, writer& w);  // the partial value (the project's archive)
  void (*merge)(void* partial, reader& value);    // fold a serialized partial value into this one
  void (*destroy)(void* partial);
};

struct collector {
  void* accumulator;
  const void* reducer;
  const std::type_info* type;
  void (*combine)(void* accumulator, const void* reducer, const void* value);
  // Across places (dist_finish.cpp): the registry id of this reducer's collect_ops, the reducer's bytes for the
  // activity messages, and the fold of a partial value that came home with a termination report.
  std::uint32_t (*ops_id)();
  void (*write_reducer)(const void* reducer, writer& w);
  void (*merge)(void* accumulator, const void* reducer, reader& value);
};
void run_finish_collect(collector& c, function_ref<void()> body);
void offer(const void* value, const std::type_info& type);

template <class R>
inline constexpr bool shippable_reducer_v =
    (std::is_trivially_copyable_v<R> || (ser::is_serializable_v<R> && std::is_default_constructible_v<R>)) &&
    ser::is_serializable_v<typename R::value_type> && std::is_default_constructible_v<typename R::value_type> &&
    !ser::is_pointer_like<typename R::value_type>::value;

template <class R>
void write_reducer(const R& r, writer& w) {
  if constexpr (std::is_trivially_copyable_v<R>) {
    w.write_bytes(&r, sizeof(R));
  } else {
    w & r;
  }
}
template <class R>
R read_reducer(reader& in) {
  if constexpr (std::is_trivially_copyable_v<R>) {
    return read_closure<R>(in);  // its bytes are a valid R (trivially copyable, as closures)
  } else {
    R r;
    in & r;
    return r;
  }
}

template <class R>
struct collect_entry {
  using T = typename R::value_type;
  struct partial {
    R r;
    T acc;
  };
  static const collect_ops* ops() noexcept {
    static const collect_ops o = [] {
      collect_ops x{&typeid(T), type_name<R>(), nullptr, nullptr, nullptr, nullptr, nullptr};
      if constexpr (shippable_reducer_v<R>) {
        x.make = [](reader& in) -> void* {
          R r = read_reducer<R>(in);
          T z = r.zero();
          return new partial{std::move(r), std::move(z)};
        };
        x.combine = [](void* p, const void* v) {
          auto& q = *static_cast<partial*>(p);
          q.acc = q.r(q.acc, *static_cast<const T*>(v));
        };
        x.write = [](const void* p, writer& w) { w & static_cast<const partial*>(p)->acc; };
        x.merge = [](void* p, reader& in) {
          auto& q = *static_cast<partial*>(p);
          T v{};
          in & v;
          q.acc = q.r(q.acc, v);
        };
        x.destroy = [](void* p) { delete static_cast<partial*>(p); };
      }
      return x;
    }();
    return &o;
  }
  static const collect_ops* ops_fn() { return ops(); }  // called as `const collect_ops* (*)()` (dist_finish.cpp)
  static inline const std::size_t handle =
      ser::registry::add(type_name<collect_entry*>(), reinterpret_cast<ser::registry::fn>(&ops_fn));
};
}  // namespace detail

/// Start a new activity at the current place, governed by the innermost enclosing finish. `f` is decay-copied.
/// Throws illegal_operation_exception inside atomic/when or outside apgas::run.
template <class F>
void async(F&& f) {
  detail::spawn(detail::make_task(std::forward<F>(f)));
}

/// Start a new activity at place `p` running f(args...). `f` must be trivially copyable (the shipping rule: it is
/// copied to `p`); `args` are copied there too. Governed by the innermost enclosing finish, wherever `p` is.
/// A kernel closure (cuda_kernel) is launched: on a GPU place as a CUDA kernel, on a host place as one activity per
/// block (see kernel.hpp); it counts in the finish like an activity.
/// Throws bad_place_exception for an invalid place; illegal_operation_exception for a plain closure sent to a GPU
/// place, a kernel sent to a GPU place from a file not compiled by nvcc, or a call inside atomic/when or a kernel.
template <class F, class... Args>
void async_at(place p, F f, Args... args) {
  if constexpr (detail::is_kernel_v<F>) {
    static_assert(sizeof...(Args) == 0,
                  "apgas::async_at: a kernel closure takes its inputs through captures and resources, not through "
                  "extra arguments");
    detail::send_kernel(p, f);
  } else {
    detail::check_shippable<F>();
    static_assert(std::is_invocable_v<F&, Args&...>, "apgas::async_at: f(args...) must be callable");
    if (!detail::check_at_target(p)) {
      detail::remote_async(p, f, args...);
    } else if constexpr (sizeof...(Args) == 0) {
      detail::spawn(detail::make_task(f));
    } else {
      detail::spawn(detail::make_task([f, tup = std::tuple<Args...>(std::move(args)...)]() mutable {
        std::apply(f, tup);
      }));
    }
  }
}

template <class F>
void finish(F&& body);

/// Run f(args...) at place `p` in the calling activity, wait for it, and return its value or rethrow its exception
/// (at another host place: of the same type for apgas's, the <stdexcept> types, std::bad_alloc and those registered
/// with register_exception; as remote_error naming the type otherwise). `f` and `args` are copied to another host
/// place (the shipping rule of async_at). At the calling host, where the caller waits for f, f reads the caller's
/// arguments themselves, as const (no copy: `at(here(), f, big_vector)` costs nothing), or copies of them if it
/// takes one by non-const reference. Asyncs that f starts report to the
/// finish that governs the caller. A kernel closure is launched as by async_at and waited for (its blocks'
/// exceptions arrive as multiple_exceptions); at() of a kernel returns nothing. The body is the calling activity:
/// its clock registrations go to `p` with it and come back (with any clock the body made, without those it dropped).
template <class F, class... Args>
auto at(place p, F f, Args&&... args) {
  if constexpr (detail::is_kernel_v<F>) {
    static_assert(sizeof...(Args) == 0, "apgas::at: a kernel closure takes no extra arguments");
    detail::at_kernel(p, f);
  } else {
    detail::check_shippable<F>();
    static_assert(std::is_invocable_v<F&, std::decay_t<Args>&...>, "apgas::at: f(args...) must be callable");
    if (!detail::check_at_target(p)) return detail::remote_at(p, f, std::as_const(args)...);
    if constexpr (std::is_invocable_v<F&, const std::decay_t<Args>&...>) {
      return std::invoke(f, std::as_const(args)...);
    } else {
      return [&f](std::decay_t<Args>... copies) { return std::invoke(f, copies...); }(args...);
    }
  }
}

/// Run `body`, then wait until every activity it started, transitively, has terminated. If any of them (or body
/// itself) ended with an exception, throw multiple_exceptions holding all of them.
/// Throws illegal_operation_exception inside atomic/when.
template <class F>
void finish(F&& body) {
  detail::run_finish(detail::function_ref<void()>(body));
}

/// A collecting finish: like finish, and returns the reduction (by `r`) of every value offered with apgas::offer
/// by the activities it governs (and by its body), at any host place (see offer). @code
///   long n = apgas::finish_collect(apgas::sum<long>(), [] { for (int i = 0; i < 10; ++i) apgas::async([] { apgas::offer(1L); }); });
/// @endcode
template <reducer_type Reducer, class F>
typename Reducer::value_type finish_collect(Reducer r, F&& body) {
  using T = typename Reducer::value_type;
  T acc = r.zero();
  detail::collector c{&acc, &r, &typeid(T),
                      [](void* a, const void* red, const void* v) {
                        T& accumulator = *static_cast<T*>(a);
                        accumulator = (*static_cast<const Reducer*>(red))(accumulator, *static_cast<const T*>(v));
                      },
                      [] { return ser::registry::id_of(detail::collect_entry<Reducer>::handle); },
                      nullptr, nullptr};
  if constexpr (detail::shippable_reducer_v<Reducer>) {
    c.write_reducer = [](const void* red, writer& w) { detail::write_reducer(*static_cast<const Reducer*>(red), w); };
    c.merge = [](void* a, const void* red, reader& in) {
      T v{};
      in & v;
      T& accumulator = *static_cast<T*>(a);
      accumulator = (*static_cast<const Reducer*>(red))(accumulator, v);
    };
  }
  detail::run_finish_collect(c, detail::function_ref<void()>(body));
  return acc;
}

/// Offer a value to the closest enclosing collecting finish of the calling activity, from any host place. Its type
/// must be that finish's reducer's value_type exactly; otherwise, or with no collecting finish,
/// illegal_operation_exception at the offering place.
/// At another host place than the finish's, the offers of each place are folded there (the reducer is shipped with
/// the activities: it must be trivially copyable or serializable, and so must its value_type; otherwise such an offer
/// throws illegal_operation_exception), and that place's partial value travels home with its termination report:
/// no message per offer. Fold order: at each place zero ⊕ v1 ⊕ v2 ... in the order the offers were made there; at
/// home, the partial values in the order the reports arrive. A report that carries exceptions carries no partial
/// value (X10's rule): the offers a place made since its last report are dropped when its activities of the finish
/// threw; offers it reported before (a place that went quiet between two activities reports in between) and offers
/// made at the finish's home are kept. The finish throws anyway; the rule shows only when an enclosing finish
/// catches. See docs/decisions/0014-teams-and-collecting-finish.md.
template <class T>
void offer(const T& value) {
  detail::offer(&value, typeid(T));
}

/// Number of worker threads of this host place.
int num_workers() noexcept;
/// Index (0..num_workers()-1) of the worker running the calling activity. It may change after the activity blocks
/// (finish, when, clock advance, at): read it again after any of those. -1 outside a worker. So may the OS thread:
/// `thread_local` variables, `errno` and anything a library keeps per thread (a random engine, an OpenMP or BLAS
/// handle) are not kept across those operations; keep an activity's state in its locals or captures.
int worker_index() noexcept;

}  // namespace apgas
#pragma GCC visibility pop
