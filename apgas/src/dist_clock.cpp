// Clocks across host places: the messages (a place's report to a clock's home, the home's phase announcement) and
// the clock trailer that carries registrations with an activity (clocked_async_at, at). What they mean is in
// clock.cpp; the handlers here run under dist.cpp's invariant (never block).
#include "clock_dist.hpp"
#include "dist_state.hpp"

#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace apgas::detail {

void clock_send_report(int home, std::uint64_t id, std::int32_t tag, const std::vector<clock_delta>& ds) {
  writer w = message_writer(32 + ds.size() * 20);
  w & msg::clock_report & id & tag & static_cast<std::uint32_t>(ds.size());
  for (const auto& d : ds) w & d.place & d.reg & d.arr;
  send(home, std::move(w));
}

void clock_send_phase(int dst, std::uint64_t id, std::int32_t phase) {
  writer w = message_writer(32);
  w & msg::clock_phase & id & phase;
  send(dst, std::move(w));
}

void deliver_clock_report(int src, reader& r) {
  std::uint64_t id = 0;
  std::int32_t tag = 0;
  std::uint32_t n = 0;
  r & id & tag & n;
  if (static_cast<std::size_t>(n) > static_cast<std::size_t>(g_dist->size)) {
    throw serialization_error("apgas: malformed clock report: " + std::to_string(n) + " entries for " +
                              std::to_string(g_dist->size) + " host places");
  }
  std::vector<clock_delta> ds(n);
  for (auto& d : ds) r & d.place & d.reg & d.arr;
  clock_apply_report(src, id, tag, ds);
}

void deliver_clock_phase(reader& r) {
  std::uint64_t id = 0;
  std::int32_t phase = 0;
  r & id & phase;
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
