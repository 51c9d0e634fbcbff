// A program that initialises MPI itself and then runs apgas over it (APGAS_TRANSPORT=mpi): apgas works on its own
// duplicate of MPI_COMM_WORLD and must leave the application's error handler of MPI_COMM_WORLD as it was (it set
// MPI_ERRORS_RETURN there for good, so the program's own MPI errors no longer stopped it).
#include <apgas/apgas.hpp>

#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int rc = apgas::run(argc, argv, [] {
    const int sum = apgas::at(apgas::place(apgas::num_hosts() - 1), [] { return apgas::here().id(); });
    std::printf("app_mpi: the run reached place %d\n", sum);
  });
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
  const bool fatal = h == MPI_ERRORS_ARE_FATAL;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::printf("app_mpi: rank %d: run %d, MPI_COMM_WORLD's error handler %s\n", rank, rc,
              fatal ? "is still MPI_ERRORS_ARE_FATAL" : "was changed");
  if (h != MPI_ERRHANDLER_NULL && !fatal) MPI_Errhandler_free(&h);
  MPI_Finalize();
  return rc == 0 && fatal ? 0 : 1;
}
