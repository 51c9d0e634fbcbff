// apgas_parboil_mri_fhd: Parboil's mri-fhd on the places of a run. rhoPhi is computed on a compute place of place
// 0; the voxels are split over every compute place (each host's GPU places, or its CPU place), and on each the
// samples go to constant memory 512 at a time, one kernel per tile adding its terms to FHd, the tiles' kernels in
// one in-order queue (mri_fhd.hpp: the arithmetic).
#include "mri_fhd.hpp"
#include "parboil_parts.hpp"  // parboil::compute_parts

using apgas::thread_index;

// Parboil's ComputeRhoPhi_GPU: rhoPhi = conj(phi) d, a thread per sample (phi and d in device buffers for the
// launch). Returns Re rhoPhi, then Im rhoPhi.
static std::vector<float> rho_phi(apgas::place p, const mri::input& in) {
  const int n = in.numK();
  auto rho = apgas::make_remote_array<float>(p, 2 * in.phiR.size());
  apgas::at(p, apgas::cuda_kernel(apgas::grid{mri::blocks(n, mri_fhd::rho_phi_block), mri_fhd::rho_phi_block},
                                  apgas::global_from(std::span(in.phiR)), apgas::global_from(std::span(in.phiI)),
                                  apgas::global_from(std::span(in.dR)), apgas::global_from(std::span(in.dI)),
                                  [=] APGAS_KERNEL (apgas::thread t, std::span<float> pr, std::span<float> pi,
                                                    std::span<float> dr, std::span<float> di) {
    if (const long k = t.global_id(); k < n) {
      rho.data()[k] = mri_fhd::rho_phi_r(pr[k], pi[k], dr[k], di[k]);
      rho.data()[n + k] = mri_fhd::rho_phi_i(pr[k], pi[k], dr[k], di[k]);
    }
  }));
  std::vector<float> out(rho.size());
  apgas::finish([&] { apgas::async_copy(rho, 0, std::span<float>(out)); });
  apgas::free_remote_array(rho);
  return out;
}

// Parboil's ComputeFH_GPU: a block of 256 threads, a voxel each, adds one tile's terms (constant memory) to its
// voxels' FHd (xyz: x, y, z of n voxels; f: rFhD, iFhD). Block level: the loop over the samples is the block's (four
// a step on a GPU, as Parboil), each thread's voxel and sums live across it (registers on a GPU).
static void compute_fh(apgas::in_order_queue queue, std::span<const mri_fhd::kvalue> tile,
                       apgas::remote_array<float> xyz, apgas::remote_array<float> f) {
  const long n = static_cast<long>(xyz.size() / 3);
  const apgas::grid g{mri::blocks(n, mri_fhd::fh_block), mri_fhd::fh_block};
  queue.async(apgas::cuda_kernel(g, apgas::constant_from(tile),
                                 [=] APGAS_KERNEL (apgas::thread_block b, std::span<const mri_fhd::kvalue> c) {
    const float *x = xyz.data(), *y = x + n, *z = y + n;
    float *fr = f.data(), *fi = fr + n;
    const long base = b.block() * mri_fhd::fh_block;
    auto sx = b.per_thread<float>(), sy = b.per_thread<float>(), sz = b.per_thread<float>();
    auto sr = b.per_thread<float>(), si = b.per_thread<float>();
    b.for_threads([&](thread_index t) {
      if (const long i = base + t.linear; i < n) {
        sx[t] = x[i], sy[t] = y[i], sz[t] = z[i], sr[t] = fr[i], si[t] = fi[i];
      }
    });
    // (an int index: the GPU's loop counts in 32 bits and its unrolled body starts at the first sample, as CUDA's)
    APGAS_UNROLL(4) for (int j = 0; j < static_cast<int>(c.size()); ++j) {
      const mri_fhd::kvalue k = c[j];  // a copy: it cannot alias the sums (the loop below vectorises)
      b.for_threads([&, k](thread_index t) { mri_fhd::add_sample(k, sx[t], sy[t], sz[t], sr[t], si[t]); });
    }
    b.for_threads([&](thread_index t) { if (const long i = base + t.linear; i < n) { fr[i] = sr[t]; fi[i] = si[t]; } });
  }));
}

int main(int argc, char** argv) {
  return parboil::main(argc, argv, "apgas_parboil_mri_fhd", mri::usage("apgas_parboil_mri_fhd", "IN").c_str(),
                       {"small", "default", "h100"}, [](const parboil::options& o) {
    return mri::run(o, "apgas_parboil_mri_fhd", "mri_fhd", true, parboil::places_field(o.cpu),
                    [&](const mri::input& in, mri::output& out) {
      const auto kv = mri_fhd::k_values(in, rho_phi(parboil::compute_places(o.cpu)[0], in));
      // Voxels [lo, hi) at compute place p: the tiles' kernels in order, adding to FHd (zeros at first).
      parboil::compute_parts(std::span<float>(out), 2, std::span<const float>(in.xyz), 3, in.numX(), mri_fhd::fh_block,
                             o.cpu, [](const parboil::part<float>& v, apgas::span_view<mri_fhd::kvalue> kv) {
        for (const auto tile : mri::tiles(kv.data, mri_fhd::k_tile)) compute_fh(v.queue, tile, v.in, v.out);
      }, apgas::span_view<mri_fhd::kvalue>{kv});
    }, mri_fhd::reference);
  });
}
