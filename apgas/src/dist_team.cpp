// Teams across host places (apgas/team.hpp): the parts of team operations. Every part is one team_contrib message,
// keyed by (team id, operation number): the members of a team number its operations in the same order (SPMD), so a
// part that arrives before its receiver reached the operation waits in a slot. The typed operations themselves
// (which member sends what to whom) are templates in team.hpp; split is here.
#include "dist_state.hpp"

#include "obs.hpp"
#include "scheduler.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/team.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace apgas::detail {

namespace {
// An operation's number on the wire: its sequence number, and in the top 16 bits a signature of the operation and
// its root, so that a member at another operation (or with another root) is caught instead of its part being taken.
constexpr int sig_shift = 48;
constexpr std::uint64_t seq_mask = (std::uint64_t{1} << sig_shift) - 1;

// A part no activity here will take: its sender was at another operation or named another root, and the member that
// should have had it waits for it for ever. Stop the job, saying why, rather than hang (there is no activity to
// throw to).
[[noreturn]] void stray_part(int rank, const std::string& what) {
  std::fprintf(stderr,
               "apgas: place %d: %s: the members called the team's operations in different orders, or named "
               "different roots (a member waiting for a part that went elsewhere would wait for ever); stopping\n",
               rank, what.c_str());
  obs::emergency_dump("a team operation was called differently at its members");
  std::fflush(stderr);
  std::_Exit(3);
}

void size_slot(team_slot& s, int n) {
  if (s.parts.empty()) {
    s.parts.resize(static_cast<std::size_t>(n));
    s.failed.assign(static_cast<std::size_t>(n), 0);
    s.sigs.assign(static_cast<std::size_t>(n), -1);
  }
}
}  // namespace

void deliver_team(reader& r, int src, std::span<const std::byte> bytes) {
  (void)src;
  dist_state& d = *g_dist;
  std::uint64_t team = 0;
  std::uint64_t seq = 0;
  std::int32_t from = 0;
  std::uint8_t failed = 0;
  r& team& seq& from& failed;
  if (from < 0 || from >= d.size) {
    throw serialization_error("apgas: malformed team message: team rank " + std::to_string(from) + " (there are " +
                              std::to_string(d.size) + " host places)");
  }
  std::vector<std::byte> payload(bytes.begin() + static_cast<std::ptrdiff_t>(r.position()), bytes.end());
  completion* wake_it = nullptr;
  const std::uint64_t op = seq & seq_mask;
  const auto sig = static_cast<std::int32_t>(seq >> sig_shift);
  {
    std::lock_guard lock(d.mutex);
    const team_progress& at = d.team_seqs[team];
    if (std::find(at.refused.begin(), at.refused.end(), op) != at.refused.end()) return;  // (its waiter has thrown)
    if (op <= at.done) {
      stray_part(d.rank, "a part of operation " + std::to_string(op) + " of a team came from team rank " +
                             std::to_string(from) + ", but this place has finished that operation or receives "
                             "nothing in it");
    }
    team_slot& s = d.team[{team, op}];
    size_slot(s, d.size);
    s.sigs[static_cast<std::size_t>(from)] = sig;
    s.parts[static_cast<std::size_t>(from)] = std::move(payload);
    s.failed[static_cast<std::size_t>(from)] = failed;
    s.arrived += 1;
    if (s.waiter != nullptr && (s.arrived == s.expected || sig != s.sig)) wake_it = std::exchange(s.waiter, nullptr);
  }
  if (wake_it != nullptr) wake_it->signal();
}

std::uint64_t team_begin(std::uint64_t team, const char* what, int root, bool receives) {
  require_unrestricted_activity(what);
  std::uint32_t sig = 2166136261u;  // FNV-1a of the operation's name, then its root
  for (const char* c = what; *c != '\0'; ++c) sig = (sig ^ static_cast<unsigned char>(*c)) * 16777619u;
  sig = (sig ^ static_cast<std::uint32_t>(root + 1)) * 16777619u;
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  team_progress& at = d.team_seqs[team];
  const std::uint64_t seq = ++at.begun & seq_mask;
  if (!receives) {
    at.done = seq;
    // Parts may have come for it already (their senders were at another operation): the same as one that comes now.
    if (const auto it = d.team.find({team, seq}); it != d.team.end()) {
      int from = 0;
      while (from < d.size && it->second.sigs[static_cast<std::size_t>(from)] < 0) ++from;
      stray_part(d.rank, std::string(what) + " (operation " + std::to_string(seq) + " of a team), in which this "
                             "place receives nothing, got a part from team rank " + std::to_string(from));
    }
  }
  return seq | static_cast<std::uint64_t>((sig ^ (sig >> 16)) & 0xffffu) << sig_shift;
}

void team_send(std::uint64_t team, std::uint64_t seq, int from, int to, std::span<const std::byte> bytes, bool failed) {
  writer w = message_writer(bytes.size() + 40);  // the whole message at once: no regrowth copies
  w& msg::team_contrib& team& seq& static_cast<std::int32_t>(from) & static_cast<std::uint8_t>(failed ? 1 : 0);
  w.write_bytes(bytes.data(), bytes.size());
  send(to, std::move(w));
}

team_parts team_wait(std::uint64_t team, std::uint64_t seq, int expected) {
  dist_state& d = *g_dist;
  team_parts out;
  const bool traced = obs::on(obs::cat_team);
  if (traced) [[unlikely]]
    obs::span_begin(obs::cat_team, "team", seq & seq_mask);
  if (expected == 0) {  // a team of one: nothing to wait for (the span still shows the operation)
    out.parts.resize(static_cast<std::size_t>(d.size));
    out.failed.assign(static_cast<std::size_t>(d.size), 0);
    if (traced) [[unlikely]]
      obs::span_end(obs::cat_team);
    return out;
  }
  completion c;
  bool wait = false;
  std::vector<std::int32_t> sigs;
  const auto sig = static_cast<std::int32_t>(seq >> sig_shift);
  const auto mismatch = [sig](const std::vector<std::int32_t>& got) {
    return std::any_of(got.begin(), got.end(), [sig](std::int32_t g) { return g >= 0 && g != sig; });
  };
  {
    std::lock_guard lock(d.mutex);
    team_slot& s = d.team[{team, seq & seq_mask}];
    size_slot(s, d.size);
    if (s.arrived < expected && !mismatch(s.sigs)) {
      s.expected = expected;
      s.sig = sig;
      s.waiter = &c;
      wait = true;
    }
  }
  if (wait) c.wait();
  bool refused = false;
  {
    std::lock_guard lock(d.mutex);
    auto it = d.team.find({team, seq & seq_mask});
    out.parts = std::move(it->second.parts);
    out.failed = std::move(it->second.failed);
    sigs = std::move(it->second.sigs);
    d.team.erase(it);
    team_progress& at = d.team_seqs[team];
    at.done = seq & seq_mask;
    refused = mismatch(sigs);
    if (refused) {  // (woken early: parts still to come are dropped; the few most recent such operations kept)
      if (at.refused.size() == 64) at.refused.erase(at.refused.begin());
      at.refused.push_back(seq & seq_mask);
    }
  }
  if (traced) [[unlikely]]
    obs::span_end(obs::cat_team);
  for (std::size_t m = 0; refused && m < sigs.size(); ++m) {
    if (sigs[m] >= 0 && sigs[m] != sig) {
      throw illegal_operation_exception(
          "apgas::team: operation " + std::to_string(seq & seq_mask) + " of this team: the member of team rank " +
          std::to_string(m) +
          " sent a part of another operation, or named another root (every member calls the team's operations in "
          "the same order, with the same root)");
    }
  }
  return out;  // this place's own entry stays empty: the caller has its bytes
}

std::uint64_t team_split_counter() {
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  return ++d.team_splits;
}

int team_rank() noexcept { return g_dist != nullptr ? g_dist->rank : 0; }
int team_size() noexcept { return g_dist != nullptr ? g_dist->size : 1; }

void team_failed(const char* what, int place, const std::vector<std::byte>& text) {
  throw illegal_operation_exception(
      std::string(what) + ": place " + std::to_string(place) +
      " was called with wrong arguments: " + std::string(reinterpret_cast<const char*>(text.data()), text.size()));
}

void team_wrong_length(const char* what, int place, std::size_t got, std::size_t expected) {
  throw illegal_operation_exception(std::string(what) + ": place " + std::to_string(place) + " gave " +
                                    std::to_string(got) + " elements, this place expects " + std::to_string(expected));
}

std::string team_counts_error(const char* what, std::span<const std::size_t> counts, int size, const char* buffer,
                              std::size_t buffer_size, int root, std::size_t own_size, const char* own) {
  if (counts.size() != static_cast<std::size_t>(size)) {
    return std::string(what) + ": " + std::to_string(counts.size()) + " counts at the root for a team of " +
           std::to_string(size);
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > buffer_size - total) {  // (never wraps: total <= buffer_size) more than the buffer holds
      return std::string(what) + ": the counts at the root add up to more than the " + std::to_string(buffer_size) +
             " elements " + buffer + " (count " + std::to_string(i) + " is " + std::to_string(counts[i]) + ")";
    }
    total += counts[i];
  }
  if (buffer_size != total) {
    return std::string(what) + ": " + buffer + " " + std::to_string(buffer_size) +
           " elements at the root, the counts add up to " + std::to_string(total);
  }
  const std::size_t mine = counts[static_cast<std::size_t>(root)];
  if (mine != own_size) {
    return std::string(what) + ": " + own + " " + std::to_string(own_size) + " elements, its count is " +
           std::to_string(mine);
  }
  return {};
}

}  // namespace apgas::detail

namespace apgas {

void team::fail(const std::string& err) { throw illegal_operation_exception(err); }

int team::root_rank(const char* what, place root) const {
  const place p = place_of(root.id());  // bad_place_exception if it is no place
  if (!p.is_host()) {
    throw bad_place_exception(std::string(what) +
                              ": the root must be a host place (a team is one activity per "
                              "host place); place " +
                              std::to_string(root.id()) + " is a GPU place");
  }
  const int r = rank_of(root);
  if (r < 0) {
    std::string list;
    for (int i = 0; i < size_ && i < 16; ++i) list += (i == 0 ? "" : ", ") + std::to_string(place_at(i));
    if (size_ > 16) list += ", ...";
    throw bad_place_exception(std::string(what) + ": the root, place " + std::to_string(root.id()) +
                              ", is not in this team of " + std::to_string(size_) + " places (" + list + ")");
  }
  return r;
}

team team::split(int color, int key) {
  struct entry {
    std::int32_t color;
    std::int32_t key;
    std::uint64_t counter;
  };
  const entry mine{color, key, detail::team_split_counter()};
  const std::vector<std::vector<std::byte>> parts =
      allgather_parts<entry>("apgas::team::split", std::span<const entry>(&mine, 1), {});
  std::vector<std::pair<entry, int>> same;  // (entry, rank in this team)
  for (int p = 0; p < size_; ++p) {
    entry e = mine;
    if (p != rank_) {
      const std::vector<std::byte>& b = parts[static_cast<std::size_t>(p)];
      if (b.size() != sizeof(entry))
        detail::team_wrong_length("apgas::team::split", place_at(p), b.size(), sizeof(entry));
      std::memcpy(&e, b.data(), sizeof e);
    }
    if (e.color == color) same.emplace_back(e, p);
  }
  std::stable_sort(same.begin(), same.end(), [](const auto& a, const auto& b) {
    return a.first.key != b.first.key ? a.first.key < b.first.key : a.second < b.second;
  });
  auto members = std::make_shared<std::vector<int>>();
  team t;
  for (const auto& [e, p] : same) {
    if (p == rank_) t.rank_ = static_cast<int>(members->size());
    members->push_back(place_at(p));
  }
  // The id: the first member's place and its split number, the same at every member and distinct from every other
  // team's (a place numbers its splits).
  const auto& lead = same.front();
  t.id_ = (static_cast<std::uint64_t>(place_at(lead.second)) + 1) << 40 |
          (lead.first.counter & ((std::uint64_t{1} << 40) - 1));
  t.size_ = static_cast<int>(members->size());
  t.members_ = std::move(members);
  return t;
}

}  // namespace apgas
