// libFuzzer target for the apgas decoder (serialization/include/apgas/serialization/archive.hpp).
// Every input is decoded as each of several types. Malformed input must raise apgas::serialization_error — the
// only exception caught here; anything else (another exception, a crash, an ASan/UBSan report, an allocation
// over libFuzzer's -malloc_limit_mb) is a bug. Decoded values are re-encoded and decoded again, and must give
// the same bytes. Build and run: tests/fuzz/README.md.
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace {

struct node {
  int value = 0;
  std::vector<node> children;
  template <class A>
  void serialize(A& a) {
    a & value & children;
  }
};

using complex_value = std::map<std::string, std::vector<std::tuple<int, std::optional<std::string>,
                                                                   std::variant<int, double, std::string>>>>;
// Trivially copyable optional and variant: their flag and index must be checked like any other.
using small_tags = std::vector<std::pair<std::optional<int>, std::variant<int, float, std::uint8_t>>>;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "apgas_fuzz_decoder: %s\n", what);
  std::abort();
}

// Use every decoded byte, so that a value made of bytes the decoder never wrote shows up under the sanitizers.
std::uint64_t touch(const node& n) {
  std::uint64_t h = static_cast<std::uint32_t>(n.value);
  for (const node& c : n.children) h = h * 31 + touch(c);
  return h;
}
std::uint64_t touch(const complex_value& m) {
  std::uint64_t h = 0;
  for (const auto& [k, v] : m) {
    h += k.size();
    for (const auto& [i, o, var] : v) {
      h = h * 31 + static_cast<std::uint32_t>(i) + (o ? o->size() + 1 : 0);
      h += std::visit([](const auto& x) -> std::uint64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) {
          return x.size();
        } else {
          return static_cast<std::uint64_t>(x != x ? 1 : 2);
        }
      }, var);
    }
  }
  return h;
}
std::uint64_t touch(const small_tags& v) {
  std::uint64_t h = 0;
  for (const auto& [o, var] : v) {
    h = h * 31 + (o.has_value() ? static_cast<std::uint32_t>(*o) : 7u);
    h += var.index() + std::visit([](auto x) { return static_cast<std::uint64_t>(x == x); }, var);
  }
  return h;
}

volatile std::uint64_t sink;

// Decode T; if that succeeds, encode(decode(bytes)) must decode to a value that encodes to the same bytes.
template <class T>
void decode_as(std::span<const std::byte> bytes) {
  std::vector<std::byte> again;
  try {
    const T v = apgas::deserialize<T>(bytes);
    sink = touch(v);
    again = apgas::serialize(v);
  } catch (const apgas::serialization_error&) {
    return;
  }
  try {
    const T w = apgas::deserialize<T>(again);
    if (apgas::serialize(w) != again) bug("re-encoding a decoded value changed its bytes");
  } catch (const apgas::serialization_error&) {
    bug("the encoding of a decoded value does not decode");
  }
}

// A 16-byte aligned copy of the input (message buffers are 16-byte aligned; span_view relies on it).
struct aligned_bytes {
  explicit aligned_bytes(const std::uint8_t* data, std::size_t size)
      : p(static_cast<std::byte*>(::operator new(size == 0 ? 1 : size, std::align_val_t{16}))), n(size) {
    if (size != 0) std::memcpy(p, data, size);
  }
  ~aligned_bytes() { ::operator delete(p, std::align_val_t{16}); }
  aligned_bytes(const aligned_bytes&) = delete;
  aligned_bytes& operator=(const aligned_bytes&) = delete;
  std::span<const std::byte> span() const { return {p, n}; }
  std::byte* p;
  std::size_t n;
};

void check_span(const apgas::span_view<double>& v, const aligned_bytes& buf) {
  const auto* first = reinterpret_cast<const std::byte*>(v.data.data());
  if (v.data.empty()) return;
  if (first < buf.p || first + v.data.size_bytes() > buf.p + buf.n) bug("span_view points outside the message");
  if (reinterpret_cast<std::uintptr_t>(first) % alignof(double) != 0) bug("span_view data is misaligned");
  double s = 0;
  for (double d : v.data) s += d;  // ASan checks every element is inside the buffer
  sink = static_cast<std::uint64_t>(s == s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const aligned_bytes buf(data, size);
  const std::span<const std::byte> bytes = buf.span();

  decode_as<complex_value>(bytes);
  decode_as<node>(bytes);
  decode_as<small_tags>(bytes);

  // Zero-copy spans: alone, and after a value of odd size so that the padding matters.
  try {
    check_span(apgas::deserialize<apgas::span_view<double>>(bytes), buf);
  } catch (const apgas::serialization_error&) {
  }
  try {
    apgas::reader r(bytes);
    std::string s;
    apgas::span_view<double> a;
    std::uint8_t c = 0;
    apgas::span_view<double> b;
    r & s & a & c & b;
    check_span(a, buf);
    check_span(b, buf);
    sink = s.size() + c;
  } catch (const apgas::serialization_error&) {
  }
  // A reader limit below the message size.
  try {
    apgas::reader r(bytes, size / 2);
    sink = r.read<std::vector<std::string>>().size();
  } catch (const apgas::serialization_error&) {
  }
  return 0;
}
