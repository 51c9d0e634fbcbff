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
constexpr int pad = 4;          // a shared row: pad - 1 unused, the left halo point, 2 tx points, the right, pad - 1

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

__device__ int clamp_to(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

// Plane k's halo into its shared plane s: the rows above and below the tile (one point per thread) and, where they
// lie inside the volume, the columns at its sides (the edge threads) from A0.
__device__ void halo(float* s, const float* A0, int k, int x0, int y0, int nx, int ny) {
  const int tx = blockDim.x, w = 2 * tx + 2 * pad, plane = nx * ny;
  const int r = threadIdx.y / 2, col = threadIdx.y % 2 * tx + threadIdx.x;
  const int j = clamp_to(r == 0 ? y0 - 1 : y0 + ty, ny - 1);
  s[r * (ty + 1) * w + pad + col] = A0[clamp_to(x0 + col, nx - 1) + j * nx + k * plane];
  if ((x0 > 0 || x0 + 2 * tx < nx) && (threadIdx.x == 0 || threadIdx.x == tx - 1)) {
    const int c = threadIdx.x == 0 ? -1 : 2 * tx;
    const int j = clamp_to(y0 + threadIdx.y, ny - 1);
    s[(threadIdx.y + 1) * w + pad + c] = A0[clamp_to(x0 + c, nx - 1) + j * nx + k * plane];
  }
}

// block2D_hybrid_coarsen_x as the apgas version has it: a (32, 4) block owns a 64 x 4 column of the volume and walks
// it along z, planes k - 1, k and k + 1 of the column in a ring of three shared planes (plane k with its halo; Parboil
// keeps k - 1 and k + 1 in registers, two barriers per plane): a thread loads plane k + 1's point into the ring, and
// the halo of plane k + 1 is staged in the same pass; one barrier per plane. A boundary point keeps its value.
__global__ void block2d_hybrid_coarsen_x(float c0, float c1, const float* A0, float* Anext, int nx, int ny, int nz) {
  extern __shared__ float sh[];  // 3 planes of (ty + 2) rows of 2 tx + 2 pad
  const int tx = blockDim.x, w = 2 * tx + 2 * pad, ring = (ty + 2) * w;
  const int x0 = blockIdx.x * 2 * tx, y0 = blockIdx.y * ty, j = y0 + threadIdx.y, plane = nx * ny;
  const bool full = x0 + 2 * tx <= nx && y0 + ty <= ny;
  for (int h = 0; h < 2; ++h) {  // planes 0 and 1
    const int i = x0 + threadIdx.x + h * tx, c = (threadIdx.y + 1) * w + pad + threadIdx.x + h * tx;
    const bool inside = full || (i < nx && j < ny);
    sh[c] = inside ? A0[i + j * nx] : 0.0f;
    sh[ring + c] = inside ? A0[i + j * nx + plane] : 0.0f;
  }
  halo(sh + ring, A0, 1, x0, y0, nx, ny);
  __syncthreads();
  for (int k = 1; k < nz - 1; ++k) {
    const float* prev = sh + (k - 1) % 3 * ring;
    const float* cur = sh + k % 3 * ring;
    float* next = sh + (k + 1) % 3 * ring;
    for (int h = 0; h < 2; ++h) {
      const int i = x0 + threadIdx.x + h * tx, c = (threadIdx.y + 1) * w + pad + threadIdx.x + h * tx;
      const int g = i + j * nx + k * plane;
      const bool inside = full || (i < nx && j < ny), interior = i > 0 && i < nx - 1 && j > 0 && j < ny - 1;
      const float up = inside ? A0[g + plane] : 0.0f, centre = cur[c];
      next[c] = up;
      const float v = (up + prev[c] + cur[c + w] + cur[c - w] + cur[c + 1] + cur[c - 1]) * c1 - centre * c0;
      if (inside) Anext[g] = interior ? v : centre;
    }
    halo(next, A0, k + 1, x0, y0, nx, ny);
    __syncthreads();
  }
}

// The two device volumes, made before the timed part (as the apgas version makes its arrays).
void run(const stencil::problem& p, float* d0, float* d1, float* result) {
  const std::size_t bytes = p.cells() * sizeof(float);
  check(cudaMemcpy(d0, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  check(cudaMemcpy(d1, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");  // the boundary
  const dim3 grid((p.nx + 2 * tx - 1) / (2 * tx), (p.ny + ty - 1) / ty), block(tx, ty);
  const std::size_t shared = 3 * (ty + 2) * (2 * tx + 2 * pad) * sizeof(float);
  for (int it = 0; it < p.iterations; ++it) {
    block2d_hybrid_coarsen_x<<<grid, block, shared>>>(stencil::c0, stencil::c1, d0, d1, p.nx, p.ny, p.nz);
    check(cudaGetLastError(), "block2d_hybrid_coarsen_x launch");
    std::swap(d0, d1);
  }
  check(cudaDeviceSynchronize(), "block2d_hybrid_coarsen_x");
  check(cudaMemcpy(result, d0, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
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
    float *d0 = nullptr, *d1 = nullptr;
    check(cudaMalloc(&d0, p->cells() * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&d1, p->cells() * sizeof(float)), "cudaMalloc");
    std::vector<float> result(p->cells());
    parboil::timer time;
    time.start();
    run(*p, d0, d1, result.data());
    time.stop();
    check(cudaFree(d0), "cudaFree");
    check(cudaFree(d1), "cudaFree");
    return stencil::finish(prog, o, *p, result, time.seconds(), "gpus=1");
  });
}
