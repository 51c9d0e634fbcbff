# GPU places against CPU places: APGAS_GPUS=all and APGAS_GPUS=none must give bit-identical centroids and
# assignments (the kernel is compiled without fused multiply-add). Skipped ("SKIPPED: no GPU place") where the run
# has no GPU place.
#   cmake -DKMEANS=<apgas_kmeans> -P test_gpu_vs_cpu.cmake
set(args -n 200003 -k 64 -i 10 -s 3 -q --print-centroids)

function(run_case name)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARGN} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 600)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
    message(FATAL_ERROR "${name}: exit code ${rc}, expected 0 and check=ok\n${out}\n${err}")
  endif()
  string(REGEX MATCHALL "(centroids fnv1a=[0-9a-f]+|assignments fnv1a=[0-9a-f]+|\ncentroid [0-9]+ [^\n]*)" lines "${out}")
  set(result "${lines}" PARENT_SCOPE)
  set(output "${out}" PARENT_SCOPE)
endfunction()

run_case("GPU places" APGAS_GPUS=all ${KMEANS})
if(output MATCHES "gpus=0 ")
  string(REGEX MATCH "place 0: [^\n]*" why "${output}")
  message(STATUS "SKIPPED: no GPU place in this run (${why})")
  return()
endif()
set(gpu "${result}")
run_case("CPU places" APGAS_GPUS=none ${KMEANS})
if(NOT gpu STREQUAL result)
  message(FATAL_ERROR "GPU places and CPU places disagree:\nGPU:\n${gpu}\nCPU:\n${result}")
endif()
message(STATUS "GPU places and CPU places agree")
