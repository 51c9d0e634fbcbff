# Install and export libapgas (included by apgas/CMakeLists.txt once the apgas_core target is complete):
# find_package(apgas) gives apgas::apgas (apgasConfig.cmake, apgasTargets.cmake, apgas_cuda.cmake); pkg-config gives
# apgas (apgas.pc). Both are relocatable (no path of the build machine in them), and for the shared libapgas (the
# default) neither asks for anything but the library and -pthread: its backends are its own business.
include(CMakePackageConfigHelpers)
set(apgas_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/apgas)

# Public headers (include/apgas/*.hpp) and include/apgas/detail/ (installed because templates need it; not API).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/apgas/include/apgas ${PROJECT_SOURCE_DIR}/serialization/include/apgas
                  ${PROJECT_SOURCE_DIR}/transport/include/apgas ${PROJECT_SOURCE_DIR}/cuda_place/include/apgas
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS apgas_core EXPORT apgasTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT apgasTargets NAMESPACE apgas:: DESTINATION ${apgas_cmake_dir})

# apgasConfig.cmake: a static libapgas needs Boost.Context and the backends' libraries at its users' link step, so it
# finds them for them; a shared one needs nothing but Threads.
if(APGAS_BUILD_SHARED)
  set(APGAS_CONFIG_STATIC OFF)
else()
  set(APGAS_CONFIG_STATIC ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/apgasConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/apgasConfig.cmake
                              INSTALL_DESTINATION ${apgas_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/apgasConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/apgasConfig.cmake ${PROJECT_BINARY_DIR}/apgasConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/apgas_cuda.cmake
        DESTINATION ${apgas_cmake_dir})

# apgas.pc, relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix <p>`
# works for any <p>.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(APGAS_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  set(APGAS_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  set(APGAS_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  file(RELATIVE_PATH apgas_pc_up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" apgas_pc_up "${apgas_pc_up}")
  set(APGAS_PC_PREFIX "\${pcfiledir}/${apgas_pc_up}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(APGAS_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(APGAS_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
list(JOIN apgas_sanitize_flags " " apgas_pc_sanitize)
# No -std: C++20 or later is required, and the user gives it (a -std=c++20 here would undo a user's later standard
# given before it, e.g. -std=c++23).
set(APGAS_PC_CFLAGS "-I\${includedir}")
if(apgas_have_stack_clash_protection)
  string(APPEND APGAS_PC_CFLAGS " -fstack-clash-protection")
endif()
# The libraries a static libapgas brings along, by name (-l): no path of the build machine. Where one lies outside the
# linker's search path (an MPI in its own prefix) the user adds -L for it (docs/building.md).
set(apgas_private_libs "-lboost_context")
if(apgas_have_mpi)
  foreach(lib IN LISTS MPI_CXX_LIBRARIES)
    get_filename_component(name "${lib}" NAME_WE)
    string(REGEX REPLACE "^lib" "" name "${name}")
    string(APPEND apgas_private_libs " -l${name}")
  endforeach()
  if(apgas_have_ofi)
    string(APPEND apgas_private_libs " -lfabric")
  endif()
endif()
if(apgas_have_cuda AND CMAKE_DL_LIBS)
  string(APPEND apgas_private_libs " -l${CMAKE_DL_LIBS}")
endif()
set(APGAS_PC_LIBS "-L\${libdir} -lapgas")
if(APGAS_BUILD_SHARED)
  set(APGAS_PC_LIBS_PRIVATE "${apgas_private_libs}")
  string(APPEND APGAS_PC_LIBS " -pthread")
else()
  set(APGAS_PC_LIBS_PRIVATE "")
  string(APPEND APGAS_PC_LIBS " ${apgas_private_libs} -pthread")
endif()
if(apgas_pc_sanitize)
  string(APPEND APGAS_PC_CFLAGS " ${apgas_pc_sanitize}")
  string(APPEND APGAS_PC_LIBS " ${apgas_pc_sanitize}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/apgas.pc.in ${PROJECT_BINARY_DIR}/apgas.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/apgas.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
