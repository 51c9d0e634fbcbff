# Runs a command whose exit code says nothing (e.g. mpirun --enable-recovery, which returns 0 whatever its processes
# did) and checks its output: every REGEX_<n> (n = 1..6) must match, NOT_REGEX must not.
#   cmake "-DCOMMAND=<cmd;args...>" "-DREGEX_1=<regex>" ... ["-DNOT_REGEX=<regex>"] -P expect_output.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 150)
foreach(n 1 2 3 4 5 6)
  if(DEFINED REGEX_${n} AND NOT out MATCHES "${REGEX_${n}}")
    message(FATAL_ERROR "the output (exit ${rc}) does not match '${REGEX_${n}}':\n${out}")
  endif()
endforeach()
if(DEFINED NOT_REGEX AND out MATCHES "${NOT_REGEX}")
  message(FATAL_ERROR "the output (exit ${rc}) matches '${NOT_REGEX}' but must not:\n${out}")
endif()
message(STATUS "the output matches (exit ${rc})")
