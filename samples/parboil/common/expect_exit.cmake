# Runs a command that must exit with code EXPECT_RC and print something matching REGEX (stdout or stderr):
#   cmake "-DCOMMAND=<cmd;args...>" -DEXPECT_RC=2 "-DREGEX=<regex>" ["-DFILES=<file;format;...>"] [-DMEMORY_KB=<n>]
#         -P expect_exit.cmake
# FILES: pairs of a file name and a printf format (octal escapes for bytes), each file written by printf first.
# MEMORY_KB: the command runs under `ulimit -v` of that many KiB (so that allocating by a header's count fails).
set(files "${FILES}")
while(files)
  list(POP_FRONT files name format)
  execute_process(COMMAND printf "${format}" OUTPUT_FILE ${name} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "printf could not write ${name}")
  endif()
endwhile()
set(command ${COMMAND})
if(MEMORY_KB)
  set(command sh -c "ulimit -v ${MEMORY_KB} && exec \"$@\"" sh ${COMMAND})
endif()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}: ${command}\n${out}")
endif()
if(NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "exit code ${rc} as expected, but the output does not match '${REGEX}':\n${out}")
endif()
message(STATUS "exit code ${rc}, output matches '${REGEX}'")
