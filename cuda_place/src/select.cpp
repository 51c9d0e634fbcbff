// The one composition point of the GPU backend: make_accelerator() gives the CUDA backend when it is built in
// (APGAS_HAVE_CUDA) and a backend without GPUs otherwise; pinned host memory comes from the driver when one loads.
#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#if APGAS_HAVE_CUDA
#include "driver.hpp"
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace apgas::detail {

#if APGAS_HAVE_CUDA
namespace gpu {
std::unique_ptr<accelerator> make_cuda_accelerator(const config& cfg);
}
#endif

namespace {

// A backend with no GPUs (a build without CUDA): every GPU operation is unreachable, since no GPU place exists.
class no_accelerator final : public accelerator {
 public:
  explicit no_accelerator(std::string why) : why_(std::move(why)) {}
  int count() const noexcept override { return 0; }
  std::string describe(int) const override { return why_; }
  void start(int) override {}
  void stop() override {}
  [[noreturn]] static void none() { throw illegal_operation_exception("apgas: this host has no GPU places"); }
  void launch(int, gpu_kernel_request&) override { none(); }
  std::uintptr_t alloc(int, std::size_t) override { none(); }
  void free(int, std::uintptr_t) override { none(); }
  void put(int, std::uintptr_t, const void*, std::size_t) override { none(); }
  void get(int, void*, std::uintptr_t, std::size_t) override { none(); }
  void copy(int, std::uintptr_t, int, std::uintptr_t, std::size_t) override { none(); }

 private:
  std::string why_;
};

// Blocks from pinned_alloc: address -> (bytes, page-locked?). Page-locked blocks take the direct DMA path.
struct block_table {
  std::mutex mutex;
  std::map<std::uintptr_t, std::pair<std::size_t, bool>> blocks;
};
block_table& blocks() {
  static block_table t;
  return t;
}

#if APGAS_HAVE_CUDA
// Page-locked memory needs a context on some drivers: the primary context of the first GPU that APGAS_GPUS selects
// (device 0 for "all"), retained once. With APGAS_GPUS=none no context is created and no memory is pinned: pinned
// vectors are then ordinary memory (there is no GPU to copy to). Portable allocations are pinned for every context.
int pin_device() {
  try {
    const config c = config::from_env();
    if (c.all_gpus()) return 0;
    const std::vector<int> l = c.gpu_list();
    return l.empty() ? -1 : l.front();
  } catch (const config_error&) {
    return -1;  // reported at start-up; here ordinary memory will do
  }
}

void* pin(std::size_t bytes) {
  std::string why;
  const gpu::driver* d = nullptr;
  try {
    d = gpu::load_driver(why);
  } catch (const config_error&) {
    return nullptr;  // reported at start-up; here ordinary memory will do
  }
  if (d == nullptr) return nullptr;
  static const CUcontext ctx = [d] {
    const int ordinal = pin_device();
    int n = 0;
    CUdevice dev = 0;
    CUcontext c = nullptr;
    const bool ok = ordinal >= 0 && d->cuDeviceGetCount(&n) == CUDA_SUCCESS && ordinal < n &&
                    d->cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS &&
                    d->cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS;
    return ok ? c : nullptr;
  }();
  if (ctx == nullptr || d->cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return nullptr;  // current on the calling thread
  void* p = nullptr;
  if (d->cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) return nullptr;
  return p;
}
void unpin(void* p) {
  std::string why;
  if (const gpu::driver* d = gpu::load_driver(why)) d->cuMemFreeHost(p);
}
#else
void* pin(std::size_t) { return nullptr; }
void unpin(void*) {}
#endif

}  // namespace

std::unique_ptr<accelerator> make_accelerator(const config& cfg) {
#if APGAS_HAVE_CUDA
  return gpu::make_cuda_accelerator(cfg);
#else
  if (!cfg.all_gpus() && cfg.gpus != "none") {
    throw config_error("invalid APGAS_GPUS='" + cfg.gpus + "': this build of apgas has no GPU backend "
                       "(configure with APGAS_WITH_CUDA=ON)");
  }
  return std::make_unique<no_accelerator>("this build of apgas has no GPU backend (APGAS_WITH_CUDA=OFF)");
#endif
}

const char* built_accelerators() noexcept {
#if APGAS_HAVE_CUDA
  return "cuda";
#else
  return "";
#endif
}

void* pinned_alloc(std::size_t bytes) {
  bytes = bytes == 0 ? 1 : bytes;
  bool locked = true;
  void* p = pin(bytes);
  if (p == nullptr) {
    locked = false;
    p = ::operator new(bytes, std::align_val_t{64});
  }
  auto& t = blocks();
  std::lock_guard lock(t.mutex);
  t.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, locked};
  return p;
}

void pinned_free(void* p) noexcept {
  if (p == nullptr) return;
  bool locked = false;
  {
    auto& t = blocks();
    std::lock_guard lock(t.mutex);
    auto it = t.blocks.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == t.blocks.end()) return;  // not ours: never freed twice, never freed wrongly
    locked = it->second.second;
    t.blocks.erase(it);
  }
  if (locked) {
    unpin(p);
  } else {
    ::operator delete(p, std::align_val_t{64});
  }
}

bool is_pinned(const void* p, std::size_t bytes) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto& t = blocks();
  std::lock_guard lock(t.mutex);
  auto it = t.blocks.upper_bound(a);
  if (it == t.blocks.begin()) return false;
  --it;
  const auto [size, locked] = it->second;
  return locked && a - it->first <= size && bytes <= size - (a - it->first);
}

}  // namespace apgas::detail
