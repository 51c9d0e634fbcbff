// parboil_mri_fhd_native: Parboil's mri-fhd in CUDA, the GPU baseline, on one GPU: ComputeRhoPhi, then ComputeFH
// once per tile of 512 samples copied to constant memory.
#include "mri_fhd.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

#define CUDA_CHECK(call)                                                                                  \
  do {                                                                                                    \
    const cudaError_t err = (call);                                                                       \
    if (err != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(err)); \
  } while (0)

namespace {

__constant__ mri_fhd::kvalue c[mri_fhd::k_tile];

__global__ void ComputeRhoPhi(int numK, const float* phiR, const float* phiI, const float* dR, const float* dI,
                              float* rhoPhi) {
  const int k = blockIdx.x * mri_fhd::rho_phi_block + threadIdx.x;
  if (k < numK) {
    rhoPhi[k] = mri_fhd::rho_phi_r(phiR[k], phiI[k], dR[k], dI[k]);
    rhoPhi[numK + k] = mri_fhd::rho_phi_i(phiR[k], phiI[k], dR[k], dI[k]);
  }
}

// A thread per voxel adds the tile's terms to its rFhD and iFhD (xyz: x, y, z; F: rFhD, iFhD), four samples a step.
__global__ void ComputeFH(int tileK, const float* xyz, float* F, int numX) {
  const int i = blockIdx.x * mri_fhd::fh_block + threadIdx.x;
  if (i >= numX) return;
  const float sx = xyz[i], sy = xyz[numX + i], sz = xyz[2 * numX + i];
  float sr = F[i], si = F[numX + i];
#pragma unroll 4
  for (int k = 0; k < tileK; ++k) mri_fhd::add_sample(c[k], sx, sy, sz, sr, si);
  F[i] = sr;
  F[numX + i] = si;
}

float* to_device(const std::vector<float>& v) {
  float* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

void compute(const mri::input& in, mri::output& out) {
  const int numK = in.numK(), numX = in.numX();
  float *phiR_d = to_device(in.phiR), *phiI_d = to_device(in.phiI), *dR_d = to_device(in.dR), *dI_d = to_device(in.dI);
  float* rhoPhi_d = nullptr;
  CUDA_CHECK(cudaMalloc(&rhoPhi_d, 2 * numK * sizeof(float)));
  ComputeRhoPhi<<<mri::blocks(numK, mri_fhd::rho_phi_block), mri_fhd::rho_phi_block>>>(numK, phiR_d, phiI_d, dR_d,
                                                                                         dI_d, rhoPhi_d);
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> rho(2 * numK);
  CUDA_CHECK(cudaMemcpy(rho.data(), rhoPhi_d, 2 * numK * sizeof(float), cudaMemcpyDeviceToHost));
  for (float* d : {phiR_d, phiI_d, dR_d, dI_d, rhoPhi_d}) CUDA_CHECK(cudaFree(d));
  const std::vector<mri_fhd::kvalue> kv = mri_fhd::k_values(in, rho);

  float *xyz_d = to_device(in.xyz), *F_d = nullptr;
  CUDA_CHECK(cudaMalloc(&F_d, out.size() * sizeof(float)));
  CUDA_CHECK(cudaMemset(F_d, 0, out.size() * sizeof(float)));
  for (const std::span<const mri_fhd::kvalue> tile :
       mri::tiles(std::span<const mri_fhd::kvalue>(kv), mri_fhd::k_tile)) {
    CUDA_CHECK(cudaMemcpyToSymbol(c, tile.data(), tile.size_bytes()));
    ComputeFH<<<mri::blocks(numX, mri_fhd::fh_block), mri_fhd::fh_block>>>(static_cast<int>(tile.size()), xyz_d, F_d,
                                                                           numX);
    CUDA_CHECK(cudaGetLastError());
  }
  CUDA_CHECK(cudaMemcpy(out.data(), F_d, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (float* d : {xyz_d, F_d}) CUDA_CHECK(cudaFree(d));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = mri::usage("parboil_mri_fhd_native", "IN");
  return parboil::guarded("parboil_mri_fhd_native", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    int devices = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "parboil_mri_fhd_native: no CUDA GPU (%s)\n",
                   err != cudaSuccess ? cudaGetErrorString(err) : "no device");
      return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));  // creates the GPU's context now, not in the timed computation
    return mri::run(o, "parboil_mri_fhd_native", "mri_fhd", true, "gpus=1", compute, mri_fhd::reference);
  });
}
