// Must not compile: a std::string_view (like std::span and std::reference_wrapper) refers to memory of this place;
// sent as its bytes it would point into another process's memory. The message says what to send instead.
#include <apgas/apgas.hpp>

#include <string>
#include <string_view>

std::string f(std::string_view s) {
  return apgas::at(apgas::here(), [](std::string_view v) { return std::string(v); }, s);
}
