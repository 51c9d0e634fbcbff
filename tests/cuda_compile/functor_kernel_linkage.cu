// Compiled to PTX by the test: the kernel entry of a named functor type has internal linkage, so that two nvcc files
// launching the same functor each have their own entry, reading their own file's constant buffer (with one merged
// entry — device linking with -rdc merges weak entries — one file's kernel would read the other file's constants).
#include <apgas/apgas.hpp>

#include <span>

struct scale_by_constant : apgas::device_function {  // a named kernel body type, as a header shared by several nvcc files would define it
  apgas::remote_array<float> out;
  APGAS_KERNEL void operator()(apgas::thread t, std::span<const float> c) const {
    out.data()[t.global_id()] = c[0] * static_cast<float>(t.global_id());
  }
};

void send(apgas::place gpu, apgas::remote_array<float> out, std::span<const float> factor) {
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::constant_from(factor), scale_by_constant{{}, out}));
}
