// Prints how many places the run has: the launcher-detection tests start it outside any launcher, with the
// variables a batch script's own process sees (one place) or those of a process srun started (refused as local).
#include <apgas/apgas.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  return apgas::run(argc, argv, [] { std::printf("places=%zu\n", apgas::places().size()); });
}
