// apgas_parboil_rpes: Parboil's rpes (two-electron repulsion integrals over s shells, summed per shell quartet) with
// its CUDA kernels as apgas kernel closures, on the GPU places of each host, or on its CPU place.
//
// The shell quartets are cut into contiguous parts of about equal work, one per compute place of the run (each
// host's GPUs, or the host itself). A part's quartets run as Parboil runs them all, in chunks of 65 535 blocks:
//   DistributeBlockWork the chunk's blocks get their quartet's descriptor (Parboil: all of them, on the host);
//   ComputeX    one block of 64 threads per (quartet, 64 primitive combinations), one integral per thread, the block's
//               descriptor broadcast through shared memory, its 64 values summed by a shared-memory tree;
//   DoReduction one block per quartet summing the quartet's block partials (a block reduction);
// all launches in order on one queue. Parboil's texture reads (float4 coordinates, float2 exponents and
// coefficients) are plain loads from remote arrays. Each quartet's sum is computed by the same blocks in the same
// order however the quartets are cut: 1, 2 or 3 host places give the same bits.
#include "rpes.hpp"

#include "parboil_apgas.hpp"

#include <algorithm>
#include <span>
#include <vector>

namespace {

// The quartets qs at compute place p: their sums.
std::vector<float> run_part(apgas::place p, const rpes::input& in, const std::vector<rpes::quartet>& qs, int threads) {
  if (qs.empty()) return {};
  const rpes::distribution d = rpes::distribute(in.shells, qs);
  const long blocks = d.blocks, nq = static_cast<long>(qs.size());
  auto quartet_work = apgas::make_remote_array(p, std::span<const rpes::work>(d.quartets));
  auto final = apgas::make_remote_array(p, std::span<const rpes::range>(d.final));
  auto work = apgas::make_remote_array<rpes::work>(p, rpes::chunk(0, blocks));  // one chunk's block descriptors
  auto xyz = apgas::make_remote_array(p, std::span<const rpes::atom4>(in.atoms));
  auto prims = apgas::make_remote_array(p, std::span<const rpes::prim>(in.prims));
  auto partial = apgas::make_remote_array<float>(p, blocks), sums = apgas::make_remote_array<float>(p, qs.size());
  std::vector<float> out(qs.size());
  apgas::finish([&] {
    auto q = apgas::in_order(p);
    for (long b0 = 0; b0 < blocks; b0 += rpes::grid_max) {
      const long b1 = b0 + rpes::chunk(b0, blocks);
      const auto [e0, e1] = rpes::quartets_in(d.final, b0, b1);
      q.async(apgas::cuda_kernel(  // DistributeBlockWork: the chunk's blocks get their quartet's descriptor
          apgas::grid{static_cast<int>(e1 - e0), rpes::block_size}, [=] APGAS_KERNEL(apgas::thread_block b) {
            const rpes::work w = quartet_work.data()[e0 + b.block()];
            const rpes::threads_range t = rpes::spread_threads(final.data()[e0 + b.block()], b0, b1);
            b.for_threads_in({t.lo, 0, 0}, {t.hi, 1, 1},
                             [&](apgas::thread_index i) { work.data()[w.first + i.x - b0] = w; });
          }));
      q.async(apgas::cuda_kernel(  // ComputeX: partial[b] = the sum of block b's integrals
          apgas::grid{static_cast<int>(b1 - b0), rpes::block_size}, [=] APGAS_KERNEL(apgas::thread_block b) {
            const long block = b0 + b.block();
            const rpes::work w = b.single([&] { return work.data()[b.block()]; });  // s_Work: thread 0 reads it for all
            const rpes::quartet_view v(w, block, xyz.data(), prims.data());
            const float s = b.reduce([&](apgas::thread_index t) { return v.integral(t.linear); }, apgas::plus{});
            b.single([&] { partial.data()[block] = s; });  // the block's partial (Parboil: its shared-memory tree)
          }));
    }
    for (long e0 = 0; e0 < nq; e0 += rpes::grid_max) {  // DoReduction: sums[e] = the sum of quartet e's partials
      q.async(apgas::cuda_kernel(apgas::grid{rpes::chunk(e0, nq), threads}, [=] APGAS_KERNEL(apgas::thread_block b) {
        const rpes::range r = final.data()[e0 + b.block()];
        const float* x = partial.data() + r.first;
        const float s =
            b.reduce([&](apgas::thread_index t) { return t.linear < static_cast<int>(r.count) ? x[t.linear] : 0.0f; },
                     apgas::plus{});
        b.single([&] { sums.data()[e0 + b.block()] = s; });
      }));
    }
    q.async_copy(sums, 0, std::span<float>(out));
  });
  apgas::free_remote_array(quartet_work), apgas::free_remote_array(final), apgas::free_remote_array(work);
  apgas::free_remote_array(xyz), apgas::free_remote_array(prims), apgas::free_remote_array(partial);
  apgas::free_remote_array(sums);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_parboil_rpes";
  return parboil::main(
      argc, argv, prog, rpes::usage(prog).c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
        rpes::input in;
        if (!rpes::prepare(o, in)) return 0;
        const std::vector<apgas::place> where = parboil::all_compute_places(o.cpu);
        parboil::timer timer;
        timer.start();
        const std::vector<rpes::quartet> qs = rpes::quartets(in.shells.size());
        std::vector<float> sums(qs.size());
        apgas::finish([&] {
          for (int i = 0; i < static_cast<int>(where.size()); ++i) {
            apgas::async([&, i] {  // part i, from its host
              const auto [lo, hi] = rpes::share(in.shells, qs, 0, static_cast<long>(qs.size()), i, where.size());
              const std::vector<rpes::quartet> part(qs.begin() + lo, qs.begin() + hi);
              const auto x = apgas::at(
                  where[i].parent(), [](const auto&... a) { return run_part(a...); }, where[i], in, part,
                  rpes::reduction_threads(in.shells));
              std::copy(x.begin(), x.end(), sums.begin() + lo);
            });
          }
        });
        timer.stop();
        return rpes::conclude(o, in, sums, prog, parboil::places_field(o.cpu), timer.seconds());
      });
}
