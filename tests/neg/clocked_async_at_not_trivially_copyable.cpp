// Must not compile: clocked_async_at ships its closure like async_at.
#include <apgas/apgas.hpp>

#include <vector>

void f(apgas::clock c) {
  std::vector<int> v{1, 2, 3};
  apgas::clocked_async_at(apgas::here(), {c}, [v] { (void)v.size(); });
}
