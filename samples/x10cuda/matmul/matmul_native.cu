// x10cuda_matmul_native: the X10 paper's CUDAMatMul (Volkov's sgemmNN) in hand-written CUDA (the runtime API, one
// GPU, no apgas): the baseline of apgas_x10cuda_matmul on a GPU. matmul.hpp has the problem, the input and the check.
#include "matmul.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

const char* const prog = "x10cuda_matmul_native";

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// sgemmNN of the X10 sample: C = alpha A B + beta C (m x n, column-major), 64 threads (16 x 4) per 64 x 16 tile of
// C, a row of the tile in each thread's registers, 16 x 16 of B staged in shared memory (rows padded to 17).
__global__ void sgemm_nn(const float* A, int lda, const float* B, int ldb, float* C, int ldc, int m, int k,
                         float alpha, float beta) {
  __shared__ float bs[16 * 17];
  const int inx = threadIdx.x, iny = threadIdx.y, id = inx + iny * 16;
  const int ibx = blockIdx.x % (m / 64) * 64, iby = blockIdx.x / (m / 64) * 16;
  A += ibx + id;
  B += inx + static_cast<long>(iby + iny) * ldb;
  C += ibx + id + static_cast<long>(iby) * ldc;
  float c[16] = {};
  for (int k0 = 0; k0 < k; k0 += 16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) bs[inx * 17 + iny + 4 * i] = B[k0 + 4 * i * ldb];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float a = A[static_cast<long>(k0 + i) * lda];
#pragma unroll
      for (int j = 0; j < 16; ++j) c[j] += a * bs[i * 17 + j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) C[static_cast<long>(j) * ldc] = alpha * c[j] + beta * C[static_cast<long>(j) * ldc];
}

}  // namespace

int main(int argc, char** argv) {
  return parboil::guarded(prog, matmul::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"default", "small", "medium", "h100"});
    const auto p = matmul::prepare(o);
    if (!p) return 0;
    int gpus = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&gpus); e != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    const int n = p->n;
    const std::size_t bytes = static_cast<std::size_t>(n) * n * sizeof(float);
    float *a, *b, *c;
    check(cudaMalloc(&a, bytes), "cudaMalloc");
    check(cudaMalloc(&b, bytes), "cudaMalloc");
    check(cudaMalloc(&c, bytes), "cudaMalloc");
    check(cudaMemcpy(a, p->a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy A");
    check(cudaMemcpy(b, p->b.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy B");
    check(cudaMemcpy(c, p->c.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy C");
    const dim3 grid(n / 64 * (n / 16)), threads(16, 4);
    sgemm_nn<<<grid, threads>>>(a, n, b, n, c, n, n, n, matmul::alpha, matmul::beta);  // the untimed first launch
    check(cudaDeviceSynchronize(), "sgemm_nn<<<>>>");
    std::vector<float> result(p->c.size());
    parboil::timer timer;
    timer.start();
    for (int i = 0; i < p->iterations; ++i) {
      sgemm_nn<<<grid, threads>>>(a, n, b, n, c, n, n, n, matmul::alpha, matmul::beta);
    }
    check(cudaGetLastError(), "sgemm_nn<<<>>>");
    check(cudaMemcpy(result.data(), c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy C");
    timer.stop();
    for (float* d : {a, b, c}) check(cudaFree(d), "cudaFree");
    return matmul::finish(o, *p, result, timer.seconds(), "gpus=1");
  });
}
