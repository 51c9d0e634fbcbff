#pragma once
// The CUDA driver, loaded at run time. Nothing in apgas links libcuda: a CUDA-enabled binary starts on a machine
// with no driver (or only the toolkit's stub library) and simply has zero GPU places.
//
// The table holds one pointer per driver function apgas uses, typed from cuda.h. cuda.h maps many names to versioned
// symbols with macros (cuMemAlloc -> cuMemAlloc_v2); the table's member names and the strings given to dlsym() go
// through the same macros, so each pointer is the ABI version its declaration in cuda.h describes.
//
// Errors (the split Kokkos documents, made explicit): a *sticky* error (illegal address, launch failure, hardware or
// ECC faults, a failed assert, a destroyed context) poisons the context for good: the GPU place is dead and every later
// operation there raises dead_place_exception. Any other error (bad launch configuration, out of memory, invalid
// value) is an ordinary exception and the place stays usable.

#include <cuda.h>

#include <string>

namespace apgas::detail::gpu {

#define APGAS_DETAIL_CUDA_FUNCTIONS(X)                                                                          \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet)    \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceCanAccessPeer)                      \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxEnablePeerAccess)         \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)     \
  X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemsetD8Async) X(cuMemHostAlloc)          \
  X(cuMemFreeHost) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync)          \
  X(cuLaunchKernel) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuOccupancyMaxPotentialBlockSize)            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuMemGetInfo)

struct driver {
#define APGAS_DETAIL_CUDA_MEMBER(fn) decltype(&::fn) fn = nullptr;
  APGAS_DETAIL_CUDA_FUNCTIONS(APGAS_DETAIL_CUDA_MEMBER)
#undef APGAS_DETAIL_CUDA_MEMBER
  std::string path;  ///< the library that was loaded
  int version = 0;   ///< cuDriverGetVersion
};

/// The driver of this process: loaded and initialised (cuInit) on the first call, the same object afterwards. Null
/// when it cannot be used; `why` then says why (no library, a missing symbol, cuInit's error — e.g. the toolkit's
/// stub library, or no device). The library is APGAS_CUDA_DRIVER if set (tests use a fake), else libcuda.so.1;
/// an APGAS_CUDA_DRIVER that cannot be loaded throws config_error instead.
const driver* load_driver(std::string& why);

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string error_text(const driver& d, CUresult r);
/// True for the errors after which the context cannot be used any more.
bool is_sticky(CUresult r) noexcept;

}  // namespace apgas::detail::gpu
