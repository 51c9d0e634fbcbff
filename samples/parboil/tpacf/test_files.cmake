# tpacf's point files: the generated input written with --write-input and read back with -i gives check=ok and the
# same output (-o) as the generated one, --check against that output passes, and broken files stop the program with
# exit code 2 and a message naming the file and the line; with MPIEXEC, 2 and 3 host places give the same output.
#   cmake [-DMPIEXEC=<mpiexec>] -DPROGRAM=<apgas_parboil_tpacf or parboil_tpacf_omp>
#         -DWORK_DIR=<scratch folder> -P test_files.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run out_rc out_text)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 200)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${out}" PARENT_SCOPE)
endfunction()
function(expect_ok what)
  run(rc out ${ARGN})
  if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
    message(FATAL_ERROR "${what}: exit code ${rc}, expected 0 and check=ok: ${ARGN}\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()
function(expect_error what regex)
  run(rc out ${ARGN})
  if(NOT rc EQUAL 2 OR NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${what}: exit code ${rc}, expected 2 and a message matching '${regex}': ${ARGN}\n${out}")
  endif()
  message(STATUS "${what}: exit code 2, '${regex}'")
endfunction()

# Small: 300 points, 3 random sets.
set(size --size small -- -n 3 -p 300)
run(rc out "${PROGRAM}" --write-input D,R1,R2,R3 ${size})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--write-input failed (${rc}):\n${out}")
endif()
expect_ok("generated, -o" "${PROGRAM}" -q -o generated.out ${size})
expect_ok("read back, -o" "${PROGRAM}" -q -i D,R1,R2,R3 -o read.out -- -n 3 -p 300)
file(READ "${WORK_DIR}/generated.out" a)
file(READ "${WORK_DIR}/read.out" b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "the files read back gave another output than the generated input")
endif()
string(REGEX MATCHALL "\n" lines "${a}")
list(LENGTH lines n)
if(NOT n EQUAL 60)
  message(FATAL_ERROR "the output has ${n} lines, expected Parboil's 60")
endif()
expect_ok("--check against its own output" "${PROGRAM}" -q -i D,R1,R2,R3 --check read.out)
if(MPIEXEC)  # the same output on 2 and 3 host places
  foreach(np 2 3)
    expect_ok("${np} host places" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1 "${MPIEXEC}"
              --allow-run-as-root --oversubscribe -np ${np} "${PROGRAM}" -q -i D,R1,R2,R3 -o np${np}.out -- -n 3 -p 300)
    file(SHA256 "${WORK_DIR}/read.out" a)
    file(SHA256 "${WORK_DIR}/np${np}.out" b)
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "${np} host places gave another output than one")
    endif()
  endforeach()
endif()
expect_ok("fewer points than the files hold" "${PROGRAM}" -q -i D,R1,R2,R3 -- -p 100)

# Broken files.
execute_process(COMMAND head -n 150 R2 WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short")
expect_error("a file with fewer points" "input file 'short': line 151: expected point 151 of 300"
             "${PROGRAM}" -i D,R1,short,R3)
execute_process(COMMAND head -c 1000 R1 WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/cut")
expect_error("a file cut in a line" "input file 'cut': line [0-9]+: expected (point|a declination)"
             "${PROGRAM}" -i D,cut,R2,R3)
execute_process(COMMAND printf "1.5 2.5\\n3.5 north\\n" OUTPUT_FILE "${WORK_DIR}/text")
expect_error("a word for a number" "input file 'text': line 2: expected a declination in degrees, found 'north'"
             "${PROGRAM}" -i text,R1)
execute_process(COMMAND printf "1.5 2.5\\n3.5 95\\n" OUTPUT_FILE "${WORK_DIR}/pole")
expect_error("a declination past the pole" "input file 'pole': line 2: declination 95.0+ is outside -90..90"
             "${PROGRAM}" -i pole,R1 -- -p 2)
expect_error("-n against the files" "-n 2: but -i names 3 random files" "${PROGRAM}" -i D,R1,R2,R3 -- -n 2)
expect_error("a bad output file" "output file '.*nowhere/out': cannot create it"
             "${PROGRAM}" -q -i D,R1 -o "${WORK_DIR}/nowhere/out" -- -p 20)
