// The trace and the statistics of a run over several host places, in real processes (mpirun -np 2 and 3, the
// reordering shim, libfabric): one file, written by place 0, with every place as a process on one time base, the
// messages as flows from a send at one place to its handler at another, and the statistics table of every place,
// whose counts match the work and agree between the two ends of every pair of places.
#include "trace/trace_support.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace apgas_test::trace;
using apgas_test::check_trace;
using apgas_test::rank0;

// The file every place is told about (place 0's setting wins; it alone writes). The processes of the job share the
// host, so place 0's own folder would do; a fixed name lets place 0 find it after the run.
std::string shared_path(const char* name) {
  const char* job = std::getenv("OMPI_COMM_WORLD_SIZE");
  return testing::TempDir() + "apgas-trace-dist-" + name + "-" + (job != nullptr ? job : "1") + ".json";
}

// The work: at each place other than 0, one activity with 5 asyncs of its own and fib(8); then an at to each; then a
// team barrier with one activity per place (place 0's own included).
constexpr int asyncs_there = 5;
constexpr int fib_n = 8;
void work() {
  apgas::finish([] {
    for (apgas::place p : apgas::places()) {
      if (p == apgas::here()) continue;
      apgas::async_at(p, [] {
        apgas::finish([] {
          for (int i = 0; i < asyncs_there; ++i) apgas::async([] {});
        });
        (void)fib(fib_n);
      });
    }
  });
  for (apgas::place p : apgas::places()) {
    if (p != apgas::here()) {
      // The body takes long enough for the waiting activity to stop polling and park: its at span resumes in a
      // second piece, which must not count as a second at.
      EXPECT_EQ(apgas::at(p, [] {
                  std::this_thread::sleep_for(std::chrono::milliseconds(200));
                  return apgas::here().id();
                }),
                p.id());
    }
  }
  apgas::finish([] {
    for (apgas::place p : apgas::places()) apgas::async_at(p, [] { apgas::team::world().barrier(); });
  });
}

TEST(TraceDist, EveryPlaceOnOneTimelineWithItsMessages) {
  const std::string path = shared_path("timeline");
  if (rank0()) std::remove(path.c_str());
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 2;
  cfg.trace_file = path;
  int hosts = 0;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [&] {
    hosts = apgas::num_hosts();
    work();
  });
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0) << err;
  if (!rank0()) return;
  ASSERT_GE(hosts, 2);
  const auto f = check_trace(path);
  ASSERT_TRUE(f.problems.empty()) << f.summary();
  // One named process per place.
  for (int p = 0; p < hosts; ++p) {
    ASSERT_EQ(f.processes.count(p + 1), 1u) << "place " << p;
    EXPECT_EQ(f.processes.at(p + 1).rfind("place " + std::to_string(p) + ": host ", 0), 0u) << f.processes.at(p + 1);
  }
  // Activities: the main one, and at every other place: the arriving one, its asyncs, fib's, the at's body; one
  // team activity per place.
  const long others = hosts - 1;
  EXPECT_EQ(f.starts_by_cat.at("activity"), 1 + others * (1 + asyncs_there + spawns(fib_n) + 1) + hosts);
  // Messages both ways between place 0 and every other place, each a flow from a send to its handler.
  for (int p = 2; p <= hosts; ++p) {
    EXPECT_GE(f.flows_between.count("message 1->" + std::to_string(p)), 1u) << "to place " << p - 1;
    EXPECT_GE(f.flows_between.count("message " + std::to_string(p) + "->1"), 1u) << "from place " << p - 1;
  }
  EXPECT_EQ(f.starts.at("at"), others);
  EXPECT_EQ(f.starts_by_cat.at("team"), hosts);
  EXPECT_GE(f.starts.at("handle async"), others);
  EXPECT_GE(f.counters.count("message bytes in flight"), 1u);
  // The clocks of the other places were aligned, and the run says how well.
  EXPECT_NE(err.find("clock offsets; place 1 "), std::string::npos) << err;
}

// What a place sent to another is what that one received from it: messages and bytes (err: the tables, for the
// failure messages).
template <class Stats>
void expect_pairs_agree(const Stats& stats, int hosts, const std::string& err) {
  for (int a = 0; a < hosts; ++a) {
    for (int b = 0; b < hosts; ++b) {
      if (a == b) continue;
      const auto& ab = stats.at(a).peers.at(b);
      const auto& ba = stats.at(b).peers.at(a);
      EXPECT_EQ(ab.msgs_sent, ba.msgs_recv) << a << " -> " << b << "\n" << err;
      EXPECT_EQ(ab.bytes_sent, ba.bytes_recv) << a << " -> " << b << "\n" << err;
    }
  }
}

TEST(StatsDist, EveryPlaceHasATableAndThePairsAgree) {
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 2;
  cfg.stats = true;
  int hosts = 0;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [&] {
    hosts = apgas::num_hosts();
    work();
  });
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0) << err;
  if (!rank0()) {
    EXPECT_EQ(err.find("apgas stats"), std::string::npos) << "only place 0 prints";
    return;
  }
  const auto stats = parse_stats(err);
  ASSERT_EQ(static_cast<int>(stats.size()), hosts) << err;
  EXPECT_EQ(stats.at(0).value.at("activities run"), 2) << err;  // the main activity and its team activity
  for (int p = 1; p < hosts; ++p) {
    EXPECT_EQ(stats.at(p).value.at("activities run"), 1 + asyncs_there + spawns(fib_n) + 1 + 1) << err;
  }
  expect_pairs_agree(stats, hosts, err);
  for (int a = 0; a < hosts; ++a) {
    for (int b = 0; b < hosts; ++b) {
      if (a != b) {
        EXPECT_GE(stats.at(a).peers.at(b).msgs_sent, 1) << a << " -> " << b << "\n" << err;
      }
    }
    // Place 0 sent every other place at least its activity, its at and its team activity, and the shutdown.
    if (a != 0) {
      EXPECT_GE(stats.at(0).peers.at(a).msgs_sent, 4) << err;
    }
  }
}

// A message larger than a piece goes by rendezvous (an announcement, then the bulk pieces): it counts as one message
// at both ends (the receiver counted the announcement too, and its bytes: the pairs disagreed).
TEST(StatsDist, AMessageSentInPiecesCountsOnceAtBothEnds) {
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 2;
  cfg.stats = true;
  cfg.message_piece = 64 * 1024;
  testing::internal::CaptureStderr();
  int hosts = 0;
  const int rc = apgas::run(cfg, [&] {
    hosts = apgas::num_hosts();
    const std::vector<char> big(1 << 20, 'x');
    EXPECT_EQ(apgas::at(apgas::place(1), [](const std::vector<char>& v) { return v.size(); }, big), big.size());
  });
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0) << err;
  if (!rank0()) return;
  const auto stats = parse_stats(err);
  ASSERT_EQ(static_cast<int>(stats.size()), hosts) << err;
  expect_pairs_agree(stats, hosts, err);
  EXPECT_GT(stats.at(0).peers.at(1).bytes_sent, 1 << 20) << err;
}

// A failure detector's heartbeat sent as the run ends, held back by the last barrier, arrives while the places send
// their statistics to place 0: it must not end that exchange (place 0 then printed its own table only). Place 0 sends
// nothing for longer than the heartbeat interval at the end of each run, so the others send it heartbeats then; the
// race is won some of the time, so several runs.
TEST(StatsDist, AHeartbeatAtTheEndLosesNoTable) {
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 1;
  cfg.stats = true;
  cfg.heartbeat_timeout_s = 1;
  for (int run = 0; run < 6; ++run) {
    testing::internal::CaptureStderr();
    int hosts = 0;
    const int rc = apgas::run(cfg, [&] {
      hosts = apgas::num_hosts();
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
      for (volatile long x = 0; std::chrono::steady_clock::now() < end;) x = x + 1;
    });
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(rc, 0) << err;
    if (!rank0()) continue;
    EXPECT_EQ(err.find("did not all arrive"), std::string::npos) << "run " << run << ":\n" << err;
    EXPECT_EQ(static_cast<int>(parse_stats(err).size()), hosts) << "run " << run << ":\n" << err;
  }
}

}  // namespace
