# Points files: a file written by kmeans_points gives the same centroids as the generator it came from; broken files
# (truncated, shorter than the header, bad magic, other version, n=0, fewer points than clusters, -d mismatch, a
# non-finite coordinate, a coordinate beyond the magnitude limit) stop apgas_kmeans with exit code 2 and a message
# naming the file and the problem. Magnitudes so far apart that a cluster of small points loses its coordinates in
# the fixed-point sums fail the check (exit code 1, saying so); magnitudes far apart that the fixed point holds
# exactly pass it. kmeans_points reads its seed as a decimal number.
# With MPIEXEC, the non-finite coordinate is also found by host place 1 of 2, and a file of other shape at host place 1
# (another file of that name): every process stops, exit code 2.
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
  set(output "${out}" PARENT_SCOPE)
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
# n=2, d=1: 0.5 and 2e19, beyond the limit of 1e18 in magnitude (their squared distance, 4e38, is inf in float)
write_bytes(huge.bin "KMPOINTS\\001\\000\\000\\000\\001\\000\\000\\000\\002\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\077\\043\\307\\212\\137")
# n=4, d=1: 2^56 and three times 0.3f: for 4 points of magnitude up to 2^56 the fixed point counts in quarters, so
# the cluster of the three small points (k=2: the first two points are the initial centroids) has the centroid 0.25.
write_bytes(mixed.bin "KMPOINTS\\001\\000\\000\\000\\001\\000\\000\\000\\004\\000\\000\\000\\000\\000\\000\\000\\000\\000\\200\\133\\232\\231\\231\\076\\232\\231\\231\\076\\232\\231\\231\\076")
# n=3, d=1: 2^40, 0.5, 0.5: as far apart, but 0.5 is a multiple of the step (2^-18 for 3 points): accepted, and the
# centroid of the two small points is exactly 0.5.
write_bytes(mixed_exact.bin "KMPOINTS\\001\\000\\000\\000\\001\\000\\000\\000\\003\\000\\000\\000\\000\\000\\000\\000\\000\\000\\200\\123\\000\\000\\000\\077\\000\\000\\000\\077")
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
expect_input_error("coordinate beyond the limit"
                   "points file 'huge.bin': coordinate 0 of point 1 is 2e\\+19, beyond the limit of 1e\\+18 in magnitude"
                   "${KMEANS}" -p huge.bin -k 1)
run(rc out "${KMEANS}" -p mixed.bin -k 2 -i 2 -q --print-centroids)
if(NOT rc EQUAL 1 OR NOT out MATCHES "coordinate 0 of centroid 1 is 0.25, the mean of its points 0.300000012"
   OR NOT out MATCHES "check=FAIL")
  message(FATAL_ERROR "mixed.bin: expected exit code 1 and the fixed point's loss named (rc=${rc}):\n${out}")
endif()
message(STATUS "magnitudes too far apart for the fixed point: check=FAIL, the loss named")
expect_ok("magnitudes far apart, held exactly" "${KMEANS}" -p mixed_exact.bin -k 2 -i 2 -q --print-centroids)
if(NOT output MATCHES "\ncentroid 1 0.5\n")
  message(FATAL_ERROR "mixed_exact.bin: expected the centroid 1 at exactly 0.5:\n${output}")
endif()
expect_input_error("kmeans_points: a hexadecimal seed" "kmeans_points: invalid -s '0x10'"
                   "${POINTS}" -n 5 -s 0x10 -o hex.bin)
expect_input_error("kmeans_points: -n 0" "kmeans_points: invalid -n '0': expected a whole number from 1 to 1000000000"
                   "${POINTS}" -n 0 -o zero.bin)
expect_input_error("kmeans_points: -d 33" "kmeans_points: invalid -d '33': expected a whole number from 1 to 32"
                   "${POINTS}" -n 5 -d 33 -o wide.bin)
if(MPIEXEC)
  expect_input_error("non-finite coordinate at host place 1 of 2"
                     "points file 'nan.bin': coordinate 0 of point 1 is not a finite number"
                     ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
                     ${MPIEXEC} --allow-run-as-root --oversubscribe -np 2 "${KMEANS}" -p nan.bin -k 1)
  # Another file of the same name at host place 1 (each process started in its own directory, as on hosts without
  # a shared file system): named with both shapes, not "changed during the run".
  file(MAKE_DIRECTORY "${WORK_DIR}/host0" "${WORK_DIR}/host1")
  run(rc out "${POINTS}" -n 1000 -o host0/p.bin)
  run(rc out "${POINTS}" -n 1200 -o host1/p.bin)
  expect_input_error("another file of that name at host place 1"
                     "points file 'p.bin' holds n=1200 d=4 at place 1, n=1000 d=4 at place 0"
                     ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
                     ${MPIEXEC} --allow-run-as-root --oversubscribe -np 1 -wdir "${WORK_DIR}/host0" "${KMEANS}" -p p.bin
                     -k 2 -i 1 -q : -np 1 -wdir "${WORK_DIR}/host1" "${KMEANS}" -p p.bin -k 2 -i 1 -q)
endif()
