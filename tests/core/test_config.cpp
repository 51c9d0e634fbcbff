// Configuration: apgas::config::from_env(), config::validate(), and how apgas::run reacts to a bad configuration.
// Each test sets the variables it needs and unsets them when it ends (env_guard), so tests do not leak into
// each other.
#include "support/run.hpp"

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
  env_guard d("APGAS_GPUS");
  env_guard e("APGAS_CUDA_DMA_SLICE");
  const apgas::config cfg = apgas::config::from_env();
  EXPECT_EQ(cfg.nthreads, 0);
  EXPECT_EQ(cfg.stack_size, apgas::config::default_stack_size);
  EXPECT_EQ(apgas::config::default_stack_size, 256u * 1024u);
  EXPECT_EQ(cfg.gpus, "auto");  // this process's share of its node's GPUs
  EXPECT_FALSE(cfg.all_gpus());
  EXPECT_TRUE(cfg.gpu_list().empty());
  EXPECT_EQ(cfg.cuda_dma_slice, apgas::config::default_dma_slice);
  EXPECT_EQ(apgas::config::default_dma_slice, std::size_t{4} << 20);
  const apgas::config plain;
  EXPECT_EQ(plain.nthreads, 0);
  EXPECT_EQ(plain.stack_size, apgas::config::default_stack_size);
  EXPECT_EQ(plain.gpus, "auto");
  EXPECT_EQ(plain.cuda_dma_slice, apgas::config::default_dma_slice);
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
                             {"64K", apgas::config::min_stack_size},  // the bounds are accepted
                             {"65536", apgas::config::min_stack_size},
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
  for (const char* bad : {"0", "abc", "", "5G", "2G", "1025M", "1k", "1K", "16383", "15K", "16K", "63K", "65535", "-256K", "12Q", "K", "1MB",
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

TEST(Config, KernelCheckIsZeroOrOne) {
  for (const char* bad : {"yes", "2", "", "on"}) {
    const std::string what = rejection("APGAS_KERNEL_CHECK", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_KERNEL_CHECK='" << bad << "' was accepted";
    EXPECT_NE(what.find("APGAS_KERNEL_CHECK='" + std::string(bad) + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("0 (off) or 1 (on)"), std::string::npos) << what;
  }
  {
    env_guard g("APGAS_KERNEL_CHECK", "1");
    EXPECT_TRUE(apgas::config::from_env().kernel_check);
  }
  {
    env_guard g("APGAS_KERNEL_CHECK", "0");
    EXPECT_FALSE(apgas::config::from_env().kernel_check);
  }
  EXPECT_FALSE(apgas::config{}.kernel_check);
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

// ---- GPU configuration: APGAS_GPUS, APGAS_CUDA_DMA_SLICE and their config fields ----

TEST(Config, ValidGpuSelections) {
  struct accepted {
    const char* text;
    std::vector<int> list;
    bool all;
  };
  for (const auto& [text, list, all] : {accepted{"auto", {}, false}, accepted{"all", {}, true},
                                       accepted{"none", {}, false},
                                       accepted{"0", {0}, false}, accepted{"0,2", {0, 2}, false},
                                       accepted{"3,1", {3, 1}, false},  // the order is kept: it is the place order
                                       accepted{"1023", {1023}, false}, accepted{"7,0,5", {7, 0, 5}, false}}) {
    env_guard g("APGAS_GPUS", text);
    apgas::config cfg;
    ASSERT_NO_THROW(cfg = apgas::config::from_env()) << "APGAS_GPUS='" << text << "'";
    EXPECT_EQ(cfg.gpus, text);
    EXPECT_EQ(cfg.gpu_list(), list) << "APGAS_GPUS='" << text << "'";
    EXPECT_EQ(cfg.all_gpus(), all) << "APGAS_GPUS='" << text << "'";
    EXPECT_NO_THROW(cfg.validate()) << "APGAS_GPUS='" << text << "'";
  }
}

TEST(Config, InvalidGpuSelectionsNameTheVariableAndTheValue) {
  for (const char* bad : {"", "x", "-1", "0,0", "1024", "0,,1", "0,", " 1", ",0", "1 ", "ALL", "AUTO", "0;1", "2,1,2",
                          "99999999999999999999", "0x1", "+1"}) {
    const std::string what = rejection("APGAS_GPUS", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_GPUS='" << bad << "' was accepted";
    EXPECT_NE(what.find(std::string("APGAS_GPUS='") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("1023"), std::string::npos) << "the message should give the range: " << what;
  }
  // A repeated ordinal says so (the generic "expected" text alone hid it).
  for (const char* twice : {"0,0", "2,1,2"}) {
    const std::string what = rejection("APGAS_GPUS", twice);
    EXPECT_NE(what.find("is listed twice"), std::string::npos) << what;
  }
  EXPECT_NE(rejection("APGAS_GPUS", "0,x").find("'x' is not a GPU ordinal"), std::string::npos);
}

TEST(Config, ValidDmaSlices) {
  for (auto [text, bytes] : {std::pair{"64K", std::size_t{64} << 10},  // the lower bound
                             {"4M", std::size_t{4} << 20},
                             {"256M", std::size_t{256} << 20},  // the upper bound
                             {"1048576", std::size_t{1} << 20},
                             {"65536", std::size_t{64} << 10},
                             {"68K", std::size_t{68} << 10}}) {  // any multiple of 4 KiB in range
    env_guard g("APGAS_CUDA_DMA_SLICE", text);
    apgas::config cfg;
    ASSERT_NO_THROW(cfg = apgas::config::from_env()) << "APGAS_CUDA_DMA_SLICE='" << text << "'";
    EXPECT_EQ(cfg.cuda_dma_slice, bytes) << "APGAS_CUDA_DMA_SLICE='" << text << "'";
    EXPECT_NO_THROW(cfg.validate());
  }
}

TEST(Config, InvalidDmaSlicesNameTheVariableAndTheValue) {
  for (const char* bad : {"0", "1000", "65537", "512M", "abc", "4096", "", "60K", "257M", "1G", "66K", "-64K", "4MB",
                          "64 K", "268439552"}) {
    const std::string what = rejection("APGAS_CUDA_DMA_SLICE", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_CUDA_DMA_SLICE='" << bad << "' was accepted";
    EXPECT_NE(what.find(std::string("APGAS_CUDA_DMA_SLICE='") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("4096"), std::string::npos) << "the message should say multiple of 4096: " << what;
    EXPECT_NE(what.find(std::to_string(apgas::config::min_dma_slice)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(apgas::config::max_dma_slice)), std::string::npos) << what;
  }
}

TEST(Config, DirectCopySizes) {
  EXPECT_EQ(apgas::config{}.cuda_direct_copy, apgas::config::default_direct_copy);
  for (auto [text, bytes] : {std::pair{"0", std::size_t{0}},  // every pageable copy through the spooler
                             {"1M", std::size_t{1} << 20},
                             {"1000", std::size_t{1000}},  // any byte count
                             {"256M", apgas::config::max_dma_slice}}) {
    env_guard g("APGAS_CUDA_DIRECT_COPY", text);
    apgas::config cfg;
    ASSERT_NO_THROW(cfg = apgas::config::from_env()) << "APGAS_CUDA_DIRECT_COPY='" << text << "'";
    EXPECT_EQ(cfg.cuda_direct_copy, bytes) << "APGAS_CUDA_DIRECT_COPY='" << text << "'";
    EXPECT_NO_THROW(cfg.validate());
  }
  for (const char* bad : {"257M", "1G", "abc", "", "-1", "4MB"}) {
    const std::string what = rejection("APGAS_CUDA_DIRECT_COPY", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_CUDA_DIRECT_COPY='" << bad << "' was accepted";
    EXPECT_NE(what.find(std::string("APGAS_CUDA_DIRECT_COPY='") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(apgas::config::max_dma_slice)), std::string::npos) << what;
  }
  apgas::config c;
  c.cuda_direct_copy = apgas::config::max_dma_slice + 1;
  try {
    c.validate();
    ADD_FAILURE() << "cuda_direct_copy beyond the limit was accepted";
  } catch (const apgas::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_direct_copy=" + std::to_string(apgas::config::max_dma_slice + 1)),
              std::string::npos)
        << e.what();
  }
}

TEST(Config, ValidateChecksTheGpuFields) {
  apgas::config c;
  for (const char* good : {"auto", "all", "none", "0", "0,2", "3,1"}) {
    c.gpus = good;
    EXPECT_NO_THROW(c.validate()) << "gpus='" << good << "'";
  }
  for (const char* bad : {"", "x", "-1", "0,0", "1024", "0,,1", "0,", " 1"}) {
    c.gpus = bad;
    try {
      c.validate();
      ADD_FAILURE() << "gpus='" << bad << "' was accepted";
    } catch (const apgas::config_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("gpus"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    }
    EXPECT_THROW((void)c.gpu_list(), apgas::config_error) << "gpus='" << bad << "'";
  }
  c = apgas::config{};
  for (std::size_t good : {apgas::config::min_dma_slice, apgas::config::max_dma_slice, std::size_t{1} << 20,
                           apgas::config::min_dma_slice + 4096}) {
    c.cuda_dma_slice = good;
    EXPECT_NO_THROW(c.validate()) << good;
  }
  for (std::size_t bad : {std::size_t{0}, std::size_t{1000}, std::size_t{4096}, apgas::config::min_dma_slice - 4096,
                          apgas::config::min_dma_slice + 1, apgas::config::max_dma_slice + 4096,
                          std::size_t{512} << 20}) {
    c.cuda_dma_slice = bad;
    try {
      c.validate();
      ADD_FAILURE() << "cuda_dma_slice=" << bad << " was accepted";
    } catch (const apgas::config_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("cuda_dma_slice=" + std::to_string(bad)), std::string::npos) << what;
    }
  }
}

// The number of GPU places a default run sees on this machine (0 without a GPU or without CUDA in the build).
int gpu_places_here() {
  int gpus = -1;
  apgas::config c;
  c.nthreads = 1;
  EXPECT_EQ(apgas::run(c, [&] { gpus = static_cast<int>(apgas::all_places().size()) - apgas::num_hosts(); }), 0);
  return gpus;
}

TEST(Config, RunWithAGpuThisHostDoesNotHaveReturns2AndNamesApgasGpus) {
  const int have = gpu_places_here();
  ASSERT_GE(have, 0);
  std::vector<std::string> missing{"1023"};  // no machine has 1024 GPUs
  if (have <= 7) missing.push_back("7");     // the no-GPU machines this was written on: "7" never exists
  missing.push_back(std::to_string(have));  // one past the last existing ordinal
  for (const std::string& gpus : missing) {
    apgas::config c;
    c.nthreads = 1;
    c.gpus = gpus;
    bool ran = false;
    testing::internal::CaptureStderr();
    const int rc = apgas::run(c, [&] { ran = true; });
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << "gpus='" << gpus << "': " << err;
    EXPECT_FALSE(ran) << "gpus='" << gpus << "'";
    EXPECT_NE(err.find("APGAS_GPUS='" + gpus + "'"), std::string::npos) << err;
  }
  // The same through the environment.
  {
    env_guard g("APGAS_GPUS", "1023");
    env_guard t("APGAS_NTHREADS", "1");
    bool ran = false;
    testing::internal::CaptureStderr();
    const int rc = apgas::run(0, nullptr, [&] { ran = true; });
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << err;
    EXPECT_FALSE(ran);
    EXPECT_NE(err.find("APGAS_GPUS='1023'"), std::string::npos) << err;
  }
  // A refused start-up leaves nothing behind: the next run works, and "none" gives host places only.
  apgas::config c;
  c.nthreads = 2;
  c.gpus = "none";
  int places = -1;
  EXPECT_EQ(apgas::run(c, [&] { places = static_cast<int>(apgas::all_places().size()); }), 0);
  EXPECT_EQ(places, 1);
  EXPECT_EQ(gpu_places_here(), have);
}

TEST(Config, RunRefusesBadGpuVariablesWithoutRunningMain) {
  for (auto [var, bad] : {std::pair{"APGAS_GPUS", "0,0"}, {"APGAS_GPUS", "x"}, {"APGAS_CUDA_DMA_SLICE", "1000"},
                          {"APGAS_CUDA_DMA_SLICE", "512M"}}) {
    env_guard g(var, bad);
    bool ran = false;
    testing::internal::CaptureStderr();
    const int rc = apgas::run(0, nullptr, [&] { ran = true; });
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << var << "='" << bad << "'";
    EXPECT_FALSE(ran) << var << "='" << bad << "'";
    EXPECT_NE(err.find(std::string(var) + "='" + bad + "'"), std::string::npos) << err;
  }
  // And the config fields, through run(cfg).
  apgas::config c;
  c.gpus = "0,,1";
  bool ran = false;
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(c, [&] { ran = true; }), 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("gpus='0,,1'"), std::string::npos) << err;
  c = apgas::config{};
  c.cuda_dma_slice = 1000;
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(c, [&] { ran = true; }), 2);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cuda_dma_slice=1000"), std::string::npos) << err;
  EXPECT_FALSE(ran);
}

// ---- the failure detector: APGAS_HEARTBEAT_TIMEOUT ----
TEST(Config, HeartbeatTimeouts) {
  EXPECT_EQ(apgas::config().heartbeat_timeout_s, 5);  // the default
  for (auto [text, n] : {std::pair{"0", 0}, {"1", 1}, {"5", 5}, {"3600", 3600}}) {
    env_guard g("APGAS_HEARTBEAT_TIMEOUT", text);
    EXPECT_EQ(apgas::config::from_env().heartbeat_timeout_s, n) << "APGAS_HEARTBEAT_TIMEOUT='" << text << "'";
  }
  for (const char* bad : {"-1", "3601", "abc", "", "5s", "1.5"}) {
    const std::string what = rejection("APGAS_HEARTBEAT_TIMEOUT", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_HEARTBEAT_TIMEOUT='" << bad << "' was accepted";
    EXPECT_NE(what.find("3600"), std::string::npos) << what;
  }
  apgas::config c;
  c.heartbeat_timeout_s = -1;
  EXPECT_THROW(c.validate(), apgas::config_error);
}

// ---- large messages: APGAS_MESSAGE_PIECE ----
TEST(Config, MessagePieces) {
  EXPECT_EQ(apgas::config().message_piece, 0u);  // the default: the transport's limit
  for (auto [text, n] : {std::pair{"0", std::size_t{0}}, {"64K", std::size_t{64} << 10}, {"65536", std::size_t{65536}},
                         {"16M", std::size_t{16} << 20}, {"1G", std::size_t{1} << 30}}) {
    env_guard g("APGAS_MESSAGE_PIECE", text);
    EXPECT_EQ(apgas::config::from_env().message_piece, n) << "APGAS_MESSAGE_PIECE='" << text << "'";
  }
  for (const char* bad : {"1K", "65535", "2G", "abc", "", "-64K", "1.5M"}) {
    const std::string what = rejection("APGAS_MESSAGE_PIECE", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_MESSAGE_PIECE='" << bad << "' was accepted";
    EXPECT_NE(what.find("65536 to 1073741824"), std::string::npos) << what;
  }
  apgas::config c;
  c.message_piece = 1000;
  EXPECT_THROW(c.validate(), apgas::config_error);
}
