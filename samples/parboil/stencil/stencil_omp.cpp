// parboil_stencil_omp: Parboil's stencil (7-point Jacobi, ping-pong, boundary kept) in plain C++ and OpenMP, the CPU
// baseline of apgas_parboil_stencil. Each sweep is one parallel loop over the interior rows (k, j) with a static
// schedule (the rows are equal work) and a vectorised loop along x. Input, output and the check: stencil.hpp.
#include "stencil.hpp"

#include <omp.h>

#include <utility>
#include <vector>

namespace {

void sweep(const stencil::problem& p, const float* in, float* out) {
  const int nx = p.nx, ny = p.ny, nz = p.nz;
  const long plane = static_cast<long>(nx) * ny;
#pragma omp for collapse(2) schedule(static)
  for (int k = 1; k < nz - 1; ++k) {
    for (int j = 1; j < ny - 1; ++j) {
      const long row = k * plane + static_cast<long>(j) * nx;
      const float* c = in + row;
      float* o = out + row;
#pragma omp simd
      for (int i = 1; i < nx - 1; ++i) {
        o[i] = stencil::update(c[i], c[i - 1], c[i + 1], c[i - nx], c[i + nx], c[i - plane], c[i + plane]);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "parboil_stencil_omp";
  const std::string usage = stencil::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    const auto p = stencil::start(o);
    if (!p) return 0;
    std::vector<float> a(p->cells()), b(p->cells());  // made before the timed part, as the other versions do
    parboil::timer time;
    time.start();
    a = p->a;  // both volumes hold the boundary
    b = p->a;
#pragma omp parallel
    for (int it = 0; it < p->iterations; ++it) {
      sweep(*p, a.data(), b.data());  // the implicit barrier at its end orders the sweeps
#pragma omp single
      std::swap(a, b);
    }
    time.stop();
    return stencil::finish(prog, o, *p, a, time.seconds(), "threads=" + std::to_string(omp_get_max_threads()));
  });
}
