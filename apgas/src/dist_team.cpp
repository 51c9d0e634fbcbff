// Teams across host places: team_allgather (each place sends its contribution to every other place in a
// team_contrib message, deliver_team collects them) and what apgas::team (global.hpp) builds on it.
#include "dist_state.hpp"

#include "obs.hpp"
#include "scheduler.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/global.hpp>
#include <apgas/serialization/archive.hpp>

#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

namespace apgas::detail {

// ---- teams ----

void deliver_team(reader& r, int src, std::span<const std::byte> bytes) {
  dist_state& d = *g_dist;
  std::uint64_t seq = 0;
  r & seq;
  std::vector<std::byte> payload(bytes.begin() + static_cast<std::ptrdiff_t>(r.position()), bytes.end());
  completion* wake_it = nullptr;
  {
    std::lock_guard lock(d.mutex);
    team_slot& s = d.team[seq];
    if (s.parts.empty()) s.parts.resize(static_cast<std::size_t>(d.size));
    s.parts[static_cast<std::size_t>(src)] = std::move(payload);
    s.arrived += 1;
    if (s.arrived == d.size - 1 && s.waiter != nullptr) wake_it = std::exchange(s.waiter, nullptr);
  }
  if (wake_it != nullptr) wake_it->signal();
}

// Every place sends its contribution to every other place and waits for theirs: one message latency per
// operation, O(P^2) messages (fine for the host counts of this version; a tree is the next step for large P).
std::vector<std::vector<std::byte>> team_allgather(std::span<const std::byte> mine) {
  require_unrestricted_activity("apgas::team");
  const bool traced = obs::on(obs::cat_team);
  if (traced) [[unlikely]] obs::span_begin(obs::cat_team, "team", mine.size());
  dist_state& d = *g_dist;
  std::uint64_t seq = 0;
  {
    std::lock_guard lock(d.mutex);
    seq = ++d.team_seq;
  }
  for (int p = 0; p < d.size; ++p) {
    if (p == d.rank) continue;
    writer w = message_writer(mine.size() + 32);  // the whole message at once: no regrowth copies
    w & msg::team_contrib & seq;
    w.write_bytes(mine.data(), mine.size());
    send(p, std::move(w));
  }
  completion c;
  bool wait = false;
  {
    std::lock_guard lock(d.mutex);
    team_slot& s = d.team[seq];
    if (s.parts.empty()) s.parts.resize(static_cast<std::size_t>(d.size));
    if (s.arrived != d.size - 1) {
      s.waiter = &c;
      wait = true;
    }
  }
  if (wait) c.wait();
  std::lock_guard lock(d.mutex);
  auto it = d.team.find(seq);
  std::vector<std::vector<std::byte>> parts = std::move(it->second.parts);
  d.team.erase(it);
  if (traced) [[unlikely]] obs::span_end(obs::cat_team);
  return parts;  // this place's own entry stays empty: the caller has its bytes
}

int team_rank() noexcept { return g_dist != nullptr ? g_dist->rank : 0; }
int team_size() noexcept { return g_dist != nullptr ? g_dist->size : 1; }

}  // namespace apgas::detail

namespace apgas {

int team::size() const noexcept { return detail::team_size(); }

void team::barrier() {
  detail::team_allgather({});
}

}  // namespace apgas
