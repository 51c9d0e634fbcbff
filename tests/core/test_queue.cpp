// In-order queues on a CPU place (apgas/queue.hpp): operations run in issue order, each counted in the finish of
// its issuer, with one finish for a whole sequence; a failed operation stops the ones after it, each of which says
// so; the queue is refused for another host's place and outside an activity.
#include "support/run.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using apgas_test::run_on;

namespace {

class Queue : public testing::TestWithParam<int> {};

// Each kernel maps a[i] -> 3 a[i] + it: the result depends on the order of the 50 launches.
TEST_P(Queue, KernelsAndCopiesRunInIssueOrderUnderOneFinish) {
  run_on(GetParam(), [] {
    constexpr int n = 4096, iterations = 50;
    std::vector<long> host(n, 1), back(n, 0);
    auto a = apgas::make_remote_array<long>(apgas::here(), n);
    apgas::finish([&] {
      auto q = apgas::in_order(apgas::here());
      q.async_copy(std::span<const long>(host), a);
      for (int it = 0; it < iterations; ++it) {
        q.async(apgas::cuda_kernel(apgas::grid{8, 64}, [=](apgas::thread t) {
          long* d = a.data();
          for (long i = t.global_id(); i < n; i += t.global_count()) d[i] = (3 * d[i] + it) % 1000003;
        }));
      }
      q.async_copy(a, 0, std::span<long>(back));
    });
    long expect = 1;
    for (int it = 0; it < iterations; ++it) expect = (3 * expect + it) % 1000003;
    for (long v : back) EXPECT_EQ(v, expect);
    apgas::free_remote_array(a);
  });
}

// Operations issued from two finishes: each finish waits for its own (and the order holds across them).
TEST_P(Queue, EachOperationCountsInTheFinishOfItsIssuer) {
  run_on(GetParam(), [] {
    std::vector<int> log;
    int* l = nullptr;
    log.reserve(16);
    std::vector<int> slot(16, -1);
    l = slot.data();
    int next = 0;
    int* pn = &next;
    auto q = apgas::in_order(apgas::here());
    auto step = [&](int id) {
      return apgas::cuda_kernel(apgas::grid{1, 1}, [=](apgas::thread) { l[(*pn)++] = id; });
    };
    apgas::finish([&] {
      for (int i = 0; i < 4; ++i) q.async(step(i));
    });
    EXPECT_EQ(next, 4);  // the first finish waited for its four
    apgas::finish([&] {
      apgas::async([&] {
        apgas::finish([&] { q.async(step(10)); });
        EXPECT_GE(next, 5);
      });
      q.async(step(11));
    });
    EXPECT_EQ(next, 6);
    EXPECT_EQ(std::vector<int>(slot.begin(), slot.begin() + 4), (std::vector<int>{0, 1, 2, 3}));
  });
}

// A finish waits for the operations its own activities issued, not for those another activity keeps issuing to the
// same queue: here that activity feeds the queue until the inner finish has ended (at most 2000 operations). The
// queue's driver used to be counted in the finish of whoever found the queue idle, so the inner finish ended only
// once the feeder gave up (or never, without the cap).
TEST_P(Queue, AFinishDoesNotWaitForOperationsOfAnotherFinish) {
  run_on(GetParam(), [] {
    auto q = apgas::in_order(apgas::here());
    std::atomic<bool> issued{false}, inner_done{false};
    std::atomic<int> fed{0};
    int ran_mine = 0;
    int* pr = &ran_mine;
    apgas::finish([&] {
      apgas::async([&, q]() mutable {
        while (!issued.load()) std::this_thread::yield();
        while (!inner_done.load() && fed.load() < 2000) {
          q.async(apgas::cuda_kernel(apgas::grid{1, 1}, [](apgas::thread) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }));
          fed++;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      });
      apgas::finish([&] {
        q.async(apgas::cuda_kernel(apgas::grid{1, 1}, [=](apgas::thread) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          *pr = 1;
        }));
        issued = true;
      });
      EXPECT_EQ(ran_mine, 1);
      EXPECT_LT(fed.load(), 2000) << "the inner finish waited for the other activity's operations";
      inner_done = true;
    });
  });
}

TEST_P(Queue, AFailedOperationStopsTheOnesAfterIt) {
  run_on(GetParam(), [] {
    int ran = 0;
    int* r = &ran;
    auto q = apgas::in_order(apgas::here());
    try {
      apgas::finish([&] {
        q.async(apgas::cuda_kernel(apgas::grid{1, 1}, [=](apgas::thread) { ++*r; }));
        q.async(apgas::cuda_kernel(apgas::grid{1, 1}, [](apgas::thread) { throw std::runtime_error("boom"); }));
        for (int i = 0; i < 3; ++i) q.async(apgas::cuda_kernel(apgas::grid{1, 1}, [=](apgas::thread) { ++*r; }));
      });
      FAIL() << "the failure was not reported";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), 2u);  // boom, and one for the operations not run (not one each)
      const auto skipped = m.of_type<apgas::illegal_operation_exception>();
      ASSERT_EQ(skipped.size(), 1u);
      EXPECT_NE(std::string(skipped[0]->what()).find("not run, an earlier operation of the queue failed"),
                std::string::npos)
          << skipped[0]->what();
      EXPECT_NE(std::string(skipped[0]->what()).find("boom"), std::string::npos) << skipped[0]->what();
    }
    EXPECT_EQ(ran, 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, Queue, testing::Values(1, 2));

TEST(QueueRefusals, PlacesOfAnotherHostAndCallersThatAreNoActivity) {
  run_on(2, [] {
    EXPECT_THROW((void)apgas::in_order(apgas::place(7)), apgas::bad_place_exception);
    // from a thread that is no activity (outside a run likewise), naming what is wrong
    std::thread([] {
      try {
        (void)apgas::in_order(apgas::place(0));
        ADD_FAILURE() << "a queue made by a thread that is no activity";
      } catch (const apgas::illegal_operation_exception& e) {
        EXPECT_NE(std::string(e.what()).find("apgas::in_order must be called by an activity (inside apgas::run)"),
                  std::string::npos)
            << e.what();
      }
    }).join();
    auto q = apgas::in_order(apgas::here());
    auto* pq = &q;
    // inside a kernel body an operation cannot be issued (kernels may not spawn)
    try {
      apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, 1}, [pq](apgas::thread) {
        pq->async(apgas::cuda_kernel(apgas::grid{1, 1}, [](apgas::thread) {}));
      }));
      FAIL() << "issuing from a kernel body did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 1u);
    }
  });
}

}  // namespace
