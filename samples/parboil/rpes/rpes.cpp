// apgas_parboil_rpes: Parboil's rpes (two-electron repulsion integrals over s shells, summed per shell quartet) with
// its two CUDA kernels as apgas kernel closures, on the GPU places of each host, or on its CPU place.
//
// The shell quartets are cut into contiguous parts of about equal work, one per host place, then one per compute
// place of the host (its GPUs, or the host itself). A part's quartets run as Parboil runs them all:
//   ComputeX    one block of 64 threads per (quartet, 64 primitive combinations), one integral per thread, the block's
//               descriptor broadcast through shared memory, its 64 values summed by a shared-memory tree;
//   DoReduction one block per quartet summing the quartet's block partials (a block reduction);
// both grids chunked at 65 535 blocks, all launches in order on one queue. Parboil's texture reads (float4
// coordinates, float2 exponents and coefficients) are plain loads from remote arrays. Each quartet's sum is computed
// by the same blocks in the same order however the quartets are cut: 1, 2 or 3 host places give the same bits.
#include "rpes.hpp"

#include "parboil_apgas.hpp"

#include <span>
#include <string>
#include <vector>

namespace {

using floats = apgas::remote_array<float>;

// Parboil's ComputeX for blocks [b0, b0 + n) of the part: partial[b] = the sum of block b's 64 integrals.
void compute_x(apgas::in_order_queue& q, apgas::remote_array<rpes::work> work, apgas::remote_array<rpes::atom4> xyz,
               apgas::remote_array<rpes::prim> prims, floats partial, long b0, int n) {
  q.async(apgas::cuda_kernel(apgas::grid{n, rpes::block_size}, apgas::shared_uninit<float, rpes::block_size>(),
                             [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float, rpes::block_size> data) {
    const long block = b0 + b.block();
    const rpes::work w = b.single([&] { return work.data()[block]; });  // s_Work: thread 0 reads it for all
    const rpes::quartet_view v(w, xyz.data());
    const rpes::prim* p = prims.data();
    const int k0 = static_cast<int>(block - w.first) * rpes::block_size;
    b.for_threads([&](apgas::thread_index t) { data[t.linear] = v.integral(k0 + t.linear, p); });
    for (int s = rpes::block_size / 2; s > 0; s /= 2) {  // the shared-memory tree
      b.sync();
      b.for_threads([&](apgas::thread_index t) {
        if (t.linear < s) data[t.linear] += data[t.linear + s];
      });
    }
    b.single([&] { partial.data()[block] = data[0]; });
  }));
}

// Parboil's DoReduction for quartets [e0, e0 + n) of the part: sums[e] = the sum of quartet e's block partials.
void do_reduction(apgas::in_order_queue& q, apgas::remote_array<rpes::range> final, floats partial, floats sums,
                  long e0, int n, int threads) {
  q.async(apgas::cuda_kernel(apgas::grid{n, threads}, [=] APGAS_KERNEL(apgas::thread_block b) {
    const long e = e0 + b.block();
    const rpes::range r = final.data()[e];
    const float* x = partial.data() + r.first;
    const float s = b.reduce([&](apgas::thread_index t) { return t.linear < static_cast<int>(r.count) ? x[t.linear] : 0.0f; },
                             apgas::plus{});
    b.single([&] { sums.data()[e] = s; });
  }));
}

// The quartets qs at compute place p: their sums.
std::vector<float> run_part(apgas::place p, const std::vector<rpes::atom4>& atoms, const std::vector<rpes::prim>& prims,
                            const std::vector<rpes::shell>& shells, std::span<const rpes::quartet> qs, int threads) {
  if (qs.empty()) return {};
  const rpes::block_work bw = rpes::distribute(shells, qs);
  const long blocks = static_cast<long>(bw.blocks.size()), nq = static_cast<long>(qs.size());
  auto work = apgas::make_remote_array(p, std::span<const rpes::work>(bw.blocks));
  auto final = apgas::make_remote_array(p, std::span<const rpes::range>(bw.final));
  auto xyz = apgas::make_remote_array(p, std::span<const rpes::atom4>(atoms));
  auto prm = apgas::make_remote_array(p, std::span<const rpes::prim>(prims));
  auto partial = apgas::make_remote_array<float>(p, static_cast<std::size_t>(blocks));
  auto sums = apgas::make_remote_array<float>(p, static_cast<std::size_t>(nq));
  std::vector<float> out(static_cast<std::size_t>(nq));
  apgas::finish([&] {
    auto q = apgas::in_order(p);
    for (long b0 = 0; b0 < blocks; b0 += rpes::grid_max) {
      compute_x(q, work, xyz, prm, partial, b0, static_cast<int>(std::min<long>(rpes::grid_max, blocks - b0)));
    }
    for (long e0 = 0; e0 < nq; e0 += rpes::grid_max) {
      do_reduction(q, final, partial, sums, e0, static_cast<int>(std::min<long>(rpes::grid_max, nq - e0)), threads);
    }
    q.async_copy(sums, 0, std::span<float>(out));
  });
  apgas::free_remote_array(work), apgas::free_remote_array(final), apgas::free_remote_array(partial);
  apgas::free_remote_array(xyz), apgas::free_remote_array(prm), apgas::free_remote_array(sums);
  return out;
}

// The quartets [q0, q1) at this host, cut over its compute places.
std::vector<float> run_host(const std::vector<rpes::atom4>& atoms, const std::vector<rpes::prim>& prims,
                            const std::vector<rpes::shell>& shells, long q0, long q1, bool cpu, int threads) {
  const std::vector<rpes::quartet> qs = rpes::quartets(shells.size());
  const std::vector<apgas::place> places = parboil::compute_places(cpu);
  const int n = static_cast<int>(places.size());
  std::vector<std::vector<float>> parts(places.size());
  apgas::finish([&] {
    for (int i = 0; i < n; ++i) {
      apgas::async([&, i] {
        const auto [lo, hi] = rpes::share(shells, qs, q0, q1, i, n);
        parts[i] = run_part(places[i], atoms, prims, shells, std::span(qs).subspan(lo, hi - lo), threads);
      });
    }
  });
  std::vector<float> sums;
  for (const auto& part : parts) sums.insert(sums.end(), part.begin(), part.end());
  return sums;
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_parboil_rpes";
  const std::string usage = std::string("usage: ") + prog + rpes::usage_line + parboil::common_usage;
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const rpes::input in = rpes::load(o);
    if (!o.write_inputs.empty()) {
      rpes::write_input(in, o.write_inputs[0], o.write_inputs[1]);
      return 0;
    }
    const int threads = rpes::reduction_threads(in.shells);
    const int hosts = apgas::num_hosts();
    std::vector<std::vector<float>> parts(static_cast<std::size_t>(hosts));
    parboil::timer timer;
    timer.start();
    const std::vector<rpes::quartet> qs = rpes::quartets(in.shells.size());
    apgas::finish([&] {
      for (int h = 0; h < hosts; ++h) {
        apgas::async([&, h] {
          const auto [q0, q1] = rpes::share(in.shells, qs, 0, static_cast<long>(qs.size()), h, hosts);
          parts[h] = apgas::at(apgas::places()[h], [](const auto&... args) { return run_host(args...); }, in.atoms,
                               in.prims, in.shells, q0, q1, o.cpu, threads);
        });
      }
    });
    std::vector<float> sums;
    for (const auto& part : parts) sums.insert(sums.end(), part.begin(), part.end());
    timer.stop();
    if (!o.output.empty()) rpes::write_output(o.output, sums);
    const bool ok = rpes::verify(o, in, sums, prog);
    return parboil::report("rpes", rpes::fields(in) + " " + parboil::places_field(o.cpu), timer.seconds(), o, ok);
  });
}
