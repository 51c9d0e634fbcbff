// Clocks across host places: the messages (a place's report to a clock's home, the home's phase announcement) and
// the clock trailer that carries registrations with an activity (clocked_async_at, at). What they mean is in
// clock.cpp; the handlers here run under dist.cpp's invariant (never block).
#include "clock_dist.hpp"
#include "dist_state.hpp"

#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace apgas::detail {

void clock_dist_start(dist_state& d) {
  static std::uint32_t runs = 0;  // start-up is one thread, before any message
  d.clock_epoch = ++runs;
  d.clock_seq_out = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(d.size));
  d.clock_in = std::make_unique<clock_inbox[]>(static_cast<std::size_t>(d.size));
}

std::uint64_t clock_next_seq(int home) noexcept {
  return g_dist->clock_seq_out[static_cast<std::size_t>(home)].fetch_add(1, std::memory_order_relaxed);
}

void clock_send_report(int home, std::uint64_t seq, std::uint64_t id, std::int32_t tag,
                       const std::vector<clock_delta>& ds) {
  writer w = message_writer(40 + ds.size() * 20);
  w & msg::clock_report & g_dist->clock_epoch & seq & id & tag & static_cast<std::uint32_t>(ds.size());
  for (const auto& d : ds) w & d.place & d.reg & d.arr;
  send(home, std::move(w));
}

void clock_send_phase(int dst, std::uint64_t id, std::int32_t phase) {
  writer w = message_writer(32);
  w & msg::clock_phase & g_dist->clock_epoch & id & phase;
  send(dst, std::move(w));
}

// Reports from `src` are applied in the order of their sequence numbers: one that arrives early waits in the inbox
// until those before it have been applied (by whichever handler applies the one it waits for).
void deliver_clock_report(int src, reader& r) {
  std::uint64_t seq = 0;
  std::uint64_t id = 0;
  std::int32_t tag = 0;
  std::uint32_t n = 0;
  std::uint32_t epoch = 0;
  r & epoch & seq & id & tag & n;
  if (epoch != g_dist->clock_epoch) return;  // from an earlier run of these processes (dist_state::clock_epoch)
  if (static_cast<std::size_t>(n) > static_cast<std::size_t>(g_dist->size)) {
    throw serialization_error("apgas: malformed clock report: " + std::to_string(n) + " entries for " +
                              std::to_string(g_dist->size) + " host places");
  }
  std::vector<clock_delta> ds(n);
  for (auto& d : ds) r & d.place & d.reg & d.arr;
  clock_inbox& in = g_dist->clock_in[static_cast<std::size_t>(src)];
  {
    std::lock_guard lock(in.mutex);
    if (seq != in.expected) {
      if (seq < in.expected || in.held.contains(seq)) {
        throw serialization_error("apgas: malformed clock report: sequence number " + std::to_string(seq) +
                                  " from place " + std::to_string(src) + " again");
      }
      clock_report_in& h = in.held[seq];
      h.id = id;
      h.tag = tag;
      for (const auto& d : ds) h.deltas.push_back({d.place, {d.reg, d.arr}});
      return;
    }
  }
  for (;;) {
    clock_apply_report(src, id, tag, ds);
    std::lock_guard lock(in.mutex);
    in.expected += 1;
    auto it = in.held.find(in.expected);
    if (it == in.held.end()) return;
    id = it->second.id;
    tag = it->second.tag;
    ds.clear();
    for (const auto& [place, c] : it->second.deltas) ds.push_back({place, c.first, c.second});
    in.held.erase(it);
  }
}

void deliver_clock_phase(reader& r) {
  std::uint64_t id = 0;
  std::int32_t phase = 0;
  std::uint32_t epoch = 0;
  r & epoch & id & phase;
  if (epoch != g_dist->clock_epoch) return;  // from an earlier run (dist_state::clock_epoch)
  clock_apply_phase(id, phase);
}

void end_clock_trailer(writer& w, std::size_t start) {
  const auto len = static_cast<std::uint32_t>(w.size() - start);
  w & len;
}

std::pair<std::span<const std::byte>, std::span<const std::byte>> split_clock_trailer(std::span<const std::byte> m) {
  std::uint32_t len = 0;
  if (m.size() < sizeof len) throw serialization_error("apgas: malformed message: no clock trailer");
  std::memcpy(&len, m.data() + m.size() - sizeof len, sizeof len);
  const std::size_t body = m.size() - sizeof len;
  if (len > body) {
    throw serialization_error("apgas: malformed message: a clock trailer of " + std::to_string(len) +
                              " bytes in a message of " + std::to_string(m.size()));
  }
  return {m.first(body - len), m.subspan(body - len, len)};
}

}  // namespace apgas::detail
