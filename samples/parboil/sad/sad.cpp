// apgas_parboil_sad: Parboil's sad (H.264 full-pel motion search, sad.hpp) with apgas kernel closures.
//
// The kernels port Parboil's optimised CUDA version (src/cuda: sad4.cu, largerBlocks.cu), issued in one in-order
// queue per place, with 2-D grids:
//   pad_reference       Parboil read the reference frame through a 2-D texture with clamp addressing (texture
//                       references were removed in CUDA 12): here a padded copy whose borders repeat the edge pixels,
//                       made once with explicit clamp-to-edge addressing, so that the search reads it unclamped.
//   mb_sad_calc         one block per 4x4 block of the frame: the current 4x4 block in shared memory, a barrier,
//                       every thread three search positions that share their reference fetches (Parboil: 61 threads x
//                       18 positions, in steps of three horizontal neighbours; here 33 x 11 threads of three vertical
//                       neighbours, so that neighbouring threads read neighbouring pixels), the SADs staged in shared
//                       memory, a barrier, then copied out in 8-byte words.
//   larger_sad_calc_8   the 4x8, 8x4 and 8x8 SADs from the 4x4 ones, adding u16 pairs packed in a u32;
//   larger_sad_calc_16  the 8x16, 16x8 and 16x16 SADs from the 8x8 ones;
//   pack_rows           the six macroblock rows of the output, gathered in the output's order and copied back in one
//                       piece (Parboil copied the whole SAD array back).
// Places: the macroblock rows are split over the compute places of every host (its GPU places, or its CPU place).
// The kernels are written at block level (apgas::thread_block): on a GPU the ordinary kernels, on a CPU place loops
// over a block's threads that the compiler vectorises.
#include "sad.hpp"

#include "parboil_apgas.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr const char* prog = "apgas_parboil_sad";
using u16 = std::uint16_t;
using sad::dim;
using sad::padded;
constexpr int pairs = padded / 2;  // u16 pairs (u32) per sub-block
constexpr int pad = sad::search_range;

APGAS_KERNEL inline int clamp_to(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }
APGAS_KERNEL inline int absdiff(int a, int b) { return a > b ? a - b : b - a; }
// Sub-block s (0..40, the output's order) of a macroblock: its block type's first sub-block, and how many it has.
APGAS_KERNEL inline int first_of(int s) {
  return s < 1 ? 0 : s < 3 ? 1 : s < 5 ? 3 : s < 9 ? 5 : s < 17 ? 9 : s < 25 ? 17 : 25;
}
APGAS_KERNEL inline int count_of(int s) { return s < 1 ? 1 : s < 5 ? 2 : s < 9 ? 4 : s < 25 ? 8 : 16; }

// At p's host, on place p: the SAD array of macroblock rows [r0, r1) of the w x h frames; the output rows among
// them (sad::rows_held), in the output's order, into `rows`. Sub-block k of type t of macroblock mb (counted from row
// r0) starts at element (first[t] * mbs + mb * count[t] + k) * 1096.
void search(apgas::place p, int w, int h, int r0, int r1, const std::vector<u16>& ref, const std::vector<u16>& cur,
            std::span<u16> rows) {
  const int W = w + 2 * pad, mb_w = w / 16, mbs = mb_w * (r1 - r0);
  auto d_ref = apgas::make_remote_array(p, std::span<const u16>(ref));
  auto d_cur = apgas::make_remote_array(p, std::span<const u16>(cur));
  auto padref = apgas::make_remote_array<u16>(p, static_cast<std::size_t>(W) * (h + 2 * pad));
  auto sads = apgas::make_remote_array<u16>(p, static_cast<std::size_t>(mbs) * sad::sub_blocks * padded);
  const sad::held_rows held = sad::rows_held(h / 16, r0, r1);
  apgas::remote_array<u16> packed;  // rows, on place p
  if (held.n > 0) packed = apgas::make_remote_array<u16>(p, rows.size());
  apgas::finish([&] {
    auto q = apgas::in_order(p);
    // pad_reference: the padded rows the search reads, padref[y][x] = ref[clamp(y - 16)][clamp(x - 16)].
    q.async(apgas::cuda_kernel(apgas::grid{16 * (r1 - r0) + 2 * pad, 128}, [=] APGAS_KERNEL(apgas::thread_block b) {
      const int y = 16 * r0 + static_cast<int>(b.block());
      const u16* src = d_ref.data() + static_cast<long>(clamp_to(y - pad, h - 1)) * w;
      u16* dst = padref.data() + static_cast<long>(y) * W;
      b.for_range(W, [&](int x) { dst[x] = src[clamp_to(x - pad, w - 1)]; });
    }));
    // mb_sad_calc<<<dim3(w / 4, h / 4), dim3(33, 11)>>>: the 1089 SADs of each 4x4 block (type 7).
    q.async(apgas::cuda_kernel(
        apgas::grid{{w / 4, 4 * (r1 - r0)}, {dim, dim / 3}},
        apgas::shared_uninit<u16, 16>(),      // frame_loc: the current 4x4 block
        apgas::shared_uninit<u16, padded>(),  // sad_loc: its SADs
        [=] APGAS_KERNEL(apgas::thread_block b, apgas::shared_span<u16, 16> blk,
                         apgas::shared_span<u16, padded> sad_loc) {
          const int bx = b.block_idx().x, by = b.block_idx().y;  // by: from row r0
          const int x0 = 4 * bx, y0 = 16 * r0 + 4 * by;          // the 4x4 block's first pixel
          const u16* R = padref.data();
          const u16* C = d_cur.data();
          b.for_threads([&](apgas::thread_index t) {  // the block, and the padding of the SADs
            if (t.linear < 16) blk[t.linear] = C[static_cast<long>(y0 + t.linear / 4) * w + x0 + t.linear % 4];
            if (t.linear >= 16 && t.linear < 16 + padded - dim * dim) sad_loc[dim * dim + t.linear - 16] = 0;
          });
          b.sync();
          b.for_threads([&](apgas::thread_index t) {  // positions (dx, dy) = (t.x, 3 t.y + 0..2) - 16
            const u16* r = R + static_cast<long>(y0 + 3 * t.y) * W + x0 + t.x;  // padded: pixel (x0 + dx, y0 + dy)
            int s0 = 0, s1 = 0, s2 = 0;
            APGAS_UNROLL() for (int y = 0; y < 4; ++y) {
              APGAS_UNROLL() for (int x = 0; x < 4; ++x) {
                const int c = blk[4 * y + x];
                s0 += absdiff(r[y * W + x], c);
                s1 += absdiff(r[(y + 1) * W + x], c);
                s2 += absdiff(r[(y + 2) * W + x], c);
              }
            }
            const int i = 3 * t.y * dim + t.x;
            sad_loc[i] = static_cast<u16>(s0);
            sad_loc[i + dim] = static_cast<u16>(s1);
            sad_loc[i + 2 * dim] = static_cast<u16>(s2);
          });
          b.sync();
          // Out in 8-byte words, to sub-block (bx % 4, by % 4) of the macroblock's 4x4 SADs.
          const long mb = (by / 4) * mb_w + bx / 4;
          auto* out = reinterpret_cast<unsigned long long*>(sads.data() +
                                                            (25L * mbs + mb * 16 + 4 * (by % 4) + bx % 4) * padded);
          b.for_threads([&](apgas::thread_index t) {
            if (t.linear >= padded / 4) return;
            const int i = 4 * t.linear;
            out[t.linear] = sad_loc[i] | static_cast<unsigned long long>(sad_loc[i + 1]) << 16 |
                            static_cast<unsigned long long>(sad_loc[i + 2]) << 32 |
                            static_cast<unsigned long long>(sad_loc[i + 3]) << 48;
          });
        }));
    // larger_sad_calc_8<<<dim3(mb_w, mb_h), dim3(137, 4)>>>: per macroblock and 8x8 block (t.y), the 4x8, 8x4 and
    // 8x8 SADs of positions 2i, 2i + 1 from its four 4x4 ones. In u32 a sub-block is 548 values.
    q.async(apgas::cuda_kernel(apgas::grid{{mb_w, r1 - r0}, {pairs / 4, 4}}, [=] APGAS_KERNEL(apgas::thread_block b) {
      const long mb = b.block();
      auto* s = reinterpret_cast<unsigned*>(sads.data());
      for (int i0 = 0; i0 < pairs; i0 += pairs / 4) {
        b.for_threads([&](apgas::thread_index t) {
          const long i = i0 + t.x, tx = t.y & 1, ty = t.y >> 1;
          const unsigned* in = s + (25L * mbs + mb * 16 + 8 * ty + 2 * tx) * pairs + i;
          const unsigned i00 = in[0], i01 = in[pairs], i10 = in[4 * pairs], i11 = in[5 * pairs];
          unsigned* o6 = s + (17L * mbs + mb * 8 + 4 * ty + 2 * tx) * pairs + i;  // 4 wide, 8 tall
          o6[0] = i00 + i10;
          o6[pairs] = i01 + i11;
          unsigned* o5 = s + (9L * mbs + mb * 8 + 4 * ty + tx) * pairs + i;  // 8 wide, 4 tall
          o5[0] = i00 + i01;
          o5[2 * pairs] = i10 + i11;
          s[(5L * mbs + mb * 4 + 2 * ty + tx) * pairs + i] = (i00 + i01) + (i10 + i11);  // 8x8
        });
      }
    }));
    // larger_sad_calc_16<<<dim3(mb_w, mb_h), 137>>>: the 8x16, 16x8 and 16x16 SADs from the four 8x8 ones.
    q.async(apgas::cuda_kernel(apgas::grid{{mb_w, r1 - r0}, pairs / 4}, [=] APGAS_KERNEL(apgas::thread_block b) {
      const long mb = b.block();
      auto* s = reinterpret_cast<unsigned*>(sads.data());
      b.for_range(pairs, [&](int i) {
        const unsigned* in = s + (5L * mbs + mb * 4) * pairs + i;
        const unsigned i00 = in[0], i01 = in[pairs], i10 = in[2 * pairs], i11 = in[3 * pairs];
        unsigned* o3 = s + (3L * mbs + mb * 2) * pairs + i;  // 8 wide, 16 tall
        o3[0] = i00 + i10;
        o3[pairs] = i01 + i11;
        unsigned* o2 = s + (1L * mbs + mb * 2) * pairs + i;  // 16 wide, 8 tall
        o2[0] = i00 + i01;
        o2[pairs] = i10 + i11;
        s[mb * pairs + i] = (i00 + i01) + (i10 + i11);  // 16x16
      });
    }));
    // pack_rows<<<dim3(41, mb_w, rows), 128>>>: the output rows in the output's order, copied back in one piece.
    if (held.n == 0) return;
    const apgas::grid packing{{sad::sub_blocks, mb_w, held.n}, 128};
    q.async(apgas::cuda_kernel(packing, [=] APGAS_KERNEL(apgas::thread_block b) {
      const int s = b.block_idx().x, mb = b.block_idx().y, k = b.block_idx().z, first = first_of(s);
      const u16* src =
          sads.data() + (static_cast<long>(first) * mbs + (held.r[k] * mb_w + mb) * count_of(s) + s - first) * padded;
      u16* dst = packed.data() + ((static_cast<long>(k) * mb_w + mb) * sad::sub_blocks + s) * sad::positions;
      b.for_range(sad::positions, [&](int i) { dst[i] = src[i]; });
    }));
    q.async_copy(packed, 0, rows);
  });
  for (auto* a : {&d_ref, &d_cur, &padref, &sads, &packed}) apgas::free_remote_array(*a);
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = sad::usage(prog);
  return parboil::main(argc, argv, prog, usage.c_str(), sad::size_names, [](const parboil::options& o) {
    sad::frames f;
    if (!sad::load(o, f)) return 0;
    const std::vector<apgas::place> places = parboil::all_compute_places(o.cpu);
    parboil::timer timer;
    timer.start();
    const int np = static_cast<int>(places.size());
    std::vector<u16> out(6 * sad::row_values(f.mb_w()));
    apgas::finish([&] {
      for (int i = 0; i < np; ++i) {
        apgas::async([&, i] {  // place i: macroblock rows [r0, r1)
          const auto [r0, r1] = parboil::share(f.mb_h(), i, np);
          const apgas::place p = places[i];
          const int w = f.w, h = f.h, a = static_cast<int>(r0), b = static_cast<int>(r1);
          if (a == b) return;  // more places than macroblock rows
          const sad::held_rows held = sad::rows_held(f.mb_h(), a, b);
          const std::size_t n = held.n * sad::row_values(f.mb_w());
          const bool neighbours = held.n == 0 || held.slot[held.n - 1] - held.slot[0] == held.n - 1;
          if (p.parent() == apgas::here() && neighbours) {  // straight into their slots of the output
            search(p, w, h, a, b, f.ref, f.cur, std::span(out).subspan(held.slot[0] * sad::row_values(f.mb_w()), n));
            return;
          }
          const std::vector<u16> rows = apgas::at(
              p.parent(),
              [p, w, h, a, b, n](const std::vector<u16>& ref, const std::vector<u16>& cur) {
                std::vector<u16> rows(n);
                search(p, w, h, a, b, ref, cur, rows);
                return rows;
              },
              f.ref, f.cur);
          sad::place_rows(out, f.mb_w(), f.mb_h(), a, b, rows);  // each row in its slot of the output
        });
      }
    });
    timer.stop();
    if (!o.output.empty()) sad::write_output(o.output, f.mb_w(), out);
    const bool ok = sad::check(o, f, out, prog);
    return parboil::report(sad::name, sad::fields(f) + " " + parboil::places_field(o.cpu), timer.seconds(), o, ok);
  });
}
