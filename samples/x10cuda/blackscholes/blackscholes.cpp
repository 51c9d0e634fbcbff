// apgas_x10cuda_blackscholes: the X10 paper's CUDABlackScholes as an apgas kernel closure (blackscholes.hpp has the
// problem, the input and the check). The options are cut over the compute places of every host (the GPU places of a
// host, else its CPU place); each part launches the kernel ITERATIONS times in an in-order queue, then its prices
// come back to place 0.
#include "blackscholes.hpp"
#include "x10cuda_apgas.hpp"

#include <array>

namespace {

using apgas::remote_array;
using arrays = std::array<remote_array<float>, 5>;  // S, X, T in; call, put out

// BlackScholesGPU of the X10 sample (the SDK's kernel): 480 blocks of 128 threads, grid-stride over the options.
void black_scholes(apgas::in_order_queue& q, arrays a, long n) {
  q.async(apgas::cuda_kernel(apgas::grid{480, 128}, [=] APGAS_KERNEL(apgas::thread th) {
    const float *s = a[0].data(), *x = a[1].data(), *t = a[2].data();
    float *call = a[3].data(), *put = a[4].data();
    for (long i = th.global_id(); i < n; i += th.global_count()) {
      blackscholes::price(s[i], x[i], t[i], blackscholes::riskfree, blackscholes::volatility, call[i], put[i]);
    }
  }));
}

// One part, run at its host: its options at its compute place (place 0's own arrays where that is place 0's CPU
// place), the launches, the prices back into place 0's arrays.
void run_part(x10cuda::part p, arrays at0, int iterations) {
  const bool home = p.at == at0[0].home();  // then p.lo == 0: work in place
  arrays a = at0;
  if (!home) {
    for (auto& r : a) r = apgas::make_remote_array<float>(p.at, static_cast<std::size_t>(p.size()));
    apgas::finish([&] {
      for (int k = 0; k < 3; ++k) apgas::async_copy(at0[k], p.lo, a[k], 0, p.size());
    });
  }
  apgas::finish([&] {
    auto q = apgas::in_order(p.at);
    for (int i = 0; i < iterations; ++i) black_scholes(q, a, static_cast<long>(p.size()));
    for (int k = 3; k < 5 && !home; ++k) q.async_copy(a[k], 0, at0[k], p.lo, p.size());
  });
  for (auto& r : a) {
    if (!home) apgas::free_remote_array(r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_blackscholes";
  return parboil::main(argc, argv, prog, blackscholes::usage(prog).c_str(), {"default", "small", "h100"},
                       [](const parboil::options& o) {
    const auto p = blackscholes::prepare(o);
    if (!p) return 0;
    const apgas::place here = apgas::here();
    const auto n = static_cast<std::size_t>(p->n);
    arrays at0 = {apgas::make_remote_array(here, std::span<const float>(p->s)),
                  apgas::make_remote_array(here, std::span<const float>(p->x)),
                  apgas::make_remote_array(here, std::span<const float>(p->t)),
                  apgas::make_remote_array<float>(here, n), apgas::make_remote_array<float>(here, n)};
    const int iterations = p->iterations;
    parboil::timer timer;
    timer.start();
    apgas::finish([&] {
      for (const x10cuda::part& part : x10cuda::parts(p->n, o.cpu)) {
        apgas::async_at(part.at.parent(), [=] { run_part(part, at0, iterations); });
      }
    });
    timer.stop();
    const int rc = blackscholes::finish(o, *p, {at0[3].data(), n}, {at0[4].data(), n}, timer.seconds(),
                                        parboil::places_field(o.cpu));
    for (auto& a : at0) apgas::free_remote_array(a);
    return rc;
  });
}
