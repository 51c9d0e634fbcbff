// Bulk copies between host places (async_copy): the bulk_put and bulk_get messages, whose payloads go through the
// transport's bulk path, each bounds-checked against this place's remote arrays (arrays.cpp). Their messages are
// counted by the distributed finish (dist_finish.cpp) like activity messages.
#include "dist_state.hpp"

#include "finish.hpp"
#include "obs.hpp"
#include "scheduler.hpp"

#include <apgas/error.hpp>
#include <apgas/global.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/transport/transport.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace apgas::detail {

// The target of a bulk_put: a remote array's range, a ticket of the requester's get, or (no payload) the answer
// to a get whose source range was rejected: the ticket is withdrawn, so the requester keeps nothing for it.
enum class target_kind : std::uint8_t { array = 0, ticket = 1, ticket_withdrawn = 2 };

// ---- bulk transfers (async_copy) ----
// The announcing message is counted like an activity message; the receiving side counts the receipt and completes
// that "activity" when the payload has landed (the transport's done callback), so the finish covers the data.

namespace {

void landed(void* ctx) { static_cast<finish_state*>(ctx)->complete(); }

// A put whose target was rejected: its payload is still received (the sender's finish waits for it to land), into
// a scratch buffer that is freed when it has, and the rejection is the exception of the finish that sent it.
struct discarded_put {
  finish_state& fs;
  std::vector<std::byte> bytes;
};

void discarded_landed(void* ctx) {
  auto* p = static_cast<discarded_put*>(ctx);
  finish_state& fs = p->fs;
  delete p;
  fs.complete();
}

std::span<std::byte> put_target(target_kind kind, std::uint64_t where, std::uint64_t n, std::uint32_t serial) {
  if (kind == target_kind::array) return checked_array_range(where, n, serial);
  if (kind == target_kind::ticket) {
    std::lock_guard lock(g_dist->mutex);
    auto it = g_dist->tickets.find(where);
    if (it == g_dist->tickets.end() || it->second.size() != n) {
      throw serialization_error("apgas: malformed message: unknown copy ticket " + std::to_string(where));
    }
    const std::span<std::byte> target = it->second;
    g_dist->tickets.erase(it);
    return target;
  }
  throw serialization_error("apgas: malformed message: copy target kind " + std::to_string(static_cast<int>(kind)));
}

// `serial`: the target array's (kind array), else 0.
void put_locked_in(finish_state& fs, int dst, target_kind kind, std::uint64_t where, std::uint32_t serial,
                   std::span<const std::byte> data) {
  transport::transport& tp = *g_dist->tp;
  const std::size_t piece = tp.max_message();
  for (std::size_t off = 0; off < data.size() || off == 0; off += piece) {
    const std::size_t n = std::min(piece, data.size() - off);
    const std::uint32_t tag = tp.next_bulk_tag(dst);
    const fid f = count_send(fs, dst);
    writer w = message_writer(128);
    w & msg::bulk_put & f.home & f.serial & tag & kind &
        static_cast<std::uint64_t>(kind == target_kind::array ? where + off : where) & static_cast<std::uint64_t>(n) &
        serial;
    send(dst, std::move(w));
    if (kind == target_kind::ticket_withdrawn) break;  // the answer to a rejected get: no payload
    try {
      tp.send_bulk(dst, tag, data.subspan(off, n));
    } catch (const std::exception& e) {  // (announced and counted: its receiver and finish would wait for ever)
      stop_on_transport_failure(e, "a transfer of " + std::to_string(n) + " bytes to place " + std::to_string(dst) +
                                       " could not be sent");
    }
    if (obs::on(obs::stats)) obs::bulk_sent(dst, n);
    if (kind == target_kind::ticket) break;  // a ticket is one piece (get_bytes splits before asking)
  }
}

}  // namespace

void deliver_put(int src, reader& r) {
  fid f{};
  std::uint32_t tag = 0;
  target_kind kind{};
  std::uint64_t where = 0, n = 0;
  std::uint32_t serial = 0;
  r & f.home & f.serial & tag & kind & where & n & serial;
  transport::transport& tp = *g_dist->tp;
  // Counted first: from here on a rejection is charged to the sender's finish instead of leaving it waiting.
  finish_state& fs = count_receipt(f);
  if (kind == target_kind::ticket_withdrawn) {  // no payload follows; the get's finish already has the exception
    {
      std::lock_guard lock(g_dist->mutex);
      g_dist->tickets.erase(where);
    }
    fs.complete();
    return;
  }
  std::span<std::byte> target;
  try {
    target = put_target(kind, where, n, serial);
  } catch (...) {
    fs.add_exception(std::current_exception());
    if (n > tp.max_message()) {  // no sender splits pieces larger than this: there is no payload to drain
      fs.complete();
      return;
    }
    if (obs::on(obs::stats)) obs::bulk_received(src, static_cast<std::size_t>(n));
    auto* sink = new discarded_put{fs, std::vector<std::byte>(static_cast<std::size_t>(n))};
    tp.recv_bulk(src, tag, sink->bytes, &discarded_landed, sink);
    return;
  }
  if (obs::on(obs::stats)) obs::bulk_received(src, static_cast<std::size_t>(n));
  tp.recv_bulk(src, tag, target, &landed, &fs);
}

void deliver_get(int src, reader& r) {
  fid f{};
  std::uint64_t from = 0, n = 0, ticket = 0;
  std::uint32_t serial = 0;
  r & f.home & f.serial & from & n & ticket & serial;
  finish_state& fs = count_receipt(f);
  // Answer with a put (counted as a new activity message of the same finish), then this "activity" is done. A
  // rejected source range is this finish's exception, and the answer withdraws the requester's ticket instead.
  std::span<std::byte> source;
  target_kind answer = target_kind::ticket;
  try {
    source = checked_array_range(from, n, serial);
  } catch (...) {
    fs.add_exception(std::current_exception());
    answer = target_kind::ticket_withdrawn;
  }
  try {
    put_locked_in(fs, src, answer, ticket, 0, source);
  } catch (...) {
    fs.add_exception(std::current_exception());
  }
  fs.complete();
}

void put_bytes(place p, std::uintptr_t to, std::uint32_t serial, std::span<const std::byte> data) {
  task& cur = require_unrestricted_activity("apgas::async_copy");
  put_locked_in(*cur.innermost, p.id(), target_kind::array, to, serial, data);
}

void get_bytes(place p, std::uintptr_t from, std::uint32_t serial, std::span<std::byte> into) {
  task& cur = require_unrestricted_activity("apgas::async_copy");
  dist_state& d = *g_dist;
  const std::size_t piece = d.tp->max_message();
  for (std::size_t off = 0; off < into.size(); off += piece) {
    const std::size_t n = std::min(piece, into.size() - off);
    std::uint64_t ticket = 0;
    {
      std::lock_guard lock(d.mutex);
      ticket = d.next_ticket++;
      d.tickets.emplace(ticket, into.subspan(off, n));
    }
    const fid f = count_send(*cur.innermost, p.id());
    writer w = message_writer(128);
    w & msg::bulk_get & f.home & f.serial & static_cast<std::uint64_t>(from + off) & static_cast<std::uint64_t>(n) &
        ticket & serial;
    send(p.id(), std::move(w));
  }
}

std::size_t copy_tickets_pending() noexcept {
  if (g_dist == nullptr) return 0;
  std::lock_guard lock(g_dist->mutex);
  return g_dist->tickets.size();
}

}  // namespace apgas::detail
