// x10cuda_fdtd3d_omp: the X10 paper's CUDA3DFD as C++ + OpenMP loops (no apgas): the baseline of apgas_x10cuda_fdtd3d
// on CPU places. fdtd3d.hpp has the problem, the input and the check.
#include "fdtd3d.hpp"

#include <omp.h>

#include <utility>

int main(int argc, char** argv) {
  const char* prog = "x10cuda_fdtd3d_omp";
  return parboil::guarded(prog, fdtd3d::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"default", "small", "h100"});
    const auto p = fdtd3d::prepare(o);
    if (!p) return 0;
    constexpr int r = fdtd3d::radius;
    const float* c = fdtd3d::coefficients;
    const long nx = p->nx, ny = p->ny, nz = p->nz, plane = p->plane();
    std::vector<float> a = p->volume, b(a.size());  // a: the input as this program holds it (apgas: in place 0's array)
    parboil::timer timer;
    timer.start();
    float *in = a.data(), *out = b.data();
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (long z = 0; z < nz; ++z) {  // the edges, which no step writes: the z faces whole, else the x and y rims
        if (z < r || z >= nz - r) {
          std::copy(in + z * plane, in + (z + 1) * plane, out + z * plane);
          continue;
        }
        for (long y = 0; y < ny; ++y) {
          const long row = z * plane + y * nx;
          if (y < r || y >= ny - r) {
            std::copy(in + row, in + row + nx, out + row);
          } else {
            std::copy(in + row, in + row + r, out + row);
            std::copy(in + row + nx - r, in + row + nx, out + row + nx - r);
          }
        }
      }
      for (int st = 0; st < p->steps; ++st) {
#pragma omp for schedule(static)
        for (long z = r; z < nz - r; ++z) {
          for (long y = r; y < ny - r; ++y) {
            const float* q = in + z * plane + y * nx;
            float* o = out + z * plane + y * nx;
#pragma omp simd
            for (long x = r; x < nx - r; ++x) {
              const float* v = q + x;  // fdtd3d::point(), unrolled
              float s = c[0] * v[0];
              s += fdtd3d::term(c[1], v[plane], v[-plane], v[-nx], v[nx], v[-1], v[1]);
              s += fdtd3d::term(c[2], v[2 * plane], v[-2 * plane], v[-2 * nx], v[2 * nx], v[-2], v[2]);
              s += fdtd3d::term(c[3], v[3 * plane], v[-3 * plane], v[-3 * nx], v[3 * nx], v[-3], v[3]);
              s += fdtd3d::term(c[4], v[4 * plane], v[-4 * plane], v[-4 * nx], v[4 * nx], v[-4], v[4]);
              o[x] = s;
            }
          }
        }
#pragma omp single
        std::swap(in, out);
      }
    }
    timer.stop();
    return fdtd3d::finish(o, *p, {in, a.size()}, timer.seconds(), "threads=" + std::to_string(omp_get_max_threads()));
  });
}
