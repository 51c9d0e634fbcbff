// The trace file: every place's record merged into one Chrome trace-event JSON document, the format Perfetto's
// JSON importer and chrome://tracing read (docs/architecture.md, "Observability", lists what it contains).
//
// What is recorded is the raw order of things on each worker (activities begin and end, spans begin and end,
// switches between fibers); the spans of the file are rebuilt here, per place, in time order over all its workers:
//  - every fiber keeps a stack of the activities and spans open on it (a finish waiting on it runs children inline:
//    they nest). A worker's track shows exactly the stack of the fiber it runs: when a switch takes a fiber off a
//    worker, its open spans end there (one 'X' piece each) and the fiber is parked (an async slice on the fiber's own
//    track, from then to its resumption); when a fiber comes onto a worker, its stack is reopened there. So the pieces
//    on a thread track always nest, whatever the fibers did;
//  - a flow is written only when both of its ends were recorded (a full buffer may have dropped one): 's' inside the
//    span that sent it, 'f' binding to the span it starts (Perfetto's flow v1, bound to enclosing slices);
//  - spans on a GPU stream are cut so that they never overlap (a stream runs its operations one after the other;
//    device times come as float milliseconds, whose rounding could make neighbours overlap by a few ns);
//  - counters derived here: activities alive per place (spawned or arrived, not yet ended), message bytes in flight
//    per sending place (sent, not yet handled at the other end), sampled at most every 10 us per series.
// Times: each place's clock mapped onto place 0's (offsets measured at start and at the end, interpolated in between),
// in microseconds from the start of the run.
#include "obs.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace apgas::detail::obs {

namespace {

// The top-level template arguments of s from position `open` (just after a '<') to its matching '>'.
std::vector<std::string> template_args(const std::string& s, std::size_t open) {
  std::vector<std::string> args;
  int depth = 0;
  std::size_t from = open;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(' || c == '{' || c == '[') ++depth;
    if (c == '>' || c == ')' || c == '}' || c == ']') {
      if (depth == 0) {
        args.push_back(s.substr(from, i - from));
        return args;
      }
      --depth;
    }
    if (c == ',' && depth == 0) {
      args.push_back(s.substr(from, i - from));
      from = i + 1;
      while (from < s.size() && s[from] == ' ') ++from;
    }
  }
  args.push_back(s.substr(from));
  return args;
}

}  // namespace

std::string readable_type_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  while (!s.empty() && (s.back() == '*' || s.back() == ' ')) s.pop_back();
  // apgas's own wrappers around the user's closure: keep the closure (their first template argument).
  for (const char* wrapper : {"apgas::detail::task_of<", "apgas::detail::async_entry<", "apgas::detail::at_entry<"}) {
    const std::size_t n = std::strlen(wrapper);
    if (s.compare(0, n, wrapper) == 0) return template_args(s, n).front();
  }
  // nvcc's wrapper of an extended (__host__ __device__) lambda names the function that defines it and the lambda's
  // number there: __nv_hdl_wrapper_t<..., __nv_dl_tag<void (*)(int), &ns::f, 1u>, ...>.
  const std::size_t tag = s.find("__nv_dl_tag<");
  if (s.compare(0, 19, "__nv_hdl_wrapper_t<") == 0 && tag != std::string::npos) {
    const std::vector<std::string> a = template_args(s, tag + 12);
    if (a.size() >= 3) {
      std::string fn = a[1];
      if (!fn.empty() && fn[0] == '&') fn.erase(0, 1);
      std::string number = a[2];
      while (!number.empty() && (number.back() == 'u' || number.back() == 'U')) number.pop_back();
      return fn + "::{lambda #" + number + "}";
    }
  }
  return s;
}

namespace {

const char* category_name(std::uint32_t c) noexcept {
  switch (c) {
    case cat_activity: return "activity";
    case cat_finish: return "finish";
    case cat_park: return "park";
    case cat_at: return "at";
    case cat_message: return "message";
    case cat_team: return "team";
    case cat_gpu: return "gpu";
    case cat_copy: return "copy";
    case cat_counter: return "counter";
    default: return "apgas";
  }
}

const char* flow_name(std::uint16_t k) noexcept {
  switch (static_cast<flow>(k)) {
    case flow::spawn: return "spawn";
    case flow::message: return "message";
    case flow::launch: return "launch";
  }
  return "flow";
}

std::string gpu_track_name(int track) {
  if (track >= track_queue0) return "in-order queue " + std::to_string(track - track_queue0);
  if (track == track_h2d) return "copies host->GPU";
  if (track == track_d2h) return "copies GPU->host, GPU->GPU";
  return "kernels, stream " + std::to_string(track - track_kernel0);
}

// Buffered output to a FILE, with the few formatting helpers the events need.
class out {
 public:
  explicit out(std::FILE* f) : f_(f) { buf_.reserve(1 << 20); }
  ~out() { flush(); }
  out& s(std::string_view v) {
    buf_.append(v);
    if (buf_.size() > (1u << 20)) flush();
    return *this;
  }
  out& str(std::string_view v) {  // a JSON string: valid UTF-8 as it is, each byte of invalid UTF-8 as U+FFFD
    buf_ += '"';
    for (std::size_t i = 0; i < v.size();) {
      const char c = v[i];
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        buf_ += '\\';
        buf_ += c;
        ++i;
      } else if (u < 0x20) {
        char e[8];
        std::snprintf(e, sizeof e, "\\u%04x", static_cast<unsigned>(u));
        buf_ += e;
        ++i;
      } else if (u < 0x80) {
        buf_ += c;
        ++i;
      } else if (const std::size_t n = utf8_length(v.substr(i)); n != 0) {
        buf_.append(v.substr(i, n));
        i += n;
      } else {
        buf_ += "\\ufffd";
        ++i;
      }
    }
    buf_ += '"';
    return *this;
  }
  // The length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF)
  // that starts v with a byte of 0x80 or more, or 0 where none does.
  static std::size_t utf8_length(std::string_view v) noexcept {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(v[k]); };
    const unsigned c = b(0);
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return 0;
    }
    if (v.size() < n || b(1) < lo || b(1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k) {
      if (b(k) < 0x80 || b(k) > 0xbf) return 0;
    }
    return n;
  }
  out& num(std::uint64_t v) {
    char b[24];
    const int n = std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(v));
    buf_.append(b, static_cast<std::size_t>(n));
    return *this;
  }
  out& snum(std::int64_t v) {
    char b[24];
    const int n = std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
    buf_.append(b, static_cast<std::size_t>(n));
    return *this;
  }
  out& us(std::int64_t ns) {  // nanoseconds as microseconds with three decimals, exactly
    if (ns < 0) {
      buf_ += '-';
      ns = -ns;
    }
    char b[32];
    const int n = std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000),
                                static_cast<long long>(ns % 1000));
    buf_.append(b, static_cast<std::size_t>(n));
    return *this;
  }
  // One event: {"ph":..,"pid":..,"tid":..,"ts":.. — the caller adds the rest and end().
  out& begin(char ph, int pid, int tid, std::int64_t ts) {
    s(first_ ? "\n" : ",\n");
    first_ = false;
    ++count_;
    s("{\"ph\":\"");
    buf_ += ph;
    s("\",\"pid\":").snum(pid).s(",\"tid\":").snum(tid).s(",\"ts\":").us(ts);
    return *this;
  }
  void end() { s("}"); }
  std::uint64_t count() const noexcept { return count_; }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) failed_ = true;
    buf_.clear();
  }
  bool failed() const noexcept { return failed_; }

 private:
  std::FILE* f_;
  std::string buf_;
  bool first_ = true;
  bool failed_ = false;
  std::uint64_t count_ = 0;
};

struct flow_info {
  std::uint16_t kind = 0;
  int src_place = -1;
  std::uint64_t bytes = 0;
  bool out = false, in = false;
  std::uint64_t json_id = 0;
};

struct open_span {
  std::uint64_t name = 0;  // index into the record's names
  std::uint32_t cat = 0;
  bool activity = false;
  std::uint64_t arg = 0;
  int peer = -1;
  std::int64_t seg_start = 0;  // global ns of this piece
  bool resumed = false;
};

struct fiber_state {
  std::vector<open_span> stack;
  int where = -1;              // the stream (worker) running it, -1 while parked or unknown
  std::int64_t parked_at = -1;
  int index = 0;               // its async track id
};

// A sampled counter series. A change is held as the pending sample until a change at a later time comes (the
// changes at one time make one sample); the pending sample is then written, at its own time, unless the later change
// comes within counter_gap_ns of the sample written last (a value that lasted less than that is left out, to keep
// the samples few) or it repeats the value written last. The last pending sample is written at the end
// (flush_series). So a value that lasted counter_gap_ns or more is always in the file, from the time it was reached.
struct series {
  int pid = 0;
  std::string name;
  std::int64_t value = 0;
  std::int64_t last_emit = 0;
  bool emitted = false;
  bool pending = false;
  std::int64_t pending_ts = 0;
  std::int64_t pending_value = 0;
  std::int64_t last_value = 0;  // the value written last
};
constexpr std::int64_t counter_gap_ns = 10'000;

void emit_counter(out& o, series& s, std::int64_t ts, std::int64_t value) {
  o.begin('C', s.pid, 0, ts).s(",\"name\":").str(s.name).s(",\"args\":{\"value\":").snum(value).s("}");
  o.end();
  s.emitted = true;
  s.last_emit = ts;
  s.last_value = value;
}

void change(out& o, series& s, std::int64_t ts, std::int64_t delta) {
  s.value += delta;
  if (s.pending && ts != s.pending_ts && (!s.emitted || s.pending_value != s.last_value) &&
      (!s.emitted || ts - s.last_emit >= counter_gap_ns)) {
    emit_counter(o, s, s.pending_ts, s.pending_value);
  }
  s.pending = true;
  s.pending_ts = ts;
  s.pending_value = s.value;
}

void flush_series(out& o, series& s) {
  if (s.pending && (!s.emitted || s.pending_value != s.last_value)) emit_counter(o, s, s.pending_ts, s.pending_value);
  s.pending = false;
}

// Maps a place's clock onto place 0's (or leaves it) and makes it relative to the start of the run.
struct time_map {
  std::int64_t base = 0;
  clock_sample a, b;
  bool merged = false;
  std::int64_t operator()(std::uint64_t local) const noexcept {
    auto x = static_cast<std::int64_t>(local);
    std::int64_t off = 0;
    if (merged) {
      if (b.local > a.local && a.local != 0) {
        const double f = (static_cast<double>(x) - static_cast<double>(a.local)) /
                         (static_cast<double>(b.local) - static_cast<double>(a.local));
        off = a.offset + static_cast<std::int64_t>(f * static_cast<double>(b.offset - a.offset));
      } else if (a.local != 0) {
        off = a.offset;
      } else {
        off = b.offset;
      }
    }
    return x - off - base;
  }
};

// One stream's events in time order (device spans excluded: their times are the GPU's).
struct cursor {
  const std::vector<event>* events;
  std::vector<std::size_t> order;  // indices in time order
  std::size_t next = 0;
};

class writer_state {
 public:
  writer_state(out& o, const std::vector<place_record>& records, const std::vector<place_info>& places,
               std::uint32_t mask, bool merged)
      : o_(o), records_(records), places_(places), mask_(mask), merged_(merged) {}

  void run() {
    collect_flows();
    std::int64_t base_local = 0;
    for (const place_record& r : records_) {
      if (r.place == 0 || !merged_) base_local = static_cast<std::int64_t>(r.t_start);
      if (r.place == 0) break;
    }
    for (const place_record& r : records_) {
      time_map t;
      t.merged = merged_ && r.place != 0;
      t.a = r.sync_start;
      t.b = r.sync_end;
      t.base = merged_ ? base_local : static_cast<std::int64_t>(r.t_start);
      names(r);
      place_events(r, t);
      device_events(r, t);
    }
    in_flight();
  }

 private:
  int pid_of(int place) const noexcept { return place + 1; }

  std::string place_label(int p) const {
    std::string s = "place " + std::to_string(p);
    if (p >= 0 && p < static_cast<int>(places_.size())) {
      const place_info& i = places_[static_cast<std::size_t>(p)];
      if (i.parent >= 0) s += " (GPU place of place " + std::to_string(i.parent) + ")";
      if (!i.description.empty()) s += ": " + i.description;
    }
    return s;
  }

  void meta(const char* what, int pid, int tid, const std::string& name) {
    o_.begin('M', pid, tid, 0).s(",\"name\":").str(what).s(",\"args\":{\"name\":").str(name).s("}");
    o_.end();
  }
  void sort_index(int pid, int index) {
    o_.begin('M', pid, 0, 0).s(",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":").snum(index).s("}");
    o_.end();
  }

  void names(const place_record& r) {
    const int pid = pid_of(r.place);
    meta("process_name", pid, 0, place_label(r.place));
    sort_index(pid, r.place * 1000);
    for (int w = 0; w < r.workers; ++w) meta("thread_name", pid, w + 1, "worker " + std::to_string(w));
    if (!r.streams.empty() && !r.streams.back().empty()) meta("thread_name", pid, r.workers + 1, "other threads");
    for (int q = 0; q < r.gpus; ++q) {
      const int gp = r.first_gpu + q;
      meta("process_name", pid_of(gp), 0, place_label(gp));
      sort_index(pid_of(gp), r.place * 1000 + 1 + q);
    }
  }

  void collect_flows() {
    for (const place_record& r : records_) {
      for (const auto& s : r.streams) {
        for (const event& e : s) {
          if (e.kind == k_flow_out) {
            flow_info& f = flows_[e.a];
            f.out = true;
            f.kind = e.d;
            f.src_place = r.place;
            f.bytes = e.b;
          } else if (e.kind == k_flow_in) {
            flows_[e.a].in = true;
          } else if (e.kind == k_device_span && e.b != 0) {
            flows_[e.b].in = true;
          }
        }
      }
    }
  }

  // The flow's id in the file, or 0 when it lacks an end.
  std::uint64_t valid_flow(std::uint64_t id) {
    auto it = flows_.find(id);
    if (it == flows_.end() || !it->second.out || !it->second.in) return 0;
    if (it->second.json_id == 0) it->second.json_id = ++next_json_flow_;
    return it->second.json_id;
  }

  void flow_event(char ph, std::uint64_t json_id, std::uint16_t kind, int pid, int tid, std::int64_t ts) {
    const char* n = flow_name(kind);
    o_.begin(ph, pid, tid, ts).s(",\"id\":").num(json_id).s(",\"cat\":").str(n).s(",\"name\":").str(n);
    if (ph == 'f') o_.s(",\"bp\":\"e\"");
    o_.end();
  }

  void piece(const place_record& r, int pid, int tid, const open_span& sp, std::int64_t end) {
    o_.begin('X', pid, tid, sp.seg_start).s(",\"dur\":").us(std::max<std::int64_t>(end - sp.seg_start, 0));
    o_.s(",\"name\":").str(r.names[static_cast<std::size_t>(sp.name)]).s(",\"cat\":").str(category_name(sp.cat));
    if (!sp.activity && (sp.arg != 0 || sp.peer >= 0)) {
      o_.s(",\"args\":{");
      bool comma = false;
      if (sp.cat == cat_at) {
        o_.s("\"place\":").num(sp.arg);
        comma = true;
      } else if (sp.arg != 0) {
        o_.s("\"bytes\":").num(sp.arg);
        comma = true;
      }
      if (sp.peer >= 0 && sp.cat != cat_at) {
        o_.s(comma ? "," : "").s("\"peer\":").snum(sp.peer);
        comma = true;
      }
      if (sp.resumed) o_.s(comma ? "," : "").s("\"resumed\":1");  // a span with arguments can be resumed too (an at)
      o_.s("}");
    } else if (sp.resumed) {
      o_.s(",\"args\":{\"resumed\":1}");
    }
    o_.end();
  }

  void place_events(const place_record& r, const time_map& t) {
    const int pid = pid_of(r.place);
    const int nstreams = static_cast<int>(r.streams.size());
    std::vector<cursor> cur(static_cast<std::size_t>(nstreams));
    for (int i = 0; i < nstreams; ++i) {
      cursor& c = cur[static_cast<std::size_t>(i)];
      c.events = &r.streams[static_cast<std::size_t>(i)];
      for (std::size_t k = 0; k < c.events->size(); ++k) {
        const std::uint16_t kind = (*c.events)[k].kind;
        if (kind != k_device_span && kind != k_device_ext) c.order.push_back(k);
      }
      // (the threads that share the last buffer take their time before its lock: nearly, not exactly, in order)
      std::stable_sort(c.order.begin(), c.order.end(), [&](std::size_t a, std::size_t b) {
        return (*c.events)[a].ts < (*c.events)[b].ts;
      });
    }
    std::unordered_map<std::uint64_t, std::unique_ptr<fiber_state>> fibers;
    std::vector<fiber_state*> current(static_cast<std::size_t>(nstreams), nullptr);
    std::vector<std::unique_ptr<fiber_state>> initial;  // what each worker ran before its first recorded switch
    for (int i = 0; i < nstreams; ++i) {
      initial.push_back(std::make_unique<fiber_state>());
      initial.back()->where = i;
      initial.back()->index = next_fiber_++;
      current[static_cast<std::size_t>(i)] = initial.back().get();
    }
    std::vector<open_span*> last_open(static_cast<std::size_t>(nstreams), nullptr);
    series alive{pid, "activities alive"};
    const bool parks = (mask_ & cat_park) != 0;
    std::int64_t last_ts = t(r.t_stop);

    const auto close_all = [&](fiber_state& f, int stream, std::int64_t ts) {
      for (auto it = f.stack.rbegin(); it != f.stack.rend(); ++it) piece(r, pid, stream + 1, *it, ts);
    };
    const auto take_off = [&](fiber_state& f, std::int64_t ts) {
      if (f.where < 0) return;
      close_all(f, f.where, ts);
      if (!f.stack.empty()) {
        f.parked_at = ts;
        if (parks) {
          o_.begin('b', pid, 0, ts).s(",\"id\":").snum(f.index).s(",\"cat\":\"park\",\"name\":\"parked\"");
          o_.end();
        }
      }
      last_open[static_cast<std::size_t>(f.where)] = nullptr;
      f.where = -1;
    };

    using item = std::pair<std::uint64_t, int>;  // (local ts, stream)
    std::priority_queue<item, std::vector<item>, std::greater<>> heap;
    for (int i = 0; i < nstreams; ++i) {
      const cursor& c = cur[static_cast<std::size_t>(i)];
      if (!c.order.empty()) heap.emplace((*c.events)[c.order[0]].ts, i);
    }
    while (!heap.empty()) {
      const int s = heap.top().second;
      heap.pop();
      cursor& c = cur[static_cast<std::size_t>(s)];
      const event& e = (*c.events)[c.order[c.next]];
      if (++c.next < c.order.size()) heap.emplace((*c.events)[c.order[c.next]].ts, s);
      const std::int64_t ts = t(e.ts);
      last_ts = std::max(last_ts, ts);
      fiber_state*& running = current[static_cast<std::size_t>(s)];
      switch (e.kind) {
        case k_switch: {
          if (running != nullptr && running->where == s) {
            // The worker's first fiber is known only from its first switch: adopt the address.
            if (running->index >= 0 && fibers.find(e.a) == fibers.end()) {
              for (auto& f : initial) {
                if (f.get() == running) fibers.emplace(e.a, std::move(f));
              }
            }
            take_off(*running, ts);
          }
          auto& slot = fibers[e.b];
          if (slot == nullptr) {
            slot = std::make_unique<fiber_state>();
            slot->index = next_fiber_++;
          }
          fiber_state& to = *slot;
          if (to.where >= 0 && to.where != s) {  // (a tie in time with its leaving the other worker)
            const int other = to.where;
            take_off(to, ts);
            current[static_cast<std::size_t>(other)] = nullptr;
          }
          running = &to;
          to.where = s;
          if (to.parked_at >= 0) {
            if (parks) {
              o_.begin('e', pid, 0, ts).s(",\"id\":").snum(to.index).s(",\"cat\":\"park\",\"name\":\"parked\"");
              o_.end();
            }
            to.parked_at = -1;
          }
          for (open_span& sp : to.stack) {
            sp.seg_start = ts;
            sp.resumed = true;
          }
          last_open[static_cast<std::size_t>(s)] = to.stack.empty() ? nullptr : &to.stack.back();
          break;
        }
        case k_act_begin:
        case k_span_begin: {
          if (running == nullptr) {
            initial.push_back(std::make_unique<fiber_state>());
            running = initial.back().get();
            running->where = s;
            running->index = next_fiber_++;
          }
          open_span sp;
          sp.name = e.a;
          sp.activity = e.kind == k_act_begin;
          sp.cat = sp.activity ? cat_activity : e.c;
          sp.arg = sp.activity ? 0 : e.b;
          sp.peer = sp.activity ? -1 : static_cast<int>(e.d) - 1;
          sp.seg_start = ts;
          running->stack.push_back(sp);
          last_open[static_cast<std::size_t>(s)] = &running->stack.back();
          if (sp.activity) change(o_, alive, ts, 1);  // taken back if a spawn flow ends here (counted at the spawn)
          break;
        }
        case k_flow_in: {
          const std::uint64_t id = valid_flow(e.a);
          const auto it = flows_.find(e.a);
          if (it != flows_.end() && it->second.out && it->second.kind == static_cast<std::uint16_t>(flow::spawn) &&
              last_open[static_cast<std::size_t>(s)] != nullptr && last_open[static_cast<std::size_t>(s)]->activity) {
            change(o_, alive, ts, -1);
          }
          if (it != flows_.end() && it->second.out && it->second.kind == static_cast<std::uint16_t>(flow::message)) {
            in_flight_.push_back({ts, it->second.src_place, -static_cast<std::int64_t>(it->second.bytes)});
          }
          if (id != 0) flow_event('f', id, it->second.kind, pid, s + 1, ts);
          break;
        }
        case k_act_end:
        case k_span_end: {
          if (running == nullptr) break;
          auto& st = running->stack;
          const bool activity = e.kind == k_act_end;
          if (!activity && (st.empty() || st.back().activity)) break;  // (its begin was lost)
          while (!st.empty()) {
            const open_span sp = st.back();
            st.pop_back();
            piece(r, pid, s + 1, sp, ts);
            if (sp.activity) change(o_, alive, ts, -1);
            if (!activity || sp.activity) break;
          }
          last_open[static_cast<std::size_t>(s)] = st.empty() ? nullptr : &st.back();
          break;
        }
        case k_flow_out: {
          if (e.d == static_cast<std::uint16_t>(flow::spawn)) change(o_, alive, ts, 1);
          if (e.d == static_cast<std::uint16_t>(flow::message)) {
            in_flight_.push_back({ts, r.place, static_cast<std::int64_t>(e.b)});
          }
          if (const std::uint64_t id = valid_flow(e.a)) flow_event('s', id, e.d, pid, s + 1, ts);
          break;
        }
        case k_counter: {
          const int p = e.d == 0 ? r.place : static_cast<int>(e.d) - 1;
          std::string name = r.names[static_cast<std::size_t>(e.a)];
          o_.begin('C', pid_of(p), 0, ts).s(",\"name\":").str(name).s(",\"args\":{\"value\":").num(e.b).s("}");
          o_.end();
          break;
        }
        default: break;
      }
    }
    // The end of the run (or of the buffers): what is still open ends here.
    for (int i = 0; i < nstreams; ++i) {
      fiber_state* f = current[static_cast<std::size_t>(i)];
      if (f != nullptr && f->where == i) close_all(*f, i, last_ts);
    }
    if (parks) {
      for (const auto& [addr, f] : fibers) {
        if (f->parked_at >= 0) {
          o_.begin('e', pid, 0, last_ts).s(",\"id\":").snum(f->index).s(",\"cat\":\"park\",\"name\":\"parked\"");
          o_.end();
        }
      }
    }
    flush_series(o_, alive);
  }

  void device_events(const place_record& r, const time_map& t) {
    struct span {
      std::int64_t start, end;
      int place, track;
      std::uint64_t name, flow, bytes;
      std::uint32_t cat;
    };
    std::vector<span> spans;
    for (const auto& s : r.streams) {
      for (std::size_t k = 0; k + 1 < s.size(); ++k) {
        const event& e = s[k];
        if (e.kind != k_device_span || s[k + 1].kind != k_device_ext) continue;
        const event& x = s[k + 1];
        spans.push_back({t(e.ts), t(x.ts), static_cast<int>(x.c), e.d, e.a, e.b, x.a, e.c});
      }
    }
    std::sort(spans.begin(), spans.end(), [](const span& a, const span& b) {
      return a.place != b.place ? a.place < b.place : a.track != b.track ? a.track < b.track : a.start < b.start;
    });
    std::vector<std::pair<int, int>> named;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      span& sp = spans[i];
      if (i > 0 && spans[i - 1].place == sp.place && spans[i - 1].track == sp.track) {
        sp.start = std::max(sp.start, spans[i - 1].end);  // one stream: one operation after the other
      }
      sp.end = std::max(sp.end, sp.start);
      const int pid = pid_of(sp.place);
      if (named.empty() || named.back() != std::pair{sp.place, sp.track}) {
        named.emplace_back(sp.place, sp.track);
        meta("thread_name", pid, sp.track, gpu_track_name(sp.track));
      }
      o_.begin('X', pid, sp.track, sp.start).s(",\"dur\":").us(sp.end - sp.start);
      o_.s(",\"name\":").str(r.names[static_cast<std::size_t>(sp.name)]).s(",\"cat\":").str(category_name(sp.cat));
      if (sp.bytes != 0) o_.s(",\"args\":{\"bytes\":").num(sp.bytes).s("}");
      o_.end();
      if (const std::uint64_t id = sp.flow != 0 ? valid_flow(sp.flow) : 0) {
        flow_event('f', id, static_cast<std::uint16_t>(flow::launch), pid, sp.track, sp.start);
      }
    }
  }

  void in_flight() {
    std::sort(in_flight_.begin(), in_flight_.end(),
              [](const change_at& a, const change_at& b) { return a.ts < b.ts; });
    std::unordered_map<int, series> per_place;
    for (const change_at& c : in_flight_) {
      auto [it, fresh] = per_place.try_emplace(c.place);
      if (fresh) {
        it->second.pid = pid_of(c.place);
        it->second.name = "message bytes in flight";
      }
      change(o_, it->second, c.ts, c.delta);
    }
    for (auto& [p, s] : per_place) flush_series(o_, s);
  }

  struct change_at {
    std::int64_t ts;
    int place;
    std::int64_t delta;
  };

  out& o_;
  const std::vector<place_record>& records_;
  const std::vector<place_info>& places_;
  std::uint32_t mask_;
  bool merged_;
  std::unordered_map<std::uint64_t, flow_info> flows_;
  std::uint64_t next_json_flow_ = 0;
  int next_fiber_ = 1;
  std::vector<change_at> in_flight_;
};

}  // namespace

std::uint64_t write_json(void* file, const std::vector<place_record>& records, const std::vector<place_info>& places,
                         std::uint32_t mask, bool merged) {
  auto* f = static_cast<std::FILE*>(file);
  std::uint64_t count = 0;
  {
    out o(f);
    o.s("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    writer_state w(o, records, places, mask, merged);
    w.run();
    o.s("\n],\"otherData\":{\"generator\":\"apgas 0.1.0\",\"time_base\":");
    o.str(merged ? "place 0's steady clock, microseconds from the start of the run; other places' clocks mapped by "
                   "offsets measured at start and end (a ping-pong each), interpolated"
                 : "this place's own steady clock, microseconds from the start of the run");
    std::uint64_t dropped = 0, residual = 0;
    o.s(",\"places\":[");
    bool first = true;
    for (const place_record& r : records) {
      dropped += r.dropped;
      residual = std::max({residual, r.sync_start.error, r.sync_end.error});
      o.s(first ? "" : ",").s("{\"place\":").snum(r.place).s(",\"workers\":").snum(r.workers);
      o.s(",\"events_dropped\":").num(r.dropped).s(",\"buffer_events_per_worker\":").num(r.capacity);
      o.s(",\"clock_offset_ns_start\":").snum(r.sync_start.offset).s(",\"clock_error_ns_start\":").num(r.sync_start.error);
      o.s(",\"clock_offset_ns_end\":").snum(r.sync_end.offset).s(",\"clock_error_ns_end\":").num(r.sync_end.error);
      o.s("}");
      first = false;
    }
    o.s("],\"events_dropped\":").num(dropped).s(",\"clock_residual_ns\":").num(residual).s("}}\n");
    count = o.count();
    o.flush();
    if (o.failed()) throw std::runtime_error("a write to the trace file failed");
  }
  return count;
}

}  // namespace apgas::detail::obs
