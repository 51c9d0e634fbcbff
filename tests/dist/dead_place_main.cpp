// A place that dies: the last host place kills itself (SIGKILL, as `kill -9` would) while place 0 waits for it in a
// finish; run under a launcher that keeps the survivors (mpirun --enable-recovery). Every survivor must stop with
// exit code 3 and a message naming the dead place (the failure detector, dist_detect.cpp), never hang.
// With the argument "early" the last process exits before apgas::run: the others must not wait forever at start-up.
// With "stop" the victim is frozen instead (a child it forks attaches to it with ptrace): its process is still there,
// so only the heartbeats can tell (the child kills it 8 s later, so that the launcher ends).
// With "shutdown" nobody dies in the main activity: the test's transport shim (die_at_barrier) kills the victim on its
// way into the final barrier, where the failure detector no longer runs (the shut-down watchdog must see it).
// With "busy" nobody dies: the last place's one worker computes for twice the heartbeat timeout without polling while
// place 0 sends it thousands of activities, and every place must end normally (on ofi the sends to the busy place
// held up everything place 0 sent after them, heartbeats to the idle place included, which was then declared dead).
// With "exit" the victim calls std::exit(7) in an activity: it must end with 7 (closing its transport under its
// running workers crashed it), the others with 3 naming it; what it wrote to stdout just before (no newline: in the
// stream's buffer) must come out.
// With "ping" place 0 makes 2000 at() round trips to the last place, whose transport fails one of its sends (the
// test's shim, fail_send): that place must stop with exit code 3 saying so (its message was counted by a finish that
// would wait for ever), the others with 3 naming it.
// With "idle" nobody dies: place 0 waits 5 s, the others are idle (run with a different APGAS_HEARTBEAT_TIMEOUT at
// one place: place 0's decides for the run, or one place's heartbeats came too rarely for the others).
// With "invalid" the last place's configuration is invalid (nthreads -5): every place must stop at once with exit 2.
// With "no_endpoint" (ofi) the last place cannot open its libfabric endpoint (FI_PROVIDER names no provider there):
// every place must stop at once with exit 2, the others naming it (they waited for it until the start-up watchdog).
// With "stop_busy" the victim is frozen as with "stop" while place 0's one worker computes without polling: place 1
// finds the victim dead, tells place 0 and ends; place 0 must name the victim, not place 1 whose process it sees end.
// With "pause" the victim stops itself (SIGSTOP) and a child resumes it once the others have taken it for dead and
// ended: it must say so and stop with 3, not name a survivor whose process it finds ended.
// Place 0 writes to stdout before the death, no newline: a survivor's output must come out too (it stops at once).
// With "remote_end" the victim acts as a place on another host (its own UTS namespace and host name: its process
// cannot be looked up from here, only heartbeats tell) and dies 100 ms after its last activity, while place 0's main
// activity ends 400 ms after that activity: the victim is dead before the shut-down. The others must name it, not
// wait for the final barrier until the connect timeout (skipped where this process may not unshare its host name).
// With "copy_to" or "copy_from" the victim dies 30 ms into 64 MiB copies between place 0 and it: on ofi's shm
// provider a survivor's send could spin for ever on a lock the victim held in its region (the detector's own
// heartbeat or notice among them: nobody stopped), and on tcp a failed receive, which names no peer, stopped place 0
// without naming the victim (the others then named place 0).
// With "lost_peer" (3 places, APGAS_TRANSPORT_SHIM=lose_peer:0:2) place 0's transport loses place 2 at place 0's
// first message to it, and nothing place 0 sends after that leaves: place 0 names place 2 and ends without its dead
// notices reaching anyone. Place 1 must still name place 2 (from the verdict place 0 left on this host), not place 0.
// With "slow_end" nobody dies: place 0's place-local object takes twice the heartbeat timeout to destroy at the end
// of the run, after place 0 let the others go on (its go may wait in its transport meanwhile): nobody may be taken
// for dead.
// Each line the victim prints carries the time (CLOCK_REALTIME), so that the detection time can be measured.
#include <apgas/apgas.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <span>
#include <thread>
#include <vector>

namespace {
// The libfabric shm regions this process maps (its own and its peers'), one line each on stderr: after the job,
// tests/dist/shm_left.sh checks that none of them was left in /dev/shm by places that ended abruptly.
void list_shm_regions() {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return;
  char line[4096];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    if (const char* f = std::strstr(line, "/dev/shm/apgas-")) std::fprintf(stderr, "dead_place_main: shm region: %s", f);
  }
  std::fclose(maps);
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  const bool early = argc > 1 && std::strcmp(argv[1], "early") == 0;
  static bool busy0 = argc > 1 && std::strcmp(argv[1], "stop_busy") == 0;
  static bool stop = busy0 || (argc > 1 && std::strcmp(argv[1], "stop") == 0);
  static bool exits = argc > 1 && std::strcmp(argv[1], "exit") == 0;
  static bool pauses = argc > 1 && std::strcmp(argv[1], "pause") == 0;
  if (argc > 1 && std::strcmp(argv[1], "shutdown") == 0) {
    const int rc = apgas::run(argc, argv, [] {
      apgas::finish([] {
        for (const apgas::place& p : apgas::places()) apgas::async_at(p, [] {});
      });
    });
    std::printf("apgas::run returned %d: the dead place was not noticed\n", rc);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "lost_peer") == 0) {  // with APGAS_TRANSPORT_SHIM=lose_peer:0:2
    const int rc = apgas::run(argc, argv, [] { apgas::at(apgas::place(2), [] {}); });
    std::printf("apgas::run returned %d: the lost place was not noticed\n", rc);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "remote_end") == 0) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1) {
      static const char other[] = "apgas-test-other-host";
      if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(other, sizeof other - 1) != 0) {
        std::printf("dead_place_main: this process cannot act as another host (%s)\n", std::strerror(errno));
      }
    }
    const int rc = apgas::run(argc, argv, [] {
      apgas::finish([] {
        apgas::async_at(apgas::place(apgas::num_hosts() - 1), [] {
          std::thread([me = apgas::here().id()] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::fprintf(stderr, "dead_place_main: place %d dies at %.6f\n", me, now_s());
            std::fflush(stderr);
            ::kill(::getpid(), SIGKILL);
          }).detach();
        });
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    });
    std::printf("apgas::run returned %d: the dead place was not noticed\n", rc);
    return 0;
  }
  if (argc > 1 && (std::strcmp(argv[1], "copy_to") == 0 || std::strcmp(argv[1], "copy_from") == 0)) {
    static const bool to = std::strcmp(argv[1], "copy_to") == 0;
    const int rc = apgas::run(argc, argv, [] {
      const apgas::place victim(apgas::num_hosts() - 1);
      std::vector<char> data(std::size_t{64} << 20, 'z');
      auto far = apgas::make_remote_array<char>(victim, data.size());
      apgas::at(victim, [] {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          ::kill(::getpid(), SIGKILL);
        }).detach();
      });
      for (int i = 0; i < 200; ++i) {
        apgas::finish([&] {
          if (to) {
            apgas::async_copy(std::span<const char>(data), far, 0);
          } else {
            apgas::async_copy(far, 0, std::span<char>(data));
          }
        });
      }
    });
    std::printf("apgas::run returned %d: the dead place was not noticed\n", rc);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "slow_end") == 0) {
    struct slow {
      int at = -1;
      ~slow() {
        const char* t = std::getenv("APGAS_HEARTBEAT_TIMEOUT");
        if (at == 0) std::this_thread::sleep_for(std::chrono::seconds(2 * (t != nullptr ? std::atoi(t) : 5)));
      }
    };
    const int rc = apgas::run(argc, argv, [] {
      (void)apgas::make_place_local<slow>(apgas::places(), [] { return slow{apgas::here().id()}; });
    });
    std::printf("slow_end: the run ended with %d\n", rc);
    return rc;
  }
  if (argc > 1 && std::strcmp(argv[1], "busy") == 0) {
    const int rc = apgas::run(argc, argv, [] {
      const apgas::place busy(apgas::num_hosts() - 1);
      apgas::finish([busy] {
        apgas::async_at(busy, [] {
          const char* t = std::getenv("APGAS_HEARTBEAT_TIMEOUT");
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2 * (t != nullptr ? std::atoi(t) : 5));
          for (volatile long x = 0; std::chrono::steady_clock::now() < end;) x = x + 1;  // never polls
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (int i = 0; i < 5000; ++i) apgas::async_at(busy, [] {});
      });
    });
    std::printf("busy: the run ended with %d\n", rc);
    return rc;
  }
  if (argc > 1 && std::strcmp(argv[1], "ping") == 0) {
    const int rc = apgas::run(argc, argv, [] {
      const apgas::place last(apgas::num_hosts() - 1);
      long sum = 0;
      for (int i = 0; i < 2000; ++i) sum += apgas::at(last, [i] { return static_cast<long>(i); });
      std::printf("ping: %ld\n", sum);
    });
    std::printf("apgas::run returned %d: the failed send was not noticed\n", rc);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "no_endpoint") == 0) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1) {
      setenv("FI_PROVIDER", "no-such-provider", 1);
    }
    const int rc = apgas::run(argc, argv, [] {});
    std::printf("no_endpoint: the run ended with %d\n", rc);
    return rc;
  }
  if (argc > 1 && (std::strcmp(argv[1], "idle") == 0 || std::strcmp(argv[1], "invalid") == 0)) {
    apgas::config cfg = apgas::config::from_env();
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const bool last = rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1;
    if (std::strcmp(argv[1], "invalid") == 0 && last) cfg.nthreads = -5;
    const int rc = apgas::run(cfg, [] { std::this_thread::sleep_for(std::chrono::seconds(5)); });
    std::printf("%s: the run ended with %d\n", argv[1], rc);
    return rc;
  }
  if (early) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1) {
      std::fprintf(stderr, "dead_place_main: rank %s exits before start-up at %.6f\n", rank, now_s());
      std::_Exit(0);
    }
  }
  const int rc = apgas::run(argc, argv, [] {
    const int victim = apgas::num_hosts() - 1;
    apgas::finish([] {
      for (const apgas::place& p : apgas::places()) apgas::async_at(p, [] { list_shm_regions(); });
    });
    std::printf("dead_place_main: place 0's words before the death");  // (no newline: in stdout's buffer)
    apgas::finish([victim] {
      // Every other place is busy too (a remote at that waits for the victim): nobody may hang.
      for (int p = 1; p < victim; ++p) {
        apgas::async_at(apgas::place(p), [victim] { (void)apgas::at(apgas::place(victim), [] { return 1; }); });
      }
      apgas::async_at(apgas::place(victim), [] {
        if (stop) {
          // A child freezes this process with ptrace (a launcher's SIGCONT cannot resume a traced stop), then
          // kills it.
          const pid_t me = ::getpid();
          std::fprintf(stderr, "dead_place_main: place %d stops at %.6f\n", apgas::here().id(), now_s());
          std::fflush(stderr);
          if (::fork() == 0) {
            if (::ptrace(PTRACE_ATTACH, me, nullptr, nullptr) == 0) {
              int status = 0;
              (void)::waitpid(me, &status, __WALL);
              // Let the SIGSTOP through: every thread stops (group stop), and only this tracer could resume them.
              (void)::ptrace(PTRACE_CONT, me, nullptr, reinterpret_cast<void*>(static_cast<long>(SIGSTOP)));
              (void)::waitpid(me, &status, __WALL);
            }
            ::sleep(8);
            ::kill(me, SIGKILL);
            std::_Exit(0);
          }
          for (;;) ::pause();
        }
        if (pauses) {  // stopped (SIGSTOP), and resumed by a child once the others have ended
          const pid_t me = ::getpid();
          if (::fork() == 0) {
            const char* t = std::getenv("APGAS_HEARTBEAT_TIMEOUT");
            ::sleep(static_cast<unsigned>(t != nullptr ? std::atoi(t) : 5) + 3);
            ::kill(me, SIGCONT);
            std::_Exit(0);
          }
          ::kill(me, SIGSTOP);
          for (;;) ::pause();
        }
        std::fprintf(stderr, "dead_place_main: place %d dies at %.6f\n", apgas::here().id(), now_s());
        std::fflush(stderr);
        if (exits) {
          std::printf("dead_place_main: the last words before exit(7)");
          std::exit(7);
        }
        ::kill(::getpid(), SIGKILL);
      });
      if (busy0) {  // place 0's one worker computes, never polling, while the others find the victim dead
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
        for (volatile long x = 0; std::chrono::steady_clock::now() < end;) x = x + 1;
      }
    });
  });
  std::printf("apgas::run returned %d: the dead place was not noticed\n", rc);
  return 0;
}
