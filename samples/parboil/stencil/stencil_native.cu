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

// A plane's window of the column in shared memory: element (x, y) of the plane, relative to the column's corner.
struct window {
  const float* s;
  int origin, width;
  __device__ float operator()(int x, int y) const { return s[origin + y * width + x]; }
};

// Elements [lo, hi) of the plane whose element (0, 0) is at src into s (the block's threads copy them).
__device__ window stage(float* s, const float* src, int nx, int2 lo, int2 hi) {
  const int width = hi.x - lo.x, height = hi.y - lo.y, threads = blockDim.x * blockDim.y;
  const int n = width > 0 && height > 0 ? width * height : 0;
  for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < n; i += threads) {
    const int y = i / width;
    s[i] = src[(lo.y + y) * nx + lo.x + (i - y * width)];
  }
  return {s, -(lo.y * width + lo.x), width};
}

// block2D_hybrid_coarsen_x as the apgas version has it: a (32, 4) block owns a 64 x 4 column of the volume and walks
// it along z. Parboil keeps the planes below and above in registers and stages the current plane with its halo;
// here each plane of the column is staged whole, four in a ring: planes k - 1, k and k + 1 are read while plane
// k + 2 is staged, one barrier per plane. A plane's window holds the halo (the neighbouring row or plane of the
// array at the volume's edge) in a tile inside the volume, and is clipped to the volume in a tile at its far edge.
// A boundary point keeps its value.
__global__ void block2d_hybrid_coarsen_x(float c0, float c1, const float* A0, float* Anext, int nx, int ny, int nz) {
  extern __shared__ float sh[];  // 4 planes of (2 tx + 2) x (ty + 2)
  const int tx = blockDim.x, cells = (2 * tx + 2) * (ty + 2);
  const int x0 = blockIdx.x * 2 * tx, y0 = blockIdx.y * ty, plane = nx * ny;
  const bool full = x0 + 2 * tx <= nx && y0 + ty <= ny;
  auto plane_window = [&](int k) {
    const bool whole = full && k > 0 && k < nz - 1;
    const int2 lo = whole ? make_int2(-1, -1) : make_int2(x0 > 0 ? -1 : 0, y0 > 0 ? -1 : 0);
    const int2 hi = whole ? make_int2(2 * tx + 1, ty + 1) : make_int2(min(2 * tx + 1, nx - x0), min(ty + 1, ny - y0));
    return stage(sh + k % 4 * cells, A0 + k * plane + y0 * nx + x0, nx, lo, hi);
  };
  window below = plane_window(0), here = plane_window(1), above = plane_window(2);
  __syncthreads();
  for (int k = 1; k < nz - 1; ++k) {
    const window next = k + 2 < nz ? plane_window(k + 2) : above;
    for (int h = 0; h < 2; ++h) {
      const int x = threadIdx.x + h * tx, y = threadIdx.y, i = x0 + x, j = y0 + y, g = i + j * nx + k * plane;
      if (i >= nx || j >= ny) continue;
      const bool interior = i > 0 && i < nx - 1 && j > 0 && j < ny - 1;
      Anext[g] = !interior ? here(x, y)
                           : (above(x, y) + below(x, y) + here(x, y + 1) + here(x, y - 1) + here(x + 1, y) +
                              here(x - 1, y)) * c1 - here(x, y) * c0;
    }
    __syncthreads();
    below = here, here = above, above = next;
  }
}

// The two device volumes, made before the timed part (as the apgas version makes its arrays).
void run(const stencil::problem& p, float* d0, float* d1, float* result) {
  const std::size_t bytes = p.cells() * sizeof(float);
  check(cudaMemcpy(d0, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  check(cudaMemcpy(d1, p.a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");  // the boundary
  const dim3 grid((p.nx + 2 * tx - 1) / (2 * tx), (p.ny + ty - 1) / ty), block(tx, ty);
  const std::size_t shared = 4 * (ty + 2) * (2 * tx + 2) * sizeof(float);
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
