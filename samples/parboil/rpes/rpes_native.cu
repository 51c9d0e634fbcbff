// parboil_rpes_native: Parboil's rpes in hand-written CUDA (runtime API, one GPU, no apgas), the GPU baseline of
// apgas_parboil_rpes: the same three kernels, DistributeBlockWork (a chunk's block descriptors from the quartets'),
// ComputeX (a block of 64 threads per quartet and 64 primitive combinations, the descriptor broadcast through shared
// memory, a shared-memory tree) and DoReduction (a block per quartet summing its block partials), the grids chunked
// at 65 535 blocks. Parboil's texture references (removed in CUDA 12) become plain global loads. See rpes.hpp for
// the input, the integral and the check.
#include "rpes.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CUDA_CHECK(call) check((call), #call)

// Parboil's DistributeBlockWork for the chunk [b0, b1) of ComputeX's grid: the chunk's blocks of quartet e0 +
// blockIdx.x get its descriptor.
__global__ void spread(const rpes::work* quartet_work, const rpes::range* final, rpes::work* work, long e0, long b0,
                       long b1) {
  const rpes::work w = quartet_work[e0 + blockIdx.x];
  const rpes::threads_range r = rpes::spread_threads(final[e0 + blockIdx.x], b0, b1);
  const int t = threadIdx.x;
  if (t >= r.lo && t < r.hi) work[w.first + t - b0] = w;
}

// Parboil's ComputeX: partial[b] = the sum of block b's 64 primitive integrals (work: the chunk's descriptors).
__global__ void compute_x(const rpes::work* work, const rpes::atom4* xyz, const rpes::prim* prims, float* partial,
                          long b0) {
  __shared__ float data[rpes::block_size];
  __shared__ rpes::work s_work;
  const long block = b0 + blockIdx.x;
  const int t = threadIdx.x;
  if (t == 0) s_work = work[blockIdx.x];
  __syncthreads();
  const rpes::work w = s_work;
  const rpes::quartet_view v(w, block, xyz, prims);
  data[t] = v.integral(t);
  for (int s = rpes::block_size / 2; s > 0; s /= 2) {
    __syncthreads();
    if (t < s) data[t] += data[t + s];
  }
  if (t == 0) partial[block] = data[0];
}

// Parboil's DoReduction: sums[e] = the sum of quartet e's block partials (blockDim.x: a power of two <= 64).
__global__ void do_reduction(const rpes::range* final, const float* partial, float* sums, long e0) {
  __shared__ float data[rpes::block_size];
  const long e = e0 + blockIdx.x;
  const rpes::range r = final[e];
  const int t = threadIdx.x;
  data[t] = t < static_cast<int>(r.count) ? partial[r.first + t] : 0.0f;
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    __syncthreads();
    if (t < s) data[t] += data[t + s];
  }
  if (t == 0) sums[e] = data[0];
}

template <class T>
T* to_device(std::span<const T> v) {
  T* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "parboil_rpes_native";
  return parboil::guarded(prog, rpes::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    rpes::input in;
    if (!rpes::prepare(o, in)) return 0;
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));  // the context exists before the timer starts
    const int threads = rpes::reduction_threads(in.shells);

    parboil::timer timer;
    timer.start();
    const std::vector<rpes::quartet> qs = rpes::quartets(in.shells.size());
    const rpes::distribution d = rpes::distribute(in.shells, qs);
    const long blocks = d.blocks, nq = static_cast<long>(qs.size());
    rpes::work* d_quartet_work = to_device<rpes::work>(d.quartets);
    rpes::range* d_final = to_device<rpes::range>(d.final);
    rpes::atom4* d_xyz = to_device<rpes::atom4>(in.atoms);
    rpes::prim* d_prims = to_device<rpes::prim>(in.prims);
    rpes::work* d_work = nullptr;  // one chunk's block descriptors
    float *d_partial = nullptr, *d_sums = nullptr;
    CUDA_CHECK(cudaMalloc(&d_work, rpes::chunk(0, blocks) * sizeof(rpes::work)));
    CUDA_CHECK(cudaMalloc(&d_partial, blocks * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_sums, qs.size() * sizeof(float)));
    for (long b0 = 0; b0 < blocks; b0 += rpes::grid_max) {
      const long b1 = b0 + rpes::chunk(b0, blocks);
      const auto [e0, e1] = rpes::quartets_in(d.final, b0, b1);
      spread<<<e1 - e0, rpes::block_size>>>(d_quartet_work, d_final, d_work, e0, b0, b1);
      CUDA_CHECK(cudaGetLastError());
      compute_x<<<b1 - b0, rpes::block_size>>>(d_work, d_xyz, d_prims, d_partial, b0);
      CUDA_CHECK(cudaGetLastError());
    }
    for (long e0 = 0; e0 < nq; e0 += rpes::grid_max) {
      do_reduction<<<rpes::chunk(e0, nq), threads>>>(d_final, d_partial, d_sums, e0);
      CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> sums(qs.size());
    CUDA_CHECK(cudaMemcpy(sums.data(), d_sums, sums.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (void* p : {static_cast<void*>(d_quartet_work), static_cast<void*>(d_work), static_cast<void*>(d_final),
                    static_cast<void*>(d_xyz), static_cast<void*>(d_prims), static_cast<void*>(d_partial),
                    static_cast<void*>(d_sums)}) {
      CUDA_CHECK(cudaFree(p));
    }
    timer.stop();
    return rpes::conclude(o, in, sums, prog, "gpus=1", timer.seconds());
  });
}
