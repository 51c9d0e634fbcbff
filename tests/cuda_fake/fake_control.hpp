#pragma once
// Test-side access to the fake CUDA driver (tests/cuda_fake/fake_cuda.cpp): its apgas_fake_cuda_* control functions
// and, for tests of the fake itself, its Driver API functions. The library is the one APGAS_CUDA_DRIVER names, the
// very instance the backend loaded (dlopen with RTLD_NOLOAD finds it; if the backend has not loaded it yet, it is
// loaded here with the backend's flags, and the backend's dlopen will then return the same instance).
#include "cuda_fake/fake_trace.h"

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace apgas_test {

class fake_cuda {
 public:
  static fake_cuda& get() {
    static fake_cuda f;
    return f;
  }

  int (*fail)(int device, int cuda_error) = nullptr;
  int (*fail_next)(int device, const char* function, int cuda_error, int count) = nullptr;
  int (*stall_next)(int device, const char* function, int us, int count) = nullptr;
  int (*pause)(int device, int paused) = nullptr;
  void (*set_delay_us)(int us) = nullptr;
  int (*delay_us)() = nullptr;
  void (*reset)() = nullptr;
  long long (*counter)(int device, const char* name) = nullptr;
  int (*device_error)(int device) = nullptr;
  int (*last_fault_into)(char* buf, int size) = nullptr;
  int (*peek)(int device, unsigned long long address, void* dst, std::size_t n) = nullptr;
  int (*poke)(int device, unsigned long long address, const void* src, std::size_t n) = nullptr;
  int (*synchronize)(int device) = nullptr;
  int (*set_driver_version)(int version) = nullptr;
  int (*set_static_shared)(const void* function, int bytes) = nullptr;
  int (*trace)(int device, int on) = nullptr;
  long (*trace_read)(int device, apgas_fake_cuda_trace_entry* out, long max) = nullptr;
  int (*watch)(int device, unsigned long long address) = nullptr;
  int (*pool_access)(int device, int peer) = nullptr;
  unsigned long long (*pool_release_threshold)(int device) = nullptr;
  int (*current_device)() = nullptr;

  std::string last_fault() const {
    char buf[1024] = {};
    last_fault_into(buf, sizeof buf);
    return buf;
  }

  /// n elements of device memory at `address` of `device`, read directly (a failed test and an empty vector if the
  /// range is not inside one live allocation).
  template <class T>
  std::vector<T> read(int device, std::uintptr_t address, std::size_t n) const {
    std::vector<T> out(n);
    const int rc = peek(device, address, out.data(), n * sizeof(T));
    if (rc != 0) {
      ADD_FAILURE() << "fake CUDA: " << n * sizeof(T) << " bytes at " << address << " are not device memory of device "
                    << device;
      return {};
    }
    return out;
  }

  /// Device `device`'s trace so far (apgas_fake_cuda_trace), in order.
  std::vector<apgas_fake_cuda_trace_entry> trace_of(int device) const {
    std::vector<apgas_fake_cuda_trace_entry> out(static_cast<std::size_t>(std::max(trace_read(device, nullptr, 0), 0L)));
    const long n = trace_read(device, out.data(), static_cast<long>(out.size()));
    out.resize(static_cast<std::size_t>(std::min<long>(std::max(n, 0L), static_cast<long>(out.size()))));
    return out;
  }

  /// A driver function of the fake, by its cuda.h name (through the same macros as the backend uses).
  void* symbol(const char* name) const { return dlsym(handle_, name); }

  const std::string& path() const { return path_; }

 private:
  fake_cuda() {
    const char* env = std::getenv("APGAS_CUDA_DRIVER");
    if (env == nullptr || *env == '\0') {
      ADD_FAILURE() << "APGAS_CUDA_DRIVER is not set: run this test through ctest (it names the fake driver)";
      std::abort();
    }
    path_ = env;
    handle_ = dlopen(env, RTLD_NOW | RTLD_NOLOAD);
    if (handle_ == nullptr) handle_ = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      ADD_FAILURE() << "cannot load the fake CUDA driver " << env << ": " << dlerror();
      std::abort();
    }
    bind(fail, "apgas_fake_cuda_fail");
    bind(fail_next, "apgas_fake_cuda_fail_next");
    bind(stall_next, "apgas_fake_cuda_stall_next");
    bind(pause, "apgas_fake_cuda_pause");
    bind(set_delay_us, "apgas_fake_cuda_set_delay_us");
    bind(delay_us, "apgas_fake_cuda_delay_us");
    bind(reset, "apgas_fake_cuda_reset");
    bind(counter, "apgas_fake_cuda_counter");
    bind(device_error, "apgas_fake_cuda_device_error");
    bind(last_fault_into, "apgas_fake_cuda_last_fault");
    bind(peek, "apgas_fake_cuda_peek");
    bind(poke, "apgas_fake_cuda_poke");
    bind(synchronize, "apgas_fake_cuda_synchronize");
    bind(set_driver_version, "apgas_fake_cuda_set_driver_version");
    bind(set_static_shared, "apgas_fake_cuda_set_static_shared");
    bind(trace, "apgas_fake_cuda_trace");
    bind(trace_read, "apgas_fake_cuda_trace_read");
    bind(watch, "apgas_fake_cuda_watch");
    bind(pool_access, "apgas_fake_cuda_pool_access");
    bind(pool_release_threshold, "apgas_fake_cuda_pool_release_threshold");
    bind(current_device, "apgas_fake_cuda_current_device");
  }
  template <class F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle_, name));
    if (f == nullptr) {
      ADD_FAILURE() << "the fake CUDA driver " << path_ << " lacks " << name;
      std::abort();
    }
  }

  void* handle_ = nullptr;
  std::string path_;
};

inline fake_cuda& fake() { return fake_cuda::get(); }

/// Bytes that differ at every offset within a 64 KiB window and between seeds (a chunk copied to the wrong place, or
/// twice, shows).
inline std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
    v[i] = static_cast<std::uint8_t>(x >> 56);
  }
  return v;
}

}  // namespace apgas_test
