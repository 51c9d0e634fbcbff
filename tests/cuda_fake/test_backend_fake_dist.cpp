// GPU places across processes, through the fake CUDA driver (tests/cuda_fake/fake_cuda.cpp): run under mpirun with
// 2 processes (ctest apgas.cuda_fake.backend_dist_np2, and over libfabric's tcp provider). Every process has 2 fake
// GPUs: host 0 owns GPU places 2 and 3 (its devices 0 and 1), host 1 owns 4 and 5. Every process runs the same gtest
// sequence; each TEST is one apgas::run whose main activity runs at place 0 while place 1 serves.
#include "cuda_fake/fake_control.hpp"

#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <vector>

using apgas_test::pattern;
using apgas_test::rank0;
using apgas_test::run_everywhere;

namespace {

using apgas::place;
using apgas_test::fake;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

/// A DMA slice size no other run of this process has used (every process counts alike): a fresh accelerator.
std::size_t fresh_slice() {
  static int n = 0;
  return MiB + 4 * KiB * static_cast<std::size_t>(++n);
}

std::uint64_t checksum(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// The checksum of n bytes of device memory of GPU place g, read by the fake driver at g's host (at the place that
/// owns the device, bypassing the backend). ~0 if the range is not device memory there.
std::uint64_t device_checksum(place g, std::uintptr_t address, std::size_t n) {
  const int device = static_cast<int>(g.id() - g.parent().children()[0].id());
  return apgas::at(g.parent(), [device, address, n] {
    std::vector<std::uint8_t> v(n);
    if (fake().peek(device, address, v.data(), n) != 0) return ~std::uint64_t{0};
    return checksum(v.data(), n);
  });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

long long remote_counter(place host, int device, const char* name) {
  const std::string c = name;
  return apgas::at(host, [device](std::string n) { return fake().counter(device, n.c_str()); }, c);
}

/// Remote arrays are freed in stream order (cuMemFreeAsync): the fake's count of live allocations drops when the
/// stream has run the free, shortly after free_remote_array returns. Wait for it (bounded), then return it.
long long settled_counter(place host, int device, const char* name, long long want) {
  long long v = remote_counter(host, device, name);
  for (int i = 0; i < 500 && v != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    v = remote_counter(host, device, name);
  }
  return v;
}

/// Every place, its kind, parent, children and description: the same text at every place.
std::string tree_summary() {
  std::string s;
  for (place p : apgas::all_places()) {
    // (appended piece by piece: g++ 12 warns falsely about "literal" + std::string, -Wrestrict)
    s += std::to_string(p.id());
    s += p.is_cuda() ? " gpu parent " : " host parent ";
    s += std::to_string(p.parent().id());
    s += " children";
    for (place c : p.children()) {
      s += ' ';
      s += std::to_string(c.id());
    }
    s += " [";
    s += apgas::describe(p);
    s += "]\n";
  }
  return s;
}

TEST(FakeGpuDist, EveryProcessSeesTheSameTree) {
  run_everywhere([] {
    ASSERT_EQ(apgas::num_hosts(), 2);
    ASSERT_EQ(apgas::all_places().size(), 6u);
    const auto summary = [] { return tree_summary(); };
    const std::string here = summary();
    for (place p : apgas::places()) EXPECT_EQ(apgas::at(p, summary), here) << "at place " << p.id();
    const std::vector<place> h0(place(0).children().begin(), place(0).children().end());
    const std::vector<place> h1(place(1).children().begin(), place(1).children().end());
    EXPECT_EQ(h0, (std::vector<place>{place(2), place(3)}));
    EXPECT_EQ(h1, (std::vector<place>{place(4), place(5)}));
    for (int id = 2; id < 6; ++id) {
      EXPECT_TRUE(place(id).is_cuda());
      EXPECT_EQ(place(id).parent(), place(id < 4 ? 0 : 1));
    }
    EXPECT_EQ(apgas::describe(place(4)), "Fake GPU 0 (device 0, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::describe(place(5)), "Fake GPU 1 (device 1, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::at(place(1), [] { return apgas::here().id(); }), 1);
  });
}

// From place 0: arrays on host 1's GPU, copies both ways in every size up to more than one routed piece (64 MiB).
TEST(FakeGpuDist, RemoteGpuArraysAndCopies) {
  run_everywhere([] {
    const place g(4);
    const long long allocations = remote_counter(place(1), 0, "allocations");
    // Zero-filled, value-filled, clone.
    auto z = apgas::make_remote_array<std::uint8_t>(g, 100000);
    EXPECT_EQ(device_checksum(g, z.token(), z.size()), checksum(std::vector<std::uint8_t>(100000, 0).data(), 100000));
    auto v = apgas::make_remote_array<std::uint8_t>(g, 70000, std::uint8_t{9});
    EXPECT_EQ(device_checksum(g, v.token(), v.size()), checksum(std::vector<std::uint8_t>(70000, 9).data(), 70000));
    const std::vector<std::uint8_t> init = pattern(123457, 1);
    auto c = apgas::make_remote_array(g, std::span<const std::uint8_t>(init));
    EXPECT_EQ(device_checksum(g, c.token(), c.size()), checksum(init.data(), init.size()));
    EXPECT_EQ(remote_counter(place(1), 0, "allocations"), allocations + 3);
    apgas::free_remote_array(z);
    apgas::free_remote_array(v);
    apgas::free_remote_array(c);
    EXPECT_EQ(settled_counter(place(1), 0, "allocations", allocations), allocations);

    unsigned seed = 10;
    for (std::size_t n : {std::size_t{1}, std::size_t{4097}, MiB + 3, 64 * MiB, 64 * MiB + 4097}) {
      const std::string where = "n = " + std::to_string(n);  // (not SCOPED_TRACE: per thread, activities migrate)
      const std::size_t off = 3;
      const std::vector<std::uint8_t> src = pattern(n, seed++);
      auto a = apgas::make_remote_array<std::uint8_t>(g, off + n + 5);
      apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a, off); });
      EXPECT_EQ(device_checksum(g, a.token() + off, n), checksum(src.data(), n)) << where;
      const std::vector<std::uint8_t> zeros(5, 0);
      EXPECT_EQ(device_checksum(g, a.token() + off + n, 5), checksum(zeros.data(), 5)) << where;
      std::vector<std::uint8_t> back(n, 0x5A);
      apgas::finish([&] { apgas::async_copy(a, off, std::span<std::uint8_t>(back)); });
      EXPECT_TRUE(back == src) << where;
      apgas::free_remote_array(a);
    }
    EXPECT_EQ(settled_counter(place(1), 0, "allocations", allocations), allocations);
  });
}

// A GPU of host 0 and a GPU of host 1, both directions; a GPU of host 1 to a host array of host 0, and between the
// two GPUs of host 1, all started at place 0.
TEST(FakeGpuDist, CopiesBetweenGpusOfDifferentHosts) {
  run_everywhere([] {
    const std::size_t n = 3 * MiB + 11;
    const std::vector<std::uint8_t> src = pattern(n, 77);
    auto mine = apgas::make_remote_array(place(2), std::span<const std::uint8_t>(src));
    auto theirs = apgas::make_remote_array<std::uint8_t>(place(5), n + 16);
    apgas::finish([&] { apgas::async_copy(mine, 0, theirs, 16, n); });
    EXPECT_EQ(device_checksum(place(5), theirs.token() + 16, n), checksum(src.data(), n));

    auto mine2 = apgas::make_remote_array<std::uint8_t>(place(3), n);
    apgas::finish([&] { apgas::async_copy(theirs, 16, mine2, 0, n); });
    std::vector<std::uint8_t> local(n);
    ASSERT_EQ(fake().peek(1, mine2.token(), local.data(), n), 0);
    EXPECT_TRUE(local == src) << "host 1 GPU -> host 0 GPU";

    auto host_array = apgas::make_remote_array<std::uint8_t>(place(0), n);
    apgas::finish([&] { apgas::async_copy(theirs, 16, host_array, 0, n); });
    EXPECT_EQ(checksum(&host_array[0], n), checksum(src.data(), n)) << "host 1 GPU -> host 0 array";

    auto theirs2 = apgas::make_remote_array<std::uint8_t>(place(4), n);
    apgas::finish([&] { apgas::async_copy(theirs, 16, theirs2, 0, n); });
    EXPECT_EQ(device_checksum(place(4), theirs2.token(), n), checksum(src.data(), n)) << "between host 1's GPUs";

    for (auto* a : {&mine, &theirs, &mine2, &host_array, &theirs2}) apgas::free_remote_array(*a);
  });
}

TEST(FakeGpuDist, WhatCannotBeSentToAnotherHostsGpu) {
  run_everywhere([] {
    const auto k = apgas::cuda_kernel(apgas::grid{1, 32}, [](apgas::thread) {});
    try {
      apgas::async_at(place(4), k);
      ADD_FAILURE() << "a kernel from a g++ file went to a GPU";
    } catch (const apgas::illegal_operation_exception& e) {
      EXPECT_TRUE(contains(e.what(), "GPU place 4 from a file not compiled by nvcc")) << e.what();
    }
    EXPECT_THROW(apgas::at(place(5), k), apgas::illegal_operation_exception);
    EXPECT_THROW(apgas::async_at(place(4), [] {}), apgas::illegal_operation_exception);
    EXPECT_EQ(remote_counter(place(1), -1, "kernel_launches"), 0);
    auto a = apgas::make_remote_array<int>(place(4), 10);
    std::vector<int> v11(11);
    EXPECT_THROW(apgas::async_copy(std::span<const int>(v11), a), apgas::bad_place_exception);
    apgas::free_remote_array(a);
    // A team is one activity per host place: a GPU place cannot be a broadcast's root (checked before any message).
    std::vector<int> b(3, 1);
    try {
      apgas::team::world().broadcast(std::span<int>(b), place(3));
      ADD_FAILURE() << "a GPU place was accepted as a broadcast root";
    } catch (const apgas::bad_place_exception& e) {
      EXPECT_TRUE(contains(e.what(), "place 3 is a GPU place")) << e.what();
    }
    // The same for every rooted team operation (the root is checked before anything is sent).
    std::vector<int> all(6);
    try {
      apgas::team::world().gather(std::span<const int>(b), std::span<int>(all), place(3));
      ADD_FAILURE() << "a GPU place was accepted as a gather root";
    } catch (const apgas::bad_place_exception& e) {
      EXPECT_TRUE(contains(e.what(), "apgas::team::gather: the root must be a host place")) << e.what();
    }
    try {
      apgas::team::world().reduce(std::span<int>(b), [](int x, int y) { return x + y; }, place(3));
      ADD_FAILURE() << "a GPU place was accepted as a reduce root";
    } catch (const apgas::bad_place_exception& e) {
      EXPECT_TRUE(contains(e.what(), "place 3 is a GPU place")) << e.what();
    }
  });
}

/// APGAS_TEST_GPUS_PER_HOST ("2,1"): the GPU count the fake gives each host in the uneven runs (ctest
/// apgas.cuda_fake.backend_dist_uneven_*, where each process gets its own APGAS_FAKE_CUDA_DEVICES); empty otherwise.
std::vector<int> gpus_per_host() {
  std::vector<int> out;
  const char* v = std::getenv("APGAS_TEST_GPUS_PER_HOST");
  if (v == nullptr || *v == '\0') return out;
  const std::string list = v;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    out.push_back(std::atoi(list.substr(start, comma == std::string::npos ? comma : comma - start).c_str()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Hosts with different GPU counts (one with none): the ids, parents and descriptions follow, every GPU is reachable.
TEST(FakeGpuDistUneven, TreeAndCopiesWithUnevenGpuCounts) {
  const std::vector<int> per_host = gpus_per_host();
  if (per_host.empty()) GTEST_SKIP() << "runs as ctest apgas.cuda_fake.backend_dist_uneven_* (APGAS_TEST_GPUS_PER_HOST)";
  run_everywhere([&] {
    ASSERT_EQ(apgas::num_hosts(), static_cast<int>(per_host.size()));
    int id = apgas::num_hosts();
    for (int h = 0; h < apgas::num_hosts(); ++h) {
      const auto children = place(h).children();
      ASSERT_EQ(static_cast<int>(children.size()), per_host[static_cast<std::size_t>(h)]) << "host " << h;
      for (int g = 0; g < per_host[static_cast<std::size_t>(h)]; ++g, ++id) {
        EXPECT_EQ(children[static_cast<std::size_t>(g)], place(id));
        EXPECT_EQ(place(id).parent(), place(h));
        EXPECT_EQ(apgas::describe(place(id)),
                  "Fake GPU " + std::to_string(g) + " (device " + std::to_string(g) + ", 132 SMs, 80 GiB)");
      }
      const std::string d = apgas::describe(place(h));
      if (per_host[static_cast<std::size_t>(h)] == 0) {
        EXPECT_TRUE(contains(d, "no GPU places")) << d;
        EXPECT_TRUE(contains(d, "CUDA_ERROR_NO_DEVICE")) << d;
      } else {
        EXPECT_FALSE(contains(d, "no GPU places")) << d;
      }
    }
    ASSERT_EQ(static_cast<int>(apgas::all_places().size()), id);
    EXPECT_THROW((void)apgas::place_of(id), apgas::bad_place_exception);
    const std::string here = tree_summary();
    for (place p : apgas::places()) EXPECT_EQ(apgas::at(p, [] { return tree_summary(); }), here);
    // Every GPU place, from place 0: an array, data in and out, freed.
    const std::vector<std::uint8_t> src = pattern(300000, 3);
    for (place g : apgas::all_places()) {
      if (!g.is_cuda()) continue;
      auto a = apgas::make_remote_array(g, std::span<const std::uint8_t>(src));
      EXPECT_EQ(device_checksum(g, a.token(), src.size()), checksum(src.data(), src.size())) << "place " << g.id();
      std::vector<std::uint8_t> back(src.size());
      apgas::finish([&] { apgas::async_copy(a, 0, std::span<std::uint8_t>(back)); });
      EXPECT_TRUE(back == src) << "place " << g.id();
      apgas::free_remote_array(a);
    }
  });
}

// APGAS_GPUS=1 where some host has no GPU 1: start-up stops at every host (exit code 2), the host that lacks it says
// why, the others that the set-up failed elsewhere; the next run starts normally.
TEST(FakeGpuDistUneven, AGpuOneHostLacksStopsEveryHost) {
  const std::vector<int> per_host = gpus_per_host();
  if (per_host.empty()) GTEST_SKIP() << "runs as ctest apgas.cuda_fake.backend_dist_uneven_* (APGAS_TEST_GPUS_PER_HOST)";
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::size_t me = rank != nullptr ? static_cast<std::size_t>(std::atoi(rank)) : 0;
  ASSERT_LT(me, per_host.size());
  apgas::config cfg = apgas::config::from_env();
  cfg.nthreads = 2;
  cfg.gpus = "1";
  bool ran = false;
  testing::internal::CaptureStderr();
  const int rc = apgas::run(cfg, [&] { ran = true; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_FALSE(ran);
  // Each line names its host place (with untagged launcher output a reader could not tell them apart).
  std::string lacking;
  for (std::size_t h = 0; h < per_host.size(); ++h) {
    if (per_host[h] < 2) lacking += (lacking.empty() ? "" : ", ") + std::to_string(h);
  }
  if (per_host[me] < 2) {
    EXPECT_TRUE(contains(err, "apgas: host place " + std::to_string(me) + " (")) << err;
    EXPECT_TRUE(contains(err, "APGAS_GPUS='1'")) << err;
    EXPECT_TRUE(contains(err, "GPU 1 does not exist")) << err;
  } else {
    EXPECT_TRUE(contains(err, "start-up stopped at host place " + std::to_string(me) +
                                  ": the GPU set-up failed at host place " + lacking))
        << err;
  }
  run_everywhere([] { EXPECT_EQ(apgas::num_hosts(), 2); });
}

// The default GPU selection (APGAS_GPUS unset, ctest apgas.cuda_fake.backend_dist_share_np2): the two processes are
// local ranks 0 and 1 of one node with two (fake) GPUs, so each takes one: host 0 device 0, host 1 device 1.
TEST(FakeGpuDistShare, EachProcessTakesItsNodeLocalShare) {
  if (std::getenv("APGAS_TEST_SHARE") == nullptr) GTEST_SKIP() << "runs as ctest apgas.cuda_fake.backend_dist_share_np2";
  run_everywhere([] {
    ASSERT_EQ(apgas::num_hosts(), 2);
    ASSERT_EQ(apgas::all_places().size(), 4u);
    ASSERT_EQ(place(0).children().size(), 1u);
    ASSERT_EQ(place(1).children().size(), 1u);
    EXPECT_EQ(apgas::describe(place(2)), "Fake GPU 0 (device 0, 132 SMs, 80 GiB)");
    EXPECT_EQ(apgas::describe(place(3)), "Fake GPU 1 (device 1, 132 SMs, 80 GiB)");
    // No context on the other process's GPU.
    EXPECT_EQ(remote_counter(place(0), 1, "retains"), 0);
    EXPECT_EQ(remote_counter(place(1), 0, "retains"), 0);
  });
}

// A GPU of host 1 dies: place 0 gets dead_place_exception (where() = that place) through the routed copy and at
// once afterwards; host 1's other GPU keeps working. (A DMA slice size of its own: the dead GPU is not inherited by
// a later run, see test_backend_fake.cpp.)
TEST(FakeGpuDist, ADeadGpuOfAnotherHost) {
  run_everywhere(
      [] {
        const place dead(5), alive(4);
        const std::size_t n = 200 * KiB;
        const std::vector<std::uint8_t> src = pattern(n, 5);
        auto a = apgas::make_remote_array<std::uint8_t>(dead, n);
        auto b = apgas::make_remote_array<std::uint8_t>(alive, n);
        apgas::at(place(1), [] { fake().fail(1, CUDA_ERROR_ILLEGAL_ADDRESS); });
        try {
          apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), a); });
          ADD_FAILURE() << "a copy to a dead GPU succeeded";
        } catch (const apgas::multiple_exceptions& m) {
          const auto deads = m.of_type<apgas::dead_place_exception>();
          ASSERT_EQ(deads.size(), m.size());
          ASSERT_GE(deads.size(), 1u);
          EXPECT_EQ(deads[0]->where(), 5);
          EXPECT_TRUE(contains(deads[0]->what(), "GPU place 5")) << deads[0]->what();
        }
        try {
          (void)apgas::make_remote_array<int>(dead, 1);
          ADD_FAILURE() << "an array on a dead GPU";
        } catch (const apgas::dead_place_exception& e) {
          EXPECT_EQ(e.where(), 5);
        }
        apgas::finish([&] { apgas::async_copy(std::span<const std::uint8_t>(src), b); });
        EXPECT_EQ(device_checksum(alive, b.token(), n), checksum(src.data(), n));
        apgas::free_remote_array(b);
        apgas::at(place(1), [] { fake().reset(); });
      },
      fresh_slice());
}

}  // namespace
