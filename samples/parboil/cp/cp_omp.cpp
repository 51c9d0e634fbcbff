// parboil_cp_omp: Parboil's cp with OpenMP, the CPU baseline. The rows of the plane are spread over the threads
// (static: every row costs the same); for each chunk of atoms a row's sums start from zero and are added to the row
// at the end of the chunk, each point's terms in atom order: the additions of the kernels (cp.hpp), so the plane
// comes out bit for bit as on a CPU place. The inner loop runs over 16 points 16 apart at a time (the 16 threads of
// a block row) and vectorises.
#include "cp.hpp"

#include <omp.h>

namespace {

void compute(const cp::problem& pb, std::span<float> energy) {
  const std::vector<cp::atom> atoms = cp::plane_atoms(pb.atoms);
  const int nx = pb.nx;
  const float gu = cp::spacing * cp::block_x;
#pragma omp parallel
  {
    std::vector<float> e(static_cast<std::size_t>(nx));  // this chunk's sums for the row
#pragma omp for schedule(static)
    for (int y = 0; y < pb.ny; ++y) {
      const float cy = cp::spacing * y;
      for (std::size_t c = 0; c < atoms.size(); c += cp::max_atoms) {
        std::fill(e.begin(), e.end(), 0.0f);
        for (std::size_t i = c; i < std::min(atoms.size(), c + cp::max_atoms); ++i) {
          const cp::atom a = atoms[i];
          const float dy = cy - a.y;
          const float dyz2 = dy * dy + a.dz2;
          for (int x0 = 0; x0 < nx; x0 += cp::tile_x) {
            float dx[cp::block_x];
            for (int j = 0; j < cp::block_x; ++j) dx[j] = cp::spacing * (x0 + j) - a.x;
            for (int k = 0; k < cp::unroll_x; ++k) {
              float* ek = e.data() + x0 + cp::block_x * k;
#pragma omp simd
              for (int j = 0; j < cp::block_x; ++j) {
                ek[j] += a.q * (1.0f / sqrtf(dx[j] * dx[j] + dyz2));
                dx[j] += gu;
              }
            }
          }
        }
        float* row = energy.data() + static_cast<std::size_t>(y) * nx;
        for (int x = 0; x < nx; ++x) row[x] += e[static_cast<std::size_t>(x)];
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = cp::usage("parboil_cp_omp");
  return parboil::guarded("parboil_cp_omp", usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    return cp::run(o, "parboil_cp_omp", "threads=" + std::to_string(omp_get_max_threads()), compute);
  });
}
