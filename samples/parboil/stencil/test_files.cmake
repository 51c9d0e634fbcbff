# apgas_parboil_stencil with input files: the raw volume --write-input writes gives the generator's result; -o writes
# Parboil's output and --check accepts it, and fails on another result; a short or long volume, -i without the
# shape, and a broken reference stop the program with exit code 2 and a message naming the file. The volume is
# bit-identical in the OpenMP baseline (OMP) and, with MPIEXEC, on 1, 2 and 3 host places (slabs of one plane and
# more; partial tiles).
#   cmake -DPROG=<apgas_parboil_stencil> -DWORK_DIR=<scratch folder> [-DOMP=<parboil_stencil_omp>] [-DMPIEXEC=<mpiexec>]
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

set(shape 128 128 32 100)
expect("generated" 0 "check=ok" "${PROG}" --size small)
set(generated "${hash}")
expect("--write-input" 0 "" "${PROG}" --size small --write-input in.bin)
expect("from the file, -o" 0 "check=ok" "${PROG}" -i in.bin -o out.bin -- ${shape})
same("from the file" "${generated}")
expect("--check its own output" 0 "check=ok" "${PROG}" -i in.bin --check out.bin -- ${shape})
expect("one sweep, -o" 0 "check=ok" "${PROG}" -i in.bin -o out1.bin -- 128 128 32 1)
expect("--check another result" 1 "check=FAIL" "${PROG}" -i in.bin --check out1.bin -- ${shape})

execute_process(COMMAND head -c 1000 in.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short.bin")
execute_process(COMMAND head -c 1000 out.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short_out.bin")
execute_process(COMMAND sh -c "cat in.bin in.bin | head -c 2097160 > long.bin" WORKING_DIRECTORY "${WORK_DIR}")
expect("missing file" 2 "input file 'missing.bin': cannot open it" "${PROG}" -i missing.bin -- ${shape})
expect("short volume" 2
       "input file 'short.bin': at byte 0: expected 524288 x 4 bytes of the 128 x 128 x 32 volume \\(raw f32\\), but only 1000 bytes are left"
       "${PROG}" -i short.bin -- ${shape})
expect("long volume" 2 "input file 'long.bin': 8 bytes after the data, at byte 2097152" "${PROG}" -i long.bin -- ${shape})
expect("-i without the shape" 2 "-i needs the parameters: -- nx ny nz iterations" "${PROG}" -i in.bin)
expect("short reference" 2 "input file 'short_out.bin': at byte 4: expected 524288 x 4 bytes of the output volume"
       "${PROG}" -i in.bin --check short_out.bin -- ${shape})
expect("reference of another shape" 2 "input file 'out.bin': at byte 0: the count 524288 is not nx\\*ny\\*nz = 262144"
       "${PROG}" --check out.bin -- 128 128 16 100)

foreach(case "67 45 9 5" "130 67 12 6")
  string(REPLACE " " ";" args "${case}")
  expect("1 place, ${case}" 0 "check=ok" "${PROG}" -- ${args})
  set(one "${hash}")
  if(OMP)
    expect("OpenMP baseline, ${case}" 0 "check=ok" ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=3 "${OMP}" -- ${args})
    same("OpenMP baseline, ${case}" "${one}")
  endif()
  if(MPIEXEC)
    foreach(np 2 3)
      expect("${np} host places, ${case}" 0 "hosts=${np} .*check=ok" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi
             APGAS_NTHREADS=1 "${MPIEXEC}" --allow-run-as-root --oversubscribe -np ${np} "${PROG}" -- ${args})
      same("${np} host places, ${case}" "${one}")
    endforeach()
  endif()
endforeach()
