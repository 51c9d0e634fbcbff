#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file transport.hpp
/// The seam between the runtime and the network: moves bytes between host places. Not API for applications; the
/// runtime (apgas/src/dist*.cpp) is its only user, and it never sees user types — only messages already encoded.
///
/// Contract (every backend):
///  - rank()/size(): this host place and the number of host places; fixed for the life of the process.
///  - send(dst, bytes): an active message, asynchronous, from any thread. Ownership of the bytes is taken (and
///    the vector given to recycle_buffer() when the backend is done with it, see below). Delivery
///    is reliable and exactly once, but the runtime does NOT assume any order between two messages (the test shim
///    reorders on purpose). dst == rank() is allowed (delivered like any other message).
///  - poll(handler): makes progress (completes sends, receives) and delivers arrived messages to `handler`, on the
///    calling thread. Any thread may call it; concurrent calls are serialised by the backend (a caller that finds
///    another poller at work returns false at once). Returns true when it delivered or completed something.
///    The handler may call send(); it must not call poll().
///  - barrier() / allgather(): blocking collectives for start-up and shut-down only, called by one thread per process
///    while no worker polls.
///  - Message buffers handed to the handler are 16-byte aligned (serialization relies on it for zero-copy spans).
///  - Errors (a peer that cannot be reached, a failed call) throw apgas::transport_error naming the backend, the peer
///    and the call; one that is the failure of a single peer (a send to it failed: its connection was reset, its
///    process ended) throws peer_error, which the runtime takes as that peer's death (it tells the others, so that
///    every place names the same dead place). A send may raise another peer's failure found while it made progress
///    (peer_error::peer() is the one that failed); a failure is raised once.

#include <apgas/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace apgas::transport {

/// A transport failure that is a single peer's (see the contract above).
class peer_error : public transport_error {
 public:
  peer_error(int peer, const std::string& what) : transport_error(what), peer_(peer) {}
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

class handler {
 public:
  virtual void on_message(int src, std::span<const std::byte> bytes) = 0;
  /// Part of a message from src arrived (a fragment or piece of a message not complete yet): a sign of life for
  /// the failure detector. Called on the polling thread, without the backend's lock.
  virtual void on_traffic(int src) noexcept { (void)src; }

 protected:
  ~handler() = default;
};

class transport {
 public:
  virtual ~transport() = default;
  virtual const char* name() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual void send(int dst, std::vector<std::byte> bytes) = 0;
  virtual bool poll(handler& h) = 0;
  /// On the thread that just called poll(): whether that poll looked (no other poller, the backend's lock free) and
  /// left nothing behind that it could have taken (a poll takes a bounded number of messages). The failure detector
  /// counts a peer's silence only over such polls: a heartbeat waiting behind other messages is not silence. A
  /// transfer under way does not make a poll undrained (its fragments are their sender's sign of life).
  virtual bool drained() const noexcept { return true; }
  virtual void barrier() = 0;
  /// Every process contributes `mine` (the same size everywhere); returns size() * mine.size() bytes, by rank.
  virtual std::vector<std::byte> allgather(std::span<const std::byte> mine) = 0;
  /// Largest message send() accepts, and largest bulk transfer (the runtime splits bulk data into such pieces).
  virtual std::size_t max_message() const noexcept = 0;

  /// Bulk data (async_copy): the payload goes to its final place without intermediate copies where the backend
  /// can. The sender announces a transfer with an ordinary message (carrying the tag from next_bulk_tag()) and calls
  /// send_bulk; the receiver, on that message, calls recv_bulk with the same tag and the target memory, and `done`
  /// runs (inside a later poll(), on the polling thread) once the data has landed. The payload must stay valid
  /// and unchanged until the receiver's finish ends. Tags are unique among the transfers in flight between two
  /// places. Any thread.
  using done_fn = void (*)(void* ctx);
  virtual std::uint32_t next_bulk_tag(int dst) noexcept = 0;
  virtual void send_bulk(int dst, std::uint32_t tag, std::span<const std::byte> payload) = 0;
  virtual void recv_bulk(int src, std::uint32_t tag, std::span<std::byte> target, done_fn done, void* ctx) = 0;
};

/// Message buffers are recycled per thread, so that a message costs no heap allocation in the steady state: the
/// runtime builds a message in a vector from take_buffer(), and a backend done with a sent message's vector (it
/// went out at once, or was copied) hands it to recycle_buffer() on whatever thread it is. A few vectors of
/// moderate capacity are kept per thread; others are freed.
std::vector<std::byte> take_buffer(std::size_t capacity);
void recycle_buffer(std::vector<std::byte>&& bytes) noexcept;

/// Called just before this process ends at once (std::_Exit: no destructors, no exit handlers) while a backend may
/// be open: removes what would outlive the process in the operating system's namespaces — the named shared-memory
/// regions of libfabric's shm provider (16 MiB each in /dev/shm, which fi_close would have removed): this process's,
/// and dead_peer's when dead_peer >= 0 (a peer found dead, which could not remove its own). Async-signal-safe;
/// nothing when no backend holds such a thing. The mappings of processes still running stay valid.
void before_abrupt_exit(int dead_peer = -1) noexcept;

/// The backend chosen by APGAS_TRANSPORT (local, mpi, ofi) or auto-detected: mpi (else ofi) when the process was
/// started by an MPI launcher and the backend is built in, otherwise local. An invalid or unavailable choice throws
/// apgas::config_error naming the variable, the value and the backends this build has.
/// APGAS_TRANSPORT_SHIM=reorder wraps the backend in a shim that delays and reorders messages, and
/// APGAS_TRANSPORT_SHIM=mute:R one that drops every message rank R sends (tests).
std::unique_ptr<transport> make_from_env();

/// Backends built into this library, e.g. "local mpi ofi".
std::string built_backends();

}  // namespace apgas::transport
#pragma GCC visibility pop
