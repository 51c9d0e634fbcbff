#pragma once
// The constructs of kernel closures (apgas/kernel_thread.hpp, apgas/kernel_atomic.hpp), each run at a place and
// checked against a serial computation. The same functions run on CPU places (tests/core/test_kernel_constructs.cpp,
// compiled by the host compiler) and on GPU places (tests/gpu/test_gpu_constructs.cpp, compiled by nvcc): kernels are
// written [=] APGAS_KERNEL and write into remote arrays at the place, copied back to the host to be checked.
#include <apgas/apgas.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

namespace kernel_constructs {

template <class T>
std::vector<T> fetch(apgas::remote_array<T> a) {
  std::vector<T> v(a.size());
  apgas::finish([&] { apgas::async_copy(a, 0, std::span<T>(v)); });
  return v;
}

// A zero-filled remote array at p, freed when the returned holder goes (at the end of the check).
template <class T>
struct scoped_array {
  apgas::remote_array<T> a;
  scoped_array(apgas::place p, std::size_t n) : a(apgas::make_remote_array<T>(p, n)) {}
  ~scoped_array() { apgas::free_remote_array(a); }
  scoped_array(const scoped_array&) = delete;
  scoped_array& operator=(const scoped_array&) = delete;
};
#define KC_ARRAY(T, name, p, n)                  \
  scoped_array<T> name##_holder((p), (n));        \
  const apgas::remote_array<T> name = name##_holder.a

inline int bits(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

// A 3-D grid of 3-D blocks: every thread sees consistent indices, and every (block, thread) runs exactly once.
inline void grid_3d(apgas::place p) {
  const apgas::grid g{{3, 2, 2}, {4, 3, 2}};
  const long total = g.blocks.count() * g.threads.count();
  KC_ARRAY(int, hits, p, static_cast<std::size_t>(total));
  KC_ARRAY(int, bad, p, 1);
  apgas::at(p, apgas::cuda_kernel(g, [=] APGAS_KERNEL (apgas::thread t) {
    int* h = hits.data();
    const apgas::dim3 ti = t.thread_idx(), bi = t.block_idx(), bd = t.block_dim(), gd = t.grid_dim();
    const bool ok = bd.x == 4 && bd.y == 3 && bd.z == 2 && gd.x == 3 && gd.y == 2 && gd.z == 2 && ti.x < 4 &&
                    ti.y < 3 && ti.z < 2 && bi.x < 3 && bi.y < 2 && bi.z < 2 && t.threads() == 24 &&
                    t.blocks() == 12 && t.thread() == (ti.z * 3 + ti.y) * 4 + ti.x &&
                    t.block() == (bi.z * 2 + bi.y) * 3 + bi.x && t.global_count() == 288 &&
                    t.lane() == t.thread() % 32 && t.warp() == t.thread() / 32;
    if (!ok) apgas::atomic_add(bad.data()[0], 1);
    apgas::atomic_add(h[t.global_id()], 1);
  }));
  for (int v : fetch(hits)) EXPECT_EQ(v, 1);
  EXPECT_EQ(fetch(bad)[0], 0);

  // The same grid at block level: for_threads visits each thread of each block once, x fastest.
  KC_ARRAY(int, hits2, p, static_cast<std::size_t>(total));
  apgas::at(p, apgas::cuda_kernel(g, [=] APGAS_KERNEL (apgas::thread_block b) {
    int* h = hits2.data();
    const long base = b.block() * b.threads();
    b.for_threads([&](apgas::thread_index t) {
      if (t.linear == (t.z * 3 + t.y) * 4 + t.x) apgas::atomic_add(h[base + t.linear], 1);
    });
  }));
  for (int v : fetch(hits2)) EXPECT_EQ(v, 1);
}

// Every atomic on global memory against what it must leave; shared-memory atomics (both forms) build per-block
// histograms.
inline void atomics(apgas::place p) {
  constexpr int blocks = 4, threads = 64, n = blocks * threads;
  KC_ARRAY(int, ints, p, 8);
  KC_ARRAY(float, floats, p, 1);
  KC_ARRAY(unsigned long long, u64, p, 2);
  KC_ARRAY(unsigned, hist, p, blocks * 8);
  KC_ARRAY(float, fmax, p, 1);
  const std::vector<int> init{0, 0, 1 << 30, 0, -1, 0, 0, 7};  // for min, and, compare-exchange
  const std::vector<float> finit{-1.0f};
  apgas::finish([&] {
    apgas::async_copy(std::span<const int>(init), ints);
    apgas::async_copy(std::span<const float>(finit), fmax);
  });
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared<unsigned, 8>(),
                                  [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<unsigned, 8> h) {
    int* i = ints.data();
    const int id = static_cast<int>(t.global_id());
    apgas::atomic_add(i[0], id);
    apgas::atomic_sub(i[1], 2);
    apgas::atomic_min(i[2], id + 5);
    apgas::atomic_max(i[3], id * 3);
    apgas::atomic_and(i[4], ~(1 << (id % 31)));
    apgas::atomic_or(i[5], 1 << (id % 31));
    apgas::atomic_xor(i[6], id);
    if (apgas::atomic_compare_exchange(i[7], 7, id) == 7) apgas::atomic_add(u64.data()[1], 1ull);
    apgas::atomic_add(floats.data()[0], 0.5f);
    // A float maximum by the CUDA Programming Guide's compare-exchange loop, its first read atomic.
    float seen = apgas::atomic_load(fmax.data()[0]), assumed = 0;
    do {
      assumed = seen;
      seen = apgas::atomic_compare_exchange(fmax.data()[0], assumed, assumed > id * 0.5f ? assumed : id * 0.5f);
    } while (seen != assumed);
    apgas::atomic_add(u64.data()[0], static_cast<unsigned long long>(id) << 33);
    apgas::atomic_add(h[static_cast<std::size_t>(id % 8)], 1u);
    apgas::atomic_add(h, static_cast<std::size_t>(id % 8), 1u);  // the shared_span form (no lock on a CPU place)
    t.advance();
    if (t.thread() < 8) hist.data()[t.block() * 8 + t.thread()] = h[static_cast<std::size_t>(t.thread())];
  }));
  const std::vector<int> iv = fetch(ints);
  int sum = 0, mx = 0, x = 0, ormask = 0, andmask = -1;
  for (int id = 0; id < n; ++id) {
    sum += id;
    mx = std::max(mx, id * 3);
    x ^= id;
    ormask |= 1 << (id % 31);
    andmask &= ~(1 << (id % 31));
  }
  EXPECT_EQ(iv[0], sum);
  EXPECT_EQ(iv[1], -2 * n);
  EXPECT_EQ(iv[2], 5);
  EXPECT_EQ(iv[3], mx);
  EXPECT_EQ(iv[4], andmask);
  EXPECT_EQ(iv[5], ormask);
  EXPECT_EQ(iv[6], x);
  EXPECT_NE(iv[7], 7);  // exactly one thread swapped
  EXPECT_GE(iv[7], 0);
  EXPECT_LT(iv[7], n);
  const std::vector<unsigned long long> uv = fetch(u64);
  EXPECT_EQ(uv[0], static_cast<unsigned long long>(sum) << 33);
  EXPECT_EQ(uv[1], 1ull);
  EXPECT_EQ(fetch(floats)[0], 0.5f * n);
  EXPECT_EQ(fetch(fmax)[0], 0.5f * (n - 1));
  for (unsigned v : fetch(hist)) EXPECT_EQ(v, static_cast<unsigned>(2 * threads / 8));
}

// The block collectives of clocked threads, on a block whose last warp is partial (100 threads: 32, 32, 32, 4):
// reductions combine in detail::tree_reduce's order (bit-identical float sums), scans in detail::tree_scan's.
inline void clocked_collectives(apgas::place p) {
  constexpr int threads = 100, blocks = 2, outs = 10;
  KC_ARRAY(float, out, p, static_cast<std::size_t>(blocks * threads * outs));
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, threads}, [=] APGAS_KERNEL (apgas::clocked_thread t) {
    const int me = t.thread();
    const float v = 1.0f / static_cast<float>(me + 1) + static_cast<float>(t.block());
    float* o = out.data() + (t.block() * threads + me) * outs;
    o[0] = t.reduce(v, apgas::plus{});
    o[1] = t.reduce(v, apgas::minimum{});
    o[2] = t.reduce(v, apgas::maximum{});
    o[3] = t.inclusive_scan(v, apgas::plus{});
    o[4] = t.exclusive_scan(v, 10.0f, apgas::plus{});
    o[5] = static_cast<float>(t.inclusive_scan(me % 3, apgas::plus{}));
    o[6] = t.broadcast(v, 37);
    o[7] = static_cast<float>(t.advance_count(me % 7 == 0));
    o[8] = t.advance_and(me < 1000) ? 1.0f : 0.0f;
    o[9] = t.advance_or(me == 99) ? 1.0f : 0.0f;
  }));
  const std::vector<float> got = fetch(out);
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> v(threads), sum(threads), incl(threads);
    std::vector<bool> present(threads, true);
    std::vector<int> m3(threads);
    for (int i = 0; i < threads; ++i) {
      v[i] = 1.0f / static_cast<float>(i + 1) + static_cast<float>(b);
      m3[i] = i % 3;
    }
    sum = v;
    bool pres[threads];
    for (bool& q : pres) q = true;
    apgas::detail::tree_reduce(sum.data(), pres, threads, apgas::plus{});
    incl = v;
    apgas::detail::tree_scan(incl.data(), threads, apgas::plus{});
    apgas::detail::tree_scan(m3.data(), threads, apgas::plus{});
    for (int i = 0; i < threads; ++i) {
      const float* o = got.data() + (b * threads + i) * outs;
      EXPECT_EQ(bits(o[0]), bits(sum[0])) << "block " << b << " thread " << i;
      EXPECT_EQ(o[1], v[threads - 1]);
      EXPECT_EQ(o[2], v[0]);
      EXPECT_EQ(bits(o[3]), bits(incl[i]));
      EXPECT_EQ(bits(o[4]), bits(i == 0 ? 10.0f : 10.0f + incl[i - 1]));
      EXPECT_EQ(o[5], static_cast<float>(m3[i]));
      EXPECT_EQ(o[6], v[37]);
      EXPECT_EQ(o[7], 15.0f);  // 0, 7, ..., 98
      EXPECT_EQ(o[8], 1.0f);
      EXPECT_EQ(o[9], 1.0f);
    }
  }
}

// Warp operations on a block of 70 threads (warps of 32, 32 and 6).
inline void warp_ops(apgas::place p) {
  constexpr int threads = 70, outs = 7;
  KC_ARRAY(int, out, p, static_cast<std::size_t>(threads * outs));
  apgas::at(p, apgas::cuda_kernel(apgas::grid{1, threads}, [=] APGAS_KERNEL (apgas::clocked_thread t) {
    const int me = t.thread();
    int* o = out.data() + me * outs;
    const int v = me * 10, active = t.threads() - (me - t.lane()) < 32 ? t.threads() - (me - t.lane()) : 32;
    o[0] = t.shfl(v, 3);  // lane 3 of the warp
    // The next lane (own value past the warp's end); in the last warp, of 6 lanes, the last reads itself: a lane past
    // the block's last thread gives anything on a GPU (the checking mode reports it).
    o[1] = t.shfl_down(v, t.lane() + 1 < active || active == 32 ? 1 : 0);
    o[2] = t.shfl_up(v, 2);         // two lanes back (own value before lane 0)
    o[3] = t.shfl_xor(v, 1);        // the pair partner
    o[4] = static_cast<int>(t.ballot(me % 2 == 0));
    o[5] = t.all(me < 64) ? 1 : 0;
    o[6] = t.any(me == 5) ? 1 : 0;
  }));
  const std::vector<int> got = fetch(out);
  for (int me = 0; me < threads; ++me) {
    const int lane = me % 32, base = me - lane, active = std::min(32, threads - base);
    const int* o = got.data() + me * outs;
    if (active > 3) {
      EXPECT_EQ(o[0], (base + 3) * 10) << me;
    }
    EXPECT_EQ(o[1], lane + 1 < active ? (me + 1) * 10 : me * 10) << me;
    EXPECT_EQ(o[2], lane >= 2 ? (me - 2) * 10 : me * 10) << me;
    if ((lane ^ 1) < active) {
      EXPECT_EQ(o[3], (me ^ 1) * 10) << me;
    }
    unsigned even = 0;
    for (int l = 0; l < active; l += 2) even |= 1u << l;
    EXPECT_EQ(static_cast<unsigned>(o[4]), even) << me;
    EXPECT_EQ(o[5], base < 64 ? 1 : 0) << me;
    EXPECT_EQ(o[6], base == 0 ? 1 : 0) << me;
  }
}

// A block-level body on 2-D blocks (8 x 5): per-thread values (per_thread, per_thread_array) survive sync, single,
// reduce, scans, count/all/any; for_threads_in (boxes of threads, clipped to the block) and prefetch.
inline void block_level(apgas::place p) {
  constexpr int bx = 8, by = 5, threads = bx * by, blocks = 3, outs = 6;
  KC_ARRAY(float, out, p, static_cast<std::size_t>(blocks * threads * outs));
  KC_ARRAY(float, per_block, p, static_cast<std::size_t>(blocks * 5));
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, {bx, by}}, apgas::shared<float>(threads),
                                  [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<float> sh) {
    float* o = out.data() + b.block() * threads * outs;
    auto mine = b.per_thread<float>(0.0f);
    auto two = b.per_thread_array<float, 2>(-1.0f);  // [k][t]: [0] set below, [1] keeps its initial value
    b.for_threads([&](apgas::thread_index t) {
      mine[t] = static_cast<float>(t.linear) * 0.25f + static_cast<float>(b.block());
      two[0][t] = mine[t] + 1.0f;
      sh[static_cast<std::size_t>(t.linear)] = mine[t];
    });
    b.sync();
    b.for_threads([&](apgas::thread_index t) {  // read a neighbour's value: visible after sync
      o[t.linear * outs + 0] = sh[static_cast<std::size_t>((t.linear + 1) % threads)] + mine[t];
    });
    const float total = b.reduce([&](apgas::thread_index t) { return mine[t]; }, apgas::plus{});
    const float first = b.single([&] { return sh[0] * 2.0f; });
    auto incl = b.inclusive_scan([&](apgas::thread_index t) { return mine[t]; }, apgas::plus{});
    auto excl = b.exclusive_scan([&](apgas::thread_index t) { return t.x; }, 100, apgas::plus{});
    const int odd = b.count([&](apgas::thread_index t) { return t.linear % 2 == 1; });
    const bool all_small = b.all([&](apgas::thread_index t) { return t.y < by; });
    const bool any_big = b.any([&](apgas::thread_index t) { return t.linear > 1000; });
    b.for_threads([&](apgas::thread_index t) {
      o[t.linear * outs + 1] = incl[t];
      o[t.linear * outs + 2] = static_cast<float>(excl[t]);
      o[t.linear * outs + 3] = two[0][t];
      o[t.linear * outs + 4] = two[1][t];
      o[t.linear * outs + 5] = -7.0f;
    });
    b.prefetch(o, threads * outs);  // a hint: changes nothing
    // for_threads_in: the threads of a box, each on its own (no sync between its writes and theirs); clipped boxes
    b.for_threads_in({2, 1, 0}, {5, 3, 1}, [&](apgas::thread_index t) {
      o[t.linear * outs + 5] = 10.0f + static_cast<float>(t.linear) + 0.5f * static_cast<float>(t.x);
    });
    b.for_threads_in({bx - 1, by - 1, -3}, {100, 100, 5},
                     [&](apgas::thread_index t) { o[t.linear * outs + 5] += 1000.0f; });
    b.for_threads_in({3, 3, 0}, {2, 4, 1}, [&](apgas::thread_index t) { o[t.linear * outs + 5] = 1e9f; });  // empty
    b.single([&] {
      float* pb = per_block.data() + b.block() * 5;
      pb[0] = total;
      pb[1] = first;
      pb[2] = static_cast<float>(odd);
      pb[3] = all_small ? 1.0f : 0.0f;
      pb[4] = any_big ? 1.0f : 0.0f;
      return 0;
    });
  }));
  const std::vector<float> got = fetch(out);
  const std::vector<float> pb = fetch(per_block);
  for (int blk = 0; blk < blocks; ++blk) {
    std::vector<float> v(threads), red(threads), incl(threads);
    std::vector<int> xs(threads);
    for (int i = 0; i < threads; ++i) {
      v[i] = static_cast<float>(i) * 0.25f + static_cast<float>(blk);
      xs[i] = i % bx;
    }
    red = v;
    bool pres[threads];
    for (bool& q : pres) q = true;
    apgas::detail::tree_reduce(red.data(), pres, threads, apgas::plus{});
    incl = v;
    apgas::detail::tree_scan(incl.data(), threads, apgas::plus{});
    apgas::detail::tree_scan(xs.data(), threads, apgas::plus{});
    for (int i = 0; i < threads; ++i) {
      const float* o = got.data() + (blk * threads + i) * outs;
      EXPECT_EQ(o[0], v[(i + 1) % threads] + v[i]) << "block " << blk << " thread " << i;
      EXPECT_EQ(bits(o[1]), bits(incl[i]));
      EXPECT_EQ(o[2], static_cast<float>(i == 0 ? 100 : 100 + xs[i - 1]));
      EXPECT_EQ(o[3], v[i] + 1.0f);  // per_thread_array: survives sync and the collectives
      EXPECT_EQ(o[4], -1.0f);
      const int x = i % bx, y = i / bx;
      const bool in_box = x >= 2 && x < 5 && y >= 1 && y < 3;
      const float boxed = in_box ? 10.0f + static_cast<float>(i) + 0.5f * static_cast<float>(x) : -7.0f;
      EXPECT_EQ(o[5], boxed + (x == bx - 1 && y == by - 1 ? 1000.0f : 0.0f)) << "for_threads_in, thread " << i;
    }
    EXPECT_EQ(bits(pb[blk * 5 + 0]), bits(red[0]));
    EXPECT_EQ(pb[blk * 5 + 1], v[0] * 2.0f);
    EXPECT_EQ(pb[blk * 5 + 2], static_cast<float>(threads / 2));
    EXPECT_EQ(pb[blk * 5 + 3], 1.0f);
    EXPECT_EQ(pb[blk * 5 + 4], 0.0f);
  }
}

// for_range, CUDA's block-stride loop, on 2-D blocks of 6 x 4: every i of [0, n) once, whatever n is against the
// block (more, fewer, none; int and long indices), and a thread's own iterations in order: iteration i reads what
// iteration i - 24 (the same thread's previous one) wrote, in global and in shared memory, with no barrier between.
// APGAS_UNROLL before a loop changes nothing in what it computes.
inline void block_stride(apgas::place p) {
  constexpr int bx = 6, by = 4, threads = bx * by, blocks = 2, n = 100;
  KC_ARRAY(long, out, p, static_cast<std::size_t>(blocks * n));
  KC_ARRAY(int, chained, p, static_cast<std::size_t>(blocks * n));
  KC_ARRAY(int, few, p, static_cast<std::size_t>(blocks * threads));
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, {bx, by}}, apgas::shared<int>(n),
                                  [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<int> sh) {
    long* o = out.data() + b.block() * n;
    int* c = chained.data() + b.block() * n;
    b.for_range(long{n}, [&](long i) { o[i] = 1000 * b.block() + i; });
    b.for_range(n, [&](int i) {
      sh[static_cast<std::size_t>(i)] = (i >= threads ? sh[static_cast<std::size_t>(i - threads)] : 0) + i;
      c[i] = (i >= threads ? c[i - threads] : 0) + 1;
    });
    b.sync();
    b.for_range(n, [&](int i) { c[i] += 1000 * sh[static_cast<std::size_t>(i)]; });
    int* f = few.data() + b.block() * threads;
    b.for_range(5, [&](int i) {
      int s = 0;
      APGAS_UNROLL(2) for (int k = 0; k <= i; ++k) s += k;
      f[i] = s + 1;
    });
    b.for_range(0, [&](int i) { f[i] = -1; });
    b.for_range(-3, [&](int) { f[0] = -1; });
  }));
  const std::vector<long> got = fetch(out);
  const std::vector<int> ch = fetch(chained);
  const std::vector<int> fw = fetch(few);
  for (int blk = 0; blk < blocks; ++blk) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[blk * n + i], 1000L * blk + i) << "block " << blk << " i " << i;
      int sum = 0;
      for (int j = i; j >= 0; j -= threads) sum += j;
      EXPECT_EQ(ch[blk * n + i], i / threads + 1 + 1000 * sum) << "block " << blk << " i " << i;
    }
    for (int i = 0; i < threads; ++i) {
      EXPECT_EQ(fw[blk * threads + i], i < 5 ? i * (i + 1) / 2 + 1 : 0) << "block " << blk << " i " << i;
    }
  }
}

// for_threads_coarse_x, a thread's n points along x a block's width apart, on 3-D blocks whose width is a multiple
// of 16 and is not (the two loops of a CPU place): every thread of the box (clipped to the block) calls f(t, h) for
// h = 0, ..., n - 1 in order, and no other thread does. Point h of a thread adds one to what its point h - 1 stored,
// in global and in shared memory, with no barrier between (one thread's own work); the checking mode stays silent.
// (A function of its own on a CPU place, inlined on a GPU: APGAS_CPU_NOINLINE changes nothing in what it computes.)
APGAS_CPU_NOINLINE APGAS_KERNEL inline int next_point(int previous) { return previous + 1; }
inline void coarse_x_block(apgas::place p, int bx) {
  constexpr int by = 3, bz = 2, n = 3, blocks = 2;
  const int row = n * bx, cells = row * by * bz;
  KC_ARRAY(int, out, p, static_cast<std::size_t>(blocks * cells));
  KC_ARRAY(int, staged, p, static_cast<std::size_t>(blocks * cells));
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, {bx, by, bz}}, apgas::shared<int>(static_cast<std::size_t>(cells)),
                                  [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<int> sh) {
    int* o = out.data() + b.block() * cells;
    auto at = [&](apgas::thread_index t, int h) { return (t.z * by + t.y) * row + t.x + h * bx; };
    b.for_threads([&](apgas::thread_index t) {
      for (int h = 0; h < n; ++h) sh[static_cast<std::size_t>(at(t, h))] = -1;
    });
    b.sync();
    b.for_threads_coarse_x(n, {1, 0, -4}, {100, 2, bz}, [&](apgas::thread_index t, int h) {
      const int i = at(t, h);
      o[i] = h == 0 ? 1000 * t.linear : next_point(o[i - bx]);
      sh[static_cast<std::size_t>(i)] = h == 0 ? 1000 * t.linear + 7 : sh[static_cast<std::size_t>(i - bx)] + 1;
    });
    b.for_threads_coarse_x(0, {0, 0, 0}, {bx, by, bz}, [&](apgas::thread_index, int) { o[0] = -5; });  // no points
    b.for_threads_coarse_x(n, {2, 1, 0}, {2, by, bz}, [&](apgas::thread_index, int) { o[0] = -6; });   // empty box
    b.sync();
    b.for_threads([&](apgas::thread_index t) {
      for (int h = 0; h < n; ++h) {
        staged.data()[b.block() * cells + at(t, h)] = sh[static_cast<std::size_t>(at(t, h))];
      }
    });
  }));
  const std::vector<int> got = fetch(out), st = fetch(staged);
  for (int blk = 0; blk < blocks; ++blk) {
    for (int z = 0; z < bz; ++z) {
      for (int y = 0; y < by; ++y) {
        for (int x = 0; x < bx; ++x) {
          for (int h = 0; h < n; ++h) {
            const int i = (z * by + y) * row + x + h * bx, linear = (z * by + y) * bx + x;
            const bool in_box = x >= 1 && y < 2;
            EXPECT_EQ(got[blk * cells + i], in_box ? 1000 * linear + h : 0)
                << "bx " << bx << " block " << blk << " thread (" << x << ", " << y << ", " << z << ") point " << h;
            EXPECT_EQ(st[blk * cells + i], in_box ? 1000 * linear + 7 + h : -1)
                << "bx " << bx << " block " << blk << " thread (" << x << ", " << y << ", " << z << ") point " << h;
          }
        }
      }
    }
  }
}
inline void coarse_x(apgas::place p) {
  coarse_x_block(p, 16);
  coarse_x_block(p, 6);
}

// Shared-memory histograms filled with atomic_add(s, i, v) from block-level loops (tpacf's pattern): several threads
// of one run of the loop hit one bin, in 4- and 8-byte counters, integer and floating-point, of compile-time and
// run-time size; the old values atomic_add returns are checked too (for one bin they are 0, 1, 2, ... in some order,
// so their sum is fixed). On a CPU place for_threads is a loop compiled as independent iterations, whose add must not
// become a vector gather and scatter (under AVX-512 it did, and lanes hitting one bin lost their updates:
// tests/core/test_kernel_simd.cpp runs this in a file compiled for the build machine's widest vectors).
inline void shared_histogram(apgas::place p, apgas::grid g) {
  constexpr int bins = 8, rounds = 6;
  const int threads = static_cast<int>(g.threads.count()), blocks = static_cast<int>(g.blocks.count());
  const auto cells = static_cast<std::size_t>(blocks * bins);
  KC_ARRAY(unsigned, counts, p, cells);
  KC_ARRAY(unsigned long long, wide, p, cells);
  KC_ARRAY(int, ints, p, cells);
  KC_ARRAY(float, floats, p, cells);
  KC_ARRAY(double, doubles, p, cells);
  KC_ARRAY(unsigned, olds, p, static_cast<std::size_t>(blocks));
  apgas::at(p, apgas::cuda_kernel(g, apgas::shared<unsigned, bins>(), apgas::shared<unsigned long long>(bins),
                                  apgas::shared<int>(bins, -5), apgas::shared<float, bins>(), apgas::shared<double>(bins),
                                  [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<unsigned, bins> c,
                                                    apgas::shared_span<unsigned long long> w, apgas::shared_span<int> n,
                                                    apgas::shared_span<float, bins> f, apgas::shared_span<double> d) {
    auto seen = b.per_thread<unsigned>(0u);  // the sum of the old values this thread's adds to c returned
    for (int r = 0; r < rounds; ++r) {
      b.for_threads([&](apgas::thread_index t) {
        const auto bin = static_cast<std::size_t>((t.linear / 3 + r) % bins);  // runs of 3 threads on one bin
        seen[t] += apgas::atomic_add(c, bin, 1u);
        apgas::atomic_add(w, bin, static_cast<unsigned long long>(t.linear + 1) << 32);
        apgas::atomic_add(n, bin, t.linear - 20);
        apgas::atomic_add(f, bin, 0.5f);
        apgas::atomic_add(d, bin, static_cast<double>(t.linear) * 0.25);
      });
    }
    // the threads of a box (the block's first row): bins 0 and 1 in turn
    b.for_threads_in({0, 0, 0}, {1 << 20, 1, 1}, [&](apgas::thread_index t) {
      seen[t] += apgas::atomic_add(c, static_cast<std::size_t>(t.x % 2), 1u);
    });
    b.sync();
    const unsigned sum = b.reduce([&](apgas::thread_index t) { return seen[t]; }, apgas::plus{});
    const long k = b.block();
    b.for_threads([&](apgas::thread_index t) {
      if (t.linear >= bins) return;
      const auto i = static_cast<std::size_t>(t.linear);
      counts.data()[k * bins + t.linear] = c[i];
      wide.data()[k * bins + t.linear] = w[i];
      ints.data()[k * bins + t.linear] = n[i];
      floats.data()[k * bins + t.linear] = f[i];
      doubles.data()[k * bins + t.linear] = d[i];
    });
    b.single([&] { return olds.data()[k] = sum; });
  }));
  const std::vector<unsigned> got_c = fetch(counts), got_o = fetch(olds);
  const std::vector<unsigned long long> got_w = fetch(wide);
  const std::vector<int> got_n = fetch(ints);
  const std::vector<float> got_f = fetch(floats);
  const std::vector<double> got_d = fetch(doubles);
  std::vector<unsigned> c(bins, 0);
  std::vector<unsigned long long> w(bins, 0);
  std::vector<int> n(bins, -5);
  std::vector<float> f(bins, 0.0f);
  std::vector<double> d(bins, 0.0);
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < threads; ++t) {
      const auto bin = static_cast<std::size_t>((t / 3 + r) % bins);
      c[bin] += 1;
      w[bin] += static_cast<unsigned long long>(t + 1) << 32;
      n[bin] += t - 20;
      f[bin] += 0.5f;
      d[bin] += static_cast<double>(t) * 0.25;
    }
  }
  for (int x = 0; x < g.threads.x; ++x) c[static_cast<std::size_t>(x % 2)] += 1;
  unsigned old_sum = 0;
  for (unsigned m : c) old_sum += m * (m - 1) / 2;
  for (int k = 0; k < blocks; ++k) {
    for (std::size_t i = 0; i < bins; ++i) {
      const std::size_t at = static_cast<std::size_t>(k * bins) + i;
      EXPECT_EQ(got_c[at], c[i]) << "block " << k << " bin " << i;
      EXPECT_EQ(got_w[at], w[i]) << "block " << k << " bin " << i;
      EXPECT_EQ(got_n[at], n[i]) << "block " << k << " bin " << i;
      EXPECT_EQ(got_f[at], f[i]) << "block " << k << " bin " << i;
      EXPECT_EQ(got_d[at], d[i]) << "block " << k << " bin " << i;
    }
    EXPECT_EQ(got_o[static_cast<std::size_t>(k)], old_sum) << "block " << k << ": the old values atomic_add returned";
  }
}
// Blocks of 64 threads (on a CPU place runs of 16 threads), and of 12 x 3 (runs of 8, then single threads).
inline void shared_histograms(apgas::place p) {
  shared_histogram(p, apgas::grid{3, 64});
  shared_histogram(p, apgas::grid{2, {12, 3}});
}

// stage: a window of a 2-D array with a halo, read through the tile after sync (a GPU copies it into shared memory, a
// CPU place reads the array); two windows in one shared array (subspan), the second clipped to the array's edge.
inline void staged_tiles(apgas::place p) {
  constexpr int nx = 24, ny = 10, bx = 8, by = 4, blocks_x = nx / bx, blocks_y = 2;  // blocks cover rows 1 .. 8
  std::vector<float> host(static_cast<std::size_t>(nx * ny));
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 37) % 101) * 0.5f;
  KC_ARRAY(float, in, p, host.size());
  KC_ARRAY(float, out, p, host.size() * 2);
  apgas::finish([&] { apgas::async_copy(std::span<const float>(host), in); });
  constexpr int cells = (bx + 2) * (by + 2);
  apgas::at(p, apgas::cuda_kernel(apgas::grid{{blocks_x, blocks_y}, {bx, by}}, apgas::shared_uninit<float>(2 * cells),
                                  [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<float> sh) {
    const int x0 = b.block_idx().x * bx, y0 = 1 + b.block_idx().y * by;
    const float* corner = in.data() + y0 * nx + x0;
    // the window with its halo (clipped at the array's left and right edges), and a halo-less one
    const apgas::tile<float> t = b.stage(sh.subspan(0, cells), corner, nx, {x0 > 0 ? -1 : 0, -1},
                                         {x0 + bx < nx ? bx + 1 : bx, by + 1});
    const apgas::tile<float> u = b.stage(sh.subspan(cells, cells), corner, nx, {0, 0}, {bx, by});
    b.sync();
    b.for_threads([&](apgas::thread_index i) {
      const int g = (y0 + i.y) * nx + x0 + i.x;
      const float left = x0 + i.x > 0 ? t(i.x - 1, i.y) : 0.0f, right = x0 + i.x < nx - 1 ? t(i.x + 1, i.y) : 0.0f;
      out.data()[g] = left + right + t(i.x, i.y - 1) + t(i.x, i.y + 1);
      out.data()[nx * ny + g] = u(i.x, i.y) * 2.0f;
    });
  }));
  const std::vector<float> got = fetch(out);
  for (int y = 1; y < 1 + blocks_y * by; ++y) {
    for (int x = 0; x < nx; ++x) {
      const auto at = [&](int xx, int yy) {
        return xx < 0 || xx >= nx ? 0.0f : host[static_cast<std::size_t>(yy * nx + xx)];
      };
      const std::size_t g = static_cast<std::size_t>(y * nx + x);
      EXPECT_EQ(got[g], at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1)) << "x " << x << " y " << y;
      EXPECT_EQ(got[host.size() + g], host[g] * 2.0f) << "x " << x << " y " << y;
    }
  }
}

// Shared arrays of compile-time size (filled per block), unfilled ones the kernel fills itself, std::span views.
inline void shared_forms(apgas::place p) {
  constexpr int blocks = 3, threads = 32;
  KC_ARRAY(int, out, p, static_cast<std::size_t>(blocks * threads));
  KC_ARRAY(int, sizes, p, 2);
  apgas::at(p, apgas::cuda_kernel(apgas::grid{blocks, threads}, apgas::shared<int, threads>(7),
                                  apgas::shared_uninit<int>(threads), apgas::shared_uninit<int, 4>(),
                                  [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<int, threads> filled,
                                                    std::span<int> scratch, apgas::shared_span<int, 4> tiny) {
    const int me = t.thread();
    int* o = out.data() + t.block() * threads;
    const int was = filled[static_cast<std::size_t>(me)];  // 7 in every block, whatever the block before did
    filled[static_cast<std::size_t>(me)] = me + static_cast<int>(t.block());
    scratch[static_cast<std::size_t>(me)] = me * 2;
    if (me < 4) tiny[static_cast<std::size_t>(me)] = me;
    t.advance();
    o[me] = was * 1000 + filled[static_cast<std::size_t>((me + 1) % threads)] * 10 +
            scratch[static_cast<std::size_t>(threads - 1 - me)] + tiny[static_cast<std::size_t>(me % 4)] * 100000;
    if (t.global_id() == 0) {
      sizes.data()[0] = static_cast<int>(filled.size());
      sizes.data()[1] = static_cast<int>(tiny.size());
    }
  }));
  const std::vector<int> got = fetch(out);
  for (int b = 0; b < blocks; ++b) {
    for (int me = 0; me < threads; ++me) {
      EXPECT_EQ(got[b * threads + me],
                7000 + (((me + 1) % threads) + b) * 10 + (threads - 1 - me) * 2 + (me % 4) * 100000);
    }
  }
  EXPECT_EQ(fetch(sizes), (std::vector<int>{threads, 4}));
}

// launch_bounds: a launch with more threads per block than the bound is refused before anything runs.
inline void launch_bounds(apgas::place p) {
  KC_ARRAY(int, hits, p, 1);
  const auto body = [=] APGAS_KERNEL (apgas::thread) { apgas::atomic_add(hits.data()[0], 1); };
  apgas::at(p, apgas::cuda_kernel(apgas::launch_bounds<64>(apgas::grid{2, 64}), body));
  EXPECT_EQ(fetch(hits)[0], 128);
  try {
    apgas::at(p, apgas::cuda_kernel(apgas::launch_bounds<64>(apgas::grid{2, 65}), body));
    ADD_FAILURE() << "65 threads per block under launch_bounds<64> were not refused";
  } catch (const apgas::kernel_launch_error& e) {
    EXPECT_NE(std::string(e.what()).find("65 threads"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fetch(hits)[0], 128);
}

// An in-order queue: a copy in, 50 dependent launches and a copy out under one finish (each launch maps
// d[i] -> (3 d[i] + it) mod 1000003, so the result depends on their order); first with page-locked host memory (on a
// GPU the queue's stream takes every operation), then with pageable memory (the copies wait for the stream to drain).
inline void queue_pipeline(apgas::place p) {
  constexpr int n = 4096, iterations = 50;
  long expect = 1;
  for (int it = 0; it < iterations; ++it) expect = (3 * expect + it) % 1000003;
  KC_ARRAY(long, a, p, n);
  const auto pipeline = [&](std::span<const long> in, std::span<long> out) {
    apgas::finish([&] {
      auto q = apgas::in_order(p);
      q.async_copy(in, a);
      for (int it = 0; it < iterations; ++it) {
        q.async(apgas::cuda_kernel(apgas::grid{8, 64}, [=] APGAS_KERNEL (apgas::thread t) {
          long* d = a.data();
          for (long i = t.global_id(); i < n; i += t.global_count()) d[i] = (3 * d[i] + it) % 1000003;
        }));
      }
      q.async_copy(a, 0, out);
    });
  };
  const apgas::pinned_vector<long> pinned_in(n, 1);
  apgas::pinned_vector<long> pinned_out(n, 0);
  pipeline(pinned_in, pinned_out);
  for (long v : pinned_out) ASSERT_EQ(v, expect);
  const std::vector<long> in(n, 1);
  std::vector<long> out(n, 0);
  pipeline(in, out);
  for (long v : out) ASSERT_EQ(v, expect);
}

}  // namespace kernel_constructs
