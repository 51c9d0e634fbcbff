#pragma once
// The state of the runtime across host places, shared by the files that implement it (dist.cpp, dist_finish.cpp,
// dist_wire.cpp, dist_copy.cpp, dist_team.cpp, dist_life.cpp): the message kinds, the records of the distributed
// finish, the tables of dist_state, and the functions these files call in one another (dist_clock.cpp too). Private: never installed.
#include "dist.hpp"
#include "finish.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/detail/spin_mutex.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/transport/transport.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace apgas::detail {

// Message kinds. The values are the wire format: never renumber, only add. A kind byte with traced_kind set carries
// the sender's trace flow id in its last 8 bytes (APGAS_TRACE; dist.cpp adds it in send() and takes it off before
// any handler sees the message).
inline constexpr std::uint8_t traced_kind = 0x80;
enum class msg : std::uint8_t {
  async_activity = 1,  // u64 fid home, u64 serial, u64 0, u32 closure id, payload [, collector trailer]
  at_activity = 2,     // u64 fid home, u64 serial, u64 reply token, u32 closure id, payload [, collector trailer]
  at_reply = 3,        // u64 token, u8 ok, payload (result or exception)
  report = 4,          // u64 serial, u32 n, n * (i32 dst, i64 count), i64 receipts, exceptions,
                       // u8 has partial value [, the value]
  shutdown = 5,        // i32 exit code
  team_contrib = 6,    // u64 team id, u64 seq, u32 run (dist_state::clock_epoch), u64 element signature, i32
                       // sender's team rank, u8 failed (1: the sender's arguments, 2: its root), bytes (one part of a
                       // team operation; a failed one's bytes are the sender's error text)
  bulk_put = 8,        // u64 fid home, u64 serial, u32 tag, u8 target kind, u64 array address or ticket, u64 bytes
  bulk_get = 9,        // u64 fid home, u64 serial, u64 array address, u64 bytes, u64 ticket (answered by a bulk_put)
  hello = 10,          // nothing else: the start-up handshake (transport_for_run), before any other message
  heartbeat = 11,      // nothing else: a sign of life (dist_detect.cpp), sent only to a peer we sent nothing else
  dead_notice = 12,    // i32 place: the sender found that place dead and is stopping (dist_detect.cpp)
  large_message = 13,  // u64 id, u64 bytes, u64 piece bytes, u64 n, n * u32 bulk tag: a message in n bulk pieces
  large_done = 14,     // u64 id: the large message has landed, its sender may free it (dist_large.cpp)
  shutdown_ack = 15,   // nothing else: to place 0, this place has its shutdown message (dist_life.cpp)
  shutdown_go = 16,    // nothing else: from place 0, every place has acknowledged the shut-down
  stop_notice = 17,    // i32 place, string: that place stops the run on purpose (a misuse it cannot throw), saying why
  // Clocks across host places (dist_clock.cpp). A "clock trailer" ends a message: the registrations an activity
  // carries (clock_write_child/clock_write_moved), then u32 its length.
  clocked_async = 20,     // as async_activity, then a clock trailer
  clocked_at = 21,        // as at_activity, then a clock trailer (the caller's registrations, moved there)
  clocked_at_reply = 22,  // as at_reply, then a clock trailer (the registrations, moved back)
  clock_report = 23,      // u32 run (dist_state::clock_epoch), u64 seq, u64 clock, i32 phase (tag), u32 n,
                          // n * (i32 place, i64 registrations, i64 arrivals)
  clock_phase = 24,       // u32 run, u64 clock, i32 phase: the home's phase
};

// An activity message whose finish has a collecting finish in its chain (finish_state::collecting) has this bit set
// in its serial and ends with a collector trailer: u32 collect_ops registry id, the reducer's bytes, u64 their length.
inline constexpr std::uint64_t collect_flag = std::uint64_t{1} << 63;

// The home record of a finish with remote activities. While some balance entry is nonzero the record holds one
// token in the finish's local count (the "remote token"), so the finish's ordinary count alone decides
// termination: whoever drops the last token wakes the waiter, exactly once. A token is taken under the record's
// lock (when the balance leaves all-zero) and dropped *after* unlocking (when it returns to all-zero): the waiter
// may delete the record the moment the count reaches 0, so nobody may still be inside its lock then.
struct dist_home {
  std::uint64_t serial = 0;
  spin_mutex mutex;
  std::vector<long> balance;  // per host place: activities sent there minus activities received there
  long unbalanced = 0;        // number of nonzero entries of balance

  void add(int place, long delta) {
    long& b = balance[static_cast<std::size_t>(place)];
    const bool was = b != 0;
    b += delta;
    unbalanced += (b != 0) - (was ? 1 : 0);
  }
};

// Under h.mutex: apply `change` to the balance; take the remote token if the balance left all-zero. Returns true
// if it returned to all-zero: the caller then drops the token (fs.complete()) after unlocking.
template <class Change>
bool rebalance_locked(finish_state& fs, dist_home& h, Change change) {
  const bool before = h.unbalanced != 0;
  change();
  const bool after = h.unbalanced != 0;
  if (!before && after) fs.spawned();
  return before && !after;
}

struct proxy final : finish_state {
  proxy(std::uint64_t h, std::uint64_t s) : finish_state(nullptr), home(h), serial(s) { make_proxy(); }
  // One per arriving activity of a remote finish, in the common case: from the per-thread task cache, not the heap.
  static void* operator new(std::size_t n) { return task::operator new(n); }
  static void operator delete(void* p, std::size_t n) noexcept { task::operator delete(p, n); }
  std::uint64_t home;
  std::uint64_t serial;
  std::map<int, long> sends;
  long receipts = 0;
  // When the finish (or one of its ancestors) collects: the collector of the activity messages (collect_flag), and
  // this place's partial value, made at the first offer and sent with the report (dist_finish.cpp).
  const collect_ops* cops = nullptr;
  std::uint32_t cops_id = 0;
  std::vector<std::byte> creducer;
  void* partial = nullptr;
  ~proxy() {
    if (partial != nullptr) cops->destroy(partial);
  }
};
static_assert(sizeof(proxy) <= 256, "a proxy must fit the task cache's largest class (no heap allocation per message)");

struct pending_at {
  completion done;
  bool ok = false;
  std::vector<std::byte> reply;
  std::vector<std::byte> clocks;  // the clock trailer of a clocked_at_reply
};

struct team_slot {
  std::vector<std::vector<std::byte>> parts;  // contributions by team rank
  std::vector<std::uint8_t> failed;           // by team rank: the part is the sender's error text (1, 2: its root)
  std::vector<std::int32_t> sigs;             // by team rank: the operation's signature in the part (-1: none yet;
                                              // -2: a part of a member whose root was refused, which has none)
  std::vector<std::uint64_t> elems;           // by team rank: the sender's element signature
  int arrived = 0;
  int expected = 0;       // what the waiter waits for: that many parts, or
  int from = -1;          // if not -1, the part of this team rank only (the others' are the refused roots' and dropped)
  std::int32_t sig = -1;  // the waiter's signature: a part with another one wakes it at once (it then throws)
  completion* waiter = nullptr;
  // For the report of a long wait (report_team_stalls): the waiter's operation (a string literal), the team's member
  // places by team rank (null: the world team), when it began to wait, and whether it was reported.
  const char* what = nullptr;
  std::shared_ptr<const std::vector<int>> members;
  std::chrono::steady_clock::time_point since{};
  bool reported = false;
};

// Where this place is in a team's operations (they run one after another at each member, in the same order). The
// record of a sub-team goes when its last copy at this place does (team::split).
struct team_progress {
  std::uint64_t begun = 0;     // operations begun here
  std::uint64_t done = 0;      // the last one whose parts this place has taken, or in which it receives none
  std::vector<std::uint64_t> refused;  // operations refused (a member at another one, or this place's root): late
                                       // parts are dropped
};

// Clock reports from one place to this one, applied in the order they were made (their sequence numbers): the
// counting of clocks needs it (a report that drops a registration must not overtake the one that registered its
// child), and the transport keeps no order.
struct clock_report_in {
  std::uint64_t id = 0;
  std::int32_t tag = 0;
  std::vector<std::pair<std::int32_t, std::pair<std::int64_t, std::int64_t>>> deltas;  // place, (reg, arr)
};
struct clock_inbox {
  spin_mutex mutex;
  std::uint64_t expected = 0;
  std::map<std::uint64_t, clock_report_in> held;  // arrived early
};

void note_heard(int src) noexcept;  // dist_detect.cpp

struct large_in;  // a large message being received (dist_large.cpp)

struct dist_state final : transport::handler {
  transport::transport* tp = nullptr;
  int rank = 0;
  int size = 1;
  int hook = -1;

  spin_mutex mutex;  // guards every table below (short sections, taken on every message)
  // The tables' nodes come from this pool (guarded by the same mutex): no heap allocation per message once warm.
  std::pmr::unsynchronized_pool_resource pool;
  std::uint64_t next_serial = 1;
  std::pmr::unordered_map<std::uint64_t, finish_state*> homes{&pool};  // serial -> finish homed here
  std::pmr::map<std::pair<std::uint64_t, std::uint64_t>, proxy*> proxies{&pool};
  static constexpr std::size_t max_spare_homes = 64;
  std::vector<dist_home*> spare_homes;  // home records of ended finishes, reused (all-zero balance, sized)
  std::uint64_t next_token = 1;
  std::pmr::unordered_map<std::uint64_t, pending_at*> ats{&pool};
  std::pmr::map<std::uint64_t, team_progress> team_seqs{&pool};  // team id -> where this place is in it
  std::uint64_t team_splits = 0;
  int team_stalls_reported = 0;  // long team waits reported at this place (report_team_stalls)
  bool held_exceptions_reported = false;  // report_team_stalls printed the exceptions its finishes hold
  std::pmr::map<std::pair<std::uint64_t, std::uint64_t>, team_slot> team{&pool};  // (team id, operation) -> parts
  std::uint64_t next_ticket = 1;
  std::pmr::unordered_map<std::uint64_t, std::span<std::byte>> tickets{&pool};  // where answers to our bulk_gets go

  std::atomic<int> exit_code{-1};  // set by the shutdown message
  // The shut-down handshake, made while the failure detector watches (dist_life.cpp): the acknowledgements place 0
  // has, and place 0's go at the others.
  bool watched = false;  // the failure detector runs (every place agrees: place 0's heartbeat timeout decides)
  int handshake_s = 0;   // how long the handshake's waits last: APGAS_CONNECT_TIMEOUT + APGAS_HEARTBEAT_TIMEOUT
                         // (longer than the detector's own bounds: a stuck poll, a silent peer is named first)
  std::atomic<int> shutdown_acks{0};
  std::unique_ptr<std::atomic<std::uint8_t>[]> acked;  // place 0: by place, its acknowledgement came (dist_start)
  std::atomic<bool> shutdown_go{false};

  // Large messages (dist_large.cpp). piece_bytes: messages larger than this go by rendezvous in pieces of this size.
  std::size_t piece_bytes = 0;
  // Ids are unique in the process, not per run: an acknowledgement of run N's message may still be queued when run
  // N + 1 starts (the final barrier does not drain small messages), and must not free run N + 1's message of the same
  // number. first_large: this run's first id; an acknowledgement of an earlier id is ignored.
  std::uint64_t first_large = 0;
  std::map<std::uint64_t, std::vector<std::byte>> large_out;  // sent, kept until the receiver's large_done
  std::vector<large_in*> large_ready;                          // landed here, to be delivered by the poll hook
  std::atomic<std::size_t> large_ready_count{0};

  // Clocks (dist_clock.cpp): per peer, the next sequence number of a report to it, and the inbox of its reports.
  std::unique_ptr<std::atomic<std::uint64_t>[]> clock_seq_out;
  std::unique_ptr<clock_inbox[]> clock_in;
  // This process's run number (every process makes the same sequence of runs): clock reports and announcements
  // carry it, and team parts. Those are the messages nobody may be waiting for, so one can outlive its run (a delayed
  // drop report, a part of a refused team operation) and, on a transport whose next run reuses the channel, arrive
  // in the next run: there it is stale and is dropped.
  std::uint32_t clock_epoch = 0;

  void on_message(int src, std::span<const std::byte> bytes) override;
  void on_traffic(int src) noexcept override { note_heard(src); }

  dist_state() { spare_homes.reserve(max_spare_homes); }  // home_done keeps records without allocating
  dist_state(const dist_state&) = delete;
  dist_state& operator=(const dist_state&) = delete;
  ~dist_state() {
    for (dist_home* h : spare_homes) delete h;
  }
};

// The state of this process's run across host places: set by dist_start, deleted by dist_finalize (dist_life.cpp).
extern dist_state* g_dist;

// ---- sending (dist.cpp) ----
void send(int dst, writer&& w);
writer message_writer(std::size_t reserve);
/// Messages have no size limit but memory: readers over them take this limit.
inline constexpr std::size_t no_message_limit = SIZE_MAX;

// ---- large messages (dist_large.cpp) ----
/// Hands an encoded message to the transport, by rendezvous in pieces when it is larger than piece_bytes.
/// The next large message id of this process (never reused, across runs).
std::uint64_t next_large_id() noexcept;
void transmit(int dst, std::vector<std::byte> bytes);
void deliver_large(int src, reader& r);
void deliver_large_done(reader& r);
/// Delivers the large messages whose pieces have all landed (the poll hook, after the transport's poll).
void deliver_landed_large(dist_state& d);
/// While a large message is delivered: `bytes` (a prefix of it) is taken over into `into` without a copy.
bool take_whole_message(std::span<const std::byte> bytes, std::vector<std::byte>& into) noexcept;

struct fid {
  std::uint64_t home;
  std::uint64_t serial;
};

// ---- distributed finish (dist_finish.cpp) ----
fid count_send(finish_state& fs, int dst);
/// `collector`: the collector trailer of the activity message (empty if none).
finish_state& count_receipt(fid f, std::span<const std::byte> collector = {});
/// Append the collector trailer for an activity governed by `fs` if its chain collects; returns whether it did.
bool append_collector(finish_state& fs, writer& w);
void deliver_report(int src, reader& r);

// ---- exceptions on the wire (dist_wire.cpp) ----
void encode_exception(writer& w, const std::exception_ptr& e);
std::exception_ptr decode_exception(reader& r);

// ---- failure detector (dist_detect.cpp) ----
/// Who a place is: its host (a hash of the host name and boot id), its process id and the process's start time.
struct peer_identity {
  std::uint64_t host;
  std::int64_t pid;
  std::uint64_t start;
};
peer_identity my_identity();
void set_peer_identities(std::vector<peer_identity> peers);  // every place's, by rank (start-up)
/// A peer on this host whose process has ended (why says so), or -1.
int dead_local_peer(int rank, std::string& why);
// timeout_s 0: off; stuck_s: how long one poll of the transport may last (APGAS_CONNECT_TIMEOUT)
void detector_start(dist_state& d, int timeout_s, int stuck_s);
void detector_stop();  // stops the thread; the record stays until detector_free
/// From now on silence is no death (a place that acknowledged the shut-down: place 0, and the places that have had
/// its go, go silent one by one); ended processes still are, and notices.
void detector_ignore_silence();
/// Stops this place (exit code 3) naming `dead` and why, and tells the others (dist_detect.cpp's declare_dead).
[[noreturn]] void declare_place_dead(int dead, const std::string& why);
void detector_free();  // after the workers are gone (dist_finalize)
void note_heard(int src) noexcept;  // any traffic from src
void note_sent(int dst) noexcept;   // any message to dst
void note_polled(bool drained) noexcept;  // a poll of the transport has returned (drained: it had nothing to do)
void note_poll_start() noexcept;    // a poll of the transport begins (one poller at a time: the hooks' lock)
[[noreturn]] void dead_place_reported(int src, int dead);  // a dead_notice arrived: this place stops too
/// Stops the run from this place (exit code 3): prints "apgas: place R: <why>; stopping the run (exit code 3)" and
/// tells the others why (a stop_notice), so that they say so rather than take this place for dead when it ends.
[[noreturn]] void stop_the_run(const std::string& why, const char* dump);
[[noreturn]] void stop_reported(int by, const std::string& why);  // a stop_notice arrived: this place stops too
// The transport failed under this place (`what` says at what, `e` how): the place stops with exit code 3. A
// transport::peer_error is that peer's death (declare_dead: the others are told, so every place names the same one).
[[noreturn]] void stop_on_transport_failure(const std::exception& e, const std::string& what);

// ---- the other message handlers, called by dist_state::on_message (dist.cpp) ----
void deliver_put(int src, reader& r);                                     // dist_copy.cpp
/// The bytes [addr, addr + n) of a live remote array of this place, or illegal_operation_exception (arrays.cpp).
std::span<std::byte> checked_array_range(std::uint64_t addr, std::uint64_t n, std::uint32_t serial);
void deliver_get(int src, reader& r);                                     // dist_copy.cpp
void deliver_team(reader& r, int src, std::span<const std::byte> bytes);  // dist_team.cpp
// dist_team.cpp: names, once per operation, the members a team operation has waited for longer than after_s (the
// detector calls it about once a second); and, at the end of a run, the parts of operations no activity here took.
void report_team_stalls(double after_s);
void report_untaken_team_parts();
void deliver_clock_report(int src, reader& r);                            // dist_clock.cpp
void clock_dist_start(dist_state& d);                                     // dist_clock.cpp
void deliver_clock_phase(reader& r);                                      // dist_clock.cpp

// ---- clock trailers (dist_clock.cpp) ----
/// Append the length of the trailer that started at byte `start` of w.
void end_clock_trailer(writer& w, std::size_t start);
/// Split a message into its body and its clock trailer (serialization_error if malformed).
std::pair<std::span<const std::byte>, std::span<const std::byte>> split_clock_trailer(std::span<const std::byte> m);

}  // namespace apgas::detail
