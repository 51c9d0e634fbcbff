// Kernels and copies on real GPU places (label gpu). Compiled by nvcc (apgas_add_cuda_sources); every test skips,
// saying why, where this host has no GPU place. Each kernel form is checked against the same closure run on the host
// place (integers bit-identical, floats within a tolerance).
#include "gpu/gpu_support.hpp"
#include "support/run.hpp"

#include <apgas/apgas.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using apgas_test::fetch;
using apgas_test::gpu;
using apgas_test::run_on;

namespace {

// Run the same kernel closure at GPU place g and at the host, into arrays of n elements at each; return both.
template <class T, class MakeKernel>
std::pair<std::vector<T>, std::vector<T>> both(std::size_t n, MakeKernel make) {
  std::pair<std::vector<T>, std::vector<T>> out;
  for (int side = 0; side < 2; ++side) {
    const apgas::place p = side == 0 ? gpu() : apgas::here();
    apgas::remote_array<T> a = apgas::make_remote_array<T>(p, n);
    apgas::at(p, make(a));
    (side == 0 ? out.first : out.second) = fetch(a);
    apgas::free_remote_array(a);
  }
  return out;
}

}  // namespace

// (Kernel bodies live in free functions: nvcc refuses extended lambdas inside gtest's private TestBody.)
void plain_kernel_matches_the_cpu_place() {
  run_on(2, [] {
    constexpr std::size_t n = 100'003;
    auto [g, c] = both<std::int64_t>(n, [](apgas::remote_array<std::int64_t> a) {
      return apgas::cuda_kernel(apgas::grid{40, 96}, [=] APGAS_KERNEL(apgas::thread t) {
        std::int64_t* d = a.data();
        for (long i = t.global_id(); i < static_cast<long>(a.size()); i += t.global_count()) d[i] = i * i % 1'000'003 + 7;
      });
    });
    EXPECT_EQ(g, c);
    EXPECT_EQ(g[5], 5 * 5 + 7);
  });
}

TEST(Gpu, PlainKernelMatchesTheCpuPlace) {
  REQUIRE_GPU(1);
  plain_kernel_matches_the_cpu_place();
}

void clocked_tree_reduction_matches_the_cpu_place() {
  run_on(2, [] {
    constexpr int blocks = 24;
    constexpr int threads = 256;
    constexpr long n = 3'000'017;
    auto [g, c] = both<long long>(blocks, [](apgas::remote_array<long long> out) {
      return apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared<long long>(threads),
                                [=] APGAS_KERNEL(apgas::clocked_thread t, std::span<long long> sh) {
                                  long long s = 0;
                                  for (long i = t.global_id(); i < n; i += t.global_count()) s += i % 977;
                                  sh[t.thread()] = s;
                                  t.advance();
                                  for (int stride = t.threads() / 2; stride > 0; stride /= 2) {
                                    if (t.thread() < stride) sh[t.thread()] += sh[t.thread() + stride];
                                    t.advance();
                                  }
                                  if (t.thread() == 0) out.data()[t.block()] = sh[0];
                                });
    });
    EXPECT_EQ(g, c);
    long long expected = 0;
    for (long i = 0; i < n; ++i) expected += i % 977;
    EXPECT_EQ(std::accumulate(g.begin(), g.end(), 0LL), expected);
  });
}

TEST(Gpu, ClockedTreeReductionMatchesTheCpuPlace) {
  REQUIRE_GPU(1);
  clocked_tree_reduction_matches_the_cpu_place();
}

void every_resource_kind_matches_the_cpu_place() {
  run_on(2, [] {
    std::vector<float> table(300);
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = 0.5f * static_cast<float>(i);
    std::vector<int> coef = {3, 5, 7, 11};
    std::vector<double> weights(1000, 0.25);
    constexpr std::size_t n = 50'000;
    auto [g, c] = both<double>(n, [&](apgas::remote_array<double> a) {
      return apgas::cuda_kernel(
          apgas::grid{17, 64}, apgas::shared_from(std::span{table}), apgas::shared<int>(64, 2),
          apgas::constant_from(std::span{coef}), apgas::global_from(std::span{weights}),
          [=] APGAS_KERNEL(apgas::clocked_thread t, std::span<float> tab, std::span<int> twos, std::span<const int> k,
                           std::span<double> w) {
            double* d = a.data();
            for (long i = t.global_id(); i < static_cast<long>(n); i += t.global_count()) {
              d[i] = tab[i % tab.size()] * k[i % k.size()] + twos[t.thread()] + w[i % w.size()];
            }
            t.advance();
          });
    });
    ASSERT_EQ(g.size(), c.size());
    for (std::size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], c[i], 1e-9 * std::abs(c[i]) + 1e-12) << i;
    EXPECT_DOUBLE_EQ(c[1], 0.5 * 5 + 2 + 0.25);
  });
}

TEST(Gpu, EveryResourceKindMatchesTheCpuPlace) {
  REQUIRE_GPU(1);
  every_resource_kind_matches_the_cpu_place();
}

// A kernel whose body captures a table of N ints: N * 4 bytes of kernel parameters, or spilled to device memory
// beyond the parameter space.
template <std::size_t N>
void table_body_matches_the_cpu_place(std::size_t n, int step) {
  std::array<int, N> table{};
  for (std::size_t i = 0; i < N; ++i) table[i] = static_cast<int>(i) * step;
  auto [g, c] = both<int>(n, [table](apgas::remote_array<int> a) {
    return apgas::cuda_kernel(apgas::grid{8, 128}, [=] APGAS_KERNEL(apgas::thread t) {
      for (long i = t.global_id(); i < static_cast<long>(a.size()); i += t.global_count()) a.data()[i] = table[i % N];
    });
  });
  EXPECT_EQ(g, c);
  EXPECT_EQ(g[n - 1], static_cast<int>((n - 1) % N) * step);
}

void auto_grid_and_large_shared_memory_and_spilled_body() {
  run_on(2, [] {
    // auto_grid: occupancy-based on the GPU, one block per worker on the CPU place; grid-stride loops give the same.
    constexpr std::size_t n = 1 << 20;
    auto [g1, c1] = both<int>(n, [](apgas::remote_array<int> a) {
      return apgas::cuda_kernel(apgas::auto_grid(), [=] APGAS_KERNEL(apgas::thread t) {
        for (long i = t.global_id(); i < static_cast<long>(a.size()); i += t.global_count()) a.data()[i] = int(i ^ 0x55);
      });
    });
    EXPECT_EQ(g1, c1);
    // 100 KiB of dynamic shared memory: above 48 KiB, so the function must opt in.
    auto [g2, c2] = both<int>(64, [](apgas::remote_array<int> a) {
      return apgas::cuda_kernel(apgas::grid{64, 128}, apgas::shared<int>(25'600, 1),
                                [=] APGAS_KERNEL(apgas::clocked_thread t, std::span<int> big) {
                                  if (t.thread() == 0) {
                                    int s = 0;
                                    for (int v : big) s += v;
                                    a.data()[t.block()] = s;
                                  }
                                });
    });
    EXPECT_EQ(g2, c2);
    EXPECT_EQ(g2[0], 25'600);
  });
  // A body of 8 KiB of captures: passed as kernel parameters (up to 32764 bytes since CUDA 12.1); one of 48 KiB:
  // more than that, so it is spilled to device memory. nvcc's host-side wrapper of an extended lambda copies the
  // captures about four times on the stack of the function that makes it (seen: a 196 KiB frame for 48 KiB of
  // captures, beyond the default 256 KiB fiber stack with the test's own copies; docs/porting.md §3), so this run
  // has 1 MiB stacks.
  run_on(
      2,
      [] {
        table_body_matches_the_cpu_place<2048>(4096, 3);
        table_body_matches_the_cpu_place<12288>(20000, 7);
      },
      std::size_t{1} << 20);
}

TEST(Gpu, AutoGridAndLargeSharedMemoryAndSpilledBody) {
  REQUIRE_GPU(1);
  auto_grid_and_large_shared_memory_and_spilled_body();
}

void launch_beyond_the_limits_is_an_error_and_the_place_stays_usable() {
  run_on(2, [] {
    apgas::remote_array<int> a = apgas::make_remote_array<int>(gpu(), 16);
    auto body = [=] APGAS_KERNEL(apgas::thread t) {
      if (t.global_id() < 16) a.data()[t.global_id()] = 1;
    };
    std::string w = apgas_test::what_of<apgas::kernel_launch_error>(
        [&] { apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{1, 4096}, body)); });
    EXPECT_NE(w.find("4096 threads per block"), std::string::npos) << w;
    w = apgas_test::what_of<apgas::kernel_launch_error>(
        [&] { apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{0, 32}, body)); });
    EXPECT_NE(w.find("0 blocks"), std::string::npos) << w;
    w = apgas_test::what_of<apgas::kernel_launch_error>([&] {
      apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<char>(std::size_t{1} << 20),
                                          [=] APGAS_KERNEL(apgas::thread, std::span<char>) {}));
    });
    EXPECT_NE(w.find("1048576 B exceeds"), std::string::npos) << w;
    // The place still works.
    apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{1, 32}, body));
    EXPECT_EQ(fetch(a), std::vector<int>(16, 1));
    apgas::free_remote_array(a);
  });
}

TEST(Gpu, LaunchBeyondTheLimitsIsAnErrorAndThePlaceStaysUsable) {
  REQUIRE_GPU(1);
  launch_beyond_the_limits_is_an_error_and_the_place_stays_usable();
}

void copies_from_one_byte_to_one_gibibyte_both_ways() {
  run_on(4, [] {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{1} << 20, (std::size_t{5} << 20) + 3,
                              std::size_t{64} << 20, std::size_t{1} << 30}) {
      for (bool pinned : {false, true}) {
        // (not SCOPED_TRACE: its stack is per thread, and this activity resumes on another worker after a finish)
        const std::string what = std::to_string(bytes) + (pinned ? " B pinned" : " B pageable");
        apgas::remote_array<std::uint8_t> a = apgas::make_remote_array<std::uint8_t>(gpu(), bytes);
        std::vector<std::uint8_t> pageable;
        apgas::pinned_vector<std::uint8_t> locked;
        std::span<std::uint8_t> src;
        if (pinned) {
          locked.resize(bytes);
          src = locked;
          EXPECT_TRUE(apgas::is_pinned(src.data(), bytes)) << what;
        } else {
          pageable.resize(bytes);
          src = pageable;
        }
        for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<std::uint8_t>(i * 131 + bytes);
        apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
        // Back into memory of the same kind: pinned (one DMA) or pageable (the spooler).
        std::vector<std::uint8_t> back_pageable;
        apgas::pinned_vector<std::uint8_t> back_locked;
        std::span<std::uint8_t> back;
        if (pinned) {
          back_locked.assign(bytes, 0);
          back = back_locked;
        } else {
          back_pageable.assign(bytes, 0);
          back = back_pageable;
        }
        apgas::finish([&] { apgas::async_copy(a, 0, back); });
        EXPECT_TRUE(std::equal(back.begin(), back.end(), src.begin())) << what;
        apgas::free_remote_array(a);
      }
    }
  });
}

TEST(Gpu, CopiesFromOneByteToOneGibibyteBothWays) {
  REQUIRE_GPU(1);
  copies_from_one_byte_to_one_gibibyte_both_ways();
}

void copies_between_gpus() {
  run_on(2, [] {
    constexpr std::size_t n = (std::size_t{8} << 20) + 5;
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), 1);
    auto a = apgas::make_remote_array(gpu(0), std::span<const int>(v));
    auto b = apgas::make_remote_array<int>(gpu(1), n);
    apgas::finish([&] { apgas::async_copy(a, 0, b, 0, n); });
    EXPECT_EQ(fetch(b), v);
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
  });
}

TEST(Gpu, CopiesBetweenGpus) {
  REQUIRE_GPU(2);
  copies_between_gpus();
}

// Runs as its own ctest entry (apgas.gpu.dead_place): a faulting kernel poisons the GPU's context for the rest of
// the process.
void a_faulting_kernel_kills_the_place() {
  run_on(2, [] {
    const apgas::place g = gpu();
    auto* wild = reinterpret_cast<int*>(std::uintptr_t{0x10});
    try {
      apgas::finish([&] {
        apgas::async_at(g, apgas::cuda_kernel(apgas::grid{1, 1}, [=] APGAS_KERNEL(apgas::thread) { *wild = 1; }));
      });
      ADD_FAILURE() << "the faulting kernel was not reported";
    } catch (const apgas::multiple_exceptions& m) {
      ASSERT_EQ(m.size(), 1u);
      auto dead = m.of_type<apgas::dead_place_exception>();
      ASSERT_EQ(dead.size(), 1u);
      EXPECT_EQ(dead[0]->where(), g.id());
    }
    const std::string w = apgas_test::what_of<apgas::dead_place_exception>([&] {
      apgas::async_at(g, apgas::cuda_kernel(apgas::grid{1, 1}, [=] APGAS_KERNEL(apgas::thread) {}));
    });
    EXPECT_NE(w.find("is dead"), std::string::npos) << w;
    apgas_test::what_of<apgas::dead_place_exception>([&] { (void)apgas::make_remote_array<int>(g, 4); });
  });
}

TEST(GpuDeadPlace, AFaultingKernelKillsThePlace) {
  REQUIRE_GPU(1);
  a_faulting_kernel_kills_the_place();
}
