// A kernel body ported from CUDA with __syncthreads() left in it, compiled by the host compiler: a compile-time error
// that names what to use instead.
#include <apgas/apgas.hpp>

void f(float* out) {
  apgas::async_at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::clocked_thread t) {
                    out[t.thread()] = 1;
                    __syncthreads();
                  }));
}
