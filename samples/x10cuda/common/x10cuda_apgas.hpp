#pragma once
// What the apgas versions of samples/x10cuda share besides ../parboil/common/parboil_apgas.hpp and dist.hpp (the work
// of a run cut over the compute places of every host, the arrays lent to them, z-slabs with halos).
#include "dist.hpp"
#include "parboil_apgas.hpp"
#include "x10cuda.hpp"

#include <apgas/apgas.hpp>

#include <cstddef>

namespace x10cuda {

/// a[i] = a[i + 1], and the last gets the first. On thread_block::per_thread_array handles: a shift of each
/// thread's registers on a GPU, of the handles (pointers), not the values, on a CPU place.
template <class A>
APGAS_KERNEL inline void rotate_left(A& a) {
  const auto first = a[0];
  APGAS_UNROLL() for (std::size_t i = 0; i + 1 < a.size(); ++i) a[i] = a[i + 1];
  a[a.size() - 1] = first;
}

}  // namespace x10cuda
