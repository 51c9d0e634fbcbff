// Messages larger than the transport takes in one message (its max_message, or config::message_piece): a rendezvous
// over the transport's bulk path. The sender keeps the encoded message and announces it (large_message: its size,
// the piece size and one bulk tag per piece); the receiver allocates the whole message, receives the pieces into
// it, and once all have landed delivers it like any other message and acknowledges it (large_done), whereupon the
// sender frees it. Nothing above the transport knows: send() and dist_state::on_message see the whole message.
//
// Invariants: a large message is counted (finish, statistics) as the one message it is; the sender's copy lives
// until the receiver's large_done or the end of the run (the transport's final barrier completes every transfer
// before dist_state goes); pieces land on the polling thread (the transport's done callback), and the whole message
// is delivered by the poll hook after the transport's poll returns (never inside it: delivery may start bulk
// receives of its own).
#include "dist_state.hpp"
#include "runtime.hpp"

#include <apgas/serialization/archive.hpp>
#include <apgas/transport/transport.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace apgas::detail {

struct large_in {
  int src;
  std::uint64_t id;
  std::vector<std::byte> bytes;
  std::atomic<std::uint32_t> missing;  // pieces not landed yet
};

namespace {

void piece_landed(void* ctx) {
  auto* m = static_cast<large_in*>(ctx);
  if (m->missing.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  d.large_ready.push_back(m);
  d.large_ready_count.store(d.large_ready.size(), std::memory_order_release);
}

}  // namespace

std::uint64_t next_large_id() noexcept {
  static std::atomic<std::uint64_t> next{1};  // of the process: see dist_state::first_large
  return next.fetch_add(1, std::memory_order_relaxed);
}

void transmit(int dst, std::vector<std::byte> bytes) {
  dist_state& d = *g_dist;
  if (bytes.size() <= d.piece_bytes) [[likely]] {
    d.tp->send(dst, std::move(bytes));
    return;
  }
  transport::transport& tp = *d.tp;
  const std::size_t piece = d.piece_bytes;
  const std::size_t total = bytes.size();
  const std::uint64_t pieces = (total + piece - 1) / piece;
  const std::uint64_t id = next_large_id();
  writer w = message_writer(64 + 4 * pieces);
  w & msg::large_message & id & static_cast<std::uint64_t>(total) & static_cast<std::uint64_t>(piece) & pieces;
  std::vector<std::uint32_t> tags(pieces);
  for (auto& t : tags) {
    t = tp.next_bulk_tag(dst);
    w & t;
  }
  const std::byte* data = nullptr;
  {
    std::lock_guard lock(d.mutex);
    auto& kept = d.large_out[id];
    kept = std::move(bytes);
    data = kept.data();  // stable: the vector's buffer does not move with the map node
  }
  tp.send(dst, w.take());
  for (std::uint64_t k = 0; k < pieces; ++k) {
    const std::size_t off = static_cast<std::size_t>(k) * piece;
    tp.send_bulk(dst, tags[k], {data + off, std::min(piece, total - off)});
  }
}

void deliver_large(int src, reader& r) {
  std::uint64_t id = 0, total = 0, piece = 0, pieces = 0;
  r & id & total & piece & pieces;
  if (piece == 0 || pieces != (total + piece - 1) / piece || total <= piece || r.remaining() != 4 * pieces) {
    throw serialization_error("apgas: malformed message: a large message of " + std::to_string(total) +
                              " bytes in " + std::to_string(pieces) + " pieces of " + std::to_string(piece));
  }
  auto* m = new large_in{src, id, {}, {static_cast<std::uint32_t>(pieces)}};
  try {
    m->bytes.resize(static_cast<std::size_t>(total));
  } catch (const std::bad_alloc&) {
    // The message cannot be received and its sender cannot be told which finish to charge: stop, saying why.
    std::fprintf(stderr, "apgas: place %d: cannot allocate %llu bytes for a message from place %d: out of memory\n",
                 g_dist->rank, static_cast<unsigned long long>(total), src);
    std::fflush(stderr);
    end_process(3);
  }
  transport::transport& tp = *g_dist->tp;
  for (std::uint64_t k = 0; k < pieces; ++k) {
    std::uint32_t tag = 0;
    r & tag;
    const std::size_t off = static_cast<std::size_t>(k * piece);
    tp.recv_bulk(src, tag, std::span(m->bytes).subspan(off, std::min<std::size_t>(piece, total - off)),
                 &piece_landed, m);
  }
}

void deliver_large_done(reader& r) {
  std::uint64_t id = 0;
  r & id;
  std::vector<std::byte> freed;  // freed outside the lock
  std::lock_guard lock(g_dist->mutex);
  auto it = g_dist->large_out.find(id);
  if (it == g_dist->large_out.end()) {
    if (id < g_dist->first_large) return;  // the late acknowledgement of an earlier run's message
    throw serialization_error("apgas: malformed message: unknown large message " + std::to_string(id));
  }
  freed = std::move(it->second);
  g_dist->large_out.erase(it);
}

namespace {
thread_local std::vector<std::byte>* t_whole = nullptr;  // the large message being delivered on this thread
}

void deliver_landed_large(dist_state& d) {
  std::vector<large_in*> ready;
  {
    std::lock_guard lock(d.mutex);
    ready.swap(d.large_ready);
    d.large_ready_count.store(0, std::memory_order_release);
  }
  for (large_in* m : ready) {
    writer w = message_writer(16);
    w & msg::large_done & m->id;
    send(m->src, std::move(w));
    t_whole = &m->bytes;
    d.on_message(m->src, m->bytes);
    t_whole = nullptr;
    delete m;
  }
}

bool take_whole_message(std::span<const std::byte> bytes, std::vector<std::byte>& into) noexcept {
  std::vector<std::byte>* whole = t_whole;
  if (whole == nullptr || whole->data() != bytes.data() || bytes.size() > whole->size()) return false;
  into = std::move(*whole);
  into.resize(bytes.size());
  t_whole = nullptr;
  return true;
}

}  // namespace apgas::detail
