// parboil_cp_native: Parboil's cp in CUDA, the GPU baseline: the optimised kernel (cuenergy_pre8_coalesce.cu) on
// one GPU, the atoms copied to constant memory 4000 at a time, one launch per chunk adding to the plane.
#include "cp.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

#define CUDA_CHECK(call)                                                                                  \
  do {                                                                                                    \
    const cudaError_t err = (call);                                                                       \
    if (err != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(err)); \
  } while (0)

namespace {

__constant__ cp::atom atominfo[cp::max_atoms];

// Each thread computes 8 points of a row, 16 apart; a 16 x 8 block computes 128 x 8 points.
__global__ void cenergy(int numatoms, float* energygrid) {
  const int xindex = blockIdx.x * blockDim.x * cp::unroll_x + threadIdx.x;
  const int yindex = blockIdx.y * blockDim.y + threadIdx.y;
  const int outaddr = gridDim.x * blockDim.x * cp::unroll_x * yindex + xindex;
  cp::sums s = {};
  for (int i = 0; i < numatoms; ++i) cp::add_atom(atominfo[i], xindex, yindex, s);
  cp::add_sums(s, energygrid + outaddr);
}

void compute(const cp::problem& pb, std::span<float> energy) {
  const std::vector<cp::atom> atoms = cp::plane_atoms(pb.atoms);
  float* d_energy = nullptr;
  CUDA_CHECK(cudaMalloc(&d_energy, energy.size_bytes()));
  CUDA_CHECK(cudaMemset(d_energy, 0, energy.size_bytes()));
  const dim3 grid(pb.nx / cp::tile_x, pb.ny / cp::block_y), block(cp::block_x, cp::block_y);
  for (const std::span<const cp::atom> chunk : cp::chunks(atoms)) {
    CUDA_CHECK(cudaMemcpyToSymbol(atominfo, chunk.data(), chunk.size_bytes()));
    cenergy<<<grid, block>>>(static_cast<int>(chunk.size()), d_energy);
    CUDA_CHECK(cudaGetLastError());
  }
  CUDA_CHECK(cudaMemcpy(energy.data(), d_energy, energy.size_bytes(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_energy));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = cp::usage("parboil_cp_native");
  return parboil::guarded("parboil_cp_native", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    int devices = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "parboil_cp_native: no CUDA GPU (%s)\n",
                   err != cudaSuccess ? cudaGetErrorString(err) : "no device");
      return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));  // creates the GPU's context now, not in the timed computation
    return cp::run(o, "parboil_cp_native", "gpus=1", compute);
  });
}
