#include "device.hpp"

#include <apgas/activity.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

namespace apgas::detail::gpu {
namespace {

/// Uploads of at least this many bytes go through the DMA spooler (page-locked slices, host copies in parallel)
/// instead of a staging block: staging them would pin and keep large blocks for the launch data alone.
constexpr std::size_t spooled_upload = std::size_t{1} << 20;
/// Staging blocks kept per GPU between launches.
constexpr std::size_t staging_keep = std::size_t{32} << 20;
/// Launch data is packed into its staging block at this alignment.
constexpr std::size_t staging_align = 256;

int attribute(const driver& d, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  if (d.cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) return 0;
  return v;
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

}  // namespace

device::device(const driver& d, int ordinal, std::size_t slice_bytes, int slices, std::size_t direct_copy,
               std::atomic<int>& demand)
    : d_(d), ordinal_(ordinal), direct_copy_(direct_copy), demand_(demand) {
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
  const context_scope scope(d_, ctx_);
  entered(scope);
  for (CUstream& s : kstreams_) check(d_.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d_.cuStreamCreate(&h2d_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d_.cuStreamCreate(&d2h_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // The spooler's rings: allocated and touched once, here (pinning costs about 1 GB/s, first touch is slow too).
  const std::size_t bytes = 2 * static_cast<std::size_t>(slices) * slice_bytes;
  check(d_.cuMemHostAlloc(&slices_, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc (DMA slices)");
  std::memset(slices_, 0, bytes);
  spool_ = std::make_unique<spooler>(*this, static_cast<std::byte*>(slices_), slice_bytes, slices);
  staging_ = std::make_unique<staging_cache>(*this, staging_keep);
  // One page-locked block for launch data, kept: the first launch with constant or global data would else pin it
  // inside the user's timed code, where a native program's cudaMemcpyToSymbol uses the driver's own staging memory.
  try {
    staging_->give(staging_->take(staging_cache::min_block));
  } catch (const std::bad_alloc&) {  // only the warm-up is lost: a launch that needs the block says so
  }
  if (pools_) keep_and_warm_pool();
}

// The default memory pool (remote arrays and launch buffers come from it) keeps what it has reserved instead of
// giving it back to the OS at the next synchronisation (release threshold: everything), and grows here, once: on an
// H100 the first allocation from a fresh pool took 7-8 ms, which the first make_remote_array of a run paid inside
// the user's timed code (the Parboil ports' fixed ~15 ms against native CUDA). Failures only lose the warm-up.
void device::keep_and_warm_pool() {
  CUmemoryPool pool = nullptr;
  if (!optional_step(d_.cuDeviceGetDefaultMemPool(&pool, dev_), "cuDeviceGetDefaultMemPool")) return;
  cuuint64_t keep = ~cuuint64_t{0};
  const CUresult kept = d_.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  if (!optional_step(kept, "cuMemPoolSetAttribute (the memory pool's release threshold)")) return;
  CUdeviceptr p = 0;
  if (optional_step(d_.cuMemAllocAsync(&p, warm_pool_bytes, h2d_), "cuMemAllocAsync (the memory pool's warm-up)")) {
    optional_step(d_.cuMemFreeAsync(p, h2d_), "cuMemFreeAsync (the memory pool's warm-up)");
  }
}

bool device::optional_step(CUresult r, const char* call) {
  // (CUDA_ERROR_UNKNOWN counts as sticky, and may come spuriously from these calls: the context must confirm it)
  if (is_sticky(r) && d_.cuCtxSynchronize() != CUDA_SUCCESS) check(r, call);
  return r == CUDA_SUCCESS;
}

device::~device() {
  // Only when a run with other GPU settings replaces the accelerator: nothing is pending then. A dead context
  // refuses most of this; the errors are ignored (the process goes on without this GPU).
  const context_scope scope(d_, ctx_);
  if (scope.result() != CUDA_SUCCESS) return;
  staging_.reset();
  for (CUevent e : events_) d_.cuEventDestroy(e);
  for (CUstream s : kstreams_) d_.cuStreamDestroy(s);
  for (CUstream s : queues_) d_.cuStreamDestroy(s);
  d_.cuStreamDestroy(h2d_);
  d_.cuStreamDestroy(d2h_);
  if (slices_ != nullptr) d_.cuMemFreeHost(slices_);
  d_.cuDevicePrimaryCtxRelease(dev_);
}

std::string device::where() const {
  if (place_ < 0) return "GPU device " + std::to_string(ordinal_);  // during start-up
  return "GPU place " + std::to_string(place_) + " (device " + std::to_string(ordinal_) + ")";
}

void device::entered(const context_scope& scope) {
  if (scope.result() != CUDA_SUCCESS) check(scope.result(), "cuCtxSetCurrent");
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

void device::fail(std::vector<pending_op>& ops, const std::exception_ptr& e, bool ended) noexcept {
  for (pending_op& op : ops) {
    if (ended) {
      staging_->give(op.staging);  // (its DMA has run, or never will)
    } else {
      try {
        std::lock_guard lock(mutex_);
        abandoned_.push_back(std::move(op.keep));
      } catch (...) {  // (no memory: the kept data is leaked instead)
        new (std::nothrow) std::shared_ptr<const void>(std::move(op.keep));
      }
    }
    if (op.wake != nullptr) {
      op.wake->error = e;
      op.wake->done.signal();
    } else if (op.token) {
      op.token.done(e);
    }
  }
  ops.clear();
}

void device::die(const std::string& reason, bool sticky) {
  std::vector<pending_op> lost;
  {
    std::lock_guard lock(mutex_);
    if (dead_.load(std::memory_order_relaxed)) return;
    death_ = reason;
    sticky_death_ = sticky;
    dead_.store(true, std::memory_order_release);  // from here on nothing new is queued
    lost.swap(pending_);
    npending_.store(0, std::memory_order_relaxed);
    demand_.fetch_sub(static_cast<int>(lost.size()), std::memory_order_release);
  }
  // A reason that is not a sticky error (an event query or cuCtxSetCurrent that failed in the poller, a stream that
  // could not be synchronised) says nothing of the work queued: it may still read and write the memory of the
  // operations about to fail, which their callers will then free or reuse. Wait for it to end first.
  bool ended = sticky;
  if (!ended) {
    const context_scope scope(d_, ctx_);
    ended = scope.result() == CUDA_SUCCESS && d_.cuCtxSynchronize() == CUDA_SUCCESS;
  }
  std::string text = "apgas: " + where() + " is dead: " + reason;
  if (!ended) {
    text += "; its queued work could not be seen to end (cuCtxSynchronize failed): it may still be running";
    std::lock_guard lock(mutex_);
    death_ += "; its queued work could not be seen to end (cuCtxSynchronize failed): it may still be running";
  }
  fail(lost, std::make_exception_ptr(dead_place_exception(place_, text)), ended);
}

void device::check(CUresult r, const char* call, bool launch) {
  if (r != CUDA_SUCCESS) throw_error(r, call, launch);
}

void device::throw_error(CUresult r, const char* call, bool launch) {
  const std::string text = error_text(d_, r);
  if (is_sticky(r)) {
    die(text + " (reported by " + call + ")", true);
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
  check(d_.cuEventCreate(&e, timing_ ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return e;
}

// ---- device times (the trace) ----

void device::begin_run() {
  const bool timed = obs::on(obs::cat_gpu | obs::cat_copy);
  if (dead_.load(std::memory_order_acquire)) return;
  const context_scope scope(d_, ctx_);
  if (scope.result() != CUDA_SUCCESS) return;
  std::vector<CUevent> other_kind;
  {
    std::lock_guard lock(mutex_);
    if (ref_ != nullptr) events_.push_back(std::exchange(ref_, nullptr));
    if (timed != timing_) other_kind.swap(events_);  // (nothing is pending between runs)
    timing_ = timed;
    dma_traces_.clear();
  }
  for (CUevent e : other_kind) d_.cuEventDestroy(e);
  if (!timed) return;
  // The reference: recorded on an idle stream, it completes at once; its host time lies between the record and the
  // query that sees it complete. A few tries, the narrowest kept (a stream's first operation may be slow to start);
  // the poller then keeps device times causal (device_times).
  try {
    CUevent best = nullptr;
    std::uint64_t best_ns = 0, best_width = ~std::uint64_t{0};
    for (int attempt = 0; attempt < 8 && best_width > 20'000; ++attempt) {
      const CUevent e = take_event();
      const std::uint64_t before = obs::now();
      // (not record_into: nothing of an operation is queued before the reference, there is nothing to end)
      if (d_.cuEventRecord(e, h2d_) != CUDA_SUCCESS) {
        give_back(e);
        break;
      }
      CUresult q = CUDA_ERROR_NOT_READY;
      while ((q = d_.cuEventQuery(e)) == CUDA_ERROR_NOT_READY) std::this_thread::yield();
      const std::uint64_t after = obs::now();
      if (q != CUDA_SUCCESS || after - before >= best_width) {
        give_back(e);
        if (q != CUDA_SUCCESS) break;
        continue;
      }
      if (best != nullptr) give_back(best);
      best = e;
      best_width = after - before;
      best_ns = before + best_width / 2;
    }
    std::lock_guard lock(mutex_);
    ref_ = best;  // (null: no reference, this GPU's spans are left out)
    ref_ns_ = best_ns;
  } catch (const std::exception&) {  // (the same)
  }
}

device::traced device::trace_begin(std::uint32_t cat, const char* name, int track, std::uint64_t bytes, CUstream s) {
  traced t;
  if (!timing_ || !obs::on(cat)) return t;
  const CUevent e = take_event();
  t.issued_ns = obs::now();  // (before the record: the GPU cannot reach it earlier)
  record_into(e, s);
  t.start = e;
  t.name = name;
  t.cat = cat;
  t.track = track;
  t.bytes = bytes;
  return t;
}

bool device::device_times(traced& t, CUevent end) {
  float from_ref = 0, took = 0;
  if (ref_ == nullptr || d_.cuEventElapsedTime(&from_ref, ref_, t.start) != CUDA_SUCCESS ||
      d_.cuEventElapsedTime(&took, t.start, end) != CUDA_SUCCESS) {
    return false;
  }
  const auto start = static_cast<std::int64_t>(ref_ns_) + std::llround(static_cast<double>(from_ref) * 1e6);
  const std::int64_t length = std::llround(std::max(0.0, static_cast<double>(took)) * 1e6);
  // Causality corrects the reference: the operation cannot start before the host issued it, nor end after the poller
  // saw it end. (Each violation is an error of the reference's host time, by at least that much.)
  std::int64_t shift = static_cast<std::int64_t>(t.issued_ns) - start;
  if (shift < 0) shift = std::min<std::int64_t>(0, static_cast<std::int64_t>(obs::now()) - (start + length));
  ref_ns_ = static_cast<std::uint64_t>(static_cast<std::int64_t>(ref_ns_) + shift);
  t.start_ns = static_cast<std::uint64_t>(start + shift);
  t.end_ns = t.start_ns + static_cast<std::uint64_t>(length);
  t.timed = true;
  if (from_ref < 4000.0f) return false;
  events_.push_back(std::exchange(ref_, t.start));  // (float milliseconds: about 0.5 us apart at 4 s)
  ref_ns_ = t.start_ns;
  return true;
}

void device::keep_trace(CUevent end, const traced& t) {
  std::lock_guard lock(mutex_);
  dma_traces_.emplace(end, t);
}

void device::note_alloc(std::uintptr_t p, std::size_t bytes) {
  std::size_t total = 0;
  {
    std::lock_guard lock(mutex_);
    sizes_[p] = bytes;
    in_use_ += bytes;
    total = in_use_;
  }
  if (obs::on(obs::cat_gpu)) obs::counter(obs::cat_gpu, "GPU memory in use", place_, total);
}

void device::note_free(std::uintptr_t p) {
  std::size_t total = 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    in_use_ -= it->second;
    sizes_.erase(it);
    total = in_use_;
  }
  if (obs::on(obs::cat_gpu)) obs::counter(obs::cat_gpu, "GPU memory in use", place_, total);
}

void device::give_back(CUevent e) noexcept {
  std::lock_guard lock(mutex_);
  events_.push_back(e);
}

// A marker that could not be recorded ends its operation synchronously. Every operation is enqueued on its stream
// before its completion marker is recorded there; once the marker is refused, nothing would ever observe the end of
// what was enqueued, yet the error makes the caller treat the operation as over (its finish ends, the spooler takes its
// slice back, the user frees or refills the memory). So the stream is synchronised before the error is thrown: when
// it reaches the caller, the stream has run everything queued on it (or the place is dead). The callers rely on this:
// h2d, d2h, copy_to, queue_op, alloc, launch (and the spooler, through h2d and d2h).
void device::record_into(CUevent e, CUstream s) {
  const CUresult r = d_.cuEventRecord(e, s);
  if (r == CUDA_SUCCESS) return;
  give_back(e);
  end_synchronously(s, r, "cuEventRecord");
}

void device::end_synchronously(CUstream s, CUresult r, const char* call) {
  const CUresult w = d_.cuStreamSynchronize(s);
  if (w != CUDA_SUCCESS && !is_sticky(r)) {
    // Nothing says the work has ended: it might still read or write memory that the caller is about to reuse. The
    // place dies (as for a sticky error), so that nothing of it is used again.
    die(error_text(d_, r) + " (reported by " + call + " after work was queued on a stream), then " + error_text(d_, w) +
        " (reported by cuStreamSynchronize): that work may still be running",
        false);
    throw_dead();
  }
  throw_error(r, call, false);  // a sticky r: the context is gone and the place dies; else cuda_error
}

void device::add_pending(pending_op op) {
  {
    std::lock_guard lock(mutex_);
    if (!dead_.load(std::memory_order_relaxed)) {
      pending_.push_back(std::move(op));
      npending_.fetch_add(1, std::memory_order_release);
      demand_.fetch_add(1, std::memory_order_release);
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

bool device::poll(CUcontext& current) {
  if (!has_pending()) return false;
  std::vector<pending_op> finished;
  CUresult failure = CUDA_SUCCESS;
  bool no_context = false;
  {
    std::lock_guard lock(mutex_);
    if (current != ctx_) {
      const CUresult r = d_.cuCtxSetCurrent(ctx_);
      if (r == CUDA_SUCCESS) {
        current = ctx_;
      } else {
        failure = r;
        no_context = true;
      }
    }
    for (std::size_t i = 0; !no_context && i < pending_.size();) {
      const CUresult q = d_.cuEventQuery(pending_[i].event);
      if (q == CUDA_ERROR_NOT_READY) {
        ++i;
        continue;
      }
      if (q != CUDA_SUCCESS) {
        failure = q;
        break;
      }
      pending_op& op = pending_[i];
      if (op.trace.start != nullptr) {
        if (!device_times(op.trace, op.event)) events_.push_back(op.trace.start);
        op.trace.start = nullptr;
      }
      events_.push_back(op.event);
      finished.push_back(std::move(op));
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
    npending_.fetch_sub(static_cast<int>(finished.size()), std::memory_order_release);
    demand_.fetch_sub(static_cast<int>(finished.size()), std::memory_order_release);
  }
  // Post steps, outside the lock: a woken activity may come straight back to this device.
  for (pending_op& op : finished) {
    if (op.trace.timed) {
      obs::device_span(op.trace.cat, op.trace.name, place_, op.trace.track, op.trace.start_ns, op.trace.end_ns,
                       op.trace.flow, op.trace.bytes);
    }
    for (CUdeviceptr b : op.buffers) free_on(d2h_, b);  // (no memory pools: cuMemFree, after the kernel has ended)
    staging_->give(op.staging);
    op.keep.reset();
    if (op.wake != nullptr) {
      op.wake->done.signal();
    } else if (op.token) {
      op.token.done();
    }
  }
  if (no_context) {
    // Nothing pending here could ever be seen to complete: every waiting finish would hang.
    die(error_text(d_, failure) + " (reported by cuCtxSetCurrent in the poller: the GPU's operations can no longer "
                                  "be observed)",
        false);
  } else if (failure != CUDA_SUCCESS) {
    // An event reports the error of the work before it: for a sticky error the context is gone for good.
    die(error_text(d_, failure) + (is_sticky(failure) ? " (a kernel or copy failed)" : " (an event query failed)"),
        is_sticky(failure));
  }
  return !finished.empty() || failure != CUDA_SUCCESS;
}

// ---- copies ----

// The event is taken before the copy is enqueued: once a DMA is queued, its end must be observable (a slice given
// back while its DMA is still queued would be refilled under it). If the event cannot be recorded behind the DMA,
// record_into ends the DMA synchronously before the error is thrown.
dma_engine::marker device::h2d(std::uintptr_t dst, const void* src, std::size_t n) {
  alive();
  const context_scope scope(d_, ctx_);
  entered(scope);
  const CUevent e = take_event();
  traced t;
  try {
    t = trace_begin(obs::cat_copy, "DMA host->GPU", obs::track_h2d, n, h2d_);
  } catch (...) {
    give_back(e);
    throw;
  }
  const CUresult r = d_.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, n, h2d_);
  if (r != CUDA_SUCCESS) {
    give_back(e);
    if (t.start != nullptr) give_back(t.start);
  }
  check(r, "cuMemcpyHtoDAsync");
  try {
    record_into(e, h2d_);
  } catch (...) {
    if (t.start != nullptr) give_back(t.start);
    throw;
  }
  if (t.start != nullptr) keep_trace(e, t);
  return reinterpret_cast<marker>(e);
}

dma_engine::marker device::d2h(void* dst, std::uintptr_t src, std::size_t n) {
  alive();
  const context_scope scope(d_, ctx_);
  entered(scope);
  const CUevent e = take_event();
  traced t;
  try {
    t = trace_begin(obs::cat_copy, "DMA GPU->host", obs::track_d2h, n, d2h_);
  } catch (...) {
    give_back(e);
    throw;
  }
  const CUresult r = d_.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), n, d2h_);
  if (r != CUDA_SUCCESS) {
    give_back(e);
    if (t.start != nullptr) give_back(t.start);
  }
  check(r, "cuMemcpyDtoHAsync");
  try {
    record_into(e, d2h_);
  } catch (...) {
    if (t.start != nullptr) give_back(t.start);
    throw;
  }
  if (t.start != nullptr) keep_trace(e, t);
  return reinterpret_cast<marker>(e);
}

void device::wait(marker m) {
  waiter w;
  pending_op op;
  op.event = reinterpret_cast<CUevent>(m);
  if (timing_) {
    std::lock_guard lock(mutex_);
    if (const auto it = dma_traces_.find(op.event); it != dma_traces_.end()) {
      op.trace = it->second;
      dma_traces_.erase(it);
    }
  }
  op.wake = &w;
  add_pending(std::move(op));
  w.done.wait();
  if (w.error) std::rethrow_exception(w.error);
}

void device::put(std::uintptr_t dst, const void* src, std::size_t n) {
  alive();
  if (n == 0) return;
  // The direct path: one DMA straight from the user's page-locked memory, or from small pageable memory, which
  // the driver stages itself (cuMemcpyHtoDAsync returns once it has; wait() then waits for the DMA to land).
  if (n <= direct_copy_ || is_pinned(src, n)) {
    apgas::async([this, dst, src, n] { wait(h2d(dst, src, n)); });
  } else {
    spool_->put(dst, src, n);
  }
}

void device::get(void* dst, std::uintptr_t src, std::size_t n) {
  alive();
  if (n == 0) return;
  // Likewise (into pageable memory cuMemcpyDtoHAsync returns only once the copy has ended).
  if (n <= direct_copy_ || is_pinned(dst, n)) {
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
    CUevent e = nullptr;
    {
      const context_scope scope(d_, ctx_);
      entered(scope);
      e = take_event();
      traced t;
      try {
        t = trace_begin(obs::cat_copy, target == this ? "copy GPU->GPU" : "peer copy", obs::track_d2h, n, d2h_);
      } catch (...) {
        give_back(e);
        throw;
      }
      const auto untrace = [&] {
        if (t.start != nullptr) give_back(t.start);
      };
      CUresult r = CUDA_SUCCESS;
      if (target == this) {
        r = d_.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), n, d2h_);
        if (r != CUDA_SUCCESS) {
          untrace();
          give_back(e);
        }
        check(r, "cuMemcpyDtoDAsync");
      } else {
        // With peer access enabled (start-up) this is a direct transfer; otherwise the driver stages it.
        r = d_.cuMemcpyPeerAsync(static_cast<CUdeviceptr>(dst), target->ctx_, static_cast<CUdeviceptr>(src), ctx_,
                                 n, d2h_);
        if (r != CUDA_SUCCESS) {
          untrace();
          give_back(e);
        }
        check(r, "cuMemcpyPeerAsync");
      }
      try {
        record_into(e, d2h_);
      } catch (...) {
        untrace();
        throw;
      }
      if (t.start != nullptr) keep_trace(e, t);
    }
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

void* device::pin(std::size_t bytes) {
  const context_scope scope(d_, ctx_);
  void* p = nullptr;
  if (scope.result() != CUDA_SUCCESS || d_.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
    return nullptr;
  }
  return p;
}

void device::unpin(void* p) noexcept {
  const context_scope scope(d_, ctx_);
  d_.cuMemFreeHost(p);
}

// Remote arrays come from the GPU's memory pool where it has one (stream-ordered: no implicit synchronisation of the
// whole GPU, as cuMemAlloc and cuMemFree have), allocated and zero-filled on the host->device stream; the activity
// waits (parked) until both are done, so the memory is ready for every stream.
std::uintptr_t device::alloc(std::size_t bytes) {
  alive();
  CUdeviceptr p = 0;
  CUevent e = nullptr;
  {
    const context_scope scope(d_, ctx_);
    entered(scope);
    const char* call = pools_ ? "cuMemAllocAsync" : "cuMemAlloc";
    const CUresult r = pools_ ? d_.cuMemAllocAsync(&p, std::max<std::size_t>(bytes, 1), h2d_)
                              : d_.cuMemAlloc(&p, std::max<std::size_t>(bytes, 1));
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      std::size_t free_bytes = 0, total = 0;
      d_.cuMemGetInfo(&free_bytes, &total);
      throw cuda_error(static_cast<int>(r), "apgas::make_remote_array: " + std::to_string(bytes) + " bytes on " +
                                                where() + ": out of device memory (" + std::to_string(free_bytes) +
                                                " of " + std::to_string(total) + " bytes free)");
    }
    check(r, call);
    try {
      if (bytes != 0 || pools_) {
        e = take_event();
        if (bytes != 0) {
          const CUresult r2 = d_.cuMemsetD8Async(p, 0, bytes, h2d_);
          if (r2 != CUDA_SUCCESS) give_back(e);
          check(r2, "cuMemsetD8Async");
        }
        record_into(e, h2d_);
      }
    } catch (...) {
      free_on(h2d_, p);
      throw;
    }
  }
  if (e != nullptr) {
    try {
      wait(reinterpret_cast<marker>(e));  // zero-filled before anyone can use it, on any stream
    } catch (...) {
      const context_scope scope(d_, ctx_);
      if (scope.result() == CUDA_SUCCESS) free_on(h2d_, p);
      throw;
    }
  }
  note_alloc(static_cast<std::uintptr_t>(p), bytes);
  return static_cast<std::uintptr_t>(p);
}

// The caller's finishes that used the array have ended (its kernels and copies are done), so a stream-ordered free
// on any stream is safe, and it returns at once; cuMemFree would wait for every kernel of the GPU.
void device::free(std::uintptr_t address) {
  alive();
  {
    // An address this place does not hold is refused before the driver sees it: freed already (a stale copy of the
    // remote_array), with stream-ordered pools its memory may already be a new array's.
    std::lock_guard lock(mutex_);
    if (sizes_.find(address) == sizes_.end()) {
      char at[32];
      std::snprintf(at, sizeof at, "%#llx", static_cast<unsigned long long>(address));
      throw illegal_operation_exception("apgas::free_remote_array: no array of GPU place " + std::to_string(place_) +
                                        " is at " + at + " (freed twice, or not made there)");
    }
  }
  const context_scope scope(d_, ctx_);
  entered(scope);
  const auto p = static_cast<CUdeviceptr>(address);
  if (pools_) {
    check(d_.cuMemFreeAsync(p, h2d_), "cuMemFreeAsync");
  } else {
    check(d_.cuMemFree(p), "cuMemFree");
  }
  note_free(address);
}

// ---- kernels ----

device::function_info device::function_for(const gpu_kernel_request& r) {
  {
    std::lock_guard lock(mutex_);
    auto it = functions_.find(r.entry);
    if (it != functions_.end()) return it->second;
  }
  function_info f;
  try {
    f.fn = static_cast<CUfunction>(r.resolve(r.entry));  // a runtime API call in the nvcc file, this context current
  } catch (const cuda_error& e) {  // (it cannot name the place)
    throw cuda_error(e.code(), std::string(e.what()) + " (on " + where() + ")");
  }
  int v = 0;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.fn), "cuFuncGetAttribute");
  f.limits.max_threads_per_block = v;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f.fn), "cuFuncGetAttribute");
  f.limits.regs_per_thread = v;
  check(d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.fn), "cuFuncGetAttribute");
  f.limits.static_shared = static_cast<std::size_t>(v);
  // Without the opt-in a block may have 48 KiB of shared memory in all: the static part counts.
  f.dynamic_shared_set =
      f.limits.static_shared < default_shared_limit ? default_shared_limit - f.limits.static_shared : 0;
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

grid device::prepare(const gpu_kernel_request& r, function_info& f) {
  if (r.dynamic_shared > f.dynamic_shared_set) {
    // Beyond 48 KiB (static shared memory included) a function must opt in. It opts in once to all the device
    // allows: setting just what this launch asks for could lower the limit under a concurrent launch of the same
    // function that asked for more. An amount beyond the device's limit is refused by check_launch below.
    const std::size_t room =
        limits_.max_shared_optin > f.limits.static_shared ? limits_.max_shared_optin - f.limits.static_shared : 0;
    if (r.dynamic_shared <= room) {
      check(d_.cuFuncSetAttribute(f.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(room)),
            "cuFuncSetAttribute", true);
      f.dynamic_shared_set = room;
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
  return g;
}

CUdeviceptr device::upload_spooled(const gpu_upload& u) {
  CUdeviceptr p = 0;
  {
    const context_scope scope(d_, ctx_);
    entered(scope);
    p = alloc_on(h2d_, u.bytes);  // stream-ordered on the copy stream: the pumps' DMAs come after it
  }
  try {
    apgas::finish([&] { spool_->put(static_cast<std::uintptr_t>(p), u.data, u.bytes); });
  } catch (...) {
    const context_scope scope(d_, ctx_);
    if (scope.result() == CUDA_SUCCESS) free_on(h2d_, p);
    // The pumps' failures arrive wrapped by the finish: the launch reports the first one itself.
    try {
      throw;
    } catch (const multiple_exceptions& m) {
      if (!m.exceptions().empty()) std::rethrow_exception(m.exceptions().front());
      throw;
    }
  }
  return p;
}

// The pre step, in the calling activity: limits (nothing started when a launch is refused), large uploads through the
// spooler (this activity waits until they have landed), then in one go on the kernel stream: small uploads, the
// spilled body and the constant data from one page-locked staging block, the launch, the stream-ordered frees of the
// launch's buffers right behind it, and its completion event. The post step (poll) gives the staging block back and
// ends the kernel's finish token.
void device::launch(gpu_kernel_request& r) {
  alive();
  function_info f;
  grid g;
  {
    const context_scope scope(d_, ctx_);
    entered(scope);
    f = function_for(r);
    g = prepare(r, f);
  }

  // Where each piece of launch data goes in the staging block (large uploads are not staged).
  constexpr std::size_t unstaged = ~std::size_t{0};
  std::size_t staged = 0;
  const auto stage = [&](std::size_t bytes) {
    const std::size_t at = round_up(staged, staging_align);
    staged = at + bytes;
    return at;
  };
  std::vector<std::size_t> upload_at(r.uploads.size(), unstaged);
  for (std::size_t i = 0; i < r.uploads.size(); ++i) {
    if (r.uploads[i].bytes != 0 && r.uploads[i].bytes < spooled_upload) upload_at[i] = stage(r.uploads[i].bytes);
  }
  const std::size_t constant_at = r.constant.empty() ? unstaged : stage(r.constant.size());
  const std::size_t body_at = r.spilled ? stage(r.body_bytes) : unstaged;

  std::vector<CUdeviceptr> buffers(r.uploads.size(), 0);
  const auto release_now = [&](CUstream s) noexcept {
    for (CUdeviceptr b : buffers) {
      if (b != 0) free_on(s, b);
    }
  };
  try {
    for (std::size_t i = 0; i < r.uploads.size(); ++i) {
      if (r.uploads[i].bytes >= spooled_upload) buffers[i] = upload_spooled(r.uploads[i]);
    }
  } catch (...) {
    const context_scope scope(d_, ctx_);
    if (scope.result() == CUDA_SUCCESS) release_now(h2d_);
    throw;
  }

  const context_scope scope(d_, ctx_);
  if (scope.result() != CUDA_SUCCESS) {
    check(scope.result(), "cuCtxSetCurrent");  // (the spooled buffers cannot be freed without the context)
  }
  // Kernels that read constant data all go to stream 0: stream order keeps the next constant copy from overwriting
  // the buffer while a kernel still reads it. Others go round-robin, or to their in-order queue's stream.
  const CUstream queue = r.queue >= 0 ? queue_stream(r.queue) : nullptr;
  CUstream s = kstreams_[0];
  int track = obs::track_kernel0;  // (the trace's track of the stream)
  if (r.constant.empty() && queue != nullptr) {
    s = queue;
    track = obs::track_queue0 + r.queue;
  } else if (r.constant.empty()) {
    const unsigned k = next_stream_.fetch_add(1, std::memory_order_relaxed) % kernel_streams;
    s = kstreams_[k];
    track += static_cast<int>(k);
  }
  // A constant kernel of a queue runs on stream 0 after what the queue got before it, and what the queue gets after
  // it waits for it: an event each way, e (a wait takes the event's state when it is enqueued, so the events go back
  // to the pool at once). On failure e is back in the pool, and `from` has run everything queued on it (a failed
  // record or wait ends it synchronously: after the kernel, the queue would otherwise not wait for it).
  const auto cross = [&](CUstream from, CUstream to, CUevent e) {
    record_into(e, from);
    const CUresult r = d_.cuStreamWaitEvent(to, e, 0);
    give_back(e);
    if (r != CUDA_SUCCESS) end_synchronously(from, r, "cuStreamWaitEvent");
  };
  const bool queued_constant = queue != nullptr && s != queue;
  staging_cache::block block;
  if (staged != 0) {
    try {
      block = staging_->take(staged);
    } catch (const std::bad_alloc&) {
      release_now(s);
      throw cuda_error(CUDA_ERROR_OUT_OF_MEMORY, "apgas: no page-locked memory for the " + std::to_string(staged) +
                                                    " bytes of launch data of a kernel on " + where());
    }
    for (std::size_t i = 0; i < r.uploads.size(); ++i) {
      if (upload_at[i] != unstaged) std::memcpy(block.data + upload_at[i], r.uploads[i].data, r.uploads[i].bytes);
    }
    if (constant_at != unstaged) std::memcpy(block.data + constant_at, r.constant.data(), r.constant.size());
    if (body_at != unstaged) std::memcpy(block.data + body_at, r.body, r.body_bytes);
  }

  // The completion event first (and, for a constant kernel of a queue, the event the queue waits for after it): once
  // the kernel is launched its end must be observable (an event that cannot be had afterwards would leave a running
  // kernel that no finish counts, and its buffers).
  CUevent done = nullptr;
  CUevent then = nullptr;
  try {
    done = take_event();
    if (queued_constant) then = take_event();
  } catch (...) {
    if (done != nullptr) give_back(done);
    staging_->give(block);
    release_now(s);
    throw;
  }
  bool enqueued = false;  // a copy from the staging block is queued: the block is in use until the stream passes it
  traced trace;
  try {
    std::vector<std::uintptr_t> addresses(r.uploads.size());
    for (std::size_t i = 0; i < r.uploads.size(); ++i) {
      if (buffers[i] == 0) buffers[i] = alloc_on(s, r.uploads[i].bytes);
      addresses[i] = static_cast<std::uintptr_t>(buffers[i]);
      if (upload_at[i] != unstaged) {
        check(d_.cuMemcpyHtoDAsync(buffers[i], block.data + upload_at[i], r.uploads[i].bytes, s),
              "cuMemcpyHtoDAsync");
        enqueued = true;
      }
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
      check(d_.cuMemcpyHtoDAsync(body_copy, block.data + body_at, r.body_bytes, s), "cuMemcpyHtoDAsync (kernel body)");
      enqueued = true;
      params[0] = &body_copy;
    }
    // The constant copy and the launch that reads it, as one step: no other constant copy between them.
    std::unique_lock constant_lock(constant_mutex_, std::defer_lock);
    if (queued_constant) cross(queue, s, take_event());
    if (constant_at != unstaged) {
      constant_lock.lock();
      CUdeviceptr c = 0;
      try {
        c = reinterpret_cast<CUdeviceptr>(r.constant_symbol());  // a runtime API call in the nvcc file
      } catch (const cuda_error& e) {
        throw cuda_error(e.code(), std::string(e.what()) + " (on " + where() + ")");
      }
      check(d_.cuMemcpyHtoDAsync(c, block.data + constant_at, r.constant.size(), s), "cuMemcpyHtoDAsync (constant)");
      enqueued = true;
    }
    // (the flow starts before the kernel's start event is recorded: the arrow never points back in time)
    const std::uint64_t flow = timing_ ? obs::flow_out(obs::cat_gpu, obs::flow::launch) : 0;
    trace = trace_begin(obs::cat_gpu, r.name != nullptr ? r.name : r.what, track, 0, s);
    if (trace.start != nullptr) trace.flow = flow;
    check(d_.cuLaunchKernel(f.fn, static_cast<unsigned>(g.blocks.x), static_cast<unsigned>(g.blocks.y),
                            static_cast<unsigned>(g.blocks.z), static_cast<unsigned>(g.threads.x),
                            static_cast<unsigned>(g.threads.y), static_cast<unsigned>(g.threads.z),
                            static_cast<unsigned>(r.dynamic_shared), s, params, nullptr),
          "cuLaunchKernel", true);
  } catch (...) {
    if (trace.start != nullptr) give_back(trace.start);
    if (then != nullptr) give_back(then);
    release_now(s);  // stream-ordered: after the copies already queued
    if (!enqueued) {
      staging_->give(block);
      give_back(done);
    } else {
      // The queued copies still read the staging block: it goes back once the stream has passed them.
      bool recorded = false;
      try {
        record_into(done, s);
        recorded = true;
        pending_op cleanup;
        cleanup.event = done;
        cleanup.staging = block;
        add_pending(std::move(cleanup));
      } catch (...) {
        // Not recorded: record_into synchronised the stream, the copies are done. Recorded but not pending (no
        // memory), or the place is dead (perhaps because the stream could not be synchronised): the block is not
        // reused.
        if (!recorded && !dead_.load(std::memory_order_acquire)) staging_->give(block);
      }
    }
    throw;
  }
  // The buffers are freed in stream order right behind the kernel: back in the pool the moment it ends, not when the
  // poller has seen it (by then newer kernels may be queued on this stream). Without pools cuMemFree synchronises:
  // the post step does it.
  if (pools_) {
    release_now(s);
    buffers.clear();
  }
  bool recorded = false;
  try {
    record_into(done, s);
    recorded = true;
    if (queued_constant) cross(s, queue, std::exchange(then, nullptr));
  } catch (...) {
    // Nothing of the launch is in flight any more: a completion event that could not be recorded, or a queue that
    // could not be made to wait for the kernel, ended the kernel synchronously (record_into, cross), or the place is
    // dead. The launch fails; its buffers, staging block and events are free again (a dead place's block is kept).
    if (then != nullptr) give_back(then);
    release_now(s);
    if (!dead_.load(std::memory_order_acquire)) staging_->give(block);
    if (recorded) give_back(done);
    throw;
  }
  pending_op op;
  op.event = done;
  op.trace = trace;
  // after the launch: a refused launch never counted in the finish
  op.token = r.token != nullptr ? std::exchange(*r.token, finish_token{}) : finish_token::join();
  op.buffers = std::move(buffers);
  op.staging = block;
  op.keep = std::move(r.keep);
  add_pending(std::move(op));
}

// ---- in-order queues --------------------------------------------------------------------------------------------

int device::make_queue() {
  alive();
  {
    std::lock_guard lock(queues_mutex_);
    if (!free_queues_.empty()) {
      const int q = free_queues_.back();
      free_queues_.pop_back();
      return q;
    }
  }
  CUstream s = nullptr;
  {
    const context_scope scope(d_, ctx_);
    entered(scope);
    check(d_.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  std::lock_guard lock(queues_mutex_);
  queues_.push_back(s);
  return static_cast<int>(queues_.size()) - 1;
}

void device::release_queue(int q) noexcept {
  std::lock_guard lock(queues_mutex_);
  if (q >= 0 && q < static_cast<int>(queues_.size())) free_queues_.push_back(q);
}

CUstream device::queue_stream(int q) {
  std::lock_guard lock(queues_mutex_);
  if (q < 0 || q >= static_cast<int>(queues_.size())) {
    throw illegal_operation_exception("apgas::in_order_queue: queue " + std::to_string(q) + " is not one of " +
                                      where() + " (a queue belongs to the run it was made in)");
  }
  return queues_[static_cast<std::size_t>(q)];
}

template <class Issue>
void device::queue_op(int q, const char* call, const char* trace_name, std::size_t bytes, finish_token& token,
                      Issue issue) {
  alive();
  const CUstream s = queue_stream(q);
  const context_scope scope(d_, ctx_);
  entered(scope);
  const CUevent e = take_event();
  traced t;
  try {
    t = trace_begin(obs::cat_copy, trace_name, obs::track_queue0 + q, bytes, s);
  } catch (...) {
    give_back(e);
    throw;
  }
  const CUresult r = issue(s);
  if (r != CUDA_SUCCESS) {
    give_back(e);
    if (t.start != nullptr) give_back(t.start);
  }
  check(r, call);
  try {
    record_into(e, s);
  } catch (...) {
    if (t.start != nullptr) give_back(t.start);
    throw;
  }
  pending_op op;
  op.event = e;
  op.trace = t;
  op.token = std::exchange(token, finish_token{});
  add_pending(std::move(op));
}

void device::queue_put(int q, std::uintptr_t dst, const void* src, std::size_t n, finish_token& token) {
  queue_op(q, "cuMemcpyHtoDAsync", "DMA host->GPU", n, token, [&](CUstream s) {
    return d_.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, n, s);
  });
}

void device::queue_get(int q, void* dst, std::uintptr_t src, std::size_t n, finish_token& token) {
  queue_op(q, "cuMemcpyDtoHAsync", "DMA GPU->host", n, token, [&](CUstream s) {
    return d_.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), n, s);
  });
}

void device::queue_copy(int q, device& from, std::uintptr_t src, device& to, std::uintptr_t dst, std::size_t n,
                        finish_token& token) {
  from.alive();
  to.alive();
  const bool same = &from == &to;
  // (Between two GPUs the stream may belong to either context: the copy is ordered in it.)
  queue_op(q, same ? "cuMemcpyDtoDAsync" : "cuMemcpyPeerAsync", same ? "copy GPU->GPU" : "peer copy", n, token,
           [&](CUstream s) {
    return same ? d_.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), n, s)
                : d_.cuMemcpyPeerAsync(static_cast<CUdeviceptr>(dst), to.ctx_, static_cast<CUdeviceptr>(src),
                                       from.ctx_, n, s);
  });
}

void device::queue_drain(int q) {
  alive();
  const CUstream s = queue_stream(q);
  CUevent e = nullptr;
  {
    const context_scope scope(d_, ctx_);
    entered(scope);
    e = take_event();
    record_into(e, s);
  }
  wait(reinterpret_cast<marker>(e));
}

}  // namespace apgas::detail::gpu
