// apgas_parboil_cp: Parboil's cp on the places of a run. The plane's rows are split over every compute place (each
// host's GPU places, or its CPU place); on each, the atoms go to constant memory 4000 at a time and one kernel per
// chunk adds the chunk's potential to the rows (cp.hpp has the arithmetic, the reference and the check).
#include "cp.hpp"
#include "parboil_parts.hpp"  // parboil::compute_parts

// Parboil's cenergy (cuenergy_pre8_coalesce.cu): a 16 x 8 block computes 128 x 8 points of rows [y0, ...), each
// thread 8 points of a row, 16 apart, from the atoms in constant memory. Block level: the loop over the atoms is the
// block's, each thread's 8 sums live across it (registers on a GPU, 8 arrays of the block's threads on a CPU place).
static void cenergy(apgas::place p, std::span<const cp::atom> chunk, apgas::remote_array<float> e, int nx, int y0) {
  const apgas::grid g{{nx / cp::tile_x, static_cast<int>(e.size()) / nx / cp::block_y}, {cp::block_x, cp::block_y}};
  apgas::at(p, apgas::cuda_kernel(g, apgas::constant_from(chunk),
                                  [=] APGAS_KERNEL (apgas::thread_block b, std::span<const cp::atom> atominfo) {
    const int x = b.block_idx().x * cp::tile_x, y = b.block_idx().y * cp::block_y;  // in e; y0 + y in the plane
    auto s = b.per_thread_array<float, cp::unroll_x>();  // energyvalx1 .. energyvalx8
    for (const cp::atom& a : atominfo) {
      b.for_threads([&](apgas::thread_index t) {
        cp::add_atom(a, x + t.x, y0 + y + t.y, [&](int k) -> float& { return s[k][t]; });
      });
    }
    b.for_threads([&](apgas::thread_index t) {
      cp::add_sums([&](int k) { return s[k][t]; }, e.data() + (y + t.y) * nx + x + t.x);
    });
  }));
}

int main(int argc, char** argv) {
  return parboil::main(argc, argv, "apgas_parboil_cp", cp::usage("apgas_parboil_cp").c_str(),
                       {"small", "default", "h100"}, [](const parboil::options& o) {
    return cp::run(o, "apgas_parboil_cp", parboil::places_field(o.cpu),
                   [&](const cp::problem& pb, std::span<float> energy) {
      const std::vector<cp::atom> atoms = cp::plane_atoms(pb.atoms);
      // Rows [y0, y1) at compute place p: the chunks' kernels in order, adding to the rows (zeros at first).
      parboil::compute_parts(energy, 1, std::span<const float>(), 0, pb.ny, cp::block_y, o.cpu,
                             [nx = pb.nx](const parboil::part<float>& rows, apgas::span_view<cp::atom> all) {
        for (const auto chunk : cp::chunks(all.data)) cenergy(rows.p, chunk, rows.out, nx, static_cast<int>(rows.lo));
      }, apgas::span_view<cp::atom>{atoms});
    });
  });
}
