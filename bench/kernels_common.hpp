#pragma once
// What apgas_bench_kernels' kernels and their anchors share: sizes, constants, the Black-Scholes formula, the anchors'
// entry points.
#include <apgas/kernel_thread.hpp>  // APGAS_KERNEL

#include <cmath>
#include <string>

namespace kbench {

inline constexpr int tile = 16;             // SGEMM: 16x16 tiles, 256 threads per block
inline constexpr int reduce_threads = 256;  // block reduction: threads per block
inline constexpr float stencil_c0 = 1.0f / 6.0f;
inline constexpr float stencil_c1 = 1.0f / 6.0f / 6.0f;
inline constexpr int stencil_tx = 32;       // Parboil-shaped stencil: 32x8 threads per block, a z-sweep each
inline constexpr int stencil_ty = 8;

APGAS_KERNEL inline long idx3(int i, int j, int k, int nx, int ny) {
  return (static_cast<long>(k) * ny + j) * nx + i;
}

// Black-Scholes for one option (the CUDA SDK's formula): riskless rate 0.02, volatility 0.30.
APGAS_KERNEL inline float cnd(float d) {
  const float a1 = 0.31938153f, a2 = -0.356563782f, a3 = 1.781477937f, a4 = -1.821255978f, a5 = 1.330274429f;
  const float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
  const float c = 0.3989422804014327f * expf(-0.5f * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))));
  return d > 0 ? 1.0f - c : c;
}
APGAS_KERNEL inline void black_scholes_one(float s, float x, float t, float& call, float& put) {
  const float r = 0.02f, v = 0.30f;
  const float sqrt_t = sqrtf(t);
  const float d1 = (logf(s / x) + (r + 0.5f * v * v) * t) / (v * sqrt_t);
  const float d2 = d1 - v * sqrt_t;
  const float cnd1 = cnd(d1), cnd2 = cnd(d2);
  const float e = expf(-r * t);
  call = s * cnd1 - x * e * cnd2;
  put = x * e * (1.0f - cnd2) - s * (1.0f - cnd1);
}

void sgemm_omp(const float* a, const float* b, float* c, int n);
void stencil_omp(float* a0, float* anext, int nx, int ny, int nz, int iterations);
void reduce_omp(const float* x, long n, int blocks, float* partial);
void black_scholes_omp(const float* s, const float* x, const float* t, float* call, float* put, long n);
int omp_threads();

#if defined(APGAS_BENCH_OPENCL)
// kernels_ocl.cpp: the CUDA-shaped kernels as OpenCL C on the platform's CPU device (PoCL); each returns the seconds
// its kernel runs took. ocl_device() names the device, or is empty with the reason in why_not.
std::string ocl_device(std::string& why_not);
double sgemm_ocl(const float* a, const float* b, float* c, int n);
double stencil_ocl(float* a0, float* a1, int nx, int ny, int nz, int iterations);
#endif

}  // namespace kbench
