// apgas_parboil_stencil: Parboil's stencil (7-point Jacobi, ping-pong, boundary kept) on the GPU places of every
// host, or on the CPU places of the hosts without GPUs. The interior planes are split into z-slabs over every
// computing place of the run (each host's GPUs, or the host itself); a slab keeps one halo plane on each side, which
// its neighbours refresh with async_copy after every sweep. Each place's sweeps and copies go through an in-order
// queue: with one place the 100 sweeps are issued at once under one finish; with several, one finish (and, between
// hosts, a barrier) per sweep orders the halo exchange. Input, output and the check: stencil.hpp.
#include "stencil.hpp"

#include "parboil_apgas.hpp"

#include <vector>

namespace {

constexpr const char* prog = "apgas_parboil_stencil";
constexpr int tx = 32, ty = 4;  // Parboil's block; a thread computes two points, tx apart in x

struct two {  // a thread's two points: registers on a GPU
  float v[2];
};

// Parboil's block2D_hybrid_coarsen_x (src/cuda/kernel.cu): a (32, 4) block owns a 64 x 4 column of the volume and
// walks it along z, the planes below and above in registers and the current plane in shared memory (the points at
// the tile's edge read their outside neighbours from global memory); two barriers per plane.
void sweep(apgas::in_order_queue& q, apgas::remote_array<float> in, apgas::remote_array<float> out, int nx, int ny,
           int nz) {
  q.async(apgas::cuda_kernel(
      apgas::grid{{(nx + 2 * tx - 1) / (2 * tx), (ny + ty - 1) / ty}, {tx, ty}},
      apgas::shared_uninit<float, 2 * tx * ty>(),
      [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<float, 2 * tx * ty> sh) {
        const float* A0 = in.data();
        float* An = out.data();
        const int x0 = b.block_idx().x * 2 * tx, y0 = b.block_idx().y * ty;
        const int plane = nx * ny;
        auto bottom = b.per_thread<two>(), top = b.per_thread<two>();
        b.for_threads([&](apgas::thread_index t) {
          for (int h = 0; h < 2; ++h) {
            const int i = x0 + t.x + h * tx, j = y0 + t.y;
            if (i < nx && j < ny) {
              bottom[t].v[h] = A0[i + j * nx];
              sh[t.y * 2 * tx + t.x + h * tx] = A0[i + j * nx + plane];
            }
          }
        });
        b.sync();
        for (int k = 1; k < nz - 1; ++k) {
          b.for_threads([&](apgas::thread_index t) {
            for (int h = 0; h < 2; ++h) {
              const int i = x0 + t.x + h * tx, j = y0 + t.y, s = t.y * 2 * tx + t.x + h * tx, g = i + j * nx + k * plane;
              if (i < nx && j < ny) top[t].v[h] = A0[g + plane];
              if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
                const float left = (h == 0 && t.x == 0) ? A0[g - 1] : sh[s - 1];
                const float right = (h == 1 && t.x == tx - 1) ? A0[g + 1] : sh[s + 1];
                const float down = t.y == 0 ? A0[g - nx] : sh[s - 2 * tx];
                const float up = t.y == ty - 1 ? A0[g + nx] : sh[s + 2 * tx];
                An[g] = (top[t].v[h] + bottom[t].v[h] + up + down + right + left) * stencil::c1 - sh[s] * stencil::c0;
              }
            }
          });
          b.sync();
          b.for_threads([&](apgas::thread_index t) {
            for (int h = 0; h < 2; ++h) {
              const int s = t.y * 2 * tx + t.x + h * tx;
              bottom[t].v[h] = sh[s];
              sh[s] = top[t].v[h];
            }
          });
          b.sync();
        }
      }));
}

// A slab: interior planes [z0, z1) of the volume at place p, held with one plane on each side in two volumes.
struct slab {
  apgas::place p;
  int z0 = 0, z1 = 0;
  apgas::remote_array<float> v[2];
  int planes() const { return z1 - z0 + 2; }
};

// At each host: its slabs' sweeps, and after each sweep the halo planes sent to the neighbouring slabs.
void run_host(const std::vector<slab>& all, int nx, int ny, int iterations) {
  const std::size_t plane = static_cast<std::size_t>(nx) * ny;
  std::vector<std::pair<int, apgas::in_order_queue>> mine;  // (index in all, its queue)
  for (int s = 0; s < static_cast<int>(all.size()); ++s) {
    const apgas::place p = all[s].p;
    if ((p.is_cuda() ? p.parent() : p) == apgas::here()) mine.emplace_back(s, apgas::in_order(p));
  }
  auto issue = [&](int it) {
    for (auto& [s, q] : mine) {
      const slab& me = all[s];
      const int from = it % 2, to = 1 - from;
      sweep(q, me.v[from], me.v[to], nx, ny, me.planes());
      if (s > 0) q.async_copy(me.v[to], plane, all[s - 1].v[to], plane * (all[s - 1].planes() - 1), plane);
      if (s + 1 < static_cast<int>(all.size())) {
        q.async_copy(me.v[to], plane * (me.planes() - 2), all[s + 1].v[to], 0, plane);
      }
    }
  };
  if (all.size() == 1) {
    apgas::finish([&] {
      for (int it = 0; it < iterations; ++it) issue(it);
    });
    return;
  }
  for (int it = 0; it < iterations; ++it) {
    apgas::finish([&] { issue(it); });
    if (apgas::num_hosts() > 1) apgas::team::world().barrier();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = stencil::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), {"small", "default", "h100"}, [&](const parboil::options& o) {
    const auto in = stencil::start(o);
    if (!in) return 0;
    const int nx = in->nx, ny = in->ny, nz = in->nz, iterations = in->iterations;
    const std::size_t plane = in->plane();
    std::vector<apgas::place> where;  // every computing place of the run, host by host
    for (const apgas::place h : apgas::places()) {
      const bool cpu = o.cpu;
      const auto ps = apgas::at(h, [cpu] { return parboil::compute_places(cpu); });
      where.insert(where.end(), ps.begin(), ps.end());
    }
    std::vector<float> result(in->cells());
    parboil::timer time;
    time.start();
    std::vector<slab> slabs;
    for (int s = 0; s < static_cast<int>(where.size()); ++s) {
      const auto z = parboil::share(nz - 2, s, static_cast<int>(where.size()));
      if (z.second == z.first) continue;
      slab sl{where[s], 1 + static_cast<int>(z.first), 1 + static_cast<int>(z.second), {}};
      const std::span<const float> part(in->a.data() + (sl.z0 - 1) * plane, sl.planes() * plane);
      sl.v[0] = apgas::make_remote_array(sl.p, part);
      sl.v[1] = apgas::make_remote_array(sl.p, part);
      slabs.push_back(sl);
    }
    apgas::finish([&] {
      for (const apgas::place h : apgas::places()) {
        apgas::async_at(h, [nx, ny, iterations](const std::vector<slab>& all) { run_host(all, nx, ny, iterations); },
                        slabs);
      }
    });
    std::copy_n(in->a.begin(), plane, result.begin());  // the boundary planes k = 0 and nz - 1
    std::copy_n(in->a.end() - plane, plane, result.end() - plane);
    apgas::finish([&] {
      for (const slab& sl : slabs) {
        apgas::async_copy(sl.v[iterations % 2], plane, std::span<float>(&result[sl.z0 * plane], (sl.z1 - sl.z0) * plane));
      }
    });
    for (slab& sl : slabs) {
      apgas::free_remote_array(sl.v[0]);
      apgas::free_remote_array(sl.v[1]);
    }
    time.stop();
    return stencil::finish(prog, o, *in, result, time.seconds(), parboil::places_field(o.cpu));
  });
}
