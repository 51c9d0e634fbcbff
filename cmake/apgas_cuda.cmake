# apgas_add_cuda_sources(<target> <sources...>)
#   The files of <target> that send kernel closures (apgas::cuda_kernel) to GPU places. When the CUDA language is
#   enabled in the calling project they are compiled by nvcc as CUDA (--extended-lambda for the APGAS_KERNEL
#   lambdas, --expt-relaxed-constexpr for std::span in device code, C++20), with code for the target's
#   CUDA_ARCHITECTURES when the project chose them (CMAKE_CUDA_ARCHITECTURES, or the property), else for
#   90-real;90-virtual (H100/H200 code plus PTX that newer GPUs JIT), and the target links the static CUDA runtime
#   (it loads the driver itself at run time: no libcuda at link time). Without CUDA the same files are compiled by
#   the C++ compiler, and the kernels run on CPU places only. Installed with the package, and included by
#   apgasConfig.cmake.
#
#   "Chose": enable_language(CUDA) sets CMAKE_CUDA_ARCHITECTURES to the compiler's default (sm_75 for nvcc 13) when
#   neither the project, the command line nor CUDAARCHS set it, and every target inherits it. That value counts as
#   not chosen: where CMake has CMAKE_CUDA_ARCHITECTURES_DEFAULT (3.27+), a value equal to it; before, a value that
#   CMake's own detection put in the cache. To really build for the compiler's default there, name it in another
#   form (75-real).
#
#   --expt-relaxed-constexpr applies to the whole file: nvcc 13.0's device front end (cicc) crashes on some host code
#   under it, e.g. `for (const std::string s : {"a", "b"})` inside a lambda. Keep such host code in files the C++
#   compiler compiles (only the files that send kernels need nvcc), or write it another way (docs/building.md).
function(apgas_add_cuda_sources target)
  target_sources(${target} PRIVATE ${ARGN})
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CUDA" IN_LIST languages)
    return()
  endif()
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CUDA)
  # C++20 by flag (CMake 3.25 does not know nvcc's CUDA20 dialect option), and as a feature so that CMake adds no
  # -std=c++17 of its own after it (it does when CMAKE_CXX_EXTENSIONS is OFF and the target has no C++20 feature).
  target_compile_options(${target} PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --extended-lambda --expt-relaxed-constexpr>)
  target_compile_features(${target} PRIVATE cxx_std_20)
  get_target_property(archs ${target} CUDA_ARCHITECTURES)
  set(chosen ON)
  if(NOT archs)
    set(chosen OFF)
  elseif(DEFINED CMAKE_CUDA_ARCHITECTURES_DEFAULT)
    if("${archs}" STREQUAL "${CMAKE_CUDA_ARCHITECTURES_DEFAULT}")
      set(chosen OFF)
    endif()
  elseif("${archs}" STREQUAL "${CMAKE_CUDA_ARCHITECTURES}" AND "$ENV{CUDAARCHS}" STREQUAL "")
    # (CMake's detection caches the default with this help string; -D and presets leave another one.)
    get_property(help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
    if(help STREQUAL "CUDA architectures")
      set(chosen OFF)
    endif()
  endif()
  if(NOT chosen)
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "90-real;90-virtual")
    if(archs)
      message(STATUS "apgas_add_cuda_sources(${target}): CUDA architectures 90-real;90-virtual (H100/H200 code and "
                     "PTX), not the compiler's default ${archs}: set CMAKE_CUDA_ARCHITECTURES to choose")
    endif()
  endif()
  # The C++ driver links (sanitizer flags, -pthread ...); the CUDA runtime is added explicitly.
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  if(NOT TARGET CUDA::cudart_static)
    find_package(CUDAToolkit REQUIRED)
  endif()
  target_link_libraries(${target} PRIVATE CUDA::cudart_static)
endfunction()
