// apgas_bench_startup: start-up plus shut-down of a run over N host places, against an MPI program that only
// initialises MPI, meets at a barrier and finalises — each launched by mpirun as a whole job, wall time from the
// launch to the end of the job, best of --repeats, the two alternating.
//   apgas_bench_startup [--np 4,8,16] [--repeats 3] [--threads 1] [--transport mpi|ofi]
// Prints one line per N: `ratio startup_np<N>_mpi <ours/anchor> (ours <s> s, anchor <s> s)`. With --transport ofi
// the anchor also initialises libfabric and asks it for a provider (fi_getinfo, as our ofi transport does: its first
// call initialises every provider libfabric has, 0.1-0.15 s of CPU per process on a Debian host) and the line is
// `ratio startup_ofi_np<N>_mpi_fi`.
// Ours is a whole apgas program: apgas::run with a main activity that does nothing (as `apgas_fib -n 1`), with
// --threads workers per place (APGAS_NTHREADS). Both jobs pay mpirun's own start and the processes' loading alike.
// The child modes (--child-apgas, --child-mpi) are this program started by mpirun.
#include <apgas/apgas.hpp>

#include <mpi.h>
#ifndef APGAS_BENCH_OFI
#define APGAS_BENCH_OFI 0
#endif
#if APGAS_BENCH_OFI
#include <rdma/fabric.h>
#endif
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

double run_job(const std::vector<std::string>& args, const std::vector<std::string>& env_extra) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const bool overridden = std::any_of(env_extra.begin(), env_extra.end(), [&](const std::string& x) {
      return kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    });
    if (!overridden) env_store.push_back(kv);
  }
  for (const auto& x : env_extra) env_store.push_back(x);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) {
    std::fprintf(stderr, "apgas_bench_startup: cannot start %s: %s\n", argv[0], std::strerror(errno));
    std::exit(2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "apgas_bench_startup: the job %s ... %s failed (status %d)\n", args[0].c_str(),
                 args.back().c_str(), status);
    std::exit(1);
  }
  return s;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    const long n = std::strtol(p, &end, 10);
    if (end == p || n < 1 || n > 1024) {
      std::fprintf(stderr, "apgas_bench_startup: --np %s: expected a list of place counts in [1, 1024]\n", s);
      std::exit(2);
    }
    v.push_back(static_cast<int>(n));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') {
      std::fprintf(stderr, "apgas_bench_startup: --np %s: expected a comma-separated list\n", s);
      std::exit(2);
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child-mpi") == 0) {
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
  }
#if APGAS_BENCH_OFI
  if (argc > 1 && std::strcmp(argv[1], "--child-mpi-fi") == 0) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    fi_info* info = nullptr;
    const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc == 0) fi_freeinfo(info);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rc == 0 ? 0 : 1;
  }
#endif
  if (argc > 1 && std::strcmp(argv[1], "--child-apgas") == 0) {
    return apgas::run(argc, argv, [] {});
  }
  std::vector<int> nps{4, 8, 16};
  int repeats = 3;
  std::string threads = "1";
  std::string transport = "mpi";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--np" && i + 1 < argc) {
      nps = parse_list(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads = argv[++i];
    } else if (a == "--transport" && i + 1 < argc) {
      transport = argv[++i];
      if (transport != "mpi" && (transport != "ofi" || !APGAS_BENCH_OFI)) {
        std::fprintf(stderr, "apgas_bench_startup: --transport %s: this build has mpi%s\n", transport.c_str(),
                     APGAS_BENCH_OFI ? " and ofi" : "");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: apgas_bench_startup [--np 4,8,16] [--repeats 3] [--threads 1] [--transport mpi|ofi]\n");
      return 2;
    }
  }
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::fprintf(stderr, "apgas_bench_startup: cannot find its own executable\n");
    return 2;
  }
  self[len] = '\0';
  const std::vector<std::string> env{"APGAS_TRANSPORT=" + transport, "APGAS_NTHREADS=" + threads};
  for (const int np : nps) {
    const auto job = [&](const char* mode) {
      return std::vector<std::string>{APGAS_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np",
                                      std::to_string(np), self, mode};
    };
    double ours = 1e30, anchor = 1e30;
    for (int r = 0; r < repeats; ++r) {
      anchor = std::min(anchor, run_job(job(transport == "ofi" ? "--child-mpi-fi" : "--child-mpi"), env));
      ours = std::min(ours, run_job(job("--child-apgas"), env));
    }
    std::printf("ratio startup_%snp%d_mpi%s %.2f (ours %.3f s, anchor %.3f s; %s workers per place, best of %d)\n",
                transport == "ofi" ? "ofi_" : "", np, transport == "ofi" ? "_fi" : "", ours / anchor, ours, anchor,
                threads.c_str(), repeats);
    std::fflush(stdout);
  }
  return 0;
}
