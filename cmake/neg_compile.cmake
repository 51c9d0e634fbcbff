# cmake -DCOMPILER=... -DINCLUDE=... -DSOURCE=... -DREGEX=... -P neg_compile.cmake
# Succeeds only if SOURCE fails to compile and the diagnostics match REGEX.
execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but not with a message matching '${REGEX}':\n${err}")
endif()
message(STATUS "${SOURCE}: rejected as expected")
