#pragma once
// The CUDA driver, loaded at run time. Nothing in apgas links libcuda: a CUDA-enabled binary starts on a machine
// with no driver (or only the toolkit's stub library) and simply has zero GPU places.
//
// The table holds one pointer per driver function apgas uses, typed from cuda.h. cuda.h maps many names to versioned
// symbols with macros (cuMemAlloc -> cuMemAlloc_v2); the table's member names and the strings given to dlsym() go
// through the same macros, so each pointer is the ABI version its declaration in cuda.h describes.
//
// Errors (the split Kokkos documents, made explicit): a *sticky* error (illegal address, launch failure, hardware or
// ECC faults, a failed assert, a destroyed context, error containment, a terminated MPS client — every code cuda.h
// says needs the process to be restarted) poisons the context for good: the GPU place is dead and every later
// operation there raises dead_place_exception. Any other error (bad launch configuration, out of memory, invalid
// value) is an ordinary exception and the place stays usable.
//
// Contexts: apgas makes a GPU's primary context current only for the duration of one of its own calls, and puts back
// whatever the thread had current before (context_scope), so that the user's own CUDA code (runtime calls, cuBLAS,
// Thrust) inside an activity or after apgas::run sees the context it set, or none.

#include <cuda.h>

#include <string>

namespace apgas::detail::gpu {

#define APGAS_DETAIL_CUDA_FUNCTIONS(X)                                                                          \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet)    \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceCanAccessPeer)                      \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent)              \
  X(cuCtxEnablePeerAccess) X(cuDeviceGetDefaultMemPool) X(cuMemPoolSetAccess) X(cuMemPoolSetAttribute)        \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)     \
  X(cuStreamWaitEvent) X(cuEventElapsedTime) X(cuStreamSynchronize) X(cuCtxSynchronize)                         \
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

/// The CUDA version this apgas was built with (cuda.h's CUDA_VERSION: 13000 for 13.0).
inline constexpr int built_cuda_version = CUDA_VERSION;

/// The driver of this process: loaded and initialised (cuInit) on the first call, the same object afterwards. Null
/// when it cannot be used; `why` then says why (no library, a missing symbol, cuInit's error — e.g. the toolkit's
/// stub library, or no device — or a driver older than the CUDA major version apgas was built with, on which no
/// kernel of this build could run). The library is APGAS_CUDA_DRIVER if set (tests use a fake), else libcuda.so.1;
/// an APGAS_CUDA_DRIVER that cannot be loaded throws config_error instead.
const driver* load_driver(std::string& why);

/// Why a driver that supports CUDA `driver_version` cannot run what was built with CUDA `built_version` (empty when it
/// can): a driver runs programs of its own CUDA major version and older ones (minor-version compatibility within a
/// major version), never newer majors. Versions as cuDriverGetVersion gives them (12080 = 12.8).
std::string driver_too_old(int driver_version, int built_version);

/// "12.8" for 12080.
std::string cuda_version_text(int version);

/// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string error_text(const driver& d, CUresult r);
/// True for the errors after which the context cannot be used any more.
bool is_sticky(CUresult r) noexcept;

/// Makes `ctx` current on the calling thread for the scope's life and then puts back what was current before. Never
/// held across a park: an activity may resume on another thread. result() is the cuCtxSetCurrent result (success when
/// ctx was current already).
class context_scope {
 public:
  context_scope(const driver& d, CUcontext ctx) noexcept : d_(d) {
    if (d_.cuCtxGetCurrent(&previous_) != CUDA_SUCCESS) previous_ = nullptr;
    if (previous_ == ctx) return;
    result_ = d_.cuCtxSetCurrent(ctx);
    switched_ = result_ == CUDA_SUCCESS;
  }
  ~context_scope() {
    if (switched_) d_.cuCtxSetCurrent(previous_);
  }
  context_scope(const context_scope&) = delete;
  context_scope& operator=(const context_scope&) = delete;
  CUresult result() const noexcept { return result_; }

 private:
  const driver& d_;
  CUcontext previous_ = nullptr;
  CUresult result_ = CUDA_SUCCESS;
  bool switched_ = false;
};

}  // namespace apgas::detail::gpu
