// GPU places in the core: the accelerator of this process, the GPU part of the place tree, and the entry points the
// templates call (detail/gpu.hpp), which check the place and forward to the backend.
//
// Invariants: g_active is set between gpu_start and gpu_stop (a run) and is the only accelerator then; the GPU places
// of this host are g_first .. g_first + g_active->count() - 1. The accelerator object lives from the first run that
// needs it to the end of the process (it is never destroyed at exit: the CUDA driver may already be shutting down
// then); a later run with another GPU configuration replaces it. g_arrays holds one registry per GPU of this host
// during a run (the remote arrays made there: address, size, serial), so that a copy or free through a handle whose
// array was freed is refused here, before the backend sees it, as for a host place's arrays (array_registry.hpp).
// Serials are unique in the process, not only in a run: a handle kept from an earlier run (whose arrays gpu_stop
// freed) is refused even where a new array has its address. g_queues holds the in-order queues made in the run and
// not yet released, each once: a queue is released once, by its handle in its run or by gpu_stop (so a stream id is
// never on the backend's free list twice).
#include "array_registry.hpp"
#include "gpu_runtime.hpp"

#include "obs.hpp"
#include "runtime.hpp"
#include "scheduler.hpp"

#include <apgas/detail/gpu.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace apgas::detail {
namespace {

struct holder {
  accelerator* acc = nullptr;
  std::string gpus;
  std::size_t slice = 0;
  std::size_t direct_copy = 0;
};
holder g_holder;
accelerator* g_active = nullptr;
int g_first = 0;
std::mutex g_arrays_mutex;
std::vector<array_registry> g_arrays;  // by local GPU index, during a run
std::uint32_t g_last_serial = 0;        // (under g_arrays_mutex) the highest serial given in an earlier run
std::vector<std::pair<int, int>> g_queues;  // (under g_arrays_mutex) the queues of this run not released: (GPU, id)

std::string gpu_name(place p) { return "GPU place " + std::to_string(p.id()); }

// Bytes [addr, addr + n) of GPU place p (local index g) lie in a live array, the one made with `serial` unless 0.
void check_array(place p, int g, std::uintptr_t addr, std::size_t n, std::uint32_t serial, const char* what) {
  if (n == 0) return;
  std::lock_guard lock(g_arrays_mutex);
  g_arrays[static_cast<std::size_t>(g)].check(addr, n, serial, what, gpu_name(p));
}

// The local index of GPU place p; p must be a GPU place of this host (the templates route other hosts' GPUs).
int local_gpu(place p, const char* what) {
  check_place(p, what);
  if (!p.is_cuda()) {
    throw illegal_operation_exception(std::string(what) + ": place " + std::to_string(p.id()) + " is not a GPU place");
  }
  if (g_active == nullptr || p.id() < g_first || p.id() >= g_first + g_active->count()) {
    throw illegal_operation_exception(std::string(what) + ": GPU place " + std::to_string(p.id()) +
                                      " belongs to host " + std::to_string(p.parent().id()) + ", not to this host " +
                                      std::to_string(tree().here_host));
  }
  return p.id() - g_first;
}

}  // namespace

accelerator& accelerator_for_run(const config& cfg) {
  holder& h = g_holder;
  // (a GPU that died of an error that is not sticky is not carried into a later run as a dead place: renew())
  if (h.acc == nullptr || h.gpus != cfg.gpus || h.slice != cfg.cuda_dma_slice ||
      h.direct_copy != cfg.cuda_direct_copy || h.acc->renew()) {
    std::unique_ptr<accelerator> fresh = make_accelerator(cfg);
    delete h.acc;
    h.acc = fresh.release();
    h.gpus = cfg.gpus;
    h.slice = cfg.cuda_dma_slice;
    h.direct_copy = cfg.cuda_direct_copy;
  }
  return *h.acc;
}

void gpu_start(accelerator& acc, int first_place) {
  g_first = first_place;
  g_active = &acc;
  {
    std::lock_guard lock(g_arrays_mutex);
    g_arrays.assign(static_cast<std::size_t>(acc.count()), array_registry(g_last_serial));
  }
  acc.start(first_place);
}

void gpu_stop() {
  if (g_active == nullptr) return;
  // Queues and arrays whose handles outlive the run: their streams go back, the arrays are freed (a GPU's memory
  // does not outlive the run; the accelerator may not either). The arrays' serials are not given again in a later
  // run (g_last_serial), whose registries, like its queues, refuse the handles.
  std::vector<std::pair<int, std::uintptr_t>> left;
  {
    std::lock_guard lock(g_arrays_mutex);
    for (const auto& [g, q] : g_queues) g_active->release_queue(g, q);
    g_queues.clear();
    for (std::size_t g = 0; g < g_arrays.size(); ++g) {
      g_arrays[g].for_each([&](std::uintptr_t base) { left.emplace_back(static_cast<int>(g), base); });
      g_last_serial = std::max(g_last_serial, g_arrays[g].last_serial());
    }
    g_arrays.clear();
  }
  for (const auto& [g, base] : left) {
    try {
      g_active->free(g, base);
    } catch (...) {  // (a GPU that died: its memory went with its context)
    }
  }
  g_active->stop();
  g_active = nullptr;
}

void gpu_launch(place p, gpu_kernel_request& r) {
  const int g = local_gpu(p, "apgas::async_at (kernel)");
  require_unrestricted_activity("apgas::async_at (kernel)");
  g_active->launch(g, r);
  if (obs::on(obs::stats)) obs::stat_kernel(p.id());
}

array_token gpu_alloc(place p, std::size_t bytes) {
  const int g = local_gpu(p, "apgas::make_remote_array");
  const std::uintptr_t a = g_active->alloc(g, bytes);
  try {
    std::lock_guard lock(g_arrays_mutex);
    return {a, g_arrays[static_cast<std::size_t>(g)].add(a, bytes)};
  } catch (...) {  // (no memory for the registry's node)
    g_active->free(g, a);
    throw;
  }
}

void gpu_free(place p, std::uintptr_t address, std::uint32_t serial) {
  const int g = local_gpu(p, "apgas::free_remote_array");
  {
    std::lock_guard lock(g_arrays_mutex);
    (void)g_arrays[static_cast<std::size_t>(g)].expect(address, serial, "apgas::free_remote_array", gpu_name(p));
  }
  g_active->free(g, address);  // (a free that fails leaves the array: it stays registered)
  std::lock_guard lock(g_arrays_mutex);
  (void)g_arrays[static_cast<std::size_t>(g)].remove(address, serial, "apgas::free_remote_array", gpu_name(p));
}

void gpu_put(place p, std::uintptr_t dst, std::uint32_t dst_serial, const void* src, std::size_t bytes) {
  const int g = local_gpu(p, "apgas::async_copy");
  require_unrestricted_activity("apgas::async_copy");
  check_array(p, g, dst, bytes, dst_serial, "apgas::async_copy");
  g_active->put(g, dst, src, bytes);
  if (obs::on(obs::stats)) obs::stat_copy(p.id(), 0, bytes);
}

void gpu_get(place p, void* dst, std::uintptr_t src, std::uint32_t src_serial, std::size_t bytes) {
  const int g = local_gpu(p, "apgas::async_copy");
  require_unrestricted_activity("apgas::async_copy");
  check_array(p, g, src, bytes, src_serial, "apgas::async_copy");
  g_active->get(g, dst, src, bytes);
  if (obs::on(obs::stats)) obs::stat_copy(p.id(), 1, bytes);
}

void gpu_copy(place src_place, std::uintptr_t src, std::uint32_t src_serial, place dst_place, std::uintptr_t dst,
              std::uint32_t dst_serial, std::size_t bytes) {
  const int s = local_gpu(src_place, "apgas::async_copy");
  const int d = local_gpu(dst_place, "apgas::async_copy");
  require_unrestricted_activity("apgas::async_copy");
  check_array(src_place, s, src, bytes, src_serial, "apgas::async_copy");
  check_array(dst_place, d, dst, bytes, dst_serial, "apgas::async_copy");
  g_active->copy(s, src, d, dst, bytes);
  if (obs::on(obs::stats)) obs::stat_copy(src_place.id(), 2, bytes);
}

int gpu_make_queue(place p) {
  const int g = local_gpu(p, "apgas::in_order");
  const int q = g_active->make_queue(g);
  try {
    std::lock_guard lock(g_arrays_mutex);
    g_queues.emplace_back(g, q);
  } catch (...) {
    g_active->release_queue(g, q);
    throw;
  }
  return q;
}

void gpu_release_queue(place p, int queue) noexcept {
  if (g_active == nullptr || !p.is_cuda()) return;  // the run is over: gpu_stop released its queues
  const int g = p.id() - g_first;
  {
    std::lock_guard lock(g_arrays_mutex);
    const auto it = std::find(g_queues.begin(), g_queues.end(), std::pair{g, queue});
    if (it == g_queues.end()) return;  // (not this run's, or released already: never twice on the free list)
    g_queues.erase(it);
  }
  g_active->release_queue(g, queue);
}

void gpu_queue_put(place p, int queue, std::uintptr_t dst, std::uint32_t dst_serial, const void* src,
                   std::size_t bytes, finish_token& token) {
  const char* what = "apgas::in_order_queue::async_copy";
  const int g = local_gpu(p, what);
  check_array(p, g, dst, bytes, dst_serial, what);
  g_active->queue_put(g, queue, dst, src, bytes, token);
  if (obs::on(obs::stats)) obs::stat_copy(p.id(), 0, bytes);
}

void gpu_queue_get(place p, int queue, void* dst, std::uintptr_t src, std::uint32_t src_serial, std::size_t bytes,
                   finish_token& token) {
  const char* what = "apgas::in_order_queue::async_copy";
  const int g = local_gpu(p, what);
  check_array(p, g, src, bytes, src_serial, what);
  g_active->queue_get(g, queue, dst, src, bytes, token);
  if (obs::on(obs::stats)) obs::stat_copy(p.id(), 1, bytes);
}

void gpu_queue_copy(place p, int queue, place src_place, std::uintptr_t src, std::uint32_t src_serial,
                    place dst_place, std::uintptr_t dst, std::uint32_t dst_serial, std::size_t bytes,
                    finish_token& token) {
  const char* what = "apgas::in_order_queue::async_copy";
  const int s = local_gpu(src_place, what), d = local_gpu(dst_place, what);
  check_array(src_place, s, src, bytes, src_serial, what);
  check_array(dst_place, d, dst, bytes, dst_serial, what);
  g_active->queue_copy(local_gpu(p, what), queue, s, src, d, dst, bytes, token);
  if (obs::on(obs::stats)) obs::stat_copy(src_place.id(), 2, bytes);
}

void gpu_queue_drain(place p, int queue) {
  g_active->queue_drain(local_gpu(p, "apgas::in_order_queue"), queue);
}

}  // namespace apgas::detail
