#pragma once
// What the one-host tests of the CUDA backend against the fake driver share (test_backend_fake.cpp,
// test_backend_hardening.cpp): configurations, the FakeGpu fixture that checks what the fake saw, and kernel launch
// requests built by hand.
//
// The accelerator (and with it the GPU's streams and DMA slices) is kept between runs with the same GPU settings
// (apgas/src/gpu.cpp): tests that kill a GPU use a DMA slice size of their own (fresh_gpu_config), so that no other
// test inherits the dead GPU place.
#include "cuda_fake/fake_control.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace apgas_test::fake_gpu {

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * KiB;

/// `direct_copy`: config::cuda_direct_copy. 0 by default here, so that every pageable copy of these tests goes
/// through the spooler, which most of them exercise; the direct path has tests of its own (SmallPageableCopies...).
inline apgas::config gpu_config(std::string gpus = "all", std::size_t slice = apgas::config::default_dma_slice,
                                int nthreads = 2, std::size_t direct_copy = 0) {
  apgas::config cfg;
  cfg.nthreads = nthreads;
  cfg.gpus = std::move(gpus);
  cfg.cuda_dma_slice = slice;
  cfg.cuda_direct_copy = direct_copy;
  return cfg;
}

/// A configuration no other run of this process has used: a fresh accelerator (new streams, an empty event pool, no
/// dead GPU inherited, an empty function cache), for the tests that kill a GPU or need a new accelerator (also under
/// --gtest_repeat).
inline apgas::config fresh_gpu_config(int nthreads = 2) {
  static int n = 0;
  return gpu_config("all", MiB + 4 * KiB * static_cast<std::size_t>(++n), nthreads);
}

/// Run body as the main activity of a run with cfg; the run must return 0 and the body end.
template <class F>
void run_gpu(const apgas::config& cfg, F&& body) {
  bool finished = false;
  const int rc = apgas::run(cfg, [&] {
    body();
    finished = true;
  });
  ASSERT_EQ(rc, 0) << "apgas::run failed (its exceptions are printed above)";
  ASSERT_TRUE(finished);
}

template <class T, class A>
apgas::pinned_vector<T> pinned_copy(const std::vector<T, A>& v) {
  return apgas::pinned_vector<T>(v.begin(), v.end());
}

/// The fake device of a GPU place of this (single) host: places 1.. are devices 0.. in the default configuration.
inline int device_of(apgas::place p) { return p.id() - 1; }

/// First index where a and b differ (or -1): a compact failure message for large buffers.
template <class A, class B>
long long first_difference(const A& a, const B& b) {
  if (a.size() != b.size()) return -2;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long long>(i);
  }
  return -1;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline long long counter(int device, const char* name) { return fake().counter(device, name); }

/// True when the environment variable `name` is `value` (tests that need a process of their own check their ctest
/// entry's variables and skip otherwise).
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

/// Inside a run: this host has no GPU place, its description says so with each of `reasons`, and pinned memory is
/// ordinary memory (no driver to pin it with, or no GPU to copy to).
inline void expect_no_gpu_places(const std::vector<std::string>& reasons) {
  EXPECT_EQ(apgas::all_places().size(), 1u);
  const std::string h = apgas::describe(apgas::place(0));
  EXPECT_TRUE(contains(h, "no GPU places")) << h;
  for (const std::string& r : reasons) EXPECT_TRUE(contains(h, r)) << h;
  const apgas::pinned_vector<int> v(100, 1);
  EXPECT_FALSE(apgas::is_pinned(v.data(), v.size() * sizeof(int)));
}

/// Every test starts with a healthy fake with zero counters, and ends by checking that the backend never made a
/// call the fake had to refuse or flag.
class FakeGpu : public testing::Test {
 protected:
  void SetUp() override { fake().reset(); }
  void TearDown() override {
    EXPECT_EQ(counter(-1, "illegal_accesses"), 0) << "last fault: " << fake().last_fault();
    EXPECT_EQ(counter(-1, "wrong_context_calls"), 0);
    EXPECT_EQ(counter(-1, "invalid_handle_calls"), 0);
    EXPECT_EQ(counter(-1, "invalid_frees"), 0);
    for (int d = 0; counter(d, "h2d_ops") >= 0; ++d) {
      EXPECT_LE(counter(d, "largest_pageable_async_copy"), static_cast<long long>(apgas::config::default_direct_copy))
          << "the backend hands pageable memory to the driver only for a direct copy (config::cuda_direct_copy)";
    }
    EXPECT_EQ(counter(-1, "host_frees_without_context"), 0);
    fake().reset();
  }
};

// ---- kernel launches built by hand ---------------------------------------------------------------------------------
// A file compiled by g++ cannot send a kernel to a GPU place; under nvcc, apgas/cuda/kernel.cuh builds a
// gpu_kernel_request and resolves its CUfunction through the CUDA runtime, which the fake cannot stand in for. So the
// request is built here by hand, as kernel.cuh would build it, with a made-up CUfunction (the fake only uses it as a
// handle, and runs the kernel as a no-op): this tests the backend's pre step (limits, shared-memory opt-in, uploads,
// constant data, spilled bodies), its completion and post step (the launch's buffers freed), and its errors.

inline const char entry_a = 'a';
inline const char entry_b = 'b';
inline const char entry_c = 'c';
inline const char entry_d = 'd';
inline const char entry_e = 'e';
inline std::atomic<std::uintptr_t> g_constant_address{0};
inline void* constant_address() { return reinterpret_cast<void*>(g_constant_address.load()); }

struct hand_made_kernel {
  explicit hand_made_kernel(const void* entry) {
    r.entry = entry;
    r.resolve = [](const void* e) -> void* { return const_cast<void*>(e); };
    r.constant_symbol = &constant_address;
    r.constant_capacity = 64 * KiB;
    r.shape = &shape;
    r.write_desc = [](void* desc, const void* ctx, const std::uintptr_t* uploads) {
      auto* self = static_cast<hand_made_kernel*>(const_cast<void*>(ctx));
      for (std::size_t i = 0; i < self->r.uploads.size(); ++i) self->seen[i] = uploads[i];
      if (!self->r.uploads.empty()) std::memcpy(desc, uploads, self->r.uploads.size() * sizeof(std::uintptr_t));
      if (self->peek_device >= 0) {  // what the uploads hold when the descriptor is written
        for (std::size_t i = 0; i < self->r.uploads.size(); ++i) {
          std::vector<std::uint8_t> v(self->r.uploads[i].bytes);
          if (fake().peek(self->peek_device, uploads[i], v.data(), v.size()) != 0) v.clear();
          self->peeked.push_back(std::move(v));
        }
      }
    };
    r.desc_ctx = this;
    r.desc_bytes = 4 * sizeof(std::uintptr_t);
    r.body = body.data();
    r.body_bytes = body.size();
  }
  hand_made_kernel(const hand_made_kernel&) = delete;
  hand_made_kernel& operator=(const hand_made_kernel&) = delete;
  template <class T>
  void upload(const std::vector<T>& v) {
    r.uploads.push_back({v.data(), v.size() * sizeof(T)});
  }
  /// The body's first 8 bytes (the fake's trace shows them as the kernel's tag).
  void tag(std::uint64_t t) { std::memcpy(body.data(), &t, sizeof t); }

  apgas::grid shape{4, 128};
  std::vector<std::byte> body = std::vector<std::byte>(96, std::byte{1});
  std::uintptr_t seen[4] = {};
  int peek_device = -1;                       // >= 0: write_desc reads the uploads back from this fake device
  std::vector<std::vector<std::uint8_t>> peeked;
  apgas::detail::gpu_kernel_request r;
};

}  // namespace apgas_test::fake_gpu
