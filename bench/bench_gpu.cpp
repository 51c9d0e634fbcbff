// apgas_bench_gpu: GPU places against the raw CUDA Driver API, in the same run, on the same GPU (the first GPU place
// of this host). Compiled by nvcc (apgas_add_cuda_sources).
//   apgas_bench_gpu [--repeats N] [--no-sweep | --direct-only]
// Prints one line per comparison: `ratio <name> <ours/anchor> (ours <x> <unit>, anchor <y> <unit>)`:
//   launch_rtt_raw              finish { async_at(gpu, empty 1x1 kernel) }  /  cuLaunchKernel + cuStreamSynchronize
//   h2d_pageable_<S>MiB         async_copy of S MiB from pageable memory (the spooler)  /  cuMemcpyHtoD from pinned
//   d2h_pageable_<S>MiB         likewise device -> host
//   h2d_vs_driver_pageable_<S>MiB, d2h_vs_driver_pageable_<S>MiB
//                               the spooler  /  cuMemcpyHtoD (DtoH) from the same pageable memory (below 1 = better)
//   h2d_pinned_<S>MiB, d2h_pinned_<S>MiB
//                               async_copy from (into) a pinned_vector (one DMA)  /  cuMemcpyHtoD (DtoH) from pinned
// for S in 1, 16, 256, 1024 (a copy of at most APGAS_CUDA_DIRECT_COPY bytes is one driver call, not the spooler: its
// lines say h2d_direct_... instead of h2d_...); then (unless --no-sweep) one line per slice size of the spooler:
//   sweep slice=<bytes> h2d_GBps=<x> d2h_GBps=<y>   (256 MiB from pageable memory)
// which is how the default APGAS_CUDA_DMA_SLICE is chosen, and one line per size around the direct copies' limit:
//   direct bytes=<n> h2d_spooled_ms=<x> h2d_direct_ms=<y> d2h_spooled_ms=<x> d2h_direct_ms=<y>
// which is how the default APGAS_CUDA_DIRECT_COPY is chosen. Each figure is the median of --repeats (default 7)
// timed operations after a warm-up; apgas runs and raw driver runs alternate (the runtime is stopped while the
// driver is timed). Exits 2 when this host has no GPU place.
#include <apgas/apgas.hpp>

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double now_s() { return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int g_repeats = 7;

void ratio(const std::string& name, double ours, double anchor, const char* unit, double scale) {
  std::printf("ratio %s %.3f (ours %.3f %s, anchor %.3f %s)\n", name.c_str(), ours / anchor, ours * scale, unit,
              anchor * scale, unit);
  std::fflush(stdout);
}

// ---- the raw driver, reached through the runtime's entry-point query (no link against libcuda) ----
struct raw_driver {
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuStreamSynchronize) sync = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuMemcpyHtoD) htod = nullptr;
  decltype(&::cuMemcpyDtoH) dtoh = nullptr;
  decltype(&::cuMemAlloc) alloc = nullptr;
  decltype(&::cuMemFree) free = nullptr;
  decltype(&::cuMemHostAlloc) host_alloc = nullptr;
  decltype(&::cuMemFreeHost) host_free = nullptr;
};

template <class F>
void entry(const char* name, F& f) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult st{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &st) != cudaSuccess ||
      st != cudaDriverEntryPointSuccess || p == nullptr) {
    std::fprintf(stderr, "apgas_bench_gpu: the driver has no %s\n", name);
    std::exit(2);
  }
  f = reinterpret_cast<F>(p);
}

raw_driver load_raw(int device) {
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {  // the primary context, current
    std::fprintf(stderr, "apgas_bench_gpu: cannot use GPU %d through the CUDA runtime\n", device);
    std::exit(2);
  }
  raw_driver d;
  entry("cuLaunchKernel", d.launch);
  entry("cuStreamSynchronize", d.sync);
  entry("cuStreamCreate", d.stream_create);
  entry("cuMemcpyHtoD", d.htod);
  entry("cuMemcpyDtoH", d.dtoh);
  entry("cuMemAlloc", d.alloc);
  entry("cuMemFree", d.free);
  entry("cuMemHostAlloc", d.host_alloc);
  entry("cuMemFreeHost", d.host_free);
  return d;
}

__global__ void raw_empty() {}

double raw_launch_rtt(const raw_driver& d, int iters) {
  cudaFunction_t f = nullptr;
  CUstream s = nullptr;
  if (cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(&raw_empty)) != cudaSuccess ||
      d.stream_create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    std::fprintf(stderr, "apgas_bench_gpu: cannot set up the raw launch\n");
    std::exit(2);
  }
  auto once = [&] {
    d.launch(reinterpret_cast<CUfunction>(f), 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr);
    d.sync(s);
  };
  for (int i = 0; i < 100; ++i) once();
  std::vector<double> t;
  for (int r = 0; r < g_repeats; ++r) {
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) once();
    t.push_back((now_s() - t0) / iters);
  }
  return median(t);
}

double ours_launch_rtt(int iters) {
  double per = 0;
  apgas::run(apgas::config::from_env(), [&] {
    const apgas::place g = apgas::here().children()[0];
    auto k = apgas::cuda_kernel(apgas::grid{1, 1}, [=] APGAS_KERNEL(apgas::thread) {});
    for (int i = 0; i < 100; ++i) apgas::finish([&] { apgas::async_at(g, k); });
    std::vector<double> t;
    for (int r = 0; r < g_repeats; ++r) {
      const double t0 = now_s();
      for (int i = 0; i < iters; ++i) apgas::finish([&] { apgas::async_at(g, k); });
      t.push_back((now_s() - t0) / iters);
    }
    per = median(t);
  });
  return per;
}

// Seconds per copy of `bytes`, host->device and device->host: from pageable host memory (the spooler), or from a
// pinned_vector (one DMA straight from it).
constexpr std::size_t from_env = ~std::size_t{0};
std::pair<double, double> ours_copy(std::size_t bytes, std::size_t slice, int repeats, bool pinned = false,
                                    std::size_t direct = from_env) {
  std::pair<double, double> out;
  apgas::config cfg = apgas::config::from_env();
  if (slice != 0) cfg.cuda_dma_slice = slice;
  if (direct != from_env) cfg.cuda_direct_copy = direct;
  apgas::run(cfg, [&] {
    const apgas::place g = apgas::here().children()[0];
    std::vector<char> pageable;
    apgas::pinned_vector<char> locked;
    if (pinned) {
      locked.assign(bytes, 'x');
    } else {
      pageable.assign(bytes, 'x');
    }
    const std::span<char> host = pinned ? std::span<char>(locked) : std::span<char>(pageable);
    auto dev = apgas::make_remote_array<char>(g, bytes);
    auto put = [&] { apgas::finish([&] { apgas::async_copy(std::span<const char>(host), dev); }); };
    auto get = [&] { apgas::finish([&] { apgas::async_copy(dev, 0, std::span<char>(host)); }); };
    put();
    get();
    std::vector<double> h2d, d2h;
    for (int r = 0; r < repeats; ++r) {
      double t0 = now_s();
      put();
      h2d.push_back(now_s() - t0);
      t0 = now_s();
      get();
      d2h.push_back(now_s() - t0);
    }
    out = {median(h2d), median(d2h)};
    apgas::free_remote_array(dev);
  });
  return out;
}

// Seconds per synchronous driver copy of `bytes`, from (to) pinned memory and from (to) pageable memory.
struct raw_copies {
  double h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable;
};
raw_copies raw_copy(const raw_driver& d, std::size_t bytes, int repeats) {
  CUdeviceptr dev = 0;
  void* pinned = nullptr;
  if (d.alloc(&dev, bytes) != CUDA_SUCCESS || d.host_alloc(&pinned, bytes, 0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "apgas_bench_gpu: cannot allocate %zu bytes for the raw copies\n", bytes);
    std::exit(2);
  }
  std::memset(pinned, 'x', bytes);
  std::vector<char> pageable(bytes, 'x');
  auto time = [&](auto op) {
    op();
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
      const double t0 = now_s();
      op();
      t.push_back(now_s() - t0);
    }
    return median(t);
  };
  raw_copies c{};
  c.h2d_pinned = time([&] { d.htod(dev, pinned, bytes); });
  c.d2h_pinned = time([&] { d.dtoh(pinned, dev, bytes); });
  c.h2d_pageable = time([&] { d.htod(dev, pageable.data(), bytes); });
  c.d2h_pageable = time([&] { d.dtoh(pageable.data(), dev, bytes); });
  d.free(dev);
  d.host_free(pinned);
  return c;
}

int first_gpu_ordinal() {
  int gpus = 0;
  apgas::run(apgas::config::from_env(), [&] { gpus = static_cast<int>(apgas::here().children().size()); });
  if (gpus == 0) {
    std::fprintf(stderr, "apgas_bench_gpu: this host has no GPU place\n");
    std::exit(2);
  }
  const apgas::config cfg = apgas::config::from_env();
  const std::vector<int> listed = cfg.gpu_list();
  return listed.empty() ? 0 : listed.front();
}

// The direct copies (one driver call) against the spooler, both ways, at sizes around their default limit.
void direct_sweep() {
  for (std::size_t n : {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{2} << 20,
                        std::size_t{4} << 20, std::size_t{8} << 20}) {
    const auto [h2d_s, d2h_s] = ours_copy(n, 0, g_repeats, false, 0);
    const auto [h2d_d, d2h_d] = ours_copy(n, 0, g_repeats, false, n);
    std::printf("direct bytes=%zu h2d_spooled_ms=%.4f h2d_direct_ms=%.4f d2h_spooled_ms=%.4f d2h_direct_ms=%.4f\n", n,
                h2d_s * 1e3, h2d_d * 1e3, d2h_s * 1e3, d2h_d * 1e3);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool sweep = true, direct_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      g_repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-sweep") {
      sweep = false;
    } else if (a == "--direct-only") {  // only the direct copies against the spooler
      direct_only = true;
    } else {
      std::fprintf(stderr, "usage: apgas_bench_gpu [--repeats N] [--no-sweep | --direct-only]\n");
      return 2;
    }
  }
  const int ordinal = first_gpu_ordinal();
  const raw_driver d = load_raw(ordinal);

  const std::size_t direct_limit = apgas::config::from_env().cuda_direct_copy;
  const int iters = 2000;
  if (direct_only) {
    direct_sweep();
    return 0;
  }
  const double raw_rtt = raw_launch_rtt(d, iters);
  const double ours_rtt = ours_launch_rtt(iters);
  ratio("launch_rtt_raw", ours_rtt, raw_rtt, "us", 1e6);

  for (std::size_t mib : {1, 16, 256, 1024}) {
    const std::size_t bytes = mib << 20;
    const int repeats = mib >= 256 ? std::max(3, g_repeats / 2) : g_repeats;
    const raw_copies raw = raw_copy(d, bytes, repeats);
    const auto [h2d, d2h] = ours_copy(bytes, 0, repeats);
    const auto [h2d_pinned, d2h_pinned] = ours_copy(bytes, 0, repeats, true);
    const std::string s = std::to_string(mib) + "MiB";
    const bool direct = bytes <= direct_limit;
    const std::string h = direct ? "h2d_direct_" : "h2d_", g = direct ? "d2h_direct_" : "d2h_";
    const double gb = static_cast<double>(bytes) / 1e9;
    ratio(h + "pageable_" + s, h2d, raw.h2d_pinned, "ms", 1e3);
    ratio(g + "pageable_" + s, d2h, raw.d2h_pinned, "ms", 1e3);
    ratio(h + "vs_driver_pageable_" + s, h2d, raw.h2d_pageable, "ms", 1e3);
    ratio(g + "vs_driver_pageable_" + s, d2h, raw.d2h_pageable, "ms", 1e3);
    ratio("h2d_pinned_" + s, h2d_pinned, raw.h2d_pinned, "ms", 1e3);
    ratio("d2h_pinned_" + s, d2h_pinned, raw.d2h_pinned, "ms", 1e3);
    std::printf("bandwidth %s GB/s: ours h2d %.1f d2h %.1f; driver pinned h2d %.1f d2h %.1f; driver pageable h2d %.1f "
                "d2h %.1f\n",
                s.c_str(), gb / h2d, gb / d2h, gb / raw.h2d_pinned, gb / raw.d2h_pinned, gb / raw.h2d_pageable,
                gb / raw.d2h_pageable);
  }

  if (sweep) {
    const std::size_t bytes = std::size_t{256} << 20;
    for (std::size_t slice : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{2} << 20,
                              std::size_t{4} << 20, std::size_t{8} << 20, std::size_t{16} << 20,
                              std::size_t{64} << 20}) {
      const auto [h2d, d2h] = ours_copy(bytes, slice, std::max(3, g_repeats / 2));
      std::printf("sweep slice=%zu h2d_GBps=%.1f d2h_GBps=%.1f\n", slice, static_cast<double>(bytes) / 1e9 / h2d,
                  static_cast<double>(bytes) / 1e9 / d2h);
      std::fflush(stdout);
    }
    direct_sweep();
  }
  return 0;
}
