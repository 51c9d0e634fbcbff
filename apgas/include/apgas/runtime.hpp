#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file runtime.hpp
/// Start-up and shut-down: apgas::run and its configuration.

#include <apgas/detail/function_ref.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace apgas {

/// Run-time configuration. from_env() reads the APGAS_* variables once; an invalid value is a config_error naming
/// the variable, the value and the accepted range (never a silent default).
struct config {
  static constexpr std::size_t default_stack_size = 256 * 1024;
  static constexpr int max_threads = 4096;
  /// The floor covers the runtime's own work on an activity's stack: a waiting activity polls the transport
  /// (libfabric's and MPI's progress functions need tens of KiB); 16 KiB overflowed inside fi_cq_read.
  static constexpr std::size_t min_stack_size = 64 * 1024;
  static constexpr std::size_t max_stack_size = std::size_t{1} << 30;

  /// Worker threads of this host place (APGAS_NTHREADS); 0 means the hardware concurrency.
  int nthreads = 0;
  /// Bytes of each fiber stack, guard page not included (APGAS_STACK_SIZE; suffixes K, M, G accepted).
  std::size_t stack_size = default_stack_size;

  static constexpr std::size_t default_dma_slice = std::size_t{4} << 20;
  static constexpr std::size_t min_dma_slice = std::size_t{64} << 10;
  static constexpr std::size_t max_dma_slice = std::size_t{256} << 20;
  static constexpr int max_gpu_ordinal = 1023;

  /// Which GPUs of each host become places (APGAS_GPUS): "auto" (this process's share of its node's GPUs: all of
  /// them for a process alone on its node; with several processes of the job on the node, the node-local rank's
  /// contiguous block, from the launcher's variables — docs/building.md), "all", "none", or a comma-separated list of
  /// device ordinals ("0,2"), in the order they become places. A listed GPU the host does not have stops start-up.
  std::string gpus = "auto";
  /// Bytes of each pinned staging slice of the DMA spooler (APGAS_CUDA_DMA_SLICE; suffixes K, M, G), a multiple of
  /// 4 KiB from 64 KiB to 256 MiB. The default, 4 MiB, is explained in docs/decisions/0006-gpu-places.md.
  std::size_t cuda_dma_slice = default_dma_slice;
  static constexpr std::size_t default_direct_copy = std::size_t{1} << 20;
  /// Copies between pageable host memory and a GPU of at most this many bytes go through one driver call, which
  /// stages them itself, instead of the DMA spooler (APGAS_CUDA_DIRECT_COPY; suffixes K, M, G; 0 to max_dma_slice;
  /// 0: every pageable copy is spooled). Several such copies at once went faster this way on an H200, one alone a
  /// little slower; from 2 MiB on the spooler is faster (docs/decisions/0018-direct-copies.md).
  std::size_t cuda_direct_copy = default_direct_copy;

  static constexpr int max_connect_timeout_s = 3600;
  /// Seconds each host place waits at start-up to hear from every other host place over the transport
  /// (APGAS_CONNECT_TIMEOUT, 1 to 3600); a peer not heard from by then stops start-up with a message naming it.
  int connect_timeout_s = 60;

  static constexpr int max_heartbeat_timeout_s = 3600;
  /// Seconds of silence after which a peer host place counts as dead (APGAS_HEARTBEAT_TIMEOUT, 0 to 3600; 0 turns
  /// the failure detector off). Places send heartbeats only to peers they sent nothing else for a fifth of this;
  /// any traffic counts as a sign of life, and silence counts only while this place polls. A peer on the same host
  /// whose process ended is dead at once. A dead place stops every other place with exit code 3.
  int heartbeat_timeout_s = 5;

  static constexpr std::size_t min_message_piece = std::size_t{64} << 10;
  static constexpr std::size_t max_message_piece = std::size_t{1} << 30;
  /// Messages between host places (activities with their captures and arguments, results, replies) have no size
  /// limit but memory. One larger than this many bytes travels by rendezvous: announced in a small message, its
  /// bytes then move in pieces of this size through the transport's bulk path (no copy where the transport can)
  /// (APGAS_MESSAGE_PIECE; suffixes K, M, G; 64 KiB to 1 GiB; 0, the default: the transport's limit, 1 GiB).
  std::size_t message_piece = 0;

  /// The checking mode of kernels on CPU places (APGAS_KERNEL_CHECK=1): a launch is held to a GPU's limits, and
  /// divergent barriers, shared-array indices outside the array and data races on shared arrays are reported as
  /// kernel_check_error (apgas/kernel.hpp). Costs time; off by default.
  bool kernel_check = false;

  static constexpr std::size_t default_trace_buffer = std::size_t{64} << 20;
  static constexpr std::size_t min_trace_buffer = std::size_t{64} << 10;
  static constexpr std::size_t max_trace_buffer = std::size_t{16} << 30;
  /// Write a Chrome/Perfetto trace of the run to this file (APGAS_TRACE; empty: no trace). Place 0's setting
  /// decides for the whole run, and place 0 writes the file when the run ends (a placeholder stands there
  /// meanwhile); a file it cannot write stops start-up. docs/building.md describes the trace.
  std::string trace_file;
  /// What the trace records (APGAS_TRACE_FILTER): a comma-separated list of the categories activity, finish, park,
  /// at, message, team, gpu, copy, counter, or all, each optionally prefixed with '-' to take it out ("all,-park").
  std::string trace_filter = "all";
  /// Bytes of trace buffer per worker thread (APGAS_TRACE_BUFFER; suffixes K, M, G), 64 KiB to 16 GiB, reserved at
  /// the start of a traced run and filled as it goes, 32 bytes per event; a full buffer drops events (counted, and
  /// said at the end).
  std::size_t trace_buffer = default_trace_buffer;
  /// At the end of the run place 0 prints the run statistics of every place to stderr (APGAS_STATS=1, or
  /// enable_stats()): activities run and stolen, parks, finish waits, idle time, messages and bytes per peer, GPU
  /// kernels and copies. Place 0's setting decides for the whole run.
  bool stats = false;

  /// The configuration given by the environment. Throws config_error.
  static config from_env();
  /// Throws config_error if a field is out of range.
  void validate() const;
  /// The device ordinals listed by `gpus`, in order: empty for "none", "auto" and "all" (see all_gpus()). Throws
  /// config_error for a malformed value (not auto/all/none, not a number, out of 0..max_gpu_ordinal, a duplicate).
  std::vector<int> gpu_list() const;
  bool all_gpus() const noexcept { return gpus == "all"; }
};

namespace detail {
int run(const config& cfg, function_ref<void()> main);
int run_from_env(int argc, char** argv, function_ref<void()> main);
}  // namespace detail

/// Start the runtime, run `main` as the main activity at place 0 inside an implicit finish, shut down.
/// Returns 0 when the main activity and everything it started ended normally. Otherwise prints the exceptions to
/// stderr ("apgas: ...") and returns 1; an invalid configuration prints the config_error and returns 2.
/// Every host place other than 0 serves until the main activity ends. Runs may follow one another in a process;
/// they may not nest or overlap: a call while a run is in progress throws illegal_operation_exception (whatever its
/// configuration). Start-up errors of the transport (another program at a peer, an invalid or unbuilt
/// APGAS_TRANSPORT) also return 2 with a message; if the transport fails during the run, or a peer place dies (the
/// failure detector: its process on this host ended, or nothing was heard from it for APGAS_HEARTBEAT_TIMEOUT
/// seconds), the place prints a message naming the failure or the dead place and the process exits with code 3
/// rather than hang; so does a process whose peers do not complete start-up within APGAS_CONNECT_TIMEOUT.
/// @code
///   int main(int argc, char** argv) {
///     return apgas::run(argc, argv, [] { apgas::finish([] { apgas::async([] { std::puts("hi"); }); }); });
///   }
/// @endcode
template <class F>
int run(int argc, char** argv, F&& main) {
  return detail::run_from_env(argc, argv, detail::function_ref<void()>(main));
}

/// Same, with an explicit configuration instead of the environment.
template <class F>
int run(const config& cfg, F&& main) {
  return detail::run(cfg, detail::function_ref<void()>(main));
}

/// Switch the run statistics on for the runs that follow in this process, as APGAS_STATS=1 would (config::from_env
/// reads it), including runs given an explicit config (whose `stats` it sets): what a program's own --stats option
/// calls before apgas::run. @code
///   if (want_stats) apgas::enable_stats();
///   return apgas::run(argc, argv, [] { ... });
/// @endcode
void enable_stats() noexcept;

/// Takes every `--stats` argument before a `--` out of the command line (the later arguments move down, argc
/// shrinks, argv[argc] stays null) and, if there was one, calls enable_stats(); returns whether there was. The one
/// line a program's frame adds before it parses its own options, to accept `--stats` without knowing it: @code
///   int main(int argc, char** argv) {
///     apgas::take_stats_option(argc, argv);
///     ... parse(argc, argv) ...; return apgas::run(argc, argv, ...);
/// @endcode
bool take_stats_option(int& argc, char** argv) noexcept;

}  // namespace apgas
#pragma GCC visibility pop
