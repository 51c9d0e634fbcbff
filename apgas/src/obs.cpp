// Observability: recording (per-worker buffers, statistics counters), the run's life cycle of the trace and the
// statistics (settings agreed at start-up, clock offsets at start and end, every place's record brought to place 0),
// the binary record that travels, and the emergency dump of a failing place. The JSON is written by obs_json.cpp,
// the statistics table by obs_stats.cpp. Invariants: obs.hpp.
#include "obs.hpp"

#include "dist_state.hpp"

#include "runtime.hpp"
#include "scheduler.hpp"

#include <apgas/detail/spin_mutex.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/error.hpp>
#include <apgas/runtime.hpp>
#include <apgas/transport/transport.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace apgas::detail::obs {

std::atomic<std::uint32_t> g_mask{0};

namespace {

// Flow ids: place (13 bits) | writer (13 bits: a worker's index, or max_threads for other threads) | sequence.
constexpr int writer_shift = 37;
constexpr int place_shift = 50;
constexpr std::uint64_t seq_mask = (std::uint64_t{1} << writer_shift) - 1;

// Deque depth is sampled at most this often per worker.
constexpr std::uint64_t sample_period_ns = 1'000'000;

struct alignas(64) buffer {
  std::atomic<event*> cur{nullptr};
  event* begin = nullptr;
  event* end = nullptr;
  std::uint64_t dropped = 0;
  std::uint64_t seq = 0;
  std::uint64_t last_sample = 0;
  host_stats st;  // (the buffer of other threads keeps none)
};

// Statistics counters of the run written from any thread.
enum peer_field { f_msgs_sent, f_bytes_sent, f_msgs_recv, f_bytes_recv, peer_fields };
enum gpu_field { f_kernels, f_copies0, f_bytes0 = f_copies0 + 3, gpu_fields = f_bytes0 + 3 };

struct run_state {
  // Agreed in prepare(): place 0's settings.
  std::uint32_t mask = 0;
  std::size_t buffer_bytes = 0;
  std::string path;  // place 0's trace file; every place knows it (emergency dumps name their file after it)
  // The run (start() to finish()).
  bool active = false;
  int place = 0, hosts = 1, first_gpu = 0, gpus = 0, workers = 0;
  std::uint64_t t_start = 0, t_stop = 0;
  std::unique_ptr<buffer[]> bufs;  // workers, then other threads' (under foreign_mutex)
  spin_mutex foreign_mutex;
  void* mapping = nullptr;
  std::size_t mapping_bytes = 0;
  std::size_t capacity = 0;  // events per buffer
  std::unique_ptr<std::atomic<std::uint64_t>[]> peer;  // hosts * peer_fields
  std::unique_ptr<std::atomic<std::uint64_t>[]> gpu;   // gpus * gpu_fields
  std::vector<std::string> deque_names;                // "deque depth w<i>", alive for the run
  std::vector<place_info> places;
  std::terminate_handler previous_terminate = nullptr;
  clock_sample sync_start, sync_end;                    // this place against place 0
  std::vector<clock_sample> all_start, all_end;         // place 0: every place's
  std::vector<std::vector<std::byte>> blobs;            // place 0: every place's record
};
run_state g;
std::atomic<bool> g_dumped{false};       // an emergency dump has begun (the first caller writes it)
std::atomic<bool> g_dump_done{false};    // ... and ended: a second caller (two threads terminating) waits for it

bool tracing() noexcept { return (g.mask & cat_all) != 0; }

buffer* own_buffer() noexcept {
  worker* w = this_worker();
  if (w != nullptr && w->index < g.workers) return &g.bufs[static_cast<std::size_t>(w->index)];
  return nullptr;
}

// Append n events (filled by fill(first, buffer)) to the calling thread's buffer; false when they did not fit.
template <class Fill>
bool put(buffer& b, std::size_t n, Fill&& fill) noexcept {
  event* p = b.cur.load(std::memory_order_relaxed);
  if (p == nullptr || static_cast<std::size_t>(b.end - p) < n) {
    b.dropped += n;
    return false;
  }
  fill(p, b);
  b.cur.store(p + n, std::memory_order_release);
  return true;
}

template <class Fill>
bool record(std::size_t n, Fill&& fill) noexcept {
  if (g.bufs == nullptr) return false;
  if (buffer* b = own_buffer()) return put(*b, n, fill);
  std::lock_guard lock(g.foreign_mutex);
  return put(g.bufs[static_cast<std::size_t>(g.workers)], n, fill);
}

std::uint64_t next_flow(buffer& b) noexcept {
  const auto writer = static_cast<std::uint64_t>(&b - g.bufs.get());
  return (static_cast<std::uint64_t>(g.place) << place_shift) | (writer << writer_shift) | (++b.seq & seq_mask);
}

const char* const send_names[] = {"send",        "send async", "send at",     "send at reply",
                                  "send report", "send shutdown", "send team", "send",
                                  "send bulk put", "send bulk get"};
const char* const handle_names[] = {"handle",        "handle async", "handle at",     "handle at reply",
                                    "handle report", "handle shutdown", "handle team", "handle",
                                    "handle bulk put", "handle bulk get"};
// Clock messages (kinds 20-24, dist_state.hpp).
const char* const clock_send_names[] = {"send clocked async", "send clocked at", "send clocked at reply",
                                        "send clock report", "send clock phase"};
const char* const clock_handle_names[] = {"handle clocked async", "handle clocked at", "handle clocked at reply",
                                          "handle clock report", "handle clock phase"};
// Kinds 10-17 (dist_state.hpp): start-up, failure detection, large messages, shut-down handshake, a stop.
const char* const other_send_names[] = {"send hello",        "send heartbeat",    "send dead notice",
                                        "send large message", "send large done",  "send shutdown ack",
                                        "send shutdown go",   "send stop notice"};
const char* const other_handle_names[] = {"handle hello",        "handle heartbeat",   "handle dead notice",
                                          "handle large message", "handle large done", "handle shutdown ack",
                                          "handle shutdown go",   "handle stop notice"};
const char* name_of(const char* const (&table)[10], unsigned kind) noexcept {
  const bool sends = &table == &send_names;
  if (kind >= 20 && kind < 25) return (sends ? clock_send_names : clock_handle_names)[kind - 20];
  if (kind >= 10 && kind < 18) return (sends ? other_send_names : other_handle_names)[kind - 10];
  return kind < 10 ? table[kind] : table[0];
}

std::atomic<std::uint64_t>* peer_counter(int p, peer_field f) noexcept {
  if (g.peer == nullptr || p < 0 || p >= g.hosts) return nullptr;
  return &g.peer[static_cast<std::size_t>(p) * peer_fields + f];
}

// ---- the record as bytes ----

constexpr std::uint32_t record_magic = 0x52545041;  // "APTR"
constexpr std::uint32_t record_version = 1;

struct out_bytes {
  std::vector<std::byte> v;
  template <class T>
  void put(const T& x) {
    const auto* p = reinterpret_cast<const std::byte*>(&x);
    v.insert(v.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    v.insert(v.end(), b, b + n);
  }
};

struct in_bytes {
  std::span<const std::byte> s;
  std::size_t at = 0;
  void need(std::size_t n, const char* what) {
    if (n > s.size() - at) {
      throw serialization_error("apgas: trace record: " + std::string(what) + " needs " + std::to_string(n) +
                                " bytes at offset " + std::to_string(at) + ", " + std::to_string(s.size() - at) +
                                " remain");
    }
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T x;
    std::memcpy(&x, s.data() + at, sizeof(T));
    at += sizeof(T);
    return x;
  }
  void get_bytes(void* p, std::size_t n, const char* what) {
    need(n, what);
    std::memcpy(p, s.data() + at, n);
    at += n;
  }
};

// This place's record. Reads each buffer up to its published cursor, so it may run while workers still record
// (the emergency dump).
std::vector<std::byte> encode() {
  out_bytes o;
  o.put(record_magic);
  o.put(record_version);
  o.put(static_cast<std::int32_t>(g.place));
  o.put(static_cast<std::int32_t>(g.workers));
  o.put(static_cast<std::int32_t>(g.first_gpu));
  o.put(static_cast<std::int32_t>(g.gpus));
  o.put(static_cast<std::int32_t>(g.hosts));
  o.put(g.t_start);
  o.put(g.t_stop != 0 ? g.t_stop : now());
  std::uint64_t dropped = 0;
  for (int i = 0; i <= g.workers; ++i) dropped += g.bufs[static_cast<std::size_t>(i)].dropped;
  o.put(dropped);
  o.put(static_cast<std::uint64_t>(g.capacity));
  host_stats total;
  for (int i = 0; i < g.workers; ++i) {
    const host_stats& s = g.bufs[static_cast<std::size_t>(i)].st;
    total.run += s.run;
    total.stolen += s.stolen;
    total.parks += s.parks;
    total.finish_waits += s.finish_waits;
    total.idle_ns += s.idle_ns;
  }
  o.put(total);
  for (int p = 0; p < g.hosts; ++p) {
    for (int f = 0; f < peer_fields; ++f) {
      o.put(g.peer[static_cast<std::size_t>(p) * peer_fields + f].load(std::memory_order_relaxed));
    }
  }
  for (int q = 0; q < g.gpus; ++q) {
    for (int f = 0; f < gpu_fields; ++f) o.put(g.gpu[static_cast<std::size_t>(q) * gpu_fields + f].load(std::memory_order_relaxed));
  }
  o.put(g.sync_start);
  o.put(g.sync_end);

  // Names: the strings the events point to, once each; type names demangled here (the addresses mean nothing at
  // another place).
  std::unordered_map<std::uint64_t, std::uint32_t> index;
  std::vector<std::string> names;
  std::vector<std::vector<event>> streams(static_cast<std::size_t>(g.workers) + 1);
  for (int i = 0; i <= g.workers; ++i) {
    const buffer& b = g.bufs[static_cast<std::size_t>(i)];
    event* const end = b.cur.load(std::memory_order_acquire);
    if (end == nullptr) continue;
    std::vector<event>& out = streams[static_cast<std::size_t>(i)];
    out.assign(b.begin, end);
    for (event& e : out) {
      if (!has_name(e.kind)) continue;
      auto [it, fresh] = index.emplace(e.a, static_cast<std::uint32_t>(names.size()));
      if (fresh) {
        const char* s = reinterpret_cast<const char*>(e.a);
        const bool type = e.kind == k_act_begin || (e.kind == k_device_span && e.c == cat_gpu);
        names.push_back(s == nullptr ? std::string("?") : type ? readable_type_name(s) : std::string(s));
      }
      e.a = it->second;
    }
  }
  o.put(static_cast<std::uint32_t>(names.size()));
  for (const std::string& s : names) {
    o.put(static_cast<std::uint32_t>(s.size()));
    o.put_bytes(s.data(), s.size());
  }
  o.put(static_cast<std::uint32_t>(streams.size()));
  for (const auto& s : streams) {
    o.put(static_cast<std::uint64_t>(s.size()));
    o.put_bytes(s.data(), s.size() * sizeof(event));
  }
  return std::move(o.v);
}

place_record decode(std::span<const std::byte> bytes) {
  in_bytes in{bytes};
  if (in.get<std::uint32_t>("magic") != record_magic || in.get<std::uint32_t>("version") != record_version) {
    throw serialization_error("apgas: trace record: not a record of this version");
  }
  place_record r;
  r.place = in.get<std::int32_t>("place");
  r.workers = in.get<std::int32_t>("workers");
  r.first_gpu = in.get<std::int32_t>("first GPU");
  r.gpus = in.get<std::int32_t>("GPUs");
  const int hosts = in.get<std::int32_t>("hosts");
  if (r.workers < 0 || r.workers > config::max_threads || r.gpus < 0 || r.gpus > config::max_gpu_ordinal + 1 ||
      hosts < 1 || hosts > (1 << 20)) {
    throw serialization_error("apgas: trace record: bad counts");
  }
  r.t_start = in.get<std::uint64_t>("start");
  r.t_stop = in.get<std::uint64_t>("stop");
  r.dropped = in.get<std::uint64_t>("dropped");
  r.capacity = in.get<std::uint64_t>("capacity");
  r.host = in.get<host_stats>("statistics");
  r.peers.resize(static_cast<std::size_t>(hosts));
  for (peer_stats& p : r.peers) p = in.get<peer_stats>("peer statistics");
  r.gpu.resize(static_cast<std::size_t>(r.gpus));
  for (gpu_stats& q : r.gpu) q = in.get<gpu_stats>("GPU statistics");
  r.sync_start = in.get<clock_sample>("clock");
  r.sync_end = in.get<clock_sample>("clock");
  const auto nnames = in.get<std::uint32_t>("names");
  in.need(static_cast<std::size_t>(nnames) * 4, "names");
  r.names.resize(nnames);
  for (std::string& s : r.names) {
    const auto n = in.get<std::uint32_t>("name length");
    in.need(n, "name");
    s.assign(reinterpret_cast<const char*>(bytes.data() + in.at), n);
    in.at += n;
  }
  const auto nstreams = in.get<std::uint32_t>("streams");
  if (nstreams != static_cast<std::uint32_t>(r.workers) + 1) throw serialization_error("apgas: trace record: streams");
  r.streams.resize(nstreams);
  for (auto& s : r.streams) {
    const auto n = in.get<std::uint64_t>("events");
    if (n > (bytes.size() - in.at) / sizeof(event)) throw serialization_error("apgas: trace record: event count");
    s.resize(static_cast<std::size_t>(n));
    in.get_bytes(s.data(), s.size() * sizeof(event), "events");
    for (const event& e : s) {
      if (has_name(e.kind) && e.a >= nnames) throw serialization_error("apgas: trace record: name index");
    }
  }
  return r;
}

// ---- messages of the collectives below (raw transport messages while no worker polls) ----

enum : std::uint8_t { m_ping = 0xE1, m_pong = 0xE2, m_done = 0xE3, m_chunk = 0xE4, m_ack = 0xE5 };

struct collect_handler final : transport::handler {
  // clock sync
  int ping_round = -1;       // a peer: the round of the ping to answer (-1: none pending)
  int pong_round = -1;       // place 0: the round of the pong that arrived
  std::uint64_t pong_time = 0, pong_arrival = 0;
  bool done = false;
  // gather
  std::vector<std::vector<std::byte>>* blobs = nullptr;
  std::vector<std::uint64_t> received;  // bytes so far, by place
  int complete = 0;
  bool acked = false;
  std::string problem;

  void on_message(int src, std::span<const std::byte> m) override {
    if (m.empty()) return;
    const auto tag = static_cast<std::uint8_t>(m[0]);
    const std::byte* p = m.data() + 1;
    const std::size_t n = m.size() - 1;
    auto take = [&](auto& x, std::size_t at) {
      if (at + sizeof x <= n) std::memcpy(&x, p + at, sizeof x);
    };
    switch (tag) {
      case m_ping: {
        std::int32_t r = -1;
        take(r, 0);
        ping_round = r;
        break;
      }
      case m_pong: {
        pong_arrival = now();
        std::int32_t r = -1;
        take(r, 0);
        take(pong_time, 4);
        pong_round = r;
        break;
      }
      case m_done: done = true; break;
      case m_ack: acked = true; break;
      case m_chunk: {
        std::uint64_t off = 0, total = 0;
        take(off, 0);
        take(total, 8);
        if (blobs == nullptr || src < 0 || src >= static_cast<int>(blobs->size()) || n < 16) {
          problem = "a record piece from place " + std::to_string(src) + " arrived out of turn";
          break;
        }
        auto& b = (*blobs)[static_cast<std::size_t>(src)];
        const std::size_t len = n - 16;
        if (b.empty()) b.resize(static_cast<std::size_t>(total));
        if (total != b.size() || off > b.size() || len > b.size() - off) {
          problem = "a record piece from place " + std::to_string(src) + " does not fit its record";
          break;
        }
        std::memcpy(b.data() + off, p + 16, len);
        std::uint64_t& got = received[static_cast<std::size_t>(src)];
        got += len;
        if (got == b.size()) ++complete;
        break;
      }
      default:
        // A failure detector's heartbeat sent just before the run ended and held back by its last barrier: it says
        // nothing here, and must not stop the exchange (place 0 then printed its own table only).
        if (m.size() == 1 && tag == static_cast<std::uint8_t>(msg::heartbeat)) break;
        problem = "a message of " + std::to_string(m.size()) + " bytes from place " + std::to_string(src) +
                  " arrived while the places exchanged their trace records; dropped";
        break;
    }
  }
};

void send_small(transport::transport& tp, int dst, std::uint8_t tag, const void* payload, std::size_t n) {
  std::vector<std::byte> m(1 + n);
  m[0] = static_cast<std::byte>(tag);
  if (n != 0) std::memcpy(m.data() + 1, payload, n);
  tp.send(dst, std::move(m));
}

// Polls until pred() holds or the deadline passes (false then).
template <class Pred>
bool poll_for(transport::transport& tp, collect_handler& h, Pred pred, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (!tp.poll(h)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
  }
  return true;
}

constexpr auto collective_limit = std::chrono::seconds(60);

// Clock offsets against place 0: place 0 plays ping-pong with each place in turn (rounds of it, the one with the
// shortest round trip kept), then tells everyone it is done; a barrier ends it, so no message of it is left in flight.
void clock_sync(transport::transport& tp, clock_sample& mine, std::vector<clock_sample>& all) {
  constexpr int rounds = 16;
  collect_handler h;
  const int me = tp.rank();
  if (me == 0) {
    all.assign(static_cast<std::size_t>(tp.size()), clock_sample{});
    for (int p = 1; p < tp.size(); ++p) {
      clock_sample best{0, 0, ~std::uint64_t{0}};
      for (std::int32_t r = 0; r < rounds; ++r) {
        const std::uint64_t t0 = now();
        send_small(tp, p, m_ping, &r, sizeof r);
        if (!poll_for(tp, h, [&] { return h.pong_round == r; }, collective_limit)) {
          std::fprintf(stderr, "apgas: trace: place %d did not answer the clock exchange; its times stay unaligned\n", p);
          break;
        }
        const std::uint64_t t1 = h.pong_arrival;
        const std::uint64_t err = (t1 - t0) / 2;
        if (err < best.error) {
          best.error = err;
          best.local = h.pong_time;
          best.offset = static_cast<std::int64_t>(h.pong_time) - static_cast<std::int64_t>(t0 + err);
        }
      }
      if (best.error == ~std::uint64_t{0}) best.error = 0;
      all[static_cast<std::size_t>(p)] = best;
    }
    for (int p = 1; p < tp.size(); ++p) send_small(tp, p, m_done, nullptr, 0);
    mine = clock_sample{now(), 0, 0};
    all[0] = mine;
  } else {
    poll_for(tp, h, [&] {
      if (h.ping_round >= 0) {
        const std::int32_t r = h.ping_round;
        const std::uint64_t t = now();
        std::byte pong[sizeof r + sizeof t];
        std::memcpy(pong, &r, sizeof r);
        std::memcpy(pong + sizeof r, &t, sizeof t);
        h.ping_round = -1;
        send_small(tp, 0, m_pong, pong, sizeof pong);
      }
      return h.done;
    }, collective_limit);
    mine = clock_sample{};
  }
  tp.barrier();
}

// Every place's record to place 0, in pieces that fit a message; place 0 acknowledges once it has them all.
void gather(transport::transport& tp, std::vector<std::byte> mine) {
  const int size = tp.size();
  if (tp.rank() == 0) {
    g.blobs.assign(static_cast<std::size_t>(size), {});
    g.blobs[0] = std::move(mine);
    if (size == 1) return;
    collect_handler h;
    h.blobs = &g.blobs;
    h.received.assign(static_cast<std::size_t>(size), 0);
    if (!poll_for(tp, h, [&] { return h.complete == size - 1 || !h.problem.empty(); }, collective_limit) ||
        !h.problem.empty()) {
      std::fprintf(stderr, "apgas: trace: the records of the other places did not all arrive%s%s\n",
                   h.problem.empty() ? "" : ": ", h.problem.c_str());
      for (int p = 1; p < size; ++p) {
        if (h.received[static_cast<std::size_t>(p)] != g.blobs[static_cast<std::size_t>(p)].size() ||
            g.blobs[static_cast<std::size_t>(p)].empty()) {
          g.blobs[static_cast<std::size_t>(p)].clear();
        }
      }
    }
    for (int p = 1; p < size; ++p) send_small(tp, p, m_ack, nullptr, 0);
    return;
  }
  const std::size_t piece = std::min<std::size_t>(tp.max_message() - 64, std::size_t{4} << 20);
  const std::uint64_t total = mine.size();
  for (std::uint64_t off = 0; off < total; off += piece) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece, total - off));
    std::vector<std::byte> m(1 + 16 + n);
    m[0] = static_cast<std::byte>(m_chunk);
    std::memcpy(m.data() + 1, &off, 8);
    std::memcpy(m.data() + 9, &total, 8);
    std::memcpy(m.data() + 17, mine.data() + off, n);
    tp.send(0, std::move(m));
  }
  collect_handler h;
  if (!poll_for(tp, h, [&] { return h.acked; }, collective_limit)) {
    std::fprintf(stderr, "apgas: trace: place %d: place 0 did not acknowledge its record\n", tp.rank());
  }
}

void on_terminate() {
  emergency_dump("std::terminate was called");
  if (g.previous_terminate != nullptr) g.previous_terminate();
  std::abort();
}

std::string placeholder_text() {
  return "{\"traceEvents\":[],\"otherData\":{\"apgas\":\"this run has not written its trace: it is still running, or "
         "it ended before it could; a place that failed wrote what it recorded to <this file>.place<N>.json\"}}\n";
}

// path, relative to the working directory now where it is relative; as it is where that is unknown.
std::string absolute_path(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  char buf[4096];
  if (::getcwd(buf, sizeof buf) == nullptr) return path;
  return std::string(buf) + "/" + path;
}

// The name the trace is written to before it replaces a regular file at `path` (finish()).
std::string temp_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

// Where a trace path that names a symbolic link (or a chain of them) leads: the trace replaces the link's target and
// the link stays. (Written at the link itself, the placeholder went into the target and the finished trace, renamed
// over the link, replaced the link by a regular file.) A path that is not a link is itself; so is a loop of links,
// which check_trace_path then refuses.
std::string follow_links(std::string path) {
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    char buf[4096];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return path;
    std::string target(buf, static_cast<std::size_t>(n));
    const auto slash = path.rfind('/');
    if (target.front() != '/' && slash != std::string::npos) target = path.substr(0, slash + 1) + target;
    path = std::move(target);
  }
  return path;
}

// Start-up: whether the trace can be written at `path` at the end of the run, trying what finish() will do. A
// character device or a FIFO (/dev/null, a pipe) is written as it is: it must be writable now. Any other file that
// is not a regular one (a directory, a socket) is refused. Otherwise the temporary file beside it is created and
// removed (so the directory's permissions and the length of that name are checked), then the placeholder is
// written at `path`. Returns "" or the reason, naming the file that failed where it is not `path`.
std::string check_trace_path(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      if (::access(path.c_str(), W_OK) != 0) return std::strerror(errno);
      return {};
    }
    return S_ISDIR(st.st_mode) ? "it is a directory" : "it is neither a regular file, a character device nor a FIFO";
  }
  // The temporary file first: where it cannot be made, the file at `path` is left as it was.
  const std::string tmp = temp_name(path);
  std::FILE* t = std::fopen(tmp.c_str(), "w");
  if (t == nullptr) {
    const int err = errno;
    return "cannot create '" + tmp + "', where the trace is written at the end before it replaces the file: " +
           std::strerror(err);
  }
  std::fclose(t);
  std::remove(tmp.c_str());
  std::FILE* f = std::fopen(path.c_str(), "w");
  int err = errno;
  if (f == nullptr) return std::strerror(err);
  const std::string text = placeholder_text();
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return std::strerror(err);
  return {};
}

std::vector<place_info> places_of(const place_tree& t) {
  std::vector<place_info> out;
  for (std::size_t i = 0; i < t.all.size(); ++i) {
    place_info p;
    p.description = i < t.description.size() ? t.description[i] : std::string();
    if (static_cast<int>(i) >= t.num_hosts) p.parent = t.parent_of[i - static_cast<std::size_t>(t.num_hosts)];
    out.push_back(std::move(p));
  }
  return out;
}

std::string micro(std::int64_t ns) {
  char b[64];
  std::snprintf(b, sizeof b, "%+.1f us", static_cast<double>(ns) / 1000.0);
  return b;
}

}  // namespace

// ---- settings ----

std::uint32_t parse_filter(const std::string& filter, const char* var) {
  static constexpr struct {
    const char* name;
    std::uint32_t bits;
  } names[] = {{"all", cat_all},         {"activity", cat_activity}, {"finish", cat_finish}, {"park", cat_park},
               {"at", cat_at},           {"message", cat_message},   {"team", cat_team},     {"gpu", cat_gpu},
               {"copy", cat_copy},       {"counter", cat_counter}};
  const auto reject = [&](const std::string& why) {
    std::string accepted;
    for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + std::string(n.name);
    throw config_error(std::string("invalid ") + var + "='" + filter + "': " + why +
                       "; expected a comma-separated list of categories (" + accepted +
                       "), each optionally prefixed with '-' to take it out (e.g. all,-park)");
  };
  std::uint32_t m = 0;
  std::size_t start = 0;
  for (bool first = true;; first = false) {
    const std::size_t comma = filter.find(',', start);
    std::string item = filter.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool minus = !item.empty() && item[0] == '-';
    if (minus) item.erase(0, 1);
    if (item.empty()) reject("an empty category");
    std::uint32_t bits = 0;
    for (const auto& n : names) {
      if (item == n.name) bits = n.bits;
    }
    if (bits == 0) reject("unknown category '" + item + "'");
    if (first && minus) m = cat_all;
    m = minus ? (m & ~bits) : (m | bits);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (m == 0) reject("no category is left");
  return m;
}

// ---- recording ----

std::uint64_t now() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void span_begin(std::uint32_t cat, const char* name, std::uint64_t arg, std::uint64_t flow_in, int peer) noexcept {
  if (!on(cat)) return;
  const std::uint64_t ts = now();
  record(flow_in != 0 ? 2 : 1, [&](event* e, buffer&) {
    e[0] = event{ts, reinterpret_cast<std::uint64_t>(name), arg, cat, k_span_begin,
                 static_cast<std::uint16_t>(peer + 1)};
    if (flow_in != 0) e[1] = event{ts, flow_in, 0, 0, k_flow_in, 0};
  });
}

void span_end(std::uint32_t cat) noexcept {
  if (!on(cat)) return;
  const std::uint64_t ts = now();
  record(1, [&](event* e, buffer&) { e[0] = event{ts, 0, 0, cat, k_span_end, 0}; });
}

std::uint64_t flow_out(std::uint32_t cat, flow kind, std::uint64_t arg) noexcept {
  if (!on(cat)) return 0;
  const std::uint64_t ts = now();
  std::uint64_t id = 0;
  record(1, [&](event* e, buffer& b) {
    id = next_flow(b);
    e[0] = event{ts, id, arg, 0, k_flow_out, static_cast<std::uint16_t>(kind)};
  });
  return id;
}

void counter(std::uint32_t cat, const char* name, int place, std::uint64_t value) noexcept {
  if (!on(cat)) return;
  const std::uint64_t ts = now();
  record(1, [&](event* e, buffer&) {
    e[0] = event{ts, reinterpret_cast<std::uint64_t>(name), value, cat, k_counter, static_cast<std::uint16_t>(place + 1)};
  });
}

void device_span(std::uint32_t cat, const char* name, int gpu_place, int track, std::uint64_t start_ns,
                 std::uint64_t end_ns, std::uint64_t flow_in, std::uint64_t bytes) noexcept {
  if (!on(cat)) return;
  record(2, [&](event* e, buffer&) {
    e[0] = event{start_ns, reinterpret_cast<std::uint64_t>(name), flow_in, cat, k_device_span,
                 static_cast<std::uint16_t>(track)};
    e[1] = event{end_ns, bytes, 0, static_cast<std::uint32_t>(gpu_place), k_device_ext, 0};
  });
}

void stat_kernel(int gpu_place) noexcept {
  const int q = gpu_place - g.first_gpu;
  if (g.gpu == nullptr || q < 0 || q >= g.gpus) return;
  g.gpu[static_cast<std::size_t>(q) * gpu_fields + f_kernels].fetch_add(1, std::memory_order_relaxed);
}

void stat_copy(int gpu_place, int direction, std::size_t bytes) noexcept {
  const int q = gpu_place - g.first_gpu;
  if (g.gpu == nullptr || q < 0 || q >= g.gpus || direction < 0 || direction > 2) return;
  const std::size_t at = static_cast<std::size_t>(q) * gpu_fields;
  g.gpu[at + f_copies0 + static_cast<std::size_t>(direction)].fetch_add(1, std::memory_order_relaxed);
  g.gpu[at + f_bytes0 + static_cast<std::size_t>(direction)].fetch_add(bytes, std::memory_order_relaxed);
}

// ---- hooks of the core ----

void activity_begin(worker* w, task& t) noexcept {
  buffer* b = own_buffer();
  if (b == nullptr) return;
  const std::uint32_t m = mask();
  if ((m & stats) != 0) ++b->st.run;
  if ((m & cat_activity) == 0 && (m & cat_counter) == 0) return;
  const std::uint64_t ts = now();
  if ((m & cat_activity) != 0) {
    const std::uint64_t flow = t.trace_flow;
    put(*b, flow != 0 ? 2 : 1, [&](event* e, buffer&) {
      e[0] = event{ts, reinterpret_cast<std::uint64_t>(t.trace_name()), 0, 0, k_act_begin, 0};
      if (flow != 0) e[1] = event{ts, flow, 0, 0, k_flow_in, 0};
    });
  }
  if ((m & cat_counter) != 0 && ts - b->last_sample >= sample_period_ns) {
    b->last_sample = ts;
    const char* name = g.deque_names[static_cast<std::size_t>(w->index)].c_str();
    const std::uint64_t depth = w->deque.size_hint();
    put(*b, 1, [&](event* e, buffer&) { e[0] = event{ts, reinterpret_cast<std::uint64_t>(name), depth, cat_counter, k_counter, 0}; });
  }
}

void activity_end() noexcept {
  if (!on(cat_activity)) return;
  const std::uint64_t ts = now();
  record(1, [&](event* e, buffer&) { e[0] = event{ts, 0, 0, 0, k_act_end, 0}; });
}

void spawned(task& t) noexcept { t.trace_flow = flow_out(cat_activity, flow::spawn); }

void switched(const void* from, const void* to) noexcept {
  if (!on(cat_all)) return;
  const std::uint64_t ts = now();
  record(1, [&](event* e, buffer&) {
    e[0] = event{ts, reinterpret_cast<std::uint64_t>(from), reinterpret_cast<std::uint64_t>(to), 0, k_switch, 0};
  });
}

void parked() noexcept {
  if (!on(stats)) return;
  if (buffer* b = own_buffer()) ++b->st.parks;
}

void stolen() noexcept {
  if (!on(stats)) return;
  if (buffer* b = own_buffer()) ++b->st.stolen;
}

void finish_wait_begin() noexcept {
  if (on(stats)) {
    if (buffer* b = own_buffer()) ++b->st.finish_waits;
  }
  span_begin(cat_finish, "finish wait");
}

void finish_wait_end() noexcept { span_end(cat_finish); }

std::uint64_t message_send_begin(int dst, std::size_t bytes, unsigned kind) noexcept {
  if (on(stats)) {
    if (auto* c = peer_counter(dst, f_msgs_sent)) {
      c[0].fetch_add(1, std::memory_order_relaxed);
      c[1].fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  if (!on(cat_message)) return 0;
  span_begin(cat_message, name_of(send_names, kind), bytes, 0, dst);
  const std::uint64_t ts = now();
  std::uint64_t id = 0;
  record(1, [&](event* e, buffer& b) {
    id = next_flow(b);
    e[0] = event{ts, id, bytes, static_cast<std::uint32_t>(dst + 1), k_flow_out,
                 static_cast<std::uint16_t>(flow::message)};
  });
  return id;
}

void message_send_end() noexcept { span_end(cat_message); }

void message_received(int src, std::size_t bytes, unsigned kind, std::uint64_t flow_id) noexcept {
  if (on(stats)) {
    if (auto* c = peer_counter(src, f_msgs_recv)) {
      c[0].fetch_add(1, std::memory_order_relaxed);
      c[1].fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  span_begin(cat_message, name_of(handle_names, kind), bytes, flow_id, src);
}

void bulk_sent(int dst, std::size_t bytes) noexcept {
  if (!on(stats)) return;
  if (auto* c = peer_counter(dst, f_bytes_sent)) c->fetch_add(bytes, std::memory_order_relaxed);
}

void bulk_received(int src, std::size_t bytes) noexcept {
  if (!on(stats)) return;
  if (auto* c = peer_counter(src, f_bytes_recv)) c->fetch_add(bytes, std::memory_order_relaxed);
}

void idle_timer::add_idle(std::uint64_t ns) noexcept {
  if (buffer* b = own_buffer()) b->st.idle_ns += ns;
}

// ---- the run's life cycle ----

bool prepare(const config& cfg, transport::transport& tp) {
  struct head {
    std::uint32_t mask;
    std::uint32_t ok;
    std::uint64_t buffer;
    std::uint64_t path_bytes;
  };
  // Place 0's file: the target of a link (follow_links), made absolute (the program may change its working directory
  // before the end, where the trace is written: the placeholder stayed in the first directory and the trace went to
  // the second); its name goes to every place.
  const std::string file =
      tp.rank() == 0 && !cfg.trace_file.empty() ? follow_links(absolute_path(cfg.trace_file)) : cfg.trace_file;
  head mine{0, 1, cfg.trace_buffer, file.size()};
  if (!cfg.trace_file.empty()) mine.mask |= parse_filter(cfg.trace_filter, "APGAS_TRACE_FILTER");
  if (cfg.stats) mine.mask |= stats;
  if (tp.rank() == 0 && mine.mask != 0) {
#if defined(APGAS_DETAIL_NO_TRACE)
    std::fprintf(stderr, "apgas: %s is set, but this apgas was built without tracing and statistics "
                 "(APGAS_TRACE_BUILD=OFF)\n", cfg.trace_file.empty() ? "APGAS_STATS" : "APGAS_TRACE");
    mine.ok = 0;
#else
    if (!cfg.trace_file.empty()) {
      const std::string why = check_trace_path(file);
      if (!why.empty()) {
        const std::string target = file == cfg.trace_file ? std::string() : " (a link to '" + file + "')";
        std::fprintf(stderr,
                     "apgas: start-up failed at place 0: cannot write the trace file '%s'%s (APGAS_TRACE): %s\n",
                     cfg.trace_file.c_str(), target.c_str(), why.c_str());
        mine.ok = 0;
      }
    }
#endif
  }
  const std::vector<std::byte> heads = tp.allgather(std::as_bytes(std::span(&mine, 1)));
  head h0{};
  std::memcpy(&h0, heads.data(), sizeof h0);
  if (h0.ok == 0) return false;
  std::string path;
  if (h0.path_bytes != 0) {
    std::string contribution = tp.rank() == 0 ? file : std::string();
    contribution.resize(static_cast<std::size_t>(h0.path_bytes), '\0');
    const std::vector<std::byte> all = tp.allgather(std::as_bytes(std::span(contribution.data(), contribution.size())));
    path.assign(reinterpret_cast<const char*>(all.data()), static_cast<std::size_t>(h0.path_bytes));
  }
  g.mask = h0.mask;
  g.buffer_bytes = static_cast<std::size_t>(h0.buffer);
  g.path = std::move(path);
  return true;
}

void start(transport::transport& tp, int workers) {
  if (g.mask == 0) return;
  g.active = true;
  g.place = tp.rank();
  g.hosts = tp.size();
  const place_tree& t = tree();
  g.first_gpu = t.num_hosts + t.gpus_before_here;
  g.gpus = static_cast<int>(t.children[static_cast<std::size_t>(t.here_host)].size());
  g.places = places_of(t);
  g.workers = workers;
  g.bufs = std::make_unique<buffer[]>(static_cast<std::size_t>(workers) + 1);
  g.peer = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(g.hosts) * peer_fields);
  g.gpu = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(g.gpus) * gpu_fields + 1);
  g.deque_names.clear();
  for (int i = 0; i < workers; ++i) g.deque_names.push_back("deque depth w" + std::to_string(i));
  g.sync_start = g.sync_end = clock_sample{};
  g_dumped.store(false);
  g_dump_done.store(false);
  if (tracing()) {
    // The buffers: one reservation, touched only as events are written (no allocation per event, ever).
    g.capacity = std::max<std::size_t>(g.buffer_bytes / sizeof(event), 16);
    const std::size_t per = g.capacity * sizeof(event);
    const std::size_t bytes = per * (static_cast<std::size_t>(workers) + 1);
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "apgas: trace: place %d cannot reserve %zu bytes for its trace buffers (%d x %zu, "
                   "APGAS_TRACE_BUFFER): it records nothing\n", g.place, bytes, workers + 1, per);
    } else {
      g.mapping = m;
      g.mapping_bytes = bytes;
      // Transparent huge pages where the kernel gives them on request: one page fault per 2 MiB written instead
      // of one per 4 KiB (the faults were most of the cost of recording; decision 0012 has the figures); a worker
      // that records anything touches at least one such page. Best effort: ignored where refused.
      (void)madvise(m, bytes, MADV_HUGEPAGE);
      for (int i = 0; i <= workers; ++i) {
        buffer& b = g.bufs[static_cast<std::size_t>(i)];
        b.begin = static_cast<event*>(m) + static_cast<std::size_t>(i) * g.capacity;
        b.end = b.begin + g.capacity;
        b.cur.store(b.begin, std::memory_order_relaxed);
      }
    }
    if (g.hosts > 1) clock_sync(tp, g.sync_start, g.all_start);
    g.previous_terminate = std::set_terminate(&on_terminate);
  }
  g.t_start = now();
  g_mask.store(g.mask, std::memory_order_release);
}

void stop(transport::transport& tp) {
  if (!g.active) return;
  g_mask.store(0, std::memory_order_release);
  g.t_stop = now();
  if (tracing()) std::set_terminate(g.previous_terminate);
  if (g.hosts > 1) {
    tp.barrier();  // every place's workers have stopped: nothing but what follows is sent any more
    if (tracing()) clock_sync(tp, g.sync_end, g.all_end);
  }
  gather(tp, encode());
}

void finish() {
  if (!g.active) return;
  if (g.place == 0) {
    std::vector<place_record> records;
    for (std::size_t p = 0; p < g.blobs.size(); ++p) {
      if (g.blobs[p].empty()) continue;
      try {
        records.push_back(decode(g.blobs[p]));
        place_record& r = records.back();
        if (p != 0 && p < g.all_start.size()) r.sync_start = g.all_start[p];
        if (p != 0 && p < g.all_end.size()) r.sync_end = g.all_end[p];
      } catch (const std::exception& e) {
        std::fprintf(stderr, "apgas: trace: the record of place %zu is unreadable: %s\n", p, e.what());
      }
    }
    if (tracing() && !g.path.empty()) {
      // A regular file is replaced in one step (a reader never sees half of it); anything else (/dev/null, a pipe)
      // is written as it is.
      struct stat st {};
      const bool in_place = ::stat(g.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
      const std::string tmp = in_place ? g.path : temp_name(g.path);
      std::uint64_t written = 0;
      std::string why;  // what failed, naming the temporary file where that is what failed
      const auto fail = [&](const std::string& what) {
        const int err = errno;
        if (why.empty()) why = what + (err != 0 ? std::string(": ") + std::strerror(err) : std::string());
      };
      const std::string step = tmp == g.path ? std::string() : "writing '" + tmp + "'";
      errno = 0;
      std::FILE* f = std::fopen(tmp.c_str(), "w");
      if (f == nullptr) {
        fail(step.empty() ? "opening it" : step);
      } else {
        try {
          written = write_json(f, records, g.places, g.mask, true);
        } catch (const std::exception& e) {
          fail((step.empty() ? std::string("writing it") : step) + " (" + e.what() + ")");
        }
        if (std::fclose(f) != 0) fail(step.empty() ? "closing it" : step);
      }
      if (why.empty() && !in_place && std::rename(tmp.c_str(), g.path.c_str()) != 0) {
        fail("renaming '" + tmp + "' to it");
      }
      const bool ok = why.empty();
      if (!ok) {
        std::fprintf(stderr, "apgas: trace: cannot write '%s': %s\n", g.path.c_str(), why.c_str());
        if (!in_place) std::remove(tmp.c_str());
      } else {
        std::uint64_t dropped = 0, recorded = 0;
        for (const place_record& r : records) {
          dropped += r.dropped;
          for (const auto& s : r.streams) recorded += s.size();
        }
        std::string clocks;
        for (const place_record& r : records) {
          if (r.place == 0) continue;
          clocks += "; place " + std::to_string(r.place) + " " + micro(r.sync_start.offset) + " +- " +
                    micro(static_cast<std::int64_t>(r.sync_start.error)).substr(1) + " at start, " +
                    micro(r.sync_end.offset) + " +- " + micro(static_cast<std::int64_t>(r.sync_end.error)).substr(1) +
                    " at end";
        }
        std::fprintf(stderr, "apgas: trace: wrote '%s': %llu JSON events from %llu recorded, %llu dropped%s%s\n",
                     g.path.c_str(), static_cast<unsigned long long>(written),
                     static_cast<unsigned long long>(recorded), static_cast<unsigned long long>(dropped),
                     clocks.empty() ? "" : "; clock offsets", clocks.c_str());
        for (const place_record& r : records) {
          if (r.dropped != 0) {
            std::fprintf(stderr, "apgas: trace: place %d dropped %llu events: its buffers (%llu events per worker, "
                         "APGAS_TRACE_BUFFER) were full, its part of the trace ends early\n", r.place,
                         static_cast<unsigned long long>(r.dropped), static_cast<unsigned long long>(r.capacity));
          }
        }
      }
    }
    if ((g.mask & stats) != 0) {
      const std::string table = stats_table(records, g.places);
      std::fwrite(table.data(), 1, table.size(), stderr);
    }
    std::fflush(stderr);
  }
  if (g.mapping != nullptr) munmap(g.mapping, g.mapping_bytes);
  g.mapping = nullptr;
  g.bufs.reset();
  g.peer.reset();
  g.gpu.reset();
  g.blobs.clear();
  g.all_start.clear();
  g.all_end.clear();
  g.active = false;
  g.mask = 0;
}

void emergency_dump(const char* why) noexcept {
  if (!g.active || !tracing() || g.path.empty() || g.bufs == nullptr) return;
  if (g_dumped.exchange(true)) {
    // Another thread is writing the dump: returning now would let this one end the process under it (two
    // activities calling std::terminate together left no dump). Wait for it, 10 s at most.
    for (int i = 0; i < 10000 && !g_dump_done.load(std::memory_order_acquire); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return;
  }
  struct done {
    ~done() { g_dump_done.store(true, std::memory_order_release); }
  } at_end;
  try {
    struct stat st {};
    if (::stat(g.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {  // /dev/null, a FIFO: no file beside it
      std::fprintf(stderr,
                   "apgas: trace: place %d did not write what it recorded (%s): the trace goes to '%s', which is not "
                   "a regular file, and no file is made beside it\n",
                   g.place, why, g.path.c_str());
      return;
    }
    std::vector<place_record> records{decode(encode())};
    // Written beside and renamed when whole: a launcher may end this process while it writes (mpirun sends SIGTERM
    // to the survivors of a dead place), which left a file cut off mid-record where the placeholder sends users.
    const std::string file = g.path + ".place" + std::to_string(g.place) + ".json";
    const std::string part = file + ".part";
    std::FILE* f = std::fopen(part.c_str(), "w");
    bool encoded = true;
    try {
      if (f != nullptr) write_json(f, records, g.places, g.mask, false);
    } catch (...) {  // (no memory for the text: no file, and the message below)
      encoded = false;
      errno = ENOMEM;
    }
    const bool written = f != nullptr && std::fclose(f) == 0 && encoded;
    if (written && std::rename(part.c_str(), file.c_str()) == 0) {
      std::fprintf(stderr, "apgas: trace: place %d wrote what it recorded to '%s' (%s)\n", g.place, file.c_str(), why);
    } else {  // (the placeholder at the trace's path says a failed place writes there: say that it could not)
      const int err = errno;
      std::remove(part.c_str());
      std::fprintf(stderr, "apgas: trace: place %d could not write what it recorded to '%s' (%s): %s\n", g.place,
                   file.c_str(), why, std::strerror(err));
    }
  } catch (...) {
  }
}

}  // namespace apgas::detail::obs
