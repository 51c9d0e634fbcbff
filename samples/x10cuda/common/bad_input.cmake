# A malformed input must be rejected with exit code 2 and a message (x10cuda_bad_input() in ../CMakeLists.txt):
#   cmake -DPROGRAM=<exe> "-DWRITE=<args>" "-DTRUNCATE=<file;bytes>" | "-DTEXT=<file;text>" "-DRUN=<args>"
#         "-DREGEX=<regex>" -DWORK_DIR=<folder> -P bad_input.cmake
# In WORK_DIR: PROGRAM WRITE (writes good input files), then the file cut to its first bytes (or written with text),
# then PROGRAM RUN must exit with code 2 and print something matching REGEX.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
if(WRITE)
  execute_process(COMMAND ${PROGRAM} ${WRITE} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "writing the input failed (exit code ${rc}): ${PROGRAM} ${WRITE}\n${out}")
  endif()
endif()
if(TRUNCATE)
  list(GET TRUNCATE 0 file)
  list(GET TRUNCATE 1 bytes)
  execute_process(COMMAND head -c ${bytes} ${file} OUTPUT_FILE ${file}.cut WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "head -c ${bytes} ${file} failed")
  endif()
  file(RENAME ${WORK_DIR}/${file}.cut ${WORK_DIR}/${file})
endif()
if(TEXT)
  list(GET TEXT 0 file)
  list(SUBLIST TEXT 1 -1 text)
  list(JOIN text ";" text)
  file(WRITE ${WORK_DIR}/${file} "${text}")
endif()
execute_process(COMMAND ${PROGRAM} ${RUN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out TIMEOUT 300)
if(NOT rc STREQUAL "2")
  message(FATAL_ERROR "exit code ${rc}, expected 2: ${PROGRAM} ${RUN}\n${out}")
endif()
if(NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "exit code 2 as expected, but the output does not match '${REGEX}':\n${out}")
endif()
message(STATUS "exit code 2, output matches '${REGEX}': ${out}")
