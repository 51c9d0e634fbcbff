// The runtime across host places: its state, sending, the dispatch of arriving messages, and the delivery of
// remote activities (async_at, at) and of at replies. The transport (transport/) moves the bytes; these files give
// them meaning. Each other concern has a file of its own: dist_finish.cpp (the distributed finish), dist_wire.cpp
// (exceptions on the wire), dist_copy.cpp (bulk copies), dist_team.cpp (teams), dist_life.cpp (start-up,
// shut-down); dist_state.hpp holds what they share.
//
// Invariants:
//  - A message handler runs on an idle worker inside poll(), outside any activity: it never blocks, it only
//    updates tables under short locks, submits tasks and signals completions.
#include "dist_state.hpp"

#include "clock_dist.hpp"
#include "finish.hpp"
#include "obs.hpp"
#include "scheduler.hpp"

#include <apgas/activity.hpp>
#include <apgas/clock.hpp>
#include <apgas/detail/completion.hpp>
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/serialization/registry.hpp>
#include <apgas/transport/transport.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace apgas::detail {

dist_state* g_dist = nullptr;

// ---- sending ----

namespace {
std::atomic<std::uint64_t> g_messages_sent{0};
}  // namespace

namespace {
// send() while tracing or counting: the send span, and the flow id the receiver's handler span ends (a trailer).
[[gnu::noinline]] void send_observed(int dst, std::vector<std::byte> bytes) {
  const unsigned kind = bytes.empty() ? 0 : std::to_integer<unsigned>(bytes[0]);
  const std::uint64_t flow = obs::message_send_begin(dst, bytes.size(), kind);
  if (flow != 0) {
    bytes[0] |= static_cast<std::byte>(traced_kind);
    const std::size_t at = bytes.size();
    bytes.resize(at + sizeof flow);
    std::memcpy(bytes.data() + at, &flow, sizeof flow);
  }
  transmit(dst, std::move(bytes));
  obs::message_send_end();
}
}  // namespace

void send(int dst, writer&& w) {
  g_messages_sent.fetch_add(1, std::memory_order_relaxed);
  note_sent(dst);
  // A message that cannot be sent (the transport failed, or no memory for its pieces) was already counted by the
  // finish that waits for it (remote activities count before they send, their home before its reply): an exception
  // here would leave that finish waiting for ever. Stop, saying why, as for any failure of the transport in a run.
  try {
    if (obs::on(obs::cat_message | obs::stats)) [[unlikely]] {
      send_observed(dst, w.take());
      return;
    }
    transmit(dst, w.take());
  } catch (const std::exception& e) {
    stop_on_transport_failure(e, "a message to place " + std::to_string(dst) + " could not be sent");
  }
}

// A writer for a message, on a recycled buffer (the transport hands sent buffers back: transport::recycle_buffer).
writer message_writer(std::size_t reserve) { return writer(transport::take_buffer(reserve)); }

namespace {

// An activity that arrived in a message. Decodes its closure (and arguments) when it runs, so that a decoding
// failure is this activity's exception.
// The message is kept inside the task when it is small (most are: a header and a few captures), so that an arriving
// activity costs one allocation from the task cache and none from the heap.
struct remote_task final : task {
  static constexpr std::size_t inline_bytes = 128;  // sizeof(remote_task) stays within the task cache's classes

  explicit remote_task(std::span<const std::byte> message) : size(message.size()) {
    if (size > inline_bytes) {
      if (!take_whole_message(message, heap)) heap.assign(message.begin(), message.end());  // (a large one: moved)
    } else if (size != 0) {
      std::memcpy(inline_, message.data(), size);
    }
  }
  std::span<const std::byte> bytes() const noexcept {
    return {size > inline_bytes ? heap.data() : inline_, size};
  }

  alignas(16) std::byte inline_[inline_bytes];  // 16-byte aligned like every message buffer (zero-copy spans)
  std::size_t size;
  std::vector<std::byte> heap;  // larger messages
  std::size_t offset = 0;
  std::uint32_t id = 0;
  bool is_at = false;
  bool clocked = false;  // an at whose caller's clock registrations came with it: they go back with the reply
  int reply_to = 0;
  std::uint64_t token = 0;

  const char* trace_name() const noexcept override {
    const char* name = ser::registry::name_of(id);
    return name != nullptr ? name : typeid(*this).name();
  }

  void invoke() override {
    reader r(bytes(), no_message_limit);
    r.skip(offset, "header");
    if (!is_at) {
      reinterpret_cast<async_invoker>(ser::registry::lookup(id))(r);
      return;
    }
    writer reply = message_writer(128);
    reply & msg::at_reply & token;
    const std::size_t status_at = reply.size();
    reply & std::uint8_t{1};
    try {
      reinterpret_cast<at_invoker>(ser::registry::lookup(id))(r, reply);
    } catch (...) {
      reply.bytes().resize(status_at);
      reply & std::uint8_t{0};
      encode_exception(reply, std::current_exception());
    }
    // The registrations the caller sent, and any the body made (clock::make): they go back to the caller.
    if (clocked || clock_carried(*this)) {
      reply.bytes()[0] = static_cast<std::byte>(msg::clocked_at_reply);
      const std::size_t start = reply.size();
      clock_write_moved(*this, reply_to, reply);
      end_clock_trailer(reply, start);
    }
    send(reply_to, std::move(reply));
  }
};
static_assert(sizeof(remote_task) <= 256, "remote_task must fit the task cache's largest class");

void deliver_activity(int src, reader& r, std::span<const std::byte> message, bool is_at, bool clocked) {
  std::span<const std::byte> bytes = message;
  std::span<const std::byte> trailer;
  if (clocked) std::tie(bytes, trailer) = split_clock_trailer(message);
  fid f{};
  r & f.home & f.serial;
  std::span<const std::byte> coll;
  if ((f.serial & collect_flag) != 0) {  // the collector trailer: off the message before the closure sees it
    f.serial &= ~collect_flag;
    std::uint64_t n = 0;
    // The trailer (ops id, reducer bytes, their length n) comes after the rest of the header (token, closure id).
    const std::size_t header_end = r.position() + sizeof(std::uint64_t) + sizeof(std::uint32_t);
    const std::size_t fixed = sizeof n + sizeof(std::uint32_t);
    if (bytes.size() < header_end + fixed) {
      throw serialization_error("apgas: malformed message: no room for a collector trailer in " +
                                std::to_string(bytes.size()) + " bytes");
    }
    std::memcpy(&n, bytes.data() + bytes.size() - sizeof n, sizeof n);
    if (n > bytes.size() - header_end - fixed) {
      throw serialization_error("apgas: malformed message: a collector trailer of " + std::to_string(n) + " bytes");
    }
    const std::size_t len = static_cast<std::size_t>(n) + sizeof(std::uint32_t);
    coll = bytes.subspan(bytes.size() - sizeof n - len, len);
    bytes = bytes.first(bytes.size() - sizeof n - len);
  }
  auto t = std::make_unique<remote_task>(bytes);
  t->is_at = is_at;
  t->clocked = clocked && is_at;
  if (clocked) {
    reader tr(trailer);
    try {
      clock_read_into(*t, tr, false);
    } catch (...) {
      if (t->clocks != nullptr) drop_all_clocks(*t);
      throw;
    }
  }
  t->reply_to = src;
  r & t->token & t->id;
  t->offset = r.position();
  finish_state& fs = count_receipt(f, coll);
  t->governing = &fs;
  t->innermost = &fs;
  if (obs::on(obs::cat_activity)) [[unlikely]] obs::spawned(*t);
  the_scheduler()->submit(as_item(t.release()));
}

void deliver_reply(reader& r, std::span<const std::byte> message, bool clocked) {
  std::span<const std::byte> bytes = message;
  std::span<const std::byte> trailer;
  if (clocked) std::tie(bytes, trailer) = split_clock_trailer(message);
  dist_state& d = *g_dist;
  std::uint64_t token = 0;
  std::uint8_t ok = 0;
  r & token & ok;
  pending_at* p = nullptr;
  {
    std::lock_guard lock(d.mutex);
    auto it = d.ats.find(token);
    if (it == d.ats.end()) throw serialization_error("apgas: malformed message: unknown at reply token");
    p = it->second;
    d.ats.erase(it);
  }
  p->ok = ok != 0;
  p->reply.assign(bytes.begin() + static_cast<std::ptrdiff_t>(r.position()), bytes.end());
  p->clocks.assign(trailer.begin(), trailer.end());
  p->done.signal();
}

}  // namespace

void dist_state::on_message(int src, std::span<const std::byte> message) {
  note_heard(src);
  if (message.size() == 1 && message[0] == static_cast<std::byte>(msg::heartbeat)) return;  // only a sign of life
  std::span<const std::byte> bytes = message;  // without the trace trailer
  bool observed = false;  // a handler span is open
  try {
    const std::uint8_t kind_byte = message.empty() ? 0 : std::to_integer<std::uint8_t>(message[0]);
    std::uint64_t flow = 0;
    if ((kind_byte & traced_kind) != 0) {
      if (message.size() < 1 + sizeof flow) {
        throw serialization_error("apgas: malformed message: a traced message of " + std::to_string(message.size()) +
                                  " bytes");
      }
      std::memcpy(&flow, message.data() + message.size() - sizeof flow, sizeof flow);
      bytes = message.first(message.size() - sizeof flow);
    }
    // A large message's announcement is not counted: its sender counted the message it announces (send_observed),
    // and this place counts that message when it has landed and comes back through here (deliver_landed_large).
    if (obs::on(obs::cat_message | obs::stats) &&
        (kind_byte & ~traced_kind) != static_cast<std::uint8_t>(msg::large_message)) [[unlikely]] {
      obs::message_received(src, bytes.size(), kind_byte & ~traced_kind, flow);
      observed = true;
    }
    reader r(bytes, no_message_limit);
    std::uint8_t k = 0;
    r & k;
    const auto kind = static_cast<msg>(k & ~traced_kind);
    switch (kind) {
      case msg::async_activity: deliver_activity(src, r, bytes, false, false); break;
      case msg::at_activity: deliver_activity(src, r, bytes, true, false); break;
      case msg::at_reply: deliver_reply(r, bytes, false); break;
      case msg::clocked_async: deliver_activity(src, r, bytes, false, true); break;
      case msg::clocked_at: deliver_activity(src, r, bytes, true, true); break;
      case msg::clocked_at_reply: deliver_reply(r, bytes, true); break;
      case msg::clock_report: deliver_clock_report(src, r); break;
      case msg::clock_phase: deliver_clock_phase(r); break;
      case msg::report: deliver_report(src, r); break;
      case msg::shutdown: {
        std::int32_t code = 0;
        r & code;
        exit_code.store(code, std::memory_order_release);
        exit_code.notify_all();
        break;
      }
      case msg::shutdown_ack:
        if (acked != nullptr && src >= 0 && src < size) acked[static_cast<std::size_t>(src)].store(1);
        shutdown_acks.fetch_add(1, std::memory_order_acq_rel);
        break;
      case msg::shutdown_go:
        shutdown_go.store(true, std::memory_order_release);  // (dist_wait_shutdown looks every millisecond)
        break;
      case msg::team_contrib: deliver_team(r, src, bytes); break;
      case msg::stop_notice: {
        std::int32_t by = 0;
        std::string why;
        r & by & why;
        stop_reported(by >= 0 && by < size ? by : src, why);
        break;
      }
      case msg::dead_notice: {
        std::int32_t dead = 0;
        r & dead;
        if (dead >= 0 && dead < size) dead_place_reported(src, dead);  // (this place itself: see there)
        break;
      }
      case msg::bulk_put: deliver_put(src, r); break;
      case msg::large_message: deliver_large(src, r); break;
      case msg::large_done: deliver_large_done(r); break;
      case msg::bulk_get: deliver_get(src, r); break;
      default:
        throw serialization_error("apgas: malformed message: unknown message kind " +
                                  std::to_string(static_cast<int>(kind)));
    }
  } catch (const transport_error&) {
    throw;  // the transport itself failed (e.g. a bulk transfer it cannot place): fatal, see poll_hook (dist_life.cpp)
  } catch (const std::exception& e) {
    // A malformed message names no finish we could charge: report it and drop it; the place stays up.
    std::fprintf(stderr, "apgas: place %d dropped a message of %zu bytes from place %d: %s\n", rank, message.size(),
                 src, e.what());
  }
  if (observed) [[unlikely]] obs::span_end(obs::cat_message);
}

// ---- entry points used by the templates (remote.hpp) ----

writer begin_message() {
  writer w = message_writer(256);
  w.bytes().resize(message_header_bytes);  // filled in by send_async/send_at once the finish is known
  return w;
}

namespace {
// Every activity message has the same header layout (the token is 0 for async), so the payload's offset — and the
// alignment of the spans in it — is fixed before the header is written.
// Written in place, field by field as `writer` encodes them (their bytes, no padding): no second buffer.
void write_header(writer& w, msg kind, fid f, std::uint64_t token, std::uint32_t id) {
  std::byte* p = w.bytes().data();
  const auto put = [&p](const auto& v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  };
  put(kind);
  put(f.home);
  put(f.serial);
  put(token);
  put(id);
}
static_assert(message_header_bytes == sizeof(msg) + 3 * sizeof(std::uint64_t) + sizeof(std::uint32_t));
}  // namespace

void send_async(place p, std::uint32_t id, writer&& w) {
  task& cur = require_unrestricted_activity("apgas::async_at");
  const bool coll = append_collector(*cur.innermost, w);
  fid f = count_send(*cur.innermost, p.id());
  if (coll) f.serial |= collect_flag;
  write_header(w, msg::async_activity, f, 0, id);
  send(p.id(), std::move(w));
}

std::vector<std::byte> send_at(place p, std::uint32_t id, writer&& w) {
  task& cur = require_unrestricted_activity("apgas::at");
  dist_state& d = *g_dist;
  pending_at pending;
  std::uint64_t token = 0;
  {
    std::lock_guard lock(d.mutex);
    token = d.next_token++;
    d.ats.emplace(token, &pending);
  }
  struct forget_on_throw {  // (a failure before the message left: no reply names this frame's `pending`)
    dist_state& d;
    std::uint64_t token;
    bool sent = false;
    ~forget_on_throw() {
      if (sent) return;
      std::lock_guard lock(d.mutex);
      d.ats.erase(token);
    }
  } forget{d, token};
  const bool traced = obs::on(obs::cat_at);
  if (traced) [[unlikely]] obs::span_begin(obs::cat_at, "at", static_cast<std::uint64_t>(p.id()), 0, p.id());
  // Trailers, innermost first: the collector of the finish's chain (dist_finish.cpp), then the clock trailer
  // (dist_clock.cpp); deliver_activity takes them off in the reverse order.
  const bool coll = append_collector(*cur.innermost, w);
  fid f = count_send(*cur.innermost, p.id());
  if (coll) f.serial |= collect_flag;
  // X10: the body of `at` is the calling activity, so its clock registrations go with it and come back.
  const bool clocked = clock_carried(cur);
  write_header(w, clocked ? msg::clocked_at : msg::at_activity, f, token, id);
  if (clocked) {
    const std::size_t start = w.size();
    clock_write_moved(cur, p.id(), w);
    end_clock_trailer(w, start);
  }
  send(p.id(), std::move(w));
  forget.sent = true;
  pending.done.wait();
  if (clocked || !pending.clocks.empty()) {
    reader tr(pending.clocks);
    clock_read_into(cur, tr, true);
  }
  if (traced) [[unlikely]] obs::span_end(obs::cat_at);
  if (!pending.ok) {
    reader r(pending.reply, no_message_limit);
    std::rethrow_exception(decode_exception(r));
  }
  return std::move(pending.reply);
}

std::uint64_t messages_sent() noexcept { return g_messages_sent.load(std::memory_order_relaxed); }

void send_raw(int dst, std::vector<std::byte> bytes) {
  if (g_dist == nullptr) throw illegal_operation_exception("apgas::detail::send_raw outside apgas::run");
  g_dist->tp->send(dst, std::move(bytes));
}

void send_clocked_async(place p, std::uint32_t id, writer&& w, const clock* cs, std::size_t n, bool implicit) {
  task& cur = require_unrestricted_activity("apgas::clocked_async_at");
  const bool coll = append_collector(*cur.innermost, w);  // the trailers' order: as in send_at
  fid f = count_send(*cur.innermost, p.id());
  if (coll) f.serial |= collect_flag;
  write_header(w, msg::clocked_async, f, 0, id);
  const std::size_t start = w.size();
  clock_write_child(cur, cs, n, implicit, p.id(), w);  // checked by check_clocked_spawn: does not throw
  end_clock_trailer(w, start);
  send(p.id(), std::move(w));
}

}  // namespace apgas::detail
