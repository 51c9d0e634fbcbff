#pragma once
// What every Parboil program shares — the apgas version, the native CUDA baseline and the OpenMP baseline alike:
// Parboil's command line, input files read with errors that name the file, the offset and what was expected,
// output files, the timer and the report line. No apgas here (parboil_apgas.hpp adds the places), no CUDA: the
// baselines include this header without the runtime, and nvcc compiles it as host code.
//
// The command line (Parboil's, plus a few options of ours before the `--`):
//   <program> [-i IN1,IN2,...] [-o OUT] [--size NAME] [--check FILE] [--no-check] [--cpu] [-q] [-- PARAMETERS]
//   <program> [--size NAME] --write-input OUT1,OUT2,... [-- PARAMETERS]
// Without -i a program generates an input of the standard shape (--size picks another of its sizes);
// --write-input writes that input in Parboil's format (the files -i takes) and exits (-o and --check are refused
// with it; the parameters are checked, and those that shape the input shape it). --check FILE compares with a
// Parboil reference output file instead of the serial reference (not the file -o writes); --no-check skips the
// check (timing runs). An option with a value may be given once. --cpu keeps the apgas version off the GPUs (the
// baselines ignore it). The last line of every run is
//   parboil: <name> <key=value ...> time_s=<seconds> check=ok|FAIL|skipped
// and the exit code is 0 (ok, skipped), 1 (FAIL) or 2 (bad command line or input, with a message on stderr).
// time_s is the computation from the input in host memory to the output in host memory: copies to and from GPUs and
// every launch included; reading and generating the input, writing the output and the check excluded.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/stat.h>

namespace parboil {

// ---- errors -------------------------------------------------------------------------------------------------------

/// A bad command line: the message says which option and why; exit code 2, followed by the usage.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A missing, short or malformed input file (or an unwritable output): the message names the file, the offset or
/// line, and what was expected; exit code 2.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- the command line ---------------------------------------------------------------------------------------------

struct options {
  std::vector<std::string> inputs;  ///< -i, split at commas
  std::string output;               ///< -o (empty: no output file)
  std::vector<std::string> params;  ///< everything after `--`
  std::vector<std::string> write_inputs;  ///< --write-input: write the generated input to these files and exit
  std::string size;                 ///< --size: the generated input's size set (empty: the program's default)
  std::string check_file;           ///< --check: a Parboil reference output to compare with
  bool check = true;                ///< --no-check: false
  bool cpu = false;                 ///< --cpu: CPU places only (apgas version)
  bool quiet = false;               ///< -q: only the report line on stdout
};

/// Whether paths a and b name one file: the same device and inode where both exist, else the same path once
/// normalised (a file -o is about to create).
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa = {}, sb = {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

/// Parses the command line; throws usage_error. `sizes` lists the names --size accepts.
inline options parse(int argc, char** argv, std::initializer_list<std::string_view> sizes) {
  options o;
  std::vector<std::string_view> given;  // the options with a value seen so far: each may come once
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw usage_error(std::string("option ") + argv[i] + " needs a value");
    if (std::find(given.begin(), given.end(), std::string_view(argv[i])) != given.end()) {
      throw usage_error(std::string("option ") + argv[i] + " given twice");
    }
    given.emplace_back(argv[i]);
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) o.params.emplace_back(argv[i]);
      break;
    }
    if (a == "-i" || a == "--write-input") {
      const std::string list = value(i);
      std::vector<std::string>& into = a == "-i" ? o.inputs : o.write_inputs;
      std::size_t at = 0;
      while (true) {
        const std::size_t comma = list.find(',', at);
        std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (name.empty()) throw usage_error(std::string(a) + " '" + list + "': an empty file name in the list");
        into.push_back(std::move(name));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (a == "-o") {
      o.output = value(i);
    } else if (a == "--size") {
      o.size = value(i);
      if (std::find(sizes.begin(), sizes.end(), std::string_view(o.size)) == sizes.end()) {
        std::string known;
        for (std::string_view s : sizes) known += (known.empty() ? "" : ", ") + std::string(s);
        throw usage_error("--size '" + o.size + "': not one of " + known);
      }
    } else if (a == "--check") {
      o.check_file = value(i);
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "--cpu") {
      o.cpu = true;
    } else if (a == "-q") {
      o.quiet = true;
    } else {
      throw usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (!o.check_file.empty() && !o.check) throw usage_error("--check and --no-check exclude each other");
  if (!o.inputs.empty() && !o.size.empty()) throw usage_error("-i and --size exclude each other");
  if (!o.inputs.empty() && !o.write_inputs.empty()) throw usage_error("-i and --write-input exclude each other");
  if (!o.write_inputs.empty() && (!o.output.empty() || !o.check_file.empty())) {
    throw usage_error("--write-input writes the input and exits: -o and --check do not go with it");
  }
  if (!o.output.empty() && !o.check_file.empty() && same_file(o.output, o.check_file)) {
    throw usage_error("-o '" + o.output + "' and --check '" + o.check_file +
                      "' are the same file: the run would be checked against itself");
  }
  return o;
}

/// A whole number from text (a parameter or an option's value), within [lo, hi]; `what` names it in the error.
inline long long to_integer(std::string_view text, long long lo, long long hi, const std::string& what) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    throw usage_error(what + ": '" + s + "' is not a whole number");
  }
  if (v < lo || v > hi) {
    throw usage_error(what + ": " + s + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

/// Runs body(); returns its exit code, or 2 after printing "<prog>: <message>" (and `usage` for a usage_error) when
/// it throws a usage_error or an input_error. Any other exception is printed and gives 3.
inline int guarded(const char* prog, const char* usage, const std::function<int()>& body) {
  try {
    return body();
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s\n%s", prog, e.what(), usage);
    return 2;
  } catch (const input_error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 3;
  }
}

/// The usage text's common part (after the program's own line): the input files' options, then the others.
inline constexpr const char* file_usage =
    "  -i IN1,IN2,...   input files (Parboil's formats); without -i an input of the standard shape is generated\n"
    "  --write-input OUT1,OUT2,...  write the generated input in Parboil's format (what -i reads), then exit\n";
inline constexpr const char* option_usage =
    "  -o OUT           write the output in Parboil's format\n"
    "  --size NAME      the generated input's size set\n"
    "  --check FILE     compare with a Parboil reference output file instead of the serial reference\n"
    "  --no-check       skip the check (timing runs)\n"
    "  --cpu            apgas version: CPU places only, even where GPUs exist\n"
    "  -q               print only the report line\n";
inline const std::string common_usage = std::string(file_usage) + option_usage;

// ---- input files --------------------------------------------------------------------------------------------------

/// The contents of input file `path`. It must be a regular file: a directory, a pipe or a device (/dev/zero) is
/// refused, as one that might never end.
inline std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw input_error("input file '" + path + "': cannot open it (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    throw input_error("input file '" + path + "': not a regular file (a directory, a device or a pipe)");
  }
  std::string data;
  char buf[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, got);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw input_error("input file '" + path + "': cannot read it");
  return data;
}

/// A little-endian binary input file, read in order; every read names what it reads, and a short file is an error
/// naming the file, the offset and the bytes expected.
class binary_file {
 public:
  explicit binary_file(std::string path) : path_(std::move(path)), data_(read_file(path_)) {}
  const std::string& path() const noexcept { return path_; }
  std::size_t offset() const noexcept { return at_; }
  std::size_t size() const noexcept { return data_.size(); }
  std::size_t left() const noexcept { return data_.size() - at_; }

  /// Reads n values of T into out (T: an arithmetic type; the file is little-endian, as is every host we build for).
  template <class T>
  void read(std::span<T> out, const std::string& what) {
    static_assert(std::is_arithmetic_v<T>);
    expect_room<T>(out.size(), what);
    const std::size_t bytes = out.size() * sizeof(T);
    if (bytes != 0) std::memcpy(out.data(), data_.data() + at_, bytes);
    at_ += bytes;
  }
  template <class T>
  T read(const std::string& what) {
    T v{};
    read(std::span<T>(&v, 1), what);
    return v;
  }
  /// n values of T, the room for them checked before they are allocated (a header's count may exceed the file).
  template <class T>
  std::vector<T> read_vector(std::size_t n, const std::string& what) {
    expect_room<T>(n, what);
    std::vector<T> v(n);
    read(std::span<T>(v), what);
    return v;
  }
  /// n floating-point values, each finite (NaN and infinities are an error naming the first one's offset).
  template <class T>
  std::vector<T> read_finite(std::size_t n, const std::string& what) {
    const std::size_t at = at_;
    std::vector<T> v = read_vector<T>(n, what);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        fail(at + i * sizeof(T), what + ": " + std::to_string(v[i]) + " is not a finite number");
      }
    }
    return v;
  }
  /// The file must end here.
  void expect_end() const {
    if (left() != 0) {
      throw input_error("input file '" + path_ + "': " + std::to_string(left()) + " bytes after the data, at byte " +
                        std::to_string(at_) + " (expected the end of the file)");
    }
  }
  /// An error about the value just read (e.g. a count out of range), at the offset where it started.
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw input_error("input file '" + path_ + "': at byte " + std::to_string(at) + ": " + what);
  }

 private:
  template <class T>
  void expect_room(std::size_t n, const std::string& what) const {
    if (n > left() / sizeof(T)) {
      fail(at_, "expected " + std::to_string(n) + " x " + std::to_string(sizeof(T)) + " bytes of " + what +
                    ", but only " + std::to_string(left()) + " bytes are left");
    }
  }
  std::string path_;
  std::string data_;
  std::size_t at_ = 0;
};

/// A text input file read token by token (whitespace-separated); errors name the file and the line. `output`: a
/// reference output (--check), whose numbers may be infinite (a result that overflowed; NaN never passes a check).
class text_file {
 public:
  explicit text_file(std::string path, bool output = false)
      : path_(std::move(path)), text_(read_file(path_)), output_(output) {}
  const std::string& path() const noexcept { return path_; }
  int line() const noexcept { return line_; }

  /// The next token, or an empty view at the end of the file.
  std::string_view token() {
    skip_space();
    const std::size_t start = at_;
    while (at_ < text_.size() && !is_space(text_[at_])) ++at_;
    return std::string_view(text_).substr(start, at_ - start);
  }
  bool at_end() {
    skip_space();
    return at_ >= text_.size();
  }
  /// The next token as a number of type T (integral or floating); `what` names it in the error.
  template <class T>
  T number(const std::string& what) {
    const int line = (skip_space(), line_);
    const std::string t(token());
    if (t.empty()) fail(line, "expected " + what + ", found the end of the file");
    char* end = nullptr;
    errno = 0;
    T v{};
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::strtod(t.c_str(), &end));
    } else if constexpr (std::is_signed_v<T>) {
      const long long x = std::strtoll(t.c_str(), &end, 10);
      if (x < static_cast<long long>(std::numeric_limits<T>::min()) ||
          x > static_cast<long long>(std::numeric_limits<T>::max())) {
        errno = ERANGE;
      }
      v = static_cast<T>(x);
    } else {
      const unsigned long long x = std::strtoull(t.c_str(), &end, 10);
      if (t[0] == '-' || x > static_cast<unsigned long long>(std::numeric_limits<T>::max())) errno = ERANGE;
      v = static_cast<T>(x);
    }
    if (end != t.c_str() + t.size()) fail(line, "expected " + what + ", found '" + t + "'");
    if (errno == ERANGE) fail(line, what + " '" + t + "' is out of range");
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v) && !(output_ && std::isinf(v))) fail(line, what + " '" + t + "' is not a finite number");
    }
    return v;
  }
  /// The next n numbers of type T (what(i) names the i-th, counted from 0, in an error). Memory grows with what the
  /// file holds, not with n (a count from a header): a number takes two bytes at least, itself and a space.
  template <class T, class What>
  std::vector<T> numbers(std::size_t n, What&& what) {
    std::vector<T> v;
    v.reserve(std::min(n, (text_.size() - at_) / 2 + 1));
    for (std::size_t i = 0; i < n; ++i) v.push_back(number<T>(what(i)));
    return v;
  }
  /// The next token must be exactly `word`.
  void expect(std::string_view word, const std::string& what) {
    const int line = (skip_space(), line_);
    const std::string_view t = token();
    if (t != word) fail(line, "expected " + what + " '" + std::string(word) + "', found '" + std::string(t) + "'");
  }
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw input_error("input file '" + path_ + "': line " + std::to_string(line) + ": " + what);
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) {
      if (text_[at_] == '\n') ++line_;
      ++at_;
    }
  }
  std::string path_;
  std::string text_;
  bool output_ = false;
  std::size_t at_ = 0;
  int line_ = 1;
};

/// The input file names a program expects: exactly `n` (-i, and --write-input), or none (generated). Names them
/// in the error.
inline void expect_inputs(const options& o, std::size_t n, const char* what) {
  for (const auto* list : {&o.inputs, &o.write_inputs}) {
    if (!list->empty() && list->size() != n) {
      throw usage_error(std::string(list == &o.inputs ? "-i" : "--write-input") + ": expected " + std::to_string(n) +
                        " file" + (n == 1 ? "" : "s") + " (" + what + "), got " + std::to_string(list->size()));
    }
  }
}

// ---- output files -------------------------------------------------------------------------------------------------

/// An output file; every write is checked, and close() reports a failed flush (a full disk) as an input_error.
class output_file {
 public:
  output_file(std::string path, bool binary) : path_(std::move(path)) {
    f_ = std::fopen(path_.c_str(), binary ? "wb" : "w");
    if (f_ == nullptr) throw input_error("output file '" + path_ + "': cannot create it (" + std::strerror(errno) + ")");
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (f_ != nullptr) std::fclose(f_);
  }
  template <class T>
  void write(std::span<const T> v) {
    if (!v.empty() && std::fwrite(v.data(), sizeof(T), v.size(), f_) != v.size()) failed();
  }
  template <class T>
  void write(const T& v) {
    write(std::span<const T>(&v, 1));
  }
  template <class... A>
  void print(const char* fmt, A... a) {
    if (std::fprintf(f_, fmt, a...) < 0) failed();
  }
  void close() {
    std::FILE* f = std::exchange(f_, nullptr);
    if (std::fclose(f) != 0) throw input_error("output file '" + path_ + "': cannot write it");
  }

 private:
  [[noreturn]] void failed() { throw input_error("output file '" + path_ + "': cannot write it"); }
  std::string path_;
  std::FILE* f_ = nullptr;
};

// ---- time ---------------------------------------------------------------------------------------------------------

/// Seconds of the computation (time_s): start() and stop() around each timed part; the parts add up.
class timer {
 public:
  void start() { t0_ = clock::now(); }
  void stop() { total_ += std::chrono::duration<double>(clock::now() - t0_).count(); }
  double seconds() const noexcept { return total_; }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point t0_{};
  double total_ = 0;
};

// ---- checks -------------------------------------------------------------------------------------------------------

/// The outcome of a check: ok, and the first few mismatches for the message.
class check_result {
 public:
  /// Records one comparison; returns it.
  bool expect(bool good, const std::function<std::string()>& describe) {
    ++compared_;
    if (!good) {
      ++bad_;
      if (examples_.size() < 5) examples_.push_back(describe());
    }
    return good;
  }
  /// Records a failure that is no comparison of values (e.g. results of different sizes).
  void fail(std::string why) {
    ++failed_;
    if (examples_.size() < 5) examples_.push_back(std::move(why));
  }
  bool ok() const noexcept { return bad_ == 0 && failed_ == 0; }
  std::size_t compared() const noexcept { return compared_; }
  std::size_t mismatches() const noexcept { return bad_ + failed_; }
  /// Prints the mismatches (to stderr) under `what`.
  void print(const char* prog, const char* what) const {
    if (ok()) return;
    if (bad_ > 0) {
      std::fprintf(stderr, "%s: check against %s: %zu of %zu values differ, e.g.:\n", prog, what, bad_, compared_);
    } else {
      std::fprintf(stderr, "%s: check against %s: it does not match:\n", prog, what);
    }
    for (const std::string& e : examples_) std::fprintf(stderr, "  %s\n", e.c_str());
  }

 private:
  std::size_t compared_ = 0, bad_ = 0, failed_ = 0;
  std::vector<std::string> examples_;
};

/// Parboil's usual rule: |x - ref| < abs_tol, or |x - ref| < rel_tol * |ref|; equal values pass (equal infinities
/// too, whose difference is NaN). NaN never passes.
inline bool close(double x, double ref, double abs_tol, double rel_tol) {
  const double d = std::fabs(x - ref);
  return x == ref || d < abs_tol || d < rel_tol * std::fabs(ref);
}

// ---- the report -----------------------------------------------------------------------------------------------------

/// Prints the last line, `parboil: <name> <fields> time_s=<t> check=<ok|FAIL|skipped>`, and returns the exit code
/// (1 for FAIL, else 0). `fields` is "key=value key=value".
inline int report(const char* name, const std::string& fields, double seconds, const options& o, bool ok) {
  const char* check = !o.check ? "skipped" : ok ? "ok" : "FAIL";
  std::printf("parboil: %s %s time_s=%.6f check=%s\n", name, fields.c_str(), seconds, check);
  std::fflush(stdout);
  return o.check && !ok ? 1 : 0;
}

/// Deterministic pseudo-random numbers for generated inputs (splitmix64): the same sequence on every host and
/// compiler, so that every place of a run, and every version, generates the same input.
class random {
 public:
  explicit random(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  /// Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

 private:
  std::uint64_t s_;
};

}  // namespace parboil
