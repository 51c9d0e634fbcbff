#pragma once
// mri-q (Parboil): the Q matrix of MRI reconstruction from a non-Cartesian k-space trajectory,
//   Q(x) = sum over samples k of |phi_k|^2 e^{i 2 pi k.x}   (Qr: the cos terms, Qi: the sin terms),
// what apgas_parboil_mri_q, parboil_mri_q_native and parboil_mri_q_omp share besides ../mri_common: the kernels'
// shapes, one sample's term (every version adds the same floats in the same order: the samples in order, into one
// sum per voxel), the serial reference. No apgas and no CUDA here.
//
// Parboil's CUDA version: ComputePhiMag (512 threads a block) computes |phi_k|^2 on the GPU; the host packs
// {kx, ky, kz, |phi|^2} per sample; ComputeQ (256 threads a block, one voxel each) then runs once per tile of 1024
// samples copied to constant memory (16 KiB), each launch adding its tile's terms to Qr and Qi (zeroed before the
// first), two samples per iteration.
#include "../mri_common/mri_common.hpp"

namespace mri_q {

inline constexpr int phi_mag_block = 512;  // KERNEL_PHI_MAG_THREADS_PER_BLOCK
inline constexpr int q_block = 256;        // KERNEL_Q_THREADS_PER_BLOCK
inline constexpr int k_tile = 1024;        // KERNEL_Q_K_ELEMS_PER_GRID: samples in constant memory per launch

/// A sample as ComputeQ reads it from constant memory (Parboil's kValues).
struct kvalue {
  float kx, ky, kz, phi_mag;
};

MRI_HD inline float phi_mag(float re, float im) { return re * re + im * im; }

/// Sample k's term at voxel (x, y, z), added to (qr, qi).
MRI_HD inline void add_sample(const kvalue& k, float x, float y, float z, float& qr, float& qi) {
  const float arg = mri::pi2 * (k.kx * x + k.ky * y + k.kz * z);
  float s, c;
  mri::sin_cos(arg, s, c);
  qr += k.phi_mag * c;
  qi += k.phi_mag * s;
}

/// The samples as the kernel reads them (the host's step between the two kernels).
inline std::vector<kvalue> k_values(const mri::input& in, std::span<const float> mag) {
  std::vector<kvalue> kv(mag.size());
  for (std::size_t k = 0; k < kv.size(); ++k) kv[k] = kvalue{in.kx[k], in.ky[k], in.kz[k], mag[k]};
  return kv;
}

/// The serial reference at voxels 0, stride, 2 stride, ...: Parboil's CPU loop, float, libm's cosf and sinf.
inline mri::output reference(const mri::input& in, std::size_t stride) {
  const std::size_t n = static_cast<std::size_t>(in.numX()), m = (n + stride - 1) / stride;
  mri::output ref(2 * m);
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t v = j * stride;
    float qr = 0.0f, qi = 0.0f;
    for (std::size_t k = 0; k < in.kx.size(); ++k) {
      const float arg = mri::pi2 * (in.kx[k] * in.x()[v] + in.ky[k] * in.y()[v] + in.kz[k] * in.z()[v]);
      const float mag = phi_mag(in.phiR[k], in.phiI[k]);
      qr += mag * std::cos(arg);
      qi += mag * std::sin(arg);
    }
    ref[j] = qr;
    ref[m + j] = qi;
  }
  return ref;
}

}  // namespace mri_q
