// Configuration: apgas::config::from_env(), config::validate(), and how apgas::run reacts to a bad configuration.
// Each test sets the variables it needs and unsets them when it ends (env_guard), so tests do not leak into
// each other.
#include "support/run.hpp"

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

namespace {

// Sets a variable for the lifetime of the guard, restoring the previous state (set or unset) afterwards.
class env_guard {
 public:
  env_guard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    ::setenv(name, value, 1);
  }
  explicit env_guard(const char* name) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    ::unsetenv(name);
  }
  ~env_guard() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// The message of the config_error that from_env() throws with var=value, or "" if it accepts the value.
std::string rejection(const char* var, const char* value) {
  env_guard g(var, value);
  try {
    (void)apgas::config::from_env();
  } catch (const apgas::config_error& e) {
    return e.what();
  }
  return "";
}

// Recursion the optimiser cannot turn into a loop: each frame's 1 KiB volatile array is read after the call.
long deep(long n) {
  volatile long frame[128];
  frame[0] = n;
  frame[127] = n;
  if (n == 0) return frame[0];
  const long below = deep(n - 1);
  return below + frame[127];
}

}  // namespace

TEST(Config, DefaultsWithoutEnvironment) {
  env_guard a("APGAS_NTHREADS");
  env_guard b("APGAS_STACK_SIZE");
  env_guard c("APGAS_TRANSPORT");
  const apgas::config cfg = apgas::config::from_env();
  EXPECT_EQ(cfg.nthreads, 0);
  EXPECT_EQ(cfg.stack_size, apgas::config::default_stack_size);
  EXPECT_EQ(apgas::config::default_stack_size, 256u * 1024u);
  const apgas::config plain;
  EXPECT_EQ(plain.nthreads, 0);
  EXPECT_EQ(plain.stack_size, apgas::config::default_stack_size);
  EXPECT_NO_THROW(plain.validate());
}

TEST(Config, ValidThreadCounts) {
  for (auto [text, n] : {std::pair{"4", 4}, {"1", 1}, {"4096", 4096}}) {
    env_guard g("APGAS_NTHREADS", text);
    EXPECT_EQ(apgas::config::from_env().nthreads, n) << "APGAS_NTHREADS='" << text << "'";
  }
}

TEST(Config, ValidStackSizes) {
  for (auto [text, bytes] : {std::pair{"65536", std::size_t{65536}},
                             {"256K", std::size_t{256} << 10},
                             {"1M", std::size_t{1} << 20},
                             {"16K", apgas::config::min_stack_size},  // the bounds are accepted
                             {"16384", apgas::config::min_stack_size},
                             {"1G", apgas::config::max_stack_size},
                             {"1024M", apgas::config::max_stack_size}}) {
    env_guard g("APGAS_STACK_SIZE", text);
    EXPECT_EQ(apgas::config::from_env().stack_size, bytes) << "APGAS_STACK_SIZE='" << text << "'";
  }
}

TEST(Config, InvalidThreadCountsNameTheVariableAndTheValue) {
  for (const char* bad : {"0", "-1", "abc", "4x", "", " 4", "4 ", "4.0", "0x4", "99999999999", "4097", "5000",
                          "18446744073709551617"}) {
    const std::string what = rejection("APGAS_NTHREADS", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_NTHREADS='" << bad << "' was accepted";
    EXPECT_NE(what.find("APGAS_NTHREADS"), std::string::npos) << what;
    EXPECT_NE(what.find(bad), std::string::npos) << what;
    EXPECT_NE(what.find("4096"), std::string::npos) << "the message should give the limit: " << what;
  }
}

TEST(Config, InvalidStackSizesNameTheVariableAndTheValue) {
  for (const char* bad : {"0", "abc", "", "5G", "2G", "1025M", "1k", "1K", "16383", "15K", "-256K", "12Q", "K", "1MB",
                          "1.5M", "99999999999999999999", "17179869184G"}) {
    const std::string what = rejection("APGAS_STACK_SIZE", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_STACK_SIZE='" << bad << "' was accepted";
    EXPECT_NE(what.find("APGAS_STACK_SIZE"), std::string::npos) << what;
    EXPECT_NE(what.find(bad), std::string::npos) << what;
  }
}

TEST(Config, InvalidTransportIsNamed) {
  const std::string what = rejection("APGAS_TRANSPORT", "carrier-pigeon");
  ASSERT_FALSE(what.empty()) << "APGAS_TRANSPORT='carrier-pigeon' was accepted";
  EXPECT_NE(what.find("APGAS_TRANSPORT"), std::string::npos) << what;
  EXPECT_NE(what.find("carrier-pigeon"), std::string::npos) << what;
}

TEST(Config, OneBadVariableIsEnoughEvenWithGoodOthers) {
  env_guard a("APGAS_NTHREADS", "2");
  const std::string what = rejection("APGAS_STACK_SIZE", "tiny");
  EXPECT_NE(what.find("APGAS_STACK_SIZE"), std::string::npos) << what;
}

TEST(Config, ValidateChecksEveryField) {
  apgas::config c;
  EXPECT_NO_THROW(c.validate());
  c.nthreads = -1;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.nthreads = apgas::config::max_threads + 1;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.nthreads = apgas::config::max_threads;
  EXPECT_NO_THROW(c.validate());
  c.nthreads = 0;  // the hardware concurrency
  EXPECT_NO_THROW(c.validate());
  c.stack_size = apgas::config::min_stack_size - 1;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.stack_size = apgas::config::min_stack_size;
  EXPECT_NO_THROW(c.validate());
  c.stack_size = apgas::config::max_stack_size;
  EXPECT_NO_THROW(c.validate());
  c.stack_size = apgas::config::max_stack_size + 1;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.stack_size = 0;
  EXPECT_THROW(c.validate(), apgas::config_error);
  // config_error is an apgas::error.
  EXPECT_THROW(c.validate(), apgas::error);
}

TEST(Config, RunRefusesABadThreadCountWithoutRunningMain) {
  for (const char* bad : {"lots", "0", "-1", ""}) {
    env_guard g("APGAS_NTHREADS", bad);
    bool ran = false;
    testing::internal::CaptureStderr();
    const int rc = apgas::run(0, nullptr, [&] { ran = true; });
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << "APGAS_NTHREADS='" << bad << "'";
    EXPECT_FALSE(ran) << "APGAS_NTHREADS='" << bad << "'";
    EXPECT_NE(err.find("APGAS_NTHREADS"), std::string::npos) << err;
    EXPECT_NE(err.find(bad), std::string::npos) << err;
  }
}

TEST(Config, RunRefusesABadStackSizeWithoutRunningMain) {
  env_guard g("APGAS_STACK_SIZE", "5G");
  bool ran = false;
  char arg0[] = "test";
  char* argv[] = {arg0, nullptr};
  testing::internal::CaptureStderr();
  const int rc = apgas::run(1, argv, [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  EXPECT_NE(err.find("APGAS_STACK_SIZE"), std::string::npos) << err;
  EXPECT_NE(err.find("5G"), std::string::npos) << err;
}

TEST(Config, RunWithAnInvalidConfigStructReturns2) {
  bool ran = false;
  apgas::config c;
  c.stack_size = 1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(c, [&] { ran = true; }), 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stack_size"), std::string::npos) << err;
  c = apgas::config{};
  c.nthreads = -3;
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(c, [&] { ran = true; }), 2);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("nthreads"), std::string::npos) << err;
  EXPECT_FALSE(ran);
}

TEST(Config, EnvironmentValuesAreUsedByRun) {
  env_guard g("APGAS_NTHREADS", "3");
  env_guard s("APGAS_STACK_SIZE", "1M");
  int workers = 0;
  long result = -1;
  EXPECT_EQ(apgas::run(0, nullptr, [&] {
              workers = apgas::num_workers();
              // About 600 KiB of frames: more than the default 256 KiB stack, within the 1 MiB asked for.
              apgas::finish([&] { apgas::async([&] { result = deep(600); }); });
            }),
            0);
  EXPECT_EQ(workers, 3);
  EXPECT_EQ(result, 600L * 601L / 2);
}

TEST(Config, ZeroThreadsMeansTheHardwareConcurrency) {
  apgas::config c;
  c.nthreads = 0;
  int workers = 0;
  ASSERT_EQ(apgas::run(c, [&] { workers = apgas::num_workers(); }), 0);
  const unsigned hc = std::thread::hardware_concurrency();
  EXPECT_EQ(workers, hc == 0 ? 1 : static_cast<int>(hc));
}
