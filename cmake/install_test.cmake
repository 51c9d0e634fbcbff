# The install test: install the build tree to a fresh prefix, then build samples/fib against it with CMake
# (find_package(apgas)) and with pkg-config, and run both.
# cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<src> -DWORK_DIR=<scratch> -DGENERATOR=<gen> -DCXX=<compiler>
#       -DLIBDIR=<CMAKE_INSTALL_LIBDIR> -P install_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/samples/fib -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/apgas_fib -n 15)
if(NOT out MATCHES "check=ok")
  message(FATAL_ERROR "the sample built against the installed package did not check out:\n${out}")
endif()

find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(${PKG_CONFIG} --cflags --libs apgas)
string(STRIP "${out}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} -O2 ${SOURCE_DIR}/samples/fib/fib.cpp ${flags} -o ${WORK_DIR}/fib-pkgconfig)
run(${WORK_DIR}/fib-pkgconfig -n 15)
if(NOT out MATCHES "check=ok")
  message(FATAL_ERROR "the sample built with pkg-config did not check out:\n${out}")
endif()
message(STATUS "installed package usable with CMake and pkg-config")
