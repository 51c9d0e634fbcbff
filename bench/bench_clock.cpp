// apgas_bench_clock: a clock spanning host places against MPI_Barrier, in the same run, same processes.
//   mpirun -np N apgas_bench_clock [--repeats R] [--iters K]      (N >= 2)
// Prints on place 0 one line: `ratio clock_advance_np<N>_mpi <ours/anchor> (ours <x> us, anchor <y> us)`:
//   ours    one clock made at place 0, one activity registered on it per place, each advancing K times: the time
//           of one phase (place 0's activity, from its first to its last advance, divided by K);
//   anchor  K MPI_Barrier calls over the same processes, per call.
// Each figure is the median over R batches. The apgas runs and the raw MPI runs alternate (the runtime is stopped
// while raw MPI runs). One worker per place (APGAS_NTHREADS overrides it), as the anchor has one thread per rank.
#include <apgas/apgas.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

apgas::config bench_config() {
  apgas::config cfg = apgas::config::from_env();
  if (std::getenv("APGAS_NTHREADS") == nullptr) cfg.nthreads = 1;
  return cfg;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ours_clock_advance(int iters) {
  double per = 0;
  apgas::run(bench_config(), [&] {
    apgas::finish([&] {
      const apgas::clock c = apgas::clock::make();
      for (apgas::place p : apgas::places()) {
        if (p == apgas::here()) continue;
        apgas::clocked_async_at(p, {c}, [c, iters] {
          for (int i = 0; i < 100 + iters; ++i) c.advance();
          c.drop();
        });
      }
      for (int i = 0; i < 100; ++i) c.advance();  // warm: every place has its part of the clock
      const double t0 = now_s();
      for (int i = 0; i < iters; ++i) c.advance();
      per = (now_s() - t0) / iters;
      c.drop();
    });
  });
  return per;
}

double raw_barrier(int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (int i = -100; i < iters; ++i) {
    if (i == 0) t0 = now_s();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  return (now_s() - t0) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  int iters = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: mpirun -np N apgas_bench_clock [--repeats R] [--iters K]\n");
      return 2;
    }
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // apgas's mpi transport uses this MPI
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "apgas_bench_clock: run it with mpirun -np 2 (or more)\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<double> o, a;
  for (int r = 0; r < repeats; ++r) {
    o.push_back(ours_clock_advance(iters) * 1e6);
    a.push_back(raw_barrier(iters) * 1e6);
  }
  if (rank == 0) {
    std::printf("ratio clock_advance_np%d_mpi %.3f (ours %.2f us, anchor %.2f us)\n", size, median(o) / median(a),
                median(o), median(a));
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
