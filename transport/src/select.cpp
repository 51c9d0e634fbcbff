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
#if !APGAS_HAVE_MPI
bool launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}
#endif

std::unique_ptr<transport> make_from_env() {
  const char* v = std::getenv("APGAS_TRANSPORT");
  std::string choice = v != nullptr ? v : "";
  if (choice.empty()) {
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
    if (std::string(shim) != "reorder") {
      throw config_error(std::string("APGAS_TRANSPORT_SHIM='") + shim + "' is not a shim (expected reorder)");
    }
    t = make_reorder_shim(std::move(t));
  }
  return t;
}

}  // namespace apgas::transport
