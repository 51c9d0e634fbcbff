#include "driver.hpp"

#include <apgas/error.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace apgas::detail::gpu {
namespace {

#define APGAS_DETAIL_STR2(x) #x
#define APGAS_DETAIL_STR(x) APGAS_DETAIL_STR2(x)

struct loaded {
  driver d;
  const driver* ok = nullptr;
  std::string why;
  bool config_failure = false;
};

loaded load() {
  loaded l;
  const char* env = std::getenv("APGAS_CUDA_DRIVER");
  const bool explicit_path = env != nullptr && *env != '\0';
  l.d.path = explicit_path ? env : "libcuda.so.1";
  void* lib = dlopen(l.d.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = "no CUDA driver (" + (e != nullptr ? std::string(e) : l.d.path + " cannot be loaded") + ")";
    l.config_failure = explicit_path;
    return l;
  }
  // The library stays loaded for the life of the process (never dlclose'd: pointers into it live in static state).
#define APGAS_DETAIL_CUDA_LOAD(fn)                                                      \
  l.d.fn = reinterpret_cast<decltype(l.d.fn)>(dlsym(lib, APGAS_DETAIL_STR(fn)));         \
  if (l.d.fn == nullptr) {                                                              \
    l.why = "the CUDA driver " + l.d.path + " lacks " APGAS_DETAIL_STR(fn) " (too old?)"; \
    return l;                                                                           \
  }
  APGAS_DETAIL_CUDA_FUNCTIONS(APGAS_DETAIL_CUDA_LOAD)
#undef APGAS_DETAIL_CUDA_LOAD
  const CUresult r = l.d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    l.why = "the CUDA driver " + l.d.path + " did not initialise: " + error_text(l.d, r);
    return l;
  }
  if (l.d.cuDriverGetVersion(&l.d.version) != CUDA_SUCCESS) l.d.version = 0;
  // A static CUDA runtime of a newer major version refuses to run on this driver (cudaErrorInsufficientDriver on
  // every kernel), and its PTX cannot be JIT-compiled by it either: no GPU places, and the reason.
  l.why = driver_too_old(l.d.version, built_cuda_version);
  if (l.why.empty()) l.ok = &l.d;
  return l;
}

}  // namespace

const driver* load_driver(std::string& why) {
  static loaded l = load();  // once per process (thread-safe static initialisation)
  if (l.config_failure) {
    throw config_error("invalid APGAS_CUDA_DRIVER='" + l.d.path + "': " + l.why);
  }
  why = l.why;
  return l.ok;
}

std::string error_text(const driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName == nullptr || d.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.cuGetErrorString == nullptr || d.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  std::string s = name != nullptr ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text != nullptr) s += std::string(" (") + text + ")";
  return s;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string driver_too_old(int driver_version, int built_version) {
  if (driver_version / 1000 >= built_version / 1000) return {};
  return "the CUDA driver supports CUDA " + cuda_version_text(driver_version) + ", but apgas was built with CUDA " +
         cuda_version_text(built_version) + ", which needs a driver for CUDA " + std::to_string(built_version / 1000) +
         ".0 or newer (update the NVIDIA driver, or build apgas and the program with an older CUDA toolkit)";
}

bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_UNKNOWN:
    // cuda.h (CUDA 13): "To continue using CUDA, the process must be terminated and relaunched."
    case CUDA_ERROR_CONTAINED:               // 226: NVLink/hardware error containment (e.g. a bad peer access)
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:      // 721
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:   // 810
    case CUDA_ERROR_EXTERNAL_DEVICE:         // 911
      return true;
    default:
      return false;
  }
}

}  // namespace apgas::detail::gpu
