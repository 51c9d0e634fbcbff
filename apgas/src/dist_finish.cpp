// The distributed finish: the counting of activity messages at their sender and their receiver, the reports of
// proxies, the hooks called by finish_state (home_done, proxy_complete). The protocol of the distributed finish is
// documented in docs/architecture.md ("Distributed finish"); the comments here name its steps. The records
// (dist_home, proxy) and rebalance_locked are in dist_state.hpp; the handlers here run under dist.cpp's invariant.
//
// Invariants:
//  - Counting (per finish F): the sender of an activity message counts it (home: balance[dst] += 1; proxy:
//    sends[dst] += 1) *before* the message is handed to the transport; the receiver counts the receipt (home:
//    balance[here] -= 1; proxy: receipts += 1) and F's local count += 1 in one step under the table lock.
//  - A proxy exists exactly while its local count is > 0; when it drops to 0 the proxy sends one report (its sends,
//    receipts and exceptions since it was created) to the home and is destroyed.
//  - The home wakes F's waiter exactly once: when its local count is 0 and every balance entry is 0.
#include "dist_state.hpp"

#include "finish.hpp"
#include "runtime.hpp"
#include "type_name.hpp"

#include <apgas/error.hpp>
#include <apgas/serialization/archive.hpp>
#include <apgas/serialization/registry.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace apgas::detail {

// The global id of finish `fs` for a message about to leave for `dst`, counting that message (sender side of the
// protocol). Creates the home record on the first remote activity of a finish homed here.
fid count_send(finish_state& fs, int dst) {
  dist_state& d = *g_dist;
  if (fs.is_proxy()) {
    auto& p = static_cast<proxy&>(fs);
    std::lock_guard lock(d.mutex);
    p.sends[dst] += 1;
    return {p.home, p.serial};
  }
  dist_home* h = fs.dist();
  if (h == nullptr) {
    std::lock_guard lock(d.mutex);
    h = fs.dist();
    if (h == nullptr) {
      if (d.spare_homes.empty()) {
        h = new dist_home;
        h->balance.assign(static_cast<std::size_t>(d.size), 0);
      } else {
        h = d.spare_homes.back();
        d.spare_homes.pop_back();
      }
      h->serial = d.next_serial++;
      d.homes.emplace(h->serial, &fs);
      fs.set_dist(h);
    }
  }
  bool drop = false;
  {
    std::lock_guard lock(h->mutex);
    drop = rebalance_locked(fs, *h, [&] { h->add(dst, +1); });
  }
  if (drop) fs.complete();  // only when a -1 was outstanding; the sender is alive, so this never ends the finish
  return {static_cast<std::uint64_t>(d.rank), h->serial};
}

// ---- collecting finishes across places ----
// An activity message carries the collector of its finish's chain (a trailer, collect_flag); the proxy at the
// receiving place keeps it, folds the offers made there into one partial value (under its lock), and sends that
// value home with its report, unless the report carries exceptions (X10's rule: the place's value is dropped). The
// home folds it into the closest collecting finish of the reported finish's chain (which may itself be a proxy of a
// finish further away: the value then travels on with that proxy's report).

bool append_collector(finish_state& fs, writer& w) {
  finish_state* c = fs.collecting();
  if (c == nullptr) return false;
  const std::size_t start = w.size();
  if (c->is_proxy()) {
    auto& p = static_cast<proxy&>(*c);
    w & p.cops_id;
    w.write_bytes(p.creducer.data(), p.creducer.size());
  } else {
    collector* k = c->coll();
    w & k->ops_id();
    if (k->write_reducer != nullptr) k->write_reducer(k->reducer, w);
  }
  w & static_cast<std::uint64_t>(w.size() - start - sizeof(std::uint32_t));
  return true;
}

namespace {
const collect_ops* ops_of(std::uint32_t id) {
  return reinterpret_cast<const collect_ops* (*)()>(ser::registry::lookup(id))();
}

// Fold a partial value that came home (reader at the value) into fs's closest collecting finish.
void merge_partial(finish_state& fs, reader& r) {
  finish_state* c = fs.collecting();
  if (c == nullptr) {
    throw serialization_error("apgas: malformed report: a partial value for a finish that does not collect");
  }
  std::lock_guard lock(c->lock());
  if (c->is_proxy()) {
    auto& p = static_cast<proxy&>(*c);
    if (p.cops->make == nullptr) {
      throw serialization_error("apgas: malformed report: a partial value of a reducer that is not shipped");
    }
    if (p.partial == nullptr) {
      reader rr(p.creducer, SIZE_MAX);  // (between places: no size limit but memory)
      p.partial = p.cops->make(rr);
    }
    p.cops->merge(p.partial, r);
  } else {
    collector* k = c->coll();
    if (k->merge == nullptr) {
      throw serialization_error("apgas: malformed report: a partial value of a reducer that is not shipped");
    }
    k->merge(k->accumulator, k->reducer, r);
  }
}
}  // namespace

void proxy_offer(finish_state& fs, const void* value, const std::type_info& type) {
  auto& p = static_cast<proxy&>(fs);
  const collect_ops* o = p.cops;
  if (*o->type != type) {
    // (p.home is the home of the finish this proxy stands for, perhaps one between the offer and the collecting
    // finish: the collecting finish's own place is not known here)
    throw illegal_operation_exception("apgas::offer of a value of type " + type_name(type) +
                                      " to a collecting finish whose reducer takes " + type_name(*o->type) +
                                      " (the offer at place " + std::to_string(g_dist->rank) +
                                      ", the collecting finish at another place)");
  }
  if (o->make == nullptr) {
    throw illegal_operation_exception(std::string("apgas::offer at place ") + std::to_string(g_dist->rank) +
                                      " to a collecting finish at another place: its reducer " +
                                      demangle(o->reducer_name) +
                                      " cannot be sent to another place (the reducer must be trivially copyable, or "
                                      "serializable and default-constructible; apgas::reducer is when its value is "
                                      "serializable and its operation trivially copyable and default-constructible: "
                                      "a lambda without captures; and its value_type serializable and "
                                      "default-constructible)");
  }
  std::lock_guard lock(p.lock());
  if (p.partial == nullptr) {
    reader r(p.creducer, SIZE_MAX);
    p.partial = o->make(r);
  }
  o->combine(p.partial, value);
}

// Receiver side: the finish that governs an arriving activity, with the receipt counted.
finish_state& count_receipt(fid f, std::span<const std::byte> coll) {
  dist_state& d = *g_dist;
  if (f.home >= static_cast<std::uint64_t>(d.size)) {
    throw serialization_error("apgas: malformed message: finish home " + std::to_string(f.home) +
                              " is not a host place (there are " + std::to_string(d.size) + ")");
  }
  std::lock_guard lock(d.mutex);
  if (f.home == static_cast<std::uint64_t>(d.rank)) {
    auto it = d.homes.find(f.serial);
    if (it == d.homes.end()) {
      throw serialization_error("apgas: malformed message: finish " + std::to_string(f.serial) +
                                " is not alive at place " + std::to_string(d.rank));
    }
    finish_state& fs = *it->second;
    dist_home& h = *fs.dist();
    bool drop = false;
    {
      std::lock_guard hl(h.mutex);
      fs.spawned();  // the arriving activity: counted before the token can go
      drop = rebalance_locked(fs, h, [&] { h.add(d.rank, -1); });
    }
    if (drop) fs.complete();
    return fs;
  }
  proxy*& p = d.proxies[{f.home, f.serial}];
  if (p == nullptr) p = new proxy(f.home, f.serial);
  if (!coll.empty() && p->cops == nullptr) {
    reader cr(coll);
    std::uint32_t id = 0;
    cr & id;
    const collect_ops* o = ops_of(id);
    p->creducer.assign(coll.begin() + static_cast<std::ptrdiff_t>(cr.position()), coll.end());
    p->cops = o;
    p->cops_id = id;
    p->set_collecting(p);
  }
  p->receipts += 1;
  p->spawned();
  return *p;
}

void deliver_report(int src, reader& r) {
  dist_state& d = *g_dist;
  std::uint64_t serial = 0;
  r & serial;
  const std::size_t n = r.read_length(12, "report");
  std::vector<std::pair<int, long>> sends(n);
  for (auto& [dst, count] : sends) {
    std::int32_t dd = 0;
    std::int64_t cc = 0;
    r & dd & cc;
    if (dd < 0 || dd >= d.size) throw serialization_error("apgas: malformed report: place " + std::to_string(dd));
    dst = dd;
    count = static_cast<long>(cc);
  }
  std::int64_t receipts = 0;
  r & receipts;
  const std::size_t ne = r.read_length(1, "report exceptions");
  std::vector<std::exception_ptr> es;
  for (std::size_t i = 0; i < ne; ++i) es.push_back(decode_exception(r));
  std::uint8_t has_partial = 0;
  r & has_partial;

  finish_state* fs = nullptr;
  {
    std::lock_guard lock(d.mutex);
    auto it = d.homes.find(serial);
    if (it == d.homes.end()) {
      std::fprintf(stderr, "apgas: place %d: a report from place %d for finish %llu, which is not alive here\n",
                   d.rank, src, static_cast<unsigned long long>(serial));
      return;
    }
    fs = it->second;
  }
  for (auto& e : es) fs->add_exception(std::move(e));
  if (has_partial != 0) {
    try {
      merge_partial(*fs, r);  // before the counts: the collecting finish (fs or an ancestor) is alive until then
    } catch (...) {
      fs->add_exception(std::current_exception());  // the finish still terminates, and says why its value is short
    }
  }
  dist_home& h = *fs->dist();
  bool drop = false;
  {
    std::lock_guard hl(h.mutex);
    drop = rebalance_locked(*fs, h, [&] {
      for (auto [dst, count] : sends) h.add(dst, count);
      h.add(src, -receipts);
    });
  }
  if (drop) fs->complete();  // may end the finish: h is not touched after this
}

// ---- distributed finish: the hooks called by finish_state ----

void home_done(finish_state& fs) noexcept {
  dist_home* h = fs.dist();
  fs.set_dist(nullptr);
  // The finish ended: every balance entry is 0 and nobody is inside h's lock (dist_home's comment), so the record
  // can serve the next finish as it is.
  std::lock_guard lock(g_dist->mutex);
  g_dist->homes.erase(h->serial);
  if (h->unbalanced == 0 && g_dist->spare_homes.size() < dist_state::max_spare_homes) {
    g_dist->spare_homes.push_back(h);  // within the reserved capacity: does not throw
  } else {
    delete h;
  }
}

void proxy_complete(finish_state& fs) noexcept {
  auto& p = static_cast<proxy&>(fs);
  dist_state& d = *g_dist;
  {
    std::lock_guard lock(d.mutex);
    if (p.add_count(-1) != 0) return;
    d.proxies.erase({p.home, p.serial});
  }
  // Quiescent: one report with everything since the proxy was created, then the proxy is gone.
  try {
    std::vector<std::exception_ptr> es = p.take_exceptions_quiescent();
    const auto report = [&](bool partial) {
      writer w = message_writer(128);
      w & msg::report & p.serial;
      w.write_length(p.sends.size());
      for (auto [dst, count] : p.sends) w & static_cast<std::int32_t>(dst) & static_cast<std::int64_t>(count);
      w & static_cast<std::int64_t>(p.receipts);
      w.write_length(es.size());
      for (const auto& e : es) encode_exception(w, e);
      w & static_cast<std::uint8_t>(partial ? 1 : 0);
      if (partial) p.cops->write(p.partial, w);
      return w;
    };
    // The partial value of this place (quiescent: no offer can come now), unless this place threw. A value that
    // cannot be written is this place's exception instead (its value dropped, as for any place that threw).
    const bool partial = p.partial != nullptr && es.empty();
    writer w;
    try {
      w = report(partial);
    } catch (...) {
      if (!partial) throw;
      es.push_back(std::current_exception());
      w = report(false);
    }
    send(static_cast<int>(p.home), std::move(w));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "apgas: place %d could not report to place %llu: %s; stopping this place (exit code 3)\n",
                 d.rank, static_cast<unsigned long long>(p.home), e.what());
    std::fflush(stderr);
    end_process(3);  // the finish at the home could never terminate
  }
  delete &p;
}

}  // namespace apgas::detail
