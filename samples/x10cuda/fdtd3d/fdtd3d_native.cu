// x10cuda_fdtd3d_native: the X10 paper's CUDA3DFD in hand-written CUDA (the runtime API, one GPU, no apgas): the
// baseline of apgas_x10cuda_fdtd3d on a GPU. fdtd3d.hpp has the problem, the input and the check.
#include "fdtd3d.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace {

const char* const prog = "x10cuda_fdtd3d_native";
constexpr int r = fdtd3d::radius, bd = 16, sw = bd + 2 * r;  // radius, block width, shared tile width

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, cudaGetErrorString(e));
    std::exit(3);
  }
}

__constant__ float c_coeff[r + 1];

// FiniteDifferencesKernel of the X10 sample (the SDK's 3DFD): each thread marches along z through one (x, y) column
// with planes z-4 .. z+4 in registers and plane z in a shared tile with a 4-wide halo, which the block copies whole
// (as apgas_x10cuda_fdtd3d's b.stage does; X10's kernel stored the centre from registers and the halo by 4 threads of
// each side). Planes [z0, z1) of out.
__global__ void fd_kernel(const float* input, float* output, int nx, int ny, int z0, int z1) {
  __shared__ float s[sw * sw];
  const long plane = static_cast<long>(nx) * ny;
  const int tx = threadIdx.x, ty = threadIdx.y, x = blockIdx.x * bd + tx, y = blockIdx.y * bd + ty;
  long i = (z0 - r) * plane + static_cast<long>(y) * nx + x;  // this thread's point in plane z0-4
  float behind4, behind3 = input[i], behind2 = input[i + plane], behind1 = input[i + 2 * plane];
  float current = input[i + 3 * plane], infront1 = input[i + 4 * plane], infront2 = input[i + 5 * plane];
  float infront3 = input[i + 6 * plane], infront4 = input[i + 7 * plane];
  const int m = (ty + r) * sw + tx + r;  // the thread's point in the tile
  const bool inside = x >= r && x < nx - r && y >= r && y < ny - r;  // the x and y edges keep their values
  for (int z = z0; z < z1; ++z) {
    i += plane;  // plane z
    behind4 = behind3, behind3 = behind2, behind2 = behind1, behind1 = current;
    current = infront1, infront1 = infront2, infront2 = infront3, infront3 = infront4;
    infront4 = input[i + r * plane];
    __syncthreads();
    const long corner = i - static_cast<long>(ty) * nx - tx;  // the block's first point in plane z
    for (int e = ty * bd + tx; e < sw * sw; e += bd * bd) {   // plane z's window into the tile (apgas' b.stage)
      s[e] = input[corner + static_cast<long>(e / sw - r) * nx + e % sw - r];
    }
    __syncthreads();
    float v = c_coeff[0] * current;
    v += fdtd3d::term(c_coeff[1], infront1, behind1, s[m - sw], s[m + sw], s[m - 1], s[m + 1]);
    v += fdtd3d::term(c_coeff[2], infront2, behind2, s[m - 2 * sw], s[m + 2 * sw], s[m - 2], s[m + 2]);
    v += fdtd3d::term(c_coeff[3], infront3, behind3, s[m - 3 * sw], s[m + 3 * sw], s[m - 3], s[m + 3]);
    v += fdtd3d::term(c_coeff[4], infront4, behind4, s[m - 4 * sw], s[m + 4 * sw], s[m - 4], s[m + 4]);
    if (inside) output[i] = v;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return parboil::guarded(prog, fdtd3d::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"default", "small", "h100"});
    const auto p = fdtd3d::prepare(o);
    if (!p) return 0;
    int gpus = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&gpus); e != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return 0;
    }
    check(cudaFree(nullptr), "cudaFree(0) (creating the context)");
    const std::size_t bytes = static_cast<std::size_t>(p->points()) * sizeof(float);
    std::vector<float> out(static_cast<std::size_t>(p->points()));
    parboil::timer timer;
    timer.start();
    float *d_in, *d_out;  // both start as the input: the edges are never written
    check(cudaMalloc(&d_in, bytes), "cudaMalloc");
    check(cudaMalloc(&d_out, bytes), "cudaMalloc");
    check(cudaMemcpy(d_in, p->volume.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy input");
    check(cudaMemcpy(d_out, p->volume.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy input");
    check(cudaMemcpyToSymbol(c_coeff, fdtd3d::coefficients, sizeof(fdtd3d::coefficients)), "cudaMemcpyToSymbol");
    for (int st = 0; st < p->steps; ++st) {
      fd_kernel<<<dim3(p->nx / bd, p->ny / bd), dim3(bd, bd)>>>(d_in, d_out, p->nx, p->ny, r, p->nz - r);
      check(cudaGetLastError(), "fd_kernel<<<>>>");
      std::swap(d_in, d_out);
    }
    check(cudaMemcpy(out.data(), d_in, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy result");
    check(cudaFree(d_in), "cudaFree");
    check(cudaFree(d_out), "cudaFree");
    timer.stop();
    return fdtd3d::finish(o, *p, out, timer.seconds(), "gpus=1");
  });
}
