// Must not compile (nvcc): a shared array of an element type aligned to more than the dynamic shared memory's base
// (128 bytes): its elements could not all be aligned.
#include <apgas/apgas.hpp>

#include <span>

struct alignas(256) wide {
  float v[64];
};

void send(apgas::place gpu) {
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<wide>(4),
                                          [=] APGAS_KERNEL(apgas::thread t, std::span<wide> s) {
                                            s[0].v[t.thread()] = 1.0f;
                                          }));
}
