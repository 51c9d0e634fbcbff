// apgas_bench_comm: communication between host places against raw MPI, in the same run, same processes.
//   mpirun -np 2 apgas_bench_comm [--repeats N] [--iters K] [--only at|copy|large|allreduce|team|clock]
// (--only large: the two at_<n>mib_mpi lines, which the other runs leave out: they take seconds and 5 GiB.)
// Prints on place 0, one line per comparison: `ratio <name> <ours/anchor> (ours <x> <unit>, anchor <y> <unit>)`:
//   at_rtt_mpi          finish { async_at(place 1) {} } round trip  /  MPI_Send + MPI_Recv 1-byte ping-pong
//   copy_4mib_mpi       finish { async_copy(4 MiB -> place 1) }     /  MPI_Send 4 MiB + 1-byte ack
//   at_<n>mib_mpi       finish { async_at(place 1, f, v) } with a std::vector<char> v of n MiB (256: one
//                       message; 1536: over the transports' 1 GiB, by rendezvous in pieces) / MPI_Send of n MiB +
//                       1-byte ack (also as GB/s; ours includes encoding and decoding the argument: two copies)
//   allreduce_8kib_mpi  team::allreduce of 1024 doubles              /  MPI_Allreduce of 1024 doubles
//   team_<op>_8kib_mpi  team::<op> with 1024 doubles (8 KiB) per place /  the MPI collective of the same shape, root 0:
//                       reduce, broadcast, gather, gatherv, scatter, scatterv, allgather, alltoall (8 KiB per block)
//   clock_advance_np<N>_mpi  one phase of a clock made at place 0 with one activity per place, each advancing
//                       --iters times (place 0's time per advance)  /  MPI_Barrier over the same processes
// Each figure is the median over --repeats batches of --iters operations. The apgas runs and the raw MPI runs
// alternate (the runtime is stopped while raw MPI runs, so neither disturbs the other). Same thread count on both
// sides: one worker per place, as the anchor has one thread per rank (APGAS_NTHREADS overrides it).
#include <apgas/apgas.hpp>

#include <mpi.h>
#if APGAS_BENCH_OFI
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The configuration of our runs: the environment's, with one worker per place unless APGAS_NTHREADS says otherwise.
apgas::config bench_config() {
  apgas::config cfg = apgas::config::from_env();
  if (std::getenv("APGAS_NTHREADS") == nullptr) cfg.nthreads = 1;
  return cfg;
}

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
  apgas::config cfg = bench_config();
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
  apgas::run(bench_config(), [&] {
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

double ours_large(std::size_t bytes, int iters) {
  double per = 0;
  apgas::run(bench_config(), [&] {
    const std::vector<char> v(bytes, 'x');
    const apgas::place other(1);
    const auto sink = [](const std::vector<char>& got) {
      if (got.size() == 1) std::abort();
    };
    apgas::finish([&] { apgas::async_at(other, sink, v); });
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) apgas::finish([&] { apgas::async_at(other, sink, v); });
    per = (now_s() - t0) / iters;
  });
  return per;
}

double ours_allreduce(int iters) {
  double per = 0;
  apgas::run(bench_config(), [&] {
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

// The team operations, 8 KiB (1024 doubles) per place, root place 0. Each figure: a loop of iters operations between
// two barriers, at place 0 (the rooted operations let the other places run ahead, as MPI's do).
constexpr int team_ops = 8;
const char* const team_op_names[team_ops] = {"reduce",  "broadcast", "gather",    "gatherv",
                                             "scatter", "scatterv",  "allgather", "alltoall"};
constexpr std::size_t team_k = 1024;

struct team_times {
  double t[team_ops];
};

template <class Body>
double timed(apgas::team& t, int iters, Body body) {
  for (int i = 0; i < 10; ++i) body();
  t.barrier();
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) body();
  t.barrier();
  return (now_s() - t0) / iters;
}

team_times ours_team(int iters) {
  team_times out{};
  apgas::run(bench_config(), [&] {
    apgas::finish([&] {
      for (apgas::place p : apgas::places()) {
        apgas::async_at(p, [iters, g = apgas::make_global_ref(out)] {
          auto t = apgas::team::world();
          const std::size_t n = static_cast<std::size_t>(t.size());
          const apgas::place root(0);
          std::vector<double> mine(team_k, 1.0), big(team_k * n, 2.0), out2(team_k * n);
          std::vector<std::size_t> counts(n, team_k);
          const auto plus = [](double a, double b) { return a + b; };
          team_times r{};
          r.t[0] = timed(t, iters, [&] { t.reduce(std::span<double>(mine), plus, root); });
          r.t[1] = timed(t, iters, [&] { t.broadcast(std::span<double>(mine), root); });
          r.t[2] = timed(t, iters, [&] { t.gather(std::span<const double>(mine), std::span<double>(big), root); });
          r.t[3] = timed(t, iters, [&] {
            t.gatherv(std::span<const double>(mine), std::span<double>(big), std::span<const std::size_t>(counts),
                      root);
          });
          r.t[4] = timed(t, iters, [&] { t.scatter(std::span<const double>(big), std::span<double>(mine), root); });
          r.t[5] = timed(t, iters, [&] {
            t.scatterv(std::span<const double>(big), std::span<const std::size_t>(counts), std::span<double>(mine),
                       root);
          });
          r.t[6] = timed(t, iters, [&] { t.allgather(std::span<const double>(mine), std::span<double>(big)); });
          r.t[7] = timed(t, iters, [&] { t.alltoall(std::span<const double>(big), std::span<double>(out2)); });
          if (apgas::here().id() == 0) *g = r;
        });
      }
    });
  });
  return out;
}

template <class Body>
double raw_timed(int iters, Body body) {
  for (int i = 0; i < 10; ++i) body();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) body();
  MPI_Barrier(MPI_COMM_WORLD);
  return (now_s() - t0) / iters;
}

team_times raw_team(int iters) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int k = static_cast<int>(team_k);
  const std::size_t n = static_cast<std::size_t>(size);
  std::vector<double> mine(team_k, 1.0), res(team_k), big(team_k * n, 2.0), out2(team_k * n);
  std::vector<int> counts(n, k), displs(n);
  for (std::size_t i = 0; i < n; ++i) displs[i] = static_cast<int>(i) * k;
  team_times r{};
  r.t[0] = raw_timed(iters, [&] { MPI_Reduce(mine.data(), res.data(), k, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); });
  r.t[1] = raw_timed(iters, [&] { MPI_Bcast(mine.data(), k, MPI_DOUBLE, 0, MPI_COMM_WORLD); });
  r.t[2] = raw_timed(iters, [&] {
    MPI_Gather(mine.data(), k, MPI_DOUBLE, big.data(), k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  });
  r.t[3] = raw_timed(iters, [&] {
    MPI_Gatherv(mine.data(), k, MPI_DOUBLE, big.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  });
  r.t[4] = raw_timed(iters, [&] {
    MPI_Scatter(big.data(), k, MPI_DOUBLE, mine.data(), k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  });
  r.t[5] = raw_timed(iters, [&] {
    MPI_Scatterv(big.data(), counts.data(), displs.data(), MPI_DOUBLE, mine.data(), k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  });
  r.t[6] = raw_timed(iters, [&] {
    MPI_Allgather(mine.data(), k, MPI_DOUBLE, big.data(), k, MPI_DOUBLE, MPI_COMM_WORLD);
  });
  r.t[7] = raw_timed(iters, [&] {
    MPI_Alltoall(big.data(), k, MPI_DOUBLE, out2.data(), k, MPI_DOUBLE, MPI_COMM_WORLD);
  });
  return r;
}

// ---- raw MPI (every rank) ----
// One phase of a clock spanning the places: one activity per place registered on a clock made at place 0.
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

#if APGAS_BENCH_OFI
// A raw libfabric ping-pong on its own RDM endpoint (same provider as apgas: FI_PROVIDER), names exchanged with MPI.
double raw_ofi_rtt(int rank, int iters) {
  auto ok = [](int rc, const char* what) {
    if (rc != 0) {
      std::fprintf(stderr, "raw libfabric: %s: %s\n", what, fi_strerror(-rc));
      std::exit(3);
    }
  };
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = 0;
  fi_info* info = nullptr;
  ok(fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info), "fi_getinfo");
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  ok(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
  ok(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  ok(fi_cq_open(domain, &cq_attr, &cq, nullptr), "fi_cq_open");
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  ok(fi_av_open(domain, &av_attr, &av, nullptr), "fi_av_open");
  ok(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
  ok(fi_ep_bind(ep, &av->fid, 0), "bind av");
  ok(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "bind cq");
  ok(fi_enable(ep), "fi_enable");
  char name[256];
  std::size_t len = sizeof name;
  ok(fi_getname(&ep->fid, name, &len), "fi_getname");
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> names(len * static_cast<std::size_t>(size));
  MPI_Allgather(name, static_cast<int>(len), MPI_BYTE, names.data(), static_cast<int>(len), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<fi_addr_t> addrs(static_cast<std::size_t>(size));
  fi_av_insert(av, names.data(), static_cast<std::size_t>(size), addrs.data(), 0, nullptr);
  char sbuf = 0, rbuf = 0;
  fi_context2 sctx{}, rctx{};
  auto wait_one = [&] {
    fi_cq_entry e;
    for (;;) {
      const ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return;
      if (n != -FI_EAGAIN) {
        std::fprintf(stderr, "raw libfabric: fi_cq_read %zd\n", n);
        std::exit(3);
      }
    }
  };
  auto post_recv = [&] { while (fi_recv(ep, &rbuf, 1, nullptr, FI_ADDR_UNSPEC, &rctx) == -FI_EAGAIN) fi_cq_read(cq, nullptr, 0); };
  auto do_send = [&](int dst) {
    while (fi_send(ep, &sbuf, 1, nullptr, addrs[static_cast<std::size_t>(dst)], &sctx) == -FI_EAGAIN) fi_cq_read(cq, nullptr, 0);
  };
  post_recv();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (int i = -100; i < iters; ++i) {
    if (i == 0) t0 = now_s();
    if (rank == 0) {
      do_send(1);
      wait_one();  // send or receive completion
      wait_one();
      post_recv();
    } else if (rank == 1) {
      wait_one();  // the receive
      post_recv();
      do_send(0);
      wait_one();
    }
  }
  double dt = (now_s() - t0) / iters;
  MPI_Barrier(MPI_COMM_WORLD);
  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return dt;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::string only;  // empty: every comparison
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      g_iters = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
      if (only != "at" && only != "copy" && only != "allreduce" && only != "team" && only != "clock" &&
          only != "large") {
        std::fprintf(stderr, "apgas_bench_comm: --only %s: expected at, copy, large, allreduce, team or clock\n",
                     only.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: mpirun -np 2 apgas_bench_comm [--repeats N] [--iters K] [--only at|copy|large|allreduce|team|clock]\n");
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
  std::vector<double> at_o, at_a, cp_o, cp_a, ar_o, ar_a, ck_o, ck_a, lg_o[2], lg_a[2];
  const std::size_t large_mib[2] = {256, 1536};
  std::vector<double> tm_o[team_ops], tm_a[team_ops];
  const std::size_t mib4 = std::size_t{4} << 20;
  const char* tr = std::getenv("APGAS_TRANSPORT");
  if (tr != nullptr && std::string(tr) == "ofi") {
#if APGAS_BENCH_OFI
    // The at round trip over libfabric against a raw libfabric ping-pong (same provider).
    for (int r = 0; r < repeats; ++r) {
      at_o.push_back(ours_at_rtt() * 1e6);
      at_a.push_back(raw_ofi_rtt(rank, g_iters) * 1e6);
    }
    if (rank == 0) {
      const char* prov = std::getenv("FI_PROVIDER");
      std::printf("ratio at_rtt_ofi_%s %.3f (ours %.2f us, anchor %.2f us)\n", prov != nullptr ? prov : "default",
                  median(at_o) / median(at_a), median(at_o), median(at_a));
    }
#else
    if (rank == 0) std::fprintf(stderr, "apgas_bench_comm: built without libfabric\n");
#endif
    MPI_Finalize();
    return 0;
  }
  const auto want = [&](const char* what) { return only.empty() ? std::string(what) != "large" : only == what; };
  for (int r = 0; r < repeats; ++r) {
    if (want("at")) {
      at_o.push_back(ours_at_rtt() * 1e6);
      at_a.push_back(raw_rtt(rank) * 1e6);
    }
    if (want("copy")) {
      cp_o.push_back(ours_copy(mib4, 20) * 1e6);
      cp_a.push_back(raw_copy(rank, mib4, 20) * 1e6);
    }
    if (want("large")) {
      for (int k = 0; k < 2; ++k) {
        lg_o[k].push_back(ours_large(large_mib[k] << 20, 2) * 1e6);
        lg_a[k].push_back(raw_copy(rank, large_mib[k] << 20, 2) * 1e6);
      }
    }
    if (want("allreduce")) {
      ar_o.push_back(ours_allreduce(g_iters / 2) * 1e6);
      ar_a.push_back(raw_allreduce(g_iters / 2) * 1e6);
    }
    if (want("team")) {
      const team_times o = ours_team(g_iters / 4);
      const team_times a = raw_team(g_iters / 4);
      for (int i = 0; i < team_ops; ++i) {
        tm_o[i].push_back(o.t[i] * 1e6);
        tm_a[i].push_back(a.t[i] * 1e6);
      }
    }
    if (want("clock")) {
      ck_o.push_back(ours_clock_advance(g_iters) * 1e6);
      ck_a.push_back(raw_barrier(g_iters) * 1e6);
    }
  }
  if (rank == 0) {
    auto line = [](const char* name, const std::vector<double>& o, const std::vector<double>& a) {
      if (o.empty()) return;
      std::printf("ratio %s %.3f (ours %.2f us, anchor %.2f us)\n", name, median(o) / median(a), median(o), median(a));
    };
    line("at_rtt_mpi", at_o, at_a);
    line("copy_4mib_mpi", cp_o, cp_a);
    for (int k = 0; k < 2; ++k) {
      if (lg_o[k].empty()) continue;
      const double gb = static_cast<double>(large_mib[k] << 20) / 1e9;
      const double o = median(lg_o[k]) / 1e6, a = median(lg_a[k]) / 1e6;
      std::printf("ratio at_%zumib_mpi %.3f (ours %.3f s = %.2f GB/s, anchor %.3f s = %.2f GB/s)\n", large_mib[k],
                  o / a, o, gb / o, a, gb / a);
    }
    line("allreduce_8kib_mpi", ar_o, ar_a);
    for (int i = 0; i < team_ops; ++i) {
      const std::string name = std::string("team_") + team_op_names[i] + "_8kib_mpi";
      line(name.c_str(), tm_o[i], tm_a[i]);
    }
    line(("clock_advance_np" + std::to_string(size) + "_mpi").c_str(), ck_o, ck_a);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
