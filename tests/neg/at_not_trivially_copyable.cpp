// Must not compile: at() follows the same shipping rule as async_at.
#include <apgas/apgas.hpp>

#include <string>

int f() {
  return apgas::at(apgas::here(), [s = std::string("x")] { return static_cast<int>(s.size()); });
}
