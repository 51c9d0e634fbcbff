// Members of a team that name different roots: place 2 reduces to place 0, places 0 and 1 to place 1. Place 2's
// part goes to place 0, which receives nothing in that reduce, and place 1 would wait for it for ever. Place 0 stops
// the job with exit code 3 and a message saying why (ctest: apgas.dist.team_roots_differ), instead of a hang.
#include <apgas/apgas.hpp>

#include <cstdio>
#include <span>
#include <vector>

int main(int argc, char** argv) {
  const int rc = apgas::run(argc, argv, [] {
    apgas::finish([] {
      for (apgas::place p : apgas::places()) {
        apgas::async_at(p, [] {
          apgas::team w = apgas::team::world();
          std::vector<long> v(4, 1);
          const apgas::place root(apgas::here().id() == 2 ? 0 : 1);
          w.reduce(std::span<long>(v), [](long a, long b) { return a + b; }, root);
        });
      }
    });
  });
  std::printf("apgas::run returned %d\n", rc);
  return rc;
}
