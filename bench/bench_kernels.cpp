// apgas_bench_kernels: kernel closures on a CPU place against the same algorithms in OpenMP, in the same run, with as
// many worker threads as OpenMP threads. Each kernel is written in the forms of apgas/kernel_thread.hpp: clocked
// (CUDA-shaped: __syncthreads() style threads), block-level (thread_block) and, where natural, plain.
// Prints `ratio kernel_<name>_<form>_omp <ours/anchor> (ours <x> s, anchor <y> s)`; above 1 means ours is slower.
// Each figure is the median of --repeats runs (default 5), ours and the anchor interleaved; every result is checked.
//   apgas_bench_kernels [--repeats N] [--quick] [--only barrier|sgemm|stencil|reduce|blackscholes]
//                       [--form clocked|block|plain]
#include "kernels_common.hpp"

#include <apgas/apgas.hpp>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace kbench;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int g_threads = 2;
int g_repeats = 5;
std::string g_form;  // empty: every form

void report(const std::string& name, const std::vector<double>& ours, const std::vector<double>& anchor) {
  const double o = median(ours);
  const double a = median(anchor);
  std::printf("ratio %s %.3f (ours %.4f s, anchor %.4f s)\n", name.c_str(), o / a, o, a);
  std::fflush(stdout);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "apgas_bench_kernels: %s\n", what.c_str());
  std::exit(1);
}

// Time f inside an apgas run of g_threads workers (the run's start and end are not timed).
double time_apgas(const std::function<void()>& f) {
  apgas::config cfg;
  cfg.nthreads = g_threads;
  double s = 0;
  if (apgas::run(cfg, [&] {
        const auto t0 = clock_type::now();
        f();
        s = seconds_since(t0);
      }) != 0) {
    fail("a run failed");
  }
  return s;
}

double time_anchor(const std::function<void()>& f) {
  const auto t0 = clock_type::now();
  f();
  return seconds_since(t0);
}

// |a - b| <= atol + rtol |b| everywhere
void check_close(const char* what, const float* got, const float* want, long n, float rtol, float atol) {
  for (long i = 0; i < n; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      fail(std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
           std::to_string(want[i]));
    }
  }
}

void compare(const std::string& name, const std::function<void()>& ours, const std::function<void()>& anchor,
             const std::function<void()>& check) {
  if (!g_form.empty() && name.find("_" + g_form + "_") == std::string::npos) return;
  std::vector<double> o, a;
  for (int r = 0; r < g_repeats; ++r) {
    o.push_back(time_apgas(ours));
    check();
    a.push_back(time_anchor(anchor));
  }
  report(name, o, a);
}

// Ours (clocked) against the same CUDA-shaped kernel as OpenCL on the platform's CPU device, where there is one.
void compare_ocl(const std::string& name, const std::function<void()>& ours, const std::function<double()>& anchor,
                 const std::function<void()>& check) {
#if defined(APGAS_BENCH_OPENCL)
  if (!g_form.empty() && g_form != "clocked") return;
  std::string why;
  if (ocl_device(why).empty()) {
    std::printf("# %s: not measured: %s\n", name.c_str(), why.c_str());
    return;
  }
  std::vector<double> o, a;
  for (int r = 0; r < g_repeats; ++r) {
    o.push_back(time_apgas(ours));
    check();
    a.push_back(anchor());
    check();
  }
  report(name, o, a);
#else
  (void)ours, (void)anchor, (void)check;
  std::printf("# %s: not measured: built without OpenCL headers (ocl-icd-opencl-dev, opencl-headers)\n", name.c_str());
#endif
}

// ---- SGEMM: C = A B, n x n, 16x16 tiles in shared memory --------------------------------------------------------

void bench_sgemm(int n) {
  std::vector<float> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size()), ref(a.size());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  sgemm_omp(a.data(), b.data(), ref.data(), n);
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  const apgas::grid g{{n / tile, n / tile}, {tile, tile}};
  auto check = [&] {
    check_close("sgemm", c.data(), ref.data(), static_cast<long>(c.size()), 1e-4f, 1e-4f);
    std::fill(c.begin(), c.end(), 0.0f);
  };
  auto anchor = [&] { sgemm_omp(pa, pb, ref.data(), n); };

  // Clocked: the CUDA kernel as written for a GPU (the tiled SGEMM of the CUDA programming guide).
  auto clocked = [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(g, apgas::shared_uninit<float, tile * tile>(), apgas::shared_uninit<float, tile * tile>(),
        [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<float, tile * tile> as,
                          apgas::shared_span<float, tile * tile> bs) {
          const int tx = t.thread_idx().x, ty = t.thread_idx().y;
          const int row = t.block_idx().y * tile + ty, col = t.block_idx().x * tile + tx;
          float acc = 0;
          for (int k0 = 0; k0 < n; k0 += tile) {
            as[ty * tile + tx] = pa[row * n + k0 + tx];
            bs[ty * tile + tx] = pb[(k0 + ty) * n + col];
            t.advance();
            for (int k = 0; k < tile; ++k) acc += as[ty * tile + k] * bs[k * tile + tx];
            t.advance();
          }
          pc[row * n + col] = acc;
        }));
  };
  compare("kernel_sgemm_clocked_omp", clocked, anchor, check);
#if defined(APGAS_BENCH_OPENCL)
  compare_ocl("kernel_sgemm_clocked_pocl", clocked, [&] { return sgemm_ocl(pa, pb, pc, n); }, check);
#else
  compare_ocl("kernel_sgemm_clocked_pocl", clocked, nullptr, check);
#endif

  // Block level: the same kernel, the block's threads as for_threads loops.
  compare("kernel_sgemm_block_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(g, apgas::shared_uninit<float, tile * tile>(), apgas::shared_uninit<float, tile * tile>(),
        [=] APGAS_KERNEL (apgas::thread_block blk, apgas::shared_span<float, tile * tile> as,
                          apgas::shared_span<float, tile * tile> bs) {
          const int by = blk.block_idx().y, bx = blk.block_idx().x;
          auto acc = blk.per_thread<float>(0.0f);
          for (int k0 = 0; k0 < n; k0 += tile) {
            blk.for_threads([&](apgas::thread_index t) {
              as[t.y * tile + t.x] = pa[(by * tile + t.y) * n + k0 + t.x];
              bs[t.y * tile + t.x] = pb[(k0 + t.y) * n + bx * tile + t.x];
            });
            blk.sync();
            blk.for_threads([&](apgas::thread_index t) {
              float s = acc[t];
              for (int k = 0; k < tile; ++k) s += as[t.y * tile + k] * bs[k * tile + t.x];
              acc[t] = s;
            });
            blk.sync();
          }
          blk.for_threads([&](apgas::thread_index t) { pc[(by * tile + t.y) * n + bx * tile + t.x] = acc[t]; });
        }));
  }, anchor, check);
}

// ---- 7-point stencil (Parboil's), iterations x (nx x ny x nz), z-sweep per thread with a shared plane ------------

void bench_stencil(int nx, int ny, int nz, int iterations) {
  if (nx % stencil_tx != 0 || ny % stencil_ty != 0 || nz < 3 || nx - 2 > 512) {
    fail("stencil: the volume must tile into 32x8 columns and its rows fit a block");
  }
  const std::size_t cells = static_cast<std::size_t>(nx) * ny * nz;
  std::vector<float> init(cells);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& v : init) v = u(rng);
  std::vector<float> r0 = init, r1 = init;
  stencil_omp(r0.data(), r1.data(), nx, ny, nz, iterations);
  const std::vector<float>& ref = iterations % 2 == 0 ? r0 : r1;
  std::vector<float> a0, a1;
  auto reset = [&] {
    a0 = init;
    a1 = init;
  };
  reset();
  std::vector<float> w0, w1;
  auto anchor = [&] {
    w0 = init;
    w1 = init;
    stencil_omp(w0.data(), w1.data(), nx, ny, nz, iterations);
  };
  auto check = [&] {
    const std::vector<float>& got = iterations % 2 == 0 ? a0 : a1;
    check_close("stencil", got.data(), ref.data(), static_cast<long>(cells), 1e-5f, 1e-5f);
    reset();
  };
  const apgas::grid g{{(nx + stencil_tx - 1) / stencil_tx, (ny + stencil_ty - 1) / stencil_ty}, {stencil_tx, stencil_ty}};
  constexpr int sw = stencil_tx + 2;  // the shared plane with its halo
  constexpr int sh_elems = (stencil_tx + 2) * (stencil_ty + 2);

  auto clocked = [&] {
    float* in = a0.data();
    float* out = a1.data();
    for (int it = 0; it < iterations; ++it) {
      apgas::at(apgas::here(), apgas::cuda_kernel(g, apgas::shared_uninit<float, sh_elems>(),
          [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<float, sh_elems> sh) {
            const int tx = t.thread_idx().x, ty = t.thread_idx().y;
            const int i = t.block_idx().x * stencil_tx + tx, j = t.block_idx().y * stencil_ty + ty;
            const bool inside = i < nx && j < ny;
            const bool interior = i > 0 && i < nx - 1 && j > 0 && j < ny - 1;
            float bottom = inside ? in[idx3(i, j, 0, nx, ny)] : 0.0f;
            float current = inside ? in[idx3(i, j, 1, nx, ny)] : 0.0f;
            for (int k = 1; k < nz - 1; ++k) {
              const float top = inside ? in[idx3(i, j, k + 1, nx, ny)] : 0.0f;
              sh[(ty + 1) * sw + tx + 1] = current;
              if (tx == 0 && i > 0 && j < ny) sh[(ty + 1) * sw] = in[idx3(i - 1, j, k, nx, ny)];
              if (tx == stencil_tx - 1 && i + 1 < nx && j < ny) sh[(ty + 1) * sw + tx + 2] = in[idx3(i + 1, j, k, nx, ny)];
              if (ty == 0 && j > 0 && i < nx) sh[tx + 1] = in[idx3(i, j - 1, k, nx, ny)];
              if (ty == stencil_ty - 1 && j + 1 < ny && i < nx) sh[(ty + 2) * sw + tx + 1] = in[idx3(i, j + 1, k, nx, ny)];
              t.advance();
              if (interior) {
                out[idx3(i, j, k, nx, ny)] = (sh[(ty + 1) * sw + tx] + sh[(ty + 1) * sw + tx + 2] + sh[ty * sw + tx + 1] +
                                              sh[(ty + 2) * sw + tx + 1] + bottom + top) * stencil_c1 - current * stencil_c0;
              }
              t.advance();
              bottom = current;
              current = top;
            }
          }));
      std::swap(in, out);
    }
  };
  compare("kernel_stencil_clocked_omp", clocked, anchor, check);
#if defined(APGAS_BENCH_OPENCL)
  compare_ocl("kernel_stencil_clocked_pocl", clocked,
              [&] { return stencil_ocl(a0.data(), a1.data(), nx, ny, nz, iterations); }, check);
#else
  compare_ocl("kernel_stencil_clocked_pocl", clocked, nullptr, check);
#endif

  // Block level: a block is two rows of the interior, one thread per point, and walks the planes k; the neighbours
  // come from memory (a GPU's caches serve them; the edges of the volume are never written). Whole rows are what a
  // CPU's prefetchers follow and what a GPU reads coalesced; no thread falls outside the interior, so the thread loop
  // has no branch and vectorises.
  const apgas::grid rows{{1, (ny - 2) / 2}, {nx - 2, 2}};
  compare("kernel_stencil_block_omp", [&] {
    float* in = a0.data();
    float* out = a1.data();
    const long plane = static_cast<long>(nx) * ny;
    for (int it = 0; it < iterations; ++it) {
      apgas::at(apgas::here(), apgas::cuda_kernel(rows, [=] APGAS_KERNEL (apgas::thread_block blk) {
        const int w = nx;  // locals: the compiler need not reload captures around the stores
        const long pl = plane;
        const long row0 = static_cast<long>(1 + blk.block_idx().y * 2) * w + 1;
        for (int k = 1; k < nz - 1; ++k) {
          const float* c = in + k * pl + row0;
          float* o = out + k * pl + row0;
          blk.for_threads([&](apgas::thread_index t) {
            const long at = static_cast<long>(t.y) * w + t.x;
            o[at] = (c[at - 1] + c[at + 1] + c[at - w] + c[at + w] + c[at - pl] + c[at + pl]) * stencil_c1 -
                    c[at] * stencil_c0;
          });
        }
      }));
      std::swap(in, out);
    }
  }, anchor, check);
}

// ---- block reduction: per block, a grid-stride partial sum per thread, then the block's total ------------------

void bench_reduce(long n, int blocks) {
  std::vector<float> x(static_cast<std::size_t>(n));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& v : x) v = u(rng);
  std::vector<float> partial(static_cast<std::size_t>(blocks)), ref(partial.size());
  reduce_omp(x.data(), n, blocks, ref.data());
  const float* px = x.data();
  float* pp = partial.data();
  auto anchor = [&] { reduce_omp(px, n, blocks, ref.data()); };
  auto check = [&] {
    check_close("reduce", partial.data(), ref.data(), blocks, 1e-4f, 1e-3f);
    std::fill(partial.begin(), partial.end(), 0.0f);
  };
  const apgas::grid g{blocks, reduce_threads};

  // Clocked: the CUDA SDK's shared-memory tree (Parboil RPES's shape).
  compare("kernel_reduce_clocked_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(g, apgas::shared_uninit<float, reduce_threads>(),
        [=] APGAS_KERNEL (apgas::clocked_thread t, apgas::shared_span<float, reduce_threads> sh) {
          float s = 0;
          for (long i = t.global_id(); i < n; i += t.global_count()) s += px[i];
          sh[t.thread()] = s;
          t.advance();
          for (int stride = reduce_threads / 2; stride > 0; stride /= 2) {
            if (t.thread() < stride) sh[t.thread()] += sh[t.thread() + stride];
            t.advance();
          }
          if (t.thread() == 0) pp[t.block()] = sh[0];
        }));
  }, anchor, check);

  compare("kernel_reduce_block_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(g, [=] APGAS_KERNEL (apgas::thread_block blk) {
      auto s = blk.per_thread<float>(0.0f);
      const long stride = blk.blocks() * reduce_threads;
      long base = blk.block() * reduce_threads;
      for (; base + reduce_threads <= n; base += stride) {  // whole strides
        blk.for_threads([&](apgas::thread_index t) { s[t] += px[base + t.linear]; });
      }
      if (base < n) {
        blk.for_threads([&](apgas::thread_index t) {
          if (base + t.linear < n) s[t] += px[base + t.linear];
        });
      }
      const float total = blk.reduce([&](apgas::thread_index t) { return s[t]; }, apgas::plus{});
      blk.single([&] { return pp[blk.block()] = total; });
    }));
  }, anchor, check);
}

// ---- Black-Scholes: n options, grid-stride ---------------------------------------------------------------------

void bench_black_scholes(long n) {
  std::vector<float> s(static_cast<std::size_t>(n)), x(s.size()), t(s.size());
  std::mt19937 rng(5347);
  std::uniform_real_distribution<float> us(5, 30), ux(1, 100), ut(0.25f, 10);
  for (long i = 0; i < n; ++i) {
    s[static_cast<std::size_t>(i)] = us(rng);
    x[static_cast<std::size_t>(i)] = ux(rng);
    t[static_cast<std::size_t>(i)] = ut(rng);
  }
  std::vector<float> call(s.size()), put(s.size()), rcall(s.size()), rput(s.size());
  black_scholes_omp(s.data(), x.data(), t.data(), rcall.data(), rput.data(), n);
  const float* ps = s.data();
  const float* px = x.data();
  const float* pt = t.data();
  float* pc = call.data();
  float* pp = put.data();
  auto anchor = [&] { black_scholes_omp(ps, px, pt, rcall.data(), rput.data(), n); };
  auto check = [&] {
    check_close("black-scholes call", call.data(), rcall.data(), n, 1e-5f, 1e-5f);
    check_close("black-scholes put", put.data(), rput.data(), n, 1e-5f, 1e-5f);
    std::fill(call.begin(), call.end(), 0.0f);
  };

  compare("kernel_blackscholes_plain_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::auto_grid(), [=] APGAS_KERNEL (apgas::thread th) {
      for (long i = th.global_id(); i < n; i += th.global_count()) black_scholes_one(ps[i], px[i], pt[i], pc[i], pp[i]);
    }));
  }, anchor, check);

  compare("kernel_blackscholes_block_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::auto_grid(), [=] APGAS_KERNEL (apgas::thread_block blk) {
      const long per = (n + blk.blocks() - 1) / blk.blocks();
      const long lo = blk.block() * per;
      const long hi = lo + per < n ? lo + per : n;
      for (long base = lo; base < hi; base += blk.threads()) {
        blk.for_threads([&](apgas::thread_index th) {
          const long i = base + th.linear;
          if (i < hi) black_scholes_one(ps[i], px[i], pt[i], pc[i], pp[i]);
        });
      }
    }));
  }, anchor, check);

  compare("kernel_blackscholes_clocked_omp", [&] {
    apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{2 * g_threads, 128}, [=] APGAS_KERNEL (apgas::clocked_thread th) {
      for (long i = th.global_id(); i < n; i += th.global_count()) black_scholes_one(ps[i], px[i], pt[i], pc[i], pp[i]);
    }));
  }, anchor, check);
}

// ---- the barrier of clocked threads itself: ns per thread per advance() ----------------------------------------
// Ours: one block of `threads` clocked threads that only advance. Anchor: the same ring of threads as Boost.Context
// fibers resumed round robin by a driver (what a fiber library gives; the mechanism before decision 0009). Both on
// one worker thread.
void bench_barrier(int threads, int phases) {
  namespace ctx = boost::context;
  std::vector<double> o, a;
  for (int r = 0; r < g_repeats; ++r) {
    apgas::config cfg;
    cfg.nthreads = 1;
    double s = 0;
    if (apgas::run(cfg, [&] {
          const auto t0 = clock_type::now();
          apgas::at(apgas::here(), apgas::cuda_kernel(apgas::grid{1, threads}, [=](apgas::clocked_thread t) {
            for (int p = 0; p < phases; ++p) t.advance();
          }));
          s = seconds_since(t0);
        }) != 0) {
      fail("a run failed");
    }
    o.push_back(s * 1e9 / (static_cast<double>(threads) * phases));
    struct fib {
      ctx::fiber f;
      ctx::fiber back;
      bool done = false;
    };
    std::vector<fib> fs(static_cast<std::size_t>(threads));
    for (auto& x : fs) {
      x.f = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(256 * 1024), [&x, phases](ctx::fiber&& d) {
        x.back = std::move(d);
        for (int p = 0; p < phases; ++p) x.back = std::move(x.back).resume();
        x.done = true;
        return std::move(x.back);
      });
    }
    const auto t0 = clock_type::now();
    int live = threads;
    while (live > 0) {
      for (auto& x : fs) {
        if (x.done) continue;
        x.f = std::move(x.f).resume();
        if (x.done) --live;
      }
    }
    a.push_back(seconds_since(t0) * 1e9 / (static_cast<double>(threads) * phases));
  }
  const double om = median(o), am = median(a);
  std::printf("ratio kernel_barrier_%dt_fiber %.3f (ours %.2f ns, anchor %.2f ns per thread per barrier)\n", threads,
              om / am, om, am);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      g_repeats = std::atoi(argv[++i]);
      if (g_repeats < 1 || g_repeats > 1000) {
        std::fprintf(stderr, "apgas_bench_kernels: --repeats %s: expected 1 to 1000\n", argv[i]);
        return 2;
      }
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--form") == 0 && i + 1 < argc) {
      g_form = argv[++i];
      if (g_form != "clocked" && g_form != "block" && g_form != "plain") {
        std::fprintf(stderr, "apgas_bench_kernels: --form %s: expected clocked, block or plain\n", g_form.c_str());
        return 2;
      }
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
      if (only != "sgemm" && only != "stencil" && only != "reduce" && only != "blackscholes" && only != "barrier") {
        std::fprintf(stderr,
                     "apgas_bench_kernels: --only %s: expected sgemm, stencil, reduce, blackscholes or barrier\n",
                     only.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: apgas_bench_kernels [--repeats N] [--quick] [--only barrier|sgemm|stencil|reduce|blackscholes] "
                   "[--form clocked|block|plain]\n");
      return 2;
    }
  }
  g_threads = omp_threads();
  std::printf("# apgas_bench_kernels: %d worker threads = %d OpenMP threads, repeats=%d%s\n", g_threads, g_threads,
              g_repeats, quick ? " (quick)" : "");
  const auto want = [&](const char* w) { return only.empty() || only == w; };
  if (want("barrier")) {
    bench_barrier(32, quick ? 1000 : 20000);
    bench_barrier(256, quick ? 200 : 4000);
  }
  if (want("sgemm")) bench_sgemm(quick ? 256 : 1024);
  if (want("stencil")) bench_stencil(128, 128, 32, quick ? 10 : 100);
  if (want("reduce")) bench_reduce(quick ? (1L << 20) : (1L << 24), 8 * g_threads);
  if (want("blackscholes")) bench_black_scholes(quick ? (1L << 18) : 4000000L);
  return 0;
}
