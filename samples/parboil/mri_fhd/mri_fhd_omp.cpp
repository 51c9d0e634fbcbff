// parboil_mri_fhd_omp: Parboil's mri-fhd with OpenMP, the CPU baseline. The voxels are cut into tiles of 256
// spread over the threads (static: every voxel costs the same); for each sample in order, a vectorised loop adds its
// term to the tile's sums: the same additions as the kernels (mri_fhd.hpp), with the same sin/cos (../mri_common).
#include "mri_fhd.hpp"

#include <omp.h>

namespace {

constexpr int tile = 256;

void compute(const mri::input& in, mri::output& out) {
  const std::size_t numK = in.kx.size();
  std::vector<float> rho(2 * numK);
  for (std::size_t k = 0; k < numK; ++k) {
    rho[k] = mri_fhd::rho_phi_r(in.phiR[k], in.phiI[k], in.dR[k], in.dI[k]);
    rho[numK + k] = mri_fhd::rho_phi_i(in.phiR[k], in.phiI[k], in.dR[k], in.dI[k]);
  }
  const std::vector<mri_fhd::kvalue> kv = mri_fhd::k_values(in, rho);
  const int n = in.numX();
#pragma omp parallel for schedule(static)
  for (int v0 = 0; v0 < n; v0 += tile) {
    const int m = std::min(tile, n - v0);
    const float *x = in.x() + v0, *y = in.y() + v0, *z = in.z() + v0;
    float fr[tile] = {}, fi[tile] = {};
    for (const mri_fhd::kvalue& k : kv) {
#pragma omp simd
      for (int j = 0; j < m; ++j) mri_fhd::add_sample(k, x[j], y[j], z[j], fr[j], fi[j]);
    }
    std::copy(fr, fr + m, out.begin() + v0);
    std::copy(fi, fi + m, out.begin() + n + v0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = mri::usage("parboil_mri_fhd_omp", "IN");
  return parboil::guarded("parboil_mri_fhd_omp", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    return mri::run(o, "parboil_mri_fhd_omp", "mri_fhd", true, "threads=" + std::to_string(omp_get_max_threads()),
                    compute, mri_fhd::reference);
  });
}
