// apgas_parboil_tpacf: Parboil's tpacf (angular two-point correlation, tpacf.hpp) with an apgas kernel closure.
//
// The kernel ports Parboil's optimised gen_hists (src/cuda/tpacf_kernel.cu): one block of 256 threads per histogram
// (DD, the RR of a random set, the DR of a random set); per step 256 points staged in shared memory between two
// barriers; each thread takes one point of the other side, computes its dot products with the staged points sixteen
// at a time (registers on a GPU, a vectorised loop on a CPU), finds each one's bin by a binary search over the bounds
// in constant memory and counts it with a shared-memory atomic into one of 128 sub-histograms; a self block (DD, RR)
// counts only the pairs a < c. The staged tile starts zeroed: a last group of sixteen may read past the step's
// points (never past the tile), and does not count those. It is written at block level (apgas::thread_block): on a
// GPU the ordinary kernel, on a CPU place a loop over the block's threads.
//
// Places: the random sets are split over the compute places of every host (its GPU places, or its CPU place); the
// first also computes DD. The counts are integers: any split gives the same histograms.
#include "tpacf.hpp"

#include "parboil_apgas.hpp"

#include <span>
#include <string>
#include <vector>

namespace {

constexpr const char* prog = "apgas_parboil_tpacf";
using tpacf::bins;
using tpacf::block;
using tpacf::sub_histograms;
constexpr int chunk = 16;

// Parboil's binary search over dev_binb[] (branch-free; tpacf::find_bin).
APGAS_KERNEL inline int find_bin(std::span<const float> binb, float d) {
  const float* lo = binb.data();
  for (int len = bins; len > 1;) {
    const int half = len / 2;
    lo = d < lo[half] ? lo + half : lo;
    len -= half;
  }
  return d < lo[0] && d >= lo[1] ? static_cast<int>(lo - binb.data()) : -1;
}

// The first kc of a thread's chunk of dot products binned and counted in its column of the sub-histograms (a
// function of its own on a CPU place, where the kernel's loops left the search short of registers).
APGAS_CPU_NOINLINE APGAS_KERNEL inline void count_bins(std::span<const float> binb, const float (&dot)[chunk], int kc,
                                                       apgas::shared_span<unsigned, bins * sub_histograms> sub, int col) {
  for (int k = 0; k < chunk; ++k) {
    if (k == kc) break;
    const int bin = find_bin(binb, dot[k]);
    if (bin >= 0) apgas::atomic_add(sub, bin * sub_histograms + col, 1u);
  }
}

// At p's host, on place p: DD (when dd), then the RR and the DR of the m random sets of xyz (tpacf::pick's layout);
// the histograms of the blocks, 20 counts each, in that order.
std::vector<tpacf::bin_count> gen_hists(apgas::place p, const std::vector<float>& xyz, int n, int m, bool dd) {
  const auto binb = tpacf::bin_bounds();
  auto pts = apgas::make_remote_array(p, std::span<const float>(xyz));
  auto hists = apgas::make_remote_array<tpacf::bin_count>(p, static_cast<std::size_t>((dd ? 1 : 0) + 2 * m) * bins);
  // gen_hists<<<blocks, 256>>>: one block per histogram, one thread per point of the other side.
  const auto kernel = apgas::cuda_kernel(
      apgas::grid{(dd ? 1 : 0) + 2 * m, block}, apgas::constant_from(std::span<const float>(binb)),  // dev_binb
      apgas::shared<float, 3 * block>(),                 // __shared__ data_s[3][BLOCK_SIZE], zeroed
      apgas::shared<unsigned, bins * sub_histograms>(),  // warp_hists, zeroed
      [=] APGAS_KERNEL(apgas::thread_block b, std::span<const float> binb, apgas::shared_span<float, 3 * block> tile,
                       apgas::shared_span<unsigned, bins * sub_histograms> sub) {
        const int kind = static_cast<int>(b.block()) + (dd ? 0 : 1);  // 0: DD, 1..m: RR, m+1..2m: DR
        const bool self = kind <= m;
        const long stride = static_cast<long>(1 + m) * n;
        const float* d = pts.data() + static_cast<long>(self ? kind : 0) * n;         // staged in tiles
        const float* r = pts.data() + static_cast<long>(self ? kind : kind - m) * n;  // one point per thread
        for (int i = 0; i < n; i += block) {
          b.for_threads([&](apgas::thread_index t) {
            if (i + t.linear < n) {
              for (int c = 0; c < 3; ++c) tile[c * block + t.linear] = d[c * stride + i + t.linear];
            }
          });
          b.sync();
          for (int j = self ? i + 1 : 0; j < n; j += block) {
            b.for_threads([&](apgas::thread_index t) {
              const int rj = j + t.linear;
              if (rj >= n) return;
              const float rx = r[rj], ry = r[stride + rj], rz = r[2 * stride + rj];
              int kn = n - i < block ? n - i : block;
              if (self && rj - i < kn) kn = rj - i;  // self: only the pairs i + k < rj
              for (int k0 = 0; k0 < kn; k0 += chunk) {  // chunk dot products, then their bins
                float dot[chunk];
                for (int k = 0; k < chunk; ++k) {
                  dot[k] = tile[k0 + k] * rx + tile[block + k0 + k] * ry + tile[2 * block + k0 + k] * rz;
                }
                count_bins(binb, dot, kn - k0, sub, t.linear / 2);
              }
            });
          }
          b.sync();
        }
        b.for_threads([&](apgas::thread_index t) {  // the block's histogram: each bin's sub-histograms summed
          if (t.linear >= bins) return;
          tpacf::bin_count s = 0;
          for (int w = 0; w < sub_histograms; ++w) s += sub[t.linear * sub_histograms + w];
          hists.data()[b.block() * bins + t.linear] = s;
        });
      });
  apgas::at(p, kernel);
  std::vector<tpacf::bin_count> out(hists.size());
  apgas::finish([&] { apgas::async_copy(hists, 0, std::span<tpacf::bin_count>(out)); });
  apgas::free_remote_array(pts);
  apgas::free_remote_array(hists);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = tpacf::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), tpacf::size_names, [](const parboil::options& o) {
    tpacf::input in;
    if (!tpacf::load(o, in)) return 0;
    const std::vector<apgas::place> places = parboil::all_compute_places(o.cpu);
    parboil::timer timer;
    timer.start();
    const int np = static_cast<int>(places.size());
    std::vector<tpacf::histograms> parts(places.size());
    apgas::finish([&] {
      for (int i = 0; i < np; ++i) {
        apgas::async([&, i] {  // place i: the random sets [lo, hi) (0-based), and DD at place 0
          const auto [lo, hi] = parboil::share(in.sets, i, np);
          const apgas::place p = places[i];
          const int n = in.n, m = static_cast<int>(hi - lo);
          if (m == 0 && i > 0) return;  // more places than random sets
          const auto h = apgas::at(
              p.parent(), [p, n, m, i](const std::vector<float>& xyz) { return gen_hists(p, xyz, n, m, i == 0); },
              tpacf::pick(in.xyz, n, in.sets, static_cast<int>(1 + lo), static_cast<int>(1 + hi)));
          parts[i] = tpacf::histograms::of_blocks(h, i == 0, m);
        });
      }
    });
    tpacf::histograms total;
    for (const auto& h : parts) total.add(h);
    timer.stop();
    if (!o.output.empty()) tpacf::write_output(o.output, total);
    const bool ok = tpacf::check(o, in, total, prog);
    return parboil::report(tpacf::name, tpacf::fields(in) + " " + parboil::places_field(o.cpu), timer.seconds(), o, ok);
  });
}
