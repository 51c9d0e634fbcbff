#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file archive.hpp
/// The wire format of apgas: values to bytes and back, bounds-checked.
///
/// Encoding (little-endian hosts only, the same binary at both ends — peers compare a build fingerprint):
///  - a trivially copyable, pointer-free type (arithmetic, enum, place, a struct of those): its bytes (memcpy);
///  - lengths (string, containers, spans): u64 element count, checked on decode against the bytes remaining (each
///    element takes at least min_encoded_size<T>() bytes) and against the reader's size limit *before* anything is
///    allocated;
///  - std::string, vector, array, pair, tuple, optional (u8 flag), variant (u32 index, checked), map, unordered_map;
///  - user types: a member `template <class A> void serialize(A& a) { a & x & y; }` serving both directions, or a
///    specialisation of apgas::serializer<T> with static save(writer&, const T&) and load(reader&, T&);
///  - large contiguous data: write_span(span<const T>) / read_span<T>() — on decode a zero-copy view into the message
///    (the payload is padded to alignof(T) relative to the buffer start; message buffers are 16-byte aligned).
/// Nesting (containers and user types inside each other) is bounded by max_depth. Raw pointers and views (string_view,
/// span, reference_wrapper) are rejected at compile time; no code address is ever encoded (closures travel as
/// registry ids, see registry.hpp). A trivially copyable struct travels as its bytes: pointers or views inside it
/// cannot be seen, and neither can an enum or bool member holding a value its type does not have.
/// Every decoding failure throws apgas::serialization_error naming what was being read and the numbers involved.

#include <apgas/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace apgas {

class writer;
class reader;

/// Customisation point for types that cannot have a serialize member: specialise with
///   static void save(writer&, const T&); static void load(reader&, T&);
template <class T, class = void>
struct serializer;

namespace ser {

/// Default bound on one message and on any decoded length (1 GiB); a reader may be given a smaller one.
inline constexpr std::size_t default_max_message = std::size_t{1} << 30;
/// Bound on nesting of containers and user types in one value.
inline constexpr int max_depth = 64;

template <class T, class = void>
struct has_member_serialize : std::false_type {};
template <class T>
struct has_member_serialize<T, std::void_t<decltype(std::declval<T&>().serialize(std::declval<writer&>()))>>
    : std::true_type {};

template <class T, class = void>
struct has_serializer : std::false_type {};
template <class T>
struct has_serializer<T, std::void_t<decltype(serializer<T>::save(std::declval<writer&>(), std::declval<const T&>()))>>
    : std::true_type {};

/// Types that refer to memory of this place without owning it: meaningless at another place. A struct member of
/// such a type cannot be seen here (a trivially copyable struct travels as its bytes): that is the user's care.
template <class T>
struct is_view_like : std::false_type {};
template <class C, class Tr>
struct is_view_like<std::basic_string_view<C, Tr>> : std::true_type {};
template <class T, std::size_t E>
struct is_view_like<std::span<T, E>> : std::true_type {};
template <class T>
struct is_view_like<std::reference_wrapper<T>> : std::true_type {};

template <class T>
struct is_pointer_like
    : std::bool_constant<std::is_pointer_v<T> || std::is_member_pointer_v<T> || is_view_like<T>::value> {};

/// std::optional and std::variant of trivially copyable types are trivially copyable too, but their bytes hold a
/// flag / an index that decoding must check (and padding that must not travel): they always use their codec.
template <class T>
struct is_tagged : std::false_type {};
template <>
struct is_tagged<bool> : std::true_type {};  // only 0 and 1 are bools: decoded and checked
template <class T>
struct is_tagged<std::optional<T>> : std::true_type {};
template <class... Ts>
struct is_tagged<std::variant<Ts...>> : std::true_type {};

/// Types encoded as their bytes. Pointers are excluded (no address travels); a user type that defines serialize or a
/// serializer specialisation uses that instead even if it is trivially copyable. A std::array is its bytes only when
/// its element type is (an array of optionals, variants, bools or user types goes element by element, checked).
template <class T>
struct is_bitwise
    : std::bool_constant<std::is_trivially_copyable_v<T> && !is_pointer_like<T>::value &&
                         !has_member_serialize<T>::value && !has_serializer<T>::value && !std::is_array_v<T> &&
                         !is_tagged<T>::value> {};
template <class T, std::size_t N>
struct is_bitwise<std::array<T, N>> : std::bool_constant<is_bitwise<T>::value && !has_serializer<std::array<T, N>>::value> {};
template <class T>
inline constexpr bool is_bitwise_v = is_bitwise<T>::value;

}  // namespace ser

/// Encoder: appends to a byte vector.
class writer {
 public:
  writer() = default;
  explicit writer(std::size_t reserve) { buf_.reserve(reserve); }
  /// Encode into `storage` (cleared; its capacity is kept): a recycled buffer.
  explicit writer(std::vector<std::byte>&& storage) noexcept : buf_(std::move(storage)) { buf_.clear(); }

  void write_bytes(const void* p, std::size_t n) {
    if (n == 0) return;
    // insert, not resize + memcpy: a growing buffer is filled once, not zeroed first (a large argument's bytes
    // would otherwise pass through memory twice)
    const auto* b = static_cast<const std::byte*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void write_length(std::size_t n) {
    const std::uint64_t v = n;
    write_bytes(&v, sizeof v);
  }
  /// Pad with zeros so that the next byte is at a multiple of `align` from the start of the message.
  void align_to(std::size_t align) {
    const std::size_t rem = buf_.size() % align;
    if (rem != 0) buf_.resize(buf_.size() + (align - rem), std::byte{0});
  }
  /// A contiguous array of bitwise elements: length, padding, bytes. Decoded by reader::read_span without a copy.
  template <class T>
  void write_span(std::span<const T> s) {
    static_assert(ser::is_bitwise_v<T>, "apgas::writer::write_span: the element type must be trivially copyable "
                                        "and contain no pointers");
    static_assert(alignof(T) <= 16, "apgas::writer::write_span: the element type is aligned to more than 16 bytes, the alignment "
                                    "of message buffers");
    write_length(s.size());
    align_to(alignof(T));
    write_bytes(s.data(), s.size_bytes());
  }

  template <class T>
  writer& operator&(const T& v);
  template <class T>
  writer& operator<<(const T& v) { return *this & v; }

  std::size_t size() const noexcept { return buf_.size(); }
  std::vector<std::byte>& bytes() noexcept { return buf_; }
  std::vector<std::byte> take() noexcept { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
};

/// Decoder over a byte range it does not own. Every read is bounds-checked.
class reader {
 public:
  reader(std::span<const std::byte> bytes, std::size_t max_message = ser::default_max_message)
      : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()), max_(max_message) {
    if (bytes.size() > max_message) {
      throw serialization_error("apgas: a message of " + std::to_string(bytes.size()) +
                                " bytes exceeds the maximum message size of " + std::to_string(max_message));
    }
  }

  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  std::size_t position() const noexcept { return static_cast<std::size_t>(p_ - begin_); }

  void read_bytes(void* out, std::size_t n, const char* what = "value") {
    need(n, what);
    if (n != 0) std::memcpy(out, p_, n);
    p_ += n;
  }
  void skip(std::size_t n, const char* what) {
    need(n, what);
    p_ += n;
  }
  /// The next n bytes, in place (the reader moves past them).
  const std::byte* read_in_place(std::size_t n, const char* what) {
    need(n, what);
    const std::byte* at = p_;
    p_ += n;
    return at;
  }
  /// A length of elements each taking at least `min_elem_bytes` bytes: checked against the bytes remaining and the
  /// message limit before the caller allocates anything.
  std::size_t read_length(std::size_t min_elem_bytes, const char* what) {
    std::uint64_t n = 0;
    read_bytes(&n, sizeof n, what);
    // An element is taken to need at least one byte even where its type does not say (a user type: 0), so that a
    // malformed length cannot make a decoder loop for ever over nothing; a user type that encodes to no bytes at all
    // cannot be an element of a container (its length would be refused).
    const std::size_t per = min_elem_bytes == 0 ? 1 : min_elem_bytes;
    if (n > max_ / per || n * per > remaining()) {
      const std::string need = n > max_ / per ? "more than " + std::to_string(max_)  // n * per would overflow
                                              : std::to_string(n * per);
      throw serialization_error("apgas: malformed message: " + std::string(what) + " of length " +
                                std::to_string(n) + " needs at least " + need + " bytes but only " +
                                std::to_string(remaining()) + " remain (message limit " + std::to_string(max_) + ")");
    }
    return static_cast<std::size_t>(n);
  }
  void align_to(std::size_t align, const char* what) {
    const std::size_t rem = position() % align;
    if (rem != 0) skip(align - rem, what);
  }
  /// The counterpart of writer::write_span: a view into the message (valid while the message buffer lives).
  template <class T>
  std::span<const T> read_span() {
    static_assert(ser::is_bitwise_v<T>, "apgas::reader::read_span: the element type must be trivially copyable "
                                        "and contain no pointers");
    static_assert(alignof(T) <= 16, "apgas::reader::read_span: the element type is aligned to more than 16 bytes, the alignment "
                                    "of message buffers");
    const std::size_t n = read_length(sizeof(T), "span");
    align_to(alignof(T), "span padding");
    need(n * sizeof(T), "span");
    if (reinterpret_cast<std::uintptr_t>(p_) % alignof(T) != 0) {
      throw serialization_error("apgas: a span of " + std::to_string(n) + " elements is not aligned to " +
                                std::to_string(alignof(T)) + " bytes in this message buffer");
    }
    const T* data = reinterpret_cast<const T*>(p_);
    p_ += n * sizeof(T);
    return {data, n};
  }

  template <class T>
  reader& operator&(T& v);
  template <class T>
  reader& operator>>(T& v) { return *this & v; }
  template <class T>
  T read() {
    static_assert(std::is_default_constructible_v<T>, "apgas::reader::read<T>: T must be default-constructible");
    T v{};
    *this & v;
    return v;
  }

  /// Nesting guard used by containers and user types.
  struct nest {
    explicit nest(reader& r) : r_(r) {
      if (++r_.depth_ > ser::max_depth) {
        throw serialization_error("apgas: malformed message: values nested deeper than " +
                                  std::to_string(ser::max_depth) + " levels");
      }
    }
    ~nest() { --r_.depth_; }
    nest(const nest&) = delete;
    nest& operator=(const nest&) = delete;

   private:
    reader& r_;
  };

 private:
  void need(std::size_t n, const char* what) const {
    if (n > remaining()) {
      throw serialization_error("apgas: truncated message: reading " + std::string(what) + " needs " +
                                std::to_string(n) + " bytes, " + std::to_string(remaining()) + " remain");
    }
  }

  const std::byte* begin_;
  const std::byte* p_;
  const std::byte* end_;
  std::size_t max_;
  int depth_ = 0;
};

namespace ser {

template <class T>
struct codec {};  // specialised below for every supported library type

/// The fewest bytes one encoded T can take (used to bound decoded lengths).
template <class T>
constexpr std::size_t min_encoded_size() {
  if constexpr (is_bitwise_v<T>) {
    return sizeof(T);
  } else if constexpr (requires { codec<T>::min_size; }) {
    return codec<T>::min_size;
  } else {
    return 0;
  }
}

template <class T>
inline constexpr bool is_serializable_v = is_bitwise_v<T> || has_member_serialize<T>::value ||
                                          has_serializer<T>::value || requires { codec<T>::supported; };

template <class T>
constexpr void check_serializable() {
  static_assert(!is_view_like<T>::value,
                "apgas serialization: std::string_view, std::span and std::reference_wrapper refer to memory of this "
                "place and cannot be sent between places; send a std::string or std::vector, or an apgas::span_view "
                "(an argument of at/async_at, read in place at the receiver)");
  static_assert(!is_pointer_like<T>::value || is_view_like<T>::value,
                "apgas serialization: raw pointers cannot be sent between places (an address means nothing at "
                "another place); send the data, a global_ref or a remote_array instead");
  static_assert(is_serializable_v<T>,
                "apgas serialization: this type cannot be serialized. Make it trivially copyable, or give it a "
                "member `template <class A> void serialize(A& a) { a & field1 & field2; }`, or specialise "
                "apgas::serializer<T> with static save(writer&, const T&) and load(reader&, T&)");
}

template <class Seq>
void save_range(writer& w, const Seq& s) {
  w.write_length(s.size());
  for (const auto& e : s) w & e;
}

template <class T>
struct codec<std::vector<T>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 8;
  static void save(writer& w, const std::vector<T>& v) {
    if constexpr (is_bitwise_v<T>) {
      w.write_length(v.size());
      w.write_bytes(v.data(), v.size() * sizeof(T));
    } else {
      save_range(w, v);
    }
  }
  static void load(reader& r, std::vector<T>& v) {
    reader::nest guard(r);
    const std::size_t n = r.read_length(min_encoded_size<T>(), "vector");
    v.clear();
    if constexpr (is_bitwise_v<T>) {
      const std::byte* p = r.read_in_place(n * sizeof(T), "vector elements");
      if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0) {
        // Copied once (resize would zero the elements first); the bytes are T's representation (is_bitwise).
        const T* first = reinterpret_cast<const T*>(p);
        v.assign(first, first + n);
      } else {
        v.resize(n);
        if (n != 0) std::memcpy(v.data(), p, n * sizeof(T));
      }
    } else {
      // n was checked against min_encoded_size<T>() (0 for user types), which can be far below sizeof(T): reserve
      // no more than the bytes left in the message could fill, and let real elements grow the vector beyond that.
      v.reserve(std::min(n, r.remaining() / sizeof(T)));
      for (std::size_t i = 0; i < n; ++i) {
        T e{};
        r & e;
        v.push_back(std::move(e));
      }
    }
  }
};

template <class C, class Tr, class A>
struct codec<std::basic_string<C, Tr, A>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 8;
  static void save(writer& w, const std::basic_string<C, Tr, A>& s) {
    w.write_length(s.size());
    w.write_bytes(s.data(), s.size() * sizeof(C));
  }
  static void load(reader& r, std::basic_string<C, Tr, A>& s) {
    const std::size_t n = r.read_length(sizeof(C), "string");
    s.resize(n);
    r.read_bytes(s.data(), n * sizeof(C), "string characters");
  }
};

template <>
struct codec<bool> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 1;
  static void save(writer& w, const bool& b) {
    const std::uint8_t v = b ? 1 : 0;
    w.write_bytes(&v, 1);
  }
  static void load(reader& r, bool& b) {
    std::uint8_t v = 0;
    r.read_bytes(&v, 1, "bool");
    if (v > 1) throw serialization_error("apgas: malformed message: bool byte " + std::to_string(v));
    b = v != 0;
  }
};

template <class T, std::size_t N>
struct codec<std::array<T, N>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = N * min_encoded_size<T>();
  static void save(writer& w, const std::array<T, N>& a) {
    for (const auto& e : a) w & e;
  }
  static void load(reader& r, std::array<T, N>& a) {
    reader::nest guard(r);
    for (auto& e : a) r & e;
  }
};

template <class A, class B>
struct codec<std::pair<A, B>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = min_encoded_size<A>() + min_encoded_size<B>();
  static void save(writer& w, const std::pair<A, B>& p) { w & p.first & p.second; }
  static void load(reader& r, std::pair<A, B>& p) {
    reader::nest guard(r);
    r & p.first & p.second;
  }
};

template <class... Ts>
struct codec<std::tuple<Ts...>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = (std::size_t{0} + ... + min_encoded_size<Ts>());
  static void save(writer& w, const std::tuple<Ts...>& t) {
    std::apply([&](const auto&... e) { (w & ... & e); }, t);
  }
  static void load(reader& r, std::tuple<Ts...>& t) {
    reader::nest guard(r);
    std::apply([&](auto&... e) { (r & ... & e); }, t);
  }
};

template <class T>
struct codec<std::optional<T>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 1;
  static void save(writer& w, const std::optional<T>& o) {
    const std::uint8_t has = o.has_value() ? 1 : 0;
    w & has;
    if (o) w & *o;
  }
  static void load(reader& r, std::optional<T>& o) {
    reader::nest guard(r);
    std::uint8_t has = 0;
    r & has;
    if (has > 1) throw serialization_error("apgas: malformed message: optional flag " + std::to_string(has));
    if (has == 0) {
      o.reset();
    } else {
      T v{};
      r & v;
      o = std::move(v);
    }
  }
};

template <class... Ts>
struct codec<std::variant<Ts...>> {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 4;
  static void save(writer& w, const std::variant<Ts...>& v) {
    const auto index = static_cast<std::uint32_t>(v.index());
    w & index;
    std::visit([&](const auto& e) { w & e; }, v);
  }
  template <std::size_t I>
  static void load_alt(reader& r, std::variant<Ts...>& v, std::uint32_t index) {
    if constexpr (I < sizeof...(Ts)) {
      if (index == I) {
        std::variant_alternative_t<I, std::variant<Ts...>> e{};
        r & e;
        v.template emplace<I>(std::move(e));
      } else {
        load_alt<I + 1>(r, v, index);
      }
    }
  }
  static void load(reader& r, std::variant<Ts...>& v) {
    reader::nest guard(r);
    std::uint32_t index = 0;
    r & index;
    if (index >= sizeof...(Ts)) {
      throw serialization_error("apgas: malformed message: variant index " + std::to_string(index) +
                                " out of range (the variant has " + std::to_string(sizeof...(Ts)) + " alternatives)");
    }
    load_alt<0>(r, v, index);
  }
};

template <class Map>
struct map_codec {
  static constexpr bool supported = true;
  static constexpr std::size_t min_size = 8;
  static void save(writer& w, const Map& m) {
    w.write_length(m.size());
    for (const auto& [k, v] : m) w & k & v;
  }
  static void load(reader& r, Map& m) {
    reader::nest guard(r);
    using K = typename Map::key_type;
    using V = typename Map::mapped_type;
    const std::size_t n = r.read_length(min_encoded_size<K>() + min_encoded_size<V>(), "map");
    m.clear();
    for (std::size_t i = 0; i < n; ++i) {
      K k{};
      V v{};
      r & k & v;
      if (!m.try_emplace(std::move(k), std::move(v)).second) {
        throw serialization_error("apgas: malformed message: a map of " + std::to_string(n) +
                                  " entries holds one key twice (entry " + std::to_string(i) + ")");
      }
    }
  }
};

template <class K, class V, class C, class A>
struct codec<std::map<K, V, C, A>> : map_codec<std::map<K, V, C, A>> {};
template <class K, class V, class H, class E, class A>
struct codec<std::unordered_map<K, V, H, E, A>> : map_codec<std::unordered_map<K, V, H, E, A>> {};

}  // namespace ser

template <class T>
writer& writer::operator&(const T& v) {
  ser::check_serializable<T>();
  if constexpr (!ser::is_serializable_v<T> || ser::is_pointer_like<T>::value) {
    // reported by check_serializable
  } else if constexpr (ser::has_serializer<T>::value) {
    serializer<T>::save(*this, v);
  } else if constexpr (ser::has_member_serialize<T>::value) {
    const_cast<T&>(v).serialize(*this);  // one member serves both directions; saving does not modify
  } else if constexpr (ser::is_bitwise_v<T>) {
    write_bytes(&v, sizeof(T));
  } else {
    ser::codec<T>::save(*this, v);
  }
  return *this;
}

template <class T>
reader& reader::operator&(T& v) {
  static_assert(!std::is_const_v<T>, "apgas serialization: a const member cannot be decoded into; make it non-const "
                                     "(or give the type a serializer<T> that constructs it)");
  ser::check_serializable<T>();
  if constexpr (!ser::is_serializable_v<T> || ser::is_pointer_like<T>::value) {
    // reported by check_serializable
  } else if constexpr (ser::has_serializer<T>::value) {
    nest guard(*this);
    serializer<T>::load(*this, v);
  } else if constexpr (ser::has_member_serialize<T>::value) {
    nest guard(*this);
    v.serialize(*this);
  } else if constexpr (ser::is_bitwise_v<T>) {
    read_bytes(&v, sizeof(T), "value");
  } else {
    ser::codec<T>::load(*this, v);
  }
  return *this;
}

/// A contiguous array sent without extra copies: encoded with writer::write_span, decoded as a view into the
/// message (valid while the activity that received it runs). Use it as an argument of async_at/at.
template <class T>
struct span_view {
  std::span<const T> data;
};

template <class T>
struct serializer<span_view<T>> {
  static void save(writer& w, const span_view<T>& v) { w.write_span(v.data); }
  static void load(reader& r, span_view<T>& v) { v.data = r.template read_span<T>(); }
};

/// Encode values into a new message.
template <class... Ts>
std::vector<std::byte> serialize(const Ts&... vs) {
  writer w;
  (w & ... & vs);
  return w.take();
}

/// Decode one T from a whole message; trailing bytes are an error.
template <class T>
T deserialize(std::span<const std::byte> bytes, std::size_t max_message = ser::default_max_message) {
  reader r(bytes, max_message);
  T v = r.read<T>();
  if (r.remaining() != 0) {
    throw serialization_error("apgas: malformed message: " + std::to_string(r.remaining()) +
                              " bytes left over after the value");
  }
  return v;
}

}  // namespace apgas
#pragma GCC visibility pop
