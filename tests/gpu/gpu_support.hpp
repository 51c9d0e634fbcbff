#pragma once
// What the tests on real GPU places share (test_gpu.cpp, test_gpu_review.cpp): how many GPU places this host has
// (and why none), skipping without enough of them, the i-th GPU place, an array's contents.
#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

namespace apgas_test {

struct gpu_info {
  int count = 0;
  std::string host;  ///< describe() of the host place: says why there are no GPU places
};

/// GPU places of this host (all of its GPUs: APGAS_GPUS=all), from one short run.
inline const gpu_info& gpus() {
  static const gpu_info info = [] {
    gpu_info g;
    apgas::config cfg;
    cfg.gpus = "all";
    const int rc = apgas::run(cfg, [&] {
      g.count = static_cast<int>(apgas::here().children().size());
      g.host = apgas::describe(apgas::here());
    });
    if (rc != 0) g.host = "apgas::run returned " + std::to_string(rc);
    return g;
  }();
  return info;
}

#define REQUIRE_GPU(n)                       \
  if (apgas_test::gpus().count < (n))        \
  GTEST_SKIP() << "needs " << (n) << " GPU place(s); " << apgas_test::gpus().host

inline apgas::place gpu(int i = 0) { return apgas::here().children()[static_cast<std::size_t>(i)]; }

template <class T>
std::vector<T> fetch(apgas::remote_array<T> a) {
  std::vector<T> v(a.size());
  apgas::finish([&] { apgas::async_copy(a, 0, std::span<T>(v)); });
  return v;
}

}  // namespace apgas_test
