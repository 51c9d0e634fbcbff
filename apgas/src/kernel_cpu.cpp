// Kernel closures on CPU places: the per-worker block state, clocked threads, collectives and the checking mode.
//
// Blocks are run by tasks over ranges of blocks (apgas/detail/kernel_cpu.hpp). A block never blocks (every blocking
// apgas operation throws inside a kernel), so it runs start to end on one worker thread, and each worker needs one
// block state at a time: `cpu_block`, thread-local, reused from block to block.
//
// Clocked threads (decision 0009). The threads of a clocked block are contexts with stacks of their own, from a
// per-worker pool, switched by apgas_detail_kernel_switch (kernel_switch.hpp) without the scheduler. They form a
// ring in thread order: a thread that reaches a barrier switches straight to the next live thread; the thread whose
// arrival completes the barrier (the last in order) first runs the phase's pending work (the combine of a
// collective) and then switches to the first thread, which starts the next phase. So within a phase the threads run
// one after the other in thread order, each until its next barrier — __syncthreads() semantics, one switch per
// thread per barrier, and every switch goes from the same call site to the same call site, which keeps the
// processor's return predictions right. A thread that ends leaves the ring (and the barrier: it no longer counts).
// Warp operations are barriers of a warp's 32 threads: a second ring per warp, walked the same way.
//
// Invariants:
//  - a clocked block's threads run only inside cpu_run_clocked, on the worker that called it; `cpu_block::driver`
//    is that call's context, resumed once, when the last thread has ended;
//  - within a phase the running thread is the only one between two waits; a suspended thread waits on exactly one
//    event (block phase or warp phase), recorded in wait_kind/wait_phase, and is resumed only after that event is
//    complete — checked whenever warp operations are in use, as mixing them divergently could otherwise resume a
//    thread early; such a block is cancelled (its threads unwind) and fails with kernel_check_error;
//  - a collective deposits into bank[phase & 1]: the combine of phase p runs before any thread of phase p + 1 runs,
//    and a thread reads phase p's results before it arrives at phase p + 1, so two banks never collide;
//  - the threads of a block share their OS thread's C++ exception-handling state (eh_state.hpp: the caught
//    exceptions' stack and the uncaught count), which no switch here saves: a thread must hold no catch handler open
//    and unwind no exception while it is suspended. Every barrier and warp-operation arrival (both paths of the
//    stub, and apgas_detail_kernel_barrier_arrive) compares the state with what it was when the block started; a
//    thread that arrives inside a handler (or from a destructor during unwinding) cancels the block, which fails with
//    kernel_check_error, checking mode or not (`throw;` after the switch would rethrow another thread's exception,
//    and the end of its handler free an exception another handler still uses);
//  - a collective's combine (the body's op) that throws cancels the block, which then fails with that exception.
#include "eh_state.hpp"
#include "finish.hpp"
#include "kernel_switch.hpp"
#include "obs.hpp"  // readable_type_name
#include "runtime.hpp"
#include "scheduler.hpp"
#include "stack.hpp"

#include <apgas/activity.hpp>
#include <apgas/error.hpp>
#include <apgas/kernel.hpp>

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace apgas::detail {
namespace {

constexpr int max_cpu_threads_per_block = 1024;  // the CUDA limit: a kernel that runs on a GPU runs here too
constexpr std::size_t slot_bytes = max_collective_bytes;

// The limits a launch is held to in checking mode: an H100's (what these kernels are written for) unless the host's
// GPUs say otherwise.
constexpr dim3 gpu_max_block(1024, 1024, 64);
constexpr dim3 gpu_max_grid(2147483647, 65535, 65535);
constexpr std::size_t gpu_max_shared = 232448;  // 227 KiB, opted in (the GPU launch path opts in as needed)

enum class wait : std::uint8_t { fresh, running, block, warp, done };

struct cpu_block;

// One cache line of registers, one of what a switch reads and writes, then the vector save area (touched only by the
// thread's own barrier stub) and what only set-up and the end of a block use.
struct alignas(64) kthread {
  kernel_context ctx;        // registers while suspended (first: the switch reads and writes it)
  // What the barrier stub (kernel_switch.cpp) reads at fixed offsets: where the body goes on, what the barrier
  // returns, the body's vector width.
  void* resume_at = nullptr;
  const void* result = nullptr;  // set by whoever resumes this thread: the completed phase's result area, or null
  long width = 0;
  kthread* next = nullptr;   // the ring of live threads, thread order, wrapping
  kthread* wnext = nullptr;  // the ring of live lanes of this thread's warp
  cpu_block* block = nullptr;
  int t = 0;
  std::uint32_t wait_phase = 0;
  wait state = wait::fresh;
  // the vector registers the stub keeps (xmm6-15, or their ymm/zmm forms)
  alignas(64) unsigned char vec[kernel_vector_save_bytes];
  kthread* prev = nullptr;
  kthread* wprev = nullptr;
  int arrivals = 0;          // block barriers reached (the checking mode compares them)
  boost::context::stack_context stack{};
  san::fiber_marks marks;
};

// Thrown in the threads of a cancelled block when they resume (cpu_cancelled); caught where each thread began.
struct block_cancelled {};
static_assert(offsetof(kthread, vec) == kernel_record_vec, "the barrier stub stores vector registers there");
static_assert(offsetof(kthread, resume_at) == kernel_record_resume_at && offsetof(kthread, result) == kernel_record_result &&
                  offsetof(kthread, width) == kernel_record_width,
              "the barrier stub's fields are where kernel_switch.cpp expects them");

struct warp_state {
  std::uint32_t phase = 0;
  int live = 0;
  int arrived = 0;
  kthread* first = nullptr;  // lowest live lane
  combine_fn pending = nullptr;
  const void* op = nullptr;
  std::size_t stride[2] = {1, 1};  // bytes per slot of the operation of each parity
};

// The checking mode's record of one shared array of the current block.
}  // namespace

struct shared_check {
  cpu_block* block = nullptr;
  int index = 0;                     // the resource's position among the kernel's resources
  unsigned char* base = nullptr;
  std::size_t n = 0;
  std::size_t elem = 0;
  // per element: the barrier epoch of its first access in that epoch, the first thread, whether another touched it,
  // and its bytes at that first access (a race is two threads in one epoch and a changed value)
  std::vector<std::uint32_t> epoch;
  std::vector<int> first_thread;
  std::vector<int> other_thread;
  std::vector<unsigned char> snapshot;
  // per element, in its epoch: threads' accesses through operator[] less the atomic operations on it. An atomic
  // operation is an access (s[i]) and a note (cpu_atomic_note), so above 0 means a plain access too, and a plain
  // access races with an atomic one of another thread as much as with a plain one (on a GPU the plain load or store
  // is not ordered with the atomic's read-modify-write).
  std::vector<int> plain;
  std::vector<std::size_t> touched;  // elements accessed by two threads in the current epoch
};

namespace {

// The checking mode's state of a block-level body that cpu_block_enter saves and cpu_block_leave restores.
struct cpu_thread_state {
  int thread;          // whose shared accesses follow (-1: the block's own)
  const char* inside;  // the construct whose per-thread code runs (null: none)
};

struct cpu_block : cpu_block_head {  // the head first: bodies read `checking` through it
  const cpu_launch_info* info = nullptr;
  long b = 0;

  // block-level bodies: scratch for per_thread and the collectives' buffers, reset for each block (where it stands,
  // arena_chunk and arena_used, is in the head: collectives mark and release it inline)
  std::vector<std::unique_ptr<unsigned char[]>> arena_chunks;
  static constexpr std::size_t chunk_bytes = 256 * 1024;

  // clocked blocks
  kernel_context driver;
  san::fiber_marks* driver_marks = nullptr;
  std::unique_ptr<kthread[]> threads;  // the pool: max_cpu_threads_per_block records, stacks made as needed
  int stacks = 0;                      // threads[0..stacks) have a stack
  std::size_t stack_size = 0;
  int n = 0;
  int live = 0;
  int arrived = 0;
  std::uint32_t phase = 0;             // grows across blocks: tags of earlier blocks never match
  combine_fn pending = nullptr;
  const void* pending_op = nullptr;
  void (*thread_fn)(void*, int, void*) = nullptr;
  void* thread_ctx = nullptr;
  bool warp_ops = false;               // a warp operation happened in this block: resumptions are checked
  bool cancelled = false;
  bool refused = false;                // cancelled because the block cannot run as written (reported)
  bool slow = false;                   // warp_ops || cancelled || checking: barriers take the general path
  // The OS thread's exception-handling state, and what it was when the block started (eh_state.hpp): every barrier
  // compares them (the threads of a block share the state, so none may reach a barrier inside a catch handler).
  eh_state* eh = nullptr;
  eh_state eh_base;
  std::exception_ptr first_error;
  std::unique_ptr<unsigned char[]> banks;  // [2][max threads][slot]: block collectives, then [2][..][..] warp ops
  std::unique_ptr<std::uint32_t[]> tags;   // [2][max threads] block, then [2][max threads] warp
  alignas(16) unsigned char result[2][slot_bytes];
  alignas(16) unsigned char unwinding[slot_bytes] = {};  // what a barrier returns to a thread that unwinds (zeros)
  warp_state warps[max_cpu_threads_per_block / warp_size];

  // checking mode (`checking` is in the head)
  std::uint32_t epoch = 0;               // barriers passed (block-level: sync() calls)
  // clocked: what the first thread to arrive in the current block phase reached (its collective's combine, whether
  // it deposited a value), which the others must reach too; each kind of report once per block
  combine_fn phase_combine = nullptr;
  bool phase_deposit = false;
  int phase_first = 0;
  bool mixed_reported = false;
  bool lane_reported = false;
  bool per_thread_reported = false;
  bool sync_inside_reported = false;
  int current_thread = -1;               // whose accesses these are
  const char* inside = nullptr;          // block level: the construct whose per-thread function runs (cpu_block_enter)
  std::vector<cpu_thread_state> entered;  // the states cpu_block_enter saved, innermost last
  std::vector<std::pair<const char*, const char*>> nested;  // (construct, inside what) reported in this block
  std::vector<std::unique_ptr<shared_check>> checks;
  std::vector<std::string> reports;
  static constexpr std::size_t max_reports = 8;
  std::size_t more_reports = 0;

  std::size_t stride[2] = {1, 1};        // bytes per slot of the block collective of each parity
  // Bank b (block parities 0 and 1, then warp parities 0 and 1) holds max_cpu_threads_per_block slots of up to
  // slot_bytes; a collective's slots are dense, `stride` apart.
  unsigned char* bank(int b) noexcept {
    return banks.get() + static_cast<std::size_t>(b) * max_cpu_threads_per_block * slot_bytes;
  }
  unsigned char* block_slot(int parity, int t) noexcept {
    return bank(parity) + static_cast<std::size_t>(t) * stride[parity];
  }
  unsigned char* warp_slot(int parity, int t) noexcept {
    return bank(2 + parity) + static_cast<std::size_t>(t) * warps[t / warp_size].stride[parity];
  }
  std::uint32_t& block_tag(int parity, int t) noexcept {
    return tags[static_cast<std::size_t>(parity) * max_cpu_threads_per_block + static_cast<std::size_t>(t)];
  }
  std::uint32_t& warp_tag(int parity, int t) noexcept { return block_tag(2 + parity, t); }

  void report(std::string s) {
    if (reports.size() < max_reports) {
      reports.push_back(std::move(s));
    } else {
      ++more_reports;
    }
  }
  std::string where() const {
    const dim3 bid = unflatten(b, info->g.blocks);
    return "kernel " + obs::readable_type_name(info->kernel) + ", block " + std::to_string(b) + " (" +
           std::to_string(bid.x) + "," + std::to_string(bid.y) + "," + std::to_string(bid.z) + ")";
  }
};

// On the heap, one per thread (deleted at thread exit by t_pool_owner below): the library's thread-local storage stays
// a few hundred bytes, which its initial-exec model needs to keep libapgas loadable with dlopen (apgas/CMakeLists.txt).
thread_local cpu_block* t_block = nullptr;
[[gnu::noipa]] cpu_block& this_block() noexcept;

inline kthread* as_thread(void* self) noexcept { return static_cast<kthread*>(self); }

// ---- switching --------------------------------------------------------------------------------------------------

// The switch with the sanitizers' annotations (the path of sanitizer builds and of architectures without the stub).
inline void switch_to(kthread* from, kthread* to) {
  san::before_switch(from->marks, to->marks);
  apgas_detail_kernel_switch(&from->ctx, &to->ctx);
  san::after_switch(from->marks, nullptr);
}

// Whether `u` may run now: it starts, or what it waits for has completed.
bool resumable(const cpu_block& b, const kthread& u) noexcept {
  switch (u.state) {
    case wait::fresh: return true;
    case wait::block: return u.wait_phase + 1 == b.phase;
    case wait::warp: return u.wait_phase + 1 == b.warps[u.t / warp_size].phase;
    default: return false;
  }
}

const char* waiting_on(const kthread& u) noexcept {
  return u.state == wait::warp ? "a warp operation" : "a block barrier (advance or a block collective)";
}

// The block cannot go on as written: every thread unwinds when it next runs (its barrier returns null; a thread that
// has not started does not run its body).
void cancel(cpu_block& b, bool refused = false) noexcept {
  b.refused = b.refused || refused;
  b.cancelled = true;
  b.slow = true;
  for (int i = 0; i < b.n; ++i) b.threads[static_cast<std::size_t>(i)].result = nullptr;
}

// Called before switching to u when warp operations are in use.
void check_resumable(cpu_block& b, const kthread& from, const kthread& u) {
  if (b.cancelled || resumable(b, u)) return;
  cancel(b, true);
  b.report("divergent barrier in " + b.where() + ": thread " + std::to_string(u.t) + " waits at " + waiting_on(u) +
           " while thread " + std::to_string(from.t) + " went on from " +
           (from.state == wait::warp ? "a warp operation" : "a block barrier") +
           " (every thread of a warp must reach each warp operation, and every thread of the block each barrier)");
}

void next_epoch(cpu_block& b);  // the checking mode's barrier count, advanced (below)

// A collective's combine, which runs the body's operation: one that throws fails the block with its exception, and
// the block is cancelled so that its threads unwind (the combine runs inside a barrier, whose entry points cannot
// throw: the exception would end the process).
[[gnu::noinline]] void run_combine(cpu_block& b, combine_fn fn, void* slots, const bool* present, int n, void* result,
                                   const void* op) noexcept {
  try {
    fn(slots, present, n, result, op);
  } catch (...) {
    if (!b.first_error) b.first_error = std::current_exception();
    cancel(b);
  }
}

void complete_block_phase(cpu_block& b) {
  const std::uint32_t p = b.phase;
  if (b.pending != nullptr) {
    bool present[max_cpu_threads_per_block];
    const int parity = static_cast<int>(p & 1);
    for (int i = 0; i < b.n; ++i) present[i] = b.block_tag(parity, i) == p;
    run_combine(b, b.pending, b.block_slot(parity, 0), present, b.n, b.result[parity], b.pending_op);
    b.pending = nullptr;
  }
  b.phase = p + 1;
  b.arrived = 0;
  if (b.checking) next_epoch(b);
}

void complete_warp_phase(cpu_block& b, warp_state& w, int warp) {
  if (w.pending != nullptr) {
    bool present[warp_size];
    const int parity = static_cast<int>(w.phase & 1);
    const int lo = warp * warp_size;
    const int cnt = std::min(warp_size, b.n - lo);
    for (int i = 0; i < cnt; ++i) present[i] = b.warp_tag(parity, lo + i) == w.phase;
    run_combine(b, w.pending, b.warp_slot(parity, lo), present, cnt, nullptr, w.op);
    w.pending = nullptr;
  }
  w.phase += 1;
  w.arrived = 0;
}

// What the thread that hands over to u does for it, before the switch, on the general path: whose shared accesses
// follow, and u's state (what its wait returns was set when it arrived, and nulled if the block was cancelled since).
void prepare_resume(cpu_block& b, kthread& u) noexcept {
  b.current_thread = u.t;
  if (u.state != wait::fresh) u.state = wait::running;  // a fresh thread: kthread_entry starts it
}

// What a thread reached at a block barrier, for the report of different collectives at one barrier.
const char* collective_name(combine_fn combine, bool deposit) noexcept {
  if (combine != nullptr) return "a reduction or a scan";
  return deposit ? "a broadcast" : "advance()";
}

// Checking mode: every thread of a block must reach the same collective at a barrier, with the same operation and
// type (advance() alike): on a GPU each holds its own __syncthreads() calls, and a reduction's tree or a broadcast's
// source would mix values of different meanings. Compared with the first thread to arrive in the phase.
void check_same_collective(cpu_block& b, const kthread& k, combine_fn combine) {
  const bool deposit = b.block_tag(static_cast<int>(b.phase & 1), k.t) == b.phase;
  if (b.arrived == 0) {
    b.phase_combine = combine;
    b.phase_deposit = deposit;
    b.phase_first = k.t;
    return;
  }
  if (b.mixed_reported || (combine == b.phase_combine && deposit == b.phase_deposit)) return;
  b.mixed_reported = true;
  const bool both_combine = combine != nullptr && b.phase_combine != nullptr;
  const std::string first = std::to_string(b.phase_first);
  b.report("different collectives at one barrier in " + b.where() + ": thread " + std::to_string(k.t) + " reached " +
           (both_combine ? "a reduction or a scan of another kind, type or operation than thread " + first + "'s"
                         : std::string(collective_name(combine, deposit)) + " where thread " + first + " reached " +
                               collective_name(b.phase_combine, b.phase_deposit)) +
           " (on a GPU every thread of a block must reach the same collective, with the same operation and type)");
}

// A thread arrives at the block barrier: the next thread in order runs (the last one's arrival completes the phase).
kthread* block_next(kthread* k, combine_fn combine, const void* op) {
  cpu_block& b = *k->block;
  if (b.checking) check_same_collective(b, *k, combine);
  if (combine != nullptr) {
    b.pending = combine;
    b.pending_op = op;
  }
  k->arrivals += 1;
  k->state = wait::block;
  k->wait_phase = b.phase;
  k->result = b.cancelled ? nullptr : b.result[b.phase & 1];
  kthread* const u = k->next;
  if (++b.arrived == b.live) complete_block_phase(b);
  return u;
}

// The same for a warp operation: the warp's next lane runs.
kthread* warp_next(kthread* k, combine_fn combine, const void* op) {
  cpu_block& b = *k->block;
  const int warp = k->t / warp_size;
  warp_state& w = b.warps[warp];
  if (combine != nullptr) {
    w.pending = combine;
    w.op = op;
  }
  k->state = wait::warp;
  k->wait_phase = w.phase;
  k->result = b.cancelled ? nullptr : b.result[0];  // warp operations read the slots: any non-null pointer will do
  kthread* const u = k->wnext;
  if (++w.arrived == w.live) complete_warp_phase(b, w, warp);
  return u;
}

// Whether the OS thread's exception state is what it was when the block started: the running thread has no catch
// handler open and no exception unwinding its frames (the others, suspended at barriers, had none either).
inline bool eh_clean(const cpu_block& b) noexcept { return *b.eh == b.eh_base; }

// The same on the barrier's fast path, taken only by blocks that started with no handler open and no exception
// unwinding (others take the general path throughout: cpu_run_clocked): both fields tested against zero with one
// branch, a load of the state's address, two loads, an or and a branch that a correct kernel never takes.
inline bool eh_none(const cpu_block& b) noexcept {
  const eh_state& now = *b.eh;
  return (reinterpret_cast<std::uintptr_t>(now.caught) | now.uncaught) == 0;
}

// A thread reached a barrier (kind 0) or a warp operation (kind 1) inside a catch handler or while an exception
// unwinds its frames. Switching away would hand the handler's exception to the thread that runs next (they share
// the OS thread's state): `throw;` there would rethrow it, its handler's end would free it under this one. So the
// block is cancelled and k itself goes on, without a switch: inside a handler its barrier returns null and it
// unwinds (block_cancelled, thrown from the handler, ends the handler); then the others, whose barriers return null
// too. A thread that unwinds (a destructor reached the barrier) cannot throw: its barrier returns an area of zeros
// instead (a collective's result there is meaningless, the block fails anyway) and it unwinds on.
kthread* barrier_in_handler(cpu_block& b, kthread* k, long kind) {
  if (!b.cancelled) {
    cancel(b, true);
    b.report(std::string(kind == 0 ? "advance() or a block collective" : "a warp operation") +
             " reached inside a catch handler (or while an exception unwinds) in " + b.where() + ", thread " +
             std::to_string(k->t) +
             ": not supported on CPU places — the threads of a block share one OS thread's exception state, and GPU "
             "kernels have no exceptions (end the handler first, keeping what it needs, and reach the barrier after "
             "it)");
  }
  k->result = b.eh->uncaught != b.eh_base.uncaught ? b.unwinding : nullptr;
  prepare_resume(b, *k);
  return k;
}

// Arrival bookkeeping shared by both barrier paths; returns the thread to run next, prepared (possibly k itself).
kthread* arrive(kthread* k, long kind, combine_fn combine, const void* op) {
  cpu_block& b = *k->block;
  if (!eh_clean(b)) [[unlikely]] return barrier_in_handler(b, k, kind);
  kthread* const u = kind == 0 ? block_next(k, combine, op) : warp_next(k, combine, op);
  if (u != k && (b.warp_ops || kind != 0)) check_resumable(b, *k, *u);
  prepare_resume(b, *u);
  return u;
}

// A thread's body has ended: leave both rings and hand over for good.
[[noreturn]] void leave(kthread* k) {
  cpu_block& b = *k->block;
  const int warp = k->t / warp_size;
  warp_state& w = b.warps[warp];
  k->state = wait::done;
  b.live -= 1;
  w.live -= 1;
  kthread* const next = k->next;
  kthread* const wnext = k->wnext;
  k->prev->next = next;
  next->prev = k->prev;
  k->wprev->wnext = wnext;
  wnext->wprev = k->wprev;
  if (w.first == k) w.first = w.live > 0 ? wnext : nullptr;
  kthread* u;
  if (b.live == 0) {
    san::before_switch(k->marks, *b.driver_marks, /*leaving_for_good=*/true);
    apgas_detail_kernel_switch(&k->ctx, &b.driver);
    __builtin_unreachable();
  }
  if (b.cancelled) {
    u = next;
  } else if (w.arrived > 0 && w.live > 0) {
    // lanes of this warp wait at a warp operation this thread will never reach: it no longer counts
    if (w.arrived == w.live) {
      complete_warp_phase(b, w, warp);
      u = w.first;
    } else {
      u = wnext;
    }
  } else {
    if (b.arrived > 0 && b.arrived == b.live) complete_block_phase(b);
    u = next;
  }
  if (b.warp_ops) check_resumable(b, *k, *u);
  prepare_resume(b, *u);
  san::before_switch(k->marks, u->marks, /*leaving_for_good=*/true);
  apgas_detail_kernel_switch(&k->ctx, &u->ctx);
  __builtin_unreachable();
}

void kthread_entry(void* arg) {
  kthread* k = static_cast<kthread*>(arg);
  san::after_switch(k->marks, nullptr);
  cpu_block& b = *k->block;
  k->state = wait::running;
  b.current_thread = k->t;
  if (!b.cancelled) {
    try {
      b.thread_fn(b.thread_ctx, k->t, k);
    } catch (const block_cancelled&) {
    } catch (...) {
      if (!b.first_error) b.first_error = std::current_exception();
    }
  }
  leave(k);
}

void make_stack(cpu_block& b, kthread& k) {
  guarded_stack_allocator alloc(b.stack_size);
  k.stack = alloc.allocate();  // throws std::bad_alloc (the map count can run out: see the message below)
  san::create_fiber(k.marks);
  k.marks.stack_bottom = static_cast<char*>(k.stack.sp) - k.stack.size;
  k.marks.stack_size = k.stack.size;
}

void free_stacks(cpu_block& b) noexcept {
  if (!b.threads) return;
  for (int i = 0; i < b.stacks; ++i) {
    guarded_stack_allocator alloc(b.stack_size);
    alloc.deallocate(b.threads[static_cast<std::size_t>(i)].stack);
    san::destroy_fiber(b.threads[static_cast<std::size_t>(i)].marks);
  }
  b.stacks = 0;
}

struct pool_owner {  // frees the kernel-thread stacks and the block state at thread exit
  ~pool_owner() {
    if (t_block == nullptr) return;
    free_stacks(*t_block);
    delete t_block;
    t_block = nullptr;
  }
};
thread_local pool_owner t_pool_owner;

cpu_block& this_block() noexcept {
  if (t_block == nullptr) {
    t_block = new cpu_block();
    (void)&t_pool_owner;  // odr-use: constructs it on this thread, so that it deletes the block at thread exit
  }
  return *t_block;
}

void ensure_threads(cpu_block& b, int n) {
  (void)&t_pool_owner;  // odr-use: constructs it on this thread
  const std::size_t stack = the_scheduler()->stack_size();
  if (b.stacks > 0 && b.stack_size != stack) free_stacks(b);  // a later run with another APGAS_STACK_SIZE
  b.stack_size = stack;
  if (!b.threads) {
    b.threads = std::make_unique<kthread[]>(max_cpu_threads_per_block);
    b.banks = std::make_unique<unsigned char[]>(4 * max_cpu_threads_per_block * slot_bytes);
    b.tags = std::make_unique<std::uint32_t[]>(4 * max_cpu_threads_per_block);
    std::fill_n(b.tags.get(), 4 * max_cpu_threads_per_block, ~std::uint32_t{0});
  }
  while (b.stacks < n) {
    try {
      make_stack(b, b.threads[static_cast<std::size_t>(b.stacks)]);
    } catch (const std::bad_alloc&) {
      throw kernel_launch_error(2 /* CUDA_ERROR_OUT_OF_MEMORY */,
                                "apgas: a clocked block of " + std::to_string(n) +
                                    " threads on a CPU place needs a stack per thread; stack " +
                                    std::to_string(b.stacks + 1) + " of " + std::to_string(b.stack_size) +
                                    " bytes could not be mapped (each guarded stack takes two of the process's memory "
                                    "mappings, limited by vm.max_map_count; a smaller APGAS_STACK_SIZE does not help "
                                    "with that limit, fewer threads per block or workers do)");
    }
    b.stacks += 1;
  }
}

// ---- spawning blocks --------------------------------------------------------------------------------------------

struct block_range_task final : task {
  block_range_task(std::shared_ptr<void> k, void (*f)(void*, long, long), long l, long h, long g)
      : keep(std::move(k)), fn(f), lo(l), hi(h), grain(g) {}
  void invoke() override {
    in_kernel = true;
    // Halve the range while it holds more than `grain` blocks: the upper half becomes a task thieves can take.
    while (hi - lo > grain) {
      const long mid = lo + (hi - lo) / 2;
      auto* t = new block_range_task(keep, fn, mid, hi, grain);
      t->governing = governing;
      t->innermost = innermost;
      push_task(t);
      hi = mid;
    }
    fn(keep.get(), lo, hi);
  }
  std::shared_ptr<void> keep;
  void (*fn)(void*, long, long);
  long lo, hi, grain;
};

std::string dims(dim3 d) {  // "N" for one dimension (as the GPU path says it), "(x,y,z)" otherwise
  if (d.y == 1 && d.z == 1) return std::to_string(d.x);
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

[[noreturn]] void refuse(const std::string& what) {
  throw kernel_launch_error(1 /* CUDA_ERROR_INVALID_VALUE, as on a GPU */, "apgas::cuda_kernel: " + what);
}

void close_epoch(shared_check& c);

}  // namespace

// ---- launch preparation -------------------------------------------------------------------------------------------

void cpu_prepare(cpu_launch_info& info, const grid* explicit_shape) {
  scheduler* s = the_scheduler();
  info.checking = s != nullptr && s->kernel_check();
  if (info.checking) {
    // A GPU refuses these; so does a CPU place in checking mode, so that a kernel tested here launches there.
    if (info.shared_bytes > gpu_max_shared) {
      refuse("shared memory of " + std::to_string(info.shared_bytes) + " B per block exceeds a GPU's " +
             std::to_string(gpu_max_shared) + " B (checking mode)");
    }
    if (info.constant_bytes > max_constant_bytes) {
      refuse("constant memory of " + std::to_string(info.constant_bytes) +
             " B (its constant_from resources, each at a 16-byte boundary) exceeds a GPU's " +
             std::to_string(max_constant_bytes) + " B (checking mode)");
    }
  }
  if (explicit_shape == nullptr) {
    const int workers = std::max(1, num_workers());
    info.g = info.kind == body_kind::block ? grid{workers, warp_size} : grid{workers, 1};
    if (info.max_threads > 0 && info.g.threads.x > info.max_threads) info.g.threads = dim3(info.max_threads);
    return;
  }
  const grid g = *explicit_shape;
  if (g.blocks.x < 1 || g.blocks.y < 1 || g.blocks.z < 1) {
    refuse("grid of " + dims(g.blocks) + " blocks: every dimension needs at least 1 block");
  }
  // A GPU's grid limits hold everywhere (a GPU place refuses more whatever the mode): with them the block count,
  // x * y * z, fits in a long (beyond them it could wrap around, to no blocks at all).
  static_assert(LONG_MAX / (static_cast<long>(gpu_max_grid.y) * gpu_max_grid.z) >= gpu_max_grid.x);
  if (g.blocks.y > gpu_max_grid.y || g.blocks.z > gpu_max_grid.z) {
    refuse("grid of " + dims(g.blocks) + " blocks: expected 1 to " + dims(gpu_max_grid) +
           " per dimension (a GPU's limits)");
  }
  if (g.threads.x < 1 || g.threads.y < 1 || g.threads.z < 1) {
    refuse("blocks of " + dims(g.threads) + " threads: every dimension needs at least 1 thread");
  }
  if (g.threads.x > max_cpu_threads_per_block || g.threads.y > max_cpu_threads_per_block ||
      g.threads.z > max_cpu_threads_per_block) {  // (tested first: the product of such dimensions could overflow)
    refuse("blocks of " + dims(g.threads) + " threads: expected 1 to " + std::to_string(max_cpu_threads_per_block) +
           " threads per block");
  }
  const long threads = g.threads.count();
  if (threads > max_cpu_threads_per_block) {
    refuse(std::to_string(threads) + " threads per block " + dims(g.threads) + ": expected 1 to " +
           std::to_string(max_cpu_threads_per_block));
  }
  if (info.max_threads > 0 && threads > info.max_threads) {
    refuse(std::to_string(threads) + " threads per block exceed the kernel's launch_bounds of " +
           std::to_string(info.max_threads));
  }
  if (info.checking) {
    if (g.threads.x > gpu_max_block.x || g.threads.y > gpu_max_block.y || g.threads.z > gpu_max_block.z) {
      refuse("blocks of " + dims(g.threads) + " threads exceed a GPU's block dimensions " + dims(gpu_max_block) +
             " (checking mode)");
    }
  }
  info.g = g;
}

void* cpu_block_begin(const cpu_launch_info& info, long b) {
  cpu_block& blk = this_block();
  blk.info = &info;
  blk.b = b;
  blk.arena_chunk = 0;
  blk.arena_used = 0;
  blk.checking = info.checking;
  if (info.checking) {
    blk.epoch += 1;
    blk.current_thread = -1;
    blk.inside = nullptr;
    blk.entered.clear();
    blk.nested.clear();
    blk.checks.clear();
    blk.reports.clear();
    blk.more_reports = 0;
    blk.per_thread_reported = false;
    blk.sync_inside_reported = false;
  }
  return &blk;
}

void cpu_block_end(void* block) {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (!b.checking) return;
  for (auto& c : b.checks) close_epoch(*c);
  if (b.reports.empty()) return;
  std::string msg = "apgas: kernel checking mode found " +
                    std::to_string(b.reports.size() + b.more_reports) + " problem(s):";
  for (const std::string& r : b.reports) msg += "\n  " + r;
  if (b.more_reports > 0) msg += "\n  (and " + std::to_string(b.more_reports) + " more)";
  b.reports.clear();
  throw kernel_check_error(msg);
}

void cpu_block_failed(std::exception_ptr e) noexcept {
  task* t = current_task();
  if (t != nullptr && t->governing != nullptr) t->governing->add_exception(std::move(e));
}

void spawn_blocks_cpu(long blocks, std::shared_ptr<void> keep, void (*run)(void*, long, long)) {
  // Ranges of at least blocks / (32 workers) blocks (one at the least): enough pieces to balance blocks of unequal
  // work, while a grid of many small blocks (rpes: 65 535 blocks of 64 integrals) does not pay a task, an allocation
  // and two reference-count updates on the shared launch state per block.
  const long grain = std::max(1L, blocks / (32L * std::max(1, num_workers())));
  spawn(new block_range_task(std::move(keep), run, 0, blocks, grain));
}

// ---- clocked blocks -----------------------------------------------------------------------------------------------

void cpu_run_clocked(void* block, int threads, void (*thread_fn)(void*, int, void*), void* ctx) {
  cpu_block& b = *static_cast<cpu_block*>(block);
  ensure_threads(b, threads);
  b.n = threads;
  b.live = threads;
  b.arrived = 0;
  b.pending = nullptr;
  b.thread_fn = thread_fn;
  b.thread_ctx = ctx;
  b.warp_ops = false;
  b.cancelled = false;
  b.refused = false;
  b.mixed_reported = false;
  b.lane_reported = false;
  b.slow = b.checking;
  b.first_error = nullptr;
  b.eh = thread_eh_state();  // the block runs start to end on this OS thread
  b.eh_base = *b.eh;
  if (!(b.eh_base == eh_state{})) b.slow = true;  // launched inside a handler: the fast path compares with none
  b.phase += 2;  // a fresh phase: tags and wait phases of the last block cannot match it
  kthread* ts = b.threads.get();
  for (int i = 0; i < threads; ++i) {
    kthread& k = ts[i];
    k.block = &b;
    k.t = i;
    k.arrivals = 0;
    k.state = wait::fresh;
    k.next = &ts[(i + 1) % threads];
    k.prev = &ts[(i + threads - 1) % threads];
    const int lo = i / warp_size * warp_size;
    const int cnt = std::min(warp_size, threads - lo);
    k.wnext = &ts[lo + (i - lo + 1) % cnt];
    k.wprev = &ts[lo + (i - lo + cnt - 1) % cnt];
    kernel_context_start(k.ctx, k.stack.sp, &kthread_entry, &k);
  }
  for (int w = 0; w * warp_size < threads; ++w) {
    warp_state& ws = b.warps[w];
    ws.phase += 2;
    ws.live = std::min(warp_size, threads - w * warp_size);
    ws.arrived = 0;
    ws.first = &ts[w * warp_size];
    ws.pending = nullptr;
  }
  fiber_ctx* const self = this_worker()->running;
  b.driver_marks = &self->marks;
  san::before_switch(self->marks, ts[0].marks);
  apgas_detail_kernel_switch(&b.driver, &ts[0].ctx);
  san::after_switch(self->marks, nullptr);
  b.current_thread = -1;
  if (b.checking && !b.cancelled) {
    // Divergent barriers: every thread that ended normally reached the same number of them (in a cancelled block
    // the threads stopped where they were).
    int most = 0;
    int who = 0;
    for (int i = 0; i < threads; ++i) {
      if (ts[i].arrivals > most) {
        most = ts[i].arrivals;
        who = i;
      }
    }
    for (int i = 0; i < threads; ++i) {
      if (ts[i].arrivals != most && !b.first_error) {
        b.report("divergent barrier in " + b.where() + ": thread " + std::to_string(i) + " reached " +
                 std::to_string(ts[i].arrivals) + " block barrier(s), thread " + std::to_string(who) + " reached " +
                 std::to_string(most) + " (on a GPU every thread of a block must reach each __syncthreads())");
        break;
      }
    }
  }
  if (b.refused) {
    // What cancelled the block (a divergence, a barrier inside a catch handler) is the error, whatever a thread threw
    // as the block unwound: the block could not run as written. The checking mode reports it with the rest
    // (cpu_block_end); without it, it is the only report. (A block cancelled because an operation threw fails with
    // that exception.)
    if (b.checking) return;
    std::string msg = "apgas: " + (b.reports.empty() ? std::string("a clocked block was cancelled") : b.reports.front());
    b.reports.clear();
    throw kernel_check_error(msg);
  }
  if (b.first_error) std::rethrow_exception(b.first_error);
}

void* cpu_block_slot(void* self, std::size_t bytes) noexcept {
  kthread* k = as_thread(self);
  cpu_block& b = *k->block;
  const int parity = static_cast<int>(b.phase & 1);
  b.stride[parity] = bytes;
  b.block_tag(parity, k->t) = b.phase;
  return b.block_slot(parity, k->t);
}

void cpu_cancelled() { throw block_cancelled{}; }

const void* cpu_block_slot_of(void* self, int t) noexcept {
  kthread* k = as_thread(self);
  cpu_block& b = *k->block;
  const std::uint32_t p = b.phase - 1;  // the phase just completed
  if (t < 0 || t >= b.n || b.block_tag(static_cast<int>(p & 1), t) != p) return nullptr;
  return b.block_slot(static_cast<int>(p & 1), t);
}

void* cpu_warp_slot(void* self, std::size_t bytes) noexcept {
  kthread* k = as_thread(self);
  cpu_block& b = *k->block;
  b.warp_ops = true;
  b.slow = true;
  warp_state& w = b.warps[k->t / warp_size];
  const int parity = static_cast<int>(w.phase & 1);
  w.stride[parity] = bytes;
  b.warp_tag(parity, k->t) = w.phase;
  return b.warp_slot(parity, k->t);
}

const void* cpu_warp_slot_of(void* self, int lane, bool shuffle) noexcept {
  kthread* k = as_thread(self);
  cpu_block& b = *k->block;
  const int warp = k->t / warp_size;
  const std::uint32_t p = b.warps[warp].phase - 1;
  const int t = warp * warp_size + lane;
  if (lane < 0 || lane >= warp_size) return nullptr;
  if (t >= b.n) {
    // A lane past the block's last thread (a block whose size is no multiple of 32): a ballot counts it false, as on
    // a GPU; a shuffle gives the caller's own value, where a GPU's source lane outside the mask gives anything.
    if (shuffle && b.checking && !b.lane_reported) {
      b.lane_reported = true;
      b.report("a warp shuffle of thread " + std::to_string(k->t) + " reads lane " + std::to_string(lane) +
               " of its warp, which does not exist (the block has " + std::to_string(b.n) + " threads; its last warp " +
               std::to_string(b.n - warp * warp_size) + " lanes), in " + b.where() +
               " (on a GPU what it gives is undefined): use blocks whose size is a multiple of 32 with warp "
               "operations, or keep the source lane below the block's size");
    }
    return nullptr;
  }
  if (b.warp_tag(static_cast<int>(p & 1), t) != p) {
    if (b.checking && b.threads[static_cast<std::size_t>(t)].state == wait::done && !b.lane_reported) {
      // Without the checking mode a lane that has ended gives the caller's own value (it takes part in nothing).
      b.lane_reported = true;
      b.report("a warp operation of thread " + std::to_string(k->t) + " reads lane " + std::to_string(lane) +
               " of its warp, which has ended, in " + b.where() +
               " (on a GPU a lane that has exited takes part in no warp operation: what it gives is undefined)");
    }
    return nullptr;
  }
  return b.warp_slot(static_cast<int>(p & 1), t);
}

extern "C" const void* apgas_detail_kernel_barrier_arrive(void* self, long kind, combine_fn combine,
                                                          const void* op) noexcept {
  kthread* k = as_thread(self);
  kthread* u = arrive(k, kind, combine, op);
  if (u != k) switch_to(k, u);  // whoever resumes k prepares its result
  return k->result;
}

// The barrier stub's bookkeeping. The common case — a plain block barrier, no warp operations, no checking — is a
// handful of loads and stores; everything else takes the general path.
extern "C" kernel_context* apgas_detail_kernel_barrier_next(void* self, long kind, combine_fn combine,
                                                           const void* op) noexcept {
  kthread* const k = as_thread(self);
  cpu_block& b = *k->block;
  if (kind == 0 && combine == nullptr && !b.slow && eh_none(b)) [[likely]] {
    const std::uint32_t p = b.phase;
    k->state = wait::block;
    k->wait_phase = p;
    k->result = b.result[p & 1];
    kthread* const u = k->next;
    // The thread after u runs next but one: fetch its record now (with 256 threads the records outgrow the L1 cache).
    const kthread* const after = u->next;
    __builtin_prefetch(&after->ctx, 1);
    __builtin_prefetch(&after->resume_at, 1);
    __builtin_prefetch(after->vec, 1);
    __builtin_prefetch(after->vec + 64, 1);
    __builtin_prefetch(after->vec + 128, 1);
    if (++b.arrived == b.live) complete_block_phase(b);
    return &u->ctx;
  }
  return &arrive(k, kind, combine, op)->ctx;
}

// ---- block-level bodies -----------------------------------------------------------------------------------------

void* cpu_block_alloc(void* block, std::size_t bytes, std::size_t align) {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (align < 16) align = 16;
  // A chunk starts on a 64-byte boundary: an alignment above 64 may cost up to align - 64 bytes of it, wherever the
  // allocator put the chunk. Refused alike whatever the addresses.
  const std::size_t most = cpu_block::chunk_bytes - (align > 64 ? std::min(align - 64, cpu_block::chunk_bytes) : 0);
  if (bytes > most) {
    throw kernel_launch_error(2 /* CUDA_ERROR_OUT_OF_MEMORY */,
                              "apgas::thread_block: " + std::to_string(bytes) + " bytes of per-block scratch aligned "
                              "to " + std::to_string(align) + " bytes asked for; at most " + std::to_string(most) +
                              " at once at that alignment (" + std::to_string(cpu_block::chunk_bytes) + " at 64)");
  }
  while (true) {
    if (b.arena_chunk == b.arena_chunks.size()) {
      b.arena_chunks.push_back(std::make_unique<unsigned char[]>(cpu_block::chunk_bytes + 64));
      b.arena_used = 0;
    }
    // A chunk is used from its first 64-byte boundary on: chunk_bytes from there.
    const auto base = (reinterpret_cast<std::uintptr_t>(b.arena_chunks[b.arena_chunk].get()) + 63) / 64 * 64;
    const auto addr = base + b.arena_used;
    const std::size_t pad = (0 - addr) & (align - 1);  // (align: a power of two; `%` by a variable is a division)
    if (b.arena_used + pad + bytes <= cpu_block::chunk_bytes) {
      b.arena_used += pad + bytes;
      return reinterpret_cast<void*>(addr + pad);
    }
    b.arena_chunk += 1;  // (a fresh chunk holds what passed the test above)
    b.arena_used = 0;
  }
}

void cpu_block_sync(void* block) {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (!b.checking) return;
  if (b.inside != nullptr && !b.sync_inside_reported) {  // (once per block: inside for_threads, once per thread)
    b.sync_inside_reported = true;
    b.report("sync() inside " + std::string(b.inside) + " in " + b.where() + " (thread " +
             std::to_string(b.current_thread) + "): on a GPU that is a barrier only some iterations reach; call sync() "
             "between for_threads loops");
  }
  next_epoch(b);
}

void cpu_block_enter(void* block, const char* what) noexcept {
  cpu_block& b = *static_cast<cpu_block*>(block);
  b.entered.push_back(cpu_thread_state{b.current_thread, b.inside});
  if (b.inside != nullptr) {
    // Once per block for each pair: inside a loop over the block's threads it would come once per thread.
    const auto same = [&](const std::pair<const char*, const char*>& p) {
      return std::strcmp(p.first, what) == 0 && std::strcmp(p.second, b.inside) == 0;
    };
    if (std::none_of(b.nested.begin(), b.nested.end(), same)) {
      b.nested.emplace_back(what, b.inside);
      const bool loop = std::strncmp(what, "for_threads", 11) == 0;
      const bool range = std::strcmp(what, "for_range") == 0;  // a loop too, over a range the threads share
      const bool single = std::strcmp(b.inside, "single") == 0;
      const std::string function = "the function given to " + std::string(b.inside);
      const std::string runs = "on a GPU " + (single ? "only thread 0 runs " + function
                                                     : "each thread runs " + function + " on its own");
      std::string why = loop    ? runs + ", so a " + what + " there is one call of its function, with that thread's "
                                         "index, not a loop over the block"
                        : range ? runs + ", so a for_range there runs that thread's share of the range only (every "
                                         "threads()-th index), where a CPU place runs all of it once per call"
                             : std::string("on a GPU ") + what + " holds a barrier (__syncthreads()), which " +
                                   (single ? std::string("only thread 0 reaches there")
                                           : "every thread reaches from its own call of " + function +
                                                 ", where a CPU place runs all of it once per call");
      b.report(std::string(what) + " inside " + b.inside + " in " + b.where() + " (thread " +
               std::to_string(b.current_thread) + "): " + why + "; call " + what +
               " at block level, between for_threads loops");
    }
  }
  b.inside = what;
}

void cpu_block_loop_thread(void* block, int t, const char* entering) noexcept {
  if (entering != nullptr) cpu_block_enter(block, entering);
  static_cast<cpu_block*>(block)->current_thread = t;
}

void cpu_block_leave(void* block) noexcept {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (b.entered.empty()) return;  // (every enter has its leave)
  b.current_thread = b.entered.back().thread;
  b.inside = b.entered.back().inside;
  b.entered.pop_back();
}


void cpu_block_epoch(void* block) noexcept {
  next_epoch(*static_cast<cpu_block*>(block));
}

void cpu_block_set_thread(void* block, int t) noexcept {
  static_cast<cpu_block*>(block)->current_thread = t;
}

void cpu_per_thread_index(void* block, int t) noexcept {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (t == b.current_thread || b.per_thread_reported) return;
  b.per_thread_reported = true;
  const std::string by = b.current_thread < 0 ? std::string("the block's own code (outside for_threads)")
                                              : "thread " + std::to_string(b.current_thread);
  b.report("per_thread value of thread " + std::to_string(t) + " read by " + by + " in " + b.where() +
           ": on a GPU a per_thread value lives in its thread's registers, and an index gives the calling thread's "
           "own value whatever it names; index it with the thread_index of for_threads, and share values through a "
           "shared array");
}

// ---- the checking mode's shared-array watch ---------------------------------------------------------------------

shared_check* cpu_shared_checker(void* block, int index, void* base, std::size_t n, std::size_t elem_bytes) {
  cpu_block& b = *static_cast<cpu_block*>(block);
  if (!b.checking) return nullptr;
  for (auto& c : b.checks) {
    if (c->index == index) return c.get();
  }
  auto c = std::make_unique<shared_check>();
  c->block = &b;
  c->index = index;
  c->base = static_cast<unsigned char*>(base);
  c->n = n;
  c->elem = elem_bytes;
  c->epoch.assign(n, 0);
  c->first_thread.assign(n, -1);
  c->other_thread.assign(n, -1);
  c->snapshot.assign(n * elem_bytes, 0);
  c->plain.assign(n, 0);
  b.checks.push_back(std::move(c));
  return b.checks.back().get();
}

namespace {
// At a new epoch: report the elements two threads touched in the last one whose value changed (a race on a GPU).
void close_epoch(shared_check& c) {
  cpu_block& b = *c.block;
  for (std::size_t i : c.touched) {
    if (c.plain[i] <= 0) continue;  // atomic accesses alone do not race
    if (std::memcmp(c.snapshot.data() + i * c.elem, c.base + i * c.elem, c.elem) != 0) {
      b.report("data race on shared array " + std::to_string(c.index) + " (a resource of the kernel) in " + b.where() +
               ": threads " + std::to_string(c.first_thread[i]) + " and " + std::to_string(c.other_thread[i]) +
               " both accessed element " + std::to_string(i) +
               " between two barriers and its value changed (one of them wrote it)");
    }
  }
  c.touched.clear();
}

// A barrier: every watched array's last epoch is judged now, against the values it left (judged at the array's next
// access instead, a write after the barrier through memory the checks do not watch, a std::span, counted against
// the epoch before, whose threads only read).
void next_epoch(cpu_block& b) {
  for (auto& c : b.checks) {
    if (!c->touched.empty()) close_epoch(*c);
  }
  b.epoch += 1;
}
}  // namespace

bool cpu_shared_access_in(shared_check* c, std::size_t off, std::size_t i, std::size_t n) noexcept {
  if (off == 0 && n == c->n) return cpu_shared_access(c, i);  // the whole array
  if (i >= n) {
    cpu_block& b = *c->block;
    b.report("index " + std::to_string(i) + " outside elements [" + std::to_string(off) + ", " +
             std::to_string(off + n) + ") of shared array " + std::to_string(c->index) + " (" + std::to_string(c->n) +
             " elements) in " + b.where() + ", thread " + std::to_string(b.current_thread));
    return false;
  }
  return cpu_shared_access(c, off + i);
}

bool cpu_shared_access(shared_check* c, std::size_t i) noexcept {
  cpu_block& b = *c->block;
  const int t = b.current_thread;
  if (i >= c->n) {
    b.report("index " + std::to_string(i) + " outside shared array " + std::to_string(c->index) + " of " +
             std::to_string(c->n) + " elements in " + b.where() + ", thread " + std::to_string(t));
    return false;
  }
  // An epoch stamp that does not match: the first access since a barrier. Races of the previous epoch are judged
  // now, before the stamps are overwritten (values cannot change between the barrier and this access by design:
  // this is the first access after it).
  const std::uint32_t now = b.epoch;
  if (!c->touched.empty() && c->epoch[c->touched.front()] != now) close_epoch(*c);
  if (t < 0) return true;  // the block itself (outside for_threads): on a GPU every thread does this alike
  if (c->epoch[i] != now) {
    c->epoch[i] = now;
    c->first_thread[i] = t;
    c->other_thread[i] = -1;
    c->plain[i] = 1;
    std::memcpy(c->snapshot.data() + i * c->elem, c->base + i * c->elem, c->elem);
  } else {
    c->plain[i] += 1;
    if (t != c->first_thread[i] && c->other_thread[i] < 0) {
      c->other_thread[i] = t;
      c->touched.push_back(i);
    }
  }
  return true;
}

void cpu_atomic_note(const void* addr) noexcept {
  cpu_block& b = this_block();
  if (!b.checking) return;
  const auto* a = static_cast<const unsigned char*>(addr);
  for (auto& c : b.checks) {
    if (a >= c->base && a < c->base + c->n * c->elem) {
      const std::size_t i = static_cast<std::size_t>(a - c->base) / c->elem;
      if (c->epoch[i] == b.epoch && b.current_thread >= 0) c->plain[i] -= 1;  // its access was this operation's
      return;
    }
  }
}

// ---- places -------------------------------------------------------------------------------------------------------

void check_kernel_place(place p) {
  check_place(p, "apgas::async_at/at (kernel)");
  require_unrestricted_activity("apgas::async_at/at (kernel)");
}

void check_routed_kernel_place(place p) {
  const int here = tree().here_host;
  if (p.id() < 0 || p.id() >= static_cast<int>(tree().all.size()) || p.parent().id() != here) {
    throw serialization_error("apgas: malformed message: a kernel routed to host " + std::to_string(here) +
                              " names place " + std::to_string(p.id()) + ", which is neither it nor one of its GPUs");
  }
}

void kernel_not_compiled_by_nvcc(place p) {
  throw illegal_operation_exception("apgas: a kernel closure sent to GPU place " + std::to_string(p.id()) +
                                    " from a file not compiled by nvcc: compile the file that launches it as CUDA "
                                    "(apgas_add_cuda_sources() in CMake)");
}

void kernel_body_not_rebuildable(place p) {
  throw illegal_operation_exception(
      "apgas: a kernel closure sent to host place " + std::to_string(p.id()) +
      " from another host: its body is an nvcc __host__ __device__ lambda, which cannot be rebuilt from bytes for a "
      "CPU place (on GPU places it can); launch it from an activity at that host, e.g. at(p, [=] { "
      "async_at(here(), kernel); })");
}

}  // namespace apgas::detail
