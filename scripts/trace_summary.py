#!/usr/bin/env python3
"""Summarise an apgas trace (APGAS_TRACE) and draw it as a PNG.

    trace_summary.py TRACE.json [-o PICTURE.png] [--no-plot] [--top N]

Prints a short summary: the run's length, per place how busy its workers were (and its GPU streams), the busiest
place, the idle fraction, the activity types that took the most time (exclusive time: what ran in the activity
itself, not in the activities it ran inline), and the messages between places. Draws (Debian's python3-matplotlib;
--no-plot or a missing matplotlib skips it) one row per worker and per GPU stream, grouped by place, with busy time as
bars and every message as a line from its send at one place to its handler at the other.

Busy on a worker track: inside an activity, a message handler or another span of the runtime, except where the
innermost span is a wait (an activity polling for a message or a GPU event: category "park"); on a GPU stream:
inside a kernel or a copy.
The trace's own format is described in docs/architecture.md ("Observability"); this script needs nothing but the
Python standard library for the summary.
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return doc, events


def places_of(doc):
    """otherData.places of the trace (each place's number and worker count), or []."""
    other = doc.get("otherData") if isinstance(doc, dict) else None
    places = other.get("places") if isinstance(other, dict) else None
    return places if isinstance(places, list) else []


def exclusive_times(pieces):
    """Per name, the time of a track's nested pieces (start, end, name) not covered by the pieces inside them."""
    out = collections.Counter()
    stack = []  # [end, name, child time]
    for s, e, name in sorted(pieces, key=lambda p: (p[0], -p[1])):
        while stack and stack[-1][0] <= s:
            end, n, child = stack.pop()
            out[n] -= child
        if stack:
            stack[-1][2] += e - s
        out[name] += e - s
        stack.append([e, name, 0.0])
    while stack:
        end, n, child = stack.pop()
        out[n] -= child
    return out


class Trace:
    def __init__(self, events, places=None):
        self.process = {}  # pid -> name
        self.thread = {}  # (pid, tid) -> name
        self.pieces = collections.defaultdict(list)  # (pid, tid) -> [(start, end, name, cat)]
        flows = collections.defaultdict(dict)  # (cat, id) -> {'s': (pid, tid, ts), 'f': ...}
        self.start, self.end = None, None
        for e in events:
            ph = e.get("ph")
            if ph == "M":
                if e.get("name") == "process_name":
                    self.process[e["pid"]] = e["args"]["name"]
                elif e.get("name") == "thread_name":
                    self.thread[(e["pid"], e["tid"])] = e["args"]["name"]
                continue
            ts = float(e.get("ts", 0))
            if ph == "X":
                end = ts + float(e.get("dur", 0))
                self.pieces[(e["pid"], e["tid"])].append((ts, end, e.get("name", "?"), e.get("cat", "")))
                self.start = ts if self.start is None else min(self.start, ts)
                self.end = end if self.end is None else max(self.end, end)
            elif ph in ("s", "f"):
                flows[(e.get("cat"), e.get("id"))][ph] = (e["pid"], e["tid"], ts)
        self.flows = {k: v for k, v in flows.items() if "s" in v and "f" in v}
        # Worker tracks: named "worker N" (tid N + 1), else (a trace without the metadata) from otherData's places.
        self.workers = {t for t, name in self.thread.items() if name.startswith("worker ")}
        for p in places or []:
            if isinstance(p, dict) and "place" in p and "workers" in p and not any(
                    t[0] == p["place"] + 1 for t in self.workers):
                self.workers.update((p["place"] + 1, w + 1) for w in range(int(p["workers"])))
        if self.start is None:
            self.start = self.end = 0.0

    def busy_pieces(self, track):
        """The outermost pieces of a track (they hold everything else)."""
        return [(s, e) for s, e, _, c in self.pieces[track] if c != "park"]

    def waiting_pieces(self, track):
        return [(s, e) for s, e, _, c in self.pieces[track] if c == "park"]

    def busy_time(self, track):
        """Time whose innermost piece is not a wait."""
        excl = exclusive_times([(s, e, c) for s, e, _, c in self.pieces[track]])
        return sum(t for c, t in excl.items() if c != "park")

    def capacity_tracks(self):
        """The tracks whose time is the run's capacity: every worker (named by thread_name metadata "worker N", or
        else the workers otherData.places counts), whether it ran anything or not, and every other track with pieces
        (GPU streams) except "other threads" (threads that are not workers: not capacity, as in APGAS_STATS)."""
        tracks = set(self.workers)
        for track, pieces in self.pieces.items():
            if pieces and self.thread.get(track) != "other threads":
                tracks.add(track)
        return sorted(tracks)

    def place_of(self, pid):
        return pid - 1

    def label(self, pid):
        """The process's name without a host's note on its GPUs (its first parenthesis after "host")."""
        name = self.process.get(pid, "pid %d" % pid)
        cut = name.find(" (", name.find(": host "))
        return name if ": host " not in name or cut < 0 else name[:cut]

    def summary(self, top):
        span = self.end - self.start
        lines = ["trace: %.3f ms, %d places, %d tracks" % (span / 1000.0, len(self.process), len(self.pieces))]
        per_place = collections.defaultdict(lambda: [0.0, 0])  # pid -> [busy us, tracks]
        for track in self.capacity_tracks():
            busy = self.busy_time(track)
            per_place[track[0]][0] += busy
            per_place[track[0]][1] += 1
        total_busy, total_capacity = 0.0, 0.0
        for pid in sorted(per_place):
            busy, tracks = per_place[pid]
            capacity = tracks * span
            total_busy += busy
            total_capacity += capacity
            lines.append("  %s: busy %.3f ms over %d track%s (%.1f %% of their time)"
                         % (self.label(pid), busy / 1000.0, tracks, "" if tracks == 1 else "s",
                            100.0 * busy / capacity if capacity else 0.0))
        if per_place:
            busiest = max(per_place, key=lambda p: per_place[p][0])
            lines.append("busiest place: %s (%.3f ms busy)" % (self.label(busiest),
                                                                per_place[busiest][0] / 1000.0))
        lines.append("idle fraction: %.1f %% (of every worker and GPU stream over the whole run)"
                     % (100.0 * (1.0 - total_busy / total_capacity) if total_capacity else 0.0))
        by_name = collections.Counter()
        for track, pieces in self.pieces.items():
            excl = exclusive_times([(s, e, n) for s, e, n, c in pieces if c == "activity"])
            by_name.update(excl)
        lines.append("top activity types by time (exclusive):")
        for name, t in by_name.most_common(top):
            lines.append("  %10.3f ms  %s" % (t / 1000.0, name))
        messages = collections.Counter()
        for (cat, _), ends in self.flows.items():
            if cat == "message":
                messages[(ends["s"][0], ends["f"][0])] += 1
        if messages:
            lines.append("messages (send -> handler):")
            for (a, b), n in sorted(messages.items()):
                lines.append("  place %d -> place %d: %d" % (self.place_of(a), self.place_of(b), n))
        counts = collections.Counter(cat for cat, _ in self.flows)
        lines.append("flows with both ends: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())))
        return "\n".join(lines)

    def plot(self, out):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        tracks = sorted(self.pieces, key=lambda t: (t[0], t[1]))
        row = {t: i for i, t in enumerate(tracks)}
        places = sorted({t[0] for t in tracks})
        colors = plt.get_cmap("tab10")
        fig, ax = plt.subplots(figsize=(12, 1.2 + 0.35 * len(tracks)))
        for t in tracks:
            bars = [((s - self.start) / 1000.0, max((e - s) / 1000.0, 1e-6)) for s, e in self.busy_pieces(t)]
            color = colors(places.index(t[0]) % 10)
            ax.broken_barh(bars, (row[t] - 0.4, 0.8), facecolors=color, linewidth=0)
            waits = [((s - self.start) / 1000.0, max((e - s) / 1000.0, 1e-6)) for s, e in self.waiting_pieces(t)]
            ax.broken_barh(waits, (row[t] - 0.25, 0.5), facecolors="white", alpha=0.75, linewidth=0)
        shown = [v for (cat, _), v in self.flows.items() if cat == "message"]
        step = max(1, len(shown) // 2000)  # a readable number of lines
        for ends in shown[::step]:
            (p0, t0, s0), (p1, t1, s1) = ends["s"], ends["f"]
            if (p0, t0) in row and (p1, t1) in row:
                ax.plot([(s0 - self.start) / 1000.0, (s1 - self.start) / 1000.0], [row[(p0, t0)], row[(p1, t1)]],
                        color="black", linewidth=0.4, alpha=0.35)
        labels = []
        for t in tracks:
            place = self.process.get(t[0], "pid %d" % t[0]).split(":")[0]
            labels.append("%s  %s" % (place, self.thread.get(t, "track %d" % t[1])))
        ax.set_yticks(range(len(tracks)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("time (ms)")
        ax.set_title("busy time per worker and GPU stream (pale: waiting for a message or GPU event); "
                     "lines: messages from send to handler", fontsize=10)
        ax.grid(axis="x", linewidth=0.3)
        fig.tight_layout()
        fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", help="the PNG to write (default: TRACE with .png)")
    ap.add_argument("--no-plot", action="store_true", help="print the summary only")
    ap.add_argument("--top", type=int, default=8, help="activity types to list (default 8)")
    args = ap.parse_args()
    try:
        doc, events = load(args.trace)
    except (OSError, ValueError, KeyError) as e:
        print("trace_summary.py: cannot read %s: %s" % (args.trace, e), file=sys.stderr)
        return 2
    t = Trace(events, places_of(doc))
    print(t.summary(args.top))
    if args.no_plot:
        return 0
    out = args.output or (args.trace[:-5] if args.trace.endswith(".json") else args.trace) + ".png"
    try:
        t.plot(out)
    except ImportError:
        print("trace_summary.py: no matplotlib here (Debian: apt-get install python3-matplotlib); summary only",
              file=sys.stderr)
        return 0
    print("picture: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
