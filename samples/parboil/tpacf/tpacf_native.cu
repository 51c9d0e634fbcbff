// parboil_tpacf_native: the native CUDA baseline of apgas_parboil_tpacf — Parboil's optimised tpacf kernel
// (src/cuda/tpacf_kernel.cu) in CUDA runtime code on one GPU: one block of 256 threads per histogram (DD, the RR of
// a random set, the DR of a random set), 256 points per step staged in shared memory between barriers, each thread
// one point of the other side, the bin by a binary search over the bounds in constant memory, shared-memory atomics
// into 128 sub-histograms, summed at the end. The input, output and check are tpacf.hpp's.
#include "tpacf.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char* prog = "parboil_tpacf_native";
using tpacf::bins;
using tpacf::block;
using tpacf::sub_histograms;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__constant__ float dev_binb[bins + 1];

// Parboil's binary search over dev_binb[] (branch-free; tpacf::find_bin).
__device__ int find_bin(float d) {
  int lo = 0;
  for (int len = bins; len > 1;) {
    const int half = len / 2;
    lo = d < dev_binb[lo + half] ? lo + half : lo;
    len -= half;
  }
  return d < dev_binb[lo] && d >= dev_binb[lo + 1] ? lo : -1;
}

// pts: x, y, z of the data set then the m random sets ((1 + m) * n floats each). Block 0: DD, 1..m: RR, m+1..2m: DR.
__global__ void gen_hists(const float* __restrict__ pts, tpacf::bin_count* __restrict__ hists, int n, int m) {
  __shared__ float tile[3 * block];
  __shared__ unsigned sub[bins * sub_histograms];
  for (int w = threadIdx.x; w < bins * sub_histograms; w += block) sub[w] = 0;
  const int kind = blockIdx.x;
  const bool self = kind <= m;
  const long stride = static_cast<long>(1 + m) * n;
  const float* d = pts + static_cast<long>(self ? kind : 0) * n;
  const float* r = pts + static_cast<long>(self ? kind : kind - m) * n;
  for (int i = 0; i < n; i += block) {
    __syncthreads();  // the previous step's tile is no longer read (and sub[] is zeroed)
    if (i + threadIdx.x < n) {
      for (int c = 0; c < 3; ++c) tile[c * block + threadIdx.x] = d[c * stride + i + threadIdx.x];
    }
    __syncthreads();
    for (int j = self ? i + 1 : 0; j < n; j += block) {
      const int rj = j + threadIdx.x;
      if (rj >= n) continue;
      const float rx = r[rj], ry = r[stride + rj], rz = r[2 * stride + rj];
      int kn = n - i < block ? n - i : block;
      if (self && rj - i < kn) kn = rj - i;  // self: only the pairs i + k < rj
      for (int k = 0; k < kn; ++k) {
        const int bin = find_bin(tile[k] * rx + tile[block + k] * ry + tile[2 * block + k] * rz);
        if (bin >= 0) atomicAdd(&sub[bin * sub_histograms + threadIdx.x / 2], 1u);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < bins) {  // the block's histogram: each bin's sub-histograms summed
    tpacf::bin_count s = 0;
    for (int w = 0; w < sub_histograms; ++w) s += sub[threadIdx.x * sub_histograms + w];
    hists[blockIdx.x * bins + threadIdx.x] = s;
  }
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = tpacf::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, tpacf::size_names);
    tpacf::input in;
    if (!tpacf::load(o, in)) return 0;
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "no device");
      return 0;
    }
    check(cudaFree(nullptr), "cudaFree (context creation)");
    parboil::timer timer;
    timer.start();
    const auto binb = tpacf::bin_bounds();
    check(cudaMemcpyToSymbol(dev_binb, binb.data(), sizeof binb), "cudaMemcpyToSymbol");
    const int blocks = 2 * in.sets + 1;
    float* d_pts = nullptr;
    tpacf::bin_count* d_hists = nullptr;
    check(cudaMalloc(&d_pts, in.xyz.size() * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d_hists, static_cast<std::size_t>(blocks) * bins * sizeof(tpacf::bin_count)), "cudaMalloc");
    check(cudaMemcpy(d_pts, in.xyz.data(), in.xyz.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    gen_hists<<<blocks, block>>>(d_pts, d_hists, in.n, in.sets);
    check(cudaGetLastError(), "gen_hists launch");
    check(cudaDeviceSynchronize(), "gen_hists");
    std::vector<tpacf::bin_count> h(static_cast<std::size_t>(blocks) * bins);
    check(cudaMemcpy(h.data(), d_hists, h.size() * sizeof(tpacf::bin_count), cudaMemcpyDeviceToHost), "cudaMemcpy");
    const tpacf::histograms total = tpacf::histograms::of_blocks(h, true, in.sets);
    check(cudaFree(d_pts), "cudaFree");
    check(cudaFree(d_hists), "cudaFree");
    timer.stop();
    if (!o.output.empty()) tpacf::write_output(o.output, total);
    const bool ok = tpacf::check(o, in, total, prog);
    return parboil::report(tpacf::name, tpacf::fields(in) + " gpus=1", timer.seconds(), o, ok);
  });
}
