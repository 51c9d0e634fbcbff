#pragma once
// Readable type names for messages: demangled (St9bad_alloc -> std::bad_alloc, l -> long).
#include <exception>
#include <string>
#include <typeinfo>

namespace apgas::detail {
/// The demangled form of a mangled name (the name itself if it does not demangle).
std::string demangle(const char* mangled);
inline std::string type_name(const std::type_info& t) { return demangle(t.name()); }
/// Inside a catch block: the demangled type of the exception being handled ("an unknown type" if none).
std::string current_exception_type_name();
/// "<type>: <what()>" of an exception, or "a value of type <type> (not derived from std::exception)".
std::string exception_text(const std::exception_ptr& e);
}  // namespace apgas::detail
