// The CUDA backend: one GPU place per selected device of this host, driven through the Driver API.
//
// Per GPU: its primary context; kernel_streams kernel streams (launches go round-robin, so several kernels may be in
// flight; kernels that use constant memory all go to stream 0, which orders the copies into the file's one constant
// buffer after the kernels that read it), one host->device and one device->host copy stream, an event pool, the
// DMA-slice spooler, and a list of pending operations. Completion is by events, polled by idle workers through the
// progress hook (the core's completion seam): a finished kernel's post step frees its per-launch buffers and ends
// its finish token; a finished copy wakes the parked activity that waits for it. There is no lock across GPUs: each
// device has its own (short, spin) lock for its pending list, event pool and function cache.
//
// Invariants:
//  - An operation is pending from the moment its event is recorded until the poller has seen the event complete (or
//    the GPU died); npending counts them, so an idle poll costs one atomic load per GPU.
//  - Once dead, a device never becomes alive again; every pending operation has been failed exactly once, and every
//    later call throws dead_place_exception before touching the driver.
//  - The driver is called with the device's context current on the calling thread (current()), since activities
//    migrate between worker threads and the poller may run on any of them.
#include "driver.hpp"
#include "launch_shape.hpp"
#include "spooler.hpp"

#include <apgas/activity.hpp>
#include <apgas/detail/completion.hpp>
#include <apgas/detail/gpu.hpp>
#include <apgas/detail/spin_mutex.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace apgas::detail::gpu {
namespace {

constexpr int kernel_streams = 4;
constexpr std::size_t param_space = 4096;  // kernel parameter bytes every GPU accepts

struct waiter {
  completion done;
  std::exception_ptr error;
};

struct pending_op {
  CUevent event = nullptr;
  waiter* wake = nullptr;              // a copy: the activity parked on it
  finish_token token;                  // a kernel: its place in the governing finish
  std::vector<CUdeviceptr> buffers;    // a kernel: per-launch device buffers, freed by the post step
  CUstream stream = nullptr;
  std::shared_ptr<const void> keep;    // a kernel: host data it needed
};

struct function_info {
  CUfunction fn = nullptr;
  function_limits limits;
  std::size_t dynamic_shared_set = default_shared_limit;  // what the opt-in attribute allows so far
};

class device final : public dma_engine {
 public:
  device(const driver& d, int ordinal, std::size_t slice_bytes, int slices);
  ~device();
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const std::string& description() const noexcept { return description_; }
  void set_place(int p) noexcept { place_ = p; }
  bool poll();

  void launch(gpu_kernel_request& r);
  std::uintptr_t alloc(std::size_t bytes);
  void free(std::uintptr_t address);
  void put(std::uintptr_t dst, const void* src, std::size_t n);
  void get(void* dst, std::uintptr_t src, std::size_t n);
  void copy_to(device& dst_dev, std::uintptr_t dst, std::uintptr_t src, std::size_t n);

  // dma_engine (the spooler, and the direct copies)
  marker h2d(std::uintptr_t dst, const void* src, std::size_t n) override;
  marker d2h(void* dst, std::uintptr_t src, std::size_t n) override;
  void wait(marker m) override;

 private:
  void current();
  /// Throws dead_place_exception when the device is dead.
  void alive();
  /// Success: nothing. A sticky error: the device dies (every pending operation fails) and dead_place_exception.
  /// Another error: cuda_error (kernel_launch_error when `launch`) naming the call, the place and the error.
  void check(CUresult r, const char* call, bool launch = false);
  [[noreturn]] void throw_dead();
  std::string where() const;
  void die(const std::string& reason);
  void fail(std::vector<pending_op>& ops, const std::exception_ptr& e) noexcept;
  CUevent take_event();
  void give_back(CUevent e) noexcept;
  /// Record e (from take_event) on s; on failure e goes back to the pool and the error is thrown.
  void record_into(CUevent e, CUstream s);
  void add_pending(pending_op op);
  function_info function_for(const gpu_kernel_request& r);
  grid auto_shape(const function_info& f, std::size_t dynamic_shared);
  CUdeviceptr alloc_on(CUstream s, std::size_t bytes);
  void free_on(CUstream s, CUdeviceptr p) noexcept;

  const driver& d_;
  int ordinal_;
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
  void* slices_ = nullptr;
  std::unique_ptr<spooler> spool_;

  spin_mutex mutex_;  // guards everything below
  std::vector<CUevent> events_;
  std::vector<pending_op> pending_;
  std::unordered_map<const void*, function_info> functions_;
  std::string death_;
  std::atomic<int> npending_{0};
  std::atomic<bool> dead_{false};
};

int attribute(const driver& d, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  if (d.cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) return 0;
  return v;
}

device::device(const driver& d, int ordinal, std::size_t slice_bytes, int slices) : d_(d), ordinal_(ordinal) {
  check(d_.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(d_.cuDeviceGetName(name, sizeof name - 1, dev_), "cuDeviceGetName");
  limits_.sms = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  limits_.max_threads_per_block = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  limits_.max_blocks = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  limits_.max_grid_y = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  limits_.max_grid_z = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  limits_.max_block = dim3(attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                           attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                           attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z));
  limits_.max_shared_optin =
      static_cast<std::size_t>(attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  if (limits_.max_shared_optin == 0) {
    limits_.max_shared_optin =
        static_cast<std::size_t>(attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  }
  limits_.shared_per_sm =
      static_cast<std::size_t>(attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  limits_.threads_per_sm = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  limits_.regs_per_sm = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  limits_.regs_per_block = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  pools_ = attribute(d_, dev_, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0;
  std::size_t total = 0;
  check(d_.cuDeviceTotalMem(&total, dev_), "cuDeviceTotalMem");
  description_ = std::string(name) + " (device " + std::to_string(ordinal) + ", " + std::to_string(limits_.sms) +
                 " SMs, " + std::to_string(total >> 30) + " GiB)";

  check(d_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  current();
  for (CUstream& s : kstreams_) check(d_.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d_.cuStreamCreate(&h2d_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d_.cuStreamCreate(&d2h_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // The spooler's rings: allocated and touched once, here (pinning costs about 1 GB/s, first touch is slow too).
  const std::size_t bytes = 2 * static_cast<std::size_t>(slices) * slice_bytes;
  check(d_.cuMemHostAlloc(&slices_, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc (DMA slices)");
  std::memset(slices_, 0, bytes);
  spool_ = std::make_unique<spooler>(*this, static_cast<std::byte*>(slices_), slice_bytes, slices);
}

device::~device() {
  // Only when a run with other GPU settings replaces the accelerator: nothing is pending then. A dead context
  // refuses most of this; the errors are ignored (the process goes on without this GPU).
  if (d_.cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) return;
  for (CUevent e : events_) d_.cuEventDestroy(e);
  for (CUstream s : kstreams_) d_.cuStreamDestroy(s);
  d_.cuStreamDestroy(h2d_);
  d_.cuStreamDestroy(d2h_);
  if (slices_ != nullptr) d_.cuMemFreeHost(slices_);
  d_.cuDevicePrimaryCtxRelease(dev_);
}

std::string device::where() const {
  if (place_ < 0) return "GPU device " + std::to_string(ordinal_);  // during start-up
  return "GPU place " + std::to_string(place_) + " (device " + std::to_string(ordinal_) + ")";
}

void device::current() {
  const CUresult r = d_.cuCtxSetCurrent(ctx_);
  if (r != CUDA_SUCCESS) check(r, "cuCtxSetCurrent");
}

void device::throw_dead() {
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    reason = death_;
  }
  throw dead_place_exception(place_, "apgas: " + where() + " is dead: " + reason);
}

void device::alive() {
  if (dead_.load(std::memory_order_acquire)) throw_dead();
}

void device::fail(std::vector<pending_op>& ops, const std::exception_ptr& e) noexcept {
  for (pending_op& op : ops) {
    if (op.wake != nullptr) {
      op.wake->error = e;
      op.wake->done.signal();
    } else if (op.token) {
      op.token.done(e);
    }
  }
  ops.clear();
}

void device::die(const std::string& reason) {
  std::vector<pending_op> lost;
  {
    std::lock_guard lock(mutex_);
    if (dead_.load(std::memory_order_relaxed)) return;
    death_ = reason;
    dead_.store(true, std::memory_order_release);
    lost.swap(pending_);
    npending_.store(0, std::memory_order_relaxed);
  }
  fail(lost, std::make_exception_ptr(dead_place_exception(place_, "apgas: " + where() + " is dead: " + reason)));
}

void device::check(CUresult r, const char* call, bool launch) {
  if (r == CUDA_SUCCESS) return;
  const std::string text = error_text(d_, r);
  if (is_sticky(r)) {
    die(text + " (reported by " + call + ")");
    throw_dead();
  }
  const std::string msg = "apgas: " + std::string(call) + " on " + where() + " failed: " + text;
  if (launch) throw kernel_launch_error(static_cast<int>(r), msg);
  throw cuda_error(static_cast<int>(r), msg);
}

CUevent device::take_event() {
  {
    std::lock_guard lock(mutex_);
    if (!events_.empty()) {
      CUevent e = events_.back();
      events_.pop_back();
      return e;
    }
  }
  CUevent e = nullptr;
  check(d_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return e;
}

void device::give_back(CUevent e) noexcept {
  std::lock_guard lock(mutex_);
  events_.push_back(e);
}

void device::record_into(CUevent e, CUstream s) {
  const CUresult r = d_.cuEventRecord(e, s);
  if (r != CUDA_SUCCESS) {
    give_back(e);
    check(r, "cuEventRecord");
  }
}

void device::add_pending(pending_op op) {
  {
    std::lock_guard lock(mutex_);
    if (!dead_.load(std::memory_order_relaxed)) {
      pending_.push_back(std::move(op));
      npending_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  std::vector<pending_op> one;
  one.push_back(std::move(op));
  try {
    throw_dead();
  } catch (...) {
    fail(one, std::current_exception());
  }
}

bool device::poll() {
  if (npending_.load(std::memory_order_acquire) == 0) return false;
  std::vector<pending_op> finished;
  CUresult failure = CUDA_SUCCESS;
  {
    std::lock_guard lock(mutex_);
    if (d_.cuCtxSetCurrent(ctx_) != CUDA_SUCCESS) return false;
    for (std::size_t i = 0; i < pending_.size();) {
      const CUresult q = d_.cuEventQuery(pending_[i].event);
      if (q == CUDA_ERROR_NOT_READY) {
        ++i;
        continue;
      }
      if (q != CUDA_SUCCESS) {
        failure = q;
        break;
      }
      events_.push_back(pending_[i].event);
      finished.push_back(std::move(pending_[i]));
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
    npending_.fetch_sub(static_cast<int>(finished.size()), std::memory_order_release);
  }
  // Post steps, outside the lock: a woken activity may come straight back to this device.
  for (pending_op& op : finished) {
    for (CUdeviceptr b : op.buffers) free_on(op.stream, b);
    op.keep.reset();
    if (op.wake != nullptr) {
      op.wake->done.signal();
    } else {
      op.token.done();
    }
  }
  if (failure != CUDA_SUCCESS) {
    // An event reports the error of the work before it: for a sticky error the context is gone for good.
    die(error_text(d_, failure) + (is_sticky(failure) ? " (a kernel or copy failed)" : " (an event query failed)"));
  }
  return !finished.empty() || failure != CUDA_SUCCESS;
}

// ---- copies ----

// The event is taken before the copy is enqueued: once a DMA is queued, its end must be observable (a slice given
// back while its DMA is still queued would be refilled under it).
dma_engine::marker device::h2d(std::uintptr_t dst, const void* src, std::size_t n) {
  alive();
  current();
  const CUevent e = take_event();
  const CUresult r = d_.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, n, h2d_);
  if (r != CUDA_SUCCESS) give_back(e);
  check(r, "cuMemcpyHtoDAsync");
  record_into(e, h2d_);
  return reinterpret_cast<marker>(e);
}

dma_engine::marker device::d2h(void* dst, std::uintptr_t src, std::size_t n) {
  alive();
  current();
  const CUevent e = take_event();
  const CUresult r = d_.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), n, d2h_);
  if (r != CUDA_SUCCESS) give_back(e);
  check(r, "cuMemcpyDtoHAsync");
  record_into(e, d2h_);
  return reinterpret_cast<marker>(e);
}

void device::wait(marker m) {
  waiter w;
  pending_op op;
  op.event = reinterpret_cast<CUevent>(m);
  op.wake = &w;
  add_pending(std::move(op));
  w.done.wait();
  if (w.error) std::rethrow_exception(w.error);
}

void device::put(std::uintptr_t dst, const void* src, std::size_t n) {
  alive();
  if (n == 0) return;
  if (is_pinned(src, n)) {  // the direct path: one DMA straight from the user's page-locked memory
    apgas::async([this, dst, src, n] { wait(h2d(dst, src, n)); });
  } else {
    spool_->put(dst, src, n);
  }
}

void device::get(void* dst, std::uintptr_t src, std::size_t n) {
  alive();
  if (n == 0) return;
  if (is_pinned(dst, n)) {
    apgas::async([this, dst, src, n] { wait(d2h(dst, src, n)); });
  } else {
    spool_->get(dst, src, n);
  }
}

void device::copy_to(device& to, std::uintptr_t dst, std::uintptr_t src, std::size_t n) {
  alive();
  to.alive();
  if (n == 0) return;
  device* target = &to;
  apgas::async([this, target, dst, src, n] {
    alive();
    target->alive();
    current();
    const CUevent e = take_event();
    CUresult r = CUDA_SUCCESS;
    if (target == this) {
      r = d_.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), n, d2h_);
      if (r != CUDA_SUCCESS) give_back(e);
      check(r, "cuMemcpyDtoDAsync");
    } else {
      // With peer access enabled (start-up) this is a direct transfer; otherwise the driver stages it.
      r = d_.cuMemcpyPeerAsync(static_cast<CUdeviceptr>(dst), target->ctx_, static_cast<CUdeviceptr>(src), ctx_, n,
                               d2h_);
      if (r != CUDA_SUCCESS) give_back(e);
      check(r, "cuMemcpyPeerAsync");
    }
    record_into(e, d2h_);
    wait(reinterpret_cast<marker>(e));
  });
}

// ---- memory ----

CUdeviceptr device::alloc_on(CUstream s, std::size_t bytes) {
  CUdeviceptr p = 0;
  if (pools_) {
    check(d_.cuMemAllocAsync(&p, std::max<std::size_t>(bytes, 1), s), "cuMemAllocAsync");
  } else {
    check(d_.cuMemAlloc(&p, std::max<std::size_t>(bytes, 1)), "cuMemAlloc");
  }
  return p;
}

void device::free_on(CUstream s, CUdeviceptr p) noexcept {
  if (dead_.load(std::memory_order_acquire)) return;  // the context is gone; so is the memory
  if (pools_) {
    d_.cuMemFreeAsync(p, s);
  } else {
    d_.cuMemFree(p);
  }
}

std::uintptr_t device::alloc(std::size_t bytes) {
  alive();
  current();
  CUdeviceptr p = 0;
  const CUresult r = d_.cuMemAlloc(&p, std::max<std::size_t>(bytes, 1));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    std::size_t free_bytes = 0, total = 0;
    d_.cuMemGetInfo(&free_bytes, &total);
    throw cuda_error(static_cast<int>(r), "apgas::make_remote_array: " + std::to_string(bytes) + " bytes on " +
                                              where() + ": out of device memory (" + std::to_string(free_bytes) +
                                              " of " + std::to_string(total) + " bytes free)");
  }
  check(r, "cuMemAlloc");
  if (bytes != 0) {
    try {
      const CUevent e = take_event();
      const CUresult r2 = d_.cuMemsetD8Async(p, 0, bytes, h2d_);
      if (r2 != CUDA_SUCCESS) give_back(e);
      check(r2, "cuMemsetD8Async");
      record_into(e, h2d_);
      wait(reinterpret_cast<marker>(e));  // zero-filled before anyone can use it, on any stream
    } catch (...) {
      if (!dead_.load(std::memory_order_acquire)) d_.cuMemFree(p);
      throw;
    }
  }
  return static_cast<std::uintptr_t>(p);
}

void device::free(std::uintptr_t address) {
  alive();
  current();
  check(d_.cuMemFree(static_cast<CUdeviceptr>(address)), "cuMemFree");
}

// ---- kernels ----

function_info device::function_for(const gpu_kernel_request& r) {
  {
    std::lock_guard lock(mutex_);
    auto it = functions_.find(r.entry);
    if (it != functions_.end()) return it->second;
  }
  function_info f;
  f.fn = static_cast<CUfunction>(r.resolve(r.entry));  // a runtime API call in the nvcc file, this context current
  int v = 0;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.fn), "cuFuncGetAttribute");
  f.limits.max_threads_per_block = v;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f.fn), "cuFuncGetAttribute");
  f.limits.regs_per_thread = v;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.fn), "cuFuncGetAttribute");
  f.limits.static_shared = static_cast<std::size_t>(v);
  std::lock_guard lock(mutex_);
  return functions_.emplace(r.entry, f).first->second;
}

grid device::auto_shape(const function_info& f, std::size_t dynamic_shared) {
  int min_grid = 0, block = 0, per_sm = 0;
  if (d_.cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f.fn, nullptr, dynamic_shared, 0) == CUDA_SUCCESS &&
      block > 0 &&
      d_.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f.fn, block, dynamic_shared) == CUDA_SUCCESS &&
      per_sm > 0) {
    return grid{std::min(per_sm * limits_.sms, limits_.max_blocks), block};
  }
  return x10_auto_grid(limits_, f.limits, dynamic_shared, place_);
}

void device::launch(gpu_kernel_request& r) {
  alive();
  current();
  function_info f = function_for(r);
  if (r.dynamic_shared > f.dynamic_shared_set) {
    // Above 48 KiB a function must opt in. It opts in once to all the device allows: setting just what this launch
    // asks for could lower the limit under a concurrent launch of the same function that asked for more. An amount
    // beyond the device's limit is refused by check_launch below.
    const std::size_t room =
        limits_.max_shared_optin > f.limits.static_shared ? limits_.max_shared_optin - f.limits.static_shared : 0;
    if (r.dynamic_shared <= room) {
      check(d_.cuFuncSetAttribute(f.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(room)),
            "cuFuncSetAttribute", true);
      std::lock_guard lock(mutex_);
      functions_[r.entry].dynamic_shared_set = room;
    }
  }
  const grid g = r.shape != nullptr ? *r.shape : auto_shape(f, r.dynamic_shared);
  check_launch(g, r.dynamic_shared, limits_, f.limits, place_);
  if (r.constant.size() > r.constant_capacity) {
    throw kernel_launch_error(1, "apgas::constant_from: " + std::to_string(r.constant.size()) +
                                     " bytes exceed the constant buffer of " + std::to_string(r.constant_capacity) +
                                     " bytes of the file that launches the kernel, on " + where());
  }
  CUstream s = !r.constant.empty() ? kstreams_[0]
                                   : kstreams_[next_stream_.fetch_add(1, std::memory_order_relaxed) % kernel_streams];

  // The completion event first: once the kernel is launched its end must be observable (an event that cannot be
  // had afterwards would leave a running kernel that no finish counts, and its buffers).
  const CUevent done = take_event();
  std::vector<CUdeviceptr> buffers;
  try {
    std::vector<std::uintptr_t> addresses;
    for (const gpu_upload& u : r.uploads) {
      const CUdeviceptr p = alloc_on(s, u.bytes);
      buffers.push_back(p);
      addresses.push_back(static_cast<std::uintptr_t>(p));
      if (u.bytes != 0) check(d_.cuMemcpyHtoDAsync(p, u.data, u.bytes, s), "cuMemcpyHtoDAsync");
    }
    if (!r.constant.empty()) {
      const auto c = reinterpret_cast<CUdeviceptr>(r.constant_symbol());
      check(d_.cuMemcpyHtoDAsync(c, r.constant.data(), r.constant.size(), s), "cuMemcpyHtoDAsync (constant)");
    }
    // The descriptor: aligned storage, filled by the template now that the device addresses are known. The driver
    // copies the parameters during cuLaunchKernel, so stack and heap buffers may go right after it.
    struct aligned_delete {
      void operator()(void* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
    };
    std::unique_ptr<void, aligned_delete> desc(::operator new(std::max<std::size_t>(r.desc_bytes, 1),
                                                              std::align_val_t{64}));
    r.write_desc(desc.get(), r.desc_ctx, addresses.data());
    CUdeviceptr body_copy = 0;
    void* params[2] = {const_cast<void*>(r.body), desc.get()};
    if (r.spilled) {  // too large for the parameter space: a device copy of the body, passed by address
      body_copy = alloc_on(s, r.body_bytes);
      buffers.push_back(body_copy);
      check(d_.cuMemcpyHtoDAsync(body_copy, r.body, r.body_bytes, s), "cuMemcpyHtoDAsync (kernel body)");
      params[0] = &body_copy;
    }
    check(d_.cuLaunchKernel(f.fn, static_cast<unsigned>(g.blocks.x), static_cast<unsigned>(g.blocks.y),
                            static_cast<unsigned>(g.blocks.z), static_cast<unsigned>(g.threads.x),
                            static_cast<unsigned>(g.threads.y), static_cast<unsigned>(g.threads.z),
                            static_cast<unsigned>(r.dynamic_shared), s, params, nullptr),
          "cuLaunchKernel", true);
  } catch (...) {
    for (CUdeviceptr b : buffers) free_on(s, b);
    give_back(done);
    throw;
  }
  try {
    record_into(done, s);
  } catch (...) {
    for (CUdeviceptr b : buffers) free_on(s, b);  // stream-ordered: after the kernel
    throw;
  }
  pending_op op;
  op.event = done;
  op.token = finish_token::join();  // after the launch: a refused launch never counted in the finish
  op.buffers = std::move(buffers);
  op.stream = s;
  op.keep = std::move(r.keep);
  add_pending(std::move(op));
}

// ---- the accelerator ----

class cuda_accelerator final : public accelerator {
 public:
  cuda_accelerator(const config& cfg) {
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
    const int slices = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
    for (int i : chosen) devices_.push_back(std::make_unique<device>(*d, i, cfg.cuda_dma_slice, slices));
    enable_peer_access(*d, chosen);
  }

  int count() const noexcept override { return static_cast<int>(devices_.size()); }
  std::string describe(int gpu) const override {
    return gpu < 0 ? why_none_ : devices_[static_cast<std::size_t>(gpu)]->description();
  }
  void start(int first_place) override {
    for (std::size_t i = 0; i < devices_.size(); ++i) devices_[i]->set_place(first_place + static_cast<int>(i));
    if (!devices_.empty()) hook_ = add_progress_hook(&poll_all, this);
  }
  void stop() override {
    if (hook_ >= 0) remove_progress_hook(hook_);
    hook_ = -1;
  }
  void launch(int gpu, gpu_kernel_request& r) override { dev(gpu).launch(r); }
  std::uintptr_t alloc(int gpu, std::size_t bytes) override { return dev(gpu).alloc(bytes); }
  void free(int gpu, std::uintptr_t address) override { dev(gpu).free(address); }
  void put(int gpu, std::uintptr_t dst, const void* src, std::size_t n) override { dev(gpu).put(dst, src, n); }
  void get(int gpu, void* dst, std::uintptr_t src, std::size_t n) override { dev(gpu).get(dst, src, n); }
  void copy(int src_gpu, std::uintptr_t src, int dst_gpu, std::uintptr_t dst, std::size_t n) override {
    dev(src_gpu).copy_to(dev(dst_gpu), dst, src, n);
  }

 private:
  device& dev(int gpu) { return *devices_[static_cast<std::size_t>(gpu)]; }

  static bool poll_all(void* self) {
    bool progressed = false;
    for (auto& d : static_cast<cuda_accelerator*>(self)->devices_) progressed = d->poll() || progressed;
    return progressed;
  }

  // Direct GPU-to-GPU copies where the hardware allows them; cuMemcpyPeerAsync stages the others.
  void enable_peer_access(const driver& d, const std::vector<int>& ordinals) {
    for (std::size_t i = 0; i < ordinals.size(); ++i) {
      for (std::size_t j = 0; j < ordinals.size(); ++j) {
        if (i == j) continue;
        int can = 0;
        CUdevice a = 0, b = 0;
        if (d.cuDeviceGet(&a, ordinals[i]) != CUDA_SUCCESS || d.cuDeviceGet(&b, ordinals[j]) != CUDA_SUCCESS) continue;
        if (d.cuDeviceCanAccessPeer(&can, a, b) != CUDA_SUCCESS || can == 0) continue;
        CUcontext ca = nullptr, cb = nullptr;
        if (d.cuDevicePrimaryCtxRetain(&ca, a) != CUDA_SUCCESS) continue;
        if (d.cuDevicePrimaryCtxRetain(&cb, b) == CUDA_SUCCESS) {
          if (d.cuCtxSetCurrent(ca) == CUDA_SUCCESS) d.cuCtxEnablePeerAccess(cb, 0);  // "already enabled" is fine
          d.cuDevicePrimaryCtxRelease(b);
        }
        d.cuDevicePrimaryCtxRelease(a);
      }
    }
  }

  std::string why_none_;
  std::vector<std::unique_ptr<device>> devices_;
  int hook_ = -1;
};

}  // namespace

std::unique_ptr<accelerator> make_cuda_accelerator(const config& cfg) {
  return std::make_unique<cuda_accelerator>(cfg);
}

}  // namespace apgas::detail::gpu
