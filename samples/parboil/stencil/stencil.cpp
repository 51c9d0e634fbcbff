// apgas_parboil_stencil: Parboil's stencil (7-point Jacobi, ping-pong, boundary kept) on the GPU places of every
// host, or on the CPU places of the hosts without GPUs. The volume is split into z-slabs over every computing place of
// the run (each host's GPUs, or the host itself; dist.hpp); a slab keeps one halo plane on each side, which its
// neighbours refresh with async_copy after every sweep, in line with the sweep on an in-order queue: with one place
// the sweeps are all issued at once under one finish (no host round trip between them); with several, a finish per
// sweep makes sure the halos have landed before the next sweep reads them. The slab at place 0's CPU place works in
// place 0's own volumes. Input, output and the check: stencil.hpp.
#include "stencil.hpp"

#include "dist.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace {

constexpr const char* prog = "apgas_parboil_stencil";
constexpr int ty = 4;  // Parboil's block height; its width tx: 32 on a GPU (Parboil's), a whole row on a CPU place

// Parboil's block2D_hybrid_coarsen_x (src/cuda/kernel.cu): a (tx, 4) block owns a 2tx x 4 column of the volume and
// walks it along z. Parboil keeps the planes below and above in registers and stages the current plane with its halo
// in shared memory (two barriers per plane); here each plane of the column is staged whole (b.stage: copied into
// shared memory on a GPU; read in place on a CPU place, where the copy would only cost, its rows prefetched), four
// planes in a ring: planes k - 1, k and k + 1 are read while plane k + 2 is staged, one barrier per plane. A plane's
// window holds the halo where the update reads it: a tile inside the volume reads every point's neighbours (those of
// a boundary point lie in the neighbouring row or plane of the array) and gets the boundary's values back after,
// which on a CPU place makes the update a loop with no branch; a tile at the volume's far edge clips its windows to
// the volume.
APGAS_KERNEL inline void block2d_hybrid_coarsen_x(apgas::thread_block b, apgas::shared_span<float> sh, const float* A0,
                                                  float* An, int nx, int ny, int nz) {
  const int tx = b.block_dim().x, cells = (2 * tx + 2) * (ty + 2);  // a staged plane: 2tx + 2 by ty + 2 at most
  const int x0 = b.block_idx().x * 2 * tx, y0 = b.block_idx().y * ty, plane = nx * ny;
  // The block's work for a tile inside the volume (full: a compile-time constant, nothing tested per point) or not.
  auto walk = [&](auto full) {
    auto window = [&](int k) {  // plane k of the column: whole, with its halo, or clipped to the volume
      const bool whole = full && k > 0 && k < nz - 1;
      const apgas::dim3 lo = whole ? apgas::dim3{-1, -1} : apgas::dim3{x0 > 0 ? -1 : 0, y0 > 0 ? -1 : 0};
      const apgas::dim3 hi = whole ? apgas::dim3{2 * tx + 1, ty + 1}
                                   : apgas::dim3{std::min(2 * tx + 1, nx - x0), std::min(ty + 1, ny - y0)};
      return b.stage(sh.subspan(k % 4 * cells, cells), A0 + k * plane + y0 * nx + x0, nx, lo, hi);
    };
    apgas::tile<float> below = window(0), here = window(1), above = window(2);
    b.sync();
    for (int k = 1; k < nz - 1; ++k) {
      const apgas::tile<float> next = k + 2 < nz ? window(k + 2) : above;  // into the slot nobody reads now
      // (a partial tile: only the threads with a point in the volume, so that a CPU place loops over those only)
      const apgas::dim3 with_points =
          full ? b.block_dim() : apgas::dim3{std::min(tx, nx - x0), std::min(b.block_dim().y, ny - y0)};
      b.for_threads_coarse_x(2, {0, 0, 0}, with_points, [&](apgas::thread_index t, int h) {  // two points, tx apart
        const int x = t.x + h * tx, i = x0 + x, j = y0 + t.y, g = i + j * nx + k * plane;
        if (!full && i >= nx) return;  // outside the volume (the second point of a thread at the edge)
        if (!full && (i == 0 || i == nx - 1 || j == 0 || j == ny - 1)) {  // the boundary keeps its value
          An[g] = here(x, t.y);
          return;
        }
        const int y = t.y;  // stencil::update's order: top, bottom, up, down, right, left
        An[g] = (above(x, y) + below(x, y) + here(x, y + 1) + here(x, y - 1) + here(x + 1, y) + here(x - 1, y)) *
                    stencil::c1 -
                here(x, y) * stencil::c0;
      });
      if (full) {  // the boundary gets its values back, by the threads that stored them (no sync needed)
        auto keep = [&](apgas::thread_index t, int h) {
          An[x0 + t.x + h * tx + (y0 + t.y) * nx + k * plane] = here(t.x + h * tx, t.y);
        };
        auto keep_row = [&](int row) { b.for_threads_coarse_x(2, {0, row, 0}, {tx, row + 1, 1}, keep); };
        if (x0 == 0) b.for_threads_in({0, 0, 0}, {1, ty, 1}, [&](apgas::thread_index t) { keep(t, 0); });
        if (x0 + 2 * tx == nx) {
          b.for_threads_in({tx - 1, 0, 0}, {tx, ty, 1}, [&](apgas::thread_index t) { keep(t, 1); });
        }
        if (y0 == 0) keep_row(0);
        if (y0 + ty == ny) keep_row(ty - 1);
      }
      b.sync();
      below = here, here = above, above = next;
    }
  };
  x0 + 2 * tx <= nx && y0 + ty <= ny ? walk(std::true_type{}) : walk(std::false_type{});
}

// A sweep of a slab (planes in, out: nz of them, with their halos), on q: blocks of (32, 4) threads on a GPU
// (Parboil's), of (tx, 4) on a CPU place with 2tx the row's width rounded down to a multiple of 32 (at most 512), where
// a block walking z then reads whole rows, and the rest of a row is a narrow block of its own (2tx rounded up made
// every block a partial one, tested point by point: 3x OpenMP at nx = 496). A slab of fewer than 3 planes holds only
// faces of the volume, which keep their values.
void sweep(apgas::in_order_queue& q, apgas::remote_array<float> in, apgas::remote_array<float> out, int nx, int ny,
           int nz) {
  const int tx = q.where().is_cuda() ? 32 : std::max(16, std::min(256, nx / 32 * 16));
  if (nz < 3) return;
  q.async(apgas::cuda_kernel(apgas::grid{{(nx + 2 * tx - 1) / (2 * tx), (ny + ty - 1) / ty}, {tx, ty}},
                             apgas::shared_uninit<float>(4 * (ty + 2) * (2 * tx + 2)),
                             [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float> sh) {
                               block2d_hybrid_coarsen_x(b, sh, in.data(), out.data(), nx, ny, nz);
                             }));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = stencil::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const auto in = stencil::start(o);
    if (!in) return 0;
    const int nx = in->nx, ny = in->ny;
    const long long plane = in->plane();
    const auto v0 = apgas::make_remote_array(apgas::here(), std::span<const float>(in->a));
    const auto v1 = apgas::make_remote_array<float>(apgas::here(), in->cells(), 0.0f);  // (touched)
    parboil::timer time;
    time.start();
    auto slabs = dist::make_slabs(in->nz, o.cpu, 1, plane, v0, v1);  // z-slabs, a halo plane each side
    dist::run_steps(slabs, in->iterations, 1, plane, [=](apgas::in_order_queue& q, const dist::slab<float>& s) {
      sweep(q, s.a, s.b, nx, ny, int(s.end - s.base));
    });
    const auto result = in->iterations % 2 == 1 ? v1 : v0;
    dist::gather_slabs(slabs, plane, result, in->iterations % 2 == 1 ? v0 : v1);
    time.stop();
    return stencil::finish(prog, o, *in, {result.data(), in->cells()}, time.seconds(), parboil::places_field(o.cpu));
  });
}
