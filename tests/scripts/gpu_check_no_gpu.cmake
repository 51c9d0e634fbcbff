# scripts/gpu-check.sh on a machine without a GPU: it says so, exits 0, and runs nothing (no build folder made, no
# table written). Twice: no nvidia-smi at all, and an nvidia-smi that lists no GPU (ctest apgas.scripts.gpu_check_no_gpu).
#   cmake -DSCRIPT=<scripts/gpu-check.sh> -DWORK_DIR=<scratch> -P gpu_check_no_gpu.cmake
foreach(var SCRIPT WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "gpu_check_no_gpu.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/empty-nvidia-smi "#!/bin/sh\nexit 0\n")
file(CHMOD ${WORK_DIR}/empty-nvidia-smi PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
foreach(smi ${WORK_DIR}/no-such-nvidia-smi ${WORK_DIR}/empty-nvidia-smi)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env NVIDIA_SMI=${smi}
                          bash ${SCRIPT} -b ${WORK_DIR}/build -o ${WORK_DIR}/table.md
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpu-check.sh with ${smi}: exit code ${rc}, expected 0:\n${out}${err}")
  endif()
  if(NOT out MATCHES "no GPU on this machine")
    message(FATAL_ERROR "gpu-check.sh with ${smi} did not say that there is no GPU:\n${out}${err}")
  endif()
  if(EXISTS ${WORK_DIR}/build OR EXISTS ${WORK_DIR}/table.md)
    message(FATAL_ERROR "gpu-check.sh with ${smi} made a build folder or wrote a table: it must run nothing")
  endif()
  message(STATUS "gpu-check.sh with ${smi}: ${out}")
endforeach()
