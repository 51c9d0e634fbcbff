// Soak (label `stress`): mixed load over every host place for a while (APGAS_SOAK_SECONDS, default 60: two
// transports stay under 3 minutes on 2 cores): remote asyncs and at chains, copies both ways, team operations,
// exceptions thrown at every place; then a clean shut-down
// with every count checked: every activity sent ran exactly once, every exception arrived exactly once, every copy
// came back intact, no copy ticket or array is left behind. Assertions on counts and data only, never on time.
#include "support/run.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using apgas_test::run_everywhere;

namespace {

std::atomic<long> g_ran{0};         // remote activities that ran at this place
std::atomic<long> g_arrays_live{0}; // arrays made minus arrays freed (at place 0)

struct soak_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int soak_seconds() {
  const char* v = std::getenv("APGAS_SOAK_SECONDS");
  const int s = v != nullptr ? std::atoi(v) : 60;
  return s > 0 ? s : 60;
}

long ran_at(apgas::place p) {
  return apgas::at(p, [] { return g_ran.load(); });
}

}  // namespace

TEST(Soak, MixedLoadOverEveryPlaceThenACleanShutdown) {
  static bool registered = (apgas::register_exception<soak_error>(), true);
  (void)registered;
  run_everywhere([] {
    const std::vector<apgas::place> hosts(apgas::places().begin(), apgas::places().end());
    const int n = static_cast<int>(hosts.size());
    ASSERT_GE(n, 2) << "the soak test needs several host places";
    std::vector<long> sent(static_cast<std::size_t>(n), 0);  // remote activities sent to each place
    std::vector<long> ran_before(static_cast<std::size_t>(n), 0);
    for (int p = 0; p < n; ++p) ran_before[static_cast<std::size_t>(p)] = ran_at(hosts[static_cast<std::size_t>(p)]);
    long rounds = 0, exceptions = 0, copies = 0, team_ops = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(soak_seconds());
    while (std::chrono::steady_clock::now() < end) {
      ++rounds;
      // 1. Fan-out of remote asyncs (and nested ones back to place 0), some of which throw.
      long thrown = 0;
      try {
        apgas::finish([&] {
          for (int p = 0; p < n; ++p) {
            for (int k = 0; k < 20; ++k) {
              const bool do_throw = (k == 7);
              const long r = rounds;
              apgas::async_at(hosts[static_cast<std::size_t>(p)], [do_throw, r, k] {
                g_ran.fetch_add(1);
                if (k % 5 == 0) {  // a nested activity back at place 0, counted by the same finish
                  apgas::async_at(apgas::place(0), [] { g_ran.fetch_add(1); });
                }
                if (do_throw) throw soak_error("round " + std::to_string(r));
              });
              sent[static_cast<std::size_t>(p)] += 1;
              if (k % 5 == 0) sent[0] += 1;
              if (do_throw) ++thrown;
            }
          }
        });
        ADD_FAILURE() << "round " << rounds << ": no exception arrived";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(static_cast<long>(m.size()), thrown) << "round " << rounds;
        EXPECT_EQ(static_cast<long>(m.of_type<soak_error>().size()), thrown) << "round " << rounds;
        exceptions += static_cast<long>(m.size());
      }
      // 2. An at chain around the places.
      const int last = apgas::at(hosts[static_cast<std::size_t>(rounds % n)], [n] {
        return apgas::at(apgas::place((apgas::here().id() + 1) % n), [] { return apgas::here().id(); });
      });
      EXPECT_EQ(last, static_cast<int>((rounds % n + 1) % n));
      // 3. Copies both ways with a remote array at every place, sizes from 1 element to 1 MiB.
      const std::size_t elems = std::size_t{1} << (rounds % 19);
      for (int p = 0; p < n; ++p) {
        auto arr = apgas::make_remote_array<std::uint32_t>(hosts[static_cast<std::size_t>(p)], elems);
        g_arrays_live.fetch_add(1);
        std::vector<std::uint32_t> out(elems), back(elems, 0);
        std::iota(out.begin(), out.end(), static_cast<std::uint32_t>(rounds * 131 + p));
        apgas::finish([&] { apgas::async_copy(std::span<const std::uint32_t>(out), arr); });
        apgas::finish([&] { apgas::async_copy(arr, 0, std::span<std::uint32_t>(back)); });
        EXPECT_EQ(back, out) << "round " << rounds << ", place " << p << ", " << elems << " elements";
        apgas::free_remote_array(arr);
        g_arrays_live.fetch_sub(1);
        copies += 2;
      }
      // 4. Team operations: one activity per host place.
      apgas::finish([&] {
        for (int p = 0; p < n; ++p) {
          const long r = rounds;
          apgas::async_at(hosts[static_cast<std::size_t>(p)], [n, r] {
            long v[2] = {apgas::here().id() + 1, r};
            apgas::team::world().allreduce(std::span<long>(v), [](long a, long b) { return a + b; });
            if (v[0] != static_cast<long>(n) * (n + 1) / 2 || v[1] != r * n) throw soak_error("allreduce gave a wrong sum");
            long root_value = apgas::here().id() == 0 ? r : -1;
            apgas::team::world().broadcast(std::span<long>(&root_value, 1), apgas::place(0));
            if (root_value != r) throw soak_error("broadcast gave a wrong value");
            apgas::team::world().barrier();
          });
        }
      });
      team_ops += 3;
    }
    // Every count: nothing lost, nothing run twice, nothing left behind.
    for (int p = 0; p < n; ++p) {
      const auto i = static_cast<std::size_t>(p);
      EXPECT_EQ(ran_at(hosts[i]) - ran_before[i], sent[i]) << "remote activities at place " << p;
      EXPECT_EQ(apgas::at(hosts[i], [] { return apgas::detail::copy_tickets_pending(); }), 0u) << "place " << p;
    }
    EXPECT_EQ(g_arrays_live.load(), 0);
    EXPECT_GT(rounds, 0);
    std::printf("soak: %ld rounds over %d places: %ld exceptions, %ld copies, %ld team operations\n", rounds, n,
                exceptions, copies, team_ops);
  });
}
