// Exceptions on the wire: how an activity's exception travels to another place (in an at reply or a finish
// report) and is rebuilt there: as the same type where it is one of apgas's or the standard library's (or a
// registered one), as remote_error otherwise.
#include "dist_state.hpp"
#include "type_name.hpp"

#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace apgas::detail {
namespace {

// ---- exceptions on the wire ----
// kind: 0 apgas::error (and unknown types), 1.. apgas types, 20.. std types. Then the dynamic type's name and what().
enum class exc : std::uint8_t {
  other = 0, apgas_error, dead_place, bad_place, clock_use, illegal_operation, serialization, transport_e, config,
  cuda = 9, kernel_launch = 10,
  kernel_check = 11, out_of_memory = 12,
  std_exception = 20, runtime_error, logic_error, invalid_argument, out_of_range, length_error, domain_error,
  range_error, overflow_error, underflow_error, bad_alloc, multiple = 40,
  relayed = 41  // a remote_error passed on: its type name (readable already) and message, as they came
};

template <class E>
bool encode_as(writer& w, const std::exception& x, exc kind) {
  if (typeid(x) != typeid(E)) return false;
  w & kind & std::string(typeid(x).name()) & std::string(x.what());
  return true;
}

}  // namespace

void encode_exception(writer& w, const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const multiple_exceptions& m) {
    w & exc::multiple;
    w.write_length(m.exceptions().size());
    for (const auto& x : m.exceptions()) encode_exception(w, x);
  } catch (const std::exception& x) {
    if (typeid(x) == typeid(dead_place_exception)) {  // the type field carries the place
      w & exc::dead_place & std::to_string(static_cast<const dead_place_exception&>(x).where()) & std::string(x.what());
      return;
    }
    if (typeid(x) == typeid(cuda_error) || typeid(x) == typeid(kernel_launch_error)) {  // the type field: the code
      w & (typeid(x) == typeid(cuda_error) ? exc::cuda : exc::kernel_launch) &
          std::to_string(static_cast<const cuda_error&>(x).code()) & std::string(x.what());
      return;
    }
    if (typeid(x) == typeid(remote_error)) {  // passed on: the original type and message, not "remote_error"
      const auto& r = static_cast<const remote_error&>(x);
      w & exc::relayed & r.type_name() & r.message();
      return;
    }
    if (encode_as<error>(w, x, exc::apgas_error) || encode_as<kernel_check_error>(w, x, exc::kernel_check) ||
        encode_as<out_of_memory>(w, x, exc::out_of_memory) ||
        encode_as<bad_place_exception>(w, x, exc::bad_place) || encode_as<clock_use_exception>(w, x, exc::clock_use) ||
        encode_as<illegal_operation_exception>(w, x, exc::illegal_operation) ||
        encode_as<serialization_error>(w, x, exc::serialization) ||
        encode_as<transport_error>(w, x, exc::transport_e) || encode_as<config_error>(w, x, exc::config) ||
        encode_as<std::exception>(w, x, exc::std_exception) ||
        encode_as<std::runtime_error>(w, x, exc::runtime_error) ||
        encode_as<std::logic_error>(w, x, exc::logic_error) ||
        encode_as<std::invalid_argument>(w, x, exc::invalid_argument) ||
        encode_as<std::out_of_range>(w, x, exc::out_of_range) ||
        encode_as<std::length_error>(w, x, exc::length_error) ||
        encode_as<std::domain_error>(w, x, exc::domain_error) || encode_as<std::range_error>(w, x, exc::range_error) ||
        encode_as<std::overflow_error>(w, x, exc::overflow_error) ||
        encode_as<std::underflow_error>(w, x, exc::underflow_error) ||
        encode_as<std::bad_alloc>(w, x, exc::bad_alloc)) {
      return;
    }
    w & exc::other & std::string(typeid(x).name()) & std::string(x.what());
  } catch (...) {  // e.g. throw 42: the type is named (the remote_error's type_name), the value is not sent
    const std::type_info* t = abi::__cxa_current_exception_type();
    w & exc::other & std::string(t != nullptr ? t->name() : "(unknown type)") &
        std::string("a thrown value not derived from std::exception");
  }
}

std::exception_ptr decode_exception(reader& r) {
  exc kind{};
  r & kind;
  if (kind == exc::multiple) {
    reader::nest guard(r);  // lists of lists are bounded like any nested value (the decoder recurses here)
    const std::size_t n = r.read_length(1, "exception list");
    std::vector<std::exception_ptr> es;
    for (std::size_t i = 0; i < n; ++i) es.push_back(decode_exception(r));
    return std::make_exception_ptr(multiple_exceptions(std::move(es)));
  }
  std::string type, what;
  r & type & what;
  switch (kind) {
    case exc::apgas_error: return std::make_exception_ptr(error(what));
    case exc::dead_place: return std::make_exception_ptr(dead_place_exception(std::atoi(type.c_str()), what));
    case exc::cuda: return std::make_exception_ptr(cuda_error(std::atoi(type.c_str()), what));
    case exc::kernel_launch: return std::make_exception_ptr(kernel_launch_error(std::atoi(type.c_str()), what));
    case exc::bad_place: return std::make_exception_ptr(bad_place_exception(what));
    case exc::clock_use: return std::make_exception_ptr(clock_use_exception(what));
    case exc::illegal_operation: return std::make_exception_ptr(illegal_operation_exception(what));
    case exc::serialization: return std::make_exception_ptr(serialization_error(what));
    case exc::transport_e: return std::make_exception_ptr(transport_error(what));
    case exc::config: return std::make_exception_ptr(config_error(what));
    case exc::kernel_check: return std::make_exception_ptr(kernel_check_error(what));
    case exc::out_of_memory: return std::make_exception_ptr(out_of_memory(what));
    case exc::relayed: return std::make_exception_ptr(remote_error(type, what));
    case exc::std_exception: return std::make_exception_ptr(remote_error(demangle(type.c_str()), what));
    case exc::runtime_error: return std::make_exception_ptr(std::runtime_error(what));
    case exc::logic_error: return std::make_exception_ptr(std::logic_error(what));
    case exc::invalid_argument: return std::make_exception_ptr(std::invalid_argument(what));
    case exc::out_of_range: return std::make_exception_ptr(std::out_of_range(what));
    case exc::length_error: return std::make_exception_ptr(std::length_error(what));
    case exc::domain_error: return std::make_exception_ptr(std::domain_error(what));
    case exc::range_error: return std::make_exception_ptr(std::range_error(what));
    case exc::overflow_error: return std::make_exception_ptr(std::overflow_error(what));
    case exc::underflow_error: return std::make_exception_ptr(std::underflow_error(what));
    case exc::bad_alloc: return std::make_exception_ptr(std::bad_alloc());
    case exc::other: {
      if (std::exception_ptr p = make_registered_exception(type, what)) return p;
      return std::make_exception_ptr(remote_error(demangle(type.c_str()), what));
    }
    default:
      throw serialization_error("apgas: malformed message: unknown exception kind " +
                                std::to_string(static_cast<int>(kind)));
  }
}

}  // namespace apgas::detail
