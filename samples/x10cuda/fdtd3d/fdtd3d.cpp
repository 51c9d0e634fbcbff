// apgas_x10cuda_fdtd3d: the X10 paper's CUDA3DFD as an apgas kernel closure (fdtd3d.hpp has the problem, the input
// and the check). The volume is cut into z-slabs over the compute places of every host; a slab holds both work
// volumes (ping-pong) for its planes and 4 halo planes each side, and between steps the slabs exchange their halo
// planes with async_copy. The slab at place 0's CPU place works in place 0's own volumes.
#include "fdtd3d.hpp"
#include "x10cuda_apgas.hpp"

#include <algorithm>

namespace {

using apgas::remote_array;
constexpr int r = fdtd3d::radius;

// FiniteDifferencesKernel of the X10 sample (the SDK's 3DFD): 16 x 16 threads, each marching along z through one
// (x, y) column with planes z-4 .. z+4 in registers and plane z in a shared tile with a 4-wide halo, two barriers
// per plane, the coefficients in constant memory. Planes [z0, z1) of out from in. The tile is staged (b.stage: on a
// GPU the block copies plane z's window into shared memory; a CPU place reads the plane in place). On a CPU place the
// blocks are 8 rows of up to 128 points (a 16 x 16 block reads its halo and its rows as short runs) and march through
// at most 32 planes each (a grid of chunks along z; a GPU block marches through all, as X10's): a worker then sweeps 32
// planes of the whole volume before going deeper, so the rows a block shares with its neighbours are still in its
// cache when they read them. The edges keep their values: the work of a few threads, for_threads_in (on a CPU place a
// loop over those threads only).
void fd_kernel(apgas::in_order_queue& q, remote_array<float> in, remote_array<float> out, int nx, int ny, int z0,
               int z1) {
  int bw = 16, bh = 16, chunks = 1;
  if (!q.where().is_cuda()) for (bh = 8, bw = 128, chunks = std::max(1, (z1 - z0 + 31) / 32); nx % bw != 0;) bw -= 8;
  q.async(apgas::cuda_kernel(
      apgas::grid{{nx / bw, ny / bh, chunks}, {bw, bh}},
      apgas::constant_from(std::span<const float>(fdtd3d::coefficients)),
      apgas::shared_uninit<float>((bw + 2 * r) * (bh + 2 * r)),
      [=] APGAS_KERNEL(apgas::thread_block b, std::span<const float> c, apgas::shared_span<float> s) {
        const int bdx = b.block_dim().x, bdy = b.block_dim().y;
        const float* input = in.data();
        float* output = out.data();
        const long plane = static_cast<long>(nx) * ny;
        const int bx = b.block_idx().x * bdx, by = b.block_idx().y * bdy;
        const int len = (z1 - z0 + b.grid_dim().z - 1) / b.grid_dim().z;  // the block's planes: [za, zb)
        const int za = z0 + b.block_idx().z * len, zb = std::min(z1, za + len);
        auto q = b.per_thread_array<float, 2 * r + 1>();  // the column: X10's behind4 .. current .. infront4
        b.for_threads([&](apgas::thread_index t) {                 // planes za-4 .. za+3
          for (int k = 1; k <= 2 * r; ++k) q[k][t] = input[(za - r - 1 + k) * plane + (by + t.y) * nx + bx + t.x];
        });
        for (int z = za; z < zb; ++z) {
          const long corner = z * plane + by * nx + bx;  // the block's first point in plane z
          x10cuda::rotate_left(q);                       // advance the column: behind4 = behind3, ...
          for (int y = -r; y < bdy + r && z + 1 < zb; ++y) {  // (on a CPU place) what the next plane reads first:
            if (y >= 0 && y < bdy) {
              b.prefetch(input + corner + (r + 1) * plane + y * nx, bdx);  // plane z+5's rows,
            } else {
              b.prefetch(input + corner + plane + y * nx - r, bdx + 2 * r);  // z+1's halo rows
            }
          }
          b.for_threads([&](apgas::thread_index t) { q[2 * r][t] = input[corner + r * plane + t.y * nx + t.x]; });
          const apgas::tile<float> p = b.stage(s, input + corner, nx, {-r, -r}, {bdx + r, bdy + r});  // plane z
          b.sync();
          b.for_threads([&](apgas::thread_index t) {
            const int x = t.x, y = t.y;
            float v = c[0] * q[r][t];
            APGAS_UNROLL() for (int k = 1; k <= r; ++k) {
              v += fdtd3d::term(c[k], q[r + k][t], q[r - k][t], p(x, y - k), p(x, y + k), p(x - k, y), p(x + k, y));
            }
            output[corner + y * nx + x] = v;
          });
          auto keep = [&](apgas::thread_index t) { output[corner + t.y * nx + t.x] = q[r][t]; };  // the edges
          b.for_threads_in({0, 0, 0}, {bdx, r - by, 1}, keep);            // the y edges: rows below r...
          b.for_threads_in({0, ny - r - by, 0}, {bdx, bdy, 1}, keep);     // ...and from ny - r on
          b.for_threads_in({0, 0, 0}, {r - bx, bdy, 1}, keep);            // the x edges: columns below r...
          b.for_threads_in({nx - r - bx, 0, 0}, {bdx, bdy, 1}, keep);     // ...and from nx - r on
          b.sync();
        }
      }));
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_fdtd3d";
  return parboil::main(argc, argv, prog, fdtd3d::usage(prog).c_str(), {"default", "small", "h100"},
                       [](const parboil::options& o) {
    const auto p = fdtd3d::prepare(o);
    if (!p) return 0;
    const int nx = p->nx, ny = p->ny, nz = p->nz;
    const long long plane = p->plane();
    const auto in0 = apgas::make_remote_array(apgas::here(), std::span<const float>(p->volume));
    // (filled: its pages are touched before the timed part, as the OpenMP baseline's second volume)
    const auto out0 = apgas::make_remote_array<float>(apgas::here(), p->volume.size(), 0.0f);
    parboil::timer timer;
    timer.start();
    auto slabs = dist::make_slabs(nz, o.cpu, r, plane, in0, out0);  // z-slabs, both volumes from the input
    dist::run_steps(slabs, p->steps, r, plane, [=](apgas::in_order_queue& q, const dist::slab<float>& s) {
      const auto z0 = std::max<long long>(s.p.lo, r) - s.base, z1 = std::min<long long>(s.p.hi, nz - r) - s.base;
      if (z1 > z0) fd_kernel(q, s.a, s.b, nx, ny, int(z0), int(z1));  // (a slab of face planes only: none)
    });  // its planes (the z faces keep their values), then the halo planes to the neighbours
    const auto result = p->steps % 2 == 1 ? out0 : in0;
    dist::gather_slabs(slabs, plane, result, p->steps % 2 == 1 ? in0 : out0);
    timer.stop();
    return fdtd3d::finish(o, *p, {result.data(), p->volume.size()}, timer.seconds(), parboil::places_field(o.cpu));
  });
}
