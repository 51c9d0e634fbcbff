# The one test helper (and its must-not-compile sibling). Included by the top-level CMakeLists.txt when
# APGAS_BUILD_TESTS is on.
#
# apgas_add_test(<component> <feature> SOURCES <files...> [LABELS <labels...>] [NPROCS <n>] [TIMEOUT <s>]
#                [ENV <VAR=value...>] [LIBS <targets...>] [ARGS <arguments...>] [NO_GTEST_MAIN])
#   Builds the executable apgas_test_<component>_<feature> from SOURCES, linked with apgas::apgas, GoogleTest
#   (GTest::gtest, plus GTest::gtest_main unless NO_GTEST_MAIN: the sources define main) and LIBS, with the
#   sanitizer of the build. Registers ONE ctest entry, apgas.<component>.<feature>, that runs the whole executable
#   (one entry per file, not one per TEST): LABELS (default: unit), TIMEOUT in seconds (default 300), ENV as the
#   test's environment, ARGS as its command-line arguments. NPROCS <n> runs it as `mpiexec --allow-run-as-root --oversubscribe -np <n> <exe>`; that
#   needs MPI (APGAS_WITH_MPI not OFF, MPI found).
#   Sources are found relative to the calling CMakeLists.txt; `tests/` is on the include path (tests/support/...).
#
# apgas_add_neg_test(<name> SOURCE <file> REGEX <regex>)
#   ctest apgas.neg.<name> (label unit): passes only if <file> FAILS to compile against the apgas headers AND the
#   compiler's output matches <regex> (the static_assert message it must show). See cmake/neg_compile.cmake.

find_package(GTest REQUIRED)

# Multi-process runs under ASan: Open MPI's components leave allocations at exit whose stacks end in modules it has
# already unloaded, so LeakSanitizer cannot attribute (or suppress) them; leak checking stays on for every
# single-process test, and everything else ASan/UBSan checks stays on here.
macro(apgas_mpi_sanitizer_env var)
  if(APGAS_SANITIZE STREQUAL "address")
    list(APPEND ${var} "ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0")
  endif()
endmacro()

# apgas_mpi_sanitizer_properties(<tests...>): the same for tests registered by hand that start mpiexec (directly or
# from a script).
function(apgas_mpi_sanitizer_properties)
  set(env "")
  apgas_mpi_sanitizer_env(env)
  if(env)
    set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT ${env})
  endif()
endfunction()

function(apgas_add_test component feature)
  cmake_parse_arguments(PARSE_ARGV 2 T "NO_GTEST_MAIN" "NPROCS;TIMEOUT" "SOURCES;LABELS;ENV;LIBS;ARGS")
  set(name apgas.${component}.${feature})
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "apgas_add_test(${component} ${feature}): unknown arguments '${T_UNPARSED_ARGUMENTS}'")
  endif()
  if(NOT T_SOURCES)
    message(FATAL_ERROR "apgas_add_test(${component} ${feature}): SOURCES is required")
  endif()
  if(NOT DEFINED T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()

  set(target apgas_test_${component}_${feature})
  add_executable(${target} ${T_SOURCES})
  target_link_libraries(${target} PRIVATE apgas::apgas GTest::gtest ${T_LIBS})
  if(NOT T_NO_GTEST_MAIN)
    target_link_libraries(${target} PRIVATE GTest::gtest_main)
  endif()
  target_include_directories(${target} PRIVATE ${apgas_SOURCE_DIR}/tests)
  apgas_warnings(${target})
  apgas_sanitize(${target})

  if(DEFINED T_NPROCS)
    if(NOT apgas_have_mpi)
      message(FATAL_ERROR "apgas_add_test(${component} ${feature} NPROCS ${T_NPROCS}): multi-process tests need MPI, "
                          "but APGAS_WITH_MPI=${APGAS_WITH_MPI} and MPI was not found or is switched off")
    endif()
    if(NOT T_NPROCS MATCHES "^[1-9][0-9]*$")
      message(FATAL_ERROR "apgas_add_test(${component} ${feature}): NPROCS '${T_NPROCS}' is not a process count")
    endif()
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${T_NPROCS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${name} PROPERTIES PROCESSORS ${T_NPROCS})
    apgas_mpi_sanitizer_env(T_ENV)
  else()
    add_test(NAME ${name} COMMAND ${target} ${T_ARGS})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

# apgas_add_mpi_run(<ctest name> <test target> NPROCS <n> [LABELS ...] [ENV ...] [TIMEOUT <s>] [ARGS ...])
#   Another ctest entry for an executable made by apgas_add_test: run under mpiexec with n processes.
function(apgas_add_mpi_run name target)
  cmake_parse_arguments(PARSE_ARGV 2 T "" "NPROCS;TIMEOUT" "LABELS;ENV;ARGS")
  if(NOT T_NPROCS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "apgas_add_mpi_run(${name}): NPROCS '${T_NPROCS}' is not a process count")
  endif()
  if(NOT DEFINED T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${T_NPROCS}
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES PROCESSORS ${T_NPROCS} LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  apgas_mpi_sanitizer_env(T_ENV)
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

function(apgas_add_neg_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "SOURCE;REGEX" "")
  if(T_UNPARSED_ARGUMENTS OR NOT T_SOURCE OR NOT T_REGEX)
    message(FATAL_ERROR "usage: apgas_add_neg_test(<name> SOURCE <file> REGEX <regex>)")
  endif()
  get_filename_component(source ${T_SOURCE} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT EXISTS ${source})
    message(FATAL_ERROR "apgas_add_neg_test(${name}): ${source} does not exist")
  endif()
  add_test(NAME apgas.neg.${name}
           COMMAND ${CMAKE_COMMAND} -DCOMPILER=${CMAKE_CXX_COMPILER} -DINCLUDE=${apgas_SOURCE_DIR}/apgas/include:${apgas_SOURCE_DIR}/serialization/include:${apgas_SOURCE_DIR}/transport/include
                   -DSOURCE=${source} "-DREGEX=${T_REGEX}" -P ${apgas_SOURCE_DIR}/cmake/neg_compile.cmake)
  set_tests_properties(apgas.neg.${name} PROPERTIES LABELS unit TIMEOUT 120)
endfunction()
