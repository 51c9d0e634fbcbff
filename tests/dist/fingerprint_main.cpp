// Two programs built from this file (APGAS_FINGERPRINT_VARIANT 1 and 2) register different closures. Started
// together (mpirun -np 1 a : -np 1 b), both must refuse to run: "runs a different program".
#include <apgas/apgas.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  return apgas::run(argc, argv, [] {
#if APGAS_FINGERPRINT_VARIANT == 1
    apgas::at(apgas::place(1), [] { std::puts("variant 1"); });
#else
    apgas::at(apgas::place(1), [](int x) { std::printf("variant 2 %d\n", x); }, 2);
#endif
  });
}
