# Runs a command that must FAIL (non-zero exit) with output matching REGEX:
#   cmake "-DCOMMAND=<cmd;args...>" "-DREGEX=<regex>" -P expect_failure.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
if(rc EQUAL 0)
  message(FATAL_ERROR "the command succeeded but must fail: ${COMMAND}\n${out}")
endif()
if(NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "the command failed (${rc}) but its output does not match '${REGEX}':\n${out}")
endif()
message(STATUS "failed as expected (${rc}), output matches '${REGEX}'")
