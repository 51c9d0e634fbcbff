// The CUDA backend: one GPU place per selected device of this host (device.hpp: one GPU), driven through the Driver
// API. This file chooses the devices (APGAS_GPUS, or by default this process's node-local share: gpu_share.hpp),
// makes them, enables peer access between them, and polls them from the core's progress hook.
#include "device.hpp"
#include "driver.hpp"
#include "gpu_share.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace apgas::detail::gpu {
namespace {

// ---- the accelerator ----

class cuda_accelerator final : public accelerator {
 public:
  explicit cuda_accelerator(const config& cfg) {
    const driver* d = load_driver(why_none_);  // throws config_error for an APGAS_CUDA_DRIVER that cannot load
    const std::vector<int> listed = cfg.gpu_list();
    if (cfg.gpus == "none") {
      why_none_ = "APGAS_GPUS=none";
      return;
    }
    int n = 0;
    if (d != nullptr) {
      const CUresult r = d->cuDeviceGetCount(&n);
      if (r != CUDA_SUCCESS) {
        why_none_ = "cuDeviceGetCount failed: " + error_text(*d, r);
        n = 0;
      } else if (n == 0) {
        why_none_ = "the CUDA driver sees no device";
      }
    }
    std::vector<int> chosen;
    if (cfg.all_gpus()) {
      for (int i = 0; i < n; ++i) chosen.push_back(i);
    } else if (cfg.gpus == "auto") {
      const node_rank local = node_local_rank([](const char* v) -> const char* { return std::getenv(v); });
      chosen = node_share(n, local.rank, local.size);
    } else {
      for (int i : listed) {
        if (i >= n) {
          throw config_error("invalid APGAS_GPUS='" + cfg.gpus + "': GPU " + std::to_string(i) +
                             " does not exist on this host, which has " + std::to_string(n) + " GPU" +
                             (n == 1 ? "" : "s") + (n == 0 ? " (" + why_none_ + ")" : std::string()));
        }
        chosen.push_back(i);
      }
    }
    if (chosen.empty()) return;  // (then d may be null: no driver)
    driver_ = d;
    const int slices = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
    for (int i : chosen) {
      devices_.push_back(std::make_unique<device>(*d, i, cfg.cuda_dma_slice, slices, cfg.cuda_direct_copy, demand_));
    }
    enable_peer_access(*d);
  }

  /// The ordinal of the first GPU place, -1 when there is none.
  int first_ordinal() const noexcept { return devices_.empty() ? -1 : devices_.front()->ordinal(); }

  int count() const noexcept override { return static_cast<int>(devices_.size()); }
  std::string describe(int gpu) const override {
    return gpu < 0 ? why_none_ : devices_[static_cast<std::size_t>(gpu)]->description();
  }
  void start(int first_place) override {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      devices_[i]->set_place(first_place + static_cast<int>(i));
      devices_[i]->begin_run();
    }
    // Polled only while GPU work is in flight: otherwise idle workers may sleep (no CPU burnt on a GPU host).
    if (!devices_.empty()) hook_ = add_progress_hook(&poll_all, this, &demand_);
  }
  void stop() override {
    if (hook_ >= 0) remove_progress_hook(hook_);
    hook_ = -1;
  }
  bool renew() const noexcept override {
    bool revivable = false;
    for (const auto& d : devices_) {
      bool sticky = false;
      if (!d->dead(sticky)) continue;
      if (sticky) return false;  // (a new accelerator could not make this one's context: the run would not start)
      revivable = true;
    }
    return revivable;
  }
  void launch(int gpu, gpu_kernel_request& r) override { dev(gpu).launch(r); }
  std::uintptr_t alloc(int gpu, std::size_t bytes) override { return dev(gpu).alloc(bytes); }
  void free(int gpu, std::uintptr_t address) override { dev(gpu).free(address); }
  void put(int gpu, std::uintptr_t dst, const void* src, std::size_t n) override { dev(gpu).put(dst, src, n); }
  void get(int gpu, void* dst, std::uintptr_t src, std::size_t n) override { dev(gpu).get(dst, src, n); }
  void copy(int src_gpu, std::uintptr_t src, int dst_gpu, std::uintptr_t dst, std::size_t n) override {
    dev(src_gpu).copy_to(dev(dst_gpu), dst, src, n);
  }
  int make_queue(int gpu) override { return dev(gpu).make_queue(); }
  void release_queue(int gpu, int q) noexcept override { dev(gpu).release_queue(q); }
  void queue_put(int gpu, int q, std::uintptr_t dst, const void* src, std::size_t n, finish_token& t) override {
    dev(gpu).queue_put(q, dst, src, n, t);
  }
  void queue_get(int gpu, int q, void* dst, std::uintptr_t src, std::size_t n, finish_token& t) override {
    dev(gpu).queue_get(q, dst, src, n, t);
  }
  void queue_copy(int gpu, int q, int src_gpu, std::uintptr_t src, int dst_gpu, std::uintptr_t dst, std::size_t n,
                  finish_token& t) override {
    dev(gpu).queue_copy(q, dev(src_gpu), src, dev(dst_gpu), dst, n, t);
  }
  void queue_drain(int gpu, int q) override { dev(gpu).queue_drain(q); }

 private:
  device& dev(int gpu) { return *devices_[static_cast<std::size_t>(gpu)]; }

  // One poll of every GPU with work pending. A GPU makes its context current if it is not; the thread's own (the
  // user's, or none) is put back at the end, and only if a GPU was polled: an idle poll makes no driver call.
  static bool poll_all(void* self) {
    auto& devices = static_cast<cuda_accelerator*>(self)->devices_;
    bool progressed = false;
    bool entered = false;
    CUcontext own = nullptr, current = nullptr;
    for (auto& d : devices) {
      if (!d->has_pending()) continue;
      if (!entered) {
        entered = true;
        if (driver_->cuCtxGetCurrent(&own) != CUDA_SUCCESS) own = nullptr;
        current = own;
      }
      progressed = d->poll(current) || progressed;
    }
    if (entered && current != own) driver_->cuCtxSetCurrent(own);
    return progressed;
  }

  // Direct GPU-to-GPU copies where the hardware allows them (cuMemcpyPeerAsync stages the others), and access to each
  // other's memory pools (remote arrays and launch buffers come from them): kernels may read a peer's remote_array.
  // Failures only lose the direct path; they are not errors, but for a sticky one (device::optional_step).
  void enable_peer_access(const driver& d) {
    for (auto& a : devices_) {
      const context_scope scope(d, a->context());
      if (!a->optional_step(scope.result(), "cuCtxSetCurrent")) continue;
      CUmemoryPool pool = nullptr;
      const bool has_pool = a->pools() && d.cuDeviceGetDefaultMemPool(&pool, a->handle()) == CUDA_SUCCESS;
      if (!has_pool) pool = nullptr;
      for (auto& b : devices_) {
        int can = 0;
        if (a == b || d.cuDeviceCanAccessPeer(&can, b->handle(), a->handle()) != CUDA_SUCCESS || can == 0) continue;
        // b's context may access a's memory; b's kernels a's pool. "Already enabled" is fine.
        {
          const context_scope in_b(d, b->context());
          if (b->optional_step(in_b.result(), "cuCtxSetCurrent")) {
            b->optional_step(d.cuCtxEnablePeerAccess(a->context(), 0), "cuCtxEnablePeerAccess");
          }
        }
        if (pool != nullptr) {
          CUmemAccessDesc access{};
          access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
          access.location.id = b->ordinal();
          access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
          a->optional_step(d.cuMemPoolSetAccess(pool, &access, 1), "cuMemPoolSetAccess");
        }
      }
    }
  }

  static inline const driver* driver_ = nullptr;  // the one driver of the process (set by the first accelerator)
  std::string why_none_;
  std::atomic<int> demand_{0};  // operations in flight on all GPUs: the progress hook's demand (outlives devices_)
  std::vector<std::unique_ptr<device>> devices_;
  int hook_ = -1;
};

}  // namespace

std::unique_ptr<accelerator> make_cuda_accelerator(const config& cfg, int& first_gpu) {
  auto a = std::make_unique<cuda_accelerator>(cfg);
  first_gpu = a->first_ordinal();
  return a;
}

}  // namespace apgas::detail::gpu
