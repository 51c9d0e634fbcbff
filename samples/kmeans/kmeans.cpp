// apgas_kmeans: Lloyd's k-means as in the X10 paper's KMeansCUDA ("GPU Programming in a High Level Language",
// Fig. 12/13), on every host place and every GPU place of a run.
//
// The main activity at place 0 starts one SPMD activity per host place. A host owns points [lo, hi) (generated
// from the seed by index, or read from a points file) and splits them over its GPU places, or keeps them on the
// host place itself when it has none. Each iteration, at every host:
//   1. assignment: a clocked kernel closure per GPU place (or one on the CPU place), all in one finish: the
//      clusters cached in shared memory (shared_from), the block barrier, a grid-stride loop over the points (SoA);
//   2. copy: nearest[] back from each GPU with async_copy (nothing to copy on a CPU place);
//   3. cpu: the centroid step on the host's workers, one partial sum per chunk (race-free by construction: X10's
//      sample added into shared sums from several asyncs without atomic), in 64-bit fixed point;
//   4. reduce: the sums and counts of all hosts combined with team::world().allreduce; every host computes the
//      same new centroids.
// Integer sums make the result independent of the partition: 1, 2 or 3 hosts, GPUs or CPU places, all give
// bit-identical centroids, and so does the serial reference at place 0 that the check compares with.
// Every host takes part in every team operation, even one whose set-up or iteration failed (a bad file, out of
// memory, a failed kernel), or the others would wait in it for ever: a failure travels in the allreduce, then every
// host stops and the one that failed reports it.
// See kmeans_common.hpp for the shared arithmetic and README.md for the options and the output.
#include "kmeans_common.hpp"

#include <apgas/apgas.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;
double since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

constexpr const char* prog = "apgas_kmeans";  // in messages about the command line and the input
constexpr const char* tag = "kmeans";         // in the report (its last line is the one scripts parse)

/// What every host needs to know (trivially copyable: it travels in the SPMD closure).
struct params {
  std::int64_t n;
  int k, d, iterations;
  std::uint64_t seed;
  bool from_file, quiet;
  bool pairs;  // the GPU kernel's inner loop: two points per cluster load (kmeans::assign_points)
};

/// A GPU place's share of its host's points: host points [off, off + n), in arrays at the GPU.
struct gpu_part {
  apgas::place gpu;
  std::int64_t off = 0, n = 0;
  apgas::remote_array<float> points;  // SoA, stride n
  apgas::remote_array<int> nearest;
};

/// One per host place (a place_local_handle): the host's points, nearest[], centroids and timers.
struct host_state {
  std::int64_t lo = 0, hi = 0;
  apgas::remote_array<float> points;       // the host's points, SoA with stride hi - lo, at the host place
  apgas::remote_array<int> nearest_cpu;    // CPU place: the kernel writes nearest[] here
  apgas::pinned_vector<int> nearest_gpu;   // GPU places: nearest[] copied back here (page-locked: one DMA)
  std::vector<gpu_part> parts;
  std::vector<float> centroids;
  kmeans::breakdown time;
  double setup_s = 0;

  std::int64_t size() const { return hi - lo; }
  const int* nearest() const { return parts.empty() ? nearest_cpu.data() : nearest_gpu.data(); }
  std::vector<int> nearest_vector() const { return std::vector<int>(nearest(), nearest() + size()); }
  void release() {
    for (gpu_part& p : parts) {
      apgas::free_remote_array(p.points);
      apgas::free_remote_array(p.nearest);
    }
    parts.clear();
    apgas::free_remote_array(points);
    apgas::free_remote_array(nearest_cpu);
    nearest_gpu = {};
  }
};

/// The assignment step on `where` (a GPU place, or this host place): nearest[i] for the n points (SoA, stride n).
/// The kernel of the X10 paper: clusters in shared memory, the block's barrier, a grid-stride loop. DC is d when
/// compiled for a fixed d, else 0.
template <int DC>
void launch_assign(apgas::place where, apgas::remote_array<float> points, apgas::remote_array<int> nearest,
                   std::int64_t n, int k, int d, bool pairs, std::span<const float> centroids) {
  apgas::async_at(
      where, apgas::cuda_kernel(
                 apgas::auto_grid(), apgas::shared_from(centroids),
                 [=] APGAS_KERNEL(apgas::clocked_thread t, std::span<float> clusters) {
                   // shared_from has filled this block's copy of the clusters before the body starts; the barrier
                   // is where X10's kernel synchronised after loading them.
                   t.advance();
                   const float* x = points.data();  // once: data() checks the place on CPU places
                   int* out = nearest.data();
                   const float* c = clusters.data();
                   // Grid-stride over tiles: block b takes tiles b, b + blocks, ...; its threads share a tile (on a
                   // GPU: coalesced; on a CPU place one thread per block walks 1024 contiguous points).
                   const long threads = t.threads();
                   const long tile = threads * (threads < kmeans::tile_points ? kmeans::tile_points / threads : 1);
                   const long stride = static_cast<long>(t.blocks()) * tile;
                   for (long base = static_cast<long>(t.block()) * tile; base < n; base += stride) {
                     const long end = base + tile < n ? base + tile : n;
                     kmeans::assign_points<DC>(x, n, base + t.thread(), end, threads, c, k, d, out, pairs);
                   }
                 }));
}

/// Fills the host's points, in parallel over its workers.
void generate_host_points(const params& prm, std::int64_t lo, std::int64_t n_local, float* x) {
  const int chunks = apgas::num_workers();
  apgas::finish([&] {
    for (int c = 0; c < chunks; ++c) {
      apgas::async([&, c] {
        const std::int64_t a = n_local * c / chunks, b = n_local * (c + 1) / chunks;
        for (int j = 0; j < prm.d; ++j) {
          float* o = x + j * n_local;
          for (std::int64_t i = a; i < b; ++i) o[i] = kmeans::generated_coord(prm.seed, lo + i, j, prm.d);
        }
      });
    }
  });
}

/// GPU places: the host's points split over them, copied there once. A GPU whose share is empty gets no arrays and no
/// kernel (fewer points than GPUs); a host with no points at all (fewer points than hosts) then has no part and, like
/// a host without GPU places, runs its (empty) kernel on its CPU place, so that nearest[] exists there.
void setup_gpus(host_state& s, int d, const float* x) {
  const std::int64_t n_local = s.size();
  const auto gpus = apgas::here().children();
  const auto g = static_cast<std::int64_t>(gpus.size());
  for (std::int64_t i = 0; i < g; ++i) {
    gpu_part p;
    p.gpu = gpus[static_cast<std::size_t>(i)];
    p.off = n_local * i / g;
    p.n = n_local * (i + 1) / g - p.off;
    if (p.n == 0) continue;
    gpu_part& q = s.parts.emplace_back(p);  // (first: release() frees what is made)
    q.points = apgas::make_remote_array<float>(q.gpu, static_cast<std::size_t>(q.n) * d);
    q.nearest = apgas::make_remote_array<int>(q.gpu, static_cast<std::size_t>(q.n));
  }
  if (s.parts.empty()) {
    s.nearest_cpu = apgas::make_remote_array<int>(apgas::here(), static_cast<std::size_t>(n_local));
    return;
  }
  s.nearest_gpu.assign(static_cast<std::size_t>(n_local), 0);
  apgas::finish([&] {
    for (const gpu_part& p : s.parts) {
      for (int j = 0; j < d; ++j) {
        apgas::async_copy(std::span<const float>(x + j * n_local + p.off, static_cast<std::size_t>(p.n)), p.points,
                          static_cast<std::size_t>(j * p.n));
      }
    }
  });
}

/// The SPMD body at each host place.
void run_host(host_state& s, const params prm, const std::string& path) {
  const auto t_setup = clk::now();
  const int hosts = apgas::num_hosts();
  const apgas::place me = apgas::here();
  const int h = me.id();
  const int k = prm.k, d = prm.d;
  s.lo = prm.n * h / hosts;
  s.hi = prm.n * (h + 1) / hosts;
  const std::int64_t n_local = s.size();
  auto team = apgas::team::world();

  // Points, initial centroids (the first k points) and the GPU places' arrays. A host that fails here (a bad file,
  // out of memory) must not leave the others waiting in the allreduce below (every host takes part in every team
  // operation): its failure is shared in that allreduce, then every host stops and this one reports it.
  float* x = nullptr;
  const int chunks = apgas::num_workers();
  const std::size_t kd = static_cast<std::size_t>(k) * d;
  std::vector<std::vector<std::int64_t>> partial;  // one partial sum per chunk of the host's points
  std::vector<std::int64_t> buf;  // the host's sums (k*d), then its counts (k), then 1 if its iteration failed
  std::exception_ptr failure;
  try {
    partial.assign(static_cast<std::size_t>(chunks), std::vector<std::int64_t>(kd + k));
    buf.resize(kd + k + 1);
    s.points = apgas::make_remote_array<float>(me, static_cast<std::size_t>(n_local) * d);
    x = s.points.data();
    std::vector<float> first(static_cast<std::size_t>(k) * d);
    if (prm.from_file) {
      const kmeans::file_header fh = kmeans::read_points_header(path);
      if (fh.n != prm.n || fh.d != d) {
        throw kmeans::input_error("points file '" + path + "' holds n=" + std::to_string(fh.n) + " d=" +
                                  std::to_string(fh.d) + " at place " + std::to_string(h) + ", n=" +
                                  std::to_string(prm.n) + " d=" + std::to_string(d) +
                                  " at place 0 (changed during the run, or another file of that name at this host)");
      }
      kmeans::read_points(path, fh, s.lo, s.hi, x, n_local);
      kmeans::read_points(path, fh, 0, k, first.data(), k);
    } else {
      generate_host_points(prm, s.lo, n_local, x);
      kmeans::generate_points(prm.seed, d, 0, k, first.data(), k);
    }
    s.centroids = kmeans::initial_centroids(first.data(), k, k, d);
    setup_gpus(s, d, x);
  } catch (...) {
    failure = std::current_exception();
  }
  // The global coordinate bound fixes the fixed-point scale (the same at every host), and the failure flag.
  std::array<double, 2> bound_failed{failure ? 0.0 : kmeans::max_abs(x, n_local, n_local, d), failure ? 1.0 : 0.0};
  team.allreduce(std::span<double>(bound_failed), [](double a, double b) { return a > b ? a : b; });
  if (failure) std::rethrow_exception(failure);
  if (bound_failed[1] != 0) return;  // another host failed and reports it
  const double scale = kmeans::fixed_scale(prm.n, static_cast<float>(bound_failed[0]));

  s.setup_s = since(t_setup);

  const auto t_run = clk::now();
  for (int it = 1; it <= prm.iterations; ++it) {
    const auto t0 = clk::now();
    auto t1 = t0, t2 = t0;
    std::exception_ptr failed;
    try {  // (a failure is shared in the allreduce below, as the set-up's)
      const std::span<const float> centroids(s.centroids);
      kmeans::with_dim(d, [&]<int DC>() {
        apgas::finish([&] {
          if (s.parts.empty()) {
            launch_assign<DC>(me, s.points, s.nearest_cpu, n_local, k, d, prm.pairs, centroids);
          } else {
            for (const gpu_part& p : s.parts) {
              launch_assign<DC>(p.gpu, p.points, p.nearest, p.n, k, d, prm.pairs, centroids);
            }
          }
        });
      });
      t1 = clk::now();
      if (!s.parts.empty()) {
        apgas::finish([&] {
          for (const gpu_part& p : s.parts) {
            apgas::async_copy(p.nearest, 0, std::span<int>(s.nearest_gpu.data() + p.off, std::size_t(p.n)));
          }
        });
      }
      t2 = clk::now();
      const int* near = s.nearest();
      kmeans::with_dim(d, [&]<int DC>() {
        apgas::finish([&] {
          for (int c = 0; c < chunks; ++c) {
            apgas::async([&, c] {
              std::vector<std::int64_t>& part = partial[static_cast<std::size_t>(c)];
              std::fill(part.begin(), part.end(), 0);
              kmeans::accumulate<DC>(x, n_local, n_local * c / chunks, n_local * (c + 1) / chunks, near, d, scale,
                                     part.data(), part.data() + kd);
            });
          }
        });
      });
    } catch (...) {
      failed = std::current_exception();
    }
    std::fill(buf.begin(), buf.end(), 0);
    for (const auto& part : partial) {  // in chunk order (integer sums: any order gives the same bits)
      for (std::size_t i = 0; i < part.size(); ++i) buf[i] += part[i];
    }
    buf[kd + k] = failed ? 1 : 0;
    const auto t3 = clk::now();
    team.allreduce(std::span<std::int64_t>(buf), std::plus<std::int64_t>());
    const auto t4 = clk::now();
    if (failed) std::rethrow_exception(failed);
    if (buf[kd + k] != 0) return;  // another host failed and reports it
    const float moved = kmeans::update_centroids(buf.data(), buf.data() + kd, k, d, scale, s.centroids.data());
    const auto t5 = clk::now();
    s.time.kernel += std::chrono::duration<double>(t1 - t0).count();
    s.time.copy += std::chrono::duration<double>(t2 - t1).count();
    s.time.cpu += std::chrono::duration<double>(t3 - t2).count() + std::chrono::duration<double>(t5 - t4).count();
    s.time.reduce += std::chrono::duration<double>(t4 - t3).count();
    if (h == 0 && !prm.quiet) {
      std::fprintf(stderr, "%s: iteration %d/%d: %.6f s, centroid movement %.3e\n", tag, it, prm.iterations,
                   std::chrono::duration<double>(t5 - t0).count(), static_cast<double>(moved));
    }
  }
  s.time.total = since(t_run);
  for (gpu_part& p : s.parts) {  // the GPU arrays are no longer needed; nearest[] stays for the check
    apgas::free_remote_array(p.points);
    apgas::free_remote_array(p.nearest);
  }
}

void print_places() {
  const int hosts = apgas::num_hosts();
  const int gpus = static_cast<int>(apgas::all_places().size()) - hosts;
  std::printf("%s: %d host place%s, %d GPU place%s\n", tag, hosts, hosts == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
  for (const apgas::place p : apgas::places()) {
    const auto children = p.children();
    std::printf("  place %d: %s\n    %s\n", p.id(), apgas::describe(p).c_str(),
                children.empty() ? "its points stay here: the kernels run on this CPU place"
                                 : "its points are split over its GPU places:");
    for (const apgas::place g : children) std::printf("    place %d: %s\n", g.id(), apgas::describe(g).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  kmeans::options opt;
  if (const int rc = kmeans::parse_options(argc, argv, prog, opt); rc >= 0) return rc;
  kmeans::file_header fh{opt.n, opt.d};
  if (!opt.file.empty()) {  // every process checks the file before the run: a bad one stops all with exit code 2
    try {
      fh = kmeans::read_points_header(opt.file);
      kmeans::check_shape(opt, fh);
    } catch (const kmeans::input_error& e) {
      std::fprintf(stderr, "%s: %s\n", prog, e.what());
      return 2;
    }
  }
  const params prm{fh.n, opt.k, fh.d, opt.iterations, opt.seed, !opt.file.empty(), opt.quiet, opt.pairs};
  apgas::register_exception<kmeans::input_error>();  // keeps its type when it comes from another host
  if (opt.stats) apgas::enable_stats();               // the table of every place, at the end (APGAS_STATS)

  int exit_code = 0;
  const int rc = apgas::run(argc, argv, [&] {
    const int hosts = apgas::num_hosts();
    const int gpus = static_cast<int>(apgas::all_places().size()) - hosts;
    print_places();
    std::printf("%s: %lld points (%s), %d clusters, %d dimensions, %d iterations; %d worker%s per host place\n", tag,
                static_cast<long long>(prm.n),
                prm.from_file ? ("from " + opt.file).c_str() : ("generated, seed " + std::to_string(prm.seed)).c_str(),
                prm.k, prm.d, prm.iterations, apgas::num_workers(), apgas::num_workers() == 1 ? "" : "s");
    std::fflush(stdout);

    const auto state = apgas::make_place_local<host_state>(apgas::places(), [] { return host_state{}; });
    auto release = [&] {
      apgas::finish([&] {
        for (const apgas::place p : apgas::places()) apgas::async_at(p, [state] { state->release(); });
      });
      apgas::free_place_local(state, apgas::places());
    };
    try {
      apgas::finish([&] {
        for (const apgas::place p : apgas::places()) {
          apgas::async_at(p, [state, prm](const std::string& path) { run_host(*state, prm, path); }, opt.file);
        }
      });
    } catch (const apgas::multiple_exceptions& e) {
      const auto bad = e.of_type<kmeans::input_error>();
      if (bad.empty() || bad.size() != e.size()) throw;
      std::fprintf(stderr, "%s: %s\n", prog, bad.front()->what());
      release();
      exit_code = 2;
      return;
    }

    const host_state& s0 = *state;
    kmeans::print_breakdown(tag, "place 0", s0.time, prm.iterations, s0.setup_s);
    kmeans::print_centroids(tag, s0.centroids, prm.k, prm.d, opt.print_centroids);
    // Every host must hold the same centroids.
    bool hosts_agree = true;
    const std::uint64_t mine = kmeans::fnv1a(s0.centroids.data(), s0.centroids.size() * sizeof(float));
    for (const apgas::place p : apgas::places()) {
      const std::uint64_t theirs = apgas::at(p, [state] {
        return kmeans::fnv1a(state->centroids.data(), state->centroids.size() * sizeof(float));
      });
      if (theirs != mine) {
        std::printf("%s: host place %d holds other centroids than place 0\n", tag, p.id());
        hosts_agree = false;
      }
    }

    const char* check = hosts_agree ? "skipped" : "FAIL";
    if (opt.check) {
      const auto t0 = clk::now();
      std::vector<int> nearest(static_cast<std::size_t>(prm.n));
      for (const apgas::place p : apgas::places()) {
        const std::int64_t lo = prm.n * p.id() / hosts;
        const std::vector<int> part = apgas::at(p, [state] { return state->nearest_vector(); });
        std::copy(part.begin(), part.end(), nearest.begin() + lo);
      }
      std::vector<float> all(static_cast<std::size_t>(prm.n) * prm.d);
      if (prm.from_file) {
        kmeans::read_points(opt.file, fh, 0, prm.n, all.data(), prm.n);
      } else {
        kmeans::generate_points(prm.seed, prm.d, 0, prm.n, all.data(), prm.n);
      }
      const auto ref = kmeans::serial_reference(all.data(), prm.n, prm.k, prm.d, prm.iterations);
      const auto c = kmeans::compare(ref, s0.centroids, nearest, all.data(), prm.n, prm.d);
      kmeans::print_assignments(tag, nearest);
      kmeans::print_check(tag, c, since(t0));
      check = c.ok && hosts_agree ? "ok" : "FAIL";
    }
    kmeans::print_result(tag, prm.n, prm.k, prm.d, prm.iterations, hosts, gpus, s0.time.total, check);
    release();
    if (std::string_view(check) == "FAIL") exit_code = 1;
  });
  return rc != 0 ? rc : exit_code;
}
