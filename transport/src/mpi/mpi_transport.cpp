// The Open MPI backend.
//
// Thread level: MPI_THREAD_SERIALIZED. Every MPI call is made under one lock (mpi_), so at most one thread is inside
// MPI at a time; workers never block on it: send() starts the message itself (MPI_Isend) when the lock is free and
// otherwise queues it for the next poll, and poll() returns at once when another thread is polling. Progress is
// driven by idle workers through the runtime's progress hook (poll()): it starts queued sends, completes finished
// ones, receives small messages (<= 16 KiB; those over 4032 bytes sent in pieces under the eager limit) into a ring
// of pre-posted buffers (MPI_Test on the ring's head), delivered from there without a copy, and larger ones with
// MPI_Improbe + MPI_Imrecv into 16-byte aligned buffers of the probed size, delivered once received (in the order
// they were probed): no MPI call blocks for a message's transfer while holding the lock, which every send and poll
// of the process needs. One thread polls at a time (polling_).
// All active messages use two tags on a duplicate of MPI_COMM_WORLD, so the application may use MPI itself too.
#include "../mpi_bootstrap.hpp"
#include "../transports.hpp"

#include <apgas/detail/spin_mutex.hpp>
#include <apgas/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace apgas::transport {
namespace {

constexpr int am_tag = 7001;        // messages of at most small_bytes: received into pre-posted buffers
constexpr int am_large_tag = 7002;  // larger ones: probed (MPI_Improbe) and received at their size (MPI_Imrecv)
constexpr std::size_t small_bytes = 16 * 1024;
constexpr int posted = 16;
// Medium messages (frag_bytes .. small_bytes) go as consecutive pieces of frag_bytes and a last piece of the rest
// (0 to frag_bytes - 1 bytes), each under Open MPI's shared-memory eager limit (4096 bytes with its headers; 4040
// of payload in Open MPI 4.1), where a larger message would take the rendezvous protocol with a single-copy system
// call (process_vm_readv) per message: several microseconds on a VM. No header: a small message of exactly
// frag_bytes is a piece with more to come (a whole message never has that size on the wire: it would be cut into
// one piece and an empty last one). The pieces of one message leave back to back under mpi_, and MPI keeps the
// order of messages from one source with one tag, so each source has at most one message in reassembly.
constexpr std::size_t frag_bytes = 4032;
constexpr int max_pieces = static_cast<int>(small_bytes / frag_bytes) + 1;
// Bulk transfers use the tags from bulk_tag_base up to the communicator's MPI_TAG_UB (at least 32767, Open MPI's is
// 2^31 - 1), counted per peer: a transfer's tag is unique among those in flight between two places as long as fewer
// than bulk_tags_ (tag_ub - 8000 + 1) of them are (24000 tags shared by all peers once: a copy's data landed in
// another's buffer after 24000 transfers, silently).
constexpr int bulk_tag_base = 8000;

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<std::size_t>(len));
}

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw transport_error(std::string("apgas transport mpi: ") + call + " failed: " + mpi_error_string(rc));
}

class mpi_transport final : public transport {
 public:
  mpi_transport() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized) {
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
    } else {
      check(MPI_Query_thread(&provided), "MPI_Query_thread");  // the application initialised MPI itself
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      throw transport_error("apgas transport mpi: MPI runs at thread level " + std::to_string(provided) +
                            ", apgas needs MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) +
                            "): initialise MPI with MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...) or let apgas do it");
    }
    {
      // The first exchange, on MPI_COMM_WORLD, returns its errors (a peer that started another transport); the
      // application's handler of MPI_COMM_WORLD is given back after it (apgas works on its duplicate, comm_).
      struct world_errors_return {
        MPI_Errhandler app = MPI_ERRHANDLER_NULL;
        world_errors_return() {
          MPI_Comm_get_errhandler(MPI_COMM_WORLD, &app);
          MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        }
        ~world_errors_return() {
          if (app == MPI_ERRHANDLER_NULL) return;
          MPI_Comm_set_errhandler(MPI_COMM_WORLD, app);
          MPI_Errhandler_free(&app);
        }
      } guard;
      check_same_transport("mpi");
      check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    int* tag_ub = nullptr;
    int has_ub = 0;
    check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &has_ub), "MPI_Comm_get_attr(MPI_TAG_UB)");
    bulk_tags_ = static_cast<std::uint32_t>((has_ub != 0 && tag_ub != nullptr ? *tag_ub : 32767) - bulk_tag_base + 1);
    next_tag_ = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(size_));
    partial_.resize(static_cast<std::size_t>(size_));
    small_bufs_.resize(posted);
    small_reqs_.assign(posted, MPI_REQUEST_NULL);
    for (int i = 0; i < posted; ++i) {
      small_bufs_[static_cast<std::size_t>(i)] = aligned_buffer(small_bytes);
      post_small(i);
    }
  }

  ~mpi_transport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // the application initialised and finalised MPI itself
    for (MPI_Request& r : small_reqs_) {
      if (r == MPI_REQUEST_NULL) continue;  // taken by the last poll, not posted again
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  const char* name() const noexcept override { return "mpi"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_message() const noexcept override { return std::size_t{1} << 30; }

  void send(int dst, std::vector<std::byte> bytes) override {
    check_rank(dst, "send to");
    check_size(bytes.size(), "message");
    if (mpi_.try_lock()) {  // the common case: straight out, not through the queue (no ordering is promised)
      std::lock_guard lock(mpi_, std::adopt_lock);
      start_send_locked(dst, std::move(bytes));
      flush_locked();  // whatever others queued meanwhile (one atomic load when nothing)
      return;
    }
    {
      std::lock_guard lock(out_mutex_);
      outbox_.push_back({dst, std::move(bytes)});
      has_out_.store(true, std::memory_order_release);
    }
    if (mpi_.try_lock()) {  // the holder may have flushed before we queued: do not leave the message behind
      std::lock_guard lock(mpi_, std::adopt_lock);
      flush_locked();
    }
  }

  bool poll(handler& h) override {
    // One poller at a time for the whole poll, delivery included: the receive ring and the scratch vectors below
    // belong to it. mpi_ is held only around the MPI calls, so the handler's sends start at once.
    drained_.store(false, std::memory_order_relaxed);  // (until this poll has looked)
    if (polling_.test_and_set(std::memory_order_acquire)) return false;
    struct unflag {
      std::atomic_flag& f;
      ~unflag() { f.clear(std::memory_order_release); }
    } release_poller{polling_};
    if (!mpi_.try_lock()) return false;
    bool took = false;  // a small message was taken this poll: in buffer head_, its size and source in got_
    bool progress = false;
    {
      std::lock_guard lock(mpi_, std::adopt_lock);
      repost_locked();  // the buffer the last poll delivered from
      progress |= flush_locked();
      progress |= complete_sends_locked();
      if (!bulk_in_.empty()) complete_bulk_locked(landed_);
      // Small messages. Every pre-posted receive has the same source (any), tag and communicator, so messages match
      // them in the order they were posted: the ring's head is the next one to complete. MPI_Test runs a pass of
      // the progress engine when the head is not complete and then looks again, so a message that pass lands is
      // taken now (MPI_Testsome does not look again: the message would wait for the next poll). One message per
      // poll: testing the next one would cost another pass before this one is delivered (but the pieces of a
      // medium message are taken as they come).
      for (;;) {
        MPI_Status st;
        int done = 0;
        check(MPI_Test(&small_reqs_[head_], &done, &st), "MPI_Test");
        if (!done) break;
        int n = 0;
        check(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count");
        if (static_cast<std::size_t>(n) != frag_bytes) {
          got_ = {st.MPI_SOURCE, n};
          took = true;
          break;
        }
        // A piece of a medium message, more to come (and coming now): keep it, post its buffer again, look again.
        append_piece(st.MPI_SOURCE, small_bufs_[head_].span().first(frag_bytes));
        repost_head_locked();
        progress = true;
      }
      // Large messages, at their size. A probe costs a pass of MPI's progress engine, as much as the test above,
      // and large messages are rare: probe on every 16th poll, and on every poll while they keep coming (a large
      // message waits at most 15 polls more, a few microseconds, under its own transfer time).
      // A poll that took a small message leaves its probe to the next one (once): the message is delivered sooner.
      probe_due_ = probe_due_ || large_seen_ || (++polls_ & 15u) == 0;
      const bool probe = probe_due_ && (!took || probe_put_off_);
      probe_put_off_ = probe_due_ && !probe;
      if (probe) probe_due_ = false;
      large_seen_ = false;
      if (!held_.empty()) {  // taken by a barrier: delivered now
        for (auto& m : held_) large_.push_back(std::move(m));
        held_.clear();
      }
      if (probe) large_seen_ = start_large_locked(16);
      if (!large_in_.empty()) complete_large_locked(large_);
      progress |= !large_in_.empty();  // a transfer under way: keep polling
    }
    // A whole message is delivered straight from the receive buffer (no copy), the last piece of a medium one
    // from its reassembly buffer; the receive buffer is posted again by the next poll.
    if (took) {
      reposting_ = true;
      const std::span<const std::byte> m = small_bufs_[head_].span().first(static_cast<std::size_t>(got_.n));
      partial& p = partial_[static_cast<std::size_t>(got_.src)];
      if (p.filled == 0) {
        h.on_message(got_.src, m);
      } else if (append_piece(got_.src, m)) {
        const std::size_t total = std::exchange(p.filled, 0);
        h.on_message(got_.src, p.buf.span().first(total));
      }
    }
    for (auto& [src, buf] : large_) h.on_message(src, buf.span());
    for (auto& b : landed_) b.done(b.ctx);
    const bool any = took || !large_.empty() || !landed_.empty();
    drained_.store(!took && large_.empty(), std::memory_order_relaxed);  // (one message a poll: more may wait)
    large_.clear();
    landed_.clear();
    return progress || any;
  }

  bool drained() const noexcept override { return drained_.load(std::memory_order_relaxed); }

  std::uint32_t next_bulk_tag(int dst) noexcept override {
    // 64-bit: a 32-bit count taken modulo bulk_tags_ jumped back 16000 tags when it wrapped (2^32 mod (2^31 - 8000)).
    return static_cast<std::uint32_t>(next_tag_[static_cast<std::size_t>(dst)].fetch_add(1, std::memory_order_relaxed) %
                                      bulk_tags_);
  }

  // The payload is sent from the caller's memory (MPI_Isend, no copy); MPI's single-copy shared-memory path or the
  // network's RDMA puts it straight into the memory the receiver posted.
  void send_bulk(int dst, std::uint32_t tag, std::span<const std::byte> payload) override {
    check_rank(dst, "bulk transfer to");
    check_size(payload.size(), "bulk transfer");
    {
      std::lock_guard lock(out_mutex_);
      bulk_out_.push_back({dst, static_cast<int>(bulk_tag_base + tag % bulk_tags_), payload});
      has_out_.store(true, std::memory_order_release);
    }
    if (mpi_.try_lock()) {
      std::lock_guard lock(mpi_, std::adopt_lock);
      flush_locked();
    }
  }

  void recv_bulk(int src, std::uint32_t tag, std::span<std::byte> target, done_fn done, void* ctx) override {
    check_rank(src, "bulk transfer from");
    check_size(target.size(), "bulk transfer");
    {
      std::lock_guard lock(out_mutex_);
      bulk_in_pending_.push_back({src, static_cast<int>(bulk_tag_base + tag % bulk_tags_), target, done, ctx,
                                  MPI_REQUEST_NULL});
      has_out_.store(true, std::memory_order_release);
    }
    if (mpi_.try_lock()) {
      std::lock_guard lock(mpi_, std::adopt_lock);
      flush_locked();
    }
  }

  // Our large sends complete only when their receiver takes them (rendezvous), and a peer's only when we take them:
  // so until ours have completed and every place has arrived, take the large messages that come (held for the next
  // poll, if there is one: at shut-down nothing awaits them; a blocking wait here hung the final barrier when a
  // message outside any finish was still unprobed at its receiver). Small ones land in the pre-posted receives.
  void barrier() override {
    std::lock_guard lock(mpi_);
    flush_locked();
    MPI_Request bar = MPI_REQUEST_NULL;
    for (bool arrived = false;;) {
      complete_sends_locked();
      if (!arrived && in_flight_.empty()) {
        check(MPI_Ibarrier(comm_, &bar), "MPI_Ibarrier");
        arrived = true;
      }
      if (arrived) {  // (a completed request is null: testing it again says done at once)
        int done = 0;
        check(MPI_Test(&bar, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done && large_in_.empty()) return;  // every sender's send completed: so do our receives, soon
      }
      start_large_locked(16);
      complete_large_locked(held_);
    }
  }

  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    std::lock_guard lock(mpi_);
    std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size_));
    check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                        static_cast<int>(mine.size()), MPI_BYTE, comm_),
          "MPI_Allgather");
    return all;
  }

 private:
  struct outgoing {
    int dst;
    std::vector<std::byte> bytes;
  };
  struct in_flight {  // a message (all its pieces) or a bulk payload, until every request completed
    explicit in_flight(std::vector<std::byte> b) : bytes(std::move(b)) { reqs.fill(MPI_REQUEST_NULL); }
    std::array<MPI_Request, max_pieces> reqs;  // the first nreq were started
    int nreq = 0;
    std::vector<std::byte> bytes;  // empty for a bulk payload (the caller's memory)
  };
  struct bulk_send {
    int dst;
    int tag;
    std::span<const std::byte> payload;
  };
  struct bulk_recv {
    int src;
    int tag;
    std::span<std::byte> target;
    done_fn done;
    void* ctx;
    MPI_Request req;
  };

  // Checked before anything is queued: a bad one found by MPI inside flush_locked would leave the queue broken.
  void check_size(std::size_t n, const char* what) const {
    if (n > max_message()) {
      throw transport_error(std::string("apgas transport mpi: a ") + what + " of " + std::to_string(n) +
                            " bytes exceeds the limit of " + std::to_string(max_message()));
    }
  }
  void check_rank(int r, const char* what) const {
    if (r < 0 || r >= size_) {
      throw transport_error(std::string("apgas transport mpi: ") + what + " rank " + std::to_string(r) + " of " +
                            std::to_string(size_));
    }
  }

  bool flush_locked() {
    if (!has_out_.load(std::memory_order_acquire)) return false;
    std::vector<outgoing>& batch = batch_;
    std::vector<bulk_send>& sends = sends_;
    std::vector<bulk_recv>& recvs = recvs_;
    {
      std::lock_guard lock(out_mutex_);
      batch.swap(outbox_);
      sends.swap(bulk_out_);
      recvs.swap(bulk_in_pending_);
      has_out_.store(false, std::memory_order_relaxed);
    }
    for (auto& r : recvs) {
      bulk_in_.push_back(r);
      bulk_recv& b = bulk_in_.back();
      check(MPI_Irecv(b.target.data(), static_cast<int>(b.target.size()), MPI_BYTE, b.src, b.tag, comm_, &b.req),
            "MPI_Irecv");
    }
    for (auto& o : sends) {
      in_flight_.emplace_back(std::vector<std::byte>{});
      try {
        isend_locked(in_flight_.back(), o.dst, o.tag, o.payload.data(), o.payload.size());
      } catch (...) {
        in_flight_.pop_back();
        throw;
      }
    }
    for (auto& o : batch) start_send_locked(o.dst, std::move(o.bytes));
    const bool any = !batch.empty() || !sends.empty() || !recvs.empty();
    batch.clear();
    sends.clear();
    recvs.clear();
    return any;
  }

  void start_send_locked(int dst, std::vector<std::byte> bytes) {
    const std::size_t n = bytes.size();
    in_flight& f = in_flight_.emplace_back(std::move(bytes));
    const std::byte* data = f.bytes.data();
    try {
      if (n >= frag_bytes && n <= small_bytes) {  // medium: straight from the message, piece by piece
        std::size_t off = 0;
        for (; n - off >= frag_bytes; off += frag_bytes) isend_locked(f, dst, am_tag, data + off, frag_bytes);
        isend_locked(f, dst, am_tag, data + off, n - off);  // the last piece, possibly empty
      } else {
        isend_locked(f, dst, n <= small_bytes ? am_tag : am_large_tag, data, n);
      }
    } catch (const transport_error& e) {
      if (f.nreq == 0) {  // nothing left: the caller gets the error, the transport is as before
        in_flight_.pop_back();
        throw;
      }
      // Some pieces left and the rest cannot follow: the receiver would glue the next message onto them.
      std::fprintf(stderr, "apgas: place %d: a message to place %d broke off after %d pieces: %s\n", rank_, dst,
                   f.nreq, e.what());
      std::fflush(stderr);
      before_abrupt_exit();
      std::_Exit(3);
    }
    // Push it out now: a small message may sit in MPI's queue until the progress engine runs again.
    int done = 0;
    check(MPI_Testall(f.nreq, f.reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) {
      recycle_buffer(std::move(f.bytes));
      in_flight_.pop_back();
    }
  }

  // Counts the request in f only once it was started.
  void isend_locked(in_flight& f, int dst, int tag, const std::byte* p, std::size_t n) {
    MPI_Request& r = f.reqs[static_cast<std::size_t>(f.nreq)];
    check(MPI_Isend(p, static_cast<int>(n), MPI_BYTE, dst, tag, comm_, &r), "MPI_Isend");
    ++f.nreq;
  }

  // At most this many requests (or groups of a message's pieces) are tested per poll, from where the last poll
  // stopped: each test of a pending request runs a pass of MPI's progress engine, and testing every one of 40000
  // copies in flight at every poll made their time grow with the square of their number.
  static constexpr std::size_t tests_per_poll = 64;

  // Completed bulk receives, whose done callbacks the caller runs after releasing the lock.
  void complete_bulk_locked(std::vector<bulk_recv>& done) {
    for (std::size_t k = 0; k < tests_per_poll && !bulk_in_.empty(); ++k) {
      if (recv_cursor_ >= bulk_in_.size()) recv_cursor_ = 0;
      bulk_recv& b = bulk_in_[recv_cursor_];
      int flag = 0;
      check(MPI_Test(&b.req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag) {
        done.push_back(b);
        if (recv_cursor_ + 1 != bulk_in_.size()) b = bulk_in_.back();  // order does not matter
        bulk_in_.pop_back();
      } else {
        ++recv_cursor_;
      }
    }
  }

  bool complete_sends_locked() {
    bool any = false;
    for (std::size_t k = 0; k < tests_per_poll && !in_flight_.empty(); ++k) {
      if (send_cursor_ >= in_flight_.size()) send_cursor_ = 0;
      in_flight& f = in_flight_[send_cursor_];
      int done = 0;
      check(MPI_Testall(f.nreq, f.reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) {
        recycle_buffer(std::move(f.bytes));
        if (send_cursor_ + 1 != in_flight_.size()) f = std::move(in_flight_.back());  // order does not matter
        in_flight_.pop_back();
        any = true;
      } else {
        ++send_cursor_;
      }
    }
    return any;
  }

  /// Starts the receives of up to `max` probed large messages (into large_in_); whether any came. A matched
  /// message is received without blocking (MPI_Imrecv): the transfer of a large one (up to max_message()) takes
  /// as long as its sender's side needs, and MPI_Mrecv held mpi_ all that time, so no worker of this process could
  /// start a send or take a message meanwhile.
  bool start_large_locked(int max) {
    bool any = false;
    for (int k = 0; k < max; ++k) {
      int flag = 0;
      MPI_Message msg;
      MPI_Status st;
      check(MPI_Improbe(MPI_ANY_SOURCE, am_large_tag, comm_, &flag, &msg, &st), "MPI_Improbe");
      if (!flag) break;
      int n = 0;
      check(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count");
      large_recv& r = large_in_.emplace_back(large_recv{st.MPI_SOURCE, aligned_buffer(static_cast<std::size_t>(n)),
                                                        MPI_REQUEST_NULL});
      // (a failed start leaves the message matched and unreceived: the transport is broken, as after a failed
      // MPI_Mrecv; the entry goes, its request null)
      const int rc = MPI_Imrecv(r.buf.data(), n, MPI_BYTE, &msg, &r.req);
      if (rc != MPI_SUCCESS) large_in_.pop_back();
      check(rc, "MPI_Imrecv");
      any = true;
    }
    return any;
  }
  /// The received large messages at the front of large_in_ into `into`, in the order they were probed (which keeps
  /// MPI's order of one source's messages).
  void complete_large_locked(std::vector<std::pair<int, aligned_buffer>>& into) {
    while (!large_in_.empty()) {
      int done = 0;
      check(MPI_Test(&large_in_.front().req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return;
      into.emplace_back(large_in_.front().src, std::move(large_in_.front().buf));
      large_in_.pop_front();
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_ = false;
  detail::spin_mutex mpi_;       // every MPI call; try-locked by every idle poll

  detail::spin_mutex out_mutex_;
  std::vector<outgoing> outbox_;  // guarded by out_mutex_
  std::atomic<bool> has_out_{false};  // something is queued in outbox_, bulk_out_ or bulk_in_pending_
  std::vector<outgoing> batch_;   // flush_locked's scratch (guarded by mpi_)
  std::vector<bulk_send> sends_;
  std::vector<bulk_recv> recvs_;
  // Started sends, until complete. A vector (its capacity stays: no allocation per message once warm); moving an
  // entry moves request handles and the vector's pointer, never the bytes MPI reads.
  std::vector<in_flight> in_flight_;
  std::vector<bulk_send> bulk_out_;        // guarded by out_mutex_
  std::vector<bulk_recv> bulk_in_pending_; // guarded by out_mutex_
  std::deque<bulk_recv> bulk_in_;         // posted; guarded by mpi_
  std::size_t recv_cursor_ = 0, send_cursor_ = 0;  // where complete_bulk_locked / complete_sends_locked go on
  std::unique_ptr<std::atomic<std::uint64_t>[]> next_tag_;  // per peer: its transfers so far
  std::uint32_t bulk_tags_ = 32767 - bulk_tag_base + 1;       // tags from bulk_tag_base to MPI_TAG_UB
  std::vector<aligned_buffer> small_bufs_;  // pre-posted receive buffers (guarded by mpi_)
  std::vector<MPI_Request> small_reqs_;
  // The receive ring: receives head_, head_ + 1, ... (mod posted) in the order they were posted, which is the order
  // in which messages match them (a buffer is posted again only as the head, and the head then moves on). While
  // reposting_, the head's buffer was delivered from by the last poll and is not posted yet. Owned by the poller
  // (polling_); MPI calls on them under mpi_ too.
  std::atomic_flag polling_ = ATOMIC_FLAG_INIT;
  std::atomic<bool> drained_{false};  // the last poll looked and took no message (drained())
  std::size_t head_ = 0;
  bool reposting_ = false;
  struct {
    int src;
    int n;
  } got_{};
  struct partial {
    aligned_buffer buf;  // small_bytes, made on the first medium message from this source
    std::size_t filled = 0;
  };
  std::vector<partial> partial_;  // by source; the poller's
  struct large_recv {  // a probed large message being received (its buffer stays where it is until done)
    int src;
    aligned_buffer buf;
    MPI_Request req;
  };
  std::deque<large_recv> large_in_;  // under mpi_: started, in the order probed
  std::vector<std::pair<int, aligned_buffer>> large_;  // the poller's scratch
  std::vector<std::pair<int, aligned_buffer>> held_;   // (under mpi_) taken by barrier(), for the next poll
  std::vector<bulk_recv> landed_;
  unsigned polls_ = 0;       // under mpi_
  bool large_seen_ = false;  // under mpi_: the last probe found a large message
  bool probe_due_ = false;     // under mpi_: a probe is due
  bool probe_put_off_ = false; // under mpi_: the due probe was put off once already

  // Appends a piece of a medium message from src to its reassembly buffer. A message that would grow beyond
  // small_bytes (only a peer that is not this program sends one) is reported and dropped: false.
  bool append_piece(int src, std::span<const std::byte> piece) {
    partial& p = partial_[static_cast<std::size_t>(src)];
    if (p.filled + piece.size() > small_bytes) {
      std::fprintf(stderr, "apgas: place %d dropped a message from place %d: its pieces exceed %zu bytes\n", rank_,
                   src, small_bytes);
      p.filled = 0;
      return false;
    }
    if (p.buf.data() == nullptr) p.buf = aligned_buffer(small_bytes);
    if (!piece.empty()) std::memcpy(p.buf.data() + p.filled, piece.data(), piece.size());
    p.filled += piece.size();
    return true;
  }

  void repost_locked() {
    if (!reposting_) return;
    repost_head_locked();
    reposting_ = false;
  }
  void repost_head_locked() {
    post_small(static_cast<int>(head_));  // now the last one posted: the ring moves on
    head_ = (head_ + 1) % posted;
  }

  void post_small(int i) {
    check(MPI_Irecv(small_bufs_[static_cast<std::size_t>(i)].data(), static_cast<int>(small_bytes), MPI_BYTE,
                    MPI_ANY_SOURCE, am_tag, comm_, &small_reqs_[static_cast<std::size_t>(i)]),
          "MPI_Irecv");
  }
};

}  // namespace

std::unique_ptr<transport> make_mpi() { return std::make_unique<mpi_transport>(); }


}  // namespace apgas::transport
