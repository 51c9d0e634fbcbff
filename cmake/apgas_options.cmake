# Build-wide settings shared by every apgas target: sanitizer, assertions, warnings, backend detection.
# Included once by the top-level CMakeLists.txt, after the cache options are declared.

# ---- sanitizer ----
# apgas_sanitize_flags go on the library (and, as usage requirements, on everything that links it: a static library
# built with a sanitizer needs the sanitizer's run-time at link time). apgas_sanitize_defs are for the library only:
# the runtime uses them to tell the sanitizer about fiber switches (src/sanitizer.hpp).
set(apgas_sanitize_flags "")
set(apgas_sanitize_defs "")
if(APGAS_SANITIZE STREQUAL "address")
  set(apgas_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  set(apgas_sanitize_defs APGAS_DETAIL_ASAN=1)
elseif(APGAS_SANITIZE STREQUAL "thread")
  set(apgas_sanitize_flags -fsanitize=thread)
  set(apgas_sanitize_defs APGAS_DETAIL_TSAN=1)
elseif(NOT APGAS_SANITIZE STREQUAL "")
  message(FATAL_ERROR "APGAS_SANITIZE='${APGAS_SANITIZE}': expected '' (none), 'address' (ASan+UBSan) or 'thread'")
endif()

# apgas_sanitize(<target>): compile and link <target> with the chosen sanitizer (no-op without one).
function(apgas_sanitize target)
  if(apgas_sanitize_flags)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${apgas_sanitize_flags}>)
    target_link_options(${target} PRIVATE ${apgas_sanitize_flags})
  endif()
endfunction()

# apgas_warnings(<target>): our warning set, on our own targets only (never a PUBLIC flag).
function(apgas_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # C++ files only: nvcc does not take these flags (files compiled as CUDA get their host warnings from -Xcompiler).
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
  endif()
endfunction()

# ---- internal assertions (APGAS_ASSERT) ----
# AUTO: on in Debug and in sanitizer builds. A generator expression, so that multi-config generators get it right.
if(NOT APGAS_ASSERTIONS MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "APGAS_ASSERTIONS='${APGAS_ASSERTIONS}': expected AUTO, ON or OFF")
endif()
if(APGAS_ASSERTIONS STREQUAL "ON")
  set(apgas_assert_def APGAS_DETAIL_ENABLE_ASSERT=1)
  set(apgas_assert_summary "ON")
elseif(APGAS_ASSERTIONS STREQUAL "OFF")
  set(apgas_assert_def "")
  set(apgas_assert_summary "OFF")
elseif(APGAS_SANITIZE)
  set(apgas_assert_def APGAS_DETAIL_ENABLE_ASSERT=1)
  set(apgas_assert_summary "ON (AUTO: sanitizer build)")
else()
  set(apgas_assert_def $<$<CONFIG:Debug>:APGAS_DETAIL_ENABLE_ASSERT=1>)
  if(CMAKE_CONFIGURATION_TYPES)
    set(apgas_assert_summary "AUTO (on in the Debug configuration)")
  elseif(CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(apgas_assert_summary "ON (AUTO: Debug build)")
  else()
    set(apgas_assert_summary "OFF (AUTO: ${CMAKE_BUILD_TYPE} build without sanitizer)")
  endif()
endif()

# ---- backends: AUTO finds or skips, ON finds or stops with a message, OFF skips ----
# A requested-but-missing dependency is reported at configure time, never silently ignored.
foreach(backend MPI OFI CUDA)
  if(NOT APGAS_WITH_${backend} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "APGAS_WITH_${backend}='${APGAS_WITH_${backend}}': expected AUTO, ON or OFF")
  endif()
endforeach()

set(apgas_have_mpi OFF)
set(apgas_have_ofi OFF)
set(apgas_have_cuda OFF)
set(apgas_mpi_detail "")
set(apgas_ofi_detail "")
set(apgas_cuda_detail "")

if(NOT APGAS_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET)
  if(MPI_FOUND AND MPIEXEC_EXECUTABLE)
    set(apgas_have_mpi ON)
    set(apgas_mpi_detail " (MPI ${MPI_CXX_VERSION}, ${MPIEXEC_EXECUTABLE})")
  endif()
  if(APGAS_WITH_MPI STREQUAL "ON" AND NOT apgas_have_mpi)
    message(FATAL_ERROR "APGAS_WITH_MPI=ON, but no MPI (library and mpiexec) was found. Install it (Debian: "
                        "apt-get install libopenmpi-dev openmpi-bin), point MPI_HOME at it, or set "
                        "-DAPGAS_WITH_MPI=AUTO or OFF.")
  endif()
endif()

if(NOT APGAS_WITH_OFI STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(APGAS_OFI QUIET IMPORTED_TARGET libfabric)
    if(APGAS_OFI_FOUND)
      set(apgas_have_ofi ON)
      set(apgas_ofi_detail " (libfabric ${APGAS_OFI_VERSION})")
    endif()
  endif()
  if(APGAS_WITH_OFI STREQUAL "ON" AND NOT apgas_have_ofi)
    message(FATAL_ERROR "APGAS_WITH_OFI=ON, but libfabric was not found through pkg-config (libfabric.pc). Install "
                        "it (Debian: apt-get install pkg-config libfabric-dev), add its pkgconfig folder to "
                        "PKG_CONFIG_PATH, or set -DAPGAS_WITH_OFI=AUTO or OFF.")
  endif()
endif()

if(NOT APGAS_WITH_CUDA STREQUAL "OFF")
  # check_language() trusts a CMAKE_CUDA_COMPILER given by the user or a preset without looking at it: then at
  # least make sure it runs.
  if(DEFINED CMAKE_CUDA_COMPILER AND NOT CMAKE_CUDA_COMPILER STREQUAL "")
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --version RESULT_VARIABLE apgas_nvcc_rc
                    OUTPUT_VARIABLE apgas_nvcc_out ERROR_QUIET)
    if(apgas_nvcc_rc EQUAL 0 AND apgas_nvcc_out MATCHES "release ([0-9]+\\.[0-9]+)")
      set(apgas_have_cuda ON)
      set(apgas_cuda_version "${CMAKE_MATCH_1}")
    endif()
  else()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(apgas_have_cuda ON)
    endif()
  endif()
  if(apgas_have_cuda)
    set(apgas_cuda_detail " (${CMAKE_CUDA_COMPILER}")
    if(apgas_cuda_version)
      string(APPEND apgas_cuda_detail " ${apgas_cuda_version}")
    endif()
    if(CMAKE_CUDA_ARCHITECTURES)
      string(APPEND apgas_cuda_detail ", architectures ${CMAKE_CUDA_ARCHITECTURES}")
    endif()
    string(APPEND apgas_cuda_detail ")")
  endif()
  if(APGAS_WITH_CUDA STREQUAL "ON" AND NOT apgas_have_cuda)
    message(FATAL_ERROR "APGAS_WITH_CUDA=ON, but no working CUDA compiler was found (CMAKE_CUDA_COMPILER="
                        "'${CMAKE_CUDA_COMPILER}'). Set CMAKE_CUDA_COMPILER "
                        "(e.g. -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc) or the CUDACXX environment "
                        "variable, or set -DAPGAS_WITH_CUDA=AUTO or OFF.")
  endif()
endif()
