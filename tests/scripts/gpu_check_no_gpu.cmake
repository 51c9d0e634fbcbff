# scripts/gpu-check.sh on a machine without a GPU: it says so, exits 0, and runs nothing (nothing written in the build
# folder, no table written). Twice: no nvidia-smi at all, and an nvidia-smi that lists no GPU. Its options are checked
# all the same: a missing build folder is refused (exit 2) (ctest apgas.scripts.gpu_check_no_gpu).
#   cmake -DSCRIPT=<scripts/gpu-check.sh> -DWORK_DIR=<scratch> -P gpu_check_no_gpu.cmake
foreach(var SCRIPT WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "gpu_check_no_gpu.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR} ${WORK_DIR}/build)
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
  file(GLOB written ${WORK_DIR}/build/*)
  if(written OR EXISTS ${WORK_DIR}/table.md)
    message(FATAL_ERROR "gpu-check.sh with ${smi} wrote in the build folder or wrote a table: it must run nothing")
  endif()
  message(STATUS "gpu-check.sh with ${smi}: ${out}")
endforeach()
# A build folder that does not exist: a usage error, GPU or not.
execute_process(COMMAND ${CMAKE_COMMAND} -E env NVIDIA_SMI=${WORK_DIR}/no-such-nvidia-smi
                        bash ${SCRIPT} -b ${WORK_DIR}/no-such-build
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "no build folder")
  message(FATAL_ERROR "gpu-check.sh -b <missing folder>: exit code ${rc}, expected 2 and 'no build folder':\n${out}${err}")
endif()
