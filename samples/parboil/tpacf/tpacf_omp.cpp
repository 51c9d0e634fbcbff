// parboil_tpacf_omp: the OpenMP baseline of apgas_parboil_tpacf — the same pairs, dot products and binary search
// over the bin bounds (tpacf.hpp), written for a CPU: one row per (histogram, point a), rows shared dynamically
// among the threads (a self row has n - a - 1 pairs), each thread counting into its own histograms; a row's dot
// products go through a small buffer so that their loop vectorises, then each is binned.
#include "tpacf.hpp"

#include <omp.h>

#include <algorithm>
#include <string>

int main(int argc, char** argv) {
  constexpr const char* prog = "parboil_tpacf_omp";
  static const std::string usage = tpacf::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, tpacf::size_names);
    tpacf::input in;
    if (!tpacf::load(o, in)) return 0;
    parboil::timer timer;
    timer.start();
    const auto binb = tpacf::bin_bounds();
    const int n = in.n, sets = in.sets;
    const long rows = (2L * sets + 1) * n;
    tpacf::histograms total;
#pragma omp parallel
    {
      tpacf::histograms mine;
      alignas(64) float dist[tpacf::block];
#pragma omp for schedule(dynamic, 16)
      for (long row = 0; row < rows; ++row) {
        const int kind = static_cast<int>(row / n), a = static_cast<int>(row % n);  // kind: 0 DD, 1..sets RR, DR
        const bool self = kind <= sets;
        const long as = static_cast<long>(self ? kind : 0) * n, cs = static_cast<long>(self ? kind : kind - sets) * n;
        const float ax = in.x()[as + a], ay = in.y()[as + a], az = in.z()[as + a];
        const float* cx = in.x() + cs;
        const float* cy = in.y() + cs;
        const float* cz = in.z() + cs;
        auto& into = kind == 0 ? mine.dd : (self ? mine.rr : mine.dr);
        for (int c0 = self ? a + 1 : 0; c0 < n; c0 += tpacf::block) {
          const int len = std::min(tpacf::block, n - c0);
          for (int c = 0; c < len; ++c) dist[c] = ax * cx[c0 + c] + ay * cy[c0 + c] + az * cz[c0 + c];
          for (int c = 0; c < len; ++c) {
            const int bin = tpacf::find_bin(binb.data(), dist[c]);
            if (bin >= 0) ++into[static_cast<std::size_t>(bin)];
          }
        }
      }
#pragma omp critical
      total.add(mine);
    }
    timer.stop();
    if (!o.output.empty()) tpacf::write_output(o.output, total);
    const bool ok = tpacf::check(o, in, total, prog);
    return parboil::report(tpacf::name, tpacf::fields(in) + " threads=" + std::to_string(omp_get_max_threads()),
                           timer.seconds(), o, ok);
  });
}
