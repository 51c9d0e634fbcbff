// Must not compile: at() follows the same shipping rule as async_at.
#include <apgas/apgas.hpp>

#include <vector>

int f() {
  std::vector<int> v{1, 2, 3};
  return apgas::at(apgas::here(), [v] { return static_cast<int>(v.size()); });
}
