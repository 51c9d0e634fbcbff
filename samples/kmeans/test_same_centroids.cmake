# The same input gives bit-identical centroids and assignments on 1, 2 and 3 host places (mpirun), with 1 or 2
# workers per place, and in the OpenMP baseline: the fixed-point centroid step makes the sums independent of the
# partition; and in kmeans_native_cuda where a GPU exists. Compares the printed centroids (round-trip precision) and
# the hashes of centroids and assignments.
#   cmake -DKMEANS=<apgas_kmeans> [-DOMP=<kmeans_omp>] [-DNATIVE=<kmeans_native_cuda>] [-DMPIEXEC=<mpiexec>]
#         -P test_same_centroids.cmake
set(args -n 30011 -k 37 -i 12 -s 5 -q --print-centroids)

function(run_case name)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARGN} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 600)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
    message(FATAL_ERROR "${name}: exit code ${rc}, expected 0 and check=ok\n${out}\n${err}")
  endif()
  # Keep the result lines only, without the program name.
  string(REGEX MATCHALL "(centroids fnv1a=[0-9a-f]+|assignments fnv1a=[0-9a-f]+|\ncentroid [0-9]+ [^\n]*)" lines "${out}")
  list(LENGTH lines count)
  if(count LESS 39)
    message(FATAL_ERROR "${name}: expected the centroids and both hashes, got:\n${out}")
  endif()
  set(result "${lines}" PARENT_SCOPE)
  string(REGEX MATCH "centroids fnv1a=[0-9a-f]+" h "${out}")
  message(STATUS "${name}: ${h}")
endfunction()

function(same_as_first name)
  run_case("${name}" ${ARGN})
  if(NOT result STREQUAL expected)
    message(FATAL_ERROR "${name}: other centroids or assignments than on 1 place:\n${result}\nexpected:\n${expected}")
  endif()
endfunction()

run_case("1 place, 2 workers" APGAS_NTHREADS=2 ${KMEANS})
set(expected "${result}")
same_as_first("1 place, 1 worker" APGAS_NTHREADS=1 ${KMEANS})
if(MPIEXEC)
  foreach(np 2 3)
    same_as_first("${np} places" APGAS_TRANSPORT=mpi APGAS_NTHREADS=1 ${MPIEXEC} --allow-run-as-root --oversubscribe
                  -np ${np} ${KMEANS})
  endforeach()
  same_as_first("2 places, 2 workers each" APGAS_TRANSPORT=mpi APGAS_NTHREADS=2 ${MPIEXEC} --allow-run-as-root
                --oversubscribe -np 2 ${KMEANS})
endif()
if(OMP)
  same_as_first("OpenMP, 3 threads" OMP_NUM_THREADS=3 ${OMP})
endif()
if(NATIVE)
  execute_process(COMMAND ${NATIVE} -n 10 -k 1 -i 1 -q RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if("${out}${err}" MATCHES "no CUDA GPU")
    message(STATUS "kmeans_native_cuda: not compared, no CUDA GPU here")
  else()
    same_as_first("CUDA + MPI baseline" OMP_NUM_THREADS=2 ${NATIVE})
  endif()
endif()
message(STATUS "the same centroids and assignments everywhere")
