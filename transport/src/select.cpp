// APGAS_TRANSPORT: which backend; APGAS_TRANSPORT_SHIM: an optional test shim around it.
#include "transports.hpp"

#include <apgas/error.hpp>

#include <cstdlib>
#include <string>

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
                         " (set APGAS_TRANSPORT=mpi or ofi, or configure with -DAPGAS_WITH_MPI=ON)");
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
    char* end = nullptr;
    const long muted = s.rfind("mute:", 0) == 0 ? std::strtol(s.c_str() + 5, &end, 10) : -1;
    char* end2 = nullptr;
    long dying = -1, at = -1;
    if (s.rfind("die_at_barrier:", 0) == 0) {
      dying = std::strtol(s.c_str() + 15, &end2, 10);
      if (end2 != s.c_str() + 15 && *end2 == ':') at = std::strtol(end2 + 1, &end2, 10);
    }
    if (s == "reorder") {
      t = make_reorder_shim(std::move(t));
    } else if (muted >= 0 && end != s.c_str() + 5 && *end == '\0') {
      t = make_mute_shim(std::move(t), static_cast<int>(muted));
    } else if (dying >= 0 && at > 0 && *end2 == '\0') {
      t = make_mute_shim(std::move(t), static_cast<int>(dying), static_cast<int>(at));
    } else {
      throw config_error("APGAS_TRANSPORT_SHIM='" + s +
                         "' is not a shim (expected reorder, mute:<rank> or die_at_barrier:<rank>:<k>)");
    }
  }
  return t;
}

}  // namespace apgas::transport
