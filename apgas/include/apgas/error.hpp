#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file error.hpp
/// The exception hierarchy of apgas. Every exception the runtime throws derives from apgas::error, itself a
/// std::runtime_error, so `catch (const std::exception&)` still sees them; two follow the standard's categories
/// instead: memory the OS refuses is an out_of_memory (a std::bad_alloc), and a size past the address space a
/// std::length_error.

#include <cstddef>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace apgas {

/// Base of every exception apgas throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown by `finish` when activities it governed (or its body) ended with uncaught exceptions.
/// Nested multiple_exceptions are flattened: exceptions() holds only leaf exceptions, so counts are exact.
class multiple_exceptions : public error {
 public:
  explicit multiple_exceptions(std::vector<std::exception_ptr> exceptions);

  /// Every collected exception, in no particular order.
  const std::vector<std::exception_ptr>& exceptions() const noexcept { return exceptions_; }
  std::size_t size() const noexcept { return exceptions_.size(); }

  /// Pointers to the collected exceptions of dynamic type E (or derived from E). The pointers stay valid as long
  /// as this multiple_exceptions object lives.
  template <class E>
  std::vector<const E*> of_type() const {
    std::vector<const E*> out;
    for (const auto& p : exceptions_) {
      try {
        std::rethrow_exception(p);
      } catch (const E& e) {
        out.push_back(&e);
      } catch (...) {
      }
    }
    return out;
  }

 private:
  std::vector<std::exception_ptr> exceptions_;
};

/// A place has failed (for example a GPU whose context hit a sticky error); where() names it.
class dead_place_exception : public error {
 public:
  dead_place_exception(int place_id, const std::string& what) : error(what), where_(place_id) {}
  int where() const noexcept { return where_; }

 private:
  int where_;
};

/// A place id that names no place, or an object used away from its home place.
class bad_place_exception : public error {
 public:
  using error::error;
};

/// Misuse of a clock: an operation by an activity not registered on it, or registering a child on such a clock.
class clock_use_exception : public error {
 public:
  using error::error;
};

/// An operation that is illegal where it is attempted (async/finish/at/when/clock operations inside atomic, apgas
/// calls outside apgas::run, a non-kernel closure sent to a GPU place, an offer with no collecting finish, ...).
class illegal_operation_exception : public error {
 public:
  using error::error;
};

/// Malformed or untrusted bytes: a length past the end of a message, an unknown id, a wrong build fingerprint.
class serialization_error : public error {
 public:
  using error::error;
};

/// Memory the OS refused: a remote array's at a host place (mmap or the C library failed). A std::bad_alloc, what
/// a C++ program catches for memory, whose what() names the operation, the bytes, the place and the OS's reason.
class out_of_memory : public std::bad_alloc {
 public:
  explicit out_of_memory(const std::string& what) : what_(what) {}
  const char* what() const noexcept override { return what_.what(); }

 private:
  std::runtime_error what_;  // (copied without throwing, as an exception must be)
};

/// A transport failed or refused a peer.
class transport_error : public error {
 public:
  using error::error;
};

/// A CUDA driver call failed; code() is the CUresult value.
class cuda_error : public error {
 public:
  cuda_error(int code, const std::string& what) : error(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A kernel launch beyond the device's or the function's limits (grid, block, shared memory, parameters).
class kernel_launch_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
};

/// What the checking mode of CPU places (APGAS_KERNEL_CHECK=1) found wrong in a kernel that would be undefined on a
/// GPU — a divergent barrier, a shared-array index outside the array, a data race on a shared array — naming the
/// kernel, the block, the threads and the index. Also thrown, checking mode or not, for a clocked block that cannot
/// go on as written (a warp operation not reached by every thread of its warp).
class kernel_check_error : public error {
 public:
  using error::error;
};

/// An invalid configuration value (environment variable or apgas::config field); the message names the variable,
/// the value and the accepted range.
class config_error : public error {
 public:
  using error::error;
};

/// An exception thrown at another place whose type does not travel (not an apgas or standard exception, and not
/// registered with register_exception): it arrives as this apgas::error, carrying the original type's name and
/// message. what() is "<type name>: <message>".
class remote_error : public error {
 public:
  remote_error(std::string type_name, const std::string& message)
      : error(type_name + ": " + message), type_name_(std::move(type_name)), message_(message) {}
  const std::string& type_name() const noexcept { return type_name_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string type_name_;
  std::string message_;
};

namespace detail {
using exception_factory = std::exception_ptr (*)(const std::string& what);
void register_exception(const char* type_name, exception_factory make);
std::exception_ptr make_registered_exception(const std::string& type_name, const std::string& what);
}  // namespace detail

/// Let exceptions of type E keep their type when they cross places: E must be constructible from a std::string
/// (its what() is sent, and E is rebuilt at the receiver from that text: a constructor that adds a prefix adds it
/// again; one that throws on the text makes the exception arrive as remote_error). Call it at start-up in every
/// process (static initialisation or before apgas::run).
template <class E>
void register_exception() {
  static_assert(std::is_constructible_v<E, std::string>,
                "apgas::register_exception<E>: E must be constructible from std::string (its message)");
  detail::register_exception(typeid(E).name(),
                             [](const std::string& what) { return std::make_exception_ptr(E(what)); });
}

}  // namespace apgas
#pragma GCC visibility pop
