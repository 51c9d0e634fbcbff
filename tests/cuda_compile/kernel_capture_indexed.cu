// Compiled to PTX by the test (nvcc --ptx): a kernel body that indexes a captured array by a run-time value reads the
// closure where the launch put it (the entry's parameters are __grid_constant__). Without that, the compiler copies
// the whole closure into each thread's local memory first (a __local_depot as large as the closure).
#include <apgas/apgas.hpp>

#include <array>

void send(apgas::place gpu, apgas::remote_array<int> out, std::array<int, 24> rows) {
  apgas::async_at(gpu, apgas::cuda_kernel(apgas::grid{{4, 1, 6}, 32}, [=] APGAS_KERNEL(apgas::thread_block b) {
    const int row = rows[b.block_idx().z];  // an index known only at run time
    b.for_threads([&](apgas::thread_index t) { out.data()[row * 32 + t.x] = t.x; });
  }));
}
