// parboil_rpes_omp: Parboil's rpes in C++ and OpenMP, the CPU baseline of apgas_parboil_rpes: the same integrals
// (rpes::primitive_eri, in float), each shell quartet summed by one thread over its primitive combinations in one
// vectorised loop (omp simd), the quartets spread over the threads dynamically (their work differs by up to 4096x).
// No apgas; see rpes.hpp.
#include "rpes.hpp"

#include <omp.h>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  const char* prog = "parboil_rpes_omp";
  return parboil::guarded(prog, rpes::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"small", "default", "h100"});
    rpes::input in;
    if (!rpes::prepare(o, in)) return 0;
    parboil::timer timer;
    timer.start();
    const std::vector<rpes::quartet> qs = rpes::quartets(in.shells.size());
    std::vector<float> sums(qs.size());
    const rpes::shell* s = in.shells.data();
    const rpes::prim* p = in.prims.data();
    const rpes::atom4* xyz = in.atoms.data();
    const long n = static_cast<long>(qs.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (long i = 0; i < n; ++i) {
      const rpes::shell &a = s[qs[i].s1], &b = s[qs[i].s2], &c = s[qs[i].s3], &d = s[qs[i].s4];
      const rpes::atom4 A = xyz[a.atom], B = xyz[b.atom], C = xyz[c.atom], D = xyz[d.atom];
      float sum = 0.0f;
#pragma omp simd collapse(4) reduction(+ : sum)
      for (int i1 = a.first; i1 < a.first + a.count; ++i1)
        for (int i2 = b.first; i2 < b.first + b.count; ++i2)
          for (int i3 = c.first; i3 < c.first + c.count; ++i3)
            for (int i4 = d.first; i4 < d.first + d.count; ++i4)
              sum += rpes::primitive_eri<float>(A, B, C, D, p[i1], p[i2], p[i3], p[i4]);
      sums[static_cast<std::size_t>(i)] = sum;
    }
    timer.stop();
    return rpes::conclude(o, in, sums, prog, "threads=" + std::to_string(omp_get_max_threads()), timer.seconds());
  });
}
