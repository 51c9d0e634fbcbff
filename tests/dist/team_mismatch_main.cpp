// Team operations called differently at their members (3 places), by argv[1]:
//   (none)           place 2 reduces to place 0, places 0 and 1 to place 1. Place 2's part goes to place 0, which
//                    receives nothing in that reduce, and place 1 would wait for it for ever. Place 0 stops the run
//                    with exit code 3 saying why and tells the others, which say that place 0 stopped it (ctest:
//                    apgas.dist.team_roots_differ, apgas.dist.team_stop_told).
//   late_member      place 2 joins a barrier 3 heartbeat timeouts late: the others report, once, that they wait for
//                    place 2, and go on when it comes (apgas.dist.team_wait_reported).
//   extra_broadcast  place 0 broadcasts twice, the others receive once: the run ends, and places 1 and 2 say that
//                    the second broadcast's part was taken by no operation (apgas.dist.team_part_untaken).
//   member_throws    place 2 throws instead of joining a barrier: places 0 and 1 wait for ever, and place 0, home of
//                    the finish that holds the exception, prints it with its report of the wait; 6 heartbeat timeouts
//                    later place 0 ends the process (exit code 4) to end the test (apgas.dist.team_member_threw).
#include <apgas/apgas.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  const int mode = arg == "late_member" ? 1 : arg == "extra_broadcast" ? 2 : arg == "member_throws" ? 3 : 0;
  const int rc = apgas::run(argc, argv, [mode] {
    apgas::finish([mode] {
      for (apgas::place p : apgas::places()) {
        apgas::async_at(p, [mode] {
          apgas::team w = apgas::team::world();
          const char* hb_text = std::getenv("APGAS_HEARTBEAT_TIMEOUT");
          const int hb = std::atoi(hb_text != nullptr ? hb_text : "5");
          if (mode == 1) {
            if (apgas::here().id() == 2) std::this_thread::sleep_for(std::chrono::seconds(3 * hb));
            w.barrier();
          } else if (mode == 3) {
            if (apgas::here().id() == 0) {
              std::thread([s = 6 * hb] {
                std::this_thread::sleep_for(std::chrono::seconds(s));
                std::fflush(stderr);
                std::_Exit(4);
              }).detach();
            }
            if (apgas::here().id() == 2) throw std::runtime_error("member 2 threw before the barrier");
            w.barrier();
          } else if (mode == 2) {
            std::vector<long> v(4, 1);
            w.broadcast(std::span<long>(v), apgas::place(0));
            if (apgas::here().id() == 0) w.broadcast(std::span<long>(v), apgas::place(0));
          } else {
            std::vector<long> v(4, 1);
            const apgas::place root(apgas::here().id() == 2 ? 0 : 1);
            w.reduce(std::span<long>(v), [](long a, long b) { return a + b; }, root);
          }
        });
      }
    });
  });
  std::printf("apgas::run returned %d\n", rc);
  return rc;
}
