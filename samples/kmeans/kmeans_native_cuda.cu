// kmeans_native_cuda: the hand-written CUDA + MPI baseline of apgas_kmeans (the "native" column of the X10 paper's
// Fig. 13), with no apgas: one MPI rank per GPU (node-local rank r uses device r mod its node's device count), the
// same points, SoA layout, kernel shape (clusters in shared memory, barrier, grid-stride loop over tiles, the same
// inner loop: kmeans::assign_points), fixed-point centroid step (OpenMP over the host's cores) and MPI_Allreduce of
// sums and counts. Same options and output as apgas_kmeans (kmeans_common.hpp).
//
//   mpirun -np R kmeans_native_cuda [options]       (or without mpirun: one rank)
// Without a usable GPU it says so ("kmeans_native_cuda: no CUDA GPU ...") and exits with code 1.
#include "kmeans_common.hpp"

#include <cuda_runtime.h>
#include <mpi.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;
double seconds(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }
constexpr const char* prog = "kmeans_native_cuda";

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, cudaGetErrorName(e), cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/// The clusters are loaded into shared memory by the block, then the block barrier, then the grid-stride loop over
/// tiles of the points, exactly as the apgas kernel closure does it.
template <int DC>
__global__ void assign(const float* __restrict__ x, int* __restrict__ out, long n, int k, int d,
                       const float* __restrict__ clusters_global, bool pairs) {
  extern __shared__ float clusters[];
  for (int i = threadIdx.x; i < k * d; i += blockDim.x) clusters[i] = clusters_global[i];
  __syncthreads();
  const long threads = blockDim.x;
  const long tile = threads * (threads < kmeans::tile_points ? kmeans::tile_points / threads : 1);
  const long stride = static_cast<long>(gridDim.x) * tile;
  for (long base = static_cast<long>(blockIdx.x) * tile; base < n; base += stride) {
    const long end = base + tile < n ? base + tile : n;
    kmeans::assign_points<DC>(x, n, base + threadIdx.x, end, threads, clusters, k, d, out, pairs);
  }
}

struct launcher {
  int blocks = 0, threads = 0;
  template <int DC>
  void setup(std::size_t shared_bytes) {
    cuda_check(cudaOccupancyMaxPotentialBlockSize(&blocks, &threads, assign<DC>, shared_bytes, 0),
               "cudaOccupancyMaxPotentialBlockSize");
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  auto finish = [](int code) {
    MPI_Finalize();
    return code;
  };

  kmeans::options opt;
  int rc = kmeans::parse_options(argc, argv, prog, opt);  // every rank parses; rank 0's message is enough...
  if (rc >= 0) return finish(rc);                         // ...but the ranks agree, so all stop together
  kmeans::file_header fh{opt.n, opt.d};
  if (!opt.file.empty()) {
    try {
      fh = kmeans::read_points_header(opt.file);
      kmeans::check_shape(opt, fh);
    } catch (const kmeans::input_error& e) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", prog, e.what());
      return finish(2);
    }
  }

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  int have_gpu = e == cudaSuccess && devices > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &have_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (have_gpu == 0) {
    if (rank == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU on %s (cudaGetDeviceCount: %s, %d devices): this baseline needs one\n",
                   prog, ranks == 1 ? "this host" : "every rank's host",
                   e == cudaSuccess ? "no error" : cudaGetErrorString(e), devices);
      std::printf("%s: no CUDA GPU: nothing measured\n", prog);
    }
    return finish(1);
  }
  // The ranks of one node share its GPUs: node-local rank r takes device r mod the node's device count.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  const int device = local_rank % devices;
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

  const auto t_setup = clk::now();
  const std::int64_t n = fh.n;
  const int k = opt.k, d = fh.d;
  const std::int64_t lo = n * rank / ranks, hi = n * (rank + 1) / ranks, n_local = hi - lo;
  std::vector<float> x(static_cast<std::size_t>(n_local) * d), first(static_cast<std::size_t>(k) * d);
  int failed = 0;
  std::string failure;
  if (opt.file.empty()) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n_local; ++i) {
      for (int j = 0; j < d; ++j) x[static_cast<std::size_t>(j * n_local + i)] = kmeans::generated_coord(opt.seed, lo + i, j, d);
    }
    kmeans::generate_points(opt.seed, d, 0, k, first.data(), k);
  } else {
    try {
      kmeans::read_points(opt.file, fh, lo, hi, x.data(), n_local);
      kmeans::read_points(opt.file, fh, 0, k, first.data(), k);
    } catch (const kmeans::input_error& err) {
      failure = err.what();
      failed = 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0) {
    if (!failure.empty()) std::fprintf(stderr, "%s: %s\n", prog, failure.c_str());
    return finish(2);
  }
  if (rank == 0) {
    std::printf("%s: %lld points (%s), %d clusters, %d dimensions, %d iterations; %d rank%s, one GPU each (%s), "
                "%d OpenMP threads for the host step\n",
                prog, static_cast<long long>(n),
                opt.file.empty() ? ("generated, seed " + std::to_string(opt.seed)).c_str() : ("from " + opt.file).c_str(),
                k, d, opt.iterations, ranks, ranks == 1 ? "" : "s", prop.name, omp_get_max_threads());
    std::fflush(stdout);
  }
  std::vector<float> centroids = kmeans::initial_centroids(first.data(), k, k, d);
  float bound = kmeans::max_abs(x.data(), n_local, n_local, d);
  MPI_Allreduce(MPI_IN_PLACE, &bound, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  const double scale = kmeans::fixed_scale(n, bound);

  const std::size_t kd = static_cast<std::size_t>(k) * d;
  float* x_dev = nullptr;
  float* clusters_dev = nullptr;
  int* near_dev = nullptr;
  int* near_host = nullptr;  // page-locked
  cuda_check(cudaMalloc(&x_dev, x.size() * sizeof(float) + 1), "cudaMalloc");
  cuda_check(cudaMalloc(&clusters_dev, kd * sizeof(float)), "cudaMalloc");
  cuda_check(cudaMalloc(&near_dev, static_cast<std::size_t>(n_local) * sizeof(int) + 1), "cudaMalloc");
  cuda_check(cudaMallocHost(&near_host, static_cast<std::size_t>(n_local) * sizeof(int) + 1), "cudaMallocHost");
  cuda_check(cudaMemcpy(x_dev, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy points");
  launcher launch;
  kmeans::with_dim(d, [&]<int DC>() { launch.template setup<DC>(kd * sizeof(float)); });

  const int threads = omp_get_max_threads();
  std::vector<std::vector<std::int64_t>> partial(static_cast<std::size_t>(threads), std::vector<std::int64_t>(kd + k));
  std::vector<std::int64_t> buf(kd + k);
  MPI_Barrier(MPI_COMM_WORLD);
  const double setup = seconds(t_setup, clk::now());

  kmeans::breakdown b;
  const auto t_run = clk::now();
  kmeans::with_dim(d, [&]<int DC>() {
    for (int it = 1; it <= opt.iterations; ++it) {
      const auto t0 = clk::now();
      cuda_check(cudaMemcpy(clusters_dev, centroids.data(), kd * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy clusters");
      assign<DC><<<launch.blocks, launch.threads, kd * sizeof(float)>>>(x_dev, near_dev, n_local, k, d, clusters_dev, opt.pairs);
      cuda_check(cudaGetLastError(), "kernel launch");
      cuda_check(cudaDeviceSynchronize(), "kernel");
      const auto t1 = clk::now();
      cuda_check(cudaMemcpy(near_host, near_dev, static_cast<std::size_t>(n_local) * sizeof(int), cudaMemcpyDeviceToHost),
                 "cudaMemcpy nearest");
      const auto t2 = clk::now();
#pragma omp parallel
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        std::vector<std::int64_t>& part = partial[static_cast<std::size_t>(t)];
        std::fill(part.begin(), part.end(), 0);
        kmeans::accumulate<DC>(x.data(), n_local, n_local * t / nt, n_local * (t + 1) / nt, near_host, d, scale,
                               part.data(), part.data() + kd);
      }
      std::fill(buf.begin(), buf.end(), 0);
      for (const auto& part : partial) {
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] += part[i];
      }
      const auto t3 = clk::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      const auto t4 = clk::now();
      const float moved = kmeans::update_centroids(buf.data(), buf.data() + kd, k, d, scale, centroids.data());
      const auto t5 = clk::now();
      b.kernel += seconds(t0, t1);
      b.copy += seconds(t1, t2);
      b.cpu += seconds(t2, t3) + seconds(t4, t5);
      b.reduce += seconds(t3, t4);
      if (rank == 0 && !opt.quiet) {
        std::fprintf(stderr, "%s: iteration %d/%d: %.6f s, centroid movement %.3e\n", prog, it, opt.iterations,
                     seconds(t0, t5), static_cast<double>(moved));
      }
    }
  });
  b.total = seconds(t_run, clk::now());

  // Check at rank 0: gather nearest[], rerun serially on all points.
  int ok = 1;
  std::vector<int> counts(static_cast<std::size_t>(ranks)), displs(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    displs[r] = static_cast<int>(n * r / ranks);
    counts[r] = static_cast<int>(n * (r + 1) / ranks) - displs[r];
  }
  std::vector<int> nearest(rank == 0 && opt.check ? static_cast<std::size_t>(n) : 0);
  if (opt.check) {
    MPI_Gatherv(near_host, static_cast<int>(n_local), MPI_INT, nearest.data(), counts.data(), displs.data(), MPI_INT,
                0, MPI_COMM_WORLD);
  }
  if (rank == 0) {
    kmeans::print_breakdown(prog, "rank 0", b, opt.iterations, setup);
    kmeans::print_centroids(prog, centroids, k, d, opt.print_centroids);
    const char* check = "skipped";
    if (opt.check) {
      const auto t0 = clk::now();
      std::vector<float> all(static_cast<std::size_t>(n) * d);
      if (opt.file.empty()) {
        kmeans::generate_points(opt.seed, d, 0, n, all.data(), n);
      } else {
        kmeans::read_points(opt.file, fh, 0, n, all.data(), n);
      }
      const auto ref = kmeans::serial_reference(all.data(), n, k, d, opt.iterations);
      const auto c = kmeans::compare(ref, centroids, nearest, all.data(), n, d);
      kmeans::print_assignments(prog, nearest);
      kmeans::print_check(prog, c, seconds(t0, clk::now()));
      ok = c.ok ? 1 : 0;
      check = c.ok ? "ok" : "FAIL";
    }
    kmeans::print_result(prog, n, k, d, opt.iterations, ranks, ranks, b.total, check);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  cudaFree(x_dev);
  cudaFree(clusters_dev);
  cudaFree(near_dev);
  cudaFreeHost(near_host);
  return finish(ok ? 0 : 1);
}
