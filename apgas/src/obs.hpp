#pragma once
// Observability inside the core: the run's life cycle of the trace and the statistics (runtime.cpp calls it), the
// hooks of the scheduler, finish and message paths, and the binary form of what a place recorded. The recording
// seam that the backends use too is apgas/detail/obs.hpp; the JSON writer is obs_json.cpp, the statistics table
// obs_stats.cpp. See docs/architecture.md, "Observability".
//
// Invariants:
//  - g_mask is set by start() before any worker of the run exists and cleared by stop() after they were joined, so
//    every worker sees one value for the whole run (hooks may test it at the start and at the end of an activity
//    and get the same answer).
//  - A worker's buffer is written by that worker only (its cursor is published with a release store, so a reader
//    that loads it with acquire — the emergency dump — sees complete events below it); the shared buffer of other
//    threads is written under its lock.
//  - Flow ids are unique in a run: (place << 50) | (writer << 37) | sequence of that writer (obs.cpp: place_shift,
//    writer_shift: 37 bits of sequence, 13 of writer, the place above).
#include <apgas/detail/obs.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/runtime.hpp>
#include <apgas/transport/transport.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace apgas::detail {
struct worker;
}  // namespace apgas::detail

namespace apgas::detail::obs {

// ---- the run's life cycle (runtime.cpp) ----

/// The category mask of an APGAS_TRACE_FILTER value: a comma-separated list of category names, "all", and names
/// prefixed with '-' that are taken out again ("all,-park"). Throws config_error naming `var`, the value, the item
/// and the accepted names.
std::uint32_t parse_filter(const std::string& filter, const char* var);

/// Collective (every place, after the transport exists, before the place tree is exchanged): every place takes
/// place 0's settings; place 0 checks that it can write the trace file (and writes a placeholder there, replaced
/// when the run ends). False at every place when place 0 cannot (the message is printed there) or when this build
/// has no tracing: the run stops with exit code 2.
bool prepare(const config& cfg, transport::transport& tp);
/// After the start-up barrier, before the workers start (collective when tracing): estimates the clock offsets of
/// the other places, reserves the buffers of `workers` workers, and switches recording on.
void start(transport::transport& tp, int workers);
/// After the workers were joined (collective when tracing or statistics are on): switches recording off, estimates
/// the clock offsets again and brings every place's record to place 0.
void stop(transport::transport& tp);
/// After the run's last collective: place 0 writes the trace file and prints the statistics; frees the buffers.
void finish();

/// On the way down of a place that will not reach finish() (std::terminate, a failed transport): writes what this
/// place recorded to "<trace file>.place<N>.json" (this place alone, on its own clock). Best effort, never throws.
void emergency_dump(const char* why) noexcept;

// ---- hooks of the core (each call site tests on() first) ----
void activity_begin(worker* w, task& t) noexcept;
void activity_end() noexcept;
/// A task is about to become runnable: its spawn flow starts here (task::trace_flow).
void spawned(task& t) noexcept;
/// complete_handoff: the worker switched from fiber `from` to `to`.
void switched(const void* from, const void* to) noexcept;
void parked() noexcept;
void stolen() noexcept;
void finish_wait_begin() noexcept;
void finish_wait_end() noexcept;
/// A message to `dst` of `bytes` bytes (before the trailer) is about to be handed to the transport: opens its send
/// span and returns the flow id the message carries (0: none).
std::uint64_t message_send_begin(int dst, std::size_t bytes, unsigned kind) noexcept;
void message_send_end() noexcept;
/// A message from `src` arrived: opens the handler's span (ending the sender's flow); close it with span_end.
void message_received(int src, std::size_t bytes, unsigned kind, std::uint64_t flow) noexcept;
/// Bulk payload bytes (async_copy between hosts), counted in the statistics' bytes per peer.
void bulk_sent(int dst, std::size_t bytes) noexcept;
void bulk_received(int src, std::size_t bytes) noexcept;

/// Times the idle part of the scheduling loop (statistics): begin() at the first round that found nothing; the
/// destructor adds the time to the worker's idle total.
class idle_timer {
 public:
  void begin() noexcept {
    if (start_ == 0 && on(stats)) start_ = now();
  }
  ~idle_timer() {
    if (start_ != 0) add_idle(now() - start_);
  }

 private:
  static void add_idle(std::uint64_t ns) noexcept;
  std::uint64_t start_ = 0;
};

// ---- the record: what a place's buffers hold and how it travels to place 0 ----

/// One event: 32 bytes. `a` holds a name (a string pointer while recorded, a string index once encoded) for the kinds
/// marked so.
struct event {
  std::uint64_t ts;  ///< ns on this place's clock
  std::uint64_t a;
  std::uint64_t b;
  std::uint32_t c;
  std::uint16_t kind;
  std::uint16_t d;
};
static_assert(sizeof(event) == 32);

enum kind : std::uint16_t {
  k_act_begin = 1,    ///< a = name (a flow ending here follows as k_flow_in)
  k_act_end = 2,
  k_span_begin = 3,   ///< a = name, b = argument, c = category, d = peer place + 1 (0: none)
  k_span_end = 4,     ///< c = category
  k_switch = 5,       ///< a = from fiber, b = to fiber
  k_flow_out = 6,     ///< a = flow id, b = argument (bytes), c = destination place + 1 (0: here), d = flow kind
  k_flow_in = 7,      ///< a = flow id: ends at the activity or span begun by the event before
  k_counter = 8,      ///< a = name, b = value, c = category, d = place + 1 (0: here)
  k_device_span = 9,  ///< ts = start, a = name, b = flow in, c = category, d = track; next: k_device_ext
  k_device_ext = 10,  ///< ts = end, a = bytes, c = GPU place
};
/// Kinds whose `a` is a name.
inline bool has_name(std::uint16_t k) noexcept {
  return k == k_act_begin || k == k_span_begin || k == k_counter || k == k_device_span;
}

/// The statistics of one place, as they travel.
struct host_stats {
  std::uint64_t run = 0, stolen = 0, parks = 0, finish_waits = 0, idle_ns = 0;
};
struct peer_stats {
  std::uint64_t msgs_sent = 0, bytes_sent = 0, msgs_recv = 0, bytes_recv = 0;
};
struct gpu_stats {
  std::uint64_t kernels = 0;
  std::uint64_t copies[3] = {0, 0, 0};
  std::uint64_t bytes[3] = {0, 0, 0};
};

/// Clock offset of a place against place 0 from one ping-pong: place 0 sent at t0 and received at t1 (its clock),
/// the place answered at tp (its clock); offset = tp - (t0 + t1) / 2, within +- (t1 - t0) / 2.
struct clock_sample {
  std::uint64_t local = 0;  ///< tp (the place's clock)
  std::int64_t offset = 0;
  std::uint64_t error = 0;
};

/// What a place recorded, decoded at place 0 (or, for an emergency dump, at the place itself).
struct place_record {
  int place = 0;
  int workers = 0;
  int first_gpu = 0;
  int gpus = 0;
  std::uint64_t t_start = 0, t_stop = 0;  ///< the place's clock
  std::uint64_t dropped = 0;
  std::uint64_t capacity = 0;             ///< events per worker
  host_stats host;
  std::vector<peer_stats> peers;          ///< by host place
  std::vector<gpu_stats> gpu;             ///< by local GPU
  std::vector<std::string> names;         ///< demangled, cleaned
  std::vector<std::vector<event>> streams;  ///< per worker, then other threads; `a` of named kinds indexes names
  clock_sample sync_start, sync_end;      ///< against place 0 (zero at place 0)
};

/// What place 0 knows of the places for naming them.
struct place_info {
  std::string description;
  int parent = -1;  ///< a GPU place's host; -1 for a host
};

/// obs_json.cpp: writes the merged trace of `records` (by host place) to `out` (a FILE*). Returns the number of JSON
/// events written.
std::uint64_t write_json(void* out, const std::vector<place_record>& records, const std::vector<place_info>& places,
                         std::uint32_t mask, bool merged_time_base);
/// obs_stats.cpp: the statistics table of every place, as place 0 prints it.
std::string stats_table(const std::vector<place_record>& records, const std::vector<place_info>& places);

/// config.cpp: whether apgas::enable_stats() was called in this process (every later run prints its statistics,
/// whether its configuration came from the environment or from code).
bool stats_requested() noexcept;
/// A closure's or entry's type name, readable: demangled, without apgas's wrappers (task_of<F>, async_entry<F, ...>).
std::string readable_type_name(const char* mangled);

}  // namespace apgas::detail::obs
