// Doubles n floats on the first GPU place of this host, or on the host place where there is none (the same closure).
#include <apgas/apgas.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  return apgas::run(argc, argv, [] {
    const auto gpus = apgas::here().children();
    const apgas::place p = gpus.empty() ? apgas::here() : gpus.front();
    constexpr long n = 1000;
    std::vector<float> v(n, 1.5f);
    auto a = apgas::make_remote_array(p, std::span<const float>(v));
    apgas::at(p, apgas::cuda_kernel(apgas::auto_grid(), [=] APGAS_KERNEL(apgas::thread t) {
      for (long i = t.global_id(); i < n; i += t.global_count()) a.data()[i] *= 2;
    }));
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<float>(v)); });
    apgas::free_remote_array(a);
    std::printf("cuda_user: %s: v[7]=%g check=%s\n", gpus.empty() ? "host place" : "GPU place", v[7],
                v[7] == 3.0f ? "ok" : "FAIL");
  });
}
