// apgas_parboil_stencil: Parboil's stencil (7-point Jacobi, ping-pong, boundary kept) on the GPU places of every
// host, or on the CPU places of the hosts without GPUs. The interior planes are split into z-slabs over every
// computing place of the run (each host's GPUs, or the host itself); a slab keeps one halo plane on each side, which
// its neighbours refresh with async_copy after every sweep. A place's sweep and halo copies go in line on an in-order
// queue: with one place the sweeps are all issued at once under one finish (no host round trip between them); with
// several, a finish per sweep makes sure the halos have landed before the next sweep reads them. Input, output and
// the check: stencil.hpp.
#include "stencil.hpp"

#include "parboil_apgas.hpp"

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
      b.for_threads([&](apgas::thread_index t) {
        for (int h = 0; h < 2; ++h) {  // the thread's two points, tx apart
          const int x = t.x + h * tx, i = x0 + x, j = y0 + t.y, g = i + j * nx + k * plane;
          if (!full && (i >= nx || j >= ny)) continue;  // outside the volume
          if (!full && (i == 0 || i == nx - 1 || j == 0 || j == ny - 1)) {  // the boundary keeps its value
            An[g] = here(x, t.y);
            continue;
          }
          const int y = t.y;  // stencil::update's order: top, bottom, up, down, right, left
          An[g] = (above(x, y) + below(x, y) + here(x, y + 1) + here(x, y - 1) + here(x + 1, y) + here(x - 1, y)) *
                      stencil::c1 -
                  here(x, y) * stencil::c0;
        }
      });
      if (full) {  // the boundary gets its values back, by the threads that stored them (no sync needed)
        auto keep = [&](apgas::thread_index t, int h) {
          An[x0 + t.x + h * tx + (y0 + t.y) * nx + k * plane] = here(t.x + h * tx, t.y);
        };
        auto keep_row = [&](int row) {
          b.for_threads_in({0, row, 0}, {tx, row + 1, 1}, [&](apgas::thread_index t) { keep(t, 0), keep(t, 1); });
        };
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

// A slab: interior planes [z0, z1) of the volume at place p, held with one plane on each side in two volumes.
struct slab {
  apgas::place p;
  int z0 = 0, z1 = 0;
  apgas::remote_array<float> v[2];
};

// Sweep `it` of slab me, in line on q (at me.p): the kernel, then its first and last planes into the halos of its
// neighbours lo and hi (where they exist). Blocks of (32, 4) threads on a GPU (Parboil's), of (tx, 4) with 2tx a whole
// row (at most 512) on a CPU place, where a block walking z then reads whole rows.
void sweep(apgas::in_order_queue& q, const slab& me, const slab& lo, const slab& hi, int it, int nx, int ny) {
  const int tx = q.where().is_cuda() ? 32 : std::min(256, (nx + 31) / 32 * 16), nz = me.z1 - me.z0 + 2;
  const std::size_t plane = std::size_t(nx) * ny;
  const auto in = me.v[it % 2], out = me.v[1 - it % 2];
  q.async(apgas::cuda_kernel(apgas::grid{{(nx + 2 * tx - 1) / (2 * tx), (ny + ty - 1) / ty}, {tx, ty}},
                             apgas::shared_uninit<float>(4 * (ty + 2) * (2 * tx + 2)),
                             [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float> sh) {
                               block2d_hybrid_coarsen_x(b, sh, in.data(), out.data(), nx, ny, nz);
                             }));
  if (lo.z1 > lo.z0) q.async_copy(out, plane, lo.v[1 - it % 2], (lo.z1 - lo.z0 + 1) * plane, plane);
  if (hi.z1 > hi.z0) q.async_copy(out, (nz - 2) * plane, hi.v[1 - it % 2], 0, plane);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = stencil::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const auto in = stencil::start(o);
    if (!in) return 0;
    const int nx = in->nx, ny = in->ny, nz = in->nz, iterations = in->iterations;
    const std::size_t plane = in->plane();
    const std::vector<apgas::place> where = parboil::all_compute_places(o.cpu);
    std::vector<slab> slabs;  // the interior planes over them; the volumes made (and filled) before the timed part
    for (int s = 0; s < int(where.size()); ++s) {
      const auto [z0, z1] = parboil::share(nz - 2, s, int(where.size()));
      if (z1 == z0) continue;
      slab sl{where[s], 1 + int(z0), 1 + int(z1)};
      for (auto& v : sl.v) v = apgas::make_remote_array<float>(sl.p, (z1 - z0 + 2) * plane, 0.0f);  // (touched)
      slabs.push_back(sl);
    }
    std::vector<float> result(in->cells());
    parboil::timer time;
    time.start();
    apgas::finish([&] {  // each slab's planes, with its halos, into both of its volumes
      for (const slab& sl : slabs) {
        for (const auto& v : sl.v) apgas::async_copy(std::span(&in->a[(sl.z0 - 1) * plane], v.size()), v);
      }
    });
    if (slabs.size() == 1) {  // one place: the sweeps in line on one queue, under one finish
      apgas::finish([&] {
        auto q = apgas::in_order(slabs[0].p);
        for (int it = 0; it < iterations; ++it) sweep(q, slabs[0], {}, {}, it, nx, ny);
      });
    }
    for (int it = 0; slabs.size() > 1 && it < iterations; ++it) {  // several: a finish per sweep orders the halos
      apgas::finish([&] {
        for (std::size_t s = 0; s < slabs.size(); ++s) {
          const slab me = slabs[s], lo = s > 0 ? slabs[s - 1] : slab{};
          const slab hi = s + 1 < slabs.size() ? slabs[s + 1] : slab{};
          apgas::async_at(me.p.is_cuda() ? me.p.parent() : me.p, [=] {
            auto q = apgas::in_order(me.p);
            sweep(q, me, lo, hi, it, nx, ny);
          });
        }
      });
    }
    apgas::finish([&] {  // the interior planes back, and the first and last planes of the volume with them
      for (std::size_t s = 0; s < slabs.size(); ++s) {
        const int z0 = slabs[s].z0 - (s == 0), z1 = slabs[s].z1 + (s + 1 == slabs.size());
        apgas::async_copy(slabs[s].v[iterations % 2], (z0 - slabs[s].z0 + 1) * plane,
                          std::span(&result[z0 * plane], (z1 - z0) * plane));
      }
    });
    time.stop();
    for (slab& sl : slabs) {
      for (auto& v : sl.v) apgas::free_remote_array(v);
    }
    return stencil::finish(prog, o, *in, result, time.seconds(), parboil::places_field(o.cpu));
  });
}
