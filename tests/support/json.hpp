#pragma once
// Test support: a small strict JSON reader (RFC 8259: objects, arrays, strings with escapes, numbers, true, false,
// null), enough to check the trace files apgas writes. parse() throws std::runtime_error naming the offset of the
// first error; nothing is accepted that a conforming parser would refuse (trailing commas, bare words, control
// characters in strings, trailing garbage).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace apgas_test::json {

struct value;
using array = std::vector<value>;
using object = std::map<std::string, value>;

struct value {
  std::variant<std::nullptr_t, bool, double, std::string, std::unique_ptr<array>, std::unique_ptr<object>> v;

  bool is_number() const { return std::holds_alternative<double>(v); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_array() const { return std::holds_alternative<std::unique_ptr<array>>(v); }
  bool is_object() const { return std::holds_alternative<std::unique_ptr<object>>(v); }
  double number() const { return std::get<double>(v); }
  const std::string& string() const { return std::get<std::string>(v); }
  const array& items() const { return *std::get<std::unique_ptr<array>>(v); }
  const object& fields() const { return *std::get<std::unique_ptr<object>>(v); }
  /// The member `key` of an object, or null.
  const value* get(const std::string& key) const {
    if (!is_object()) return nullptr;
    auto it = fields().find(key);
    return it == fields().end() ? nullptr : &it->second;
  }
};

class parser {
 public:
  explicit parser(std::string_view text) : s_(text) {}

  value document() {
    value v = any(0);
    space();
    if (i_ != s_.size()) fail("trailing characters after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON error at offset " + std::to_string(i_) + ": " + what);
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }

  value any(int depth) {
    if (depth > 256) fail("nesting too deep");
    space();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    value v;
    if (c == '{') {
      ++i_;
      auto o = std::make_unique<object>();
      if (!eat('}')) {
        do {
          space();
          if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
          std::string k = str();
          expect(':');
          (*o)[k] = any(depth + 1);
        } while (eat(','));
        expect('}');
      }
      v.v = std::move(o);
    } else if (c == '[') {
      ++i_;
      auto a = std::make_unique<array>();
      if (!eat(']')) {
        do {
          a->push_back(any(depth + 1));
        } while (eat(','));
        expect(']');
      }
      v.v = std::move(a);
    } else if (c == '"') {
      v.v = str();
    } else if (s_.substr(i_, 4) == "true") {
      i_ += 4;
      v.v = true;
    } else if (s_.substr(i_, 5) == "false") {
      i_ += 5;
      v.v = false;
    } else if (s_.substr(i_, 4) == "null") {
      i_ += 4;
      v.v = nullptr;
    } else {
      v.v = num();
    }
    return v;
  }

  std::string str() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          unsigned cp = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') cp |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') cp |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') cp |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\u escape");
          }
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else {
            out += '?';  // (not needed by these tests)
          }
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  double num() {
    const std::size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) fail("expected a value");
    if (s_[i_] == '0') {
      ++i_;
    } else {
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) fail("expected digits after '.'");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) fail("expected exponent digits");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    return std::strtod(std::string(s_.substr(start, i_ - start)).c_str(), nullptr);
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

inline value parse(std::string_view text) { return parser(text).document(); }

}  // namespace apgas_test::json
