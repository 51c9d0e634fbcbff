// The wire format (serialization/include/apgas/serialization/archive.hpp) and the closure registry's id checks:
// round trips of every supported kind of value, the documented byte layout where it matters (lengths, optional
// flag, variant index, span padding), zero-copy span_view decoding, and malformed input — every prefix of a valid
// message, absurd lengths, bad tags, excessive nesting, trailing bytes, size limits — which must raise
// apgas::serialization_error naming the numbers involved, never crash and never allocate more than a small
// multiple of the message.
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/serialization/registry.hpp>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

// ---- the largest single heap allocation, to check that malformed lengths never reach an allocator ----
// The replaceable global operator new of this test binary (operator new[] and the nothrow forms forward to it).
namespace {
std::atomic<bool> g_track_allocations{false};
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_track_allocations.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC would otherwise see free() of what operator new returned and warn (-Wmismatched-new-delete).
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// Every other form too: a sanitizer run-time replaces them all, and a pair split between its allocator and ours
// is an alloc-dealloc mismatch (the standard library's temporary buffers use the nothrow form).
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

// While alive, records the largest single allocation made through operator new.
class allocation_probe {
 public:
  allocation_probe() {
    g_largest_allocation.store(0);
    g_track_allocations.store(true);
  }
  ~allocation_probe() { g_track_allocations.store(false); }
  allocation_probe(const allocation_probe&) = delete;
  allocation_probe& operator=(const allocation_probe&) = delete;
  std::size_t largest() const { return g_largest_allocation.load(); }
};

using bytes = std::vector<std::byte>;

template <class T>
T round_trip(const T& v) {
  const bytes b = apgas::serialize(v);
  return apgas::deserialize<T>(b);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The what() of the serialization_error that f throws; a test failure if it throws nothing or something else.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const apgas::serialization_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected apgas::serialization_error, got another exception: " << e.what();
    return "";
  } catch (...) {
    ADD_FAILURE() << "expected apgas::serialization_error, got a non-std exception";
    return "";
  }
  ADD_FAILURE() << "expected apgas::serialization_error, nothing was thrown";
  return "";
}

template <class T>
std::string decode_error(const bytes& b, std::size_t max_message = apgas::ser::default_max_message) {
  return error_of([&] { (void)apgas::deserialize<T>(b, max_message); });
}

// A copy of some bytes at a chosen offset from a 16-byte boundary (message buffers are 16-byte aligned).
class aligned_copy {
 public:
  explicit aligned_copy(std::span<const std::byte> src, std::size_t offset = 0)
      : storage_((src.size() + offset) / sizeof(block) + 1), offset_(offset), size_(src.size()) {
    if (!src.empty()) std::memcpy(data(), src.data(), src.size());
  }
  std::byte* data() { return storage_.front().b + offset_; }
  std::span<const std::byte> span() { return {data(), size_}; }

 private:
  struct alignas(16) block {
    std::byte b[16];
  };
  std::vector<block> storage_;
  std::size_t offset_;
  std::size_t size_;
};

// ---- user types ----
enum class color : std::uint8_t { red = 1, green = 2, blue = 3 };
enum plain_enum { first = 10, second = 20 };

struct pod {
  int a;
  double b;
  char c;
  bool operator==(const pod&) const = default;
};
static_assert(apgas::ser::is_bitwise_v<pod>);

struct person {
  std::string name;
  int age = 0;
  std::vector<std::string> tags;
  std::optional<std::string> email;
  template <class A>
  void serialize(A& a) {
    a & name & age & tags & email;
  }
  bool operator==(const person&) const = default;
};

// Trivially copyable, but its serialize member wins over the bitwise encoding: only `kept` travels.
struct partial {
  int kept = 0;
  int not_sent = 0;
  template <class A>
  void serialize(A& a) {
    a & kept;
  }
};
static_assert(std::is_trivially_copyable_v<partial> && !apgas::ser::is_bitwise_v<partial>);

// No serialize member: apgas::serializer<fraction> below. Encoded denominator first, so the tests can tell.
class fraction {
 public:
  fraction() = default;
  fraction(long n, long d) : num_(n), den_(d) {}
  long num() const { return num_; }
  long den() const { return den_; }
  bool operator==(const fraction&) const = default;

 private:
  long num_ = 0;
  long den_ = 1;
};

// A recursive type: every level is two nesting steps (the node, then its vector of children).
struct node {
  int value = 0;
  std::vector<node> children;
  template <class A>
  void serialize(A& a) {
    a & value & children;
  }
  bool operator==(const node&) const = default;
};

using complex_value = std::map<std::string, std::vector<std::tuple<int, std::optional<std::string>,
                                                                   std::variant<int, double, std::string>>>>;

struct bundle {
  complex_value m;
  person p;
  node tree;
  fraction f;
  std::array<std::string, 2> arr;
  std::pair<int, std::string> pr;
  std::unordered_map<int, std::vector<double>> um;
  std::optional<int> oi;
  std::variant<int, double> vi;
  color c = color::red;
  template <class A>
  void serialize(A& a) {
    a & m & p & tree & f & arr & pr & um & oi & vi & c;
  }
  bool operator==(const bundle&) const = default;
};

complex_value make_complex() {
  complex_value m;
  m["alpha"].emplace_back(1, std::nullopt, 7);
  m["alpha"].emplace_back(-2, std::string("opt"), 2.5);
  m["beta"].emplace_back(3, std::string(), std::string("var"));
  m[""];  // an empty vector under an empty key
  return m;
}

bundle make_bundle() {
  bundle b;
  b.m = make_complex();
  b.p = person{"ada", 36, {"math", "engines"}, std::string("ada@example.org")};
  b.tree = node{1, {node{2, {}}, node{3, {node{4, {}}}}}};
  b.f = fraction(3, 4);
  b.arr = {"x", "yz"};
  b.pr = {9, "nine"};
  b.um = {{1, {1.0, 2.0}}, {2, {}}};
  b.oi = 42;
  b.vi = 0.5;
  b.c = color::blue;
  return b;
}

// A node chain `depth` nodes deep, encoded by hand: value, length 1, ..., value, length 0.
bytes node_chain(int depth) {
  apgas::writer w;
  for (int i = 0; i < depth; ++i) {
    w & i;
    w.write_length(i + 1 < depth ? 1 : 0);
  }
  return w.take();
}

// std::optional nested N deep around int (one nesting level each; a std::vector<std::vector<...>> this deep
// would have a type name that doubles with each level, through its allocator argument).
template <int N>
struct nested_optional {
  using type = std::optional<typename nested_optional<N - 1>::type>;
};
template <>
struct nested_optional<0> {
  using type = int;
};

// N optionals nested inside each other, all engaged, around the int 7.
bytes nested_ones(int levels) {
  apgas::writer w;
  for (int i = 0; i < levels; ++i) w & std::uint8_t{1};
  w & 7;
  return w.take();
}

}  // namespace

template <>
struct apgas::serializer<fraction> {
  static void save(writer& w, const fraction& f) { w & f.den() & f.num(); }
  static void load(reader& r, fraction& f) {
    long den = 0;
    long num = 0;
    r & den & num;
    if (den == 0) throw serialization_error("fraction with denominator 0");
    f = fraction(num, den);
  }
};

namespace {

// ================================ round trips ================================

TEST(ArchiveRoundTrip, Scalars) {
  EXPECT_EQ(round_trip(0), 0);
  EXPECT_EQ(round_trip(-123456789), -123456789);
  EXPECT_EQ(round_trip(std::numeric_limits<std::int64_t>::min()), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(round_trip(std::numeric_limits<std::uint64_t>::max()), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(round_trip(3.25), 3.25);
  EXPECT_EQ(round_trip(-0.0f), -0.0f);
  EXPECT_TRUE(std::signbit(round_trip(-0.0)));
  EXPECT_EQ(round_trip(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(round_trip(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(round_trip('z'), 'z');
  EXPECT_EQ(round_trip(true), true);
  // Bitwise values are their bytes.
  EXPECT_EQ(apgas::serialize(1).size(), sizeof(int));
  EXPECT_EQ(apgas::serialize(1.0).size(), sizeof(double));
}

TEST(ArchiveRoundTrip, Enums) {
  EXPECT_EQ(round_trip(color::green), color::green);
  EXPECT_EQ(round_trip(color::blue), color::blue);
  EXPECT_EQ(round_trip(second), second);
  EXPECT_EQ(apgas::serialize(color::blue).size(), 1u);
}

TEST(ArchiveRoundTrip, TriviallyCopyableStruct) {
  const pod p{7, -1.5, 'q'};
  const bytes b = apgas::serialize(p);
  EXPECT_EQ(b.size(), sizeof(pod));
  EXPECT_EQ(apgas::deserialize<pod>(b), p);
}

TEST(ArchiveRoundTrip, Strings) {
  EXPECT_EQ(round_trip(std::string()), "");
  EXPECT_EQ(apgas::serialize(std::string()).size(), 8u);  // the u64 length alone
  EXPECT_EQ(round_trip(std::string("hello")), "hello");
  EXPECT_EQ(apgas::serialize(std::string("hello")).size(), 8u + 5u);
  const std::string with_nuls("a\0b\0c", 5);
  EXPECT_EQ(round_trip(with_nuls), with_nuls);

  std::string large(3 * 1024 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>((i * 131 + i / 7) & 0xFF);
  const bytes b = apgas::serialize(large);
  EXPECT_EQ(b.size(), 8 + large.size());
  std::uint64_t len = 0;
  std::memcpy(&len, b.data(), 8);
  EXPECT_EQ(len, large.size());
  EXPECT_EQ(apgas::deserialize<std::string>(b), large);
}

TEST(ArchiveRoundTrip, Vectors) {
  EXPECT_EQ(round_trip(std::vector<int>{}), std::vector<int>{});
  const std::vector<int> vi{1, -2, 3, std::numeric_limits<int>::max()};
  EXPECT_EQ(round_trip(vi), vi);
  EXPECT_EQ(apgas::serialize(vi).size(), 8 + 4 * sizeof(int));

  const std::vector<std::string> vs{"", "one", std::string(1000, 'x'), "three"};
  EXPECT_EQ(round_trip(vs), vs);
  EXPECT_EQ(round_trip(std::vector<std::string>{}), std::vector<std::string>{});

  std::vector<double> big(100000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.5;
  EXPECT_EQ(round_trip(big), big);

  const std::vector<pod> vp{{1, 1.0, 'a'}, {2, 2.0, 'b'}};
  EXPECT_EQ(round_trip(vp), vp);
}

TEST(ArchiveRoundTrip, ArrayPairTuple) {
  const std::array<int, 4> ai{4, 3, 2, 1};
  EXPECT_EQ(round_trip(ai), ai);
  const std::array<std::string, 3> as{"a", "", "ccc"};
  EXPECT_EQ(round_trip(as), as);

  const std::pair<int, std::string> p{5, "five"};
  EXPECT_EQ(round_trip(p), p);
  const std::pair<std::string, std::vector<int>> p2{"v", {1, 2}};
  EXPECT_EQ(round_trip(p2), p2);

  const std::tuple<int, std::string, double, color> t{1, "t", 2.5, color::green};
  EXPECT_EQ(round_trip(t), t);
  EXPECT_EQ(apgas::serialize(t).size(), 4u + 8u + 1u + 8u + 1u);  // no padding between tuple elements
}

TEST(ArchiveRoundTrip, Optional) {
  EXPECT_EQ(round_trip(std::optional<std::string>{}), std::nullopt);
  EXPECT_EQ(round_trip(std::optional<std::string>{"here"}), std::optional<std::string>{"here"});
  EXPECT_EQ(round_trip(std::optional<int>{}), std::nullopt);
  EXPECT_EQ(round_trip(std::optional<int>{-7}), std::optional<int>{-7});

  // Encoding: a u8 flag, then the value if present (also for a trivially copyable optional).
  const bytes none = apgas::serialize(std::optional<int>{});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0], std::byte{0});
  const bytes some = apgas::serialize(std::optional<int>{0x01020304});
  ASSERT_EQ(some.size(), 1u + sizeof(int));
  EXPECT_EQ(some[0], std::byte{1});
  const bytes some_s = apgas::serialize(std::optional<std::string>{"ab"});
  ASSERT_EQ(some_s.size(), 1u + 8u + 2u);
  EXPECT_EQ(some_s[0], std::byte{1});
}

TEST(ArchiveRoundTrip, VariantEachAlternative) {
  using V = std::variant<int, double, std::string>;
  for (const V& v : {V{42}, V{2.75}, V{std::string("str")}, V{std::string()}}) {
    const V back = round_trip(v);
    EXPECT_EQ(back.index(), v.index());
    EXPECT_EQ(back, v);
  }
  // Encoding: a u32 index, then the alternative.
  const bytes b = apgas::serialize(V{std::string("xy")});
  ASSERT_EQ(b.size(), 4u + 8u + 2u);
  std::uint32_t index = 99;
  std::memcpy(&index, b.data(), 4);
  EXPECT_EQ(index, 2u);

  // A variant of trivially copyable alternatives uses the same checked encoding.
  using W = std::variant<int, double>;
  EXPECT_EQ(round_trip(W{3}), W{3});
  EXPECT_EQ(round_trip(W{3.5}), W{3.5});
  const bytes bw = apgas::serialize(W{3.5});
  ASSERT_EQ(bw.size(), 4u + sizeof(double));
  std::memcpy(&index, bw.data(), 4);
  EXPECT_EQ(index, 1u);
}

TEST(ArchiveRoundTrip, Maps) {
  const std::map<std::string, int> m{{"a", 1}, {"b", 2}, {"", 0}};
  EXPECT_EQ(round_trip(m), m);
  EXPECT_EQ(round_trip(std::map<int, int>{}), (std::map<int, int>{}));

  std::unordered_map<int, std::string> um;
  for (int i = 0; i < 500; ++i) um[i * 7] = std::to_string(i);
  EXPECT_EQ(round_trip(um), um);
  EXPECT_EQ(round_trip(std::unordered_map<std::string, std::vector<int>>{{"k", {1, 2, 3}}}),
            (std::unordered_map<std::string, std::vector<int>>{{"k", {1, 2, 3}}}));
}

TEST(ArchiveRoundTrip, NestedContainers) {
  const std::vector<std::map<std::string, std::vector<std::pair<int, std::string>>>> v{
      {{"x", {{1, "one"}, {2, "two"}}}, {"y", {}}}, {}, {{"z", {{3, ""}}}}};
  EXPECT_EQ(round_trip(v), v);
  EXPECT_EQ(round_trip(make_complex()), make_complex());
  const std::vector<std::vector<std::vector<int>>> vvv{{{1}, {}, {2, 3}}, {}, {{4, 5, 6}}};
  EXPECT_EQ(round_trip(vvv), vvv);
  const std::optional<std::vector<std::optional<std::string>>> ovo{{std::nullopt, "s", ""}};
  EXPECT_EQ(round_trip(ovo), ovo);
}

TEST(ArchiveRoundTrip, UserTypeWithSerializeMember) {
  const person p{"grace", 85, {"cobol", "navy"}, std::nullopt};
  EXPECT_EQ(round_trip(p), p);
  const person q{"", 0, {}, std::string("x")};
  EXPECT_EQ(round_trip(q), q);

  const partial in{5, 6};
  const bytes b = apgas::serialize(in);
  EXPECT_EQ(b.size(), sizeof(int));  // only `kept`
  const partial out = apgas::deserialize<partial>(b);
  EXPECT_EQ(out.kept, 5);
  EXPECT_EQ(out.not_sent, 0);
  // In a std::array too (it is trivially copyable, but its elements' serialize member wins).
  const std::array<partial, 2> two{partial{1, 2}, partial{3, 4}};
  EXPECT_EQ(apgas::serialize(two).size(), 2 * sizeof(int));
  const auto back = apgas::deserialize<std::array<partial, 2>>(apgas::serialize(two));
  EXPECT_EQ(back[1].kept, 3);
  EXPECT_EQ(back[1].not_sent, 0);

  const node tree{1, {node{2, {node{3, {}}}}, node{4, {}}}};
  EXPECT_EQ(round_trip(tree), tree);
  EXPECT_EQ(round_trip(make_bundle()), make_bundle());
}

TEST(ArchiveRoundTrip, SerializerSpecialisation) {
  const bytes b = apgas::serialize(fraction(3, 8));
  ASSERT_EQ(b.size(), 2 * sizeof(long));
  long first = 0;
  std::memcpy(&first, b.data(), sizeof first);
  EXPECT_EQ(first, 8);  // the serializer wrote the denominator first: it, not memcpy, was used
  EXPECT_EQ(apgas::deserialize<fraction>(b), fraction(3, 8));
  EXPECT_EQ(round_trip(std::vector<fraction>{{1, 2}, {-5, 7}}), (std::vector<fraction>{{1, 2}, {-5, 7}}));

  // The specialisation's own checks surface as serialization_error.
  apgas::writer w;
  w & 0L & 1L;
  EXPECT_TRUE(contains(decode_error<fraction>(w.take()), "denominator 0"));
}

TEST(ArchiveRoundTrip, SeveralValuesInOneMessage) {
  const bytes b = apgas::serialize(1, std::string("two"), 3.0, std::vector<int>{4});
  apgas::reader r(b);
  EXPECT_EQ(r.read<int>(), 1);
  EXPECT_EQ(r.read<std::string>(), "two");
  double d = 0;
  std::vector<int> v;
  r >> d >> v;
  EXPECT_EQ(d, 3.0);
  EXPECT_EQ(v, std::vector<int>{4});
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(r.position(), b.size());
}

TEST(ArchiveRoundTrip, WriterLengthAndTake) {
  apgas::writer w(64);
  w.write_length(0x0102030405060708ull);
  EXPECT_EQ(w.size(), 8u);
  const bytes b = w.take();
  ASSERT_EQ(b.size(), 8u);
  std::uint64_t v = 0;
  std::memcpy(&v, b.data(), 8);
  EXPECT_EQ(v, 0x0102030405060708ull);

  // read_length: checked against what remains; a minimum element size of 0 counts as 1.
  apgas::writer w2;
  w2.write_length(3);
  w2.write_bytes("abc", 3);
  const bytes b2 = w2.take();
  apgas::reader r(b2);
  EXPECT_EQ(r.read_length(0, "test"), 3u);
  EXPECT_EQ(r.remaining(), 3u);
  apgas::reader r2(b2);
  const std::string msg = error_of([&] { (void)r2.read_length(2, "pairs"); });
  EXPECT_TRUE(contains(msg, "pairs of length 3 needs at least 6 bytes but only 3 remain")) << msg;
}

// ================================ span_view ================================

TEST(ArchiveSpan, ZeroCopyViewIntoTheMessage) {
  const std::vector<double> values{1.5, -2.0, 3.25, 1e300, 0.0};
  apgas::writer w;
  w & std::int32_t{7};  // 4 bytes, so the span's length ends at 12 and its data needs padding to 16
  w & apgas::span_view<double>{values};
  w & std::string("after");
  aligned_copy msg(w.bytes());

  apgas::reader r(msg.span());
  EXPECT_EQ(r.read<std::int32_t>(), 7);
  apgas::span_view<double> view;
  r & view;
  ASSERT_EQ(view.data.size(), values.size());
  const auto* data = reinterpret_cast<const std::byte*>(view.data.data());
  EXPECT_GE(data, msg.data());  // a view into the message buffer, not a copy
  EXPECT_LE(data + view.data.size_bytes(), msg.data() + msg.span().size());
  EXPECT_EQ(data - msg.data(), 16);  // 4 (int) + 8 (length) + 4 padding
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % alignof(double), 0u);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(view.data[i], values[i]);
  EXPECT_EQ(r.read<std::string>(), "after");
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(ArchiveSpan, DeserializeAndOtherElementTypes) {
  const std::vector<std::uint16_t> shorts{1, 2, 3};
  aligned_copy m1(apgas::serialize(apgas::span_view<std::uint16_t>{shorts}));
  const auto v1 = apgas::deserialize<apgas::span_view<std::uint16_t>>(m1.span());
  ASSERT_EQ(v1.data.size(), 3u);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(v1.data.data()), m1.data() + 8);  // already aligned: no padding
  EXPECT_EQ(v1.data[2], 3);

  aligned_copy m2(apgas::serialize(apgas::span_view<double>{}));
  const auto v2 = apgas::deserialize<apgas::span_view<double>>(m2.span());
  EXPECT_TRUE(v2.data.empty());

  // Inside other values: each span is padded relative to the message start.
  const std::vector<double> d{9.0};
  aligned_copy m3(apgas::serialize(std::string("x"), apgas::span_view<double>{d}, 'c', apgas::span_view<double>{d}));
  apgas::reader r(m3.span());
  EXPECT_EQ(r.read<std::string>(), "x");
  const auto a = r.read<apgas::span_view<double>>();
  EXPECT_EQ(r.read<char>(), 'c');
  const auto b = r.read<apgas::span_view<double>>();
  for (const auto& s : {a, b}) {
    ASSERT_EQ(s.data.size(), 1u);
    EXPECT_EQ(s.data[0], 9.0);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data.data()) % alignof(double), 0u);
  }
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(ArchiveSpan, MisalignedBufferIsRejected) {
  const std::vector<double> values{1.0, 2.0};
  const bytes b = apgas::serialize(apgas::span_view<double>{values});
  aligned_copy off(b, 1);  // the buffer starts one byte past a 16-byte boundary
  const std::string msg = error_of([&] { (void)apgas::deserialize<apgas::span_view<double>>(off.span()); });
  EXPECT_TRUE(contains(msg, "2 elements")) << msg;
  EXPECT_TRUE(contains(msg, "aligned to 8")) << msg;
}

TEST(ArchiveSpan, MalformedSpans) {
  // A length past the end.
  apgas::writer w;
  w.write_length(3);
  w & 1.0 & 2.0;
  aligned_copy short_msg(w.bytes());
  std::string msg = error_of([&] { (void)apgas::deserialize<apgas::span_view<double>>(short_msg.span()); });
  EXPECT_TRUE(contains(msg, "span of length 3")) << msg;
  EXPECT_TRUE(contains(msg, "24 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "16 remain")) << msg;

  // The padding itself missing: int, length 0, and no room for the 4 padding bytes.
  apgas::writer w2;
  w2 & std::int32_t{1};
  w2.write_length(0);
  aligned_copy pad_msg(w2.bytes());
  apgas::reader r(pad_msg.span());
  (void)r.read<std::int32_t>();
  msg = error_of([&] { (void)r.read<apgas::span_view<double>>(); });
  EXPECT_TRUE(contains(msg, "span padding")) << msg;

  // 2^60 elements.
  apgas::writer w3;
  w3.write_length(std::size_t{1} << 60);
  w3 & 1.0;
  aligned_copy huge(w3.bytes());
  msg = error_of([&] { (void)apgas::deserialize<apgas::span_view<double>>(huge.span()); });
  EXPECT_TRUE(contains(msg, "1152921504606846976")) << msg;
}

// ================================ malformed input ================================

TEST(ArchiveMalformed, EveryTruncationOfAComplexValue) {
  const bundle value = make_bundle();
  const bytes full = apgas::serialize(value);
  ASSERT_GT(full.size(), 200u);
  ASSERT_EQ(apgas::deserialize<bundle>(full), value);

  allocation_probe probe;
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    const bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    try {
      (void)apgas::deserialize<bundle>(prefix);
      ADD_FAILURE() << "a prefix of " << cut << " of " << full.size() << " bytes decoded";
    } catch (const apgas::serialization_error& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(contains(msg, "truncated") || contains(msg, "malformed")) << cut << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "a prefix of " << cut << " bytes threw another exception: " << e.what();
    }
  }
  // Nothing larger than a few times the whole message was ever requested from the allocator.
  EXPECT_LE(probe.largest(), 8 * full.size());
}

TEST(ArchiveMalformed, EveryTruncationOfAComplexMap) {
  const bytes full = apgas::serialize(make_complex());
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    const bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW((void)apgas::deserialize<complex_value>(prefix), apgas::serialization_error) << cut;
  }
}

// Overwriting any byte of a valid message with any of a few values gives a value or a serialization_error.
TEST(ArchiveMalformed, CorruptedBytesDecodeOrThrow) {
  const bytes full = apgas::serialize(make_bundle());
  allocation_probe probe;
  int decoded = 0;
  int rejected = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    for (const unsigned v : {0x00u, 0x01u, 0x02u, 0x7Fu, 0x80u, 0xFFu}) {
      bytes b = full;
      b[i] = static_cast<std::byte>(v);
      try {
        (void)apgas::deserialize<bundle>(b);
        ++decoded;
      } catch (const apgas::serialization_error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(decoded, 0);
  EXPECT_GT(rejected, 0);
  EXPECT_LE(probe.largest(), 8 * full.size());
}

TEST(ArchiveMalformed, VectorLengthTwoToThe60) {
  allocation_probe probe;
  {
    apgas::writer w;
    w.write_length(std::size_t{1} << 60);
    w & 1 & 2;
    const std::string msg = decode_error<std::vector<int>>(w.take());
    EXPECT_TRUE(contains(msg, "vector of length 1152921504606846976")) << msg;
    EXPECT_TRUE(contains(msg, "only 8 remain")) << msg;
  }
  {
    apgas::writer w;
    w.write_length(std::size_t{1} << 60);
    w & std::string("s");
    const std::string msg = decode_error<std::vector<std::string>>(w.take());
    EXPECT_TRUE(contains(msg, "1152921504606846976")) << msg;
  }
  {
    apgas::writer w;
    w & 5;
    w.write_length(std::size_t{1} << 60);
    const std::string msg = decode_error<node>(w.take());
    EXPECT_TRUE(contains(msg, "1152921504606846976")) << msg;
  }
  {
    apgas::writer w;
    w.write_length(std::numeric_limits<std::uint64_t>::max());
    const std::string msg = decode_error<std::map<int, std::string>>(w.take());
    EXPECT_TRUE(contains(msg, "map of length 18446744073709551615")) << msg;
  }
  EXPECT_LT(probe.largest(), std::size_t{4096});
}

// A user type counts as at least 0 encoded bytes, so a claimed length is only bounded by the bytes remaining; the
// decoder must not reserve claimed-length * sizeof(T) up front (4096 times the message here).
struct block {
  std::array<std::uint64_t, 512> words{};
  template <class A>
  void serialize(A& a) {
    a & words;
  }
};

TEST(ArchiveMalformed, ClaimedLengthOfLargeUserTypesAllocatesNoMoreThanTheMessage) {
  constexpr std::size_t payload = 64 * 1024;
  apgas::writer w;
  w.write_length(payload);  // one element per remaining byte, each of them 4 KiB in memory
  for (std::size_t i = 0; i < payload; ++i) w & std::uint8_t{0};
  const bytes b = w.take();
  allocation_probe probe;
  const std::string msg = decode_error<std::vector<block>>(b);
  EXPECT_TRUE(contains(msg, "truncated")) << msg;  // 16 blocks decode, the 17th runs out
  EXPECT_LE(probe.largest(), 2 * b.size());
}

TEST(ArchiveMalformed, VectorLengthOneMoreThanRemains) {
  // Bytes: 5 elements of 1 byte claimed, 4 present.
  apgas::writer w;
  w.write_length(5);
  for (std::uint8_t i = 0; i < 4; ++i) w & i;
  std::string msg = decode_error<std::vector<std::uint8_t>>(w.take());
  EXPECT_TRUE(contains(msg, "vector of length 5")) << msg;
  EXPECT_TRUE(contains(msg, "needs at least 5 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "only 4 remain")) << msg;

  // ints: remaining / 4 + 1 elements.
  apgas::writer w2;
  w2.write_length(4);
  w2 & 1 & 2 & 3;
  msg = decode_error<std::vector<int>>(w2.take());
  EXPECT_TRUE(contains(msg, "vector of length 4")) << msg;
  EXPECT_TRUE(contains(msg, "needs at least 16 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "only 12 remain")) << msg;

  // Exactly as many as remain is fine.
  apgas::writer w3;
  w3.write_length(3);
  w3 & 1 & 2 & 3;
  EXPECT_EQ(apgas::deserialize<std::vector<int>>(w3.take()), (std::vector<int>{1, 2, 3}));
}

TEST(ArchiveMalformed, StringLongerThanTheMessage) {
  apgas::writer w;
  w.write_length(100);
  w.write_bytes("abc", 3);
  std::string msg = decode_error<std::string>(w.take());
  EXPECT_TRUE(contains(msg, "string of length 100")) << msg;
  EXPECT_TRUE(contains(msg, "only 3 remain")) << msg;

  apgas::writer w2;
  w2.write_length(std::numeric_limits<std::uint64_t>::max());
  msg = decode_error<std::string>(w2.take());
  EXPECT_TRUE(contains(msg, "string of length 18446744073709551615")) << msg;

  // The length field itself cut short.
  const bytes b{std::byte{1}, std::byte{0}, std::byte{0}};
  msg = decode_error<std::string>(b);
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  EXPECT_TRUE(contains(msg, "needs 8 bytes, 3 remain")) << msg;
}

TEST(ArchiveMalformed, VariantIndexOutOfRange) {
  using V = std::variant<int, double, std::string>;
  for (const std::uint32_t bad : {3u, 4u, 0xFFFFFFFFu}) {
    apgas::writer w;
    w & bad & 1;
    const std::string msg = decode_error<V>(w.take());
    EXPECT_TRUE(contains(msg, "variant index " + std::to_string(bad))) << msg;
    EXPECT_TRUE(contains(msg, "has 3 alternatives")) << msg;
  }
  // A variant of trivially copyable alternatives checks its index too (no raw bytes of a std::variant).
  using W = std::variant<int, double>;
  apgas::writer w;
  w & std::uint32_t{2} & 1.0;
  const std::string msg = decode_error<W>(w.take());
  EXPECT_TRUE(contains(msg, "variant index 2")) << msg;
  EXPECT_TRUE(contains(msg, "has 2 alternatives")) << msg;
}

// A std::array goes element by element unless its elements are their bytes: the index of a variant, the flag of an
// optional, a bool inside one are checked, and an element's own serialize member is used.
TEST(ArchiveMalformed, ArraysOfCheckedElementsAreChecked) {
  static_assert(!apgas::ser::is_bitwise_v<std::array<std::variant<int, float>, 1>>);
  static_assert(!apgas::ser::is_bitwise_v<std::array<bool, 2>>);
  static_assert(apgas::ser::is_bitwise_v<std::array<int, 3>>);
  {
    apgas::writer w;
    w & std::uint32_t{9} & 1;
    const std::string msg = decode_error<std::array<std::variant<int, float>, 1>>(w.take());
    EXPECT_TRUE(contains(msg, "variant index 9")) << msg;
  }
  {
    apgas::writer w;
    w & std::uint8_t{0} & std::uint8_t{7};
    const std::string msg = decode_error<std::array<bool, 2>>(w.take());
    EXPECT_TRUE(contains(msg, "bool byte 7")) << msg;
  }
  {
    apgas::writer w;
    w & std::uint8_t{5} & 1;
    const std::string msg = decode_error<std::array<std::optional<int>, 1>>(w.take());
    EXPECT_TRUE(contains(msg, "optional flag 5")) << msg;
  }
  const std::array<std::variant<int, float>, 2> a{1, 2.5f};
  EXPECT_EQ((apgas::deserialize<std::array<std::variant<int, float>, 2>>(apgas::serialize(a))), a);
}

TEST(ArchiveMalformed, AMapHoldingOneKeyTwiceIsRefused) {
  apgas::writer w;
  w.write_length(2);
  w & 1 & std::string("a") & 1 & std::string("b");
  const std::string msg = decode_error<std::map<int, std::string>>(w.take());
  EXPECT_TRUE(contains(msg, "holds one key twice (entry 1)")) << msg;
}

TEST(ArchiveMalformed, OptionalFlagTwo) {
  apgas::writer w;
  w & std::uint8_t{2};
  w & std::string("s");
  std::string msg = decode_error<std::optional<std::string>>(w.take());
  EXPECT_TRUE(contains(msg, "optional flag 2")) << msg;

  // A trivially copyable optional is checked too.
  apgas::writer w2;
  w2 & std::uint8_t{2} & 5;
  msg = decode_error<std::optional<int>>(w2.take());
  EXPECT_TRUE(contains(msg, "optional flag 2")) << msg;

  apgas::writer w3;
  w3 & std::uint8_t{0xFF} & 5;
  msg = decode_error<std::optional<int>>(w3.take());
  EXPECT_TRUE(contains(msg, "optional flag 255")) << msg;
}

TEST(ArchiveMalformed, NestingDeeperThan64) {
  static_assert(apgas::ser::max_depth == 64);
  // Recursive user type: node k of a chain is nesting level 2k-1, its children vector level 2k.
  EXPECT_EQ(apgas::deserialize<node>(node_chain(32)).children.size(), 1u);
  std::string msg = decode_error<node>(node_chain(33));
  EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;
  // Far deeper (the limit stops decoding long before the stack would be at risk).
  msg = decode_error<node>(node_chain(100000));
  EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;

  // A legitimately built value nested too deep encodes, but does not decode.
  node deep;
  node* at = &deep;
  for (int i = 0; i < 40; ++i) {
    at->children.emplace_back();
    at = &at->children.back();
  }
  EXPECT_THROW((void)round_trip(deep), apgas::serialization_error);

  // A library type nested inside itself: 64 levels decode, 65 do not (when the 65th is reached).
  using o64 = nested_optional<64>::type;
  using o65 = nested_optional<65>::type;
  const o64 ok = apgas::deserialize<o64>(nested_ones(64));
  EXPECT_TRUE(ok.has_value());
  msg = decode_error<o65>(nested_ones(65));
  EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;
  EXPECT_FALSE(apgas::deserialize<o65>(bytes{std::byte{0}}).has_value());  // the type alone is not the problem

  // Containers and user types add up: 4 vectors around a node chain of k nodes is 4 + 2k levels.
  using v4 = std::vector<std::vector<std::vector<std::vector<node>>>>;
  const auto around = [](int k) {
    apgas::writer w;
    for (int i = 0; i < 4; ++i) w.write_length(1);
    const bytes chain = node_chain(k);
    w.write_bytes(chain.data(), chain.size());
    return w.take();
  };
  EXPECT_EQ(apgas::deserialize<v4>(around(30)).size(), 1u);
  msg = decode_error<v4>(around(31));
  EXPECT_TRUE(contains(msg, "nested deeper than 64 levels")) << msg;
}

TEST(ArchiveMalformed, TrailingBytes) {
  bytes b = apgas::serialize(42);
  b.push_back(std::byte{0});
  std::string msg = decode_error<int>(b);
  EXPECT_TRUE(contains(msg, "1 bytes left over")) << msg;

  bytes s = apgas::serialize(std::string("abc"));
  s.resize(s.size() + 5);
  msg = decode_error<std::string>(s);
  EXPECT_TRUE(contains(msg, "5 bytes left over")) << msg;

  // A reader (several values in one message) does not mind what follows.
  apgas::reader r(b);
  EXPECT_EQ(r.read<int>(), 42);
  EXPECT_EQ(r.remaining(), 1u);
}

TEST(ArchiveMalformed, MessageLargerThanTheReaderLimit) {
  const bytes b = apgas::serialize(std::string(100, 'x'));  // 108 bytes
  std::string msg = error_of([&] { apgas::reader r(b, 64); });
  EXPECT_TRUE(contains(msg, "message of 108 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "maximum message size of 64")) << msg;
  msg = decode_error<std::string>(b, 107);
  EXPECT_TRUE(contains(msg, "maximum message size of 107")) << msg;
  EXPECT_EQ(apgas::deserialize<std::string>(b, 108), std::string(100, 'x'));  // exactly the limit is fine
  EXPECT_TRUE(contains(decode_error<int>(apgas::serialize(1), 3), "message of 4 bytes")) << "int over a 3-byte limit";
}

TEST(ArchiveMalformed, ReadsPastTheEnd) {
  const bytes three{std::byte{1}, std::byte{2}, std::byte{3}};
  std::string msg = decode_error<int>(three);
  EXPECT_TRUE(contains(msg, "needs 4 bytes, 3 remain")) << msg;
  msg = decode_error<double>(bytes{});
  EXPECT_TRUE(contains(msg, "needs 8 bytes, 0 remain")) << msg;

  apgas::reader r(three);
  msg = error_of([&] { r.skip(4, "header"); });
  EXPECT_TRUE(contains(msg, "reading header needs 4 bytes, 3 remain")) << msg;
  r.skip(3, "header");
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(r.position(), 3u);
  EXPECT_THROW(r.read<char>(), apgas::serialization_error);
}

// ================================ closure registry ================================

void registered_fn() {}

TEST(Registry, UnknownIdThrowsNamingTheId) {
  const std::string msg = error_of([] { (void)apgas::ser::registry::lookup(0xFFFFFFF0u); });
  EXPECT_TRUE(contains(msg, "unknown closure id 4294967280")) << msg;
}

TEST(Registry, KnownIdRoundTripAndOnePastTheEnd) {
  const std::size_t handle = apgas::ser::registry::add("apgas.test.serialization.registered_fn", &registered_fn);
  apgas::ser::registry::seal();
  const std::uint32_t id = apgas::ser::registry::id_of(handle);
  EXPECT_EQ(apgas::ser::registry::lookup(id), &registered_fn);
  const auto n = static_cast<std::uint32_t>(apgas::ser::registry::size());
  EXPECT_LT(id, n);
  const std::string msg = error_of([n] { (void)apgas::ser::registry::lookup(n); });
  EXPECT_TRUE(contains(msg, "unknown closure id " + std::to_string(n))) << msg;
  EXPECT_TRUE(contains(msg, "registers " + std::to_string(n) + " closures")) << msg;
}

}  // namespace
