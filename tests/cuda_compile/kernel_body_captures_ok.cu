// Must compile (nvcc): kernel bodies that capture what may be shipped to a device — scalars, a place, a remote_array,
// a std::array, a plain struct — with every resource kind, plain and clocked, directly and spilled (a large capture).
#include <apgas/apgas.hpp>

#include <array>
#include <span>
#include <vector>

struct params {
  float scale;
  int offset;
};

void send(apgas::place gpu, apgas::remote_array<float> out, std::span<const float> host) {
  const float x = 2.0f;
  const long n = 100;
  const params p{0.5f, 3};
  const std::array<int, 4> small{1, 2, 3, 4};
  std::array<char, 40000> large{};  // beyond the kernel parameter space: the body is spilled
  large[7] = 9;
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{4, 64}, [=] APGAS_KERNEL(apgas::thread t) {
    float* d = out.data();
    if (t.global_id() < n) d[t.global_id()] = x * p.scale + static_cast<float>(small[t.thread() % 4] + p.offset);
  }));
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::auto_grid(), apgas::shared<float>(64), apgas::shared_from(host),
                                          apgas::constant_from(host), apgas::global_from(host),
                                          [=] APGAS_KERNEL(apgas::clocked_thread t, std::span<float> a,
                                                           std::span<float> b, std::span<const float> c,
                                                           std::span<float> g) {
                                            a[t.thread()] = b[0] + c[0] + g[0];
                                            t.advance();
                                            if (t.thread() == 0) out.data()[t.block()] = a[0] + x + large[7];
                                          }));
}
