// A warp shuffle in a plain kernel (whose threads run as a loop on CPU places): a compile-time error that says to
// take apgas::clocked_thread.
#include <apgas/apgas.hpp>

void f(int* out) {
  apgas::async_at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 32}, [=](apgas::thread t) {
    out[t.thread()] = t.shfl_down(t.thread(), 1);
  }));
}
