# Output files (x10cuda_output_test() in ../CMakeLists.txt):
#   cmake -DPROGRAM=<apgas exe> "-DARGS=<args>" -DWORK_DIR=<folder> [-DOMP=<exe>] [-DNATIVE=<exe>]
#         ["-DMPIRUN=<mpirun;options>"] -P output_test.cmake
# 1. PROGRAM ARGS -o one.out: check=ok, and the file is written;
# 2. PROGRAM ARGS --check one.out: check=ok (the reference output read back);
# 3. OMP (and NATIVE, unless it finds no GPU) ARGS --check one.out, and -o: check=ok;
# 4. with MPIRUN: PROGRAM on 2 and 3 host places, -o: byte-identical to one.out.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run name)  # run(<name> <command...>): must end with check=ok; its output is in ${name}.log
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 300)
  file(WRITE ${WORK_DIR}/${name}.log "${out}")
  if(out MATCHES "no CUDA GPU")
    message(STATUS "${name}: skipped (no CUDA GPU)")
    set(skipped ON PARENT_SCOPE)
    return()
  endif()
  if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
    message(FATAL_ERROR "${name}: exit code ${rc}, expected 0 and check=ok: ${ARGN}\n${out}")
  endif()
  string(REGEX MATCH "parboil: [^\n]*" last "${out}")
  message(STATUS "${name}: ${last}")
  set(skipped OFF PARENT_SCOPE)
endfunction()

run(write ${PROGRAM} -o one.out ${ARGS})
if(NOT EXISTS ${WORK_DIR}/one.out)
  message(FATAL_ERROR "-o one.out did not write the file")
endif()
file(SIZE ${WORK_DIR}/one.out size)
if(size EQUAL 0)
  message(FATAL_ERROR "-o one.out wrote an empty file")
endif()
run(check ${PROGRAM} --check one.out ${ARGS})
foreach(other OMP NATIVE)
  if(${other})
    run(${other}_check ${${other}} --check one.out ${ARGS})
    if(NOT skipped)
      run(${other}_write ${${other}} -o ${other}.out ${ARGS})
      run(${other}_read_back ${PROGRAM} --check ${other}.out ${ARGS})
    endif()
  endif()
endforeach()
if(MPIRUN)
  foreach(np 2 3)
    run(np${np} ${CMAKE_COMMAND} -E env APGAS_NTHREADS=1 ${MPIRUN} -np ${np} ${PROGRAM} -o np${np}.out ${ARGS})
    file(READ ${WORK_DIR}/np${np}.log log)
    if(NOT log MATCHES "hosts=${np} ")
      message(FATAL_ERROR "np${np}: the report does not say hosts=${np}:\n${log}")
    endif()
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/one.out ${WORK_DIR}/np${np}.out
                    RESULT_VARIABLE differ)
    if(differ)
      message(FATAL_ERROR "the output on ${np} host places differs from the one on 1 place (one.out, np${np}.out)")
    endif()
    message(STATUS "np${np}: output byte-identical to the one of 1 place")
  endforeach()
endif()
