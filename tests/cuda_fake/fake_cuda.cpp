// A fake CUDA driver: every Driver API function the apgas CUDA backend loads (APGAS_DETAIL_CUDA_FUNCTIONS in
// cuda_place/src/driver.hpp), implemented on host memory, so that the backend's logic runs for real on a machine
// without a GPU. The backend loads it instead of libcuda.so.1 when APGAS_CUDA_DRIVER names it.
//
// Model (what the tests rely on):
//  - Devices: APGAS_FAKE_CUDA_DEVICES of them (default 2; 0 makes cuInit fail with CUDA_ERROR_NO_DEVICE, as a real
//    driver does), H100-like attributes, named "Fake GPU <i>". Each has one primary context (an opaque handle,
//    reference counted: when the last retain is released the context is destroyed with its streams, events and
//    memory). cuCtxSetCurrent is per thread.
//  - Memory: "device" memory is host memory (so copies can be checked), poisoned with 0xA5 when allocated (a real
//    cuMemAlloc does not zero either), and tracked per device. Every copy or memset is bounds-checked *when the
//    stream executes it* against the live allocations of the device it names: an access outside them fails the
//    device with CUDA_ERROR_ILLEGAL_ADDRESS (sticky, printed on stderr with the addresses). This is how an
//    off-by-one, a use after free (cuMemFree, or a stream-ordered free that ran first) or a copy into the wrong
//    device's memory shows up. cuMemFree synchronises the device first (as the real one does).
//  - Host memory: cuMemHostAlloc blocks are "page-locked". An async copy from or to other (pageable) host memory
//    behaves as the real driver: host->device stages the bytes before the call returns, device->host returns only
//    when the copy is done; such copies are counted (pageable_async_copies; the largest of them:
//    largest_pageable_async_copy, a peak), since the backend makes them only up to config::cuda_direct_copy bytes.
//    A copy that starts in a page-locked block and runs past its end, or whose block was freed before the stream got
//    to it, is an illegal address too.
//  - Streams: one worker thread each, executing a FIFO of operations in order (copies, memsets, event records,
//    stream-ordered frees, kernel launches as no-ops, waits for an event), each after an optional delay
//    (APGAS_FAKE_CUDA_DELAY_US, or apgas_fake_cuda_set_delay_us; event records and waits are not delayed). An event is
//    complete when its stream has reached the latest record; cuStreamWaitEvent holds its stream until the record that
//    was the event's latest when it was called is complete. cuStreamSynchronize waits until its stream has executed
//    everything queued on it before the call (while the device is paused it waits for another thread to let it go
//    on); cuCtxSynchronize likewise for every stream of the device. Once a device has failed, its streams move no data any more (events still complete, but every query and
//    call, cuStreamSynchronize included, reports the sticky error).
//  - Strictness: the stream (and event) of a call must belong to the context current on the calling thread; a
//    mismatch returns CUDA_ERROR_INVALID_HANDLE and is counted (wrong_context_calls) and printed: the backend's
//    invariant is to make its device's context current before every call.
//  - Event times: an event records the steady-clock time at which its stream reached it; cuEventElapsedTime gives the
//    difference (as float milliseconds) when both events were made without CU_EVENT_DISABLE_TIMING, recorded and
//    reached, and fails as the real driver does otherwise (counted: timing_events made, elapsed_queries).
//  - Contexts: cuCtxSetCurrent/cuCtxGetCurrent per thread, and cuCtxSetCurrent can be made to fail (fail_next).
//  - Driver version: cuDriverGetVersion reports APGAS_FAKE_CUDA_DRIVER_VERSION (default 13000, CUDA 13.0), or what
//    apgas_fake_cuda_set_driver_version set.
//  - Functions: a CUfunction is any handle; its static shared memory is 0 unless the test set it
//    (apgas_fake_cuda_set_static_shared). As on a GPU, a launch may use at most 48 KiB minus the static shared memory of
//    dynamic shared memory unless the function opted in (cuFuncSetAttribute, at most 227 KiB minus the static part).
//  - Memory pools: one default pool per device (cuDeviceGetDefaultMemPool); cuMemPoolSetAccess records which devices
//    may read it (apgas_fake_cuda_pool_access).
//  - Trace: while on (apgas_fake_cuda_trace), every stream operation of a device is recorded when it is enqueued, in
//    each stream's order (fake_trace.h): copies with the first bytes of their source, kernels with the first bytes of
//    their body and, when the stream executes them, the bytes at a watched device address (what the kernel would read).
//  - Test control: the apgas_fake_cuda_* functions at the end (extern "C"), reached with dlopen(RTLD_NOLOAD)+dlsym
//    (tests/cuda_fake/fake_control.hpp): fail a device (sticky), fail the next calls of a function (one-shot, any
//    error code), stall a call after it took effect, pause a device's streams, set the delay and the driver version,
//    trace, read counters and device memory, reset. For a program that does not call them (a sample under test),
//    APGAS_FAKE_CUDA_FAIL="FUNCTION:ERROR[,...]" fails the first call of each FUNCTION (any device) with ERROR.
//
// Robustness: the state is created on first use and never destroyed (anything may call in during exit, e.g. the
// destructor of a static pinned_vector); an exit hook stops and joins every stream worker, after which operations
// execute synchronously on the calling thread. Memory stays reachable from the state, so leak checkers are quiet.
//
// Locks: state::mu may be held while taking handles_mu; device mem (two of them in ordinal order) while taking
// pinned_mu; no other lock is taken while one is held. A stream's mu is held only to queue, take or finish an
// operation (a worker never holds it while it executes one).

#include "fake_trace.h"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#define APGAS_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr std::size_t total_memory = std::size_t{80} << 30;     // an H100 80GB
constexpr std::size_t reserved_memory = std::size_t{512} << 20;  // what the "driver" keeps (cuMemGetInfo)
constexpr std::size_t device_alignment = 256;
constexpr std::size_t host_alignment = 4096;
constexpr int max_devices = 64;
constexpr int default_dynamic_shared = 48 * 1024;
constexpr int max_shared_optin = 227 * 1024;
constexpr int shared_per_sm = 228 * 1024;
constexpr int reserved_shared_per_block = 1024;
constexpr int sms = 132;
constexpr int regs_per_thread = 32;
constexpr unsigned char poison = 0xA5;

#define APGAS_FAKE_COUNTERS(X)                                                                                     \
  X(h2d_ops) X(h2d_bytes) X(d2h_ops) X(d2h_bytes) X(d2d_ops) X(d2d_bytes) X(peer_ops) X(peer_bytes_out)            \
  X(peer_bytes_in) X(peer_copies_without_access) X(memset_ops) X(memset_bytes) X(kernel_launches)                  \
  X(event_records) X(stream_waits) X(event_queries) X(ops_executed) X(max_pending) X(pageable_async_copies)        \
  X(largest_pageable_async_copy)                                                                                    \
  X(illegal_accesses) X(wrong_context_calls) X(invalid_handle_calls) X(invalid_frees) X(allocs_total)              \
  X(frees_total) X(injected_failures) X(last_grid) X(last_block) X(last_shared) X(sync_allocs) X(sync_frees)       \
  X(host_allocs) X(host_frees_without_context) X(timing_events) X(elapsed_queries) X(stream_syncs)            \
  X(ctx_syncs)

enum counter : int {
#define APGAS_FAKE_ENUM(c) c,
  APGAS_FAKE_COUNTERS(APGAS_FAKE_ENUM)
#undef APGAS_FAKE_ENUM
  n_counters
};
constexpr const char* counter_names[] = {
#define APGAS_FAKE_NAME(c) #c,
    APGAS_FAKE_COUNTERS(APGAS_FAKE_NAME)
#undef APGAS_FAKE_NAME
};

bool is_sticky(int e) {
  switch (e) {
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
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

}  // namespace

// The opaque handle types of cuda.h, defined here.
struct CUctx_st {
  int ordinal = 0;
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  bool timing = true;                       // created without CU_EVENT_DISABLE_TIMING: cuEventElapsedTime works
  std::atomic<std::uint64_t> recorded{0};   // generation of the latest record; 0: never recorded
  std::atomic<std::uint64_t> completed{0};  // highest generation its streams have reached
  std::atomic<std::int64_t> time_ns{0};     // steady-clock time at which its stream reached the latest record
};

namespace {

enum class op_kind { h2d, d2h, d2d, peer, memset8, record, wait_event, free_async, kernel };

struct op {
  op_kind kind = op_kind::kernel;
  std::uintptr_t dst = 0;
  std::uintptr_t src = 0;
  std::size_t n = 0;
  unsigned char value = 0;
  int host = 0;  // h2d/d2h: 1 page-locked, 0 pageable, -1 starts in a page-locked block and runs past its end
  int dst_dev = -1;
  int src_dev = -1;
  std::shared_ptr<CUevent_st> event;
  std::uint64_t generation = 0;
  std::vector<unsigned char> staged;  // h2d from pageable memory: the bytes, taken during the call
  const char* call = "";
  // (trace)
  std::uint64_t tag = 0;   // h2d: the first bytes of the source; kernel: of the body
  long trace_index = -1;   // the op's trace entry, while tracing
};

}  // namespace

struct CUstream_st {
  CUctx_st* ctx = nullptr;
  std::mutex mu;
  std::condition_variable work;      // the worker waits for operations
  std::condition_variable progress;  // callers wait for `done` to advance
  std::deque<op> queue;
  std::uint64_t enqueued = 0;
  std::uint64_t done = 0;
  bool stop = false;
  bool threaded = false;
  std::thread worker;
};

namespace {

struct device_state {
  explicit device_state(int i) : ordinal(i) { ctx.ordinal = i; }
  const int ordinal;
  CUctx_st ctx;
  std::atomic<int> retains{0};
  std::atomic<int> failed{0};  // the sticky error, 0 while healthy
  std::atomic<bool> paused{false};
  std::atomic<long long> pending{0};
  std::shared_mutex mem;
  std::map<std::uintptr_t, std::size_t> allocs;  // (mem) address -> bytes
  std::size_t live_bytes = 0;                     // (mem)
  std::vector<bool> peer;                         // (state::mu) peer access enabled to device i
  std::vector<bool> pool_access;                  // (state::mu) device i may access this device's default pool
  std::uint64_t pool_release_threshold = 0;       // (state::mu) CU_MEMPOOL_ATTR_RELEASE_THRESHOLD of the default pool
  std::atomic<long long> counters[n_counters]{};
  std::mutex trace_mu;
  bool tracing = false;                                   // (trace_mu)
  std::vector<apgas_fake_cuda_trace_entry> trace;         // (trace_mu)
  std::uintptr_t watch = 0;                               // (trace_mu) the address kernels "read" (8 bytes)
};

struct injection {
  int device;
  std::string call;
  int error;
  int count;
};

struct state {
  state();
  std::mutex mu;
  std::atomic<bool> initialized{false};
  bool env_ok = true;
  int ndevices = 2;
  int default_delay_us = 0;
  std::atomic<int> delay_us{0};
  std::atomic<std::uint64_t> generation{0};
  std::vector<std::unique_ptr<device_state>> devices;
  bool shut_down = false;                                     // (mu)
  std::vector<injection> injections;                          // (mu)
  std::atomic<int> ninjections{0};
  std::vector<injection> stalls;                              // (mu) `error` holds the microseconds
  std::atomic<int> nstalls{0};
  std::atomic<int> stalling{0};                               // calls inside a stall right now
  std::string last_fault;                                     // (mu)
  std::unordered_map<const void*, int> function_shared;       // (mu) MAX_DYNAMIC_SHARED_SIZE_BYTES per function
  std::unordered_map<const void*, int> function_static;       // (mu) static shared memory per function
  int default_driver_version = 13000;
  std::atomic<int> driver_version{13000};
  std::shared_mutex handles_mu;
  std::unordered_map<CUstream_st*, std::unique_ptr<CUstream_st>> streams;  // (handles_mu)
  std::unordered_map<CUevent_st*, std::shared_ptr<CUevent_st>> events;     // (handles_mu)
  std::shared_mutex pinned_mu;
  std::map<std::uintptr_t, std::size_t> pinned;  // (pinned_mu) page-locked host blocks
};

bool parse_env(const char* name, int lo, int hi, int& out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return true;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi) {
    std::fprintf(stderr, "apgas fake CUDA: %s='%s' is not a number from %d to %d\n", name, v, lo, hi);
    return false;
  }
  out = static_cast<int>(x);
  return true;
}

state::state() {
  env_ok = parse_env("APGAS_FAKE_CUDA_DEVICES", 0, max_devices, ndevices);
  env_ok = parse_env("APGAS_FAKE_CUDA_DELAY_US", 0, 1000000, default_delay_us) && env_ok;
  env_ok = parse_env("APGAS_FAKE_CUDA_DRIVER_VERSION", 1000, 99990, default_driver_version) && env_ok;
  delay_us.store(default_delay_us);
  driver_version.store(default_driver_version);
  if (const char* v = std::getenv("APGAS_FAKE_CUDA_FAIL"); v != nullptr && *v != '\0') {  // FUNCTION:ERROR,...
    const std::string spec = v;
    for (std::size_t at = 0; at <= spec.size();) {
      const std::size_t end = std::min(spec.find(',', at), spec.size()), colon = spec.find(':', at);
      char* stop = nullptr;
      const long error = colon < end ? std::strtol(spec.c_str() + colon + 1, &stop, 10) : 0;
      if (colon >= end || colon == at || stop != spec.c_str() + end || error <= 0) {
        std::fprintf(stderr, "apgas fake CUDA: APGAS_FAKE_CUDA_FAIL='%s': '%s' is no FUNCTION:ERROR (ERROR a positive "
                             "CUresult)\n", v, spec.substr(at, end - at).c_str());
        env_ok = false;
        break;
      }
      injections.push_back(injection{-1, spec.substr(at, colon - at), static_cast<int>(error), 1});
      ninjections.fetch_add(1, std::memory_order_relaxed);
      at = end + 1;
    }
  }
  for (int i = 0; i < ndevices; ++i) {
    devices.push_back(std::make_unique<device_state>(i));
    devices.back()->peer.assign(static_cast<std::size_t>(ndevices), false);
    devices.back()->pool_access.assign(static_cast<std::size_t>(ndevices), false);
  }
}

state& S() {
  static state* s = new state();  // never destroyed: see the top of the file
  return *s;
}

thread_local CUctx_st* t_current = nullptr;

void count(device_state& d, counter c, long long v = 1) { d.counters[c].fetch_add(v, std::memory_order_relaxed); }
/// Raises counter c to v if v is larger (a peak).
void raise_to(device_state& d, counter c, long long v) {
  long long peak = d.counters[c].load(std::memory_order_relaxed);
  while (v > peak && !d.counters[c].compare_exchange_weak(peak, v, std::memory_order_relaxed)) {
  }
}

device_state* device_at(int ordinal) {
  state& g = S();
  if (ordinal < 0 || ordinal >= g.ndevices) return nullptr;
  return g.devices[static_cast<std::size_t>(ordinal)].get();
}

device_state& dev(const CUctx_st* c) { return *S().devices[static_cast<std::size_t>(c->ordinal)]; }

bool valid_context(const CUctx_st* c) {
  state& g = S();
  for (const auto& d : g.devices) {
    if (&d->ctx == c) return true;
  }
  return false;
}

std::string hex(std::uintptr_t p) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(p));
  return b;
}

std::string range(std::uintptr_t p, std::size_t n) {
  std::string s = "[";  // (appended piece by piece: g++ 12 warns falsely about "[" + std::string, -Wrestrict)
  s += hex(p);
  s += ", ";
  s += hex(p + n);
  s += ") (";
  s += std::to_string(n);
  s += " bytes)";
  return s;
}

void notify_streams(const device_state* d) {
  state& g = S();
  std::shared_lock lock(g.handles_mu);
  for (auto& [h, s] : g.streams) {
    if (d == nullptr || s->ctx == &d->ctx) s->work.notify_all();
  }
}

/// The device fails with a sticky error (the first one stays).
void fail_device(device_state& d, int error, const std::string& why, bool print) {
  int expected = 0;
  if (!d.failed.compare_exchange_strong(expected, error)) return;
  {
    std::lock_guard lock(S().mu);
    S().last_fault = why;
  }
  if (print) std::fprintf(stderr, "apgas fake CUDA: device %d failed: %s\n", d.ordinal, why.c_str());
  notify_streams(&d);
}

void illegal(device_state& d, const std::string& what) {
  count(d, illegal_accesses);
  fail_device(d, CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS: " + what, true);
}

/// A one-shot failure injected for `call` on device `ordinal` (apgas_fake_cuda_fail_next), or success.
CUresult injected(const char* call, int ordinal) {
  state& g = S();
  if (g.ninjections.load(std::memory_order_acquire) == 0) return CUDA_SUCCESS;
  int error = 0;
  {
    std::lock_guard lock(g.mu);
    for (auto it = g.injections.begin(); it != g.injections.end(); ++it) {
      if ((it->device == -1 || it->device == ordinal) && it->call == call) {
        error = it->error;
        if (--it->count == 0) {
          g.injections.erase(it);
          g.ninjections.fetch_sub(1, std::memory_order_release);
        }
        break;
      }
    }
  }
  if (error == 0) return CUDA_SUCCESS;
  if (device_state* d = device_at(ordinal)) {
    count(*d, injected_failures);
    if (is_sticky(error)) {
      fail_device(*d, error, std::string("injected by the test in ") + call, false);
    }
  }
  return static_cast<CUresult>(error);
}

/// A stall injected for `call` (apgas_fake_cuda_stall_next): the call sleeps after it has taken effect, before it
/// returns, so that a test can make another thread act in between.
void stall_point(const char* call, int ordinal) {
  state& g = S();
  if (g.nstalls.load(std::memory_order_acquire) == 0) return;
  int us = 0;
  {
    std::lock_guard lock(g.mu);
    for (auto it = g.stalls.begin(); it != g.stalls.end(); ++it) {
      if ((it->device == -1 || it->device == ordinal) && it->call == call) {
        us = it->error;
        if (--it->count == 0) {
          g.stalls.erase(it);
          g.nstalls.fetch_sub(1, std::memory_order_release);
        }
        break;
      }
    }
  }
  if (us == 0) return;
  g.stalling.fetch_add(1);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
  g.stalling.fetch_sub(1);
}

/// The checks at the start of a call made in a context: initialised, the device alive, no injected failure.
CUresult enter(device_state& d, const char* call) {
  if (const int e = d.failed.load(std::memory_order_acquire)) return static_cast<CUresult>(e);
  return injected(call, d.ordinal);
}

/// The device of the context current on this thread.
CUresult current(device_state*& d, const char* call) {
  if (!S().initialized.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  d = &dev(t_current);
  if (d->retains.load(std::memory_order_acquire) == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return enter(*d, call);
}

bool null_stream(CUstream h) {
  return h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

/// The stream of a call: must be live and belong to the current context. Null for the legacy default stream.
CUresult stream_of(CUstream h, device_state& d, CUstream_st*& s, const char* call) {
  s = nullptr;
  if (null_stream(h)) return CUDA_SUCCESS;
  state& g = S();
  {
    std::shared_lock lock(g.handles_mu);
    auto it = g.streams.find(h);
    if (it == g.streams.end()) {
      count(d, invalid_handle_calls);
      std::fprintf(stderr, "apgas fake CUDA: %s: stream %p is not a live stream\n", call, static_cast<void*>(h));
      return CUDA_ERROR_INVALID_HANDLE;
    }
    s = it->second.get();
  }
  if (s->ctx != &d.ctx) {
    count(d, wrong_context_calls);
    std::fprintf(stderr, "apgas fake CUDA: %s: the stream belongs to device %d, the current context to device %d\n",
                 call, s->ctx->ordinal, d.ordinal);
    s = nullptr;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

std::shared_ptr<CUevent_st> event_of(CUevent h) {
  state& g = S();
  std::shared_lock lock(g.handles_mu);
  auto it = g.events.find(h);
  return it == g.events.end() ? nullptr : it->second;
}

/// [p, p + n) inside one live allocation of d (d.mem held). n > 0.
bool inside(const device_state& d, std::uintptr_t p, std::size_t n) {
  auto it = d.allocs.upper_bound(p);
  if (it == d.allocs.begin()) return false;
  --it;
  const std::size_t off = p - it->first;
  return off < it->second && n <= it->second - off;
}

/// 1: [p, p + n) lies in one page-locked block; 0: in none (pageable); -1: starts in one and runs past its end.
int pinned_state(std::uintptr_t p, std::size_t n) {
  state& g = S();
  auto it = g.pinned.upper_bound(p);
  if (it == g.pinned.begin()) return 0;
  --it;
  const std::size_t off = p - it->first;
  if (off >= it->second) return 0;
  return n <= it->second - off ? 1 : -1;
}

void complete(CUevent_st& e, std::uint64_t gen) {
  std::uint64_t c = e.completed.load(std::memory_order_relaxed);
  while (c < gen && !e.completed.compare_exchange_weak(c, gen, std::memory_order_release)) {
  }
}

std::string where(const device_state& d, const op& o, const char* side, std::uintptr_t p) {
  return std::string(o.call) + " on device " + std::to_string(d.ordinal) + ": " + side + " " + range(p, o.n) +
         " is not inside a live allocation of device ";
}

void free_block(device_state& d, std::uintptr_t p, const char* call) {
  void* block = nullptr;
  {
    std::unique_lock lock(d.mem);
    auto it = d.allocs.find(p);
    if (it == d.allocs.end()) {
      lock.unlock();
      count(d, invalid_frees);
      illegal(d, std::string(call) + ": " + hex(p) + " is not a live allocation of device " +
                     std::to_string(d.ordinal) + " (freed twice?)");
      return;
    }
    d.live_bytes -= it->second;
    d.allocs.erase(it);
    block = reinterpret_cast<void*>(p);
  }
  count(d, frees_total);
  std::free(block);
}

int trace_kind(op_kind k) {
  switch (k) {
    case op_kind::h2d: return 'h';
    case op_kind::d2h: return 'd';
    case op_kind::d2d: return 'D';
    case op_kind::peer: return 'p';
    case op_kind::memset8: return 'm';
    case op_kind::record: return 'r';
    case op_kind::wait_event: return 'w';
    case op_kind::free_async: return 'f';
    case op_kind::kernel: return 'k';
  }
  return '?';
}

/// While tracing, o's entry in d's trace (o is being enqueued on s, whose lock, if any, the caller holds).
void trace_op(device_state& d, const CUstream_st* s, op& o) {
  std::lock_guard lock(d.trace_mu);
  if (!d.tracing) return;
  apgas_fake_cuda_trace_entry e{};
  e.stream = reinterpret_cast<std::uintptr_t>(s);
  e.kind = trace_kind(o.kind);
  e.host = o.host > 0 ? 1 : 0;
  e.address = o.kind == op_kind::kernel ? o.src : o.dst;
  e.bytes = o.n;
  e.tag = o.tag;
  o.trace_index = static_cast<long>(d.trace.size());
  d.trace.push_back(e);
}

/// A kernel runs: what it would read at the watched address (8 bytes, if they lie in a live allocation) goes into its
/// trace entry.
void note_kernel_read(device_state& d, const op& o) {
  std::uintptr_t watch = 0;
  {
    std::lock_guard lock(d.trace_mu);
    watch = d.watch;
  }
  std::uint64_t seen = 0;
  if (watch != 0) {
    std::shared_lock m(d.mem);
    if (inside(d, watch, sizeof seen)) std::memcpy(&seen, reinterpret_cast<const void*>(watch), sizeof seen);
  }
  std::lock_guard lock(d.trace_mu);
  if (o.trace_index >= 0 && static_cast<std::size_t>(o.trace_index) < d.trace.size()) {
    d.trace[static_cast<std::size_t>(o.trace_index)].seen = seen;
  }
}

/// The first (up to 8) bytes at p, as a tag.
std::uint64_t first_bytes(const void* p, std::size_t n) {
  std::uint64_t t = 0;
  if (p != nullptr) std::memcpy(&t, p, std::min(n, sizeof t));
  return t;
}

/// Runs one operation of a stream of device d (on the stream's worker, or inline after the exit hook).
void execute(device_state& d, op& o) {
  state& g = S();
  if (o.kind != op_kind::record && o.kind != op_kind::wait_event) {
    const int us = g.delay_us.load(std::memory_order_relaxed);
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  count(d, ops_executed);
  switch (o.kind) {
    case op_kind::record:
      o.event->time_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch()).count(),
                             std::memory_order_relaxed);
      complete(*o.event, o.generation);
      return;
    case op_kind::wait_event:  // the stream goes on once the event's stream has reached the record that was current
      while (o.event->completed.load(std::memory_order_acquire) < o.generation) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      return;
    case op_kind::free_async:
      free_block(d, o.dst, "cuMemFreeAsync (when the stream reached it)");
      return;
    case op_kind::kernel:
      if (o.trace_index >= 0) note_kernel_read(d, o);
      return;
    default:
      break;
  }
  if (d.failed.load(std::memory_order_acquire) != 0) return;  // a failed device moves no data
  std::string fault;
  switch (o.kind) {
    case op_kind::h2d: {
      std::shared_lock m(d.mem);
      if (!inside(d, o.dst, o.n)) {
        fault = where(d, o, "destination", o.dst) + std::to_string(d.ordinal);
        break;
      }
      if (!o.staged.empty()) {
        std::memcpy(reinterpret_cast<void*>(o.dst), o.staged.data(), o.n);
      } else {
        std::shared_lock p(g.pinned_mu);
        if (pinned_state(o.src, o.n) != 1) {
          fault = std::string(o.call) + " on device " + std::to_string(d.ordinal) + ": host source " +
                  range(o.src, o.n) + " is not (any more) inside one page-locked block";
          break;
        }
        std::memcpy(reinterpret_cast<void*>(o.dst), reinterpret_cast<const void*>(o.src), o.n);
      }
      count(d, h2d_bytes, static_cast<long long>(o.n));
      break;
    }
    case op_kind::d2h: {
      std::shared_lock m(d.mem);
      if (!inside(d, o.src, o.n)) {
        fault = where(d, o, "source", o.src) + std::to_string(d.ordinal);
        break;
      }
      if (o.host == 0) {  // pageable: the caller waits for this copy
        std::memcpy(reinterpret_cast<void*>(o.dst), reinterpret_cast<const void*>(o.src), o.n);
      } else {
        std::shared_lock p(g.pinned_mu);
        if (pinned_state(o.dst, o.n) != 1) {
          fault = std::string(o.call) + " on device " + std::to_string(d.ordinal) + ": host destination " +
                  range(o.dst, o.n) + " is not (any more) inside one page-locked block";
          break;
        }
        std::memcpy(reinterpret_cast<void*>(o.dst), reinterpret_cast<const void*>(o.src), o.n);
      }
      count(d, d2h_bytes, static_cast<long long>(o.n));
      break;
    }
    case op_kind::d2d: {
      std::shared_lock m(d.mem);
      if (!inside(d, o.dst, o.n)) {
        fault = where(d, o, "destination", o.dst) + std::to_string(d.ordinal);
      } else if (!inside(d, o.src, o.n)) {
        fault = where(d, o, "source", o.src) + std::to_string(d.ordinal);
      } else {
        std::memmove(reinterpret_cast<void*>(o.dst), reinterpret_cast<const void*>(o.src), o.n);
        count(d, d2d_bytes, static_cast<long long>(o.n));
      }
      break;
    }
    case op_kind::peer: {
      // (Only the stream's device matters: the other one's memory is written or read over the link whatever its
      // context's state.)
      device_state& sd = *g.devices[static_cast<std::size_t>(o.src_dev)];
      device_state& dd = *g.devices[static_cast<std::size_t>(o.dst_dev)];
      device_state& first = sd.ordinal <= dd.ordinal ? sd : dd;
      device_state& second = sd.ordinal <= dd.ordinal ? dd : sd;
      std::shared_lock m1(first.mem);
      std::shared_lock<std::shared_mutex> m2;
      if (&second != &first) m2 = std::shared_lock(second.mem);
      if (!inside(dd, o.dst, o.n)) {
        fault = where(d, o, "destination", o.dst) + std::to_string(dd.ordinal);
      } else if (!inside(sd, o.src, o.n)) {
        fault = where(d, o, "source", o.src) + std::to_string(sd.ordinal);
      } else {
        std::memmove(reinterpret_cast<void*>(o.dst), reinterpret_cast<const void*>(o.src), o.n);
        count(sd, peer_bytes_out, static_cast<long long>(o.n));
        count(dd, peer_bytes_in, static_cast<long long>(o.n));
      }
      break;
    }
    case op_kind::memset8: {
      std::shared_lock m(d.mem);
      if (!inside(d, o.dst, o.n)) {
        fault = where(d, o, "destination", o.dst) + std::to_string(d.ordinal);
        break;
      }
      std::memset(reinterpret_cast<void*>(o.dst), o.value, o.n);
      count(d, memset_bytes, static_cast<long long>(o.n));
      break;
    }
    default:
      break;
  }
  if (!fault.empty()) illegal(d, fault);
}

void worker_main(CUstream_st* s) {
  device_state& d = dev(s->ctx);
  std::unique_lock lock(s->mu);
  for (;;) {
    if (s->queue.empty()) {
      if (s->stop) return;
      s->work.wait(lock);
      continue;
    }
    if (!s->stop && d.paused.load(std::memory_order_acquire) && d.failed.load(std::memory_order_acquire) == 0) {
      s->work.wait_for(lock, std::chrono::milliseconds(1));  // (pausing is rare: polling avoids lost wake-ups)
      continue;
    }
    op o = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    execute(d, o);
    o = op();  // release the event and the staged bytes outside the lock
    lock.lock();
    ++s->done;
    d.pending.fetch_sub(1, std::memory_order_relaxed);
    s->progress.notify_all();
  }
}

/// Wait until every operation enqueued on s so far has been executed.
void drain(CUstream_st* s) {
  std::unique_lock lock(s->mu);
  const std::uint64_t target = s->enqueued;
  s->progress.wait(lock, [&] { return s->done >= target; });
}

std::vector<CUstream_st*> streams_of(const device_state& d) {
  state& g = S();
  std::vector<CUstream_st*> out;
  std::shared_lock lock(g.handles_mu);
  for (auto& [h, s] : g.streams) {
    if (s->ctx == &d.ctx) out.push_back(s.get());
  }
  return out;
}

void synchronize(device_state& d) {
  for (CUstream_st* s : streams_of(d)) drain(s);
}

/// Enqueue o on s (null: the legacy default stream, which runs it here after everything else of the device).
/// `wait`: return only when it has been executed.
void enqueue(device_state& d, CUstream_st* s, op o, bool wait) {
  const long long p = d.pending.fetch_add(1, std::memory_order_relaxed) + 1;
  raise_to(d, max_pending, p);
  if (s == nullptr) {
    synchronize(d);
    trace_op(d, s, o);
    execute(d, o);
    d.pending.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  std::unique_lock lock(s->mu);
  trace_op(d, s, o);
  if (!s->threaded) {  // after the exit hook: synchronously, here
    lock.unlock();
    execute(d, o);
    lock.lock();
    ++s->enqueued;
    ++s->done;
    d.pending.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  s->queue.push_back(std::move(o));
  const std::uint64_t seq = ++s->enqueued;
  s->work.notify_one();
  if (wait) s->progress.wait(lock, [&] { return s->done >= seq; });
}

/// Stop the worker of a stream that is no longer in the handle table (it runs what it has queued first), free it.
void stop_stream(std::unique_ptr<CUstream_st> s) {
  {
    std::lock_guard lock(s->mu);
    s->stop = true;
  }
  s->work.notify_all();
  if (s->worker.joinable()) s->worker.join();
}

void destroy_context(device_state& d) {
  state& g = S();
  std::vector<std::unique_ptr<CUstream_st>> streams;
  {
    std::unique_lock lock(g.handles_mu);
    for (auto it = g.streams.begin(); it != g.streams.end();) {
      if (it->second->ctx == &d.ctx) {
        streams.push_back(std::move(it->second));
        it = g.streams.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = g.events.begin(); it != g.events.end();) {
      it = it->second->ctx == &d.ctx ? g.events.erase(it) : std::next(it);
    }
  }
  d.paused.store(false);
  for (auto& s : streams) stop_stream(std::move(s));
  std::map<std::uintptr_t, std::size_t> blocks;
  {
    std::unique_lock lock(d.mem);
    blocks.swap(d.allocs);
    d.live_bytes = 0;
  }
  for (auto& [p, n] : blocks) std::free(reinterpret_cast<void*>(p));
  {
    std::lock_guard lock(g.mu);
    d.peer.assign(d.peer.size(), false);
  }
  d.failed.store(0);  // a new context starts healthy
}

// Stops and joins every stream worker at exit; later operations run synchronously (see the top of the file).
struct exit_hook {
  exit_hook() { (void)S(); }
  ~exit_hook() {
    state& g = S();
    {
      std::lock_guard lock(g.mu);
      g.shut_down = true;
    }
    g.delay_us.store(0);
    for (auto& d : g.devices) d->paused.store(false);
    std::vector<CUstream_st*> all;
    {
      std::shared_lock lock(g.handles_mu);
      for (auto& [h, s] : g.streams) all.push_back(s.get());
    }
    for (CUstream_st* s : all) {
      {
        std::lock_guard lock(s->mu);
        s->stop = true;
      }
      s->work.notify_all();
      if (s->worker.joinable()) s->worker.join();
      std::lock_guard lock(s->mu);
      s->threaded = false;
    }
  }
};
exit_hook g_exit_hook;

// ---- error names ----
struct error_text {
  int code;
  const char* name;
  const char* text;
};
#define APGAS_FAKE_ERR(code, text) {code, #code, text},
const error_text error_texts[] = {
    APGAS_FAKE_ERR(CUDA_SUCCESS, "no error")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument")
    APGAS_FAKE_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")
    APGAS_FAKE_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error")
    APGAS_FAKE_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down")
    APGAS_FAKE_ERR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")
    APGAS_FAKE_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable")
    APGAS_FAKE_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")
    APGAS_FAKE_ERR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")
    APGAS_FAKE_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device")
    APGAS_FAKE_ERR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered")
    APGAS_FAKE_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices")
    APGAS_FAKE_ERR(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected during the execution")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")
    APGAS_FAKE_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")
    APGAS_FAKE_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found")
    APGAS_FAKE_ERR(CUDA_ERROR_NOT_READY, "device not ready")
    APGAS_FAKE_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")
    APGAS_FAKE_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")
    APGAS_FAKE_ERR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")
    APGAS_FAKE_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled")
    APGAS_FAKE_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled")
    APGAS_FAKE_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process")
    APGAS_FAKE_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")
    APGAS_FAKE_ERR(CUDA_ERROR_ASSERT, "device-side assert triggered")
    APGAS_FAKE_ERR(CUDA_ERROR_HARDWARE_STACK_ERROR, "an illegal memory access was encountered (stack)")
    APGAS_FAKE_ERR(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered")
    APGAS_FAKE_ERR(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space")
    APGAS_FAKE_ERR(CUDA_ERROR_INVALID_PC, "invalid program counter")
    APGAS_FAKE_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")
    APGAS_FAKE_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")
    APGAS_FAKE_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")
    APGAS_FAKE_ERR(CUDA_ERROR_TIMEOUT, "timeout reached")
    APGAS_FAKE_ERR(CUDA_ERROR_CONTAINED, "an exception occurred on the device that is now contained by the GPU's "
                                         "error containment capability")
    APGAS_FAKE_ERR(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed")
    APGAS_FAKE_ERR(CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server")
    APGAS_FAKE_ERR(CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occurred in an external entity outside of CUDA")
    APGAS_FAKE_ERR(CUDA_ERROR_UNKNOWN, "unknown error")
};
#undef APGAS_FAKE_ERR

const error_text* find_error(CUresult e) {
  for (const error_text& t : error_texts) {
    if (t.code == static_cast<int>(e)) return &t;
  }
  return nullptr;
}

// ---- attributes ----
int attribute_value(CUdevice_attribute a, int ordinal, bool& known) {
  known = true;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return default_dynamic_shared;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return sms;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + ordinal;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return shared_per_sm;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return max_shared_optin;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return reserved_shared_per_block;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    default:
      known = static_cast<int>(a) > 0 && a < CU_DEVICE_ATTRIBUTE_MAX;
      return 0;
  }
}

int function_static_shared(CUfunction f) {
  state& g = S();
  std::lock_guard lock(g.mu);
  auto it = g.function_static.find(f);
  return it == g.function_static.end() ? 0 : it->second;
}

/// MAX_DYNAMIC_SHARED_SIZE_BYTES: what the function opted in to, else 48 KiB less its static shared memory.
int function_dynamic_shared(CUfunction f) {
  const int fixed = function_static_shared(f);
  state& g = S();
  std::lock_guard lock(g.mu);
  auto it = g.function_shared.find(f);
  return it == g.function_shared.end() ? std::max(default_dynamic_shared - fixed, 0) : it->second;
}

int blocks_per_sm(int block, std::size_t dynamic_shared) {
  if (block <= 0 || block > 1024) return 0;
  if (dynamic_shared > static_cast<std::size_t>(max_shared_optin)) return 0;
  const int warps = (block + 31) / 32;
  int n = std::min(32, 2048 / (warps * 32));
  n = std::min(n, 65536 / (warps * 32 * regs_per_thread));
  const std::size_t per_block = dynamic_shared + reserved_shared_per_block;
  n = std::min<int>(n, static_cast<int>(static_cast<std::size_t>(shared_per_sm) / per_block));
  return std::max(n, 0);
}

CUresult copy_common(CUstream h, device_state*& d, CUstream_st*& s, const char* call) {
  if (CUresult r = current(d, call); r != CUDA_SUCCESS) return r;
  return stream_of(h, *d, s, call);
}

}  // namespace

// =====================================================================================================================
// The Driver API (names through cuda.h's macros: cuMemAlloc defines cuMemAlloc_v2, and so on)
// =====================================================================================================================

CUresult CUDAAPI cuInit(unsigned int Flags) {
  state& g = S();
  if (Flags != 0 || !g.env_ok) return CUDA_ERROR_INVALID_VALUE;
  if (g.ndevices == 0) return CUDA_ERROR_NO_DEVICE;
  g.initialized.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = S().driver_version.load();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const error_text* t = find_error(error);
  *pStr = t != nullptr ? t->name : nullptr;
  return t != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const error_text* t = find_error(error);
  *pStr = t != nullptr ? t->text : nullptr;
  return t != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = S().ndevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device_at(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (device_at(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(len), "Fake GPU %d", dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device_at(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  bool known = false;
  const int v = attribute_value(attrib, dev, known);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  *pi = v;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device_at(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = total_memory;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device_at(dev) == nullptr || device_at(peerDev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = dev != peerDev ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  device_state* d = device_at(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (CUresult r = injected("cuDevicePrimaryCtxRetain", dev); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(S().mu);
  d->retains.fetch_add(1);
  *pctx = &d->ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  device_state* d = device_at(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  bool last = false;
  {
    std::lock_guard lock(S().mu);
    if (d->retains.load() == 0) return CUDA_ERROR_INVALID_CONTEXT;
    last = d->retains.fetch_sub(1) == 1;
  }
  if (last) destroy_context(*d);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) {
    t_current = nullptr;
    return CUDA_SUCCESS;
  }
  if (!valid_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (dev(ctx).retains.load() == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (CUresult r = injected("cuCtxSetCurrent", ctx->ordinal); r != CUDA_SUCCESS) return r;
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = t_current;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuCtxEnablePeerAccess"); r != CUDA_SUCCESS) return r;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (peerContext == nullptr || !valid_context(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  if (peerContext == &d->ctx) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(S().mu);
  const auto peer = static_cast<std::size_t>(peerContext->ordinal);
  if (d->peer[peer]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  d->peer[peer] = true;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuStreamCreate"); r != CUDA_SUCCESS) return r;
  if (phStream == nullptr || (Flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  state& g = S();
  auto s = std::make_unique<CUstream_st>();
  s->ctx = &d->ctx;
  CUstream_st* raw = s.get();
  std::lock_guard lock(g.mu);  // shut_down cannot change until the stream is in the table
  if (!g.shut_down) {
    s->threaded = true;
    s->worker = std::thread(worker_main, raw);
  }
  {
    std::unique_lock h(g.handles_mu);
    g.streams.emplace(raw, std::move(s));
  }
  *phStream = raw;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  state& g = S();
  std::unique_ptr<CUstream_st> s;
  {
    std::unique_lock lock(g.handles_mu);
    auto it = g.streams.find(hStream);
    if (it == g.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    s = std::move(it->second);
    g.streams.erase(it);
  }
  const int failed = dev(s->ctx).failed.load();
  stop_stream(std::move(s));  // runs (or, on a failed device, skips) what it had queued: resources released
  return static_cast<CUresult>(failed);
}

// As the real driver: returns once the stream (the legacy default stream: every stream of the device) has executed
// everything queued on it before the call. On a paused device it waits until another thread lets the device go on,
// or the device fails. A device that has failed reports its sticky error: at once if it had failed before the call
// (an injected failure, too, returns without waiting), else when the stream has got through its queue (whose
// operations then move no data).
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuStreamSynchronize"); r != CUDA_SUCCESS) return r;
  count(*d, stream_syncs);
  if (s == nullptr) {
    synchronize(*d);
  } else {
    drain(s);
  }
  return static_cast<CUresult>(d->failed.load(std::memory_order_acquire));
}

/// Waits until every stream of the current context's device has executed what was queued on it (on a paused device
/// until it is let go on), then reports the device's sticky error if it has one.
CUresult CUDAAPI cuCtxSynchronize(void) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuCtxSynchronize"); r != CUDA_SUCCESS) return r;
  count(*d, ctx_syncs);
  synchronize(*d);
  return static_cast<CUresult>(d->failed.load(std::memory_order_acquire));
}

CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuEventCreate"); r != CUDA_SUCCESS) return r;
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (phEvent == nullptr || (Flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto e = std::make_shared<CUevent_st>();
  e->ctx = &d->ctx;
  e->timing = (Flags & CU_EVENT_DISABLE_TIMING) == 0;
  if (e->timing) count(*d, timing_events);
  state& g = S();
  std::unique_lock lock(g.handles_mu);
  g.events.emplace(e.get(), e);
  *phEvent = e.get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  state& g = S();
  std::shared_ptr<CUevent_st> e;  // a record still queued keeps it alive until the stream gets there
  {
    std::unique_lock lock(g.handles_mu);
    auto it = g.events.find(hEvent);
    if (it == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    e = std::move(it->second);
    g.events.erase(it);
  }
  return static_cast<CUresult>(dev(e->ctx).failed.load());
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuEventRecord"); r != CUDA_SUCCESS) return r;
  std::shared_ptr<CUevent_st> e = event_of(hEvent);
  if (e == nullptr) {
    count(*d, invalid_handle_calls);
    std::fprintf(stderr, "apgas fake CUDA: cuEventRecord: event %p is not a live event\n",
                 static_cast<void*>(hEvent));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (e->ctx != &d->ctx) {
    count(*d, wrong_context_calls);
    std::fprintf(stderr, "apgas fake CUDA: cuEventRecord: the event belongs to device %d, the stream to device %d\n",
                 e->ctx->ordinal, d->ordinal);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  count(*d, event_records);
  op o;
  o.kind = op_kind::record;
  o.generation = S().generation.fetch_add(1) + 1;
  e->recorded.store(o.generation, std::memory_order_release);
  o.event = std::move(e);
  o.call = "cuEventRecord";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuStreamWaitEvent"); r != CUDA_SUCCESS) return r;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;  // (CU_EVENT_WAIT_EXTERNAL is for graphs)
  std::shared_ptr<CUevent_st> e = event_of(hEvent);
  if (e == nullptr) {
    count(*d, invalid_handle_calls);
    std::fprintf(stderr, "apgas fake CUDA: cuStreamWaitEvent: event %p is not a live event\n",
                 static_cast<void*>(hEvent));
    return CUDA_ERROR_INVALID_HANDLE;
  }
  count(*d, stream_waits);
  op o;
  o.kind = op_kind::wait_event;
  // As the real driver: the wait is for the event's most recent record when this call is made (none: no wait); a
  // later record of the event does not change it, so the event may be recorded again or destroyed at once.
  o.generation = e->recorded.load(std::memory_order_acquire);
  o.dst = reinterpret_cast<std::uintptr_t>(hEvent);
  o.event = std::move(e);
  o.call = "cuStreamWaitEvent";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

// As the real driver: both events must have been created with timing, recorded, and reached by their streams.
CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<CUevent_st> a = event_of(hStart), b = event_of(hEnd);
  if (pMilliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (a == nullptr || b == nullptr || !a->timing || !b->timing) return CUDA_ERROR_INVALID_HANDLE;
  device_state& d = dev(b->ctx);
  count(d, elapsed_queries);
  if (CUresult r = enter(d, "cuEventElapsedTime"); r != CUDA_SUCCESS) return r;
  for (const auto* e : {a.get(), b.get()}) {
    const std::uint64_t rec = e->recorded.load(std::memory_order_acquire);
    if (rec == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (e->completed.load(std::memory_order_acquire) < rec) return CUDA_ERROR_NOT_READY;
  }
  *pMilliseconds = static_cast<float>(static_cast<double>(b->time_ns.load(std::memory_order_relaxed) -
                                                          a->time_ns.load(std::memory_order_relaxed)) / 1e6);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  std::shared_ptr<CUevent_st> e = event_of(hEvent);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  device_state& d = dev(e->ctx);
  count(d, event_queries);
  if (CUresult r = enter(d, "cuEventQuery"); r != CUDA_SUCCESS) return r;
  const std::uint64_t rec = e->recorded.load(std::memory_order_acquire);
  return e->completed.load(std::memory_order_acquire) >= rec ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

namespace {
CUresult allocate(device_state& d, std::size_t bytes, CUdeviceptr* dptr) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t rounded = (bytes + device_alignment - 1) / device_alignment * device_alignment;
  if (rounded < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  {
    std::shared_lock lock(d.mem);
    if (rounded > total_memory - reserved_memory - d.live_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* p = std::aligned_alloc(device_alignment, rounded);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, poison, bytes);
  {
    std::unique_lock lock(d.mem);
    d.allocs.emplace(reinterpret_cast<std::uintptr_t>(p), bytes);
    d.live_bytes += rounded;
  }
  count(d, allocs_total);
  *dptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
  return CUDA_SUCCESS;
}

/// The device holding the allocation that starts at p, or null.
device_state* owner_of(std::uintptr_t p) {
  for (auto& d : S().devices) {
    std::shared_lock lock(d->mem);
    if (d->allocs.count(p) != 0) return d.get();
  }
  return nullptr;
}
}  // namespace

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuMemAlloc"); r != CUDA_SUCCESS) return r;
  count(*d, sync_allocs);
  return allocate(*d, bytesize, dptr);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  const auto p = static_cast<std::uintptr_t>(dptr);
  device_state* d = owner_of(p);
  if (d == nullptr) {
    if (t_current != nullptr) count(dev(t_current), invalid_frees);
    std::fprintf(stderr, "apgas fake CUDA: cuMemFree(%s): not a live allocation (freed twice?)\n", hex(p).c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = injected("cuMemFree", d->ordinal); r != CUDA_SUCCESS) return r;
  count(*d, sync_frees);
  synchronize(*d);  // as the real one: work in flight finishes first
  free_block(*d, p, "cuMemFree");
  return static_cast<CUresult>(d->failed.load());
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemAllocAsync"); r != CUDA_SUCCESS) return r;
  return allocate(*d, bytesize, dptr);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemFreeAsync"); r != CUDA_SUCCESS) return r;
  const auto p = static_cast<std::uintptr_t>(dptr);
  {
    std::shared_lock lock(d->mem);
    if (d->allocs.count(p) == 0) {
      count(*d, invalid_frees);
      std::fprintf(stderr, "apgas fake CUDA: cuMemFreeAsync(%s): not a live allocation of device %d\n",
                   hex(p).c_str(), d->ordinal);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  op o;
  o.kind = op_kind::free_async;
  o.dst = p;
  o.call = "cuMemFreeAsync";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemsetD8Async"); r != CUDA_SUCCESS) return r;
  if (N == 0) return CUDA_SUCCESS;
  count(*d, memset_ops);
  op o;
  o.kind = op_kind::memset8;
  o.dst = static_cast<std::uintptr_t>(dstDevice);
  o.n = N;
  o.value = uc;
  o.call = "cuMemsetD8Async";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuMemHostAlloc"); r != CUDA_SUCCESS) return r;
  const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (pp == nullptr || bytesize == 0 || (Flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t rounded = (bytesize + host_alignment - 1) / host_alignment * host_alignment;
  if (rounded < bytesize) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::aligned_alloc(host_alignment, rounded);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, poison, bytesize);
  state& g = S();
  {
    std::unique_lock lock(g.pinned_mu);
    g.pinned.emplace(reinterpret_cast<std::uintptr_t>(p), bytesize);
  }
  count(*d, host_allocs);
  *pp = p;
  return CUDA_SUCCESS;
}

// Strict: a context must be current (whether the real driver insists is not documented; the backend makes one
// current anyway). A call without one fails and is counted.
CUresult CUDAAPI cuMemFreeHost(void* p) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  state& g = S();
  if (t_current == nullptr) {
    if (!g.devices.empty()) count(*g.devices.front(), host_frees_without_context);
    std::fprintf(stderr, "apgas fake CUDA: cuMemFreeHost(%p) without a current context\n", p);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  {
    std::unique_lock lock(g.pinned_mu);  // waits for a copy reading or writing the block right now
    auto it = g.pinned.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == g.pinned.end()) {
      std::fprintf(stderr, "apgas fake CUDA: cuMemFreeHost(%p): not a live page-locked block\n", p);
      return CUDA_ERROR_INVALID_VALUE;
    }
    g.pinned.erase(it);
  }
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemcpyHtoDAsync"); r != CUDA_SUCCESS) return r;
  if (ByteCount == 0) return CUDA_SUCCESS;
  if (srcHost == nullptr) return CUDA_ERROR_INVALID_VALUE;
  op o;
  o.kind = op_kind::h2d;
  o.dst = static_cast<std::uintptr_t>(dstDevice);
  o.src = reinterpret_cast<std::uintptr_t>(srcHost);
  o.n = ByteCount;
  o.call = "cuMemcpyHtoDAsync";
  {
    std::shared_lock lock(S().pinned_mu);
    o.host = pinned_state(o.src, o.n);
  }
  o.tag = first_bytes(srcHost, ByteCount);
  if (o.host == 0) {  // pageable: the driver stages the bytes before returning
    count(*d, pageable_async_copies);
    raise_to(*d, largest_pageable_async_copy, static_cast<long long>(ByteCount));
    o.staged.assign(static_cast<const unsigned char*>(srcHost), static_cast<const unsigned char*>(srcHost) + ByteCount);
  }
  count(*d, h2d_ops);
  enqueue(*d, s, std::move(o), false);
  stall_point("cuMemcpyHtoDAsync", d->ordinal);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemcpyDtoHAsync"); r != CUDA_SUCCESS) return r;
  if (ByteCount == 0) return CUDA_SUCCESS;
  if (dstHost == nullptr) return CUDA_ERROR_INVALID_VALUE;
  op o;
  o.kind = op_kind::d2h;
  o.dst = reinterpret_cast<std::uintptr_t>(dstHost);
  o.src = static_cast<std::uintptr_t>(srcDevice);
  o.n = ByteCount;
  o.call = "cuMemcpyDtoHAsync";
  {
    std::shared_lock lock(S().pinned_mu);
    o.host = pinned_state(o.dst, o.n);
  }
  const bool pageable = o.host == 0;
  if (pageable) {
    count(*d, pageable_async_copies);
    raise_to(*d, largest_pageable_async_copy, static_cast<long long>(ByteCount));
  }
  count(*d, d2h_ops);
  enqueue(*d, s, std::move(o), pageable);  // pageable: synchronous, as the real driver
  stall_point("cuMemcpyDtoHAsync", d->ordinal);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemcpyDtoDAsync"); r != CUDA_SUCCESS) return r;
  if (ByteCount == 0) return CUDA_SUCCESS;
  count(*d, d2d_ops);
  op o;
  o.kind = op_kind::d2d;
  o.dst = static_cast<std::uintptr_t>(dstDevice);
  o.src = static_cast<std::uintptr_t>(srcDevice);
  o.n = ByteCount;
  o.call = "cuMemcpyDtoDAsync";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuMemcpyPeerAsync"); r != CUDA_SUCCESS) return r;
  if (dstContext == nullptr || srcContext == nullptr || !valid_context(dstContext) || !valid_context(srcContext)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (ByteCount == 0) return CUDA_SUCCESS;
  count(*d, peer_ops);
  {
    std::lock_guard lock(S().mu);
    if (srcContext != dstContext && !dev(srcContext).peer[static_cast<std::size_t>(dstContext->ordinal)] &&
        !dev(dstContext).peer[static_cast<std::size_t>(srcContext->ordinal)]) {
      count(*d, peer_copies_without_access);  // the driver stages it through host memory: slower, same result
    }
  }
  op o;
  o.kind = op_kind::peer;
  o.dst = static_cast<std::uintptr_t>(dstDevice);
  o.src = static_cast<std::uintptr_t>(srcDevice);
  o.dst_dev = dstContext->ordinal;
  o.src_dev = srcContext->ordinal;
  o.n = ByteCount;
  o.call = "cuMemcpyPeerAsync";
  enqueue(*d, s, std::move(o), false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  device_state* d = nullptr;
  CUstream_st* s = nullptr;
  if (CUresult r = copy_common(hStream, d, s, "cuLaunchKernel"); r != CUDA_SUCCESS) return r;
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (kernelParams != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || gridDimX > 2147483647u || gridDimY > 65535 ||
      gridDimZ > 65535) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (blockDimX == 0 || blockDimY == 0 || blockDimZ == 0 || blockDimX > 1024 || blockDimY > 1024 ||
      blockDimZ > 64 || static_cast<unsigned long long>(blockDimX) * blockDimY * blockDimZ > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (sharedMemBytes > static_cast<unsigned>(function_dynamic_shared(f))) return CUDA_ERROR_INVALID_VALUE;
  count(*d, kernel_launches);
  d->counters[last_grid].store(static_cast<long long>(gridDimX) * gridDimY * gridDimZ);
  d->counters[last_block].store(static_cast<long long>(blockDimX) * blockDimY * blockDimZ);
  d->counters[last_shared].store(sharedMemBytes);
  op o;
  o.kind = op_kind::kernel;
  o.call = "cuLaunchKernel";
  o.src = reinterpret_cast<std::uintptr_t>(f);
  if (kernelParams != nullptr) o.tag = first_bytes(kernelParams[0], sizeof o.tag);
  enqueue(*d, s, std::move(o), false);
  stall_point("cuLaunchKernel", d->ordinal);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hfunc == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = injected("cuFuncGetAttribute", t_current != nullptr ? t_current->ordinal : -1);
      r != CUDA_SUCCESS) {
    return r;
  }
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = function_static_shared(hfunc); break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = regs_per_thread; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = function_dynamic_shared(hfunc); break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = -1; break;
    default:
      if (static_cast<int>(attrib) < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
      *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (hfunc == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > max_shared_optin - function_static_shared(hfunc)) return CUDA_ERROR_INVALID_VALUE;
    {
      std::lock_guard lock(S().mu);
      S().function_shared[hfunc] = value;
    }
    stall_point("cuFuncSetAttribute", t_current != nullptr ? t_current->ordinal : -1);
    return CUDA_SUCCESS;
  }
  if (attrib == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
    return value >= -1 && value <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (minGridSize == nullptr || blockSize == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (func == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const int ordinal = t_current != nullptr ? t_current->ordinal : -1;
  if (CUresult r = injected("cuOccupancyMaxPotentialBlockSize", ordinal); r != CUDA_SUCCESS) return r;
  const int limit = blockSizeLimit > 0 ? std::min(blockSizeLimit, 1024) : 1024;
  int best_block = 0, best_threads = 0, best_blocks = 0;
  for (int b = 32; b <= limit; b += 32) {  // the largest block with the highest occupancy, as the real one
    const std::size_t dyn =
        blockSizeToDynamicSMemSize != nullptr ? blockSizeToDynamicSMemSize(b) : dynamicSMemSize;
    const int n = blocks_per_sm(b, dyn);
    if (n * b >= best_threads && n > 0) {
      best_threads = n * b;
      best_block = b;
      best_blocks = n;
    }
  }
  *blockSize = best_block;
  *minGridSize = best_blocks * sms;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (numBlocks == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (func == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const int ordinal = t_current != nullptr ? t_current->ordinal : -1;
  if (CUresult r = injected("cuOccupancyMaxActiveBlocksPerMultiprocessor", ordinal); r != CUDA_SUCCESS) return r;
  *numBlocks = blocks_per_sm(blockSize, dynamicSMemSize);
  return CUDA_SUCCESS;
}

// One default pool per device: its handle is the device's context object (opaque to the caller).
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  device_state* d = device_at(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = reinterpret_cast<CUmemoryPool>(&d->ctx);
  return CUDA_SUCCESS;
}

// Only the release threshold is modelled (0 by default, as CUDA's); other attributes are accepted and ignored.
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto* ctx = reinterpret_cast<const CUctx_st*>(pool);
  if (!valid_context(ctx)) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    std::lock_guard lock(S().mu);
    dev(ctx).pool_release_threshold = *static_cast<const cuuint64_t*>(value);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  if (!S().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool == nullptr || (map == nullptr && count != 0)) return CUDA_ERROR_INVALID_VALUE;
  const auto* ctx = reinterpret_cast<const CUctx_st*>(pool);
  if (!valid_context(ctx)) return CUDA_ERROR_INVALID_VALUE;
  device_state& d = dev(ctx);
  std::lock_guard lock(S().mu);
  for (std::size_t i = 0; i < count; ++i) {
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || device_at(map[i].location.id) == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (map[i].location.id == d.ordinal) {  // the owner's own access cannot be changed
      if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_DEVICE;
      continue;
    }
    d.pool_access[static_cast<std::size_t>(map[i].location.id)] = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  device_state* d = nullptr;
  if (CUresult r = current(d, "cuMemGetInfo"); r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lock(d->mem);
  *total = total_memory;
  *free = total_memory - reserved_memory - d->live_bytes;
  return CUDA_SUCCESS;
}

// =====================================================================================================================
// Test control (tests/cuda_fake/fake_control.hpp)
// =====================================================================================================================

/// Device `device` fails with `cuda_error` (any nonzero code), as if its context had hit a sticky error: its queued
/// work is dropped (no more data moves), event queries and calls in its context return the error. -1: bad device.
APGAS_FAKE_EXPORT int apgas_fake_cuda_fail(int device, int cuda_error) {
  device_state* d = device_at(device);
  if (d == nullptr || cuda_error == 0) return -1;
  count(*d, injected_failures);
  fail_device(*d, cuda_error, "injected by the test (apgas_fake_cuda_fail)", false);
  return 0;
}

/// The next `count` calls of the driver function `function` ("cuMemcpyHtoDAsync") on `device` (-1: any) fail with
/// `cuda_error` without doing anything; a sticky code also fails the device.
APGAS_FAKE_EXPORT int apgas_fake_cuda_fail_next(int device, const char* function, int cuda_error, int count) {
  if (function == nullptr || cuda_error == 0 || count <= 0 || (device != -1 && device_at(device) == nullptr)) {
    return -1;
  }
  state& g = S();
  std::lock_guard lock(g.mu);
  g.injections.push_back(injection{device, function, cuda_error, count});
  g.ninjections.fetch_add(1, std::memory_order_release);
  return 0;
}

/// The next `count` calls of `function` on `device` (-1: any) sleep `us` microseconds after they have taken effect,
/// before returning (honoured by cuFuncSetAttribute, cuLaunchKernel, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync). The
/// counter "stalling" says how many calls are inside such a sleep right now.
APGAS_FAKE_EXPORT int apgas_fake_cuda_stall_next(int device, const char* function, int us, int count) {
  if (function == nullptr || us <= 0 || count <= 0 || (device != -1 && device_at(device) == nullptr)) return -1;
  state& g = S();
  std::lock_guard lock(g.mu);
  g.stalls.push_back(injection{device, function, us, count});
  g.nstalls.fetch_add(1, std::memory_order_release);
  return 0;
}

/// While paused (nonzero), the streams of `device` execute nothing (work queues up); a failure unpauses them.
/// cuMemFree, cuStreamSynchronize and cuCtxSynchronize on a paused device wait.
APGAS_FAKE_EXPORT int apgas_fake_cuda_pause(int device, int paused) {
  device_state* d = device_at(device);
  if (d == nullptr) return -1;
  d->paused.store(paused != 0, std::memory_order_release);
  if (paused == 0) notify_streams(d);
  return 0;
}

/// Delay before every stream operation but event records, in microseconds (overrides APGAS_FAKE_CUDA_DELAY_US).
APGAS_FAKE_EXPORT void apgas_fake_cuda_set_delay_us(int us) { S().delay_us.store(std::max(us, 0)); }

APGAS_FAKE_EXPORT int apgas_fake_cuda_delay_us(void) { return S().delay_us.load(); }

/// Every device healthy and running, no injected failures, counters zero, the delay and the driver version back to
/// the environment's, no trace, no watched address. Allocations, streams, events, functions' opt-ins and static shared
/// memory stay.
APGAS_FAKE_EXPORT void apgas_fake_cuda_reset(void) {
  state& g = S();
  {
    std::lock_guard lock(g.mu);
    g.injections.clear();
    g.ninjections.store(0);
    g.stalls.clear();
    g.nstalls.store(0);
    g.last_fault.clear();
  }
  g.delay_us.store(g.default_delay_us);
  g.driver_version.store(g.default_driver_version);
  for (auto& d : g.devices) {
    d->failed.store(0);
    d->paused.store(false);
    for (int c = 0; c < n_counters; ++c) d->counters[c].store(0);
    std::lock_guard lock(d->trace_mu);
    d->tracing = false;
    d->trace.clear();
    d->watch = 0;
  }
  notify_streams(nullptr);
}

/// A counter of `device` (-1: the sum over the devices) by name: the APGAS_FAKE_COUNTERS above, and the current
/// "ops_pending", "allocations", "allocated_bytes", "streams", "events", "retains"; with any device,
/// "pinned_blocks", "pinned_bytes" and "stalling". -1 for an unknown name or device.
APGAS_FAKE_EXPORT long long apgas_fake_cuda_counter(int device, const char* name) {
  state& g = S();
  if (name == nullptr || device < -1 || device >= g.ndevices) return -1;
  const std::string n = name;
  if (n == "stalling") return g.stalling.load();
  if (n == "pinned_blocks" || n == "pinned_bytes") {
    std::shared_lock lock(g.pinned_mu);
    if (n == "pinned_blocks") return static_cast<long long>(g.pinned.size());
    long long sum = 0;
    for (auto& [p, b] : g.pinned) sum += static_cast<long long>(b);
    return sum;
  }
  long long total = 0;
  for (auto& d : g.devices) {
    if (device != -1 && d->ordinal != device) continue;
    if (n == "ops_pending") {
      total += d->pending.load();
    } else if (n == "allocations" || n == "allocated_bytes") {
      std::shared_lock lock(d->mem);
      if (n == "allocations") {
        total += static_cast<long long>(d->allocs.size());
      } else {
        for (auto& [p, b] : d->allocs) total += static_cast<long long>(b);
      }
    } else if (n == "streams") {
      total += static_cast<long long>(streams_of(*d).size());
    } else if (n == "events") {
      std::shared_lock lock(g.handles_mu);
      for (auto& [h, e] : g.events) total += e->ctx == &d->ctx ? 1 : 0;
    } else if (n == "retains") {
      total += d->retains.load();
    } else {
      int c = 0;
      while (c < n_counters && n != counter_names[c]) ++c;
      if (c == n_counters) return -1;
      total += d->counters[c].load();
    }
  }
  return total;
}

/// The sticky error of `device` (0: healthy; -1: no such device).
APGAS_FAKE_EXPORT int apgas_fake_cuda_device_error(int device) {
  device_state* d = device_at(device);
  return d == nullptr ? -1 : d->failed.load();
}

/// The description of the last device failure, into buf (NUL-terminated, truncated); returns its full length.
APGAS_FAKE_EXPORT int apgas_fake_cuda_last_fault(char* buf, int size) {
  state& g = S();
  std::lock_guard lock(g.mu);
  if (buf != nullptr && size > 0) std::snprintf(buf, static_cast<std::size_t>(size), "%s", g.last_fault.c_str());
  return static_cast<int>(g.last_fault.size());
}

/// Read n bytes of device memory (which must lie in one live allocation of `device`) into dst, now, bypassing the
/// streams. 0 on success, CUDA_ERROR_INVALID_VALUE otherwise.
APGAS_FAKE_EXPORT int apgas_fake_cuda_peek(int device, unsigned long long address, void* dst, size_t n) {
  device_state* d = device_at(device);
  if (n == 0) return d == nullptr ? CUDA_ERROR_INVALID_VALUE : 0;
  if (d == nullptr || dst == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lock(d->mem);
  if (!inside(*d, static_cast<std::uintptr_t>(address), n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address)), n);
  return 0;
}

/// Write n bytes into device memory, likewise.
APGAS_FAKE_EXPORT int apgas_fake_cuda_poke(int device, unsigned long long address, const void* src, size_t n) {
  device_state* d = device_at(device);
  if (n == 0) return d == nullptr ? CUDA_ERROR_INVALID_VALUE : 0;
  if (d == nullptr || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lock(d->mem);
  if (!inside(*d, static_cast<std::uintptr_t>(address), n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), src, n);
  return 0;
}

/// Wait until every stream of `device` has executed what was enqueued so far (not while it is paused).
APGAS_FAKE_EXPORT int apgas_fake_cuda_synchronize(int device) {
  device_state* d = device_at(device);
  if (d == nullptr) return -1;
  synchronize(*d);
  return 0;
}

/// The version cuDriverGetVersion reports from now on (e.g. 12040 for CUDA 12.4). -1: out of range.
APGAS_FAKE_EXPORT int apgas_fake_cuda_set_driver_version(int version) {
  if (version < 1000 || version > 99990) return -1;
  S().driver_version.store(version);
  return 0;
}

/// The static shared memory of `function` (any CUfunction handle), as CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES reports it
/// and as the launch limits count it. -1: out of range.
APGAS_FAKE_EXPORT int apgas_fake_cuda_set_static_shared(const void* function, int bytes) {
  if (function == nullptr || bytes < 0 || bytes > max_shared_optin) return -1;
  std::lock_guard lock(S().mu);
  S().function_static[function] = bytes;
  return 0;
}

/// Start (nonzero) or stop tracing `device`'s stream operations; starting clears the trace. -1: bad device.
APGAS_FAKE_EXPORT int apgas_fake_cuda_trace(int device, int on) {
  device_state* d = device_at(device);
  if (d == nullptr) return -1;
  std::lock_guard lock(d->trace_mu);
  if (on != 0) d->trace.clear();
  d->tracing = on != 0;
  return 0;
}

/// Copies up to `max` entries of `device`'s trace into out (in order); returns how many there are in all.
APGAS_FAKE_EXPORT long apgas_fake_cuda_trace_read(int device, apgas_fake_cuda_trace_entry* out, long max) {
  device_state* d = device_at(device);
  if (d == nullptr) return -1;
  std::lock_guard lock(d->trace_mu);
  const long n = static_cast<long>(d->trace.size());
  for (long i = 0; i < n && i < max && out != nullptr; ++i) out[i] = d->trace[static_cast<std::size_t>(i)];
  return n;
}

/// The device address whose 8 bytes each kernel of `device` "reads" when its stream executes it (trace entry
/// `seen`); 0: none.
APGAS_FAKE_EXPORT int apgas_fake_cuda_watch(int device, unsigned long long address) {
  device_state* d = device_at(device);
  if (d == nullptr) return -1;
  std::lock_guard lock(d->trace_mu);
  d->watch = static_cast<std::uintptr_t>(address);
  return 0;
}

/// 1 when device `peer` may access device `device`'s default memory pool (cuMemPoolSetAccess), 0 if not; -1: bad ids.
APGAS_FAKE_EXPORT int apgas_fake_cuda_pool_access(int device, int peer) {
  device_state* d = device_at(device);
  if (d == nullptr || device_at(peer) == nullptr) return -1;
  std::lock_guard lock(S().mu);
  return d->pool_access[static_cast<std::size_t>(peer)] ? 1 : 0;
}

/// The release threshold set on device `device`'s default memory pool (0 unless cuMemPoolSetAttribute set one).
APGAS_FAKE_EXPORT unsigned long long apgas_fake_cuda_pool_release_threshold(int device) {
  device_state* d = device_at(device);
  if (d == nullptr) return 0;
  std::lock_guard lock(S().mu);
  return d->pool_release_threshold;
}

/// The context current on the calling thread: the device it belongs to, -1 when none is current.
APGAS_FAKE_EXPORT int apgas_fake_cuda_current_device(void) { return t_current == nullptr ? -1 : t_current->ordinal; }
