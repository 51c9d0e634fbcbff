// Teams across host places (apgas/team.hpp): the parts of team operations. Every part is one team_contrib message,
// keyed by (team id, operation number): the members of a team number its operations in the same order (SPMD), so a
// part that arrives before its receiver reached the operation waits in a slot. A part carries the run's number (an
// earlier run's is dropped) and its sender's element signature (size and type). The typed operations themselves
// (which member sends what to whom) are templates in team.hpp; split, the root check and the waiting are here.
#include "dist_state.hpp"
#include "runtime.hpp"

#include "obs.hpp"
#include "scheduler.hpp"
#include "type_name.hpp"

#include <apgas/detail/completion.hpp>
#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/team.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

// A part's failed byte: 0, or its sender's own arguments were wrong, or its sender's root was refused (the part is
// the sender's error text in both cases). The sender of the last kind does not know the root, so it sends the part to
// every other member: only a member that waits for a part from it takes it (a root that receives from every member,
// a member whose root it is); the others drop it.
constexpr std::uint8_t part_failed = 1;
constexpr std::uint8_t part_root_refused = 2;
// team_slot::sigs: no part from that member yet; a part without a signature (part_root_refused).
constexpr std::int32_t no_part = -1;
constexpr std::int32_t no_sig = -2;

// A part no activity here will take: its sender was at another operation or named another root, and the member that
// should have had it waits for it for ever. Stop the job, saying why, rather than hang (there is no activity to
// throw to).
[[noreturn]] void stray_part(const std::string& what) {
  stop_the_run(what + ": the members called the team's operations in different orders, or named different roots (a "
                      "member waiting for a part that went elsewhere would wait for ever)",
               "a team operation was called differently at its members");
}

void size_slot(team_slot& s, int n) {
  if (s.parts.empty()) {
    s.parts.resize(static_cast<std::size_t>(n));
    s.failed.assign(static_cast<std::size_t>(n), 0);
    s.sigs.assign(static_cast<std::size_t>(n), no_part);
    s.elems.assign(static_cast<std::size_t>(n), 0);
  }
}

// The first team rank whose part is of another operation or root than `sig`, or -1.
int mismatched(const std::vector<std::int32_t>& sigs, std::int32_t sig) {
  for (std::size_t m = 0; m < sigs.size(); ++m) {
    if (sigs[m] >= 0 && sigs[m] != sig) return static_cast<int>(m);
  }
  return -1;
}

// Whether the waiter of s may go on: the parts it waits for have come, or a part of another operation has (it then
// throws at once).
bool ready(const team_slot& s) {
  if (mismatched(s.sigs, s.sig) >= 0) return true;
  return s.from >= 0 ? s.sigs[static_cast<std::size_t>(s.from)] != no_part : s.arrived >= s.expected;
}

void record_refused(team_progress& at, std::uint64_t op) {  // (the few most recent such operations are kept)
  if (at.refused.size() == 64) at.refused.erase(at.refused.begin());
  at.refused.push_back(op);
}

std::uint64_t signed_seq(std::uint64_t seq, const char* what, int root) {
  std::uint32_t sig = 2166136261u;  // FNV-1a of the operation's name, then its root
  for (const char* c = what; *c != '\0'; ++c) sig = (sig ^ static_cast<unsigned char>(*c)) * 16777619u;
  sig = (sig ^ static_cast<std::uint32_t>(root + 1)) * 16777619u;
  return seq | static_cast<std::uint64_t>((sig ^ (sig >> 16)) & 0xffffu) << sig_shift;
}

void send_part(std::uint64_t team, std::uint64_t seq, std::uint64_t elem, int from, int to,
               std::span<const std::byte> bytes, std::uint8_t failed) {
  writer w = message_writer(bytes.size() + 48);  // the whole message at once: no regrowth copies
  w& msg::team_contrib& team& seq& g_dist->clock_epoch& elem& static_cast<std::int32_t>(from) & failed;
  w.write_bytes(bytes.data(), bytes.size());
  send(to, std::move(w));
}

// The next operation of `team` at this place, refused here (its root): it is numbered as the others number it, and
// the parts that come for it are dropped.
std::uint64_t team_skip(std::uint64_t team, const char* what) {
  require_unrestricted_activity(what);
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  team_progress& at = d.team_seqs[team];
  const std::uint64_t seq = ++at.begun & seq_mask;
  at.done = seq;
  record_refused(at, seq);
  d.team.erase({team, seq});  // (parts that came for it already)
  return signed_seq(seq, what, -1);
}

// Wait for the parts of operation `seq` (team_slot::expected, team_slot::from) and take them. `mismatch`: the first
// team rank whose part is of another operation or root, or -1. `what` and `members` (the team's member places, null
// for the world team) are for the report of a long wait.
team_parts team_wait(std::uint64_t team, std::uint64_t seq, int expected, int from, int& mismatch, const char* what,
                     const std::shared_ptr<const std::vector<int>>& members) {
  dist_state& d = *g_dist;
  team_parts out;
  mismatch = -1;
  const std::uint64_t op = seq & seq_mask;
  const bool traced = obs::on(obs::cat_team);
  if (traced) [[unlikely]]
    obs::span_begin(obs::cat_team, "team", op);
  if (expected == 0) {  // a team of one: nothing to wait for (the span still shows the operation)
    out.parts.resize(static_cast<std::size_t>(d.size));
    out.failed.assign(static_cast<std::size_t>(d.size), 0);
    out.elems.assign(static_cast<std::size_t>(d.size), 0);
    if (traced) [[unlikely]]
      obs::span_end(obs::cat_team);
    return out;
  }
  completion c;
  bool wait = false;
  std::vector<std::int32_t> sigs;
  const auto sig = static_cast<std::int32_t>(seq >> sig_shift);
  {
    std::lock_guard lock(d.mutex);
    team_slot& s = d.team[{team, op}];
    size_slot(s, d.size);
    s.expected = expected;
    s.from = from;
    s.sig = sig;
    if (!ready(s)) {
      s.waiter = &c;
      s.what = what;
      s.members = members;
      s.since = std::chrono::steady_clock::now();
      wait = true;
    }
  }
  if (wait) c.wait();
  std::shared_ptr<const std::vector<int>> members_seen;  // (dropped after the lock: its deleter may take it)
  {
    std::lock_guard lock(d.mutex);
    auto it = d.team.find({team, op});
    members_seen = std::move(it->second.members);
    out.parts = std::move(it->second.parts);
    out.failed = std::move(it->second.failed);
    out.elems = std::move(it->second.elems);
    sigs = std::move(it->second.sigs);
    d.team.erase(it);
    team_progress& at = d.team_seqs[team];
    at.done = op;
    mismatch = mismatched(sigs, sig);
    if (mismatch >= 0) record_refused(at, op);  // (woken early: parts still to come are dropped)
  }
  if (traced) [[unlikely]]
    obs::span_end(obs::cat_team);
  if (from >= 0) {  // only `from`'s part is taken: the others are refused roots' (nobody else sends here)
    for (std::size_t m = 0; m < out.parts.size(); ++m) {
      if (static_cast<int>(m) == from) continue;
      out.parts[m].clear();
      out.failed[m] = 0;
      out.elems[m] = 0;
    }
  }
  return out;  // this place's own entry stays empty: the caller has its bytes
}
}  // namespace

void deliver_team(reader& r, int src, std::span<const std::byte> bytes) {
  (void)src;
  dist_state& d = *g_dist;
  std::uint64_t team = 0;
  std::uint64_t seq = 0;
  std::uint32_t run = 0;
  std::uint64_t elem = 0;
  std::int32_t from = 0;
  std::uint8_t failed = 0;
  r& team& seq& run& elem& from& failed;
  if (run != d.clock_epoch) return;  // a part of an earlier run of these processes (dist_state::clock_epoch)
  if (from < 0 || from >= d.size || failed > part_root_refused) {
    throw serialization_error("apgas: malformed team message: team rank " + std::to_string(from) + " (there are " +
                              std::to_string(d.size) + " host places), failed " + std::to_string(failed));
  }
  std::vector<std::byte> payload(bytes.begin() + static_cast<std::ptrdiff_t>(r.position()), bytes.end());
  completion* wake_it = nullptr;
  const std::uint64_t op = seq & seq_mask;
  const auto sig = static_cast<std::int32_t>(seq >> sig_shift);
  const bool root_refused = failed == part_root_refused;
  {
    std::unique_lock lock(d.mutex);
    const team_progress& at = d.team_seqs[team];
    if (std::find(at.refused.begin(), at.refused.end(), op) != at.refused.end()) return;  // (its waiter has thrown)
    if (op <= at.done) {
      if (root_refused) return;  // (nobody here waited for it)
      lock.unlock();  // (the stop tells the other places, through handlers that may take this lock)
      stray_part("a part of operation " + std::to_string(op) + " of a team came from team rank " +
                 std::to_string(from) + ", but this place has finished that operation or receives nothing in it");
    }
    team_slot& s = d.team[{team, op}];
    size_slot(s, d.size);
    s.sigs[static_cast<std::size_t>(from)] = root_refused ? no_sig : sig;
    s.parts[static_cast<std::size_t>(from)] = std::move(payload);
    s.failed[static_cast<std::size_t>(from)] = failed;
    s.elems[static_cast<std::size_t>(from)] = elem;
    s.arrived += 1;
    if (s.waiter != nullptr && ready(s)) wake_it = std::exchange(s.waiter, nullptr);
  }
  if (wake_it != nullptr) wake_it->signal();
}

namespace {
constexpr int max_stall_reports = 8;  // long team waits reported per run and place (then one line saying so)

// The place of team rank m of a team with these member places (null: the world team, whose ranks are its places).
int member_place(const std::vector<int>* members, std::size_t m) {
  return members == nullptr ? static_cast<int>(m) : m < members->size() ? (*members)[m] : -1;
}

// The members whose parts of a slot's operation came (sigs >= 0) and that no activity here took, as "place(s) 1, 3",
// or "" if none: by place where the team's members are known (`members`, or the world team), else by team rank.
std::string untaken_senders(const team_slot& s, bool world, const std::vector<int>* members) {
  std::string list;
  for (std::size_t m = 0; m < s.sigs.size(); ++m) {
    if (s.sigs[m] < 0) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(member_place(members, m));
  }
  if (list.empty()) return list;
  return (members != nullptr || world ? "place(s) " : "team rank(s) ") + list;
}
}  // namespace

void report_team_stalls(double after_s) try {
  dist_state& d = *g_dist;
  std::vector<std::string> lines;
  std::vector<std::exception_ptr> held;  // what the finishes homed here hold, once a wait is reported
  {
    std::lock_guard lock(d.mutex);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [key, s] : d.team) {
      const double waited = std::chrono::duration<double>(now - s.since).count();
      if (s.waiter == nullptr || s.reported || waited < after_s || d.team_stalls_reported > max_stall_reports) continue;
      s.reported = true;
      const int n = s.members ? static_cast<int>(s.members->size()) : d.size;
      std::string missing;
      for (int m = 0; m < n; ++m) {
        const int p = member_place(s.members.get(), static_cast<std::size_t>(m));
        if (p == d.rank || (s.from >= 0 && m != s.from) || s.sigs[static_cast<std::size_t>(m)] != no_part) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      char line[200];
      std::snprintf(line, sizeof line, "apgas: place %d: %s (operation %llu of a team of %d places) has waited %.0f s "
                    "for the part of place(s) ", d.rank, s.what != nullptr ? s.what : "a team operation",
                    static_cast<unsigned long long>(key.second), n, waited);
      lines.push_back(line + missing +
                      " (still waiting: fine if they are busy; if one never calls this operation, because it returned, "
                      "threw or called another of the team's operations first, the wait never ends)");
      if (++d.team_stalls_reported > max_stall_reports) {
        lines.back() = "apgas: place " + std::to_string(d.rank) + ": more team operations have waited over " +
                       std::to_string(static_cast<int>(after_s)) + " s; they are not reported";
      }
    }
    // A member that threw before the operation never comes, and its exception waits, unprinted, in a finish that
    // cannot end (the others wait in the operation). Where such a finish is homed here, its exceptions so far are
    // printed while a reported wait goes on, once (a finish whose lock is taken is left out: no waiting here).
    const bool stalled = std::any_of(d.team.begin(), d.team.end(), [](const auto& kv) {
      return kv.second.waiter != nullptr && kv.second.reported;  // a wait reported, now or before, goes on
    });
    if (stalled && !d.held_exceptions_reported) {
      for (const auto& [serial, fs] : d.homes) (void)fs->exceptions_so_far(held);
      d.held_exceptions_reported = !held.empty();
    }
  }
  for (const std::string& l : lines) std::fprintf(stderr, "%s\n", l.c_str());
  constexpr std::size_t shown = 5;
  for (std::size_t i = 0; i < held.size() && i < shown; ++i) {
    std::fprintf(stderr,
                 "apgas: place %d: [%zu/%zu] a finish waiting here holds an exception of an activity that ended (one "
                 "thrown before a team operation would explain the wait): %s\n",
                 d.rank, i + 1, held.size(), exception_text(held[i]).c_str());
  }
} catch (...) {  // (no memory for a report: the waits go on unreported)
}

void report_untaken_team_parts() try {
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  for (const auto& [key, s] : d.team) {
    if (const std::string from = untaken_senders(s, key.first == 0, s.members.get()); !from.empty()) {
      std::fprintf(stderr,
                   "apgas: place %d: the run ended with parts of operation %llu of a team from %s that no operation "
                   "here took (this place called fewer of the team's operations than they did); they are dropped\n",
                   d.rank, static_cast<unsigned long long>(key.second), from.c_str());
    }
  }
} catch (...) {  // (no memory for the report: the parts are dropped all the same)
}

std::uint64_t team_begin(std::uint64_t team, const char* what, int root, bool receives) {
  require_unrestricted_activity(what);
  dist_state& d = *g_dist;
  std::unique_lock lock(d.mutex);
  team_progress& at = d.team_seqs[team];
  const std::uint64_t seq = ++at.begun & seq_mask;
  if (!receives) {
    at.done = seq;
    // Parts may have come for it already (their senders were at another operation): the same as one that comes now.
    // Those of members whose root was refused are dropped, as they are when they come later.
    if (const auto it = d.team.find({team, seq}); it != d.team.end()) {
      int from = 0;
      while (from < d.size && it->second.sigs[static_cast<std::size_t>(from)] < 0) ++from;
      if (from == d.size) {
        d.team.erase(it);
      } else {
        lock.unlock();
        stray_part(std::string(what) + " (operation " + std::to_string(seq) + " of a team), in which this place "
                   "receives nothing, got a part from team rank " + std::to_string(from));
      }
    }
  }
  return signed_seq(seq, what, root);
}

std::uint64_t element_signature(std::size_t size, const char* mangled_name) noexcept {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char* c = mangled_name; *c != '\0'; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 16777619u;
  // (never 0 in the low half: a part of 0-byte elements does not exist, and 0 means "none came")
  return static_cast<std::uint64_t>(h) << 32 | static_cast<std::uint32_t>(size);
}

void team_send(std::uint64_t team, std::uint64_t seq, std::uint64_t elem, int from, int to,
               std::span<const std::byte> bytes, bool failed) {
  send_part(team, seq, elem, from, to, bytes, failed ? part_failed : 0);
}

std::uint64_t team_split_counter() {
  dist_state& d = *g_dist;
  std::lock_guard lock(d.mutex);
  return ++d.team_splits;
}

int team_rank() noexcept { return g_dist != nullptr ? g_dist->rank : 0; }
int team_size() noexcept { return g_dist != nullptr ? g_dist->size : 1; }
std::uint32_t team_run() noexcept { return g_dist != nullptr ? g_dist->clock_epoch : 0; }

std::size_t team_records() noexcept {
  if (g_dist == nullptr) return 0;
  std::lock_guard lock(g_dist->mutex);
  return g_dist->team_seqs.size();
}

void team_wrong_length(const char* what, int place, std::size_t got_bytes, std::size_t expected, std::size_t elem) {
  const std::string got = got_bytes % elem == 0 ? std::to_string(got_bytes / elem) + " elements"
                                                : std::to_string(got_bytes) + " bytes, not a whole number of " +
                                                      std::to_string(elem) + "-byte elements";
  throw illegal_operation_exception(std::string(what) + ": place " + std::to_string(place) + " gave " + got +
                                    ", this place expects " + std::to_string(expected));
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

namespace {
// The deleter of a sub-team's member list, shared by the copies of the team at one place: when the last goes, so
// does the place's record of the team (if it is of this run: a team kept past its run has no record in the next).
struct forget_team {
  std::uint64_t id;
  std::uint32_t run;
  void operator()(const std::vector<int>* members) const noexcept {
    const std::unique_ptr<const std::vector<int>> owned(members);
    detail::dist_state* d = detail::g_dist;
    if (d == nullptr || d->clock_epoch != run) return;
    std::lock_guard lock(d->mutex);
    d->team_seqs.erase(id);
    // (parts kept for it: only ever of operations this place never called, the members' misuse: said, then dropped)
    const auto first = d->team.lower_bound({id, 0}), last = d->team.lower_bound({id + 1, 0});
    for (auto it = first; it != last; ++it) {
      try {
        if (const std::string from = detail::untaken_senders(it->second, false, members); !from.empty()) {
          std::fprintf(stderr,
                       "apgas: place %d: a team was dropped here with parts of its operation %llu from %s that no "
                       "operation here took (this place called fewer of its operations than they did)\n",
                       d->rank, static_cast<unsigned long long>(it->first.second), from.c_str());
        }
      } catch (...) {  // (no memory for the message: the parts are dropped all the same)
      }
    }
    d->team.erase(first, last);
  }
};
}  // namespace

void team::fail(const std::string& err) { throw illegal_operation_exception(err); }

void team::check_run(const char* what) const {
  if (run_ != detail::team_run()) {  // (a split team's id is another team's in a later run: its parts would mix)
    throw illegal_operation_exception(std::string(what) + ": this team was made in an earlier run (apgas::run), or "
                                      "outside a run; a team serves the run it was made in: take team::world() "
                                      "again, and split it again");
  }
}

int team::root_rank(const char* what, place root) const {
  check_run(what);
  std::string err;
  const int id = root.id();
  const int all = static_cast<int>(all_places().size());
  if (id < 0 || id >= all) {
    err = std::string(what) + ": the root, place " + std::to_string(id) + ", is not a place (there are " +
          std::to_string(all) + " places, ids 0.." + std::to_string(all - 1) + ")";
  } else if (!root.is_host()) {
    err = std::string(what) + ": the root must be a host place (a team is one activity per host place); place " +
          std::to_string(id) + " is a GPU place";
  } else if (const int r = rank_of(root); r >= 0) {
    return r;
  } else {
    std::string list;
    for (int i = 0; i < size_ && i < 16; ++i) list += (i == 0 ? "" : ", ") + std::to_string(place_at(i));
    if (size_ > 16) list += ", ...";
    err = std::string(what) + ": the root, place " + std::to_string(id) + ", is not in this team of " +
          std::to_string(size_) + " places (" + list + ")";
  }
  // Refused here. The operation still takes its number, as at the other members (whose roots may be right), so that
  // this place's next operation is in step with theirs; and they are told, in case one waits for a part from here.
  const std::uint64_t seq = detail::team_skip(id_, what);
  for (int i = 0; i < size_; ++i) {
    if (i != rank_) {
      detail::send_part(id_, seq, 1, rank_, place_at(i), std::as_bytes(std::span<const char>(err)),
                        detail::part_root_refused);
    }
  }
  throw bad_place_exception(err);
}

detail::team_parts team::wait(const char* what, std::uint64_t seq, int expected, int from) const {
  int m = -1;
  detail::team_parts tp = detail::team_wait(id_, seq, expected, from, m, what, members_);
  if (m >= 0) {
    throw illegal_operation_exception(
        std::string(what) + " (operation " + std::to_string(seq & detail::seq_mask) +
        " of this team): the member of team rank " + std::to_string(m) + " (place " + std::to_string(place_at(m)) +
        ") sent a part of another operation, or named another root (every member calls the team's operations in "
        "the same order, with the same root)");
  }
  return tp;
}

void team::check_parts(const char* what, const detail::team_parts& tp, std::uint64_t elem, const char* type) const {
  for (std::size_t i = 0; i < tp.failed.size(); ++i) {
    if (tp.failed[i] != 0) {
      throw illegal_operation_exception(
          std::string(what) + ": place " + std::to_string(place_at(static_cast<int>(i))) +
          " was called with wrong arguments: " +
          std::string(reinterpret_cast<const char*>(tp.parts[i].data()), tp.parts[i].size()));
    }
  }
  const auto size_of = [](std::uint64_t sig) { return std::to_string(sig & 0xffffffffu); };
  for (std::size_t i = 0; i < tp.elems.size(); ++i) {
    if (tp.elems[i] == 0 || tp.elems[i] == elem) continue;
    const bool same_size = (tp.elems[i] & 0xffffffffu) == (elem & 0xffffffffu);
    throw illegal_operation_exception(
        std::string(what) + ": place " + std::to_string(place_at(static_cast<int>(i))) + " passed elements of " +
        (same_size ? "another type of " : "") + size_of(tp.elems[i]) + " bytes, this place's are " + size_of(elem) +
        " bytes (" + detail::demangle(type) + "; every member passes the same element type)");
  }
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
        detail::team_wrong_length("apgas::team::split", place_at(p), b.size(), 1, sizeof(entry));
      std::memcpy(&e, b.data(), sizeof e);
    }
    if (e.color == color) same.emplace_back(e, p);
  }
  std::stable_sort(same.begin(), same.end(), [](const auto& a, const auto& b) {
    return a.first.key != b.first.key ? a.first.key < b.first.key : a.second < b.second;
  });
  auto members = std::make_unique<std::vector<int>>();
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
  t.run_ = run_;
  t.members_ =
      std::shared_ptr<const std::vector<int>>(members.release(), forget_team{t.id_, detail::g_dist->clock_epoch});
  return t;
}

}  // namespace apgas
