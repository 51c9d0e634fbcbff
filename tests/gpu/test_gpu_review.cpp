// The review items that only a GPU can settle (docs/decisions/0010-gpu-hardening.md; the fake driver shows the rest,
// tests/cuda_fake/test_backend_hardening.cpp). Label gpu: every test skips, saying why, where this host has too few
// GPU places. Compiled by nvcc, together with functor_second_file.cpp.
#include "gpu/functor_kernel.hpp"
#include "gpu/gpu_support.hpp"
#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

using apgas_test::fetch;
using apgas_test::gpu;
using apgas_test::run_on;

namespace {

template <class F>
void run_all_gpus(int nthreads, F&& body) {
  apgas::config cfg;
  cfg.nthreads = nthreads;
  cfg.gpus = "all";
  bool finished = false;
  ASSERT_EQ(apgas::run(cfg, [&] {
              body();
              finished = true;
            }),
            0);
  ASSERT_TRUE(finished);
}

template <class F>
F driver_function(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult st{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &st) != cudaSuccess) return nullptr;
  return reinterpret_cast<F>(p);
}

struct alignas(64) line {
  float v[16];
};

}  // namespace

// 15: shared arrays of over-aligned types are aligned on the device (the dynamic shared memory's base is declared
// 128-byte aligned; the offsets are multiples of the alignment).
void shared_arrays_of_over_aligned_types_are_aligned() {
  run_on(2, [] {
    apgas::remote_array<std::uint64_t> out = apgas::make_remote_array<std::uint64_t>(gpu(), 3);
    apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<char>(3), apgas::shared<line>(2),
                                        apgas::shared<double>(5),
                                        [=] APGAS_KERNEL(apgas::thread t, std::span<char> a, std::span<line> b,
                                                         std::span<double> c) {
                                          if (t.thread() == 0) {
                                            out.data()[0] = reinterpret_cast<std::uintptr_t>(a.data()) % 16;
                                            out.data()[1] = reinterpret_cast<std::uintptr_t>(b.data()) % 64;
                                            out.data()[2] = reinterpret_cast<std::uintptr_t>(c.data()) % 8;
                                          }
                                        }));
    EXPECT_EQ(fetch(out), (std::vector<std::uint64_t>{0, 0, 0}));
    apgas::free_remote_array(out);
  });
}

TEST(GpuReview, SharedArraysOfOverAlignedTypesAreAligned) {
  REQUIRE_GPU(1);
  shared_arrays_of_over_aligned_types_are_aligned();
}

// 14 (and the 1 KiB the GPU reserves per block): the most dynamic shared memory apgas's check lets through is what
// the driver launches, and one byte more is refused by the check, not by the driver.
void the_shared_memory_limit_is_exact() {
  run_on(2, [] {
    int optin = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
    apgas::remote_array<int> out = apgas::make_remote_array<int>(gpu(), 1);
    const auto kernel = [=](std::size_t bytes) {
      return apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<char>(bytes, 1),
                                [=] APGAS_KERNEL(apgas::thread t, std::span<char> s) {
                                  if (t.thread() == 0) out.data()[0] = s[s.size() - 1];
                                });
    };
    apgas::at(gpu(), kernel(static_cast<std::size_t>(optin)));
    EXPECT_EQ(fetch(out)[0], 1);
    const std::string w = apgas_test::what_of<apgas::kernel_launch_error>(
        [&] { apgas::at(gpu(), kernel(static_cast<std::size_t>(optin) + 1)); });
    EXPECT_NE(w.find("dynamic shared memory"), std::string::npos) << w;
    apgas::free_remote_array(out);
  });
}

TEST(GpuReview, TheSharedMemoryLimitIsExact) {
  REQUIRE_GPU(1);
  the_shared_memory_limit_is_exact();
}

// 16: the same named functor kernel, with constant data, launched from two nvcc files (this one and
// functor_second_file.cpp), concurrently: each launch reads the constants its own file copied.
void a_functor_kernel_from_two_files_reads_its_own_constants() {
  run_on(4, [] {
    constexpr std::size_t n = 4096;
    auto a = apgas::make_remote_array<float>(gpu(), n);
    auto b = apgas::make_remote_array<float>(gpu(), n);
    for (int round = 0; round < 20; ++round) {
      apgas::finish([&] {
        apgas::async([&] { launch_scaled_here(gpu(), a, 2.0f); });
        apgas::async([&] { launch_scaled_in_second_file(gpu(), b, 3.0f); });
      });
      const std::vector<float> va = fetch(a), vb = fetch(b);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(va[i], 2.0f * static_cast<float>(i)) << "round " << round << ", element " << i;
        ASSERT_EQ(vb[i], 3.0f * static_cast<float>(i)) << "round " << round << ", element " << i;
      }
    }
    apgas::free_remote_array(a);
    apgas::free_remote_array(b);
  });
}

void launch_scaled_here(apgas::place g, apgas::remote_array<float> out, float factor) {
  const std::vector<float> f{factor};
  apgas::async_at(g, apgas::cuda_kernel(apgas::auto_grid(), apgas::constant_from(std::span<const float>(f)),
                                        scale_by_constant{{}, out}));
}

TEST(GpuReview, AFunctorKernelFromTwoFilesReadsItsOwnConstants) {
  REQUIRE_GPU(1);
  a_functor_kernel_from_two_files_reads_its_own_constants();
}

// 6: apgas leaves the thread's CUDA context as it found it (one worker: the activity stays on its thread).
void apgas_leaves_the_threads_context_alone() {
  const auto get_current = driver_function<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent");
  const auto set_current = driver_function<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent");
  ASSERT_NE(get_current, nullptr);
  ASSERT_NE(set_current, nullptr);
  run_all_gpus(1, [&] {
    ASSERT_EQ(set_current(nullptr), CUDA_SUCCESS);
    auto a = apgas::make_remote_array<int>(gpu(), 1000, 3);
    std::vector<int> v(1000);
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(v)); });
    apgas::at(gpu(), apgas::cuda_kernel(apgas::grid{1, 32}, [=] APGAS_KERNEL(apgas::thread t) {
      a.data()[t.thread()] += 1;
    }));
    apgas::free_remote_array(a);
    CUcontext now = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(get_current(&now), CUDA_SUCCESS);
    EXPECT_EQ(now, nullptr) << "an apgas context was left current on the activity's thread";
    // The user's own runtime calls go to the device the user chose.
    ASSERT_EQ(cudaSetDevice(apgas_test::gpus().count - 1), cudaSuccess);
    auto b = apgas::make_remote_array<int>(gpu(0), 10);
    int device = -1;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(device, apgas_test::gpus().count - 1);
    apgas::free_remote_array(b);
  });
}

TEST(GpuReview, ApgasLeavesTheThreadsContextAlone) {
  REQUIRE_GPU(1);
  apgas_leaves_the_threads_context_alone();
}

// 10: remote arrays come from the memory pools, whose access is granted to the peers: a kernel on GPU 1 reads and
// writes an array of GPU 0 directly.
void a_kernel_reads_a_peer_gpus_array() {
  run_all_gpus(2, [] {
    int can = 0;
    ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
    if (can == 0) GTEST_SKIP() << "GPU 1 cannot access GPU 0's memory (no peer access on this machine)";
    constexpr std::size_t n = 1 << 20;
    std::vector<int> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<int>(i % 1000);
    auto far = apgas::make_remote_array(gpu(0), std::span<const int>(v));
    auto near = apgas::make_remote_array<int>(gpu(1), n);
    apgas::at(gpu(1), apgas::cuda_kernel(apgas::auto_grid(), [=] APGAS_KERNEL(apgas::thread t) {
      for (long i = t.global_id(); i < static_cast<long>(n); i += t.global_count()) {
        near.data()[i] = far.data()[i] * 2;
        far.data()[i] += 1;
      }
    }));
    const std::vector<int> got_near = fetch(near), got_far = fetch(far);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_near[i], v[i] * 2) << i;
      ASSERT_EQ(got_far[i], v[i] + 1) << i;
    }
    apgas::free_remote_array(far);
    apgas::free_remote_array(near);
  });
}

TEST(GpuReview, AKernelReadsAPeerGpusArray) {
  REQUIRE_GPU(2);
  a_kernel_reads_a_peer_gpus_array();
}
