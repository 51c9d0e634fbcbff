// Must not compile (nvcc): a [=] APGAS_KERNEL lambda that captures a std::vector. Its host wrapper is never trivially
// copyable, so kernel.hpp cannot check it; the device pass of the kernel entry (kernel.cuh) must: the vector's device
// copy would hold a host pointer.
#include <apgas/apgas.hpp>

#include <vector>

void send(apgas::place gpu, apgas::remote_array<int> out) {
  std::vector<int> v(10, 1);
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, [=] APGAS_KERNEL(apgas::thread t) {
    out.data()[t.thread()] = static_cast<int>(v.size());
  }));
}
