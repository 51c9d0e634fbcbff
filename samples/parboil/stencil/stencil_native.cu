// parboil_stencil_native: Parboil's optimised stencil (src/cuda) as hand-written CUDA runtime code on one GPU, the
// GPU baseline of apgas_parboil_stencil: 7-point Jacobi sweeps ping-ponging between two device volumes, launched back
// to back with one synchronisation at the end. Input, output and the check: stencil.hpp.
#include "stencil.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace {

constexpr const char* prog = "parboil_stencil_native";
constexpr int tx = 32, ty = 4;  // the block; a thread computes two points, tx apart in x

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// block2D_hybrid_coarsen_x: a (32, 4) block owns a 64 x 4 column of the volume and walks it along z, the planes
// below and above in registers and the current plane in shared memory (the points at the tile's edge read their
// outside neighbours from global memory); two barriers per plane.
__global__ void block2d_hybrid_coarsen_x(float c0, float c1, const float* A0, float* Anext, int nx, int ny, int nz) {
  __shared__ float sh[2 * tx * ty];
  const int x0 = blockIdx.x * 2 * tx, j = blockIdx.y * ty + threadIdx.y;
  const int plane = nx * ny;
  float bottom[2] = {0, 0}, top[2] = {0, 0};
  for (int h = 0; h < 2; ++h) {
    const int i = x0 + threadIdx.x + h * tx;
    if (i < nx && j < ny) {
      bottom[h] = A0[i + j * nx];
      sh[threadIdx.y * 2 * tx + threadIdx.x + h * tx] = A0[i + j * nx + plane];
    }
  }
  __syncthreads();
  for (int k = 1; k < nz - 1; ++k) {
    for (int h = 0; h < 2; ++h) {
      const int i = x0 + threadIdx.x + h * tx, s = threadIdx.y * 2 * tx + threadIdx.x + h * tx;
      const int g = i + j * nx + k * plane;
      if (i < nx && j < ny) top[h] = A0[g + plane];
      if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
        const float left = (h == 0 && threadIdx.x == 0) ? A0[g - 1] : sh[s - 1];
        const float right = (h == 1 && threadIdx.x == tx - 1) ? A0[g + 1] : sh[s + 1];
        const float down = threadIdx.y == 0 ? A0[g - nx] : sh[s - 2 * tx];
        const float up = threadIdx.y == ty - 1 ? A0[g + nx] : sh[s + 2 * tx];
        Anext[g] = (top[h] + bottom[h] + up + down + right + left) * c1 - sh[s] * c0;
      }
    }
    __syncthreads();
    for (int h = 0; h < 2; ++h) {
      const int s = threadIdx.y * 2 * tx + threadIdx.x + h * tx;
      bottom[h] = sh[s];
      sh[s] = top[h];
    }
    __syncthreads();
  }
}

void run(const stencil::problem& p, float* result) {
  const std::size_t bytes = p.cells() * sizeof(float);
  float *d0 = nullptr, *d1 = nullptr;
  check(cudaMalloc(&d0, bytes), "cudaMalloc");
  check(cudaMalloc(&d1, bytes), "cudaMalloc");
  check(cudaMemcpy(d0, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  check(cudaMemcpy(d1, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");  // the boundary
  const dim3 grid((p.nx + 2 * tx - 1) / (2 * tx), (p.ny + ty - 1) / ty), block(tx, ty);
  for (int it = 0; it < p.iterations; ++it) {
    block2d_hybrid_coarsen_x<<<grid, block>>>(stencil::c0, stencil::c1, d0, d1, p.nx, p.ny, p.nz);
    check(cudaGetLastError(), "block2d_hybrid_coarsen_x launch");
    std::swap(d0, d1);
  }
  check(cudaDeviceSynchronize(), "block2d_hybrid_coarsen_x");
  check(cudaMemcpy(result, d0, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
  check(cudaFree(d0), "cudaFree");
  check(cudaFree(d1), "cudaFree");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = stencil::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    const auto p = stencil::start(o);
    if (!p) return 0;
    int gpus = 0;
    const cudaError_t e = cudaGetDeviceCount(&gpus);
    if (e != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    check(cudaFree(nullptr), "creating the CUDA context");  // outside the timed part, as apgas starts its GPUs first
    std::vector<float> result(p->cells());
    parboil::timer time;
    time.start();
    run(*p, result.data());
    time.stop();
    return stencil::finish(prog, o, *p, result, time.seconds(), "gpus=1");
  });
}
