# The file round trip of a Parboil program (a ctest of cp, mri_q and mri_fhd; nothing in it is about one benchmark):
#   cmake -DPROGRAM=<exe> "-DARGS=<generated input's options>" -DDIR=<work folder> -DOUTPUT_CUT=<bytes>
#         [-DINPUT=<file name> -DINPUT_CUT=<bytes> "-DINPUT_BAD=<printf format of a bad file>"]
#         [-DMPIEXEC=<mpiexec>] -P files_test.cmake
#  1. INPUT given: PROGRAM ARGS --write-input DIR/INPUT, then PROGRAM -i DIR/INPUT -o DIR/out;
#     else PROGRAM ARGS -o DIR/out. check=ok, and the output file exists.
#  2. MPIEXEC given: the same on 2 host places (-o DIR/out2) gives the same bytes.
#  3. PROGRAM (the same input) --check DIR/out: check=ok against the file it wrote.
#  4. DIR/out cut to OUTPUT_CUT bytes: --check rejects it with exit code 2 and a message naming the file.
#  5. INPUT given: the input cut to INPUT_CUT bytes, and a file written by printf INPUT_BAD: -i rejects each with exit
#     code 2 and a message naming the file.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})

function(run expect_rc regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 300)
  if(NOT rc STREQUAL "${expect_rc}")
    message(FATAL_ERROR "exit code ${rc}, expected ${expect_rc}: ${ARGN}\n${out}")
  endif()
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "the output does not match '${regex}': ${ARGN}\n${out}")
  endif()
  message(STATUS "ok (exit code ${rc}, '${regex}'): ${ARGN}")
endfunction()

set(source ${ARGS})
if(INPUT)
  run(0 "" ${PROGRAM} ${ARGS} --write-input ${DIR}/${INPUT})
  set(source -i ${DIR}/${INPUT})
endif()
run(0 "check=ok" ${PROGRAM} ${source} -o ${DIR}/out)
if(NOT EXISTS ${DIR}/out)
  message(FATAL_ERROR "${PROGRAM} wrote no output file ${DIR}/out")
endif()

if(MPIEXEC)
  run(0 "hosts=2 .*check=ok" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
      ${MPIEXEC} --allow-run-as-root --oversubscribe -np 2 ${PROGRAM} ${source} -o ${DIR}/out2)
  file(SHA256 ${DIR}/out one)
  file(SHA256 ${DIR}/out2 two)
  if(NOT one STREQUAL two)
    message(FATAL_ERROR "1 and 2 host places wrote different outputs: ${DIR}/out, ${DIR}/out2")
  endif()
  message(STATUS "ok: 1 and 2 host places wrote the same bytes")
endif()

run(0 "check=ok" ${PROGRAM} ${source} --check ${DIR}/out)

execute_process(COMMAND head -c ${OUTPUT_CUT} ${DIR}/out OUTPUT_FILE ${DIR}/out_cut)
run(2 "'${DIR}/out_cut'" ${PROGRAM} ${source} --check ${DIR}/out_cut)

if(INPUT)
  execute_process(COMMAND head -c ${INPUT_CUT} ${DIR}/${INPUT} OUTPUT_FILE ${DIR}/in_cut)
  run(2 "input file '${DIR}/in_cut'" ${PROGRAM} -i ${DIR}/in_cut)
  execute_process(COMMAND printf "${INPUT_BAD}" OUTPUT_FILE ${DIR}/in_bad)
  run(2 "input file '${DIR}/in_bad'" ${PROGRAM} -i ${DIR}/in_bad)
endif()
