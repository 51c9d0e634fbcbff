# Must-not-compile check, run by the ctest entries apgas_add_neg_test() registers:
#   cmake -DCOMPILER=<c++> -DINCLUDE=<dir>[:<dir>...] -DSOURCE=<file.cpp> -DREGEX=<regex> -P neg_compile.cmake
# Succeeds (exit 0) only if SOURCE fails to compile AND the compiler's diagnostics match REGEX; otherwise it stops
# with an error (exit 1) that says which of the two went wrong.
foreach(var COMPILER INCLUDE SOURCE REGEX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "neg_compile.cmake: -D${var}=... is required")
  endif()
endforeach()

string(REPLACE ":" ";" include_dirs "${INCLUDE}")
list(TRANSFORM include_dirs PREPEND "-I")
execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${include_dirs} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not: the misuse it shows is no longer rejected")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but its diagnostics do not match '${REGEX}':\n${out}${err}")
endif()
message(STATUS "${SOURCE}: rejected as expected (diagnostics match '${REGEX}')")
