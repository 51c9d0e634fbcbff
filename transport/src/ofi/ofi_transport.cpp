// The libfabric backend: one RDM endpoint per process (any provider fi_getinfo offers; FI_PROVIDER=tcp or shm
// picks one), FI_MSG sends and receives, one completion queue.
//
// Bootstrap: the endpoint names are exchanged with MPI_Allgather (the launcher's bootstrap, through MPI); MPI also
// provides barrier()/allgather() at start-up and shut-down. No runtime traffic goes through MPI.
// Messages: everything is cut into fragments of at most frag_bytes, each with a 32-byte header (source rank, kind,
// message id or bulk tag, total length, offset), so the receive side only ever posts fixed-size buffers; fragments
// may arrive in any order and are reassembled by offset. Bulk payloads are fragmented the same way and copied
// into their target (recv_bulk) as they arrive, or held until recv_bulk names the target. A bulk fragment is sent
// from the payload itself (fi_sendv of its header and its slice: the payload stays valid until the receiver's finish
// ends, by the transport's contract), so a transfer costs no copy and no memory at the sender; messages are copied
// into their fragments (the caller's buffer is recycled at once).
// Sending: each destination has two queues, messages and bulk fragments, each in order. A flush starts every
// destination's messages first, then the bulk fragments, taking the destinations round robin from a different one
// each time: the provider's transmit queue is shared by the endpoint, and a bulk transfer of thousands of fragments
// to one place must not hold up the heartbeats and messages to the others (nor to itself). Messages may overtake
// bulk fragments sent before them, as the mpi backend's do (another tag): a transfer is waited for by its done
// callback, never by the order of arrival.
// Threading: FI_THREAD_DOMAIN; every libfabric call is made under lock_ (send() queues, poll() makes progress).
#include "../mpi_bootstrap.hpp"
#include "../transports.hpp"

#include <apgas/error.hpp>

#include <mpi.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace apgas::transport {
namespace {

constexpr std::size_t frag_bytes = 64 * 1024;
constexpr int posted_receives = 64;
constexpr std::size_t completions_per_read = 32;
constexpr int reads_per_poll = 8;

struct frag_header {
  std::uint32_t src;
  std::uint32_t kind;  // 0 active message, 1 bulk
  std::uint64_t id;
  std::uint64_t total;
  std::uint64_t offset;
};
static_assert(sizeof(frag_header) == 32);
constexpr std::size_t payload_bytes = frag_bytes - sizeof(frag_header);

constexpr const char* prefix = "apgas transport ofi: ";

[[noreturn]] void fail(const char* call, int rc) {
  throw transport_error(std::string(prefix) + call + " failed: " + fi_strerror(-rc) + " (" + std::to_string(rc) + ")");
}
void check(int rc, const char* call) {
  if (rc != 0) fail(call, rc);
}
// Whether an error (a positive errno value, as fi_cq_err_entry::err has it) is its peer's: the connection to it is
// gone (its process ended, its host is unreachable). Any other failure is this place's own (transport_error).
bool peer_errno(int e) {
  switch (e) {
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case EPIPE:
      return true;
    default:
      return false;
  }
}

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw transport_error(std::string("apgas transport ofi: bootstrap ") + call + " failed");
}

// libfabric's shm provider keeps each endpoint's queues in a shared-memory region (16 MiB in /dev/shm) named,
// unless told otherwise, after the process's PID; fi_close removes it, and so do the provider's signal handlers, but
// a process that ends with std::_Exit (a place stopping after a fatal error) or is killed leaves it behind. PIDs come
// round again (pid_max is 32768 on many systems), and fi_enable refuses a name whose region exists (EBUSY): a later
// run whose process drew such a PID failed to start. So the regions are named after the run (64 random bits drawn at
// rank 0) and the rank, and removed before an abrupt exit (before_abrupt_exit: this process's, and a dead peer's).
namespace shm_names {
constexpr std::size_t name_bytes = 48;  // "apgas-" + 16 hex digits + "-" + a rank + NUL
char g_run[17];                          // the run's key in hex
std::atomic<int> g_open{-1};             // this process's rank while its region exists

void set_run(std::uint64_t key) noexcept {
  for (int i = 15; i >= 0; --i, key >>= 4) g_run[i] = "0123456789abcdef"[key & 15];
  g_run[16] = '\0';
}
// Rank r's region name into out (name_bytes), without the C library's formatting (async-signal-safe).
void format(int r, char* out) noexcept {
  char* o = out;
  for (const char* s = "apgas-"; *s != '\0';) *o++ = *s++;
  for (const char* s = g_run; *s != '\0';) *o++ = *s++;
  *o++ = '-';
  char digits[12];
  int n = 0;
  unsigned v = static_cast<unsigned>(r);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *o++ = digits[--n];
  *o = '\0';
}
// unlink of /dev/shm/<name>, not shm_unlink: unlink is async-signal-safe (glibc's shm_unlink before 2.34 looked
// the shm folder up through the mount table, allocating).
void remove(int dead_peer) noexcept {
  const int me = g_open.load();
  if (me < 0) return;
  char path[sizeof "/dev/shm/" + name_bytes] = "/dev/shm/";
  format(me, path + sizeof "/dev/shm/" - 1);
  ::unlink(path);
  if (dead_peer >= 0 && dead_peer != me) {
    format(dead_peer, path + sizeof "/dev/shm/" - 1);
    ::unlink(path);
  }
}
void opened(int rank) noexcept {
  g_open.store(rank);
  set_abrupt_exit_hook(&remove);
}
void closed() noexcept { g_open.store(-1); }
}  // namespace shm_names

struct op {
  fi_context2 ctx;  // first: libfabric hands back its address
  bool is_recv = false;
  int dst = -1;                            // a send's destination (named when it fails)
  std::vector<std::byte> buf;              // a receive's buffer, a message fragment's header and bytes
  frag_header header{};                    // a bulk fragment: its header, sent with the slice below
  const std::byte* payload = nullptr;      // (null: the fragment is buf)
  std::size_t payload_len = 0;
};

class ofi_transport final : public transport {
 public:
  ofi_transport() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized) {
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
    } else {
      check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
    }
    // barrier() and allgather() may be called from any worker (one at a time, under mpi_).
    if (provided < MPI_THREAD_SERIALIZED) {
      throw transport_error("apgas transport ofi: the bootstrap's MPI runs at thread level " +
                            std::to_string(provided) + ", apgas needs MPI_THREAD_SERIALIZED (" +
                            std::to_string(MPI_THREAD_SERIALIZED) + ")");
    }
    check_same_transport("ofi");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    std::uint64_t run_key = 0;  // names this run's shm regions (shm_names)
    if (rank_ == 0) {
      run_key = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                (static_cast<std::uint64_t>(::getpid()) << 40);
      try {
        std::random_device rd;
        run_key ^= std::uint64_t{rd()} << 32 | rd();
      } catch (...) {  // (no entropy source: the clock and the PID alone)
      }
    }
    check_mpi(MPI_Bcast(&run_key, 1, MPI_UINT64_T, 0, comm_), "MPI_Bcast");

    // Every place opens its endpoint, then all exchange a record: the endpoint's name, or why it could not be opened.
    // A place that failed still takes part, so that every place stops at once naming it (the others waited in the
    // exchange until the start-up watchdog, 60 s). The same once more for what follows (the peers' addresses, the
    // posted receives).
    record mine{};
    try {
      open_endpoint(run_key);
      std::size_t len = sizeof mine.text;
      check(fi_getname(&ep_->fid, mine.text, &len), "fi_getname");
      mine.ok = 1;
      mine.length = len;
    } catch (const std::exception& e) {
      mine.failed(e.what());
    }
    const std::vector<record> all = all_or_none(mine, "could not open its libfabric endpoint");
    record ready{};
    try {
      // One address at a time: they differ in length under FI_ADDR_STR (the shm provider's names).
      addrs_.resize(static_cast<std::size_t>(size_));
      queues_.resize(static_cast<std::size_t>(size_));
      for (int p = 0; p < size_; ++p) {
        const int n = fi_av_insert(av_, all[static_cast<std::size_t>(p)].text, 1,
                                   &addrs_[static_cast<std::size_t>(p)], 0, nullptr);
        if (n != 1) {
          throw transport_error(std::string(prefix) + "fi_av_insert did not take the address of place " +
                                std::to_string(p) + " (" + std::to_string(n) + ")");
        }
      }
      for (int i = 0; i < posted_receives; ++i) {
        auto o = std::make_unique<op>();
        o->is_recv = true;
        o->buf.resize(frag_bytes);
        post_recv(*o);
        recvs_.push_back(std::move(o));
      }
      ready.ok = 1;
    } catch (const std::exception& e) {
      ready.failed(e.what());
    }
    (void)all_or_none(ready, "could not take the others' addresses");
  }

  ~ofi_transport() override {
    close_fabric();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  const char* name() const noexcept override { return "ofi"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_message() const noexcept override { return std::size_t{1} << 30; }

  void send(int dst, std::vector<std::byte> bytes) override {
    check_dst(dst);
    const std::uint64_t id = next_msg_.fetch_add(1, std::memory_order_relaxed);
    queue_fragments(dst, 0, id, bytes, true);
    recycle_buffer(std::move(bytes));  // copied into the fragments
  }

  std::uint32_t next_bulk_tag(int) noexcept override { return next_tag_.fetch_add(1, std::memory_order_relaxed); }

  void send_bulk(int dst, std::uint32_t tag, std::span<const std::byte> payload) override {
    check_dst(dst);
    queue_fragments(dst, 1, tag, payload, !zero_copy_);
  }

  void recv_bulk(int src, std::uint32_t tag, std::span<std::byte> target, done_fn done, void* ctx) override {
    std::vector<std::pair<done_fn, void*>> ready;
    {
      std::lock_guard lock(lock_);
      bulk_in& b = bulk_[{src, tag}];
      b.target = target;
      b.done = done;
      b.ctx = ctx;
      b.posted = true;
      // Early fragments were checked against their header's total only: that total must be this target's size.
      if (b.seen_header && b.total != target.size()) {
        throw transport_error("apgas transport ofi: a bulk transfer of " + std::to_string(b.total) +
                              " bytes from rank " + std::to_string(src) + " for a target of " +
                              std::to_string(target.size()));
      }
      for (auto& [off, data] : b.early) std::memcpy(target.data() + off, data.data(), data.size());
      b.early.clear();
      if (b.received == target.size() && b.seen_header) {
        ready.emplace_back(done, ctx);
        bulk_.erase({src, tag});
      }
    }
    // The done callback runs on a polling thread by contract; delivering it here is equivalent (no lock held).
    for (auto& [d, c] : ready) d(c);
  }

  bool poll(handler& h) override {
    drained_.store(false, std::memory_order_relaxed);  // (until this poll has looked)
    if (!lock_.try_lock()) return false;
    std::vector<std::pair<int, aligned_buffer>> arrived;
    std::vector<std::pair<done_fn, void*>> landed;
    std::vector<int> traffic;
    bool progress = false;
    {
      std::lock_guard lock(lock_, std::adopt_lock);
      arrived.swap(held_arrived_);  // taken by a barrier
      landed.swap(held_landed_);
      progress |= flush_locked();
      // At most reads_per_poll reads: under a stream of fragments the loop would not end, and the messages it took
      // (a bulk transfer's announcement among them: until its recv_bulk its fragments are held in copies) would wait.
      bool capped = true;  // every read took as many completions as it asked for: more may be waiting
      for (int reads = 0; reads < reads_per_poll; ++reads) {
        const std::size_t n = complete_locked(arrived, landed);
        progress |= n > 0;
        if (n < completions_per_read) {
          capped = false;
          break;
        }
      }
      drained_.store(!capped, std::memory_order_relaxed);
      progress |= flush_locked();
      traffic.swap(traffic_);
    }
    for (int src : traffic) h.on_traffic(src);
    for (auto& [src, buf] : arrived) h.on_message(src, buf.span());
    for (auto& [d, c] : landed) d(c);
    return progress || !arrived.empty() || !landed.empty();
  }

  bool drained() const noexcept override { return drained_.load(std::memory_order_relaxed); }

  // A peer's sends may complete only while we take its fragments (the tcp provider progresses a socket when its
  // owner reads the completion queue), so the barrier keeps taking them until every place has arrived (a blocking
  // MPI_Barrier here hung shut-down when a peer still had a message outside any finish to send).
  void barrier() override {
    drain();
    MPI_Request bar = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_, &bar), "MPI_Ibarrier");
    for (int done = 0;;) {
      check_mpi(MPI_Test(&bar, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      std::lock_guard lock(lock_);
      take_late_locked();
    }
  }

  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    drain();
    std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                            static_cast<int>(mine.size()), MPI_BYTE, comm_),
              "MPI_Allgather");
    return all;
  }

 private:
  struct reassembly {
    aligned_buffer buf;
    std::size_t received = 0;
  };
  struct bulk_in {
    std::span<std::byte> target;
    done_fn done = nullptr;
    void* ctx = nullptr;
    bool posted = false;
    bool seen_header = false;
    std::size_t total = 0;
    std::size_t received = 0;
    std::vector<std::pair<std::size_t, std::vector<std::byte>>> early;  // fragments before recv_bulk
  };

  void check_dst(int dst) const {
    if (dst < 0 || dst >= size_) {
      throw transport_error("apgas transport ofi: send to rank " + std::to_string(dst) + " of " + std::to_string(size_));
    }
  }

  void post_recv(op& o) {
    for (;;) {
      const ssize_t rc = fi_recv(ep_, o.buf.data(), o.buf.size(), nullptr, FI_ADDR_UNSPEC, &o.ctx);
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) fail("fi_recv", static_cast<int>(rc));
      fi_cq_read(cq_, nullptr, 0);  // drive progress
    }
  }

  // `copy`: the fragments hold copies of their bytes (else they point into data, which must outlive their sends).
  void queue_fragments(int dst, std::uint32_t kind, std::uint64_t id, std::span<const std::byte> data, bool copy) {
    std::vector<std::unique_ptr<op>> frags;
    std::size_t off = 0;
    do {
      const std::size_t n = std::min(payload_bytes, data.size() - off);
      auto o = std::make_unique<op>();
      o->dst = dst;
      const frag_header h{static_cast<std::uint32_t>(rank_), kind, id, data.size(), off};
      if (copy || n == 0) {  // (an empty payload: the header alone, as a message fragment)
        o->buf.resize(sizeof(frag_header) + n);
        std::memcpy(o->buf.data(), &h, sizeof h);
        if (n != 0) std::memcpy(o->buf.data() + sizeof h, data.data() + off, n);
      } else {
        o->header = h;
        o->payload = data.data() + off;
        o->payload_len = n;
      }
      o->ctx = {};
      frags.push_back(std::move(o));
      off += n;
    } while (off < data.size());
    {
      std::lock_guard lock(out_mutex_);
      for (auto& f : frags) outbox_.push_back({dst, kind == 1, f.release()});
      has_out_.store(true, std::memory_order_release);
    }
    if (lock_.try_lock()) {
      std::lock_guard lock(lock_, std::adopt_lock);
      flush_locked();
    }
  }

  // Starts the queued sends (see the file comment): every destination's messages, then the bulk fragments, the
  // destinations round robin from another one each time. A destination that answers -FI_EAGAIN (its receive queue
  // full: a place that does not poll; or the endpoint's transmit queue full) keeps the rest of that queue for the
  // next flush, after completions freed resources; the other destinations go on.
  bool flush_locked() {
    if (!has_out_.load(std::memory_order_acquire) && npending_ == 0) return false;
    {
      std::lock_guard lock(out_mutex_);
      for (const outgoing& g : outbox_) queues_[static_cast<std::size_t>(g.dst)][g.bulk ? 1 : 0].push_back(g.o);
      npending_ += outbox_.size();
      outbox_.clear();
      has_out_.store(false, std::memory_order_relaxed);
    }
    bool any = false;
    const std::size_t n = queues_.size();
    first_ = (first_ + 1) % n;
    for (int bulk = 0; bulk < 2 && npending_ != 0; ++bulk) {
      for (std::size_t i = 0; i < n && npending_ != 0; ++i) {
        const std::size_t dst = (first_ + i) % n;
        std::deque<op*>& q = queues_[dst][bulk];
        while (!q.empty()) {
          op* o = q.front();
          ssize_t rc = 0;
          if (o->payload != nullptr) {
            iovec iov[2] = {{&o->header, sizeof o->header}, {const_cast<std::byte*>(o->payload), o->payload_len}};
            rc = fi_sendv(ep_, iov, nullptr, 2, addrs_[dst], &o->ctx);
          } else {
            rc = fi_send(ep_, o->buf.data(), o->buf.size(), nullptr, addrs_[dst], &o->ctx);
          }
          if (rc == -FI_EAGAIN) break;  // retried at the next flush
          if (rc != 0) {  // (taken off its queue first: the failure is raised once, not by every later flush)
            q.pop_front();
            --npending_;
            delete o;
            const std::string what = std::string(prefix) + "fi_send to rank " + std::to_string(dst) + " failed: " +
                                     fi_strerror(static_cast<int>(-rc)) + " (" + std::to_string(rc) + ")";
            if (peer_errno(static_cast<int>(-rc))) throw peer_error(static_cast<int>(dst), what);
            throw transport_error(what);
          }
          sends_in_flight_ += 1;
          q.pop_front();
          --npending_;
          any = true;
        }
      }
    }
    return any;
  }

  void on_fragment(const std::byte* p, std::size_t len, std::vector<std::pair<int, aligned_buffer>>& arrived,
                   std::vector<std::pair<done_fn, void*>>& landed) {
    frag_header h{};
    if (len < sizeof h) throw transport_error("apgas transport ofi: a fragment of " + std::to_string(len) + " bytes");
    std::memcpy(&h, p, sizeof h);
    const std::size_t n = len - sizeof h;
    const int src = static_cast<int>(h.src);
    if (src < 0 || src >= size_ || h.offset > h.total || n > h.total - h.offset || h.total > max_message()) {
      throw transport_error("apgas transport ofi: a malformed fragment from rank " + std::to_string(src));
    }
    const std::byte* data = p + sizeof h;
    if (h.kind == 0) {
      if (h.offset == 0 && n == h.total) {  // the common case: one fragment
        aligned_buffer b(n);
        if (n != 0) std::memcpy(b.data(), data, n);
        arrived.emplace_back(src, std::move(b));
        return;
      }
      note_traffic(src);  // a part of a larger message: a sign of life before the whole has arrived
      const auto key = std::make_pair(src, h.id);
      reassembly& r = messages_[key];
      if (r.buf.size() != h.total) r.buf = aligned_buffer(h.total);
      std::memcpy(r.buf.data() + h.offset, data, n);
      r.received += n;
      if (r.received == h.total) {
        arrived.emplace_back(src, std::move(r.buf));
        messages_.erase(key);
      }
      return;
    }
    note_traffic(src);
    const auto key = std::make_pair(src, static_cast<std::uint32_t>(h.id));
    bulk_in& b = bulk_[key];
    if (b.seen_header && h.total != b.total) {
      throw transport_error("apgas transport ofi: fragments of one bulk transfer from rank " + std::to_string(src) +
                            " disagree on its size (" + std::to_string(b.total) + ", " + std::to_string(h.total) + ")");
    }
    b.seen_header = true;
    b.total = h.total;
    if (b.posted) {
      if (h.total != b.target.size()) {
        throw transport_error("apgas transport ofi: a bulk transfer of " + std::to_string(h.total) +
                              " bytes for a target of " + std::to_string(b.target.size()));
      }
      if (n != 0) std::memcpy(b.target.data() + h.offset, data, n);
    } else {
      b.early.emplace_back(h.offset, std::vector<std::byte>(data, data + n));
    }
    b.received += n;
    if (b.posted && b.received == b.total) {
      landed.emplace_back(b.done, b.ctx);
      bulk_.erase(key);
    }
  }

  void note_traffic(int src) {
    if (traffic_.empty() || traffic_.back() != src) traffic_.push_back(src);
  }

  /// One read of the completion queue (at most completions_per_read): a send ends; a fragment goes to reassembly
  /// (what it completes into arrived / landed) and its buffer is posted again. Returns how many completed.
  std::size_t complete_locked(std::vector<std::pair<int, aligned_buffer>>& arrived,
                              std::vector<std::pair<done_fn, void*>>& landed) {
    fi_cq_msg_entry entries[completions_per_read];
    const ssize_t n = fi_cq_read(cq_, entries, completions_per_read);
    if (n == -FI_EAGAIN) return 0;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      const std::string why = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
      const std::string head = std::string("apgas transport ofi (") + provider_ + "): ";
      op* o = static_cast<op*>(err.op_context);
      if (o != nullptr && !o->is_recv) {  // a send: it is over (raised once), and it names its peer
        const int dst = o->dst;
        sends_in_flight_ -= 1;
        delete o;
        const std::string what = head + "a send to rank " + std::to_string(dst) + " failed: " + why;
        if (peer_errno(err.err)) throw peer_error(dst, what);  // the connection to that peer is gone
        throw transport_error(what);
      }
      throw transport_error(head + "a receive failed: " + why);
    }
    if (n < 0) fail("fi_cq_read", static_cast<int>(n));
    for (ssize_t i = 0; i < n; ++i) {
      op* o = reinterpret_cast<op*>(entries[i].op_context);
      if (o->is_recv) {
        on_fragment(o->buf.data(), entries[i].len, arrived, landed);
        post_recv(*o);
      } else {
        sends_in_flight_ -= 1;
        delete o;
      }
    }
    return static_cast<std::size_t>(n);
  }

  /// Completions in a barrier: what fragments complete is held for the next poll (at start-up a place that has left
  /// the barrier may already send to one still in it).
  void take_late_locked() {
    while (complete_locked(held_arrived_, held_landed_) > 0) {
    }
  }

  void drain() {
    // Send everything queued and wait for the completions (start-up and shut-down only).
    for (;;) {
      {
        std::lock_guard lock(lock_);
        flush_locked();
        take_late_locked();
        bool empty = false;
        {
          std::lock_guard out(out_mutex_);
          empty = outbox_.empty();
        }
        if (empty && npending_ == 0 && sends_in_flight_ == 0) return;
      }
    }
  }

  // What a place tells the others at a step of start-up (fixed size, no padding, zeroed: one MPI_Allgather).
  struct record {
    std::uint32_t ok;        // 1: the step worked (text: the endpoint's name, at the first); 0: text says why not
    char provider[28];       // libfabric's provider ("" where none was found)
    std::uint64_t length;    // of text
    char text[480];
    void failed(const char* why) noexcept {
      ok = 0;
      length = std::min(std::strlen(why), sizeof text - 1);
      std::memcpy(text, why, length);
    }
  };
  static_assert(sizeof(record) == 520, "record: no padding (it goes over MPI as bytes)");

  // Every place's record of a start-up step, if every place's step worked under the same provider; otherwise every
  // place closes what it opened and throws: its own failure first, else the first other place's, naming it.
  std::vector<record> all_or_none(record mine, const char* failure) {
    std::strncpy(mine.provider, provider_.c_str(), sizeof mine.provider - 1);
    std::vector<record> all(static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm_), "MPI_Allgather");
    for (int p = 0; p < size_; ++p) {
      const record& r = all[static_cast<std::size_t>(p)];
      if (r.ok == 1 && std::strncmp(r.provider, mine.provider, sizeof r.provider) == 0) continue;
      close_fabric();
      MPI_Comm_free(&comm_);  // (MPI stays initialised, as after any failed start-up: a later run may use it)
      if (mine.ok != 1) throw transport_error(std::string(mine.text, mine.length));
      if (r.ok != 1) {
        std::string why(r.text, r.length);
        if (why.rfind(prefix, 0) == 0) why.erase(0, std::strlen(prefix));
        throw transport_error(std::string(prefix) + "place " + std::to_string(p) + " " + failure + " (" + why + ")");
      }
      throw transport_error(std::string(prefix) + "place " + std::to_string(p) + " uses libfabric's " +
                            std::string(r.provider, strnlen(r.provider, sizeof r.provider)) + " provider, place " +
                            std::to_string(rank_) + " its " + provider_ +
                            " provider: every process of a run must use the same one (FI_PROVIDER)");
    }
    return all;
  }

  // The endpoint, and what it needs, per fi_getinfo's first offer. Under the shm provider the endpoint is named
  // after the run and the rank (shm_names) before it is enabled.
  void open_endpoint(std::uint64_t run_key) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->mr_mode = 0;
    const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info_);
    fi_freeinfo(hints);
    if (rc != 0) {
      const char* prov = std::getenv("FI_PROVIDER");
      throw transport_error(std::string(prefix) + "no libfabric provider offers reliable datagram "
                            "endpoints with messages (FI_PROVIDER=" + (prov != nullptr ? prov : "(unset)") +
                            "): " + fi_strerror(-rc));
    }
    provider_ = info_->fabric_attr->prov_name != nullptr ? info_->fabric_attr->prov_name : "?";
    zero_copy_ = info_->tx_attr != nullptr && info_->tx_attr->iov_limit >= 2;  // (else bulk fragments are copies)
    check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.size = 4096;
    check(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    const bool shm = provider_ == "shm";
    if (shm) {
      shm_names::set_run(run_key);
      char name[shm_names::name_bytes];
      shm_names::format(rank_, name);
      check(fi_setname(&ep_->fid, name, std::strlen(name) + 1), "fi_setname");
    }
    check(fi_enable(ep_), "fi_enable");
    if (shm) shm_names::opened(rank_);
  }

  // Closes what open_endpoint opened (the shm provider removes the endpoint's region), in reverse order.
  void close_fabric() noexcept {
    if (ep_ != nullptr) fi_close(&ep_->fid);
    shm_names::closed();
    if (av_ != nullptr) fi_close(&av_->fid);
    if (cq_ != nullptr) fi_close(&cq_->fid);
    if (domain_ != nullptr) fi_close(&domain_->fid);
    if (fabric_ != nullptr) fi_close(&fabric_->fid);
    if (info_ != nullptr) fi_freeinfo(info_);
    ep_ = nullptr, av_ = nullptr, cq_ = nullptr, domain_ = nullptr, fabric_ = nullptr, info_ = nullptr;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_ = false;
  std::string provider_;
  bool zero_copy_ = false;  // bulk fragments sent from the payload (fi_sendv of two pieces)
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<fi_addr_t> addrs_;

  std::mutex lock_;  // every libfabric call, and the tables below
  std::atomic<bool> drained_{false};  // the last poll looked and read the completion queues dry (drained())
  std::vector<std::unique_ptr<op>> recvs_;
  std::vector<std::array<std::deque<op*>, 2>> queues_;  // by destination: messages, bulk fragments (flush_locked)
  std::size_t npending_ = 0;                            // in all of queues_
  std::size_t first_ = 0;                               // the destination the last flush started with
  std::vector<std::pair<int, aligned_buffer>> held_arrived_;  // (under lock_) completed in a barrier: for the next poll
  std::vector<std::pair<done_fn, void*>> held_landed_;
  std::size_t sends_in_flight_ = 0;
  std::map<std::pair<int, std::uint64_t>, reassembly> messages_;
  std::vector<int> traffic_;  // sources of fragments taken by this poll that did not complete a message
  std::map<std::pair<int, std::uint32_t>, bulk_in> bulk_;

  struct outgoing {
    int dst;
    bool bulk;
    op* o;
  };
  std::mutex out_mutex_;
  std::vector<outgoing> outbox_;
  std::atomic<bool> has_out_{false};
  std::atomic<std::uint64_t> next_msg_{0};
  std::atomic<std::uint32_t> next_tag_{0};
};

}  // namespace

std::unique_ptr<transport> make_ofi() { return std::make_unique<ofi_transport>(); }

}  // namespace apgas::transport
