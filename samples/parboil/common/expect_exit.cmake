# Runs a command that must exit with code EXPECT_RC and print something matching REGEX (stdout or stderr):
#   cmake "-DCOMMAND=<cmd;args...>" -DEXPECT_RC=2 "-DREGEX=<regex>" -P expect_exit.cmake
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}: ${COMMAND}\n${out}")
endif()
if(NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "exit code ${rc} as expected, but the output does not match '${REGEX}':\n${out}")
endif()
message(STATUS "exit code ${rc}, output matches '${REGEX}'")
