// x10cuda_blackscholes_native: the X10 paper's CUDABlackScholes in hand-written CUDA (the runtime API, one GPU, no
// apgas): the baseline of apgas_x10cuda_blackscholes on a GPU. blackscholes.hpp has the problem, the input and the
// check.
#include "blackscholes.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

const char* const prog = "x10cuda_blackscholes_native";

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// BlackScholesGPU of the X10 sample (the SDK's kernel), each block over its own contiguous range of the options (as
// apgas_x10cuda_blackscholes does; the SDK strides over the whole grid).
__global__ void black_scholes(const float* s, const float* x, const float* t, float* call, float* put, long n) {
  const long runs = static_cast<long>(gridDim.x) * blockDim.x, per = (n + runs - 1) / runs * blockDim.x;
  const long lo = blockIdx.x * per, hi = min(n, lo + per);
  for (long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    blackscholes::price(s[i], x[i], t[i], blackscholes::riskfree, blackscholes::volatility, call[i], put[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return parboil::guarded(prog, blackscholes::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"default", "small", "h100"});
    const auto p = blackscholes::prepare(o);
    if (!p) return 0;
    int gpus = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&gpus); e != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    check(cudaFree(nullptr), "cudaFree(0) (creating the context)");
    const std::size_t n = static_cast<std::size_t>(p->n), bytes = n * sizeof(float);
    std::vector<float> call(n), put(n);
    parboil::timer timer;
    timer.start();
    float* d[5];  // S, X, T in; call, put out
    for (float*& a : d) check(cudaMalloc(&a, bytes), "cudaMalloc");
    check(cudaMemcpy(d[0], p->s.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy S");
    check(cudaMemcpy(d[1], p->x.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy X");
    check(cudaMemcpy(d[2], p->t.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy T");
    for (int i = 0; i < p->iterations; ++i) black_scholes<<<480, 128>>>(d[0], d[1], d[2], d[3], d[4], p->n);
    check(cudaGetLastError(), "black_scholes<<<480, 128>>>");
    check(cudaMemcpy(call.data(), d[3], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy call");
    check(cudaMemcpy(put.data(), d[4], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy put");
    for (float* a : d) check(cudaFree(a), "cudaFree");
    timer.stop();
    return blackscholes::finish(o, *p, call, put, timer.seconds(), "gpus=1");
  });
}
