// Kernel closures routed to another host's CPU place (apgas/include/apgas/kernel.hpp, kernel_route): the kernel
// travels as its grid, the bytes of its body (a plain, trivially copyable lambda: this file is compiled by the host
// compiler) and the data of its resources; it is rebuilt and launched inside an activity at the target host, counted
// by the sender's finish. Run under mpirun with 2 and 3 processes and over libfabric (ctest apgas.dist.kernel_route_*);
// every process runs the same gtest sequence, each TEST is one apgas::run whose main activity runs at place 0.
//
// Results are written by the kernels into remote_arrays that live at the target host, and read back at place 0 with
// async_copy, so every check below is made at place 0 on data that crossed the wire twice.
#include "support/run.hpp"

#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

using apgas_test::run_everywhere;

namespace {

/// Every host place but place 0 (the sender).
std::vector<apgas::place> other_hosts() {
  std::vector<apgas::place> out;
  for (apgas::place p : apgas::places()) {
    if (p.id() != 0) out.push_back(p);
  }
  return out;
}

template <class T>
std::vector<T> read_back(apgas::remote_array<T> a) {
  std::vector<T> v(a.size());
  apgas::finish([&] { apgas::async_copy(a, 0, std::span<T>(v)); });
  return v;
}

TEST(KernelRoute, ThereAreOtherHosts) {
  run_everywhere([] {
    ASSERT_GE(apgas::num_hosts(), 2);
    EXPECT_FALSE(other_hosts().empty());
  });
}

// A plain kernel with async_at: every (block, thread) runs once, at the target host, and the finish waits for all of
// them; the same with at(), which returns only when the launch has ended.
TEST(KernelRoute, PlainKernelCoversTheGridAtTheOtherHost) {
  run_everywhere([] {
    for (apgas::place p : other_hosts()) {
      constexpr int blocks = 5;
      constexpr int threads = 33;
      constexpr std::size_t n = blocks * threads;
      auto out = apgas::make_remote_array<long>(p, n + 3, -1L);
      const long salt = 1000L * p.id();
      apgas::finish([&] {
        apgas::async_at(p, apgas::cuda_kernel(apgas::grid{blocks, threads}, [out, salt](apgas::thread t) {
                          out[static_cast<std::size_t>(t.global_id())] =
                              salt + t.block() * 100 + t.thread() + (t.global_id() == t.block() * t.threads() + t.thread()
                                                                          ? 0
                                                                          : 1000000);
                          if (t.global_id() == 0) {
                            out[n] = apgas::here().id();
                            out[n + 1] = t.global_count();
                            out[n + 2] = static_cast<long>(t.blocks()) * 1000 + t.threads();
                          }
                        }));
      });
      std::vector<long> got = read_back(out);
      for (int b = 0; b < blocks; ++b) {
        for (int t = 0; t < threads; ++t) {
          EXPECT_EQ(got[static_cast<std::size_t>(b * threads + t)], salt + b * 100 + t) << "place " << p.id();
        }
      }
      EXPECT_EQ(got[n], p.id()) << "the kernel ran elsewhere";
      EXPECT_EQ(got[n + 1], static_cast<long>(n));
      EXPECT_EQ(got[n + 2], blocks * 1000L + threads);

      // at(): the launch has ended when at returns; each element is incremented exactly once.
      apgas::at(p, apgas::cuda_kernel(apgas::grid{3, 64}, [out](apgas::thread t) {
                  for (long i = t.global_id(); i < static_cast<long>(n); i += t.global_count()) {
                    out[static_cast<std::size_t>(i)] += 1;
                  }
                }));
      got = read_back(out);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(got[i], salt + static_cast<long>(i / threads) * 100 + static_cast<long>(i % threads) + 1) << i;
      }
      apgas::free_remote_array(out);
    }
  });
}

// auto_grid is resolved at the target: one block per worker *there*, one thread each.
TEST(KernelRoute, AutoGridIsTheTargetsShape) {
  run_everywhere([] {
    for (apgas::place p : other_hosts()) {
      const int workers_there = apgas::at(p, [] { return apgas::num_workers(); });
      auto out = apgas::make_remote_array<int>(p, 64, 0);
      apgas::at(p, apgas::cuda_kernel(apgas::auto_grid(), [out](apgas::thread t) {
                  out[static_cast<std::size_t>(t.global_id()) + 2] = 1;
                  if (t.global_id() == 0) {
                    out[0] = t.blocks();
                    out[1] = t.threads();
                  }
                }));
      const std::vector<int> got = read_back(out);
      EXPECT_EQ(got[0], workers_there);
      EXPECT_EQ(got[1], 1);
      EXPECT_EQ(std::accumulate(got.begin() + 2, got.end(), 0), workers_there);
      apgas::free_remote_array(out);
    }
  });
}

// A block-wide tree reduction across the clocked threads (Parboil RPES's shape): grid-stride partial sums into a
// shared array, then log2(threads) halving steps with a barrier between them. Each block's sum is checked.
TEST(KernelRoute, ClockedBlockTreeReductionAtTheOtherHost) {
  run_everywhere([] {
    constexpr int blocks = 6;
    constexpr int threads = 128;
    constexpr long n = 1'000'003;
    std::vector<long> expect(blocks, 0);
    for (long gid = 0; gid < blocks * threads; ++gid) {
      for (long i = gid; i < n; i += blocks * threads) expect[static_cast<std::size_t>(gid / threads)] += i % 1000;
    }
    for (apgas::place p : other_hosts()) {
      auto out = apgas::make_remote_array<long>(p, blocks, -1L);
      apgas::finish([&] {
        apgas::async_at(p, apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared<long>(threads),
                                              [out](apgas::clocked_thread t, std::span<long> sh) {
                                                long s = 0;
                                                for (long i = t.global_id(); i < n; i += t.global_count()) {
                                                  s += i % 1000;
                                                }
                                                sh[static_cast<std::size_t>(t.thread())] = s;
                                                t.advance();
                                                for (int stride = t.threads() / 2; stride > 0; stride /= 2) {
                                                  if (t.thread() < stride) {
                                                    sh[static_cast<std::size_t>(t.thread())] +=
                                                        sh[static_cast<std::size_t>(t.thread() + stride)];
                                                  }
                                                  t.advance();
                                                }
                                                if (t.thread() == 0) out[static_cast<std::size_t>(t.block())] = sh[0];
                                              }));
      });
      EXPECT_EQ(read_back(out), expect) << "place " << p.id();
      apgas::free_remote_array(out);
    }
  });
}

// The barrier really orders the threads of a block at the target: each thread reads its neighbour's write made
// before the barrier.
TEST(KernelRoute, ClockedBarrierExchangesDataAtTheOtherHost) {
  run_everywhere([] {
    constexpr int threads = 64;
    for (apgas::place p : other_hosts()) {
      auto out = apgas::make_remote_array<int>(p, 2 * threads, -1);
      apgas::at(p, apgas::cuda_kernel(apgas::grid{2, threads}, apgas::shared<int>(threads, 7),
                                      [out](apgas::clocked_thread t, std::span<int> sh) {
                                        const auto me = static_cast<std::size_t>(t.thread());
                                        const int filled = sh[me];  // shared<T>(n, value) fills every block's array
                                        sh[me] = t.thread() * 10 + t.block();
                                        t.advance();
                                        out[static_cast<std::size_t>(t.global_id())] =
                                            (filled == 7 ? 0 : 100000) + sh[(me + 1) % threads];
                                      }));
      const std::vector<int> got = read_back(out);
      for (int b = 0; b < 2; ++b) {
        for (int t = 0; t < threads; ++t) {
          EXPECT_EQ(got[static_cast<std::size_t>(b * threads + t)], ((t + 1) % threads) * 10 + b)
              << "block " << b << " thread " << t;
        }
      }
      apgas::free_remote_array(out);
    }
  });
}

// Every resource kind in one routed launch, in order: shared<T>(n, value), shared_from, constant_from, global_from.
// Their data is taken when the kernel is built (later changes to the host vectors do not travel), each block gets
// fresh shared arrays, and the parameters arrive in the declared order.
TEST(KernelRoute, EveryResourceKindTravels) {
  run_everywhere([] {
    constexpr int blocks = 3;
    constexpr int threads = 4;
    std::vector<float> shared_init{1.5f, 2.5f, 3.5f, 4.5f};
    std::vector<int> table{10, 20, 30};
    std::vector<long> global(blocks * threads);
    std::iota(global.begin(), global.end(), 100L);
    for (apgas::place p : other_hosts()) {
      auto out = apgas::make_remote_array<double>(p, blocks * 2, -1.0);
      auto k = apgas::cuda_kernel(
          apgas::grid{blocks, threads}, apgas::shared<int>(threads, 7),
          apgas::shared_from(std::span<const float>(shared_init)), apgas::constant_from(std::span<const int>(table)),
          apgas::global_from(std::span<const long>(global)),
          [out](apgas::clocked_thread t, std::span<int> sh, std::span<float> shf, std::span<const int> c,
                std::span<long> g) {
            const auto me = static_cast<std::size_t>(t.thread());
            const bool sizes_ok = sh.size() == 4 && shf.size() == 4 && c.size() == 3 && g.size() == 12;
            const bool fresh = sh[me] == 7 && shf[me] == 1.5f + static_cast<float>(me);  // not another block's
            t.advance();
            sh[me] = t.thread() + t.block();
            shf[me] *= 2.0f;
            t.advance();
            if (t.thread() == 0) {
              double s = 0;
              for (std::size_t i = 0; i < 4; ++i) s += sh[i] + shf[i];
              s += c[static_cast<std::size_t>(t.block())];
              for (std::size_t i = 0; i < g.size(); ++i) s += static_cast<double>(g[i]);
              out[static_cast<std::size_t>(t.block()) * 2] = s;
            }
            if (!sizes_ok || !fresh) out[static_cast<std::size_t>(t.block()) * 2 + 1] = 1.0;  // else stays -1
          });
      // Taken when the kernel was built: these changes must not reach the target.
      shared_init[0] = 1000.f;
      table[1] = 1000;
      global[5] = 1000;
      apgas::finish([&] { apgas::async_at(p, k); });
      const std::vector<double> got = read_back(out);
      for (int b = 0; b < blocks; ++b) {
        // sh: (0+b) + (1+b) + (2+b) + (3+b); shf: 2 * (1.5 + 2.5 + 3.5 + 4.5); c[b]; g: 100 + ... + 111.
        const double expect = (6 + 4 * b) + 24.0 + 10.0 * (b + 1) + (100 + 111) * 12 / 2.0;
        EXPECT_DOUBLE_EQ(got[static_cast<std::size_t>(b) * 2], expect) << "block " << b << ", place " << p.id();
        EXPECT_EQ(got[static_cast<std::size_t>(b) * 2 + 1], -1.0) << "block " << b << ": a resource arrived wrong";
      }
      shared_init[0] = 1.5f;
      table[1] = 20;
      global[5] = 105;
      apgas::free_remote_array(out);
    }
  });
}

// Larger resource data (a 256-entry constant table, a 1 MiB global input) with a plain kernel, with at().
TEST(KernelRoute, ConstantAndGlobalDataOfSomeSize) {
  run_everywhere([] {
    std::vector<int> table(256);
    std::iota(table.begin(), table.end(), 0);
    constexpr std::size_t n = 1 << 18;  // 1 MiB of int
    std::vector<int> input(n);
    std::iota(input.begin(), input.end(), 1);
    for (apgas::place p : other_hosts()) {
      auto out = apgas::make_remote_array<long>(p, n);
      apgas::at(p, apgas::cuda_kernel(apgas::grid{4, 32}, apgas::constant_from(std::span<const int>(table)),
                                      apgas::global_from(std::span<const int>(input)),
                                      [out](apgas::thread t, std::span<const int> c, std::span<int> g) {
                                        for (long i = t.global_id(); i < static_cast<long>(g.size());
                                             i += t.global_count()) {
                                          out[static_cast<std::size_t>(i)] =
                                              static_cast<long>(c[static_cast<std::size_t>(i % 256)]) *
                                              g[static_cast<std::size_t>(i)];
                                        }
                                      }));
      const std::vector<long> got = read_back(out);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) wrong += got[i] != static_cast<long>(i % 256) * static_cast<long>(i + 1);
      EXPECT_EQ(wrong, 0u) << "place " << p.id();
      apgas::free_remote_array(out);
    }
  });
}

// Exceptions thrown in blocks at the target reach the sender's finish, one per failed block, with their types; the
// blocks that did not fail ran to their end.
TEST(KernelRoute, ExceptionsInBlocksArriveWithExactCounts) {
  run_everywhere([] {
    const std::vector<apgas::place> others = other_hosts();
    const std::size_t hosts = others.size();
    std::vector<apgas::remote_array<int>> outs;
    for (apgas::place p : others) outs.push_back(apgas::make_remote_array<int>(p, 7, 0));
    try {
      apgas::finish([&] {
        for (std::size_t h = 0; h < hosts; ++h) {
          const auto out = outs[h];
          // 7 blocks of 5: thread 3 of the even blocks throws (4 failures); the odd blocks finish.
          apgas::async_at(others[h], apgas::cuda_kernel(apgas::grid{7, 5}, [out](apgas::thread t) {
                            if (t.block() % 2 == 0 && t.thread() == 3) {
                              throw std::out_of_range("block " + std::to_string(t.block()));
                            }
                            if (t.thread() == 4) out[static_cast<std::size_t>(t.block())] = 1;
                          }));
          // Clocked, 3 blocks of 8: thread 2 throws after the first barrier; one exception per block.
          apgas::async_at(others[h], apgas::cuda_kernel(apgas::grid{3, 8}, [](apgas::clocked_thread t) {
                            t.advance();
                            if (t.thread() == 2) throw std::invalid_argument("clocked");
                            t.advance();
                          }));
          // Every thread of every block throws: still one per block (5).
          apgas::async_at(others[h], apgas::cuda_kernel(apgas::grid{5, 4}, [](apgas::thread) {
                            throw apgas::clock_use_exception("everyone");
                          }));
          // A blocking operation inside a body is illegal at the target too: one per block (2).
          apgas::async_at(others[h], apgas::cuda_kernel(apgas::grid{2, 2}, [](apgas::thread) {
                            apgas::finish([] {});
                          }));
        }
      });
      ADD_FAILURE() << "the finish did not throw";
    } catch (const apgas::multiple_exceptions& m) {
      EXPECT_EQ(m.size(), (4 + 3 + 5 + 2) * hosts);
      EXPECT_EQ(m.of_type<std::out_of_range>().size(), 4 * hosts);
      EXPECT_EQ(m.of_type<std::invalid_argument>().size(), 3 * hosts);
      EXPECT_EQ(m.of_type<apgas::clock_use_exception>().size(), 5 * hosts);
      EXPECT_EQ(m.of_type<apgas::illegal_operation_exception>().size(), 2 * hosts);
      std::vector<int> seen(7, 0);
      for (const auto* e : m.of_type<std::out_of_range>()) {
        const std::string w = e->what();
        ASSERT_EQ(w.rfind("block ", 0), 0u) << w;
        seen[static_cast<std::size_t>(std::stoi(w.substr(6)))] += 1;
      }
      EXPECT_EQ(seen, (std::vector<int>{static_cast<int>(hosts), 0, static_cast<int>(hosts), 0, static_cast<int>(hosts),
                                        0, static_cast<int>(hosts)}));
    }
    for (std::size_t h = 0; h < hosts; ++h) {
      const std::vector<int> got = read_back(outs[h]);
      for (int b = 0; b < 7; ++b) {
        // thread 4 of an even block runs after thread 3 threw: a plain block stops its loop there.
        EXPECT_EQ(got[static_cast<std::size_t>(b)], b % 2 == 0 ? 0 : 1) << "block " << b;
      }
      apgas::free_remote_array(outs[h]);
    }

    // With at(): the kernel's failures come back as multiple_exceptions (as from a finish), with the same counts.
    for (apgas::place p : others) {
      try {
        apgas::at(p, apgas::cuda_kernel(apgas::grid{6, 3}, [](apgas::thread t) {
                    if (t.block() < 4 && t.thread() == 0) throw std::out_of_range("at");
                  }));
        ADD_FAILURE() << "at did not throw";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(m.size(), 4u);
        EXPECT_EQ(m.of_type<std::out_of_range>().size(), 4u);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "expected multiple_exceptions from at(kernel), got " << typeid(e).name() << ": " << e.what();
      }
    }
    // The target is still usable.
    for (apgas::place p : others) {
      auto out = apgas::make_remote_array<int>(p, 1, 0);
      apgas::at(p, apgas::cuda_kernel(apgas::grid{1, 1}, [out](apgas::thread) { out[0] = 42; }));
      EXPECT_EQ(read_back(out)[0], 42);
      apgas::free_remote_array(out);
    }
  });
}

// The code and message of the kernel_launch_error that launching `k` at place 0 throws (the reference).
template <class K>
std::pair<int, std::string> local_launch_error(const K& k) {
  try {
    apgas::at(apgas::here(), k);
  } catch (const apgas::kernel_launch_error& e) {
    return {e.code(), e.what()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "locally: expected kernel_launch_error, got " << typeid(e).name() << ": " << e.what();
  }
  ADD_FAILURE() << "locally: the bad launch was accepted";
  return {-1, ""};
}

// A bad grid is detected at the target (where the shape is resolved): with async_at it is the routed activity's
// exception, so the finish gets it — as kernel_launch_error, code kept; with at() it is thrown raw, nothing having
// been started.
TEST(KernelRoute, BadGridsArriveAsKernelLaunchError) {
  run_everywhere([] {
    const auto empty = [](apgas::thread) {};
    const auto zero_blocks = apgas::cuda_kernel(apgas::grid{0, 32}, empty);
    const auto too_many_threads = apgas::cuda_kernel(apgas::grid{2, 1025}, empty);
    const auto negative_threads = apgas::cuda_kernel(apgas::grid{2, -1}, empty);
    const auto [code0, what0] = local_launch_error(zero_blocks);
    const auto [code1, what1] = local_launch_error(too_many_threads);
    const auto [code2, what2] = local_launch_error(negative_threads);
    EXPECT_NE(what0.find("0 blocks"), std::string::npos) << what0;
    EXPECT_NE(what1.find("1025 threads"), std::string::npos) << what1;

    for (apgas::place p : other_hosts()) {
      // async_at: the error arrives in the finish.
      try {
        apgas::finish([&] {
          apgas::async_at(p, zero_blocks);
          apgas::async_at(p, too_many_threads);
          apgas::async_at(p, negative_threads);
        });
        ADD_FAILURE() << "bad grids sent with async_at were accepted";
      } catch (const apgas::multiple_exceptions& m) {
        EXPECT_EQ(m.size(), 3u);
        const auto errs = m.of_type<apgas::kernel_launch_error>();
        ASSERT_EQ(errs.size(), 3u) << "the type was not kept across places";
        int found = 0;
        for (const auto* e : errs) {
          EXPECT_TRUE(typeid(*e) == typeid(apgas::kernel_launch_error)) << typeid(*e).name();
          const std::string w = e->what();
          if (w == what0) {
            EXPECT_EQ(e->code(), code0);
            found |= 1;
          } else if (w == what1) {
            EXPECT_EQ(e->code(), code1);
            found |= 2;
          } else if (w == what2) {
            EXPECT_EQ(e->code(), code2);
            found |= 4;
          } else {
            ADD_FAILURE() << "unexpected message: " << w;
          }
        }
        EXPECT_EQ(found, 7);
      }
      // at: thrown raw.
      for (const auto& [k, code, what] : {std::tuple{zero_blocks, code0, what0}, std::tuple{negative_threads, code2, what2}}) {
        try {
          apgas::at(p, k);
          ADD_FAILURE() << "a bad grid sent with at was accepted";
        } catch (const apgas::kernel_launch_error& e) {
          EXPECT_EQ(e.code(), code);
          EXPECT_EQ(std::string(e.what()), what);
        } catch (const apgas::multiple_exceptions& m) {
          ADD_FAILURE() << "at() wrapped a pre-launch error in multiple_exceptions (" << m.size() << ")";
        } catch (const std::exception& e) {
          ADD_FAILURE() << "expected kernel_launch_error, got " << typeid(e).name() << ": " << e.what();
        }
      }
      try {
        apgas::at(p, too_many_threads);
        ADD_FAILURE() << "a bad grid sent with at was accepted";
      } catch (const apgas::kernel_launch_error& e) {
        EXPECT_EQ(e.code(), code1);
        EXPECT_EQ(std::string(e.what()), what1);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "expected kernel_launch_error, got " << typeid(e).name() << ": " << e.what();
      }
      // Nothing was started, and the place is usable.
      auto out = apgas::make_remote_array<int>(p, 1, 0);
      apgas::at(p, apgas::cuda_kernel(apgas::grid{1, 1}, [out](apgas::thread) { out[0] = 7; }));
      EXPECT_EQ(read_back(out)[0], 7);
      apgas::free_remote_array(out);
    }
  });
}

// cuda_error and kernel_launch_error thrown by a plain (non-kernel) closure at another place keep their dynamic type,
// code() and message: raw from at(), inside multiple_exceptions from a finish.
TEST(KernelRoute, CudaErrorsKeepTypeAndCodeAcrossPlaces) {
  run_everywhere([] {
    for (apgas::place p : other_hosts()) {
      try {
        apgas::at(p, [] { throw apgas::cuda_error(700, "illegal address at " + std::to_string(apgas::here().id())); });
        ADD_FAILURE() << "at did not throw";
      } catch (const apgas::kernel_launch_error& e) {
        ADD_FAILURE() << "a cuda_error arrived as kernel_launch_error: " << e.what();
      } catch (const apgas::cuda_error& e) {
        EXPECT_TRUE(typeid(e) == typeid(apgas::cuda_error)) << typeid(e).name();
        EXPECT_EQ(e.code(), 700);
        EXPECT_EQ(std::string(e.what()), "illegal address at " + std::to_string(p.id()));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "expected cuda_error, got " << typeid(e).name() << ": " << e.what();
      }
      try {
        apgas::at(p, [] { throw apgas::kernel_launch_error(1, "too many threads"); });
        ADD_FAILURE() << "at did not throw";
      } catch (const apgas::kernel_launch_error& e) {
        EXPECT_TRUE(typeid(e) == typeid(apgas::kernel_launch_error)) << typeid(e).name();
        EXPECT_EQ(e.code(), 1);
        EXPECT_STREQ(e.what(), "too many threads");
      } catch (const std::exception& e) {
        ADD_FAILURE() << "expected kernel_launch_error, got " << typeid(e).name() << ": " << e.what();
      }
      for (int code : {0, 2, 999, -3}) {
        try {
          apgas::at(p, [](int c) { throw apgas::cuda_error(c, "code " + std::to_string(c)); }, code);
          ADD_FAILURE() << "at did not throw";
        } catch (const apgas::cuda_error& e) {
          EXPECT_EQ(e.code(), code);
          EXPECT_EQ(std::string(e.what()), "code " + std::to_string(code));
        }
      }
      // A dead place keeps the place it names.
      try {
        apgas::at(p, [] { throw apgas::dead_place_exception(9, "gone"); });
        ADD_FAILURE() << "at did not throw";
      } catch (const apgas::dead_place_exception& e) {
        EXPECT_EQ(e.where(), 9);
      }
      // async_at: in the finish, each with its type and code.
      try {
        apgas::finish([&] {
          apgas::async_at(p, [] { throw apgas::cuda_error(719, "launch failed"); });
          apgas::async_at(p, [] { throw apgas::kernel_launch_error(701, "out of resources"); });
          apgas::async_at(p, [] { throw apgas::kernel_launch_error(1, "invalid value"); });
        });
        ADD_FAILURE() << "the finish did not throw";
      } catch (const apgas::multiple_exceptions& m) {
        ASSERT_EQ(m.size(), 3u);
        EXPECT_EQ(m.of_type<apgas::cuda_error>().size(), 3u);  // kernel_launch_error is a cuda_error
        const auto launch = m.of_type<apgas::kernel_launch_error>();
        ASSERT_EQ(launch.size(), 2u);
        int codes = 0;
        for (const auto* e : m.of_type<apgas::cuda_error>()) {
          const bool is_launch = typeid(*e) == typeid(apgas::kernel_launch_error);
          const std::string w = e->what();
          if (e->code() == 719) {
            EXPECT_FALSE(is_launch);
            EXPECT_EQ(w, "launch failed");
            codes |= 1;
          } else if (e->code() == 701) {
            EXPECT_TRUE(is_launch);
            EXPECT_EQ(w, "out of resources");
            codes |= 2;
          } else if (e->code() == 1) {
            EXPECT_TRUE(is_launch);
            EXPECT_EQ(w, "invalid value");
            codes |= 4;
          } else {
            ADD_FAILURE() << "unexpected code " << e->code() << ": " << w;
          }
        }
        EXPECT_EQ(codes, 7);
      }
    }
  });
}

// A kernel routed the other way: an activity at another host sends a kernel to place 0, writing into an array that
// lives at place 0; the finish at place 0 around the at() covers it.
TEST(KernelRoute, KernelsTravelFromAnyHostToAnyHost) {
  run_everywhere([] {
    auto home = apgas::make_remote_array<int>(apgas::here(), 16, 0);
    for (apgas::place p : other_hosts()) {
      apgas::finish([&] {
        apgas::at(p, [home] {
          const int from = apgas::here().id();
          apgas::async_at(apgas::place(0), apgas::cuda_kernel(apgas::grid{4, 4}, [home, from](apgas::thread t) {
                            home[static_cast<std::size_t>(t.global_id())] += from;
                          }));
        });
      });
      for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(home[i], (p.id() * (p.id() + 1)) / 2) << i;
    }
    apgas::free_remote_array(home);
  });
}

}  // namespace
