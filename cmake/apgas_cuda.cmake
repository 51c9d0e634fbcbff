# apgas_add_cuda_sources(<target> <sources...>)
#   The files of <target> that send kernel closures (apgas::cuda_kernel) to GPU places. When the CUDA language is
#   enabled in the calling project they are compiled by nvcc as CUDA (--extended-lambda for the APGAS_KERNEL
#   lambdas, --expt-relaxed-constexpr for std::span in device code, C++20), with SASS for the configured
#   CMAKE_CUDA_ARCHITECTURES (default here: 90-real;90-virtual, i.e. H100/H200 code plus PTX that newer GPUs JIT),
#   and the target links the static CUDA runtime (it loads the driver itself at run time: no libcuda at link time).
#   Without CUDA the same files are compiled by the C++ compiler, and the kernels run on CPU places only.
#   Installed with the package, and included by apgasConfig.cmake.
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
  if(NOT archs)
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  # The C++ driver links (sanitizer flags, -pthread ...); the CUDA runtime is added explicitly.
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  if(NOT TARGET CUDA::cudart_static)
    find_package(CUDAToolkit REQUIRED)
  endif()
  target_link_libraries(${target} PRIVATE CUDA::cudart_static)
endfunction()
