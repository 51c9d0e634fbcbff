#include "support/run.hpp"

#include <cstdlib>
#include <string>

namespace {
struct env_guard {
  explicit env_guard(const char* n) : name(n) {}
  ~env_guard() { ::unsetenv(name); }
  const char* name;
};

std::string rejected(const char* var, const char* value) {
  env_guard g(var);
  ::setenv(var, value, 1);
  try {
    (void)apgas::config::from_env();
  } catch (const apgas::config_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, DefaultsWithoutEnvironment) {
  ::unsetenv("APGAS_NTHREADS");
  ::unsetenv("APGAS_STACK_SIZE");
  const apgas::config c = apgas::config::from_env();
  EXPECT_EQ(c.nthreads, 0);
  EXPECT_EQ(c.stack_size, apgas::config::default_stack_size);
}

TEST(Config, ValidValues) {
  {
    env_guard g("APGAS_NTHREADS");
    ::setenv("APGAS_NTHREADS", "4", 1);
    EXPECT_EQ(apgas::config::from_env().nthreads, 4);
  }
  env_guard g("APGAS_STACK_SIZE");
  for (auto [text, bytes] : {std::pair{"65536", 65536ul}, {"256K", 256ul << 10}, {"1M", 1ul << 20}, {"1g", 1ul << 30}}) {
    ::setenv("APGAS_STACK_SIZE", text, 1);
    EXPECT_EQ(apgas::config::from_env().stack_size, bytes) << text;
  }
}

TEST(Config, InvalidThreadCountsNameVariableAndValue) {
  for (const char* bad : {"0", "-1", "abc", "4x", "", " 4", "99999999999", "5000", "18446744073709551617"}) {
    const std::string what = rejected("APGAS_NTHREADS", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_NTHREADS='" << bad << "' was accepted";
    EXPECT_NE(what.find("APGAS_NTHREADS"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("4096"), std::string::npos) << what;  // the limit
  }
}

TEST(Config, InvalidStackSizesNameVariableAndValue) {
  for (const char* bad : {"0", "abc", "5G", "1k", "-256K", "12Q", "K", "99999999999999999999"}) {
    const std::string what = rejected("APGAS_STACK_SIZE", bad);
    ASSERT_FALSE(what.empty()) << "APGAS_STACK_SIZE='" << bad << "' was accepted";
    EXPECT_NE(what.find("APGAS_STACK_SIZE"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
  }
}

TEST(Config, InvalidTransport) {
  const std::string what = rejected("APGAS_TRANSPORT", "carrier-pigeon");
  EXPECT_NE(what.find("APGAS_TRANSPORT"), std::string::npos) << what;
  EXPECT_NE(what.find("carrier-pigeon"), std::string::npos) << what;
}

TEST(Config, ValidateChecksFields) {
  apgas::config c;
  c.nthreads = -2;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.nthreads = 1;
  c.stack_size = 100;
  EXPECT_THROW(c.validate(), apgas::config_error);
  c.stack_size = apgas::config::default_stack_size;
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, RunRefusesBadEnvironmentWithoutRunningMain) {
  env_guard g("APGAS_NTHREADS");
  ::setenv("APGAS_NTHREADS", "lots", 1);
  bool ran = false;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(0, nullptr, [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  EXPECT_NE(err.find("APGAS_NTHREADS='lots'"), std::string::npos) << err;
}

TEST(Config, RunWithBadConfigStruct) {
  apgas::config c;
  c.stack_size = 1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(apgas::run(c, [] {}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stack_size=1"), std::string::npos) << err;
}

TEST(Config, ThreadCountFromEnvironmentIsUsed) {
  env_guard g("APGAS_NTHREADS");
  ::setenv("APGAS_NTHREADS", "3", 1);
  int workers = 0;
  EXPECT_EQ(apgas::run(0, nullptr, [&] { workers = apgas::num_workers(); }), 0);
  EXPECT_EQ(workers, 3);
}
