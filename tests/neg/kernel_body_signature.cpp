// Must not compile: the body must take the thread handle and then one parameter per resource.
#include <apgas/apgas.hpp>

void f() {
  apgas::async_at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, apgas::shared<int>(4), [](apgas::thread) {}));
}
