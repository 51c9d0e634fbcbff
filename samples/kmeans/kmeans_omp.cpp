// kmeans_omp: the CPU baseline of apgas_kmeans, in plain C++ and OpenMP (no apgas): the same points, layout (SoA),
// assignment arithmetic, fixed-point centroid step and output, on one process with OMP_NUM_THREADS threads.
// Each iteration: assignment (an OpenMP loop over the points, static schedule), then the centroid step (one
// partial sum per thread, combined in thread order).
#include "kmeans_common.hpp"

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace {
using clk = std::chrono::steady_clock;
double seconds(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }
constexpr const char* prog = "kmeans_omp";
}  // namespace

int main(int argc, char** argv) {
  kmeans::options opt;
  if (const int rc = kmeans::parse_options(argc, argv, prog, opt); rc >= 0) return rc;
  kmeans::file_header fh{opt.n, opt.d};
  const auto t_setup = clk::now();
  std::vector<float> x;
  try {
    if (!opt.file.empty()) {
      fh = kmeans::read_points_header(opt.file);
      kmeans::check_shape(opt, fh);
      x.resize(static_cast<std::size_t>(fh.n) * fh.d);
      kmeans::read_points(opt.file, fh, 0, fh.n, x.data(), fh.n);
    }
  } catch (const kmeans::input_error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 2;
  }
  const std::int64_t n = fh.n;
  const int k = opt.k, d = fh.d;
  const int threads = omp_get_max_threads();
  if (opt.file.empty()) {
    x.resize(static_cast<std::size_t>(n) * d);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      for (int j = 0; j < d; ++j) x[static_cast<std::size_t>(j * n + i)] = kmeans::generated_coord(opt.seed, i, j, d);
    }
  }
  std::printf("%s: %lld points (%s), %d clusters, %d dimensions, %d iterations; %d OpenMP thread%s\n", prog,
              static_cast<long long>(n),
              opt.file.empty() ? ("generated, seed " + std::to_string(opt.seed)).c_str() : ("from " + opt.file).c_str(),
              k, d, opt.iterations, threads, threads == 1 ? "" : "s");
  std::fflush(stdout);

  std::vector<float> centroids = kmeans::initial_centroids(x.data(), n, k, d);
  const double scale = kmeans::fixed_scale(n, kmeans::max_abs(x.data(), n, n, d));
  std::vector<int> nearest(static_cast<std::size_t>(n));
  const std::size_t kd = static_cast<std::size_t>(k) * d;
  std::vector<std::vector<std::int64_t>> partial(static_cast<std::size_t>(threads), std::vector<std::int64_t>(kd + k));
  std::vector<std::int64_t> total(kd + k);
  const double setup = seconds(t_setup, clk::now());

  kmeans::breakdown b;
  const auto t_run = clk::now();
  kmeans::with_dim(d, [&]<int DC>() {
    for (int it = 1; it <= opt.iterations; ++it) {
      const auto t0 = clk::now();
      const float* c = centroids.data();
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) nearest[static_cast<std::size_t>(i)] = kmeans::nearest_cluster<DC>(x.data(), n, i, c, k, d);
      const auto t1 = clk::now();
#pragma omp parallel
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        std::vector<std::int64_t>& part = partial[static_cast<std::size_t>(t)];
        std::fill(part.begin(), part.end(), 0);
        kmeans::accumulate<DC>(x.data(), n, n * t / nt, n * (t + 1) / nt, nearest.data(), d, scale, part.data(),
                               part.data() + kd);
      }
      std::fill(total.begin(), total.end(), 0);
      for (const auto& part : partial) {
        for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
      }
      const float moved = kmeans::update_centroids(total.data(), total.data() + kd, k, d, scale, centroids.data());
      const auto t2 = clk::now();
      b.kernel += seconds(t0, t1);
      b.cpu += seconds(t1, t2);
      if (!opt.quiet) {
        std::fprintf(stderr, "%s: iteration %d/%d: %.6f s, centroid movement %.3e\n", prog, it, opt.iterations,
                     seconds(t0, t2), static_cast<double>(moved));
      }
    }
  });
  b.total = seconds(t_run, clk::now());

  kmeans::print_breakdown(prog, "assignment loop = kernel, centroid step = cpu", b, opt.iterations, setup);
  kmeans::print_centroids(prog, centroids, k, d, opt.print_centroids);
  const char* check = "skipped";
  if (opt.check) {
    const auto t0 = clk::now();
    const auto ref = kmeans::serial_reference(x.data(), n, k, d, opt.iterations);
    const auto c = kmeans::compare(ref, centroids, nearest, x.data(), n, d);
    kmeans::print_assignments(prog, nearest);
    kmeans::print_check(prog, c, seconds(t0, clk::now()));
    check = c.ok ? "ok" : "FAIL";
  }
  kmeans::print_result(prog, n, k, d, opt.iterations, 1, 0, b.total, check);
  return std::string_view(check) == "FAIL" ? 1 : 0;
}
