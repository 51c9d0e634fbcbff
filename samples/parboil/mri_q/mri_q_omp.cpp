// parboil_mri_q_omp: Parboil's mri-q with OpenMP, the CPU baseline. The voxels are cut into tiles of 256 spread
// over the threads (static: every voxel costs the same); for each sample in order, a vectorised loop adds its term
// to the tile's sums: the same additions as the kernels (mri_q.hpp), with the same sin/cos (../mri_common).
#include "mri_q.hpp"

#include <omp.h>

namespace {

constexpr int tile = 256;

void compute(const mri::input& in, mri::output& out) {
  std::vector<float> mag(in.phiR.size());
  for (std::size_t k = 0; k < mag.size(); ++k) mag[k] = mri_q::phi_mag(in.phiR[k], in.phiI[k]);
  const std::vector<mri_q::kvalue> kv = mri_q::k_values(in, mag);
  const int n = in.numX();
#pragma omp parallel for schedule(static)
  for (int v0 = 0; v0 < n; v0 += tile) {
    const int m = std::min(tile, n - v0);
    const float *x = in.x() + v0, *y = in.y() + v0, *z = in.z() + v0;
    float qr[tile] = {}, qi[tile] = {};
    for (const mri_q::kvalue& k : kv) {
#pragma omp simd
      for (int j = 0; j < m; ++j) mri_q::add_sample(k, x[j], y[j], z[j], qr[j], qi[j]);
    }
    std::copy(qr, qr + m, out.begin() + v0);
    std::copy(qi, qi + m, out.begin() + n + v0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = mri::usage("parboil_mri_q_omp", "IN");
  return parboil::guarded("parboil_mri_q_omp", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    return mri::run(o, "parboil_mri_q_omp", "mri_q", false, "threads=" + std::to_string(omp_get_max_threads()),
                    compute, mri_q::reference);
  });
}
