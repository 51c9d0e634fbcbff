#pragma once
// The runtime across host places (dist_life.cpp): what runtime.cpp calls to start and stop it.
#include <apgas/transport/transport.hpp>

#include <cstddef>
#include <cstdint>

namespace apgas::detail {

/// kind, finish home, finish serial, reply token, closure id.
inline constexpr std::size_t message_header_bytes = 1 + 8 + 8 + 8 + 4;

/// The process's transport, created from the environment on first use; on the first call of the process also checks
/// that every place runs the same program (transport_error naming the place otherwise).
transport::transport& transport_for_run(int connect_timeout_s);
/// A hash of the running executable's build id (or its path and size when it has none).
std::uint64_t program_fingerprint();

/// Before the workers start. message_piece: config::message_piece (0: the transport's limit).
void dist_start(transport::transport& tp, int heartbeat_timeout_s, int connect_timeout_s, std::size_t message_piece);
/// Start-up (from the transport's creation to the start barrier) must complete within timeout_s, or the process
/// stops with exit code 3 (a place exited before it); a place on this host found dead stops it at once.
void startup_watchdog_arm(int timeout_s);
/// Shut-down (from dist_stop to the final barrier): a place on this host dead for confirm_s seconds (< 0: not looked
/// for) stops the process with exit code 3 naming it, and so does the deadline (timeout_s; 0: none), its message
/// naming `setting` as where it comes from.
void shutdown_watchdog_arm(int timeout_s, int confirm_s, const char* setting);
void watchdog_disarm();  // either one
bool dist_multi_host() noexcept;
/// How many places of the run (this one included) run on this place's host (dist_detect.cpp; 1 before start-up).
int places_on_this_host(int rank) noexcept;
void dist_shutdown_others(int code);          // place 0, once the main activity has ended
int dist_wait_shutdown();                     // other places: blocks the calling (non-worker) thread
void dist_stop();                             // before the workers stop: no more polling
void dist_finalize(transport::transport& tp); // after the workers stopped

}  // namespace apgas::detail
