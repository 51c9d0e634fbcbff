// Shut-down when the main activity fails: an exception raised at place 1 reaches the main activity's finish at
// place 0; every process's apgas::run must return 1 (none hangs). Each process checks its own code and exits 0
// only if it got 1, so mpirun succeeds only when all of them did.
#include <apgas/apgas.hpp>

#include <cstdio>
#include <stdexcept>

int main(int argc, char** argv) {
  const int rc = apgas::run(argc, argv, [] {
    apgas::async_at(apgas::place(1), [] { throw std::runtime_error("main fails at place 1"); });
  });
  std::printf("apgas::run returned %d\n", rc);
  return rc == 1 ? 0 : 3;
}
