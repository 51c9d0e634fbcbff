// The second nvcc file that launches scale_by_constant (see test_gpu_review.cpp): its own kernel entry, its own
// constant buffer.
#include "gpu/functor_kernel.hpp"

#include <vector>

void launch_scaled_in_second_file(apgas::place g, apgas::remote_array<float> out, float factor) {
  const std::vector<float> f{factor};
  apgas::async_at(g, apgas::cuda_kernel(apgas::auto_grid(), apgas::constant_from(std::span<const float>(f)),
                                        scale_by_constant{{}, out}));
}
