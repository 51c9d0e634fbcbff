// apgas_x10cuda_fdtd3d: the X10 paper's CUDA3DFD as an apgas kernel closure (fdtd3d.hpp has the problem, the input
// and the check). The volume is cut into z-slabs over the compute places of every host; a slab holds both work
// volumes (ping-pong) for its planes and 4 halo planes each side, and after each step the slabs exchange their halo
// planes with async_copy. The slab of place 0's CPU place works in place 0's own volumes.
#include "fdtd3d.hpp"
#include "x10cuda_apgas.hpp"

#include <algorithm>
#include <utility>

namespace {

using apgas::remote_array;
constexpr int r = fdtd3d::radius, bd = 16, sw = bd + 2 * r;  // radius, block width, shared tile width

// FiniteDifferencesKernel of the X10 sample (the SDK's 3DFD): 16 x 16 threads, each marching along z through one
// (x, y) column with planes z-4 .. z+4 in registers and plane z in a shared tile with a 4-wide halo, two barriers
// per plane. Planes [z0, z1) of out from in; the coefficients in constant memory.
void fd_kernel(apgas::place at, remote_array<float> in, remote_array<float> out, int nx, int ny, int z0, int z1) {
  apgas::at(at, apgas::cuda_kernel(
      apgas::grid{{nx / bd, ny / bd}, {bd, bd}}, apgas::constant_from(std::span<const float>(fdtd3d::coefficients)),
      apgas::shared_uninit<float, sw * sw>(),
      [=] APGAS_KERNEL(apgas::thread_block b, std::span<const float> c, apgas::shared_span<float, sw * sw> s) {
        const float* input = in.data();
        float* output = out.data();
        const long plane = static_cast<long>(nx) * ny;
        const int bx = b.block_idx().x * bd, by = b.block_idx().y * bd;
        const bool interior = bx >= r && bx + bd <= nx - r && by >= r && by + bd <= ny - r;
        auto behind4 = b.per_thread<float>(), behind3 = b.per_thread<float>(), behind2 = b.per_thread<float>();
        auto behind1 = b.per_thread<float>(), current = b.per_thread<float>(), infront1 = b.per_thread<float>();
        auto infront2 = b.per_thread<float>(), infront3 = b.per_thread<float>(), infront4 = b.per_thread<float>();
        auto value = b.per_thread<float>();  // edge blocks: the point's new value (a register on a GPU)
        b.for_threads([&](apgas::thread_index t) {  // planes z0-4 .. z0+3 of the column
          const float* p = input + (z0 - r) * plane + (by + t.y) * nx + bx + t.x;
          behind3[t] = p[0], behind2[t] = p[plane], behind1[t] = p[2 * plane], current[t] = p[3 * plane];
          infront1[t] = p[4 * plane], infront2[t] = p[5 * plane], infront3[t] = p[6 * plane];
          infront4[t] = p[7 * plane];
        });
        for (int z = z0; z < z1; ++z) {
          const long corner = z * plane + by * nx + bx;  // the block's first point in plane z
          // Advance the column by a plane: X10's behind4 = behind3, ..., infront3 = infront4 as a rotation of the
          // handles (on a GPU they are the thread's registers; on a CPU place, pointers to per-thread arrays).
          const auto oldest = behind4;
          behind4 = behind3, behind3 = behind2, behind2 = behind1, behind1 = current, current = infront1;
          infront1 = infront2, infront2 = infront3, infront3 = infront4, infront4 = oldest;
          b.for_threads([&](apgas::thread_index t) {  // plane z+4 into the column, plane z into the tile
            infront4[t] = input[corner + r * plane + t.y * nx + t.x];
            s[(t.y + r) * sw + t.x + r] = current[t];
          });
          b.for_threads([&](apgas::thread_index t) {  // the tile's halo: threads of the first 4 rows and columns
            const long i = corner + t.y * nx + t.x;
            if (t.y < r) {
              s[t.y * sw + t.x + r] = input[i - r * nx];
              s[(t.y + bd + r) * sw + t.x + r] = input[i + bd * nx];
            }
            if (t.x < r) {
              s[(t.y + r) * sw + t.x] = input[i - r];
              s[(t.y + r) * sw + t.x + bd + r] = input[i + bd];
            }
          });
          b.sync();
          auto point = [&](apgas::thread_index t) {  // the thread's output, from its column and the tile
            const int m = (t.y + r) * sw + t.x + r;
            float v = c[0] * current[t];
            v += fdtd3d::term(c[1], infront1[t], behind1[t], s[m - sw], s[m + sw], s[m - 1], s[m + 1]);
            v += fdtd3d::term(c[2], infront2[t], behind2[t], s[m - 2 * sw], s[m + 2 * sw], s[m - 2], s[m + 2]);
            v += fdtd3d::term(c[3], infront3[t], behind3[t], s[m - 3 * sw], s[m + 3 * sw], s[m - 3], s[m + 3]);
            v += fdtd3d::term(c[4], infront4[t], behind4[t], s[m - 4 * sw], s[m + 4 * sw], s[m - 4], s[m + 4]);
            return v;
          };
          if (interior) {
            b.for_threads([&](apgas::thread_index t) { output[corner + t.y * nx + t.x] = point(t); });
          } else {  // a block at the volume's x or y edge: those points keep their values
            b.for_threads([&](apgas::thread_index t) { value[t] = point(t); });
            b.for_threads([&](apgas::thread_index t) {
              const int x = bx + t.x, y = by + t.y;
              if (x >= r && x < nx - r && y >= r && y < ny - r) output[corner + t.y * nx + t.x] = value[t];
            });
          }
          b.sync();
        }
      }));
}

// A z-slab: the part's planes [lo, hi), its volumes holding global planes from `base` on (a: read, b: written).
struct slab {
  x10cuda::part p;
  long long base;
  remote_array<float> a, b;
  bool home;  // place 0's CPU place: place 0's volumes, base 0
};

// One step at the slab's compute place: its planes of b from a, the volume's 4-plane z faces left out.
void step(slab s, int nx, int ny, int nz) {
  const auto z0 = std::max<long long>(s.p.lo, r) - s.base, z1 = std::min<long long>(s.p.hi, nz - r) - s.base;
  if (z1 > z0) fd_kernel(s.p.at, s.a, s.b, nx, ny, static_cast<int>(z0), static_cast<int>(z1));
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = "apgas_x10cuda_fdtd3d";
  return parboil::main(argc, argv, prog, fdtd3d::usage(prog).c_str(), {"default", "small", "h100"},
                       [](const parboil::options& o) {
    const auto p = fdtd3d::prepare(o);
    if (!p) return 0;
    const int nx = p->nx, ny = p->ny, nz = p->nz;
    const long long plane = p->plane(), points = p->points();
    const apgas::place here = apgas::here();
    auto in0 = apgas::make_remote_array(here, std::span<const float>(p->volume));
    auto out0 = apgas::make_remote_array<float>(here, static_cast<std::size_t>(points));
    parboil::timer timer;
    timer.start();
    std::vector<slab> slabs;
    for (const x10cuda::part& part : x10cuda::parts(nz, o.cpu, r)) {
      slab s{part, 0, in0, out0, part.at == here};
      if (!s.home) {
        s.base = std::max(0LL, part.lo - r);
        const auto n = static_cast<std::size_t>((std::min<long long>(nz, part.hi + r) - s.base) * plane);
        s.a = apgas::make_remote_array<float>(part.at, n);
        s.b = apgas::make_remote_array<float>(part.at, n);
      }
      slabs.push_back(s);
    }
    apgas::finish([&] {  // both work volumes from the input
      for (const slab& s : slabs) {
        apgas::async_copy(in0, s.base * plane, s.b, 0, s.b.size());
        if (!s.home) apgas::async_copy(in0, s.base * plane, s.a, 0, s.a.size());
      }
    });
    for (int st = 0; st < p->steps; ++st) {
      apgas::finish([&] {
        for (const slab& s : slabs) apgas::async_at(s.p.at.parent(), [=] { step(s, nx, ny, nz); });
      });
      for (slab& s : slabs) std::swap(s.a, s.b);  // a: the volume just written
      if (st + 1 == p->steps) break;
      apgas::finish([&] {  // the 4 planes each side of each cut, from the slab that owns them
        for (std::size_t i = 0; i + 1 < slabs.size(); ++i) {
          const slab &lo = slabs[i], &hi = slabs[i + 1];
          const long long z = lo.p.hi, up = std::min<long long>(r, nz - z);
          apgas::async_copy(lo.a, (z - r - lo.base) * plane, hi.a, (z - r - hi.base) * plane, r * plane);
          apgas::async_copy(hi.a, (z - hi.base) * plane, lo.a, (z - lo.base) * plane, up * plane);
        }
      });
    }
    const remote_array<float> result = p->steps % 2 == 1 ? out0 : in0;
    apgas::finish([&] {
      for (const slab& s : slabs) {
        if (!s.home) apgas::async_copy(s.a, (s.p.lo - s.base) * plane, result, s.p.lo * plane, s.p.size() * plane);
      }
    });
    for (slab& s : slabs) {
      if (!s.home) apgas::free_remote_array(s.a), apgas::free_remote_array(s.b);
    }
    timer.stop();
    const int rc = fdtd3d::finish(o, *p, {result.data(), static_cast<std::size_t>(points)}, timer.seconds(),
                                  parboil::places_field(o.cpu));
    apgas::free_remote_array(in0);
    apgas::free_remote_array(out0);
    return rc;
  });
}
