// x10cuda_blackscholes_omp: the X10 paper's CUDABlackScholes as a C++ + OpenMP loop (no apgas): the baseline of
// apgas_x10cuda_blackscholes on CPU places. blackscholes.hpp has the problem, the input and the check.
#include "blackscholes.hpp"

#include <omp.h>

int main(int argc, char** argv) {
  const char* prog = "x10cuda_blackscholes_omp";
  return parboil::guarded(prog, blackscholes::usage(prog).c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, {"default", "small", "h100"});
    const auto p = blackscholes::prepare(o);
    if (!p) return 0;
    const long n = static_cast<long>(p->n);
    const float *s = p->s.data(), *x = p->x.data(), *t = p->t.data();
    std::vector<float> call(p->s.size()), put(p->s.size());
    float *c = call.data(), *q = put.data();
    parboil::timer timer;
    timer.start();
#pragma omp parallel
    for (int it = 0; it < p->iterations; ++it) {
#pragma omp for schedule(static)
      for (long i = 0; i < n; ++i) {
        blackscholes::price(s[i], x[i], t[i], blackscholes::riskfree, blackscholes::volatility, c[i], q[i]);
      }
    }
    timer.stop();
    return blackscholes::finish(o, *p, call, put, timer.seconds(), "threads=" + std::to_string(omp_get_max_threads()));
  });
}
