#include "type_name.hpp"

#include <apgas/error.hpp>

#include <cxxabi.h>
#include <cstdlib>

#include <mutex>
#include <string>
#include <unordered_map>

#include <string>

namespace apgas {

namespace {
std::string describe(const std::vector<std::exception_ptr>& es) {
  std::string s = std::to_string(es.size()) + (es.size() == 1 ? " exception" : " exceptions") + " in a finish";
  for (const auto& e : es) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      s += "; ";
      s += x.what();
      break;  // the first message only: the count says there are more
    } catch (...) {
      s += "; a value of type ";  // (appended piece by piece: GCC 12 warns falsely on literal + string here)
      s += detail::current_exception_type_name();
      s += " (not derived from std::exception)";
      break;
    }
  }
  return s;
}
}  // namespace

namespace {
// The leaves of `es`, in order: a multiple_exceptions among them contributes its own (already leaves).
std::vector<std::exception_ptr> leaves(std::vector<std::exception_ptr> es) {
  std::vector<std::exception_ptr> out;
  for (auto& e : es) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const multiple_exceptions& m) {
      out.insert(out.end(), m.exceptions().begin(), m.exceptions().end());
      continue;
    } catch (...) {
    }
    out.push_back(std::move(e));
  }
  return out;
}
}  // namespace

// (The parameter is flattened first, in the base's initialiser: describe() counts the leaves.)
multiple_exceptions::multiple_exceptions(std::vector<std::exception_ptr> exceptions)
    : error(describe(exceptions = leaves(std::move(exceptions)))), exceptions_(std::move(exceptions)) {}

}  // namespace apgas

namespace apgas::detail {
namespace {
struct exception_registry {
  std::mutex mutex;
  std::unordered_map<std::string, exception_factory> by_name;
};
exception_registry& exceptions() {
  static exception_registry r;
  return r;
}
}  // namespace

void register_exception(const char* type_name, exception_factory make) {
  auto& r = exceptions();
  std::lock_guard lock(r.mutex);
  r.by_name[type_name] = make;
}

std::exception_ptr make_registered_exception(const std::string& type_name, const std::string& what) {
  exception_factory make = nullptr;
  {
    auto& r = exceptions();
    std::lock_guard lock(r.mutex);
    auto it = r.by_name.find(type_name);
    if (it == r.by_name.end()) return nullptr;
    make = it->second;
  }
  // The user's constructor, outside the lock; if it cannot rebuild the exception from its message (it throws), the
  // exception arrives as remote_error instead: a report that cannot be decoded would leave its finish waiting.
  try {
    return make(what);
  } catch (...) {
    return nullptr;
  }
}

std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  return s;
}

std::string current_exception_type_name() {
  const std::type_info* t = abi::__cxa_current_exception_type();
  return t != nullptr ? demangle(t->name()) : std::string("an unknown type");
}

std::string exception_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return type_name(typeid(x)) + ": " + x.what();
  } catch (...) {
    std::string s = "a value of type ";  // (appended piece by piece: GCC 12 warns falsely on literal + string)
    s += current_exception_type_name();
    s += " (not derived from std::exception)";
    return s;
  }
}
}  // namespace apgas::detail
