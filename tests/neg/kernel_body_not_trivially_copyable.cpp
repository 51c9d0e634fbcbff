// Must not compile: a kernel body is shipped to the device; host data travels through resources.
#include <apgas/apgas.hpp>

#include <vector>

void f() {
  std::vector<float> data(10);
  apgas::async_at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, [data](apgas::thread) { (void)data; }));
}
