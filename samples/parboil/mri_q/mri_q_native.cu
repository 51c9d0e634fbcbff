// parboil_mri_q_native: Parboil's mri-q in CUDA, the GPU baseline, on one GPU: ComputePhiMag, then ComputeQ once
// per tile of 1024 samples copied to constant memory.
#include "mri_q.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

#define CUDA_CHECK(call)                                                                                  \
  do {                                                                                                    \
    const cudaError_t err = (call);                                                                       \
    if (err != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(err)); \
  } while (0)

namespace {

__constant__ mri_q::kvalue ck[mri_q::k_tile];

__global__ void ComputePhiMag(const float* phiR, const float* phiI, float* phiMag, int numK) {
  const int k = blockIdx.x * mri_q::phi_mag_block + threadIdx.x;
  if (k < numK) phiMag[k] = mri_q::phi_mag(phiR[k], phiI[k]);
}

// A thread per voxel adds the tile's terms to its Qr and Qi (xyz: x, y, z; Q: Qr, Qi), two samples a step.
__global__ void ComputeQ(int tileK, const float* xyz, float* Q, int numX) {
  const int i = blockIdx.x * mri_q::q_block + threadIdx.x;
  if (i >= numX) return;
  const float sx = xyz[i], sy = xyz[numX + i], sz = xyz[2 * numX + i];
  float sqr = Q[i], sqi = Q[numX + i];
#pragma unroll 2
  for (int k = 0; k < tileK; ++k) mri_q::add_sample(ck[k], sx, sy, sz, sqr, sqi);
  Q[i] = sqr;
  Q[numX + i] = sqi;
}

float* to_device(const std::vector<float>& v) {
  float* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

void compute(const mri::input& in, mri::output& out) {
  const int numK = in.numK(), numX = in.numX();
  float *phiR_d = to_device(in.phiR), *phiI_d = to_device(in.phiI), *phiMag_d = nullptr;
  CUDA_CHECK(cudaMalloc(&phiMag_d, numK * sizeof(float)));
  ComputePhiMag<<<mri::blocks(numK, mri_q::phi_mag_block), mri_q::phi_mag_block>>>(phiR_d, phiI_d, phiMag_d, numK);
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> mag(numK);
  CUDA_CHECK(cudaMemcpy(mag.data(), phiMag_d, numK * sizeof(float), cudaMemcpyDeviceToHost));
  for (float* d : {phiR_d, phiI_d, phiMag_d}) CUDA_CHECK(cudaFree(d));
  const std::vector<mri_q::kvalue> kv = mri_q::k_values(in, mag);

  float *xyz_d = to_device(in.xyz), *Q_d = nullptr;
  CUDA_CHECK(cudaMalloc(&Q_d, out.size() * sizeof(float)));
  CUDA_CHECK(cudaMemset(Q_d, 0, out.size() * sizeof(float)));
  for (const std::span<const mri_q::kvalue> tile : mri::tiles(std::span<const mri_q::kvalue>(kv), mri_q::k_tile)) {
    CUDA_CHECK(cudaMemcpyToSymbol(ck, tile.data(), tile.size_bytes()));
    ComputeQ<<<mri::blocks(numX, mri_q::q_block), mri_q::q_block>>>(static_cast<int>(tile.size()), xyz_d, Q_d, numX);
    CUDA_CHECK(cudaGetLastError());
  }
  CUDA_CHECK(cudaMemcpy(out.data(), Q_d, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (float* d : {xyz_d, Q_d}) CUDA_CHECK(cudaFree(d));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = mri::usage("parboil_mri_q_native", "IN");
  return parboil::guarded("parboil_mri_q_native", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    int devices = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "parboil_mri_q_native: no CUDA GPU (%s)\n",
                   err != cudaSuccess ? cudaGetErrorString(err) : "no device");
      return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));  // creates the GPU's context now, not in the timed computation
    return mri::run(o, "parboil_mri_q_native", "mri_q", false, "gpus=1", compute, mri_q::reference);
  });
}
