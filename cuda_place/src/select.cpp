// The one composition point of the GPU backend: make_accelerator() gives the CUDA backend when it is built in
// (APGAS_HAVE_CUDA) and a backend without GPUs otherwise; pinned host memory comes from the driver when one loads.
#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#if APGAS_HAVE_CUDA
#include "driver.hpp"
#include "gpu_share.hpp"
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace apgas::detail {

#if APGAS_HAVE_CUDA
namespace gpu {
/// The CUDA backend (backend.cpp); first_gpu: the ordinal of its first GPU place, -1 when it has none.
std::unique_ptr<accelerator> make_cuda_accelerator(const config& cfg, int& first_gpu);
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
  int make_queue(int) override { none(); }
  void release_queue(int, int) noexcept override {}
  void queue_put(int, int, std::uintptr_t, const void*, std::size_t, finish_token&) override { none(); }
  void queue_get(int, int, void*, std::uintptr_t, std::size_t, finish_token&) override { none(); }
  void queue_copy(int, int, int, std::uintptr_t, int, std::uintptr_t, std::size_t, finish_token&) override { none(); }
  void queue_drain(int, int) override { none(); }

 private:
  std::string why_;
};

// Blocks from pinned_alloc: address -> its bytes, alignment and whether it is page-locked (those take the direct DMA
// path; the others are ordinary memory, given back with the alignment they were made with).
struct block {
  std::size_t bytes;
  std::size_t align;
  bool locked;
};
struct block_table {
  std::mutex mutex;
  std::map<std::uintptr_t, block> blocks;
};
block_table& blocks() {
  static block_table t;
  return t;
}

#if APGAS_HAVE_CUDA
// Page-locked memory needs a context: the primary context of the first GPU place of the latest run that made the
// CUDA accelerator (pin_gpu), or, before any run, of the first GPU the environment's APGAS_GPUS would choose. It is
// retained once and for good (a pinned block lives as long as its context). Without a GPU to use, no context is made
// and pinned vectors are ordinary memory (there is no GPU to copy to). Portable allocations are pinned for every
// context. The context is current only for the driver call (context_scope): never left current for the user's code.
std::atomic<int> g_pin_gpu{-2};  // the latest run's first GPU place's ordinal; -1: none; -2: no run yet

int pin_device(const gpu::driver& d) {
  const int from_run = g_pin_gpu.load(std::memory_order_acquire);
  if (from_run != -2) return from_run;
  try {
    const config c = config::from_env();
    int n = 0;
    if (c.gpus == "none" || d.cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) return -1;
    if (c.all_gpus()) return 0;
    if (c.gpus == "auto") {
      const gpu::node_rank local = gpu::node_local_rank([](const char* v) -> const char* { return std::getenv(v); });
      return gpu::node_share(n, local.rank, local.size).front();
    }
    const std::vector<int> l = c.gpu_list();
    return l.empty() || l.front() >= n ? -1 : l.front();
  } catch (const config_error&) {
    return -1;  // reported at start-up; here ordinary memory will do
  }
}

struct pin_state {
  std::mutex mutex;
  CUcontext ctx = nullptr;  // (mutex) once made, for good
};
pin_state& pinning() {
  static pin_state s;
  return s;
}

const gpu::driver* usable_driver() {
  std::string why;
  try {
    return gpu::load_driver(why);
  } catch (const config_error&) {
    return nullptr;  // reported at start-up; here ordinary memory will do
  }
}

CUcontext pin_context(const gpu::driver& d) {
  pin_state& s = pinning();
  std::lock_guard lock(s.mutex);
  if (s.ctx == nullptr) {
    const int ordinal = pin_device(d);
    CUdevice dev = 0;
    CUcontext c = nullptr;
    if (ordinal >= 0 && d.cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS &&
        d.cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS) {
      s.ctx = c;
    }
  }
  return s.ctx;
}

void* pin(std::size_t bytes) {
  const gpu::driver* d = usable_driver();
  if (d == nullptr) return nullptr;
  const CUcontext ctx = pin_context(*d);
  if (ctx == nullptr) return nullptr;
  const gpu::context_scope scope(*d, ctx);
  void* p = nullptr;
  if (scope.result() != CUDA_SUCCESS || d->cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
    return nullptr;
  }
  return p;
}

// In the context that pinned it. A failure cannot be reported from a deallocation: the block stays pinned (and in
// use by nobody) rather than being handed to the ordinary heap.
void unpin(void* p) {
  const gpu::driver* d = usable_driver();
  if (d == nullptr) return;
  const gpu::context_scope scope(*d, pin_context(*d));
  if (scope.result() == CUDA_SUCCESS) d->cuMemFreeHost(p);
}
#else
void* pin(std::size_t) { return nullptr; }
void unpin(void*) {}
#endif

}  // namespace

std::unique_ptr<accelerator> make_accelerator(const config& cfg) {
#if APGAS_HAVE_CUDA
  int first = -1;
  std::unique_ptr<accelerator> a = gpu::make_cuda_accelerator(cfg, first);
  g_pin_gpu.store(first, std::memory_order_release);
  return a;
#else
  if (!cfg.all_gpus() && cfg.gpus != "none" && cfg.gpus != "auto") {
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

void* pinned_alloc(std::size_t bytes, std::size_t align) {
  bytes = bytes == 0 ? 1 : bytes;
  align = align < 64 ? 64 : align;
  // Page-locked memory from the driver is page-aligned: enough for any type aligned to at most a page. A type aligned
  // to more gets ordinary memory with its alignment (its copies go through the spooler).
  void* p = align <= 4096 ? pin(bytes) : nullptr;
  const bool locked = p != nullptr;
  if (!locked) p = ::operator new(bytes, std::align_val_t{align});
  try {
    auto& t = blocks();
    std::lock_guard lock(t.mutex);
    t.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, align, locked};
  } catch (...) {  // (the table's node could not be made)
    if (locked) {
      unpin(p);
    } else {
      ::operator delete(p, std::align_val_t{align});
    }
    throw;
  }
  return p;
}

void pinned_free(void* p) noexcept {
  if (p == nullptr) return;
  block b{};
  {
    auto& t = blocks();
    std::lock_guard lock(t.mutex);
    auto it = t.blocks.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == t.blocks.end()) return;  // not ours: never freed twice, never freed wrongly
    b = it->second;
    t.blocks.erase(it);
  }
  if (b.locked) {
    unpin(p);
  } else {
    ::operator delete(p, std::align_val_t{b.align});
  }
}

bool is_pinned(const void* p, std::size_t bytes) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto& t = blocks();
  std::lock_guard lock(t.mutex);
  auto it = t.blocks.upper_bound(a);
  if (it == t.blocks.begin()) return false;
  --it;
  const block& b = it->second;
  return b.locked && a - it->first <= b.bytes && bytes <= b.bytes - (a - it->first);
}

}  // namespace apgas::detail
