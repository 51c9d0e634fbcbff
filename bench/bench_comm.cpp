// apgas_bench_comm: communication between host places against raw MPI, in the same run, same processes.
//   mpirun -np 2 apgas_bench_comm [--repeats N] [--iters K]
// Prints on place 0, one line per comparison: `ratio <name> <ours/anchor> (ours <x> <unit>, anchor <y> <unit>)`:
//   at_rtt_mpi          finish { async_at(place 1) {} } round trip  /  MPI_Send + MPI_Recv 1-byte ping-pong
//   copy_4mib_mpi       finish { async_copy(4 MiB -> place 1) }     /  MPI_Send 4 MiB + 1-byte ack
//   allreduce_8kib_mpi  team::allreduce of 1024 doubles              /  MPI_Allreduce of 1024 doubles
// Each figure is the median over --repeats batches of --iters operations. The apgas runs and the raw MPI runs
// alternate (the runtime is stopped while raw MPI runs, so neither disturbs the other).
#include <apgas/apgas.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double now_s() { return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int g_iters = 2000;

// ---- ours (measured inside the main activity at place 0) ----
double ours_at_rtt() {
  double per = 0;
  apgas::config cfg = apgas::config::from_env();
  apgas::run(cfg, [&] {
    const apgas::place other(1);
    for (int i = 0; i < 100; ++i) apgas::finish([&] { apgas::async_at(other, [] {}); });
    const double t0 = now_s();
    for (int i = 0; i < g_iters; ++i) apgas::finish([&] { apgas::async_at(other, [] {}); });
    per = (now_s() - t0) / g_iters;
  });
  return per;
}

double ours_copy(std::size_t bytes, int iters) {
  double per = 0;
  apgas::run(apgas::config::from_env(), [&] {
    std::vector<char> src(bytes, 'x');
    auto dst = apgas::make_remote_array<char>(apgas::place(1), bytes);
    for (int i = 0; i < 3; ++i) apgas::finish([&] { apgas::async_copy(std::span<const char>(src), dst); });
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) apgas::finish([&] { apgas::async_copy(std::span<const char>(src), dst); });
    per = (now_s() - t0) / iters;
    apgas::free_remote_array(dst);
  });
  return per;
}

double ours_allreduce(int iters) {
  double per = 0;
  apgas::run(apgas::config::from_env(), [&] {
    apgas::finish([&] {
      for (apgas::place p : apgas::places()) {
        apgas::async_at(p, [iters, g = apgas::make_global_ref(per)] {
          std::vector<double> v(1024, 1.0);
          auto t = apgas::team::world();
          for (int i = 0; i < 10; ++i) t.allreduce(std::span<double>(v), [](double a, double b) { return a + b; });
          t.barrier();
          const double t0 = now_s();
          for (int i = 0; i < iters; ++i) {
            t.allreduce(std::span<double>(v), [](double a, double b) { return a + b; });
          }
          const double dt = (now_s() - t0) / iters;
          if (apgas::here().id() == 0) *g = dt;
        });
      }
    });
  });
  return per;
}

// ---- raw MPI (every rank) ----
double raw_rtt(int rank) {
  char b = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (int i = -100; i < g_iters; ++i) {
    if (i == 0) t0 = now_s();
    if (rank == 0) {
      MPI_Send(&b, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(&b, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
  }
  return (now_s() - t0) / g_iters;
}

double raw_copy(int rank, std::size_t bytes, int iters) {
  std::vector<char> buf(bytes, 'x');
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (int i = -3; i < iters; ++i) {
    if (i == 0) t0 = now_s();
    if (rank == 0) {
      MPI_Send(buf.data(), static_cast<int>(bytes), MPI_CHAR, 1, 2, MPI_COMM_WORLD);
      MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
  }
  return (now_s() - t0) / iters;
}

double raw_allreduce(int iters) {
  std::vector<double> v(1024, 1.0), out(1024);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (int i = -10; i < iters; ++i) {
    if (i == 0) t0 = now_s();
    MPI_Allreduce(v.data(), out.data(), 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  double dt = (now_s() - t0) / iters;
  MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return dt;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      g_iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: mpirun -np 2 apgas_bench_comm [--repeats N] [--iters K]\n");
      return 2;
    }
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // apgas's mpi transport uses this MPI
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "apgas_bench_comm: run it with mpirun -np 2 (or more)\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<double> at_o, at_a, cp_o, cp_a, ar_o, ar_a;
  const std::size_t mib4 = std::size_t{4} << 20;
  for (int r = 0; r < repeats; ++r) {
    at_o.push_back(ours_at_rtt() * 1e6);
    at_a.push_back(raw_rtt(rank) * 1e6);
    cp_o.push_back(ours_copy(mib4, 20) * 1e6);
    cp_a.push_back(raw_copy(rank, mib4, 20) * 1e6);
    ar_o.push_back(ours_allreduce(g_iters / 2) * 1e6);
    ar_a.push_back(raw_allreduce(g_iters / 2) * 1e6);
  }
  if (rank == 0) {
    auto line = [](const char* name, const std::vector<double>& o, const std::vector<double>& a) {
      std::printf("ratio %s %.3f (ours %.2f us, anchor %.2f us)\n", name, median(o) / median(a), median(o), median(a));
    };
    line("at_rtt_mpi", at_o, at_a);
    line("copy_4mib_mpi", cp_o, cp_a);
    line("allreduce_8kib_mpi", ar_o, ar_a);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
