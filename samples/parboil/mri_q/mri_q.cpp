// apgas_parboil_mri_q: Parboil's mri-q on the places of a run. |phi|^2 is computed on a compute place of place 0;
// the voxels are split over every compute place (each host's GPU places, or its CPU place), and on each the samples
// go to constant memory 1024 at a time, one kernel per tile adding its terms to Q, the tiles' kernels in one
// in-order queue (mri_q.hpp: the arithmetic).
#include "mri_q.hpp"
#include "parboil_parts.hpp"  // parboil::compute_parts

using apgas::thread_index;

// Parboil's ComputePhiMag_GPU: |phi_k|^2, a thread per sample (phiR and phiI in device buffers for the launch).
static std::vector<float> phi_mag(apgas::place p, const mri::input& in) {
  const int n = in.numK();
  auto mag = apgas::make_remote_array<float>(p, in.phiR.size());
  apgas::at(p, apgas::cuda_kernel(apgas::grid{mri::blocks(n, mri_q::phi_mag_block), mri_q::phi_mag_block},
                                  apgas::global_from(std::span(in.phiR)), apgas::global_from(std::span(in.phiI)),
                                  [=] APGAS_KERNEL (apgas::thread t, std::span<float> re, std::span<float> im) {
    if (const long k = t.global_id(); k < n) mag.data()[k] = mri_q::phi_mag(re[k], im[k]);
  }));
  std::vector<float> out(in.phiR.size());
  apgas::finish([&] { apgas::async_copy(mag, 0, std::span<float>(out)); });
  apgas::free_remote_array(mag);
  return out;
}

// Parboil's ComputeQ_GPU: a block of 256 threads, a voxel each, adds one tile's terms (constant memory) to its
// voxels' Q (xyz: x, y, z of n voxels; q: Qr, Qi). Block level: the loop over the samples is the block's (two a
// step on a GPU, as Parboil), each thread's voxel and sums live across it (registers on a GPU).
static void compute_q(apgas::in_order_queue queue, std::span<const mri_q::kvalue> tile,
                      apgas::remote_array<float> xyz, apgas::remote_array<float> q) {
  const long n = static_cast<long>(xyz.size() / 3);
  const apgas::grid g{mri::blocks(n, mri_q::q_block), mri_q::q_block};
  queue.async(apgas::cuda_kernel(g, apgas::constant_from(tile),
                                 [=] APGAS_KERNEL (apgas::thread_block b, std::span<const mri_q::kvalue> ck) {
    const float *x = xyz.data(), *y = x + n, *z = y + n;
    float *qr = q.data(), *qi = qr + n;
    const long base = b.block() * mri_q::q_block;
    auto sx = b.per_thread<float>(), sy = b.per_thread<float>(), sz = b.per_thread<float>();
    auto sr = b.per_thread<float>(), si = b.per_thread<float>();
    b.for_threads([&](thread_index t) {
      if (const long i = base + t.linear; i < n) {
        sx[t] = x[i], sy[t] = y[i], sz[t] = z[i], sr[t] = qr[i], si[t] = qi[i];
      }
    });
    // (an int index: the GPU's loop counts in 32 bits and its unrolled body starts at the first sample, as CUDA's)
    APGAS_UNROLL(2) for (int j = 0; j < static_cast<int>(ck.size()); ++j) {
      const mri_q::kvalue k = ck[j];  // a copy: it cannot alias the sums (the loop below vectorises)
      b.for_threads([&, k](thread_index t) { mri_q::add_sample(k, sx[t], sy[t], sz[t], sr[t], si[t]); });
    }
    b.for_threads([&](thread_index t) { if (const long i = base + t.linear; i < n) { qr[i] = sr[t]; qi[i] = si[t]; } });
  }));
}

int main(int argc, char** argv) {
  return parboil::main(argc, argv, "apgas_parboil_mri_q", mri::usage("apgas_parboil_mri_q", "IN").c_str(),
                       {"small", "default", "h100"}, [](const parboil::options& o) {
    return mri::run(o, "apgas_parboil_mri_q", "mri_q", false, parboil::places_field(o.cpu),
                    [&](const mri::input& in, mri::output& out) {
      const auto kv = mri_q::k_values(in, phi_mag(parboil::compute_places(o.cpu)[0], in));
      // Voxels [lo, hi) at compute place p: the tiles' kernels in order, adding to Q (zeros at first).
      parboil::compute_parts(std::span<float>(out), 2, std::span<const float>(in.xyz), 3, in.numX(), mri_q::q_block,
                             o.cpu, [](const parboil::part<float>& v, apgas::span_view<mri_q::kvalue> kv) {
        for (const auto tile : mri::tiles(kv.data, mri_q::k_tile)) compute_q(v.queue, tile, v.in, v.out);
      }, apgas::span_view<mri_q::kvalue>{kv});
    }, mri_q::reference);
  });
}
