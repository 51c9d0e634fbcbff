#pragma once
// mri-fhd (Parboil 1): the F^H d vector of MRI reconstruction from a non-Cartesian k-space trajectory,
//   FHd(x) = sum over samples k of rhoPhi_k e^{i 2 pi k.x},  rhoPhi_k = conj(phi_k) d_k,
// what apgas_parboil_mri_fhd, parboil_mri_fhd_native and parboil_mri_fhd_omp share besides ../mri_common: the
// kernels' shapes, one sample's term (every version adds the same floats in the same order: the samples in order,
// into one sum per voxel), the serial reference. No apgas and no CUDA here.
//
// Parboil's CUDA version: ComputeRhoPhi (512 threads a block) computes rhoPhi on the GPU; the host packs {kx, ky, kz,
// Re rhoPhi, Im rhoPhi} per sample; ComputeFH (256 threads a block, one voxel each) then runs once per tile of 512
// samples copied to constant memory (10 KiB), each launch adding its tile's terms to rFhD and iFhD (zeroed before the
// first), four samples per iteration.
#include "../mri_common/mri_common.hpp"

namespace mri_fhd {

inline constexpr int rho_phi_block = 512;  // KERNEL_RHO_PHI_THREADS_PER_BLOCK
inline constexpr int fh_block = 256;       // KERNEL_FH_THREADS_PER_BLOCK
inline constexpr int k_tile = 512;         // KERNEL_FH_K_ELEMS_PER_GRID: samples in constant memory per launch

/// A sample as ComputeFH reads it from constant memory (Parboil's kValues).
struct kvalue {
  float kx, ky, kz, rho_phi_r, rho_phi_i;
};

/// rhoPhi = conj(phi) d, Parboil's ComputeRhoPhi: (phiR dR + phiI dI, phiR dI - phiI dR).
MRI_HD inline float rho_phi_r(float phiR, float phiI, float dR, float dI) { return phiR * dR + phiI * dI; }
MRI_HD inline float rho_phi_i(float phiR, float phiI, float dR, float dI) { return phiR * dI - phiI * dR; }

/// Sample k's term at voxel (x, y, z), added to (fr, fi).
MRI_HD inline void add_sample(const kvalue& k, float x, float y, float z, float& fr, float& fi) {
  const float arg = mri::pi2 * (k.kx * x + k.ky * y + k.kz * z);
  float s, c;
  mri::sin_cos(arg, s, c);
  fr += k.rho_phi_r * c - k.rho_phi_i * s;
  fi += k.rho_phi_i * c + k.rho_phi_r * s;
}

/// The samples as the kernel reads them (the host's step between the two kernels); rho: Re rhoPhi, then Im rhoPhi.
inline std::vector<kvalue> k_values(const mri::input& in, std::span<const float> rho) {
  const std::size_t n = in.kx.size();
  std::vector<kvalue> kv(n);
  for (std::size_t k = 0; k < n; ++k) kv[k] = kvalue{in.kx[k], in.ky[k], in.kz[k], rho[k], rho[n + k]};
  return kv;
}

/// The serial reference at voxels 0, stride, 2 stride, ...: Parboil's CPU loops, float, libm's cosf and sinf.
inline mri::output reference(const mri::input& in, std::size_t stride) {
  const std::size_t n = static_cast<std::size_t>(in.numX()), m = (n + stride - 1) / stride;
  mri::output ref(2 * m);
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t v = j * stride;
    float fr = 0.0f, fi = 0.0f;
    for (std::size_t k = 0; k < in.kx.size(); ++k) {
      const float arg = mri::pi2 * (in.kx[k] * in.x()[v] + in.ky[k] * in.y()[v] + in.kz[k] * in.z()[v]);
      const float c = std::cos(arg), s = std::sin(arg);
      const float rr = rho_phi_r(in.phiR[k], in.phiI[k], in.dR[k], in.dI[k]);
      const float ri = rho_phi_i(in.phiR[k], in.phiI[k], in.dR[k], in.dI[k]);
      fr += rr * c - ri * s;
      fi += ri * c + rr * s;
    }
    ref[j] = fr;
    ref[m + j] = fi;
  }
  return ref;
}

}  // namespace mri_fhd
