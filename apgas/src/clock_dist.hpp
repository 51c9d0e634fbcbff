#pragma once
// Clocks across host places: what clock.cpp (the clock's state at each place, and its home's decision) and
// dist_clock.cpp (the messages) call in one another. Private: never installed. The protocol is described in
// clock.cpp's header comment and in docs/decisions/0011-clocks-across-hosts.md.
#include <apgas/clock.hpp>
#include <apgas/detail/task.hpp>
#include <apgas/serialization/archive.hpp>

#include <cstdint>
#include <vector>

namespace apgas::detail {

/// A change a place reports to a clock's home: registrations at `place` (+ made, - dropped or moved away) and
/// arrivals there in the report's phase.
struct clock_delta {
  std::int32_t place;
  std::int64_t reg;
  std::int64_t arr;
};

// ---- clock.cpp -> dist_clock.cpp: messages ----
/// The sequence number of the next report to `home` (taken under the reporting node's lock).
std::uint64_t clock_next_seq(int home) noexcept;
void clock_send_report(int home, std::uint64_t seq, std::uint64_t id, std::int32_t tag,
                       const std::vector<clock_delta>& ds);
void clock_send_phase(int dst, std::uint64_t id, std::int32_t phase);

// ---- dist_clock.cpp -> clock.cpp: arriving messages (handlers: they never block) ----
void clock_apply_report(int src, std::uint64_t id, std::int32_t tag, const std::vector<clock_delta>& ds);
void clock_apply_phase(std::uint64_t id, std::int32_t phase);

// ---- registrations travelling with an activity (encoded in a trailer of its message) ----
/// Register a child that will run at host place `dst` on the clocks `cs` of `parent` (or its implicit clock) and
/// encode the registrations. The caller checked them (check_clocked_spawn).
void clock_write_child(task& parent, const clock* cs, std::size_t n, bool implicit, int dst, writer& w);
/// Move every registration of `t` to host place `dst` (at: the body of `at` runs there as the same activity, and
/// comes back) and encode them.
void clock_write_moved(task& t, int dst, writer& w);
/// Install registrations encoded by clock_write_child/clock_write_moved into `t` (whose clocks are empty), keeping
/// t's implicit clock when `keep_implicit`.
void clock_read_into(task& t, reader& r, bool keep_implicit);
/// Whether `t` has registrations or an implicit clock that an at must carry.
bool clock_carried(const task& t) noexcept;

}  // namespace apgas::detail
