#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// The seam between the core and the GPU backend (cuda_place/). Installed because the kernel and remote-array
// templates call into it; not API.
//
// Two halves:
//  - what templates in user code call (gpu_launch, gpu_alloc, gpu_put, ...): non-template entry points of the core
//    that forward to the backend of this process. They never mention a CUDA type, so this header compiles with any
//    C++ compiler; only apgas/cuda/kernel.cuh (included under nvcc) builds gpu_kernel_request objects.
//  - the accelerator interface a backend implements, and make_accelerator(), the one composition point
//    (cuda_place/src/select.cpp) that picks the CUDA backend when it is built in.
// All GPU places named here belong to the caller's host: the templates route work for another host's GPU to that
// host first (at/async_at to p.parent()).

#include <apgas/detail/completion.hpp>
#include <apgas/place.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace apgas {
struct config;
struct grid;
}

namespace apgas::detail {

/// A new remote array's address and serial (an array is known by both: see remote_array::serial).
struct array_token {
  std::uintptr_t addr = 0;
  std::uint32_t serial = 0;
};

/// Host bytes copied into a device buffer made for one launch (before the kernel starts), freed when it has ended.
struct gpu_upload {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// One kernel launch at a GPU place, built by apgas/cuda/kernel.cuh in a file compiled by nvcc. The kernel takes two
/// parameters: the body (by value, or a pointer to a device copy of it when `spilled`) and the descriptor of its
/// resources, which write_desc fills once the device addresses are known.
struct gpu_kernel_request {
  const char* what = "kernel";                  ///< for messages
  const char* name = nullptr;                   ///< the body's type (typeid name), for the trace; null: `what`
  const void* entry = nullptr;                  ///< host stub of the __global__ instantiation: identifies the kernel
  /// The CUfunction of `entry` in the context current on the calling thread (a runtime API call made in the nvcc
  /// file). Throws cuda_error.
  void* (*resolve)(const void* entry) = nullptr;
  /// Device address of the constant buffer of the nvcc file, in the current context; null if unused.
  void* (*constant_symbol)() = nullptr;
  std::size_t constant_capacity = 0;            ///< bytes of that buffer
  std::span<const std::byte> constant;          ///< constant_from data, packed; copied in before the launch
  const grid* shape = nullptr;                  ///< explicit grid, or null: auto_grid (occupancy)
  std::size_t dynamic_shared = 0;               ///< bytes of shared memory per block (shared, shared_from)
  std::vector<gpu_upload> uploads;              ///< global_from buffers and shared_from sources
  /// Writes the descriptor (desc_bytes) given the device address of each upload, in order.
  void (*write_desc)(void* desc, const void* ctx, const std::uintptr_t* upload_addresses) = nullptr;
  const void* desc_ctx = nullptr;
  std::size_t desc_bytes = 0;
  const void* body = nullptr;                   ///< host bytes of the body (its device layout is their prefix)
  std::size_t body_bytes = 0;
  bool spilled = false;                         ///< the first parameter is a pointer to a device copy of the body
  std::shared_ptr<const void> keep;             ///< host data the launch needs until it has ended
  /// An in-order queue of the GPU (gpu_make_queue), or -1: the launch goes on the queue's stream, after everything
  /// issued to it before.
  int queue = -1;
  /// Where the launch is counted: when set, the token is taken from here once the kernel is enqueued (its finish
  /// waits for the kernel; left in place when the launch throws); otherwise the launch joins the calling activity's
  /// innermost finish.
  finish_token* token = nullptr;
};

/// Launch at GPU place p: the pre step (grid, shared memory, constant memory, uploads, parameters) in the caller,
/// then the kernel; its post step (free the launch's buffers, notify the finish) runs when it has ended. Counted by
/// the caller's innermost finish like an activity. Throws kernel_launch_error (beyond the device's or the
/// function's limits: nothing was started, the place stays usable), dead_place_exception, cuda_error.
void gpu_launch(place p, gpu_kernel_request& r);

/// `bytes` of zero-filled device memory at GPU place p: its address and serial, registered by this host (gpu.cpp)
/// as a host place's arrays are (array_registry.hpp).
array_token gpu_alloc(place p, std::size_t bytes);
/// Frees the array at `address` made with `serial` (0: any); illegal_operation_exception if there is none.
void gpu_free(place p, std::uintptr_t address, std::uint32_t serial);
/// Host memory -> GPU p, counted by the caller's innermost finish; the data has landed when that finish ends.
/// Pageable memory goes through the DMA-slice spooler, pinned memory (pinned_allocator) straight to the DMA engine.
/// Every copy's device range must lie in a live array of its GPU, the one made with the serial given (unless 0).
void gpu_put(place p, std::uintptr_t dst, std::uint32_t dst_serial, const void* src, std::size_t bytes);
/// GPU p -> host memory, counted likewise.
void gpu_get(place p, void* dst, std::uintptr_t src, std::uint32_t src_serial, std::size_t bytes);
/// GPU -> GPU of this host (peer copy, or staged by the driver), counted likewise.
void gpu_copy(place src_place, std::uintptr_t src, std::uint32_t src_serial, place dst_place, std::uintptr_t dst,
              std::uint32_t dst_serial, std::size_t bytes);

/// In-order queues on a GPU of this host (apgas/queue.hpp): a stream of the GPU's own. Everything issued to a queue
/// runs in issue order on it, without a host round trip in between.
int gpu_make_queue(place p);
void gpu_release_queue(place p, int queue) noexcept;
/// A copy in the order of queue `queue` of GPU place p. The host side must be page-locked (is_pinned); for a copy
/// between GPUs of this host, p is one of them. `token` is taken once the copy is enqueued and ended when the data
/// has landed (left in place when the call throws).
void gpu_queue_put(place p, int queue, std::uintptr_t dst, std::uint32_t dst_serial, const void* src,
                   std::size_t bytes, finish_token& token);
void gpu_queue_get(place p, int queue, void* dst, std::uintptr_t src, std::uint32_t src_serial, std::size_t bytes,
                   finish_token& token);
void gpu_queue_copy(place p, int queue, place src_place, std::uintptr_t src, std::uint32_t src_serial,
                    place dst_place, std::uintptr_t dst, std::uint32_t dst_serial, std::size_t bytes,
                    finish_token& token);
/// Park the calling activity until everything issued to the queue so far has ended.
void gpu_queue_drain(place p, int queue);

/// Page-locked host memory when a CUDA driver can be loaded in this process, ordinary memory otherwise (cuda_place/).
/// `bytes` aligned to `align` (at least 64); page-locked where a driver is loaded and align is at most a page.
void* pinned_alloc(std::size_t bytes, std::size_t align = 64);
void pinned_free(void* p) noexcept;
/// True when [p, p + bytes) lies in one block from pinned_alloc that is page-locked.
bool is_pinned(const void* p, std::size_t bytes) noexcept;

/// What a GPU backend provides. Every call but the constructor's work happens inside a run, from activities of this
/// host (or, for poll-driven completions, from its progress hook). `gpu` is the local index: 0..count()-1.
class accelerator {
 public:
  virtual ~accelerator() = default;
  /// GPUs of this host that become places (APGAS_GPUS applied), in place order.
  virtual int count() const noexcept = 0;
  /// A description of GPU `gpu` ("NVIDIA H100 80GB HBM3, device 0, 132 SMs"), or, for -1, why there are none.
  virtual std::string describe(int gpu) const = 0;
  /// A run begins: this host's GPUs get place ids first_place .. first_place + count() - 1.
  virtual void start(int first_place) = 0;
  /// The run ends; every operation has ended (the implicit finish of the main activity waited for them).
  virtual void stop() = 0;
  /// Whether a later run should make a new accelerator rather than reuse this one: a GPU died in a run of an error
  /// that leaves its context usable (its place would otherwise stay dead), and none of a sticky error (a GPU whose
  /// context can never run again in this process stays a dead place of each run, the others usable).
  virtual bool renew() const noexcept { return false; }
  virtual void launch(int gpu, gpu_kernel_request& r) = 0;
  virtual std::uintptr_t alloc(int gpu, std::size_t bytes) = 0;
  virtual void free(int gpu, std::uintptr_t address) = 0;
  virtual void put(int gpu, std::uintptr_t dst, const void* src, std::size_t bytes) = 0;
  virtual void get(int gpu, void* dst, std::uintptr_t src, std::size_t bytes) = 0;
  virtual void copy(int src_gpu, std::uintptr_t src, int dst_gpu, std::uintptr_t dst, std::size_t bytes) = 0;
  /// In-order queues (gpu_make_queue and the functions after it).
  virtual int make_queue(int gpu) = 0;
  virtual void release_queue(int gpu, int queue) noexcept = 0;
  virtual void queue_put(int gpu, int queue, std::uintptr_t dst, const void* src, std::size_t bytes,
                         finish_token& token) = 0;
  virtual void queue_get(int gpu, int queue, void* dst, std::uintptr_t src, std::size_t bytes,
                         finish_token& token) = 0;
  virtual void queue_copy(int gpu, int queue, int src_gpu, std::uintptr_t src, int dst_gpu, std::uintptr_t dst,
                          std::size_t bytes, finish_token& token) = 0;
  virtual void queue_drain(int gpu, int queue) = 0;
};

/// The backend for this process: CUDA when built in (zero GPUs when there is no driver or no device), else none.
/// Throws config_error for an APGAS_GPUS list that names a GPU this host does not have.
std::unique_ptr<accelerator> make_accelerator(const config& cfg);
/// Backends built in ("cuda" or "").
const char* built_accelerators() noexcept;

}  // namespace apgas::detail
#pragma GCC visibility pop
