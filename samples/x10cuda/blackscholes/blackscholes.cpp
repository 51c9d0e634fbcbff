// apgas_x10cuda_blackscholes: the X10 paper's CUDABlackScholes as an apgas kernel closure (blackscholes.hpp has the
// problem, the input and the check). The options are cut over the compute places of every host (the GPU places of a
// host, else its CPU place: dist::for_slices); each part launches the kernel ITERATIONS times in an in-order queue,
// then its prices come back to place 0.
#include "blackscholes.hpp"
#include "x10cuda_apgas.hpp"

#include <algorithm>
#include <array>

using arrays = std::array<apgas::remote_array<float>, 5>;  // S, X, T in; call, put out
using namespace blackscholes;

// BlackScholesGPU of the X10 sample (the SDK's kernel) on 480 blocks of 128 threads, as a block-level body: each
// block walks its own contiguous range of the options in runs of 128, a run's options one per thread (coalesced on a
// GPU). The SDK's grid-stride loop would put a block's runs 480 x 128 options apart: on a CPU place every run then
// starts a new stream for the prefetcher, 1.15x slower here; on a GPU either order coalesces.
static void black_scholes(apgas::in_order_queue& q, arrays a, long n) {
  q.async(apgas::cuda_kernel(apgas::grid{480, 128}, [=] APGAS_KERNEL(apgas::thread_block b) {
    const float *s = a[0].data(), *x = a[1].data(), *t = a[2].data();
    float *call = a[3].data(), *put = a[4].data();
    const long runs = b.blocks() * b.threads(), per = (n + runs - 1) / runs * b.threads();  // whole runs a block
    const long lo = b.block() * per, hi = std::min(n, lo + per);
    for (long i0 = lo; i0 < hi; i0 += b.threads()) {
      b.for_threads([&](apgas::thread_index th) {
        if (const long i = i0 + th.linear; i < hi) price(s[i], x[i], t[i], riskfree, volatility, call[i], put[i]);
      });
    }
  }));
}

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_blackscholes";
  return parboil::main(argc, argv, prog, blackscholes::usage(prog).c_str(), {"default", "small", "h100"},
                       [](const parboil::options& o) {
    const auto p = blackscholes::prepare(o);
    if (!p) return 0;
    const auto n = static_cast<std::size_t>(p->n);
    const auto at0 = [](std::span<const float> v) { return apgas::make_remote_array(apgas::here(), v); };
    const arrays a0 = {at0(p->s), at0(p->x), at0(p->t), at0(std::vector<float>(n)), at0(std::vector<float>(n))};
    parboil::timer timer;
    timer.start();
    dist::for_slices(dist::parts(p->n, o.cpu), a0, 3, [iterations = p->iterations](const dist::part& part, arrays a) {
      auto q = apgas::in_order(part.at);  // ITERATIONS launches in line (a CUDA stream on a GPU)
      for (int i = 0; i < iterations; ++i) black_scholes(q, a, static_cast<long>(part.size()));
    });
    timer.stop();
    return blackscholes::finish(o, *p, {a0[3].data(), n}, {a0[4].data(), n}, timer.seconds(),
                                parboil::places_field(o.cpu));
  });
}
