// Compiled to PTX by the test (nvcc --ptx): the dynamic shared memory of apgas kernels is declared 128-byte aligned,
// so that a shared array of a type aligned to 32, 64 or 128 bytes is aligned (offsets are multiples of its alignment
// from the base).
#include <apgas/apgas.hpp>

#include <span>

struct alignas(64) line {
  float v[16];
};

void send(apgas::place gpu, apgas::remote_array<float> out) {
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<float>(3), apgas::shared<line>(2),
                                          [=] APGAS_KERNEL(apgas::thread t, std::span<float> a, std::span<line> b) {
                                            a[0] = 1.0f;
                                            b[1].v[t.thread() % 16] = a[0];
                                            out.data()[t.thread()] = b[1].v[0];
                                          }));
}
