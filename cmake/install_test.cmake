# The install tests (ctest apgas.sample.install*, registered by samples/CMakeLists.txt):
#   cmake -DBUILD_DIR=<built apgas tree> -DSOURCE_DIR=<project to build> -DWORK_DIR=<scratch> -DCONFIG=<build type>
#         -DGENERATOR=<generator> [-DMAKE_PROGRAM=<ninja/make>] -DCXX_COMPILER=<c++> [-DPKG_CONFIG=<pkg-config>]
#         [-DMODE=fib|no_backend_dev_files|cuda_architectures] [-DREADELF=<readelf>] [-DCUDA_COMPILER=<nvcc>]
#         -P install_test.cmake
# Each installs BUILD_DIR into WORK_DIR/prefix (cmake --install), then builds SOURCE_DIR alone against it:
#   fib (default): samples/fib with find_package(apgas), run; then, when PKG_CONFIG is given, fib.cpp compiled with
#     `pkg-config --cflags --libs apgas`, run.
#   no_backend_dev_files: samples/fib as a user without the backends' development files would build it: MPI, Boost,
#     CUDA and pkg-config cannot be found (CMAKE_DISABLE_FIND_PACKAGE_*), and their headers (mpi.h, boost/..., cuda.h,
#     rdma/fabric.h) and link libraries (libmpi.so, libboost_context.so, libfabric.so, libcuda.so, libcudart.so) are
#     shadowed by files that fail when used; the program must not name them among its own libraries (readelf), and
#     apgas.pc must hold no absolute path. Needs the shared libapgas.
#   cuda_architectures: tests/packaging/cuda_user, a project that enables CUDA without choosing architectures: its
#     kernels must be compiled for apgas_add_cuda_sources' default (sm_90 code + compute_90 PTX), read back from the
#     object's fat binary, not for CMake's default (sm_75).
# Exits non-zero at the first step that fails.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT MODE)
  set(MODE fib)
endif()

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

# configure_against_install(<build dir> <extra cmake arguments...>): SOURCE_DIR alone, against the installed package
# only (no path into the source or build tree).
function(configure_against_install dir)
  set(args -S ${SOURCE_DIR} -B ${dir} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
           -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${ARGN})
  if(MAKE_PROGRAM)
    list(APPEND args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
  if(CONFIG)
    list(APPEND args -DCMAKE_BUILD_TYPE=${CONFIG})
  endif()
  step("configure ${SOURCE_DIR} with find_package(apgas)" ${CMAKE_COMMAND} ${args})
  set(step_output "${step_output}" PARENT_SCOPE)
endfunction()

# The executable `name` built in `dir` (single- or multi-config generator).
function(built_exe dir name out)
  set(exe ${dir}/${name})
  if(CONFIG AND NOT EXISTS ${exe})
    set(exe ${dir}/${CONFIG}/${name})
  endif()
  set(${out} ${exe} PARENT_SCOPE)
endfunction()

# The .pc file's folder, in PKG_CONFIG_PATH.
function(use_installed_pc)
  file(GLOB pc_files ${prefix}/*/pkgconfig/apgas.pc ${prefix}/*/*/pkgconfig/apgas.pc)
  if(NOT pc_files)
    message(FATAL_ERROR "install test: apgas.pc was not installed under ${prefix}")
  endif()
  list(GET pc_files 0 pc_file)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  set(pc_file ${pc_file} PARENT_SCOPE)
endfunction()

# pkg-config: fib.cpp with one compiler command (and `extra` flags first), run.
function(build_fib_with_pkg_config extra)
  step("pkg-config" ${PKG_CONFIG} --cflags --libs apgas)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  # A shared libapgas in a scratch prefix is found at run time through an rpath, as a user would do it.
  step("pkg-config libdir" ${PKG_CONFIG} --variable=libdir apgas)
  string(STRIP "${step_output}" pc_libdir)
  # The standard is the user's to name (apgas.pc carries no -std; g++ 12 defaults to C++17).
  step("compile samples/fib with pkg-config" ${CXX_COMPILER} -std=c++20 ${extra} -O2 ${SOURCE_DIR}/fib.cpp ${pc_flags}
       -Wl,-rpath,${pc_libdir} -o ${WORK_DIR}/apgas_fib_pc)
  run_fib(${WORK_DIR}/apgas_fib_pc)
endfunction()

if(MODE STREQUAL "fib")
  configure_against_install(${WORK_DIR}/cmake-build)
  step("build samples/fib" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build ${config_args})
  built_exe(${WORK_DIR}/cmake-build apgas_fib exe)
  run_fib(${exe})
  if(PKG_CONFIG)
    use_installed_pc()
    build_fib_with_pkg_config("")
  endif()

elseif(MODE STREQUAL "no_backend_dev_files")
  # Headers and link libraries of the backends, shadowed: using any of them fails, naming it.
  set(poison ${WORK_DIR}/poison)
  foreach(h mpi.h cuda.h cuda_runtime.h rdma/fabric.h boost/context/fiber.hpp boost/context/fiber_fcontext.hpp
            boost/config.hpp)
    file(WRITE ${poison}/include/${h}
         "#error \"apgas install test: <${h}> was included, a development file of an apgas backend a user of a shared libapgas must not need\"\n")
  endforeach()
  foreach(lib mpi mpi_cxx fabric boost_context cuda cudart)
    file(WRITE ${poison}/lib/lib${lib}.so "INPUT(-lapgas_install_test_must_not_link_${lib})\n")
  endforeach()
  set(shadow_flags -I${poison}/include)
  configure_against_install(${WORK_DIR}/cmake-build
                            -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON
                            -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
                            -DCMAKE_CXX_FLAGS=-I${poison}/include -DCMAKE_EXE_LINKER_FLAGS=-L${poison}/lib)
  step("build samples/fib" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build ${config_args})
  built_exe(${WORK_DIR}/cmake-build apgas_fib exe)
  run_fib(${exe})
  if(READELF)
    step("readelf -d ${exe}" ${READELF} -d ${exe})
    foreach(lib mpi fabric boost cuda)
      if(step_output MATCHES "NEEDED[^\n]*lib${lib}")
        message(FATAL_ERROR "install test: ${exe} needs lib${lib} itself (only libapgas may):\n${step_output}")
      endif()
    endforeach()
  endif()
  if(PKG_CONFIG)
    use_installed_pc()
    file(STRINGS ${pc_file} pc_lines REGEX "^(Cflags|Libs|Libs.private|Requires|Requires.private):")
    foreach(line IN LISTS pc_lines)
      if(line MATCHES "(^|[ :])(-[IL])?/")
        message(FATAL_ERROR "install test: ${pc_file} names a path of the build machine: ${line}")
      endif()
    endforeach()
    build_fib_with_pkg_config("-I${poison}/include;-L${poison}/lib")
  endif()

elseif(MODE STREQUAL "cuda_architectures")
  if(NOT CUDA_COMPILER)
    message(FATAL_ERROR "install_test.cmake: MODE=cuda_architectures needs -DCUDA_COMPILER=<nvcc>")
  endif()
  # As a new user does it: CUDA enabled, no architectures chosen (the compiler's default would be sm_75).
  configure_against_install(${WORK_DIR}/cmake-build -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER})
  if(NOT step_output MATCHES "cuda_user: CUDA_ARCHITECTURES=90-real;90-virtual")
    message(FATAL_ERROR "install test: the kernels' target did not get apgas's default architectures:\n${step_output}")
  endif()
  step("build cuda_user" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build ${config_args})
  # What the object holds: the entries of its fat binary (header: magic 0xBA55ED50, version 1, header size 16, size;
  # each entry: kind (1 PTX, 2 ELF), header size, payload size, and the architecture at byte 28).
  file(GLOB_RECURSE objects ${WORK_DIR}/cmake-build/CMakeFiles/cuda_user.dir/*kernels.cpp.o)
  if(NOT objects)
    message(FATAL_ERROR "install test: no object of kernels.cpp under ${WORK_DIR}/cmake-build")
  endif()
  list(GET objects 0 object)
  file(READ ${object} hex HEX)
  function(le at bytes out)  # the little-endian number of `bytes` bytes at byte offset `at` (an expression) of hex
    math(EXPR first "(${at}) * 2")
    math(EXPR last "(${bytes} - 1) * 2")
    set(value "")
    foreach(i RANGE 0 ${last} 2)
      math(EXPR pos "${first} + ${i}")
      string(SUBSTRING "${hex}" ${pos} 2 byte)
      set(value "${byte}${value}")
    endforeach()
    math(EXPR value "0x${value}")
    set(${out} ${value} PARENT_SCOPE)
  endfunction()
  string(FIND "${hex}" "50ed55ba01001000" at)
  math(EXPR odd "${at} % 2")
  if(at LESS 0 OR NOT odd EQUAL 0)
    message(FATAL_ERROR "install test: ${object} holds no fat binary (no .nv_fatbin: not compiled by nvcc?)")
  endif()
  math(EXPR base "${at} / 2")
  le(${base}+8 8 fat_size)
  math(EXPR entry "${base} + 16")
  math(EXPR end "${entry} + ${fat_size}")
  set(found "")
  while(entry LESS end)
    le(${entry} 2 kind)
    le(${entry}+4 4 header_size)
    le(${entry}+8 8 payload_size)
    le(${entry}+28 4 arch)
    if(kind EQUAL 1)
      list(APPEND found "compute_${arch}")
    elseif(kind EQUAL 2)
      list(APPEND found "sm_${arch}")
    else()
      list(APPEND found "kind${kind}_${arch}")
    endif()
    if(header_size EQUAL 0)
      break()
    endif()
    math(EXPR entry "${entry} + ${header_size} + ${payload_size}")
  endwhile()
  list(SORT found)
  list(REMOVE_DUPLICATES found)
  message(STATUS "install test: ${object}: fat binary entries: ${found}")
  if(NOT found STREQUAL "compute_90;sm_90")
    message(FATAL_ERROR "install test: the kernels were compiled for '${found}', expected sm_90 code and compute_90 "
                        "PTX (apgas_add_cuda_sources' default when the project chose no architectures)")
  endif()
  built_exe(${WORK_DIR}/cmake-build cuda_user exe)
  step("run ${exe}" ${exe})
  if(NOT step_output MATCHES "check=ok")
    message(FATAL_ERROR "install test: ${exe} did not print check=ok:\n${step_output}")
  endif()
else()
  message(FATAL_ERROR "install_test.cmake: MODE='${MODE}': expected fib, no_backend_dev_files or cuda_architectures")
endif()
message(STATUS "install test (${MODE}): passed")
