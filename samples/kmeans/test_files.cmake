# Points files: a file written by kmeans_points gives the same centroids as the generator it came from; broken files
# (truncated, shorter than the header, bad magic, other version, n=0, fewer points than clusters, -d mismatch, a
# non-finite coordinate) stop apgas_kmeans with exit code 2 and a message naming the file and the problem.
# With MPIEXEC, the non-finite coordinate is also found by host place 1 of 2: every process stops, exit code 2.
#   cmake -DKMEANS=<apgas_kmeans> -DPOINTS=<kmeans_points> -DWORK_DIR=<scratch dir> [-DMPIEXEC=<mpiexec>]
#         -P test_files.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run out_rc out_text)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 300)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${out}" PARENT_SCOPE)
endfunction()

function(expect_ok what)
  run(rc out ${ARGN})
  if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
    message(FATAL_ERROR "${what}: exit code ${rc}, expected 0 and check=ok: ${ARGN}\n${out}")
  endif()
  string(REGEX MATCH "centroids fnv1a=[0-9a-f]+" h "${out}")
  set(hash "${h}" PARENT_SCOPE)
  message(STATUS "${what}: ok (${h})")
endfunction()

function(expect_input_error what regex)
  run(rc out ${ARGN})
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${what}: exit code ${rc}, expected 2: ${ARGN}\n${out}")
  endif()
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${what}: exit code 2, but the output does not match '${regex}':\n${out}")
  endif()
  message(STATUS "${what}: exit code 2, '${regex}'")
endfunction()

# Binary files from octal escapes: the header is "KMPOINTS", u32 version, u32 d, u64 n (little-endian).
function(write_bytes name escapes)
  execute_process(COMMAND printf "${escapes}" OUTPUT_FILE "${WORK_DIR}/${name}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "printf could not write ${name}")
  endif()
endfunction()

run(rc out "${POINTS}" -n 3000 -d 4 -s 7 -o good.bin)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kmeans_points failed (${rc}):\n${out}")
endif()
expect_ok("points file" "${KMEANS}" -p good.bin -k 10 -i 4 -q)
set(from_file "${hash}")
expect_ok("generated points" "${KMEANS}" -n 3000 -s 7 -k 10 -i 4 -q)
if(NOT hash STREQUAL from_file)
  message(FATAL_ERROR "the points file gave '${from_file}', the generator '${hash}'")
endif()

execute_process(COMMAND head -c 1000 good.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/truncated.bin")
execute_process(COMMAND head -c 10 good.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/tiny.bin")
file(WRITE "${WORK_DIR}/text.bin" "this is not a points file, but it is long enough for a header\n")
write_bytes(version.bin "KMPOINTS\\002\\000\\000\\000\\004\\000\\000\\000\\001\\000\\000\\000\\000\\000\\000\\000")
write_bytes(empty.bin "KMPOINTS\\001\\000\\000\\000\\004\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000")
# n=2, d=1: 0.5 and NaN
write_bytes(nan.bin "KMPOINTS\\001\\000\\000\\000\\001\\000\\000\\000\\002\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\077\\000\\000\\300\\177")
run(rc out "${POINTS}" -n 5 -o five.bin)

expect_input_error("missing file" "points file 'missing.bin': cannot open it: No such file" "${KMEANS}" -p missing.bin)
expect_input_error("truncated file" "points file 'truncated.bin': 1000 bytes, but the header \\(n=3000, d=4\\) needs exactly 48024 \\(the file is truncated\\)"
                   "${KMEANS}" -p truncated.bin -k 10)
expect_input_error("shorter than the header" "points file 'tiny.bin': 10 bytes, shorter than the 24-byte header"
                   "${KMEANS}" -p tiny.bin)
expect_input_error("bad magic" "points file 'text.bin': bad magic" "${KMEANS}" -p text.bin)
expect_input_error("other version" "points file 'version.bin': version 2" "${KMEANS}" -p version.bin)
expect_input_error("n=0" "points file 'empty.bin': n=0, the file holds no points" "${KMEANS}" -p empty.bin)
expect_input_error("fewer points than clusters" "points file 'five.bin': n=5 points, fewer than k=10 clusters"
                   "${KMEANS}" -p five.bin -k 10)
expect_input_error("d mismatch" "points file 'good.bin': d=4, but -d 3 was given" "${KMEANS}" -p good.bin -d 3 -k 10)
# Found inside the run, by the host that reads the point: still exit code 2.
expect_input_error("non-finite coordinate" "points file 'nan.bin': coordinate 0 of point 1 is not a finite number"
                   "${KMEANS}" -p nan.bin -k 1)
if(MPIEXEC)
  expect_input_error("non-finite coordinate at host place 1 of 2"
                     "points file 'nan.bin': coordinate 0 of point 1 is not a finite number"
                     ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
                     ${MPIEXEC} --allow-run-as-root --oversubscribe -np 2 "${KMEANS}" -p nan.bin -k 1)
endif()
