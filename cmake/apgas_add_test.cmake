# The one test helper.
#
# apgas_add_test(<component> <feature> SOURCES <files...> [LABELS <labels...>] [NPROCS <n>] [TIMEOUT <s>]
#                [ENV <VAR=value...>] [LIBS <targets...>] [NO_GTEST_MAIN])
#   Builds apgas_test_<component>_<feature> and registers ONE ctest entry apgas.<component>.<feature> running the
#   whole executable (under mpiexec -np <n> when NPROCS is given).
#
# apgas_add_neg_test(<name> SOURCE <file> REGEX <regex>)
#   ctest apgas.neg.<name>: passes only if <file> fails to compile and the compiler's output matches <regex>.

find_package(GTest REQUIRED)

function(apgas_add_test component feature)
  cmake_parse_arguments(T "NO_GTEST_MAIN" "NPROCS;TIMEOUT" "SOURCES;LABELS;ENV;LIBS" ${ARGN})
  set(target apgas_test_${component}_${feature})
  add_executable(${target} ${T_SOURCES})
  target_link_libraries(${target} PRIVATE apgas::apgas GTest::gtest ${T_LIBS})
  if(NOT T_NO_GTEST_MAIN)
    target_link_libraries(${target} PRIVATE GTest::gtest_main)
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  apgas_warnings(${target})
  apgas_sanitize(${target})
  set(command $<TARGET_FILE:${target}>)
  if(T_NPROCS)
    if(NOT apgas_have_mpi)
      message(FATAL_ERROR "apgas_add_test(${component} ${feature}): NPROCS needs MPI")
    endif()
    set(command ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS}
                $<TARGET_FILE:${target}>)
  endif()
  add_test(NAME apgas.${component}.${feature} COMMAND ${command})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  set_tests_properties(apgas.${component}.${feature} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(apgas.${component}.${feature} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

function(apgas_add_neg_test name)
  cmake_parse_arguments(T "" "SOURCE;REGEX" "" ${ARGN})
  add_test(NAME apgas.neg.${name}
           COMMAND ${CMAKE_COMMAND} -DCOMPILER=${CMAKE_CXX_COMPILER}
                   -DINCLUDE=${PROJECT_SOURCE_DIR}/apgas/include -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/${T_SOURCE}
                   -DREGEX=${T_REGEX} -P ${PROJECT_SOURCE_DIR}/cmake/neg_compile.cmake)
  set_tests_properties(apgas.neg.${name} PROPERTIES LABELS unit TIMEOUT 120)
endfunction()
