// apgas_parboil_tpacf: Parboil's tpacf (angular two-point correlation, tpacf.hpp) with an apgas kernel closure.
//
// The kernel ports Parboil's optimised gen_hists (src/cuda/tpacf_kernel.cu): one block of 256 threads per histogram
// (DD, the RR of a random set, the DR of a random set); per step 256 points staged in shared memory between two
// barriers; each thread takes one point of the other side, finds the bin by a binary search over the bounds in
// constant memory and counts it with a shared-memory atomic into one of 128 sub-histograms; a self block (DD, RR)
// counts only the pairs a < c. It is written at block level (apgas::thread_block): on a GPU the ordinary kernel, on
// a CPU place a loop over the block's threads.
//
// Places: the random sets are split over the host places (host 0 also computes DD), and each host's share over its
// GPU places, or its CPU place. The counts are integers: any split gives the same histograms.
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

// Parboil's binary search over dev_binb[] (branch-free; tpacf::find_bin).
APGAS_KERNEL inline int find_bin(std::span<const float> binb, float d) {
  int lo = 0;
  for (int len = bins; len > 1;) {
    const int half = len / 2;
    lo = d < binb[lo + half] ? lo + half : lo;
    len -= half;
  }
  return d < binb[lo] && d >= binb[lo + 1] ? lo : -1;
}

// gen_hists<<<blocks, 256>>>: pts holds the data set, then m random sets (x, y, z, each (1 + m) * n floats); block 0
// is DD when dd, then the RR of the m sets, then their DR; hists gets 20 counts per block.
void gen_hists(apgas::place p, apgas::remote_array<float> pts, apgas::remote_array<unsigned> hists, int n, int m,
               bool dd) {
  const auto binb = tpacf::bin_bounds();
  apgas::async_at(p, apgas::cuda_kernel(
      apgas::grid{(dd ? 1 : 0) + 2 * m, block}, apgas::constant_from(std::span<const float>(binb)),  // dev_binb
      apgas::shared_uninit<float, 3 * block>(),                                   // __shared__ data_s[3][BLOCK_SIZE]
      apgas::shared<unsigned, bins * sub_histograms>(),                           // warp_hists, zeroed
      [=] APGAS_KERNEL (apgas::thread_block b, std::span<const float> binb, apgas::shared_span<float, 3 * block> tile,
                        apgas::shared_span<unsigned, bins * sub_histograms> sub) {
        const int kind = static_cast<int>(b.block()) + (dd ? 0 : 1);  // 0: DD, 1..m: RR, m+1..2m: DR
        const bool self = kind <= m;
        const long stride = static_cast<long>(1 + m) * n;
        const float* d = pts.data() + static_cast<long>(self ? kind : 0) * n;  // staged in tiles
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
              for (int k = 0; k < kn; ++k) {
                const int bin = find_bin(binb, tile[k] * rx + tile[block + k] * ry + tile[2 * block + k] * rz);
                if (bin >= 0) apgas::atomic_add(sub[bin * sub_histograms + t.linear / 2], 1u);
              }
            });
          }
          b.sync();
        }
        b.for_threads([&](apgas::thread_index t) {  // the block's histogram: each bin's sub-histograms summed
          if (t.linear >= bins) return;
          unsigned s = 0;
          for (int w = 0; w < sub_histograms; ++w) s += sub[t.linear * sub_histograms + w];
          hists.data()[b.block() * bins + t.linear] = s;
        });
      }));
}

// At a host place: the data set and its m random sets (tpacf::input::xyz's layout), and DD when dd, split over its
// compute places. Returns its histograms (tpacf::histograms::flat).
std::vector<std::uint64_t> run_host(bool cpu, bool dd, int n, int m, const std::vector<float>& xyz) {
  const auto places = parboil::compute_places(cpu);
  const int np = static_cast<int>(places.size());
  struct part {
    bool dd = false;
    int m = 0;
    apgas::remote_array<float> pts;
    apgas::remote_array<unsigned> hists;
    std::vector<unsigned> out;
  };
  std::vector<part> parts(places.size());
  apgas::finish([&] {
    for (int i = 0; i < np; ++i) {
      const auto [lo, hi] = parboil::share(m, i, np);
      part& q = parts[i];
      q.dd = dd && i == 0;
      q.m = static_cast<int>(hi - lo);
      if (q.m == 0 && !q.dd) continue;
      q.pts = apgas::make_remote_array(places[i], std::span<const float>(tpacf::pick(xyz, n, m, 1 + lo, 1 + hi)));
      q.out.resize(static_cast<std::size_t>((q.dd ? 1 : 0) + 2 * q.m) * bins);
      q.hists = apgas::make_remote_array<unsigned>(places[i], q.out.size());
      gen_hists(places[i], q.pts, q.hists, n, q.m, q.dd);
    }
  });
  apgas::finish([&] {
    for (part& q : parts) {
      if (!q.out.empty()) apgas::async_copy(q.hists, 0, std::span<unsigned>(q.out));
    }
  });
  tpacf::histograms h;
  for (part& q : parts) {
    for (std::size_t blk = 0; blk < q.out.size() / bins; ++blk) {
      h.add(static_cast<int>(blk) + (q.dd ? 0 : 1), q.m, q.out.data() + blk * bins);
    }
    apgas::free_remote_array(q.pts);
    apgas::free_remote_array(q.hists);
  }
  return h.flat();
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = std::string(tpacf::usage) + parboil::common_usage;
  return parboil::main(argc, argv, prog, usage.c_str(), tpacf::size_names, [](const parboil::options& o) {
    tpacf::input in;
    if (!tpacf::load(o, in)) return 0;
    parboil::timer timer;
    timer.start();
    const auto hosts = apgas::places();
    std::vector<std::vector<std::uint64_t>> parts(hosts.size());
    apgas::finish([&] {
      for (std::size_t h = 0; h < hosts.size(); ++h) {
        apgas::async([&, h] {  // host h: the random sets [lo, hi) (0-based), and DD at host 0
          const auto [lo, hi] = parboil::share(in.sets, static_cast<int>(h), static_cast<int>(hosts.size()));
          const bool cpu = o.cpu, dd = h == 0;
          const int n = in.n, m = static_cast<int>(hi - lo);
          parts[h] = apgas::at(
              hosts[h], [cpu, dd, n, m](const std::vector<float>& xyz) { return run_host(cpu, dd, n, m, xyz); },
              tpacf::pick(in.xyz, n, in.sets, static_cast<int>(1 + lo), static_cast<int>(1 + hi)));
        });
      }
    });
    tpacf::histograms total;
    for (const auto& p : parts) total.add(tpacf::histograms::from_flat(p));
    timer.stop();
    if (!o.output.empty()) tpacf::write_output(o.output, total);
    const bool ok = tpacf::check(o, in, total, prog);
    return parboil::report(tpacf::name, tpacf::fields(in) + " " + parboil::places_field(o.cpu), timer.seconds(), o, ok);
  });
}
