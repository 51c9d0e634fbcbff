#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// Shipping closures to other host places: the per-type entries of the closure registry and the runtime entry
// points that send them (apgas/src/dist.cpp). Installed because async_at/at are templates; not API.
//
// A shipped closure travels as: its registry id, the bytes of f (f is trivially copyable: the shipping rule), then
// each argument encoded by apgas::writer. The receiving place looks the id up, rebuilds f and the arguments inside
// the new activity (so a decoding failure is that activity's exception) and runs it.

#include <apgas/detail/task.hpp>
#include <apgas/place.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/serialization/registry.hpp>

#include <cstdint>
#include <new>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace apgas::detail {

/// True when p is the host place of this process.
bool is_here(place p) noexcept;
/// Validate a remote target (bad_place_exception, illegal_operation_exception inside atomic/when).
void check_remote_target(place p);

using async_invoker = void (*)(reader& in);
using at_invoker = void (*)(reader& in, writer& reply);

/// Send an activity (closure `id`, payload already in `w` after the header space that begin_message() reserved) to
/// host place p, counted by the innermost finish of the caller.
writer begin_message();
void send_async(place p, std::uint32_t id, writer&& w);
/// Run closure `id` at p and wait; returns the reply (the encoded result) or rethrows the remote exception.
std::vector<std::byte> send_at(place p, std::uint32_t id, writer&& w);

/// Messages this place has sent (all kinds, bulk payloads not counted separately), since the process started.
std::uint64_t messages_sent() noexcept;
/// Tests only: copy tickets this place holds for gets whose answer has not arrived (0 once every get has ended).
std::size_t copy_tickets_pending() noexcept;
/// Tests only: hand raw bytes to the transport, as a malformed or hostile peer would.
void send_raw(int dst, std::vector<std::byte> bytes);

/// The registry name of a type. (A function rather than typeid(...) written in a static member's initializer: nvcc 13's
/// device front end crashes on the latter when the type involves a lambda defined inside another lambda.)
template <class T>
const char* type_name() noexcept {
  return typeid(T).name();
}

template <class F>
F read_closure(reader& in) {
  alignas(F) unsigned char storage[sizeof(F)];
  in.read_bytes(storage, sizeof(F), "closure");
  return *std::launder(reinterpret_cast<F*>(storage));  // F is trivially copyable: its bytes are a valid F
}

template <class... Args>
std::tuple<Args...> read_args(reader& in) {
  static_assert((std::is_default_constructible_v<Args> && ...),
                "apgas::async_at/at: arguments sent to another place must be default-constructible (they are "
                "rebuilt there from their serialized form)");
  std::tuple<Args...> args;
  std::apply([&](auto&... a) { ((void)(in & a), ...); }, args);
  return args;
}

template <class F, class... Args>
struct async_entry {
  static void invoke(reader& in) {
    F f = read_closure<F>(in);
    auto args = read_args<Args...>(in);
    std::apply(f, args);
  }
  static inline const std::size_t handle =
      ser::registry::add(type_name<async_entry*>(), reinterpret_cast<ser::registry::fn>(&invoke));
};

template <class F, class... Args>
struct at_entry {
  using R = std::invoke_result_t<F&, Args&...>;
  static void invoke(reader& in, writer& reply) {
    F f = read_closure<F>(in);
    auto args = read_args<Args...>(in);
    if constexpr (std::is_void_v<R>) {
      std::apply(f, args);
    } else {
      reply & std::apply(f, args);
    }
  }
  static inline const std::size_t handle =
      ser::registry::add(type_name<at_entry*>(), reinterpret_cast<ser::registry::fn>(&invoke));
};

template <class F, class... Args>
void remote_async(place p, const F& f, const Args&... args) {
  (ser::check_serializable<Args>(), ...);
  writer w = begin_message();
  w.write_bytes(&f, sizeof(F));
  ((void)(w & args), ...);
  send_async(p, ser::registry::id_of(async_entry<F, Args...>::handle), std::move(w));
}

/// Whether a result type holds a span_view (a view into a message: a reply's buffer is gone when at() returns).
template <class T>
struct holds_span_view : std::false_type {};
template <class T>
struct holds_span_view<span_view<T>> : std::true_type {};
template <class T, class A>
struct holds_span_view<std::vector<T, A>> : holds_span_view<T> {};
template <class T, std::size_t N>
struct holds_span_view<std::array<T, N>> : holds_span_view<T> {};
template <class T>
struct holds_span_view<std::optional<T>> : holds_span_view<T> {};
template <class A, class B>
struct holds_span_view<std::pair<A, B>> : std::bool_constant<holds_span_view<A>::value || holds_span_view<B>::value> {};
template <class... Ts>
struct holds_span_view<std::tuple<Ts...>> : std::bool_constant<(holds_span_view<Ts>::value || ...)> {};
template <class... Ts>
struct holds_span_view<std::variant<Ts...>> : std::bool_constant<(holds_span_view<Ts>::value || ...)> {};

template <class F, class... Args>
auto remote_at(place p, const F& f, const Args&... args) {
  using R = typename at_entry<F, Args...>::R;
  (ser::check_serializable<Args>(), ...);
  if constexpr (!std::is_void_v<R>) {
    ser::check_serializable<std::decay_t<R>>();
    static_assert(!holds_span_view<std::decay_t<R>>::value,
                  "apgas::at: a result cannot be (or hold) an apgas::span_view: it would view the reply's buffer, "
                  "gone when at() returns; return a std::vector");
  }
  writer w = begin_message();
  w.write_bytes(&f, sizeof(F));
  ((void)(w & args), ...);
  std::vector<std::byte> reply = send_at(p, ser::registry::id_of(at_entry<F, Args...>::handle), std::move(w));
  if constexpr (!std::is_void_v<R>) {
    return deserialize<std::decay_t<R>>(reply, SIZE_MAX);  // (results have no size limit but memory)
  }
}

}  // namespace apgas::detail
#pragma GCC visibility pop
