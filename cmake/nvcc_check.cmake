# What nvcc makes of one file that sends kernels, with the flags apgas_add_cuda_sources gives (tests/cuda_compile):
#   cmake -DNVCC=<nvcc> -DINCLUDE=<dir>[:<dir>...] -DSOURCE=<file.cu> -DMODE=<fail|compile|ptx> [-DREGEX=<re>]
#         [-DREJECT=<re>] -DWORK_DIR=<scratch> -P nvcc_check.cmake
#   fail:    the file must NOT compile, and the diagnostics must match REGEX (the static_assert it must show);
#   compile: the file must compile;
#   ptx:     its PTX (sm_90) must match REGEX, and must not match REJECT when given.
foreach(var NVCC INCLUDE SOURCE MODE WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "nvcc_check.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE ":" ";" include_dirs "${INCLUDE}")
list(TRANSFORM include_dirs PREPEND "-I")
set(flags -std=c++20 --extended-lambda --expt-relaxed-constexpr -arch=sm_90 ${include_dirs})
file(MAKE_DIRECTORY ${WORK_DIR})

if(MODE STREQUAL "ptx")
  set(out ${WORK_DIR}/out.ptx)
  execute_process(COMMAND ${NVCC} ${flags} --ptx ${SOURCE} -o ${out} RESULT_VARIABLE rc OUTPUT_VARIABLE log
                  ERROR_VARIABLE log)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} did not compile to PTX (${rc}):\n${log}")
  endif()
  file(READ ${out} ptx)
  if(NOT ptx MATCHES "${REGEX}")
    message(FATAL_ERROR "the PTX of ${SOURCE} does not match '${REGEX}' (${out})")
  endif()
  if(DEFINED REJECT AND NOT REJECT STREQUAL "" AND ptx MATCHES "${REJECT}")
    message(FATAL_ERROR "the PTX of ${SOURCE} matches '${REJECT}', which it must not (${out}):\n${CMAKE_MATCH_0}")
  endif()
  message(STATUS "${SOURCE}: the PTX matches '${REGEX}'")
  return()
endif()

execute_process(COMMAND ${NVCC} ${flags} -c ${SOURCE} -o ${WORK_DIR}/out.o RESULT_VARIABLE rc OUTPUT_VARIABLE log
                ERROR_VARIABLE log)
if(MODE STREQUAL "fail")
  if(rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} compiled, but it must not: the misuse it shows is no longer rejected")
  endif()
  if(NOT log MATCHES "${REGEX}")
    message(FATAL_ERROR "${SOURCE} failed to compile, but its diagnostics do not match '${REGEX}':\n${log}")
  endif()
  message(STATUS "${SOURCE}: rejected as expected (diagnostics match '${REGEX}')")
elseif(MODE STREQUAL "compile")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} did not compile (${rc}):\n${log}")
  endif()
  message(STATUS "${SOURCE}: compiled")
else()
  message(FATAL_ERROR "nvcc_check.cmake: MODE='${MODE}': expected fail, compile or ptx")
endif()
