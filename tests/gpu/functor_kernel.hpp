#pragma once
// A named kernel body type used from two nvcc files (test_gpu_review.cpp, functor_second_file.cpp): out[i] = c[0] * i.
#include <apgas/apgas.hpp>

#include <span>

struct scale_by_constant : apgas::device_function {
  apgas::remote_array<float> out;
  APGAS_KERNEL void operator()(apgas::thread t, std::span<const float> c) const {
    for (long i = t.global_id(); i < static_cast<long>(out.size()); i += t.global_count()) {
      out.data()[i] = c[0] * static_cast<float>(i);
    }
  }
};

/// Launch scale_by_constant{{}, out} with constant data {factor} at GPU place g, from this file / from the second file.
void launch_scaled_here(apgas::place g, apgas::remote_array<float> out, float factor);
void launch_scaled_in_second_file(apgas::place g, apgas::remote_array<float> out, float factor);
