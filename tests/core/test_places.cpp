#include "support/run.hpp"

using apgas_test::run_on;

TEST(Places, TreeOfOneHost) {
  run_on(2, [] {
    EXPECT_EQ(apgas::here(), apgas::place_of(0));
    EXPECT_EQ(apgas::here().id(), 0);
    ASSERT_EQ(apgas::places().size(), 1u);
    EXPECT_EQ(apgas::all_places().size(), 1u);
    EXPECT_EQ(apgas::num_hosts(), 1);
    const apgas::place p = apgas::places()[0];
    EXPECT_TRUE(p.is_host());
    EXPECT_FALSE(p.is_cuda());
    EXPECT_EQ(p.parent(), p);
    EXPECT_TRUE(p.children().empty());
  });
}

TEST(Places, BadIdsNameTheId) {
  run_on(1, [] {
    for (int id : {-1, 1, 7, 1 << 30}) {
      try {
        (void)apgas::place_of(id);
        ADD_FAILURE() << "place_of(" << id << ") did not throw";
      } catch (const apgas::bad_place_exception& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(id)), std::string::npos) << e.what();
      }
    }
    EXPECT_THROW(apgas::async_at(apgas::place(5), [] {}), apgas::bad_place_exception);
    EXPECT_THROW(apgas::at(apgas::place(-3), [] { return 1; }), apgas::bad_place_exception);
    EXPECT_THROW(apgas::async_at(apgas::place(), [] {}), apgas::bad_place_exception);
  });
}

TEST(Places, InvalidPlaceValue) {
  const apgas::place p;
  EXPECT_EQ(p.id(), -1);
  EXPECT_FALSE(p.is_host());
  EXPECT_FALSE(p.is_cuda());
  EXPECT_TRUE(p.children().empty());
}

TEST(Places, OutsideRunIsIllegal) {
  EXPECT_THROW((void)apgas::here(), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::async([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::finish([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW(apgas::atomic([] {}), apgas::illegal_operation_exception);
  EXPECT_THROW((void)apgas::clock::make(), apgas::illegal_operation_exception);
  EXPECT_EQ(apgas::worker_index(), -1);
  EXPECT_EQ(apgas::num_workers(), 0);
}

TEST(Places, WorkersAndIndex) {
  for (int n : apgas_test::worker_counts) {
    run_on(n, [n] {
      EXPECT_EQ(apgas::num_workers(), n);
      std::atomic<int> bad{0};
      apgas::finish([&] {
        for (int i = 0; i < 1000; ++i) {
          apgas::async([&] {
            const int w = apgas::worker_index();
            if (w < 0 || w >= n) bad++;
          });
        }
      });
      EXPECT_EQ(bad.load(), 0);
    });
  }
}

TEST(Places, RunsFollowEachOtherAndCannotNest) {
  for (int i = 0; i < 5; ++i) run_on(2, [] { EXPECT_EQ(apgas::here().id(), 0); });
  run_on(1, [] {
    apgas::config cfg;
    EXPECT_THROW(apgas::run(cfg, [] {}), apgas::illegal_operation_exception);
  });
}

TEST(Places, RunReportsUncaughtExceptions) {
  apgas::config cfg;
  cfg.nthreads = 2;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [] {
    apgas::async([] { throw std::runtime_error("first failure"); });
    apgas::async([] { throw std::logic_error("second failure"); });
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("2 uncaught exceptions"), std::string::npos) << err;
  EXPECT_NE(err.find("first failure"), std::string::npos) << err;
  EXPECT_NE(err.find("second failure"), std::string::npos) << err;
}
