#!/bin/sh
# Runs a program and then says how it ended, with its rank: under mpirun --enable-recovery (whose own exit code is 0
# whatever its processes did) the tests read each process's exit code from this line.
"$@"
echo "exit_code.sh: rank ${OMPI_COMM_WORLD_RANK:-?} exited with $?"
