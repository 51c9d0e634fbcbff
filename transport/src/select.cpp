// APGAS_TRANSPORT: which backend; APGAS_TRANSPORT_SHIM: an optional test shim around it.
#include "transports.hpp"

#include <apgas/error.hpp>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

namespace apgas::transport {

std::string built_backends() {
  std::string s = "local";
#if APGAS_HAVE_MPI
  s += " mpi";
#endif
#if APGAS_HAVE_OFI
  s += " ofi";
#endif
  return s;
}

#if !APGAS_HAVE_MPI
std::unique_ptr<transport> make_mpi() { return nullptr; }
#endif
#if !APGAS_HAVE_OFI
std::unique_ptr<transport> make_ofi() { return nullptr; }
#endif
// The variables an MPI-style launcher (Open MPI's mpirun, MPICH/PMI, PMIx, Slurm's srun) sets in each process it
// starts. Not SLURM_NTASKS: a batch script's own process sees it too, and a program run there directly is one place.
bool launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

namespace {
std::atomic<void (*)(int) noexcept> g_abrupt_exit_hook{nullptr};
}  // namespace

void set_abrupt_exit_hook(void (*hook)(int) noexcept) noexcept { g_abrupt_exit_hook.store(hook); }

void before_abrupt_exit(int dead_peer) noexcept {
  if (auto* hook = g_abrupt_exit_hook.load()) hook(dead_peer);
}

namespace {
// How many processes the launcher started, where it says so (0: not said). Only variables set per launched process:
// not SLURM_NTASKS, which a batch script's own (single) process also sees; SLURM_STEP_NUM_TASKS is srun's.
long launched_processes() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (const char* s = std::getenv(v)) return std::strtol(s, nullptr, 10);
  }
  return 0;
}
}  // namespace

std::unique_ptr<transport> make_from_env() {
  const char* v = std::getenv("APGAS_TRANSPORT");
  std::string choice = v != nullptr ? v : "";
  if (v == nullptr) {  // set but empty is not a choice: it is rejected below, as apgas::config rejects it
    if (launched_by_mpi()) {
#if APGAS_HAVE_MPI
      choice = "mpi";
#elif APGAS_HAVE_OFI
      choice = "ofi";
#else
      choice = "local";
#endif
    } else {
      choice = "local";
    }
  }
  std::unique_ptr<transport> t;
  if (choice == "local") {
    // Each of N launched processes would be a one-host run of its own: N copies of the program, each its place 0.
    if (const long n = launched_processes(); n > 1) {
      throw config_error("APGAS_TRANSPORT=" + std::string(v != nullptr ? "local" : "(unset, so local)") +
                         ": the launcher started " + std::to_string(n) +
                         " processes, but the local transport joins none of them (each would run the program alone "
                         "as place 0); this build has: " + built_backends() +
#if APGAS_HAVE_MPI || APGAS_HAVE_OFI
                         " (set APGAS_TRANSPORT to one of the others, or leave it unset)");
#else
                         " (configure with -DAPGAS_WITH_MPI=ON or -DAPGAS_WITH_OFI=ON)");
#endif
    }
    t = make_local();
  } else if (choice == "mpi") {
    t = make_mpi();
  } else if (choice == "ofi") {
    t = make_ofi();
  } else {
    throw config_error("APGAS_TRANSPORT='" + choice + "' is not a transport (expected local, mpi or ofi; this build has: " +
                       built_backends() + ")");
  }
  if (!t) {
    throw config_error("APGAS_TRANSPORT='" + choice + "': this build of apgas has no " + choice +
                       " backend (it has: " + built_backends() + "; configure with -DAPGAS_WITH_" +
                       (choice == "mpi" ? std::string("MPI") : std::string("OFI")) + "=ON)");
  }
  const char* shim = std::getenv("APGAS_TRANSPORT_SHIM");
  if (shim != nullptr && *shim != '\0') {
    const std::string s = shim;
    const auto refuse = [&](const std::string& why) {
      throw config_error("APGAS_TRANSPORT_SHIM='" + s + "' " + why +
                         " (expected reorder, mute:<rank>, die_at_barrier:<rank>:<k>, fail_send:<rank>:<k>, "
                         "stuck_poll:<rank>:<k> or lose_peer:<rank>:<rank>, a rank 0.." +
                         std::to_string(t->size() - 1) + ", k 1..2147483647)");
    };
    // Digits only (no sign, no spaces), within int: the fields of a shim.
    const auto number = [&](std::string_view v) {
      long long n = 0;
      if (v.empty() || v.size() > 10) refuse("is not a shim");
      for (char c : v) {
        if (c < '0' || c > '9') refuse("is not a shim");
        n = n * 10 + (c - '0');
      }
      if (n > 2147483647) refuse("has a number out of range");
      return static_cast<int>(n);
    };
    const std::string_view v = s;
    if (s == "reorder") {
      t = make_reorder_shim(std::move(t));
    } else if (v.substr(0, 5) == "mute:") {
      const int rank = number(v.substr(5));
      if (rank >= t->size()) refuse("names no place of this run");
      t = make_mute_shim(std::move(t), rank, shim_fault::mute);
    } else if (v.substr(0, 15) == "die_at_barrier:" || v.substr(0, 10) == "fail_send:" ||
               v.substr(0, 11) == "stuck_poll:" || v.substr(0, 10) == "lose_peer:") {
      const shim_fault fault = v[0] == 'd'   ? shim_fault::die_at_barrier
                               : v[0] == 'f' ? shim_fault::fail_send
                               : v[0] == 'l' ? shim_fault::lose_peer
                                             : shim_fault::stuck_poll;
      const std::string_view rest = v.substr(v.find(':') + 1);
      const std::size_t colon = rest.find(':');
      if (colon == std::string_view::npos) refuse("is not a shim");
      const int rank = number(rest.substr(0, colon));
      const int k = number(rest.substr(colon + 1));
      if (rank >= t->size()) refuse("names no place of this run");
      if (fault == shim_fault::lose_peer ? (k >= t->size() || k == rank) : k < 1) refuse("has a number out of range");
      t = make_mute_shim(std::move(t), rank, fault, k);
    } else {
      refuse("is not a shim");
    }
  }
  return t;
}

}  // namespace apgas::transport
