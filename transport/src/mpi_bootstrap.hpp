#pragma once
// Shared by the backends that bootstrap through MPI (mpi, ofi). Private to transport/.
#include <apgas/error.hpp>

#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

namespace apgas::transport {

/// The first collective of every MPI-bootstrapped backend, on MPI_COMM_WORLD: every process says which transport it
/// chose, so a run whose processes chose different ones (APGAS_TRANSPORT) is refused as such. It must come before
/// any collective of a backend's own (those differ between backends and would not match).
inline void check_same_transport(const char* name) {
  constexpr int width = 16;
  char mine[width] = {};
  std::strncpy(mine, name, width - 1);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(static_cast<std::size_t>(width) * static_cast<std::size_t>(size));
  if (MPI_Allgather(mine, width, MPI_CHAR, all.data(), width, MPI_CHAR, MPI_COMM_WORLD) != MPI_SUCCESS) {
    throw transport_error("apgas transport " + std::string(name) + ": the start-up MPI_Allgather failed");
  }
  for (int p = 0; p < size; ++p) {
    const char* theirs = all.data() + static_cast<std::size_t>(p) * width;
    if (std::strncmp(theirs, mine, width) != 0) {
      throw transport_error("apgas: place " + std::to_string(p) + " uses the " + std::string(theirs, strnlen(theirs, width)) +
                            " transport, place " + std::to_string(rank) + " the " + name +
                            " transport: every process of a run must choose the same one (APGAS_TRANSPORT)");
    }
  }
}

}  // namespace apgas::transport
