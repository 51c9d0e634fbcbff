# sad's frame files: the generated frames written with --write-input and read back with -i give check=ok and the
# same output (-o) as the generated ones, --check against that output passes, and broken frames stop the program
# with exit code 2 and a message naming the file and the offset; with MPIEXEC, 2 and 3 host places give the same
# output (also for frames of 3 and 2 macroblock rows, whose output rows repeat).
#   cmake [-DMPIEXEC=<mpiexec>] -DPROGRAM=<apgas_parboil_sad or parboil_sad_omp>
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

run(rc out "${PROGRAM}" --size small --write-input ref.bin cur.bin)
if(rc EQUAL 0)
  message(FATAL_ERROR "--write-input with one name should have failed")
endif()
run(rc out "${PROGRAM}" --size small --write-input ref.bin,cur.bin)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--write-input failed (${rc}):\n${out}")
endif()
file(SIZE "${WORK_DIR}/ref.bin" bytes)
if(NOT bytes EQUAL 12292)  # 4 + 96 * 64 * 2
  message(FATAL_ERROR "ref.bin has ${bytes} bytes, expected 12292")
endif()
expect_ok("generated, -o" "${PROGRAM}" -q --size small -o generated.out)
expect_ok("read back, -o" "${PROGRAM}" -q -i ref.bin,cur.bin -o read.out)
file(SHA256 "${WORK_DIR}/generated.out" a)
file(SHA256 "${WORK_DIR}/read.out" b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "the frames read back gave another output than the generated ones")
endif()
file(SIZE "${WORK_DIR}/read.out" bytes)
if(NOT bytes EQUAL 3214736)  # 8 + 6 rows * 6 macroblocks * 41 * 1089 * 2
  message(FATAL_ERROR "the output has ${bytes} bytes, expected 3214736")
endif()
expect_ok("--check against its own output" "${PROGRAM}" -q -i ref.bin,cur.bin --check read.out)

if(MPIEXEC)  # the same output on 2 and 3 host places
  foreach(np 2 3)
    expect_ok("${np} host places" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1 "${MPIEXEC}"
              --allow-run-as-root --oversubscribe -np ${np} "${PROGRAM}" -q -i ref.bin,cur.bin -o np${np}.out)
    file(SHA256 "${WORK_DIR}/read.out" a)
    file(SHA256 "${WORK_DIR}/np${np}.out" b)
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "${np} host places gave another output than one")
    endif()
  endforeach()
  # Frames 32 pixels wide and 48 or 32 high, from the generated frames' first pixels: 3 or 2 macroblock rows, whose
  # six output rows repeat and do not increase (0 1 0 1 1 2, 0 1 0 1 0 1). On 2 and 3 host places each row a part
  # holds must go to its own place in the output.
  foreach(h 48 32)
    set(octal "\\060")  # the height's low byte
    if(h EQUAL 32)
      set(octal "\\040")
    endif()
    math(EXPR bytes "64 * ${h}")
    foreach(f ref cur)
      execute_process(COMMAND sh -c "printf '\\040\\000${octal}\\000'; tail -c +5 ${f}.bin | head -c ${bytes}"
                      WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/${f}${h}.bin")
    endforeach()
    expect_ok("32 x ${h}, 1 place" "${PROGRAM}" -q -i ref${h}.bin,cur${h}.bin -o h${h}.out)
    foreach(np 2 3)
      expect_ok("32 x ${h}, ${np} host places" ${CMAKE_COMMAND} -E env APGAS_TRANSPORT=mpi APGAS_NTHREADS=1
                "${MPIEXEC}" --allow-run-as-root --oversubscribe -np ${np} "${PROGRAM}" -q -i ref${h}.bin,cur${h}.bin
                -o h${h}_np${np}.out)
      file(SHA256 "${WORK_DIR}/h${h}.out" a)
      file(SHA256 "${WORK_DIR}/h${h}_np${np}.out" b)
      if(NOT a STREQUAL b)
        message(FATAL_ERROR "32 x ${h} frames: ${np} host places gave another output than one")
      endif()
    endforeach()
  endforeach()
endif()
# Broken frames.
execute_process(COMMAND head -c 5000 cur.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/short.bin")
expect_error("a short frame" "input file 'short.bin': at byte 4: expected 6144 x 2 bytes of pixels, but only 4996"
             "${PROGRAM}" -i ref.bin,short.bin)
execute_process(COMMAND head -c 3 cur.bin WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/tiny.bin")
expect_error("no header" "input file 'tiny.bin': at byte 2: expected 1 x 2 bytes of the frame height"
             "${PROGRAM}" -i tiny.bin,cur.bin)
execute_process(COMMAND printf "\\060\\000\\040\\000" OUTPUT_FILE "${WORK_DIR}/odd.bin")  # 48 x 32, then nothing
expect_error("a truncated frame" "input file 'odd.bin': at byte 4: expected 1536 x 2 bytes of pixels"
             "${PROGRAM}" -i odd.bin,odd.bin)
execute_process(COMMAND printf "\\024\\000\\040\\000" OUTPUT_FILE "${WORK_DIR}/width.bin")  # 20 x 32
expect_error("a width that is no multiple of 16" "input file 'width.bin': at byte 0: frame of 20 x 32 pixels"
             "${PROGRAM}" -i width.bin,cur.bin)
execute_process(COMMAND sh -c "head -c 104 ref.bin; printf '\\000\\001'; tail -c +107 ref.bin"
                WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/bright.bin")
expect_error("a pixel above 255" "input file 'bright.bin': at byte 104: pixel value 256 outside 0..255"
             "${PROGRAM}" -i bright.bin,cur.bin)
execute_process(COMMAND sh -c "cat ref.bin; printf '\\000\\000'" WORKING_DIRECTORY "${WORK_DIR}"
                OUTPUT_FILE "${WORK_DIR}/long.bin")
expect_error("bytes after the frame" "input file 'long.bin': 2 bytes after the data, at byte 12292"
             "${PROGRAM}" -i ref.bin,long.bin)
run(rc out "${PROGRAM}" --write-input big1.bin,big2.bin)
expect_error("frames of two sizes"
             "input file 'big1.bin': a frame of 176 x 144 pixels, but the reference frame 'ref.bin' is 96 x 64"
             "${PROGRAM}" -i ref.bin,big1.bin)
execute_process(COMMAND head -c 1000 read.out WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_FILE "${WORK_DIR}/cut.out")
expect_error("--check against a short output" "input file 'cut.out': at byte 8: expected 1607364 x 2 bytes of SADs"
             "${PROGRAM}" -q -i ref.bin,cur.bin --check cut.out)
