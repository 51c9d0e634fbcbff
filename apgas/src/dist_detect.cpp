// The failure detector (docs/decisions/0013-faults-and-limits.md): a place that dies is noticed by every other
// place, which then stops with exit code 3 and a message naming the dead place (the promise of runtime.hpp), instead
// of waiting forever for a finish that cannot end. Three sources, all on one detector thread per process (which never
// calls the transport itself: heartbeats and notices go out from threads of their own, since a send may not return
// when a peer died under it):
//  - the transport's own errors (poll_hook, dist_life.cpp): fatal as before;
//  - peers on this host: their process (pid and start time, exchanged at start-up) is looked up in /proc at every
//    tick; a process that has ended (or is a zombie) is a dead place at once;
//  - every peer: heartbeats. A place sends a heartbeat to a peer only when it sent that peer nothing else for a
//    fifth of the timeout, and any traffic from a peer (a message, a heartbeat, a fragment of a large message)
//    counts as a sign of life. A peer silent for the timeout (APGAS_HEARTBEAT_TIMEOUT) is dead.
// No false positives from starvation: silence is counted only over ticks in which a poll of this place's transport
// found nothing left to take (a poll takes a bounded number of messages, one small one on mpi: one that took
// something may have left a peer's messages waiting behind it, and they do not count against their sender), and a
// tick counts for at most a few tick lengths however late the detector thread ran. Nor from a busy sender: a
// heartbeat only queued (an MPI_Isend that waits behind a backlog of sends, which progress only in MPI calls) does not
// leave while no worker polls, so after a batch of heartbeats sent while no worker polled, the heartbeats' thread
// drives the transport itself for a moment. Since nothing is counted while nobody polls, a poll stuck
// in the transport would hide every death: a poll that has not returned for APGAS_CONNECT_TIMEOUT stops the place.
// Whom to name: a peer whose process ended may have stopped on another death, which it told this place (dead_notice)
// before ending; the notice is looked for first. And a place whose detector did not run for most of the timeout (the
// process stopped, or starved) was likely taken for dead by the others: it says so instead of naming one of them.
// A later resilient mode would replace the exit in declare_dead() by marking the place dead and failing the
// finishes that wait for it (dead_place_exception); the detection stays as it is.
#include "dist_state.hpp"
#include "runtime.hpp"
#include "scheduler.hpp"  // poll_progress

#include "obs.hpp"

#include <apgas/transport/transport.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace apgas::detail {

namespace {

std::vector<peer_identity> g_peers;  // by rank, from the start-up exchange (identities_exchanged)
// Guards g_peers against the watchdog of start-up, which reads it (dead_local_peer) while the first run sets it. The
// detector thread starts after it is set and reads it without the lock.
std::mutex g_peers_mutex;

struct detector {
  dist_state* d = nullptr;
  int timeout_s = 0;
  int stuck_s = 0;  // a poll lasting this long is stuck (not the heartbeat timeout: Open MPI over shared memory
                    // copies a whole piece of a large message, up to 1 GiB, inside one receive call)
  std::unique_ptr<std::atomic<std::uint8_t>[]> heard;  // any traffic from the peer since the last tick
  std::unique_ptr<std::atomic<std::uint8_t>[]> sent;   // any message to the peer since its last heartbeat check
  std::atomic<std::uint8_t> polled{0};                 // this place polled its transport since the last tick
  std::atomic<bool> judge_silence{true};               // false once this place acknowledged the shut-down
  // The poll in progress: a number of polls begun, odd while one runs (one poller at a time: the hooks' lock). Two
  // relaxed stores a poll, no clock read: polls come back to back on idle workers.
  std::atomic<std::uint64_t> poll_seq{0};
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
  std::shared_ptr<struct beater> beats;  // the heartbeats' own thread (below)
};

// Heartbeats go out from a thread of their own, never from the detector's: a send may not return (libfabric 1.17's
// shm provider spins on a lock in the receiver's region, which a peer killed meanwhile holds for good), and the
// detector must still count silence, look at processes and stop the place. The state is shared with that thread,
// which is left behind (detached) if it is stuck in a send when the detector stops.
struct beater {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::uint8_t> wanted;  // (mutex) a heartbeat for that peer is due
  bool any = false;                  // (mutex) some heartbeat is due
  bool stop = false;                 // (mutex)
  bool ended = false;                // (mutex) the thread has returned
  std::atomic<std::uint64_t> seq{0};  // heartbeat sends begun, odd while one runs
  std::atomic<int> to{-1};            // the peer of the send in progress
  std::atomic<bool> drive{false};     // no worker polled in the detector's last tick: push the heartbeats out
};
// Read by every worker that sends, receives or polls; detector_stop unpublishes it while they may still be polling,
// so the record itself is deleted only by detector_free, once the workers are gone.
std::atomic<detector*> g_detector{nullptr};
detector* g_retired = nullptr;

std::uint64_t hash_text(const char* s, std::uint64_t h = 1469598103934665603ull) {
  for (; *s != '\0'; ++s) {
    h ^= static_cast<unsigned char>(*s);
    h *= 1099511628211ull;
  }
  return h;
}

// The start time of a process (field 22 of /proc/<pid>/stat, clock ticks since boot) and whether it is still a
// running process (not gone, not a zombie). 0 when it cannot be read.
std::uint64_t process_start(long pid, bool& alive) {
  alive = false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  if (p == nullptr || p[1] == '\0') return 0;
  const char state = p[2];
  alive = state != 'Z' && state != 'X' && state != 'x';
  // Fields from 3 (state) on; the start time is field 22.
  int field = 3;
  const char* q = p + 2;
  while (*q != '\0' && field < 22) {
    if (*q == ' ') ++field;
    ++q;
  }
  return std::strtoull(q, nullptr, 10);
}

// A place that stops on a death leaves its verdict where the places of its host can read it once its process has
// ended: /dev/shm/apgas-verdict-<pid>, "<start> <dead place> <why>". Its dead notice may never arrive (a notice waits
// behind a large transfer in progress, and the transfer dies with the process): a peer that finds this process ended
// then names the place in the verdict, not this one. The start time tells a verdict from one of an earlier process
// with the same pid; verdicts over a minute old are removed when a run starts on the host (remove_old_verdicts).
constexpr const char* verdict_dir = "/dev/shm";
constexpr const char* verdict_prefix = "apgas-verdict-";

void leave_verdict(int rank, int dead, const std::string& why) noexcept {
  // (try_lock: never wait here for the start-up exchange, which holds the lock only to set g_peers)
  std::unique_lock lock(g_peers_mutex, std::try_to_lock);
  if (!lock.owns_lock() || g_peers.size() <= static_cast<std::size_t>(rank)) return;  // (no one to read it yet)
  char path[96];
  std::snprintf(path, sizeof path, "%s/%s%lld", verdict_dir, verdict_prefix, static_cast<long long>(::getpid()));
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%llu %d %s\n", static_cast<unsigned long long>(g_peers[static_cast<std::size_t>(rank)].start), dead,
                 why.c_str());
    std::fclose(f);
  }
}

// Verdicts left over a minute ago on this host: read long since, or by nobody.
void remove_old_verdicts() noexcept {
  DIR* dir = ::opendir(verdict_dir);
  if (dir == nullptr) return;
  const std::size_t n = std::strlen(verdict_prefix);
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, verdict_prefix, n) != 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, 0) == 0 && std::time(nullptr) - st.st_mtime > 60) {
      (void)::unlinkat(::dirfd(dir), e->d_name, 0);
    }
  }
  ::closedir(dir);
}

// The dead place named by the verdict of peer p (whose process has ended), and why; -1 if it left none.
int read_verdict(const peer_identity& p, std::string& why) {
  char path[96];
  std::snprintf(path, sizeof path, "%s/%s%lld", verdict_dir, verdict_prefix, static_cast<long long>(p.pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  unsigned long long start = 0;
  int dead = -1;
  char text[512] = {};
  const int got = std::fscanf(f, "%llu %d %511[^\n]", &start, &dead, text);
  std::fclose(f);
  if (got < 2 || start != p.start || dead < 0 || static_cast<std::size_t>(dead) >= g_peers.size()) return -1;
  why = text;
  return dead;
}

std::atomic<bool> g_declared{false};

// This thread stops the place; if another one is stopping it already, this one waits for the end.
void claim_the_stop() {
  if (g_declared.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// Stops this place (exit 3) with `message`, written as the last thing from it; `dump`: why, for a traced place's dump.
[[noreturn]] void stop_place(const std::string& message, const char* dump) {
  claim_the_stop();
  std::fprintf(stderr, "%s\n", message.c_str());
  obs::emergency_dump(dump);
  std::fflush(stderr);
  end_process(3);
}

// Sends every other place the message make() writes, from a thread of its own, and waits for it at most half a second
// (a send may not return: see beater); place `last` last (a dead place: a send to it may fail, or hang; -1: none),
// or not at all if `skip_last` (its process has ended), so that a frozen one that resumes learns why it stops. Then
// gives the workers a moment to send what a send only queued.
template <class Make>
void tell_others(int rank, int last, bool skip_last, Make make) {
  if (g_dist == nullptr) return;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([tp = g_dist->tp, size = g_dist->size, rank, last, skip_last, make, done] {
    for (int i = 1; i <= size; ++i) {
      const int p = (std::max(last, 0) + i) % size;
      if (p == rank || (p == last && skip_last)) continue;
      try {
        writer w = make();
        tp->send(p, w.take());
      } catch (...) {  // best effort: that place has its own detector
      }
    }
    done->store(true, std::memory_order_release);
  }).detach();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (!done->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// Stops this place. The place that noticed the death first also tells the others which place died (so that a place
// that sees this one end next does not name it instead); so does a place told of it, since another may see it end
// before the first one's notice reaches it.
[[noreturn]] void declare_dead(int rank, int dead, const std::string& why, bool dead_process_ended = false) {
  claim_the_stop();
  std::fprintf(stderr, "apgas: place %d: place %d is dead (%s); stopping this place (exit code 3)\n", rank, dead,
               why.c_str());
  leave_verdict(rank, dead, why);
  tell_others(rank, dead, dead_process_ended, [dead] {
    writer w = message_writer(16);
    w & msg::dead_notice & static_cast<std::int32_t>(dead);
    return w;
  });
  obs::emergency_dump("a place died");
  std::fflush(stderr);
  end_process(3, dead);
}

// Peer `src`, whose process has ended, left a verdict naming place `dead` (leave_verdict): stops this place as its
// dead notice would have.
[[noreturn]] void verdict_reported(int src, int dead, const std::string& why) {
  const int rank = g_dist->rank;
  if (dead == rank) {
    stop_place("apgas: place " + std::to_string(rank) + ": declared dead by place " + std::to_string(src) + " (" +
                   why + "), which has ended since; stopping this place (exit code 3)",
               "declared dead by another place");
  }
  declare_dead(rank, dead, "reported by place " + std::to_string(src) + ", which has ended since: " + why);
}

// The heartbeats' thread: sends those the detector asks for, until it stops.
void run_beater(std::shared_ptr<beater> b, transport::transport* tp, int rank) {
  std::unique_lock lock(b->mutex);
  for (;;) {
    b->cv.wait(lock, [&] { return b->stop || b->any; });
    if (b->stop) {
      b->ended = true;
      b->cv.notify_all();
      return;
    }
    b->any = false;
    std::vector<std::uint8_t> due;
    due.swap(b->wanted);
    b->wanted.assign(due.size(), 0);
    lock.unlock();
    for (std::size_t p = 0; p < due.size(); ++p) {
      if (due[p] == 0) continue;
      b->to.store(static_cast<int>(p), std::memory_order_relaxed);
      b->seq.fetch_add(1, std::memory_order_release);
      try {
        tp->send(static_cast<int>(p), {static_cast<std::byte>(msg::heartbeat)});
      } catch (const transport::peer_error& e) {  // (a send to whichever peer failed in that flush)
        declare_dead(rank, e.peer(), std::string("the transport lost it: ") + e.what());
      } catch (const std::exception& e) {
        declare_dead(rank, static_cast<int>(p), std::string("a heartbeat could not be sent: ") + e.what());
      }
      b->seq.fetch_add(1, std::memory_order_release);
    }
    // No worker polls (they all compute): a send only queued behind others stays there until something calls the
    // transport. Poll until nothing is left to do, 20 ms at most (whatever goes out counts as life at its receiver).
    if (b->drive.load(std::memory_order_relaxed)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (poll_progress() && std::chrono::steady_clock::now() < until) {
      }
    }
    lock.lock();
  }
}

// How long one call (a poll, a send) has been in progress: its sequence number (odd while one runs) seen at the last
// tick, and the detector time since; stuck() adds a tick's step while the same call runs, else starts again at 0.
struct call_watch {
  std::uint64_t seq = 0;
  double s = 0;
  double stuck(std::uint64_t now, double step) {
    if (now % 2 == 1 && now == seq) return s += step;
    seq = now;
    return s = 0;
  }
};

void run_detector(detector& det) {
  dist_state& d = *det.d;
  const auto tick = std::chrono::milliseconds(50);
  const double tick_s = 0.05;
  const double max_step_s = 4 * tick_s;  // however late this thread ran, a tick counts for at most this
  const double heartbeat_every_s = det.timeout_s / 5.0;
  const std::size_t n = static_cast<std::size_t>(d.size);
  std::vector<double> silent(n, 0.0);   // seconds of detector time without traffic from the peer
  std::vector<double> quiet(n, 0.0);    // seconds since this place last sent the peer anything
  const std::uint64_t my_host = g_peers.empty() ? 0 : g_peers[static_cast<std::size_t>(d.rank)].host;
  auto last = std::chrono::steady_clock::now();
  call_watch poll_watch, beat_watch;  // the poll in progress (poll_seq), the heartbeat send in progress (beater::seq)
  double paused_s = 0;  // the last long pause of this thread, and when it was seen
  auto pause_seen = last;
  auto team_looked = last;  // when the team operations' waits were last looked at (report_team_stalls)
  std::uint64_t poll_seq_seen = 0;  // poll_seq at the last tick
  std::unique_lock lock(det.mutex);
  while (!det.cv.wait_for(lock, tick, [&] { return det.stop; })) {
    const auto now = std::chrono::steady_clock::now();
    const double slept = std::chrono::duration<double>(now - last).count();
    const double step = std::min(slept, max_step_s);
    last = now;
    // A long pause of this thread (the process stopped by SIGSTOP or a debugger, or starved of CPU): if a peer's
    // process is found ended soon after, it most likely ended because it took this place for dead (this place was
    // silent meanwhile), and is not named as the dead one.
    if (slept >= 0.8 * det.timeout_s) {  // (the others need the timeout of silence, heartbeats a fifth of it apart)
      paused_s = slept;
      pause_seen = now;
    }
    const bool paused = paused_s > 0 && now - pause_seen < std::chrono::seconds(det.timeout_s);
    // Team operations waiting for longer than twice the heartbeat timeout: the members they wait for are named, once.
    if (now - team_looked >= std::chrono::seconds(1)) {
      team_looked = now;
      lock.unlock();  // (the report takes the place's lock, and prints)
      report_team_stalls(2.0 * det.timeout_s);
      lock.lock();
      if (det.stop) break;
    }
    const bool polled = det.polled.exchange(0, std::memory_order_acq_rel) != 0;
    // Whether any poll ran in this tick (one that took something included): if none, the heartbeats' thread drives
    // the transport after its next sends.
    const std::uint64_t poll_seq_now = det.poll_seq.load(std::memory_order_relaxed);
    det.beats->drive.store(poll_seq_now == poll_seq_seen, std::memory_order_relaxed);
    poll_seq_seen = poll_seq_now;
    // A poll that has not returned for APGAS_CONNECT_TIMEOUT: the transport is stuck in a call (Open MPI's tcp
    // transport can deadlock in itself when a peer dies under it), and no silence is counted while nobody polls:
    // stop, saying so. Counted in detector steps, as silence is (a process stopped meanwhile is not stuck).
    if (const double stuck_s = poll_watch.stuck(det.poll_seq.load(std::memory_order_relaxed), step);
        stuck_s >= det.stuck_s) {
      char what[240];
      std::snprintf(what, sizeof what,
                    "apgas: place %d: its %s transport has been stuck in one call for %.1f s (APGAS_CONNECT_TIMEOUT="
                    "%d): a peer may have died under it; stopping this place (exit code 3)",
                    d.rank, d.tp->name(), stuck_s, det.stuck_s);
      stop_place(what, "its transport was stuck");
    }
    // A heartbeat send that has not returned for as long (the place no longer tells the others it lives, and cannot
    // tell them anything else either: that transport is wedged): stop, saying so.
    if (const double stuck_beat_s = beat_watch.stuck(det.beats->seq.load(std::memory_order_acquire), step);
        stuck_beat_s >= det.stuck_s) {
      char what[280];
      std::snprintf(what, sizeof what,
                    "apgas: place %d: its %s transport has been stuck in a send to place %d for %.1f s "
                    "(APGAS_CONNECT_TIMEOUT=%d): that place may have died under it; stopping this place (exit code 3)",
                    d.rank, d.tp->name(), det.beats->to.load(std::memory_order_relaxed), stuck_beat_s, det.stuck_s);
      stop_place(what, "its transport was stuck");
    }
    for (std::size_t p = 0; p < n; ++p) {
      if (static_cast<int>(p) == d.rank) continue;
      // A peer on this host: its process.
      if (!g_peers.empty() && g_peers[p].host == my_host && g_peers[p].pid > 0) {
        bool alive = false;
        const std::uint64_t start = process_start(g_peers[p].pid, alive);
        if ((!alive || start != g_peers[p].start) && paused) {
          char what[320];
          std::snprintf(what, sizeof what,
                        "apgas: place %d: this process did not run for %.1f s (stopped, or starved of CPU; "
                        "APGAS_HEARTBEAT_TIMEOUT=%d), and place %zu has ended meanwhile: the other places took this "
                        "one for dead; stopping this place (exit code 3)",
                        d.rank, paused_s, det.timeout_s, p);
          stop_place(what, "this process was stopped");
        }
        if (!alive || start != g_peers[p].start) {
          std::string verdict;
          if (const int dead = read_verdict(g_peers[p], verdict); dead >= 0) {
            verdict_reported(static_cast<int>(p), dead, verdict);
          }
          // That peer may have ended because it found another place dead, and told this one (dead_notice) before
          // it did: the notice may wait in the transport, maybe behind other messages (the workers all compute, or
          // this place was stopped a moment). A thread of its own polls for it for 100 ms (the notice's handler stops
          // this place, naming the place it names; the transport's poll delivers from any thread), not this one: a
          // poll may get stuck in the transport, and this thread must still stop the place.
          // Always, not only when no worker polled since the last tick: that poll may have come before the notice
          // (a place stopped or starved a moment found its neighbour ended, and named it).
          std::thread([] {
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            while (std::chrono::steady_clock::now() < until) poll_progress();
          }).detach();
          std::this_thread::sleep_for(std::chrono::milliseconds(120));
          declare_dead(d.rank, static_cast<int>(p),
                       "its process " + std::to_string(g_peers[p].pid) + " on this host has ended", true);
        }
      }
      // Heartbeats: sent when the peer heard nothing else from us for a while.
      if (det.sent[p].exchange(0, std::memory_order_acq_rel) != 0) {
        quiet[p] = 0;
      } else {
        quiet[p] += step;
        if (quiet[p] >= heartbeat_every_s) {
          quiet[p] = 0;
          {
            std::lock_guard beat_lock(det.beats->mutex);
            det.beats->wanted[p] = 1;
            det.beats->any = true;
          }
          det.beats->cv.notify_one();
        }
      }
      // Silence, counted only while this place listened.
      if (det.heard[p].exchange(0, std::memory_order_acq_rel) != 0) {
        silent[p] = 0;
      } else if (polled && det.judge_silence.load(std::memory_order_relaxed)) {
        silent[p] += step;
        if (silent[p] >= det.timeout_s) {
          char what[160];
          std::snprintf(what, sizeof what, "nothing heard from it for %.1f s, APGAS_HEARTBEAT_TIMEOUT=%d", silent[p],
                        det.timeout_s);
          declare_dead(d.rank, static_cast<int>(p), what);
        }
      }
    }
  }
}

}  // namespace

peer_identity my_identity() {
  peer_identity me{};
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::uint64_t h = hash_text(host);
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {  // the same name on two machines
    char boot[64] = {};
    if (std::fgets(boot, sizeof boot, f) != nullptr) h = hash_text(boot, h);
    std::fclose(f);
  }
  me.host = h;
  me.pid = static_cast<std::int64_t>(::getpid());
  bool alive = false;
  me.start = process_start(static_cast<long>(me.pid), alive);
  return me;
}

void stop_on_transport_failure(const std::exception& e, const std::string& what) {
  const int rank = g_dist->rank;
  if (const auto* pe = dynamic_cast<const transport::peer_error*>(&e); pe != nullptr && pe->peer() != rank) {
    declare_dead(rank, pe->peer(), std::string("the transport lost it: ") + e.what());
  }
  // A failure that names no peer (libfabric's failed receives name none) most likely comes from a peer's death: a
  // peer on this host whose process has ended, or ends within a moment, is named (else the others, seeing this place
  // end, would name it instead of the dead one).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  do {
    std::string why;
    if (const int dead = dead_local_peer(rank, why); dead >= 0) {
      declare_dead(rank, dead, why + "; at this place, " + what + ": " + e.what(), true);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < until);
  claim_the_stop();
  std::fprintf(stderr, "apgas: place %d: %s: %s\n", rank, what.c_str(), e.what());
  obs::emergency_dump("its transport failed");
  std::fflush(stderr);
  end_process(3);
}

void declare_place_dead(int dead, const std::string& why) { declare_dead(g_dist->rank, dead, why); }

namespace {
// Prints `line`, tells the other places that place `by` stops the run and why (a place told passes it on, as a dead
// notice is: another may see this one end before the first notice reaches it), and ends this place (exit code 3).
[[noreturn]] void stop_telling(const std::string& line, int by, const std::string& why, const char* dump) {
  claim_the_stop();
  std::fprintf(stderr, "%s\n", line.c_str());
  const int rank = g_dist != nullptr ? g_dist->rank : 0;
  tell_others(rank, -1, false, [by, why] {
    writer w = message_writer(why.size() + 24);
    w & msg::stop_notice & static_cast<std::int32_t>(by) & why;
    return w;
  });
  obs::emergency_dump(dump);
  std::fflush(stderr);
  end_process(3);
}
}  // namespace

void stop_the_run(const std::string& why, const char* dump) {
  const int rank = g_dist != nullptr ? g_dist->rank : 0;
  stop_telling("apgas: place " + std::to_string(rank) + ": " + why + "; stopping the run (exit code 3)", rank, why,
               dump);
}

void stop_reported(int by, const std::string& why) {
  const int rank = g_dist != nullptr ? g_dist->rank : 0;
  stop_telling("apgas: place " + std::to_string(rank) + ": place " + std::to_string(by) + " stopped the run (" + why +
                   "); stopping this place (exit code 3)",
               by, why, "another place stopped the run");
}

void dead_place_reported(int src, int dead) {
  if (g_dist == nullptr) end_process(3, dead);
  if (dead == g_dist->rank) {  // this place was silent for another's timeout (frozen, or its network cut), and lives
    stop_place("apgas: place " + std::to_string(dead) + ": declared dead by place " + std::to_string(src) +
                   " (it heard nothing from this place for its heartbeat timeout: was this process stopped, or its "
                   "network cut?); stopping this place (exit code 3)",
               "declared dead by another place");
  }
  declare_dead(g_dist->rank, dead, "reported by place " + std::to_string(src));
}

void set_peer_identities(std::vector<peer_identity> peers) {
  // A peer whose process cannot be seen from here as it described itself (another PID namespace on the same host,
  // e.g. a container) is left to the heartbeats: pid 0.
  const peer_identity me = my_identity();
  for (peer_identity& p : peers) {
    if (p.host != me.host || p.pid == me.pid) continue;
    bool alive = false;
    if (process_start(static_cast<long>(p.pid), alive) != p.start || !alive) p.pid = 0;
  }
  {
    std::lock_guard lock(g_peers_mutex);
    g_peers = std::move(peers);
  }
  remove_old_verdicts();
}

int places_on_this_host(int rank) noexcept {
  std::lock_guard lock(g_peers_mutex);
  if (g_peers.empty()) return 1;
  const std::uint64_t my_host = g_peers[static_cast<std::size_t>(rank)].host;
  return static_cast<int>(std::count_if(g_peers.begin(), g_peers.end(),
                                        [my_host](const peer_identity& p) { return p.host == my_host; }));
}

int dead_local_peer(int rank, std::string& why) {
  std::lock_guard lock(g_peers_mutex);
  if (g_peers.empty()) return -1;
  const std::uint64_t my_host = g_peers[static_cast<std::size_t>(rank)].host;
  for (std::size_t p = 0; p < g_peers.size(); ++p) {
    if (static_cast<int>(p) == rank || g_peers[p].host != my_host || g_peers[p].pid <= 0) continue;
    bool alive = false;
    const std::uint64_t start = process_start(g_peers[p].pid, alive);
    if (!alive || start != g_peers[p].start) {
      std::string verdict;
      if (const int dead = read_verdict(g_peers[p], verdict); dead >= 0 && dead != rank) {
        why = "reported by place " + std::to_string(p) + ", which has ended since: " + verdict;
        return dead;
      }
      why = "its process " + std::to_string(g_peers[p].pid) + " on this host has ended";
      return static_cast<int>(p);
    }
  }
  return -1;
}

void detector_start(dist_state& d, int timeout_s, int stuck_s) {
  if (d.size < 2 || timeout_s <= 0) return;
  auto* det = new detector;
  det->d = &d;
  det->timeout_s = timeout_s;
  det->stuck_s = std::max(stuck_s, timeout_s);
  det->heard = std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(d.size));
  det->sent = std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(d.size));
  for (int p = 0; p < d.size; ++p) {
    det->heard[static_cast<std::size_t>(p)].store(1, std::memory_order_relaxed);  // start-up counts as traffic
    det->sent[static_cast<std::size_t>(p)].store(0, std::memory_order_relaxed);
  }
  det->beats = std::make_shared<beater>();
  det->beats->wanted.assign(static_cast<std::size_t>(d.size), 0);
  std::thread(run_beater, det->beats, d.tp, d.rank).detach();  // (ends when told to stop, or is left stuck)
  g_detector.store(det, std::memory_order_release);
  det->thread = std::thread([det] { run_detector(*det); });
}

void detector_stop() {
  detector* det = g_detector.exchange(nullptr, std::memory_order_acq_rel);
  if (det == nullptr) return;
  {
    std::lock_guard lock(det->mutex);
    det->stop = true;
  }
  det->cv.notify_all();
  det->thread.join();
  {
    // The heartbeats' thread ends before the run does (a send of it during the final barrier would be the next run's
    // business), unless it is stuck in a send: then it is left there, the transport being wedged anyway.
    std::unique_lock lock(det->beats->mutex);
    det->beats->stop = true;
    det->beats->cv.notify_all();
    det->beats->cv.wait_for(lock, std::chrono::seconds(1), [det] { return det->beats->ended; });
  }
  g_retired = det;
}

void detector_ignore_silence() {
  if (detector* det = g_detector.load(std::memory_order_acquire)) det->judge_silence.store(false);
}

void detector_free() {
  delete g_retired;
  g_retired = nullptr;
}

void note_heard(int src) noexcept {
  if (detector* det = g_detector.load(std::memory_order_acquire); det != nullptr && src >= 0 && src < det->d->size) {
    auto& h = det->heard[static_cast<std::size_t>(src)];
    // Called for every message received: a load first, so that the line is written once per detector tick, not
    // once per message.
    if (h.load(std::memory_order_relaxed) == 0) h.store(1, std::memory_order_relaxed);
  }
}

void note_sent(int dst) noexcept {
  if (detector* det = g_detector.load(std::memory_order_acquire); det != nullptr && dst >= 0 && dst < det->d->size) {
    det->sent[static_cast<std::size_t>(dst)].store(1, std::memory_order_relaxed);
  }
}

void note_polled(bool drained) noexcept {
  if (detector* det = g_detector.load(std::memory_order_acquire)) {
    if (drained) det->polled.store(1, std::memory_order_relaxed);
    if (const std::uint64_t seq = det->poll_seq.load(std::memory_order_relaxed); seq % 2 == 1) {
      det->poll_seq.store(seq + 1, std::memory_order_relaxed);
    }
  }
}

void note_poll_start() noexcept {
  if (detector* det = g_detector.load(std::memory_order_acquire)) {
    if (const std::uint64_t seq = det->poll_seq.load(std::memory_order_relaxed); seq % 2 == 0) {
      det->poll_seq.store(seq + 1, std::memory_order_relaxed);
    }
  }
}

}  // namespace apgas::detail
