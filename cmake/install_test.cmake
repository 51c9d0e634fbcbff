# The install test (ctest apgas.sample.install, registered by samples/CMakeLists.txt):
#   cmake -DBUILD_DIR=<built apgas tree> -DSOURCE_DIR=<samples/fib> -DWORK_DIR=<scratch> -DCONFIG=<build type>
#         -DGENERATOR=<generator> [-DMAKE_PROGRAM=<ninja/make>] -DCXX_COMPILER=<c++> [-DPKG_CONFIG=<pkg-config>]
#         -P install_test.cmake
# 1. installs BUILD_DIR into WORK_DIR/prefix (cmake --install), 2. configures and builds SOURCE_DIR alone against
# it with find_package(apgas), runs it, 3. when PKG_CONFIG is given, compiles the same source with
# `pkg-config --cflags --libs apgas` and runs that too. Exits non-zero at the first step that fails.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(step what)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "install test: ${what}: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# fib(15) = 610; apgas_fib exits 0 only when the parallel and the serial answers agree.
function(run_fib exe)
  step("run ${exe}" ${exe} -n 15)
  if(NOT step_output MATCHES "fib: n=15 result=610 serial=610 [^\n]*check=ok")
    message(FATAL_ERROR "install test: ${exe} did not print the expected result:\n${step_output}")
  endif()
  message(STATUS "install test: ${exe}: check=ok")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

set(config_args "")
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
foreach(f include/apgas/apgas.hpp include/apgas/detail/task.hpp)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install test: ${prefix}/${f} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE private_headers RELATIVE ${prefix} ${prefix}/include/*scheduler.hpp ${prefix}/include/*deque.hpp)
if(private_headers)
  message(FATAL_ERROR "install test: private headers were installed: ${private_headers}")
endif()

# CMake: the sample alone, against the installed package only (no path into the source or build tree).
set(configure_args -S ${SOURCE_DIR} -B ${WORK_DIR}/cmake-build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                   -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CONFIG)
  list(APPEND configure_args -DCMAKE_BUILD_TYPE=${CONFIG})
endif()
step("configure samples/fib with find_package(apgas)" ${CMAKE_COMMAND} ${configure_args})
step("build samples/fib" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build ${config_args})
set(exe ${WORK_DIR}/cmake-build/apgas_fib)
if(CONFIG AND NOT EXISTS ${exe})
  set(exe ${WORK_DIR}/cmake-build/${CONFIG}/apgas_fib)
endif()
run_fib(${exe})

# pkg-config: the same source, one compiler command.
if(PKG_CONFIG)
  file(GLOB pc_files ${prefix}/*/pkgconfig/apgas.pc ${prefix}/*/*/pkgconfig/apgas.pc)
  if(NOT pc_files)
    message(FATAL_ERROR "install test: apgas.pc was not installed under ${prefix}")
  endif()
  list(GET pc_files 0 pc_file)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  step("pkg-config" ${PKG_CONFIG} --cflags --libs apgas)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  # A shared libapgas in a scratch prefix is found at run time through an rpath, as a user would do it.
  step("pkg-config libdir" ${PKG_CONFIG} --variable=libdir apgas)
  string(STRIP "${step_output}" pc_libdir)
  step("compile samples/fib with pkg-config" ${CXX_COMPILER} -O2 ${SOURCE_DIR}/fib.cpp ${pc_flags}
       -Wl,-rpath,${pc_libdir} -o ${WORK_DIR}/apgas_fib_pc)
  run_fib(${WORK_DIR}/apgas_fib_pc)
endif()
message(STATUS "install test: passed")
