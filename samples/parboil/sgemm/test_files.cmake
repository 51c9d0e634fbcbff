# apgas_parboil_sgemm with input files: the files --write-input writes give the generator's C (also with B^T passed
# twice, as Parboil's medium set does); -o writes C and --check accepts it, and fails on another C; broken matrices
# (missing, short, a word for a number, too many numbers, B^T not matching A) and a broken reference stop the program
# with exit code 2 and a message naming the file. C is bit-identical in the OpenMP baseline (OMP) and, with MPIEXEC,
# on 1, 2 and 3 host places.
#   cmake -DPROG=<apgas_parboil_sgemm> -DWORK_DIR=<scratch folder> [-DOMP=<parboil_sgemm_omp>] [-DMPIEXEC=<mpiexec>]
#         -P test_files.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 300)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
endfunction()

# expect(<what> <exit code> <regex> <command...>); sets `hash` to the printed result hash
function(expect what code regex)
  run(${ARGN})
  if(NOT rc STREQUAL "${code}" OR NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${what}: exit code ${rc} (expected ${code}), output does not match '${regex}' or does:\n${ARGN}\n${out}")
  endif()
  string(REGEX MATCH "result fnv1a=[0-9a-f]+" h "${out}")
  set(hash "${h}" PARENT_SCOPE)
  message(STATUS "${what}: exit code ${rc} ${h}")
endfunction()

function(same what expected)
  if(NOT hash STREQUAL expected)
    message(FATAL_ERROR "${what}: '${hash}', expected '${expected}'")
  endif()
endfunction()

expect("generated" 0 "check=ok" "${PROG}" --size small)
set(generated "${hash}")
expect("--write-input" 0 "" "${PROG}" --size small --write-input A.txt,B.txt,Bt.txt)
expect("from files, -o" 0 "check=ok" "${PROG}" -i A.txt,B.txt,Bt.txt -o C.txt)
same("from files" "${generated}")
expect("B^T given twice" 0 "check=ok" "${PROG}" -i A.txt,Bt.txt,Bt.txt)
same("B^T given twice" "${generated}")
expect("--check its own output" 0 "check=ok" "${PROG}" -i A.txt,B.txt,Bt.txt --check C.txt)
expect("another shape's input" 0 "" "${PROG}" --write-input A8.txt,B8.txt,Bt8.txt -- 128 16 8)
expect("--check another C" 1 "check=FAIL" "${PROG}" -i A8.txt,B8.txt,Bt8.txt --check C.txt)

execute_process(COMMAND head -c 300 A.txt WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short.txt")
execute_process(COMMAND head -c 300 C.txt WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short_C.txt")
file(WRITE "${WORK_DIR}/word.txt" "2 2\n1.5 2\nx 4\n")
file(READ "${WORK_DIR}/Bt.txt" bt)
file(WRITE "${WORK_DIR}/long.txt" "${bt} 7\n")
expect("missing file" 2 "input file 'missing.txt': cannot open it" "${PROG}" -i missing.txt,B.txt,Bt.txt)
expect("short matrix" 2 "input file 'short.txt': line 1: expected element [0-9]+ of 12288, found the end of the file"
       "${PROG}" -i short.txt,B.txt,Bt.txt)
expect("a word for a number" 2 "input file 'word.txt': line 3: expected element 3 of 4, found 'x'"
       "${PROG}" -i word.txt,B.txt,Bt.txt)
expect("too many numbers" 2 "input file 'long.txt': line [0-9]+: more than the 15360 elements the header announces"
       "${PROG}" -i A.txt,B.txt,long.txt)
expect("B^T not matching A" 2 "input file 'Bt8.txt': B\\^T is 16 x 8, but A \\('A.txt'\\) has k=96 columns"
       "${PROG}" -i A.txt,B.txt,Bt8.txt)
expect("short reference" 2 "input file 'short_C.txt': line 1: expected element [0-9]+ of 20480"
       "${PROG}" -i A.txt,B.txt,Bt.txt --check short_C.txt)
expect("two files" 2 "-i: expected 3 files \\(A, B and B\\^T\\), got 2" "${PROG}" -i A.txt,Bt.txt)

expect("1 place, split shape" 0 "check=ok" "${PROG}" -- 384 48 40)
set(one "${hash}")
if(OMP)
  expect("OpenMP baseline" 0 "check=ok" ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=3 "${OMP}" -- 384 48 40)
  same("OpenMP baseline" "${one}")
endif()
if(MPIEXEC)
  foreach(np 2 3)
    expect("${np} host places" 0 "hosts=${np} .*check=ok" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
           "${MPIEXEC}" --allow-run-as-root --oversubscribe -np ${np} "${PROG}" -- 384 48 40)
    same("${np} host places" "${one}")
  endforeach()
endif()
