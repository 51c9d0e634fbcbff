// parboil_sgemm_native: Parboil's optimised sgemm (src/cuda) as hand-written CUDA runtime code on one GPU, the GPU
// baseline of apgas_parboil_sgemm: C = A * B^T (column-major), the register-tiled kernel mysgemmNT.
// Input, output and the check: sgemm.hpp.
#include "sgemm.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr const char* prog = "parboil_sgemm_native";

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// A (16, 8) block computes 128 rows x 16 columns of C, a thread one row x 16 columns; per k step of 8 the block
// stages an 8 x 16 tile of B^T in shared memory between two barriers.
__global__ void mysgemm_nt(const float* A, int lda, const float* B, int ldb, float* C, int ldc, int k) {
  __shared__ float b_s[sgemm::tile_k][sgemm::tile_n];
  float c[sgemm::tile_n];
  for (int q = 0; q < sgemm::tile_n; ++q) c[q] = 0.0f;
  const int row = blockIdx.x * sgemm::tile_m + threadIdx.y * blockDim.x + threadIdx.x;
  const int col0 = blockIdx.y * sgemm::tile_n;
  for (int l0 = 0; l0 < k; l0 += sgemm::tile_k) {
    b_s[threadIdx.y][threadIdx.x] = B[col0 + threadIdx.x + (l0 + threadIdx.y) * ldb];
    __syncthreads();
    for (int j = 0; j < sgemm::tile_k; ++j) {
      const float a = A[row + (l0 + j) * lda];
      for (int q = 0; q < sgemm::tile_n; ++q) c[q] += a * b_s[j][q];
    }
    __syncthreads();
  }
  for (int q = 0; q < sgemm::tile_n; ++q) C[row + (col0 + q) * ldc] = c[q];
}

struct device_arrays {
  float *a = nullptr, *bt = nullptr, *c = nullptr;
};

// Made inside the timed part, as Parboil's sgemm (its COPY timer) and the apgas version make theirs.
device_arrays allocate(const sgemm::problem& p) {
  device_arrays d;
  check(cudaMalloc(&d.a, p.a.size() * sizeof(float)), "cudaMalloc A");
  check(cudaMalloc(&d.bt, p.bt.size() * sizeof(float)), "cudaMalloc B^T");
  check(cudaMalloc(&d.c, static_cast<std::size_t>(p.m) * p.n * sizeof(float)), "cudaMalloc C");
  return d;
}

void multiply(const sgemm::problem& p, const device_arrays& d, float* c) {
  check(cudaMemcpy(d.a, p.a.data(), p.a.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy A");
  check(cudaMemcpy(d.bt, p.bt.data(), p.bt.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy B^T");
  const dim3 grid(p.m / sgemm::tile_m, p.n / sgemm::tile_n), block(sgemm::tile_n, sgemm::tile_k);
  mysgemm_nt<<<grid, block>>>(d.a, p.m, d.bt, p.n, d.c, p.m, p.k);
  check(cudaGetLastError(), "mysgemm_nt launch");
  check(cudaDeviceSynchronize(), "mysgemm_nt");
  check(cudaMemcpy(c, d.c, std::size_t(p.m) * p.n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy C");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = sgemm::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    const auto p = sgemm::start(o);
    if (!p) return 0;
    int gpus = 0;
    const cudaError_t e = cudaGetDeviceCount(&gpus);
    if (e != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    check(cudaFree(nullptr), "cudaFree(0) (creating the context)");
    std::vector<float> c(static_cast<std::size_t>(p->m) * p->n);
    parboil::timer time;
    time.start();
    const device_arrays d = allocate(*p);
    multiply(*p, d, c.data());
    time.stop();
    for (float* x : {d.a, d.bt, d.c}) check(cudaFree(x), "cudaFree");
    return sgemm::finish(prog, o, *p, c, time.seconds(), "gpus=1");
  });
}
