#pragma once
// Test support: the structural checks of a trace file (APGAS_TRACE) — what Perfetto's JSON importer needs to show it
// without errors — and the counts the tests compare with the work they did.
//  - the file parses as JSON: an object whose traceEvents is an array of events, each with ph, pid, tid and ts;
//  - complete events ('X') nest on every thread track (pid, tid): two of them are disjoint or one holds the other;
//  - every flow (cat, name, id) has exactly one start 's' and one end 'f' ("bp":"e"), each inside a complete event of
//    its own track (the slice it binds to);
//  - async slices ('b'/'e', per pid, cat and id) open and close in turn, and all are closed;
//  - every process that has an event is named (process_name), every thread track with a complete event too
//    (thread_name); counters ('C') carry numbers.
#include "support/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace apgas_test {

struct trace_facts {
  std::vector<std::string> problems;               ///< structural defects; empty when the trace is well formed
  long events = 0;
  std::map<int, std::string> processes;            ///< pid -> process_name
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::string, long> starts;              ///< complete events that are not resumptions, by name
  std::map<std::string, long> starts_by_cat;       ///< the same, by category
  std::map<std::string, long> pieces_by_cat;       ///< every complete event, by category
  std::map<std::string, long> flows;               ///< complete flows, by category
  std::map<std::string, long> flows_between;       ///< complete flows by "cat pid->pid"
  std::map<std::string, long> backward_flows;      ///< complete flows that end before they start, by category
  std::map<std::string, long> counters;            ///< counter events, by name
  std::map<std::string, double> counter_max;       ///< a counter's largest value
  long async_slices = 0;                           ///< closed async slices (parks)
  double dropped = -1;                             ///< otherData.events_dropped
  std::set<std::pair<int, int>> tracks;            ///< (pid, tid) of complete events

  /// Names of complete events (not resumptions) that contain `part`, summed.
  long starts_containing(const std::string& part) const {
    long n = 0;
    for (const auto& [name, c] : starts) {
      if (name.find(part) != std::string::npos) n += c;
    }
    return n;
  }
  std::string summary() const {
    std::string s;
    for (std::size_t i = 0; i < problems.size() && i < 10; ++i) s += problems[i] + "\n";
    if (problems.size() > 10) s += "... (" + std::to_string(problems.size()) + " problems)\n";
    return s;
  }
};

namespace trace_detail {
inline long long ns(double us) { return std::llround(us * 1000.0); }
inline int integer(const json::value* v) { return v != nullptr && v->is_number() ? static_cast<int>(v->number()) : -1; }
inline std::string text(const json::value* v) { return v != nullptr && v->is_string() ? v->string() : std::string(); }
}  // namespace trace_detail

inline trace_facts check_trace_text(const std::string& content) {
  using namespace trace_detail;
  trace_facts f;
  json::value doc;
  try {
    doc = json::parse(content);
  } catch (const std::exception& e) {
    f.problems.push_back(std::string("not JSON: ") + e.what());
    return f;
  }
  const json::value* events = doc.get("traceEvents");
  if (events == nullptr || !events->is_array()) {
    f.problems.push_back("no traceEvents array");
    return f;
  }
  if (const json::value* other = doc.get("otherData")) {
    if (const json::value* d = other->get("events_dropped"); d != nullptr && d->is_number()) f.dropped = d->number();
  }
  struct span {
    long long start, end;
  };
  std::map<std::pair<int, int>, std::vector<span>> spans;
  struct flow_end {
    int pid, tid;
    long long ts;
    bool bound;
  };
  std::map<std::tuple<std::string, std::string, long long>, std::pair<std::vector<flow_end>, std::vector<flow_end>>>
      flows;
  std::map<std::tuple<int, std::string, long long>, int> open_async;
  std::set<int> pids;
  for (const json::value& e : events->items()) {
    ++f.events;
    const std::string ph = text(e.get("ph"));
    const json::value* ts = e.get("ts");
    const int pid = integer(e.get("pid"));
    const int tid = integer(e.get("tid"));
    if (ph.size() != 1 || ts == nullptr || !ts->is_number() || pid < 0 || tid < 0) {
      f.problems.push_back("an event without ph, pid, tid or ts");
      continue;
    }
    pids.insert(pid);
    const std::string name = text(e.get("name"));
    const std::string cat = text(e.get("cat"));
    switch (ph[0]) {
      case 'M': {
        const json::value* args = e.get("args");
        const std::string value = args != nullptr ? text(args->get("name")) : "";
        if (name == "process_name") f.processes[pid] = value;
        if (name == "thread_name") f.threads[{pid, tid}] = value;
        break;
      }
      case 'X': {
        const json::value* dur = e.get("dur");
        if (dur == nullptr || !dur->is_number() || dur->number() < 0 || name.empty() || cat.empty()) {
          f.problems.push_back("a complete event without name, cat or a dur >= 0: " + name);
          break;
        }
        const long long start = ns(ts->number());
        spans[{pid, tid}].push_back({start, start + ns(dur->number())});
        f.tracks.insert({pid, tid});
        ++f.pieces_by_cat[cat];
        const json::value* args = e.get("args");
        const bool resumed = args != nullptr && args->get("resumed") != nullptr;
        if (!resumed) {
          ++f.starts[name];
          ++f.starts_by_cat[cat];
        }
        break;
      }
      case 's':
      case 'f': {
        const json::value* id = e.get("id");
        if (id == nullptr || !id->is_number()) {
          f.problems.push_back("a flow event without a numeric id");
          break;
        }
        if (ph[0] == 'f' && text(e.get("bp")) != "e") f.problems.push_back("a flow end without \"bp\":\"e\"");
        auto& ends = flows[{cat, name, static_cast<long long>(id->number())}];
        (ph[0] == 's' ? ends.first : ends.second).push_back({pid, tid, ns(ts->number()), false});
        break;
      }
      case 'b':
      case 'e': {
        const json::value* id = e.get("id");
        if (id == nullptr || !id->is_number()) {
          f.problems.push_back("an async event without a numeric id");
          break;
        }
        int& open = open_async[{pid, cat, static_cast<long long>(id->number())}];
        if (ph[0] == 'b') {
          if (open != 0) f.problems.push_back("an async slice begins while its track has one open");
          open = 1;
        } else {
          if (open != 1) f.problems.push_back("an async slice ends that did not begin");
          open = 0;
          ++f.async_slices;
        }
        break;
      }
      case 'C': {
        const json::value* args = e.get("args");
        if (args == nullptr || !args->is_object() || args->fields().empty()) {
          f.problems.push_back("a counter without values: " + name);
          break;
        }
        for (const auto& [k, v] : args->fields()) {
          if (!v.is_number()) f.problems.push_back("a counter value that is not a number: " + name);
          else f.counter_max[name] = std::max(f.counter_max[name], v.number());
        }
        ++f.counters[name];
        break;
      }
      default: f.problems.push_back("an event of phase " + ph); break;
    }
  }
  for (const auto& [key, open] : open_async) {
    if (open != 0) f.problems.push_back("an async slice is never closed");
  }
  // Nesting per track, and the outermost intervals (for binding the flows).
  std::map<std::pair<int, int>, std::vector<span>> outer;
  for (auto& [track, v] : spans) {
    std::sort(v.begin(), v.end(), [](const span& a, const span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<span> stack;
    auto& top_level = outer[track];
    for (const span& s : v) {
      while (!stack.empty() && stack.back().end <= s.start) stack.pop_back();
      if (!stack.empty() && s.end > stack.back().end) {
        std::ostringstream m;
        m << "complete events overlap on pid " << track.first << " tid " << track.second << ": [" << stack.back().start
          << ", " << stack.back().end << "] and [" << s.start << ", " << s.end << "] ns";
        f.problems.push_back(m.str());
      }
      if (stack.empty()) top_level.push_back(s);
      stack.push_back(s);
    }
  }
  const auto bound = [&](const flow_end& e) {
    const auto it = outer.find({e.pid, e.tid});
    if (it == outer.end()) return false;
    const auto& v = it->second;
    auto u = std::upper_bound(v.begin(), v.end(), e.ts, [](long long t, const span& s) { return t < s.start; });
    if (u == v.begin()) return false;
    --u;
    return e.ts >= u->start && e.ts <= u->end;
  };
  for (const auto& [key, ends] : flows) {
    const auto& [cat, name, id] = key;
    if (ends.first.size() != 1 || ends.second.size() != 1) {
      f.problems.push_back("flow " + cat + " " + std::to_string(id) + " has " + std::to_string(ends.first.size()) +
                           " starts and " + std::to_string(ends.second.size()) + " ends");
      continue;
    }
    if (!bound(ends.first[0])) f.problems.push_back("flow " + cat + " " + std::to_string(id) + " starts outside a slice");
    if (!bound(ends.second[0])) f.problems.push_back("flow " + cat + " " + std::to_string(id) + " ends outside a slice");
    ++f.flows[cat];
    if (ends.second[0].ts < ends.first[0].ts) ++f.backward_flows[cat];
    ++f.flows_between[cat + " " + std::to_string(ends.first[0].pid) + "->" + std::to_string(ends.second[0].pid)];
  }
  for (int pid : pids) {
    if (f.processes.count(pid) == 0) f.problems.push_back("process " + std::to_string(pid) + " has no name");
  }
  for (const auto& t : f.tracks) {
    if (f.threads.count(t) == 0) {
      f.problems.push_back("thread track " + std::to_string(t.first) + "/" + std::to_string(t.second) + " has no name");
    }
  }
  return f;
}

inline trace_facts check_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    trace_facts f;
    f.problems.push_back("cannot open " + path);
    return f;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return check_trace_text(ss.str());
}

}  // namespace apgas_test
