// Prints how many places the run has: the launcher-detection tests start it outside any launcher, with the
// variables a batch script's own process sees (one place) or those of a process srun started (refused as local).
// With "raise N" an activity raises signal N: the process must die by it (as a Ctrl-C or a kill would end it), not
// by a handler some library installed.
#include <apgas/apgas.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const int sig = argc > 2 && std::strcmp(argv[1], "raise") == 0 ? std::atoi(argv[2]) : 0;
  return apgas::run(argc, argv, [sig] {
    if (sig != 0) apgas::finish([sig] { apgas::async([sig] { std::raise(sig); }); });
    std::printf("places=%zu\n", apgas::places().size());
  });
}
