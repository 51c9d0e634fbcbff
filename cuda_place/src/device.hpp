#pragma once
// One GPU of this host, driven through the Driver API (the accelerator of backend.cpp holds one per GPU place).
//
// Per GPU: its primary context; kernel_streams kernel streams (launches go round-robin, so several kernels may be in
// flight; kernels that use constant memory all go to stream 0, see launch()), one host->device and one device->host
// copy stream, an event pool, the DMA-slice spooler, page-locked staging blocks for launch data, and a list of pending
// operations. Completion is by events, polled by idle workers through the progress hook (the core's completion seam):
// a finished kernel's post step gives its staging block back and ends its finish token; a finished copy wakes the
// parked activity that waits for it. There is no lock across GPUs: each device has its own (short, spin) lock for its
// pending list, event pool and function cache, and a lock that makes a constant copy and its launch one step.
//
// Invariants:
//  - An operation is pending from the moment its event is recorded until the poller has seen the event complete (or
//    the GPU died); npending counts them, so an idle poll costs one atomic load per GPU.
//  - A marker that could not be recorded ends its operation synchronously (record_into): when an operation's call
//    throws, nothing of it is left in flight on the GPU, or the place is dead (its stream could not be synchronised
//    either, or a sticky error: the place is never used again).
//  - Once dead, a device never becomes alive again; every pending operation has been failed exactly once, and every
//    later call throws dead_place_exception before touching the driver.
//  - An operation is failed only once its GPU work has ended, or can never run (a sticky error: the context is
//    gone): a device that dies for any other reason synchronises its context first (die). Where even that fails,
//    what the operations hold (page-locked staging blocks, host data kept for them) is never released (abandoned_),
//    and the exception says that their work may still be running.
//  - The driver is called with the device's context current on the calling thread (context_scope: activities migrate
//    between worker threads and the poller may run on any of them), and the thread gets back what it had current
//    before: no apgas context is ever left current for the user's own CUDA code.
//  - Events are made without timing (CU_EVENT_DISABLE_TIMING, the cheaper kind) unless the run traces GPU or copy
//    spans: begin_run() switches the pool's kind at the start of a run, when nothing is pending. While timing, a
//    traced operation has a start event recorded before it; the poller turns (start, end) into device times on the
//    host's clock, against a reference event whose host time was taken when it completed (begin_run), corrected
//    whenever a span would start before the host issued it or end after the poller saw it end, and moved forward every
//    4 s of device time so that float milliseconds stay within 0.5 us.
//  - The constant buffer of an nvcc file holds the data of the last constant copy enqueued on kernel stream 0; a
//    constant copy and the launch that reads it are enqueued together under constant_mutex_, so on stream 0 every
//    constant kernel directly follows its own copy, and the next copy waits (stream order) until it has run.
#include "driver.hpp"
#include "launch_shape.hpp"
#include "spooler.hpp"
#include "staging.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/gpu.hpp>
#include <apgas/detail/obs.hpp>
#include <apgas/detail/spin_mutex.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace apgas::detail::gpu {

class device final : public dma_engine, public host_memory {
 public:
  static constexpr int kernel_streams = 4;

  /// `demand`: the backend's count of operations in flight on all its GPUs (its progress hook's demand), kept with
  /// this device's own.
  device(const driver& d, int ordinal, std::size_t slice_bytes, int slices, std::size_t direct_copy,
         std::atomic<int>& demand);
  ~device();
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const std::string& description() const noexcept { return description_; }
  /// Whether the device died (die): its place failed for the rest of the run; `sticky`: of a sticky error (its
  /// context can never run again in this process).
  bool dead(bool& sticky) const noexcept {
    if (!dead_.load(std::memory_order_acquire)) return false;
    sticky = sticky_death_;
    return true;
  }
  int ordinal() const noexcept { return ordinal_; }
  CUdevice handle() const noexcept { return dev_; }
  CUcontext context() const noexcept { return ctx_; }
  bool pools() const noexcept { return pools_; }
  void set_place(int p) noexcept { place_ = p; }
  /// A run begins (after set_place, before any operation of the run): timing events when the run traces GPU or copy
  /// spans (obs::on), and the reference event that maps device times onto the host's clock.
  void begin_run();
  bool has_pending() const noexcept { return npending_.load(std::memory_order_acquire) != 0; }

  /// Completes what has finished. `current` is the context current on the calling thread: the device makes its own
  /// current if it is not, and updates `current` (the caller puts the thread's own back after polling every GPU).
  bool poll(CUcontext& current);

  void launch(gpu_kernel_request& r);
  std::uintptr_t alloc(std::size_t bytes);
  void free(std::uintptr_t address);
  /// Copies into and out of this GPU's arrays. The core has checked every device range against the GPU's live
  /// arrays and their serials before it calls these (apgas/src/gpu.cpp, array_registry.hpp). Page-locked host
  /// memory, and pageable memory up to direct_copy bytes (config::cuda_direct_copy), goes in one DMA call on the copy
  /// stream (the driver stages a pageable one itself, holding the calling worker meanwhile); larger pageable copies
  /// go through the spooler.
  void put(std::uintptr_t dst, const void* src, std::size_t n);
  void get(void* dst, std::uintptr_t src, std::size_t n);
  void copy_to(device& dst_dev, std::uintptr_t dst, std::uintptr_t src, std::size_t n);

  // In-order queues: streams of their own, made on demand and reused (apgas/queue.hpp).
  int make_queue();
  void release_queue(int q) noexcept;
  /// Copies in queue order; the host side page-locked; between GPUs, this one is either side. `token` is taken once
  /// the copy is enqueued and ended when the data has landed.
  void queue_put(int q, std::uintptr_t dst, const void* src, std::size_t n, finish_token& token);
  void queue_get(int q, void* dst, std::uintptr_t src, std::size_t n, finish_token& token);
  void queue_copy(int q, device& src_dev, std::uintptr_t src, device& dst_dev, std::uintptr_t dst, std::size_t n,
                  finish_token& token);
  /// Park until everything issued to the queue so far has ended.
  void queue_drain(int q);

  /// A set-up step whose failure only loses an optimisation (the memory pool's warm-up, peer access): whether it
  /// succeeded. A sticky error that the context confirms (cuCtxSynchronize fails too: it is gone) is no optimisation
  /// lost: it fails the set-up as check() does, naming the call, rather than leaving a dead GPU to be announced and
  /// blamed on the run's first call. Called with the device's context current.
  bool optional_step(CUresult r, const char* call);

  // dma_engine (the spooler, and the direct copies)
  marker h2d(std::uintptr_t dst, const void* src, std::size_t n) override;
  marker d2h(void* dst, std::uintptr_t src, std::size_t n) override;
  void wait(marker m) override;

  // host_memory (the staging blocks)
  void* pin(std::size_t bytes) override;
  void unpin(void* p) noexcept override;

 private:
  struct waiter {
    completion done;
    std::exception_ptr error;
  };
  /// A traced operation: its start event and what its device span says.
  struct traced {
    CUevent start = nullptr;
    const char* name = nullptr;
    std::uint32_t cat = 0;
    int track = 0;
    std::uint64_t flow = 0;
    std::uint64_t bytes = 0;
    std::uint64_t issued_ns = 0;             // host time just before the start event was recorded
    std::uint64_t start_ns = 0, end_ns = 0;  // set by the poller
    bool timed = false;
  };
  struct pending_op {
    CUevent event = nullptr;
    traced trace;                        // while timing: the device span to record when it has ended
    waiter* wake = nullptr;              // a copy: the activity parked on it
    finish_token token;                  // a kernel: its place in the governing finish
    std::vector<CUdeviceptr> buffers;    // a kernel without memory pools: its buffers, freed by the post step
    staging_cache::block staging;        // a kernel: the page-locked block its data was copied from
    std::shared_ptr<const void> keep;    // a kernel: host data it needed
  };
  struct function_info {
    CUfunction fn = nullptr;
    function_limits limits;
    std::size_t dynamic_shared_set = 0;  // what MAX_DYNAMIC_SHARED_SIZE_BYTES allows so far
  };

  /// Throws (cuda_error, or dead_place_exception for a sticky error) when the scope could not make ctx_ current.
  void entered(const context_scope& scope);
  /// Sets the default pool's release threshold to keep everything and grows it by warm_pool_bytes (device.cpp).
  void keep_and_warm_pool();
  static constexpr std::size_t warm_pool_bytes = std::size_t{64} << 20;
  /// Throws dead_place_exception when the device is dead.
  void alive();
  /// Success: nothing. A sticky error: the device dies (every pending operation fails) and dead_place_exception.
  /// Another error: cuda_error (kernel_launch_error when `launch`) naming the call, the place and the error.
  void check(CUresult r, const char* call, bool launch = false);
  /// check's throw, for an r that is not success.
  [[noreturn]] void throw_error(CUresult r, const char* call, bool launch);
  [[noreturn]] void throw_dead();
  std::string where() const;
  /// The device dies: every pending operation fails with dead_place_exception(reason). `sticky`: the reason is a
  /// sticky error, after which nothing of the context runs; otherwise the context is synchronised first, so that the
  /// operations' work has ended when they fail (see the invariants).
  void die(const std::string& reason, bool sticky);
  /// Each op's waiter or token gets e; its staging block and kept data are released where `ended`, else abandoned.
  void fail(std::vector<pending_op>& ops, const std::exception_ptr& e, bool ended = true) noexcept;
  CUevent take_event();
  void give_back(CUevent e) noexcept;
  /// Record e (from take_event) on s. On failure e goes back to the pool and the error is thrown once s has run
  /// everything queued on it (end_synchronously): a marker that could not be recorded ends its operation
  /// synchronously, so a caller that sees the error may reuse the operation's memory at once.
  void record_into(CUevent e, CUstream s);
  /// `call` failed with r after work was enqueued on s, before the work's end could be made observable: wait
  /// (cuStreamSynchronize) until s has run everything queued on it, then throw as check does. If s cannot be
  /// synchronised (and r is not sticky already), nothing says the work has ended: the device dies and
  /// dead_place_exception names both calls and their errors. Never returns while the work might still run, unless the
  /// place is dead.
  [[noreturn]] void end_synchronously(CUstream s, CUresult r, const char* call);
  void add_pending(pending_op op);
  function_info function_for(const gpu_kernel_request& r);
  grid auto_shape(const function_info& f, std::size_t dynamic_shared);
  CUdeviceptr alloc_on(CUstream s, std::size_t bytes);
  void free_on(CUstream s, CUdeviceptr p) noexcept;
  /// The pre step's checks and the opt-in above 48 KiB of shared memory; the grid to launch.
  grid prepare(const gpu_kernel_request& r, function_info& f);
  /// A large upload: a device buffer filled through the spooler (the calling activity waits until it has landed).
  CUdeviceptr upload_spooled(const gpu_upload& u);
  /// While timing and tracing `cat`: a start event recorded on s now (before the operation). Throws like
  /// record_into; nothing to give back then.
  traced trace_begin(std::uint32_t cat, const char* name, int track, std::uint64_t bytes, CUstream s);
  /// Under mutex_, once t's operation has ended at `end`: its device times. True when t.start became the new
  /// reference (then it must not go back to the pool).
  bool device_times(traced& t, CUevent end);
  /// A DMA's trace, kept from h2d/d2h/copy_to until wait() makes its pending operation.
  void keep_trace(CUevent end, const traced& t);
  void note_alloc(std::uintptr_t p, std::size_t bytes);
  void note_free(std::uintptr_t p);

  const driver& d_;
  int ordinal_;
  std::size_t direct_copy_;  // pageable copies of at most this many bytes: one driver call, not the spooler
  int place_ = -1;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string description_;
  device_limits limits_;
  bool pools_ = false;
  CUstream kstreams_[kernel_streams] = {};
  CUstream h2d_ = nullptr;
  CUstream d2h_ = nullptr;
  std::atomic<unsigned> next_stream_{0};
  bool timing_ = false;  // set by begin_run, before any worker of the run exists
  void* slices_ = nullptr;
  std::unique_ptr<spooler> spool_;
  std::unique_ptr<staging_cache> staging_;
  std::mutex constant_mutex_;  // a constant copy and its launch, enqueued as one step
  spin_mutex queues_mutex_;
  std::vector<CUstream> queues_;      // in-order queues' streams, by queue id
  std::vector<int> free_queues_;      // ids of released queues, their streams kept for reuse
  /// The stream of queue q (illegal_operation_exception for an id this device did not give out).
  CUstream queue_stream(int q);
  /// Enqueue a copy with `issue` on queue q's stream; its completion ends `token` (taken once it is enqueued).
  template <class Issue>
  void queue_op(int q, const char* call, const char* trace_name, std::size_t bytes, finish_token& token, Issue issue);

  spin_mutex mutex_;  // guards everything below
  std::vector<CUevent> events_;
  std::vector<pending_op> pending_;
  std::unordered_map<const void*, function_info> functions_;
  CUevent ref_ = nullptr;       // while timing: the reference event, completed at host time ref_ns_
  std::uint64_t ref_ns_ = 0;
  std::unordered_map<CUevent, traced> dma_traces_;            // markers of traced DMAs not yet waited for
  std::map<std::uintptr_t, std::size_t> sizes_;     // remote arrays: address -> bytes (their memory in use)
  std::size_t in_use_ = 0;                                    // their bytes
  std::string death_;
  bool sticky_death_ = false;  // (written before dead_ is set, with release)
  // What operations failed by a death whose work could not be seen to end held (never released: it may still be
  // read or written). The staging blocks are not given back either.
  std::vector<std::shared_ptr<const void>> abandoned_;
  std::atomic<int> npending_{0};  // pending_.size(); the backend's demand_ moves with it
  std::atomic<int>& demand_;
  std::atomic<bool> dead_{false};
};

}  // namespace apgas::detail::gpu
