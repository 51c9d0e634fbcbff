// The trace (APGAS_TRACE) and the run statistics (APGAS_STATS) on one host place: the file is well-formed JSON that
// Perfetto reads (support/trace_check.hpp: spans nest per track, every flow has both ends, processes and threads are
// named), its counts match the work done, the settings are checked, a full buffer drops events and says so, a place
// that dies leaves what it recorded, and without a trace no file is written.
#include "trace/trace_support.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace apgas_test::trace;
using apgas_test::check_trace;

apgas::config traced(const std::string& path, int nthreads = 2) {
  apgas::config cfg;
  cfg.nthreads = nthreads;
  cfg.trace_file = path;
  return cfg;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The values of the counter `name` in the trace at `path`, in time order (the file's order where times are equal).
std::vector<double> counter_values(const std::string& path, const std::string& name) {
  const apgas_test::json::value doc = apgas_test::json::parse(contents(path));
  std::vector<std::pair<double, double>> at;
  for (const auto& e : doc.get("traceEvents")->items()) {
    const auto* ph = e.get("ph");
    const auto* n = e.get("name");
    if (ph == nullptr || ph->string() != "C" || n == nullptr || n->string() != name) continue;
    at.emplace_back(e.get("ts")->number(), e.get("args")->get("value")->number());
  }
  std::stable_sort(at.begin(), at.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> v;
  for (const auto& [ts, value] : at) v.push_back(value);
  return v;
}

// Keeps the calling worker busy (nothing else runs meanwhile on one worker); what the tests assert is not a time.
void spin_ms(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

class Trace : public testing::TestWithParam<int> {};

TEST_P(Trace, FibHasOneActivityPerAsyncAndAFlowPerSpawn) {
  const std::string path = temp_file("fib.json");
  constexpr int n = 12;
  long result = 0;
  ASSERT_EQ(apgas::run(traced(path, GetParam()), [&] { result = fib(n); }), 0);
  EXPECT_EQ(result, 144);
  const auto f = check_trace(path);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  // The main activity and one per async; every spawn's flow has both ends; one finish wait per finish (the main
  // activity's implicit one too).
  EXPECT_EQ(f.starts_by_cat.at("activity"), spawns(n) + 1);
  EXPECT_EQ(f.flows.at("spawn"), spawns(n));
  EXPECT_EQ(f.backward_flows.count("spawn"), 0u);
  EXPECT_EQ(f.starts_by_cat.at("finish"), spawns(n) + 1);
  EXPECT_EQ(f.starts.at("finish wait"), spawns(n) + 1);
  // Activities are named after their closures.
  EXPECT_EQ(f.starts_containing("fib(int)::{lambda()#1}"), spawns(n)) << "closure names: " << f.starts.size();
  ASSERT_EQ(f.processes.count(1), 1u);
  EXPECT_EQ(f.processes.at(1).rfind("place 0: host ", 0), 0u) << f.processes.at(1);
  for (int w = 0; w < GetParam(); ++w) {
    EXPECT_EQ(f.threads.at({1, w + 1}), "worker " + std::to_string(w));
  }
  EXPECT_EQ(f.dropped, 0);
  EXPECT_GT(f.counters.count("activities alive"), 0u);
  EXPECT_GE(f.counter_max.at("activities alive"), 1);
}

INSTANTIATE_TEST_SUITE_P(Workers, Trace, testing::Values(1, 2, 4), apgas_test::workers_name);

// An activity that blocks: its fiber parks (an async slice), the worker runs something else meanwhile, and the
// activity's track resumes in pieces marked resumed; spans still nest on every worker.
TEST(TraceParks, AParkedActivityEndsItsPiecesAndResumes) {
  for (int workers : {1, 2}) {
    const std::string path = temp_file("park.json");
    ASSERT_EQ(apgas::run(traced(path, workers), [] {
      bool ready = false;
      apgas::finish([&] {
        apgas::async([&] { apgas::atomic([&] { ready = true; }); });
        apgas::async([&] { apgas::when([&] { return ready; }, [] {}); });  // popped first: it blocks
      });
    }), 0);
    const auto f = check_trace(path);
    EXPECT_TRUE(f.problems.empty()) << f.summary();
    EXPECT_EQ(f.starts_by_cat.at("activity"), 3);
    if (workers == 1) {
      EXPECT_GE(f.async_slices, 1) << "the blocked activity's fiber was parked";
      EXPECT_GT(f.pieces_by_cat.at("activity"), 3) << "it resumed in a new piece";
    }
  }
}

TEST(TraceSettings, WithoutATraceNoFileIsWritten) {
  const std::string path = temp_file("off.json");
  apgas::config cfg;
  cfg.nthreads = 2;
  ASSERT_EQ(apgas::run(cfg, [] { (void)fib(10); }), 0);
  EXPECT_FALSE(exists(path));
  ASSERT_EQ(apgas::run(traced(path), [] { (void)fib(10); }), 0);
  EXPECT_TRUE(exists(path)) << "(the same path is written when the trace is on)";
}

TEST(TraceSettings, AnUnwritableFileStopsStartUpNamingIt) {
  const std::string path = "/nonexistent-apgas-dir/trace.json";
  bool ran = false;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(traced(path), [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  EXPECT_NE(err.find("cannot write the trace file '" + path + "' (APGAS_TRACE)"), std::string::npos) << err;
}

TEST(TraceSettings, MalformedValuesAreRefusedNamingThem) {
  struct env_guard {
    const char* name;
    explicit env_guard(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
    ~env_guard() { ::unsetenv(name); }
  };
  const auto refused = [](const char* var, const char* value, const std::string& part) {
    env_guard g(var, value);
    try {
      (void)apgas::config::from_env();
      ADD_FAILURE() << var << "=" << value << " was accepted";
    } catch (const apgas::config_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(var) + "='" + value + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(part), std::string::npos) << what;
    }
  };
  refused("APGAS_TRACE_FILTER", "activity,bogus", "unknown category 'bogus'");
  refused("APGAS_TRACE_FILTER", "activity,,park", "an empty category");
  refused("APGAS_TRACE_FILTER", "", "an empty category");
  refused("APGAS_TRACE_FILTER", "-all", "no category is left");
  refused("APGAS_TRACE_BUFFER", "12", "from 65536");
  refused("APGAS_TRACE_BUFFER", "32G", "to 17179869184");
  refused("APGAS_TRACE", "", "the path of the trace file");
  refused("APGAS_STATS", "yes", "0 (off) or 1 (on)");
  {
    env_guard g("APGAS_TRACE_FILTER", "all,-park");
    EXPECT_EQ(apgas::config::from_env().trace_filter, "all,-park");
  }
  {
    env_guard g("APGAS_TRACE_BUFFER", "1M");
    EXPECT_EQ(apgas::config::from_env().trace_buffer, std::size_t{1} << 20);
  }
  // The same checks for a configuration made in code: apgas::run refuses it with exit code 2.
  apgas::config cfg = traced(temp_file("bad.json"));
  cfg.trace_filter = "activity;park";
  EXPECT_THROW(cfg.validate(), apgas::config_error);
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(cfg, [] {}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("apgas::config::trace_filter='activity;park'"), std::string::npos) << err;
}

TEST(TraceSettings, TheFilterKeepsOnlyItsCategories) {
  const std::string path = temp_file("filter.json");
  apgas::config cfg = traced(path);
  cfg.trace_filter = "finish";
  constexpr int n = 10;
  ASSERT_EQ(apgas::run(cfg, [] { (void)fib(n); }), 0);
  const auto f = check_trace(path);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(f.starts_by_cat.count("activity"), 0u);
  EXPECT_EQ(f.flows.count("spawn"), 0u);
  EXPECT_EQ(f.starts_by_cat.at("finish"), spawns(n) + 1);
}

TEST(TraceSettings, AFullBufferDropsEventsAndSaysSo) {
  const std::string path = temp_file("small.json");
  apgas::config cfg = traced(path);
  cfg.trace_buffer = apgas::config::min_trace_buffer;  // 2048 events per worker
  testing::internal::CaptureStderr();
  ASSERT_EQ(apgas::run(cfg, [] { (void)fib(18); }), 0);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("place 0 dropped"), std::string::npos) << err;
  EXPECT_NE(err.find("were full"), std::string::npos) << err;
  const auto f = check_trace(path);
  EXPECT_TRUE(f.problems.empty()) << f.summary();  // what was kept is still a well-formed trace
  EXPECT_GT(f.dropped, 0);
  EXPECT_LT(f.starts_by_cat.at("activity"), spawns(18) + 1);
}

// Statistics: activities run, finish waits, parks.
TEST(Stats, TheTableCountsTheWork) {
  apgas::config cfg;
  cfg.nthreads = 2;
  cfg.stats = true;
  constexpr int n = 10;
  testing::internal::CaptureStderr();
  ASSERT_EQ(apgas::run(cfg, [] {
    (void)fib(n);
    bool ready = false;  // one park at least: with two workers or one, the when below blocks
    apgas::finish([&] {
      apgas::async([&] { apgas::atomic([&] { ready = true; }); });
      apgas::async([&] { apgas::when([&] { return ready; }, [] {}); });
    });
  }), 0);
  const std::string err = testing::internal::GetCapturedStderr();
  const auto stats = parse_stats(err);
  ASSERT_EQ(stats.count(0), 1u) << err;
  const auto& v = stats.at(0).value;
  EXPECT_EQ(v.at("activities run"), static_cast<double>(spawns(n) + 1 + 2)) << err;
  EXPECT_EQ(v.at("finish waits"), static_cast<double>(spawns(n) + 1 + 1)) << err;
  EXPECT_GE(v.at("activities stolen"), 0) << err;
  EXPECT_GE(v.at("time idle"), 0) << err;
  EXPECT_NE(err.find("apgas stats: place 0: host "), std::string::npos) << err;
  // Off: no table.
  testing::internal::CaptureStderr();
  ASSERT_EQ(apgas::run(apgas::config{}, [] { (void)fib(5); }), 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("apgas stats"), std::string::npos);
}

TEST(Stats, EnableStatsSwitchesThemOnForTheNextRuns) {
  apgas::enable_stats();
  const apgas::config cfg = apgas::config::from_env();
  EXPECT_TRUE(cfg.stats);
  // A run given its configuration in code prints them too.
  testing::internal::CaptureStderr();
  ASSERT_EQ(apgas::run(apgas::config{}, [] { (void)fib(5); }), 0);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("apgas stats: place 0: host "), std::string::npos);
}

TEST(Stats, TakeStatsOptionTakesItOutOfTheCommandLine) {
  char prog[] = "prog", stats[] = "--stats", a[] = "-n", b[] = "5", dashes[] = "--", after[] = "--stats";
  char* argv[] = {prog, stats, a, stats, b, dashes, after, nullptr};
  int argc = 7;
  EXPECT_TRUE(apgas::take_stats_option(argc, argv));
  ASSERT_EQ(argc, 5);
  EXPECT_STREQ(argv[1], "-n");
  EXPECT_STREQ(argv[2], "5");
  EXPECT_STREQ(argv[3], "--");
  EXPECT_STREQ(argv[4], "--stats");  // after `--`: a parameter of the program, not this option
  EXPECT_EQ(argv[5], nullptr);
  EXPECT_TRUE(apgas::config::from_env().stats);
  char* none[] = {prog, a, b, nullptr};
  int n = 3;
  EXPECT_FALSE(apgas::take_stats_option(n, none));
  EXPECT_EQ(n, 3);
  EXPECT_STREQ(none[2], "5");
}

// A counter change soon after the last sample (within the writer's 10 us gap) is not lost: the next change writes it
// first, at its own time. Here the two spawns come right after the first sample, and three activities are alive
// while the root keeps its only worker busy: the trace must show 3, then fall back to 0.
TEST(TraceCounters, AChangeSoonAfterASampleIsWrittenNotLost) {
  const std::string path = temp_file("alive.json");
  ASSERT_EQ(apgas::run(traced(path, 1), [] {
    apgas::finish([] {
      apgas::async([] { spin_ms(1); });
      apgas::async([] { spin_ms(1); });
      spin_ms(20);
    });
  }), 0);
  const auto f = check_trace(path);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  const std::vector<double> alive = counter_values(path, "activities alive");
  ASSERT_FALSE(alive.empty());
  std::string shown;
  for (double v : alive) shown += std::to_string(static_cast<long>(v)) + " ";
  EXPECT_EQ(alive.front(), 1) << shown;
  EXPECT_NE(std::find(alive.begin(), alive.end(), 3.0), alive.end()) << shown;
  EXPECT_EQ(f.counter_max.at("activities alive"), 3) << shown;
  EXPECT_EQ(alive.back(), 0) << shown;
}

// Start-up refuses a trace path it could not write at the end: a directory, and a name too long for the temporary
// file beside it (the file is written there, then renamed); the error names the path and why.
TEST(TraceSettings, APathTheEndCouldNotWriteStopsStartUp) {
  const auto refused = [](const std::string& path, const std::string& why) {
    bool ran = false;
    testing::internal::CaptureStderr();
    const int rc = apgas::run(traced(path), [&] { ran = true; });
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << err;
    EXPECT_FALSE(ran);
    EXPECT_NE(err.find("cannot write the trace file '" + path + "' (APGAS_TRACE): " + why), std::string::npos) << err;
  };
  const std::string dir = temp_file("dir.json");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  refused(dir, "it is a directory");
  ::rmdir(dir.c_str());
  // A name of 250 bytes: the file could be made, the temporary one (".tmp.<pid>" added) is over NAME_MAX.
  const std::string folder = testing::TempDir();
  const std::string name = folder + std::string(250, 'a');
  const std::string tmp = name + ".tmp." + std::to_string(::getpid());
  refused(name, "cannot create '" + tmp + "'");
  EXPECT_FALSE(exists(name)) << "the file is left as it was";
  // A folder the run may not write in (the file in it may be written): refused too; root may write anywhere.
  if (::geteuid() != 0) {
    const std::string ro = temp_file("ro");
    ASSERT_EQ(::mkdir(ro.c_str(), 0755), 0);
    const std::string file = ro + "/t.json";
    std::fclose(std::fopen(file.c_str(), "w"));
    ::chmod(ro.c_str(), 0555);
    refused(file, "cannot create '" + file + ".tmp.");
    ::chmod(ro.c_str(), 0755);
    std::remove(file.c_str());
    ::rmdir(ro.c_str());
  }
}

// A trace path that is a symbolic link (here a relative one): the trace replaces the link's target, and the link
// stays a link. (The placeholder went into the target and the trace, renamed over the link, replaced the link.)
TEST(TraceSettings, ALinkIsFollowedAndStays) {
  const std::string target = temp_file("link-target.json"), link = temp_file("link.json");
  std::remove(link.c_str());
  { std::ofstream(target) << "{\"old\":1}\n"; }
  ASSERT_EQ(::symlink(target.substr(target.rfind('/') + 1).c_str(), link.c_str()), 0);
  ASSERT_EQ(apgas::run(traced(link), [] { (void)fib(8); }), 0);
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  const auto f = check_trace(target);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(f.starts_by_cat.at("activity"), spawns(8) + 1);
  std::remove(link.c_str());
  std::remove(target.c_str());
}

// A relative trace path is taken from the working directory at start-up: a program that changes directory during the
// run still gets its trace there (the placeholder stayed there and the trace went to the new directory).
TEST(TraceSettings, ARelativePathIsTakenFromTheDirectoryAtStartUp) {
  const std::string dir = temp_file("reldir"), elsewhere = temp_file("reldir-elsewhere");
  ::mkdir(dir.c_str(), 0755);
  ::mkdir(elsewhere.c_str(), 0755);
  std::remove((dir + "/rel.json").c_str());
  std::remove((elsewhere + "/rel.json").c_str());
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(::chdir(dir.c_str()), 0);
  char real[4096];  // the directory as getcwd names it (TempDir may be relative, or lead through a link)
  ASSERT_NE(::getcwd(real, sizeof real), nullptr);
  testing::internal::CaptureStderr();
  const int rc = apgas::run(traced("rel.json"), [&] {
    (void)fib(8);
    ASSERT_EQ(::chdir(elsewhere.c_str()), 0);
  });
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(rc, 0);
  const auto f = check_trace(dir + "/rel.json");
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(f.starts_by_cat.at("activity"), spawns(8) + 1);
  EXPECT_FALSE(exists(elsewhere + "/rel.json"));
  EXPECT_NE(err.find("apgas: trace: wrote '" + std::string(real) + "/rel.json'"), std::string::npos) << err;
  std::remove((dir + "/rel.json").c_str());
  ::rmdir(dir.c_str());
  ::rmdir(elsewhere.c_str());
}

// When the write at the end fails nonetheless, the error names the temporary file where that is what failed.
TEST(TraceSettings, AFailedWriteAtTheEndNamesTheTemporaryFile) {
  const std::string path = temp_file("end.json");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  testing::internal::CaptureStderr();
  const int rc = apgas::run(traced(path), [&] { ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0); });  // in its way
  const std::string err = testing::internal::GetCapturedStderr();
  ::rmdir(tmp.c_str());
  EXPECT_EQ(rc, 0);
  EXPECT_NE(err.find("apgas: trace: cannot write '" + path + "': writing '" + tmp + "'"), std::string::npos) << err;
  EXPECT_EQ(err.find("apgas: trace: wrote"), std::string::npos) << err;
}

// Text the trace and the statistics take from outside: a place's description names the CUDA driver's path, which
// may be any bytes. The JSON stays valid UTF-8 (invalid bytes become U+FFFD, valid sequences are kept), and the
// statistics' header keeps a long description whole. Each run in a process of its own (the driver loads once).
TEST(TraceTextDeathTest, OutsideTextStaysValidAndWhole) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  Dl_info info{};
  const auto cos_fn = static_cast<double (*)(double)>(&::cos);
  if (::dladdr(reinterpret_cast<void*>(cos_fn), &info) == 0 || info.dli_fname == nullptr) {
    GTEST_SKIP() << "no path of the C maths library to stand for a CUDA driver";
  }
  const std::string lib = info.dli_fname;
  const std::string odd = testing::TempDir() + "apgas-trace-q\"b\\x\x01\xff\xc3\xa9\xe2\x82.so";
  const std::string long_name = testing::TempDir() + "apgas-trace-" + std::string(200, 'd') + ".so";
  const std::string path = testing::TempDir() + "apgas-trace-text-death.json";
  if (!testing::internal::InDeathTestChild()) {
    for (const std::string& l : {odd, long_name}) {
      std::remove(l.c_str());
      ASSERT_EQ(::symlink(lib.c_str(), l.c_str()), 0) << l;
    }
    std::remove(path.c_str());
  }
  EXPECT_EXIT(
      {
        ::setenv("APGAS_CUDA_DRIVER", odd.c_str(), 1);
        apgas::config cfg = traced(path);
        cfg.stats = true;
        testing::internal::CaptureStderr();
        const int rc = apgas::run(cfg, [] { (void)fib(8); });
        const std::string err = testing::internal::GetCapturedStderr();
        std::fprintf(stderr, "%s", err.c_str());
        std::exit(rc == 0 ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  const std::string text = contents(path);
  if (text.find("apgas-trace-q") == std::string::npos) GTEST_SKIP() << "this build names no CUDA driver";
  const auto f = check_trace(path);
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(text.find('\xff'), std::string::npos);
  EXPECT_NE(text.find("q\\\"b\\\\x\\u0001\\ufffd\xc3\xa9\\ufffd\\ufffd.so"), std::string::npos)
      << f.processes.at(1);
  EXPECT_EXIT(
      {
        ::setenv("APGAS_CUDA_DRIVER", long_name.c_str(), 1);
        apgas::config cfg;
        cfg.nthreads = 2;
        cfg.stats = true;
        testing::internal::CaptureStderr();
        const int rc = apgas::run(cfg, [] { (void)fib(8); });
        const std::string err = testing::internal::GetCapturedStderr();
        const bool whole = err.find(long_name) != std::string::npos && err.find(" (2 workers, ") != std::string::npos;
        std::fprintf(stderr, "%s", err.c_str());
        std::exit(rc == 0 && whole ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  std::remove(odd.c_str());
  std::remove(long_name.c_str());
}

// A place that dies through std::terminate writes what it recorded next to the trace file; the trace file itself
// keeps the placeholder that says the run did not write it.
TEST(TraceDeathTest, ATerminatingPlaceLeavesWhatItRecorded) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  // (one name for the test and its child, which runs the test again in a process of its own)
  const std::string path = testing::TempDir() + "apgas-trace-death-dies.json";
  if (!testing::internal::InDeathTestChild()) {
    std::remove(path.c_str());
    std::remove((path + ".place0.json").c_str());
  }
  EXPECT_DEATH(
      {
        (void)apgas::run(traced(path), [] {
          (void)fib(8);
          std::terminate();
        });
      },
      "place 0 wrote what it recorded to '.*dies.json.place0.json' \\(std::terminate was called\\)");
  const auto f = check_trace(path + ".place0.json");
  EXPECT_TRUE(f.problems.empty()) << f.summary();
  EXPECT_EQ(f.starts_by_cat.at("activity"), spawns(8) + 1);
  const auto placeholder = check_trace(path);
  EXPECT_TRUE(placeholder.problems.empty()) << placeholder.summary();
  EXPECT_EQ(placeholder.events, 0);
}

// A terminating place that cannot write its dump (its folder was removed during the run) says so: the placeholder
// at the trace's path tells the reader to look for that file.
TEST(TraceDeathTest, ATerminatingPlaceThatCannotWriteItsDumpSaysSo) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  const std::string dir = testing::TempDir() + "apgas-trace-death-gone";
  const std::string path = dir + "/t.json";
  if (!testing::internal::InDeathTestChild()) ::mkdir(dir.c_str(), 0755);
  EXPECT_DEATH(
      {
        (void)apgas::run(traced(path), [&] {
          std::remove(path.c_str());
          ::rmdir(dir.c_str());
          std::terminate();
        });
      },
      "place 0 could not write what it recorded to '.*death-gone/t.json.place0.json' \\(std::terminate was "
      "called\\): No such file or directory");
  ::rmdir(dir.c_str());
}

// Where the trace goes to a FIFO (or a device such as /dev/null), a terminating place makes no file beside it (it made
// '/dev/null.place0.json' in /dev) and says so.
TEST(TraceDeathTest, ATerminatingPlaceMakesNoFileBesideAFifo) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  const std::string path = testing::TempDir() + "apgas-trace-death-fifo";
  if (!testing::internal::InDeathTestChild()) {
    std::remove(path.c_str());
    std::remove((path + ".place0.json").c_str());
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  }
  EXPECT_DEATH(
      {
        (void)apgas::run(traced(path), [] {
          (void)fib(8);
          std::terminate();
        });
      },
      "place 0 did not write what it recorded \\(std::terminate was called\\): the trace goes to '.*death-fifo', "
      "which is not a regular file");
  EXPECT_FALSE(exists(path + ".place0.json"));
  std::remove((path + ".place0.json").c_str());
  std::remove(path.c_str());
}

// Two activities calling std::terminate together: the second waits for the first's dump instead of ending the
// process under it (no dump was left).
TEST(TraceDeathTest, TwoTerminatingActivitiesLeaveOneDump) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  const std::string path = testing::TempDir() + "apgas-trace-death-two.json";
  if (!testing::internal::InDeathTestChild()) {
    std::remove(path.c_str());
    std::remove((path + ".place0.json").c_str());
  }
  EXPECT_DEATH(
      {
        apgas::config cfg = traced(path);
        cfg.nthreads = 2;
        (void)apgas::run(cfg, [] {
          (void)fib(17);  // enough events that the dump takes a while
          static std::atomic<int> ready{0};
          apgas::finish([] {
            for (int i = 0; i < 2; ++i) {
              apgas::async([] {
                ready.fetch_add(1);
                while (ready.load() < 2) {
                }
                std::terminate();
              });
            }
          });
        });
      },
      "place 0 wrote what it recorded to '.*two.json.place0.json' \\(std::terminate was called\\)");
  const auto f = check_trace(path + ".place0.json");
  EXPECT_TRUE(f.problems.empty()) << f.summary();
}

}  // namespace
