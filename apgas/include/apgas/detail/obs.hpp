#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
// The recording seam of observability — the trace (APGAS_TRACE) and the run statistics (APGAS_STATS) — for the
// runtime's files and its backends (cuda_place/). Installed because it sits beside the other seams; not API, and
// only the library calls it.
//
// Cost when off: every call site tests on(bits), one relaxed load of the run's mask and a branch, inlined; the
// recording itself is out of line (apgas/src/obs.cpp). A build configured with APGAS_TRACE_BUILD=OFF compiles
// the library with APGAS_DETAIL_NO_TRACE: the mask is the constant 0 and every site folds away.
//
// Recording rules: events go to the calling worker's own buffer (no lock, no allocation per event: the buffer is
// reserved at the start of the run, APGAS_TRACE_BUFFER bytes per worker); other threads share one buffer under a
// lock. A full buffer drops the event and counts it. Timestamps are the steady clock of the host (CLOCK_MONOTONIC,
// nanoseconds); the run maps every place's clock onto place 0's when it writes the file.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace apgas::detail::obs {

/// Trace categories (APGAS_TRACE_FILTER names them) and the statistics bit.
enum : std::uint32_t {
  cat_activity = 1u << 0,  ///< activity spans (with the closure's type name), spawn flows, activities alive
  cat_finish = 1u << 1,    ///< finish waits
  cat_park = 1u << 2,      ///< waits that poll for messages; parks of a fiber inside a recorded span (an async
                           ///< "parked" slice each, on the fiber's track): so only with activity, finish, at,
                           ///< message or team on too
  cat_at = 1u << 3,        ///< at round trips
  cat_message = 1u << 4,   ///< message sends and handlers, send -> handler flows, bytes in flight
  cat_team = 1u << 5,      ///< team operations
  cat_gpu = 1u << 6,       ///< kernels (device time), launch -> kernel flows, GPU memory in use
  cat_copy = 1u << 7,      ///< DMA slices and copies (device time), the spooler's host copies
  cat_counter = 1u << 8,   ///< sampled counters: deque depth per worker
  cat_all = (1u << 9) - 1,
  stats = 1u << 30,        ///< APGAS_STATS: the per-place table at the end of the run
};

/// The categories traced in the running run, and `stats`; 0 outside a run and when both are off.
extern std::atomic<std::uint32_t> g_mask;

inline std::uint32_t mask() noexcept {
#if defined(APGAS_DETAIL_NO_TRACE)
  return 0;
#else
  return g_mask.load(std::memory_order_relaxed);
#endif
}
inline bool on(std::uint32_t bits) noexcept { return (mask() & bits) != 0; }

/// Nanoseconds of the clock the trace uses (the host's steady clock).
std::uint64_t now() noexcept;

// ---- spans on the calling activity's track (they nest; a park closes them and the resumption reopens them) ----
/// Begin a span named `name` (a string that lives as long as the process) with one numeric argument (bytes, a place)
/// and the place it concerns (`peer`, -1: none); `flow_in`, if not 0, ends a flow at it (a message's handler). End it
/// with span_end in the same activity or handler.
void span_begin(std::uint32_t cat, const char* name, std::uint64_t arg = 0, std::uint64_t flow_in = 0,
                int peer = -1) noexcept;
void span_end(std::uint32_t cat) noexcept;

/// Flow kinds (the arrow's name in the trace).
enum class flow : std::uint16_t { spawn = 1, message = 2, launch = 3 };
/// Start a flow at the calling activity's current span; returns its id (never 0), to be passed to where it ends
/// (a task's trace_flow, a message's trailer, a kernel's device span). 0 when nothing was recorded.
std::uint64_t flow_out(std::uint32_t cat, flow kind, std::uint64_t arg = 0) noexcept;

/// A counter sample of `place` (-1: this host place) at this moment.
void counter(std::uint32_t cat, const char* name, int place, std::uint64_t value) noexcept;

/// Track ids of a GPU place's process: its kernel streams, copy streams and in-order queues.
enum gpu_track : int { track_kernel0 = 1, track_h2d = 16, track_d2h = 17, track_queue0 = 32 };
/// A span that ran on a GPU (device time mapped to this host's clock: start and end in now()'s nanoseconds), on
/// track `track` of GPU place `gpu_place`, ending flow `flow_in` (0: none). Recorded by whichever thread saw it end.
void device_span(std::uint32_t cat, const char* name, int gpu_place, int track, std::uint64_t start_ns,
                 std::uint64_t end_ns, std::uint64_t flow_in, std::uint64_t bytes) noexcept;

// ---- statistics (call only when on(stats)) ----
/// A kernel launched at GPU place p of this host.
void stat_kernel(int gpu_place) noexcept;
/// A copy involving GPU place p: direction 0 host->GPU, 1 GPU->host, 2 GPU->GPU (counted at the source).
void stat_copy(int gpu_place, int direction, std::size_t bytes) noexcept;

}  // namespace apgas::detail::obs
#pragma GCC visibility pop
