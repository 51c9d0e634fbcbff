// apgas_parboil_sad: Parboil's sad (H.264 full-pel motion search, sad.hpp) with apgas kernel closures.
//
// The kernels port Parboil's optimised CUDA version (src/cuda/sad4.cu, largerBlocks.cu), in one in-order queue per
// place, with 2-D grids:
//   pad_reference       Parboil read the reference frame through a 2-D texture with clamp addressing (texture
//                       references were removed in CUDA 12): here a padded copy whose borders repeat the edge pixels,
//                       made once with explicit clamp-to-edge addressing, so the search reads it unclamped.
//   mb_sad_calc         one block per 4x4 block of the frame: the current 4x4 block in shared memory, a barrier,
//                       every thread three search positions that share their reference fetches (Parboil: 61 threads x
//                       18 positions in steps of three horizontal neighbours; here 33 x 11 threads, three vertical
//                       neighbours, so that neighbouring threads read neighbouring pixels), the SADs staged in shared
//                       memory, a barrier, then copied out in 8-byte words.
//   larger_sad_calc_8   4x8, 8x4 and 8x8 SADs from the 4x4 ones, adding u16 pairs packed in u32;
//   larger_sad_calc_16  8x16, 16x8 and 16x16 from the 8x8 ones.
// Only the six macroblock rows of the output come back from each place (Parboil copied the whole SAD array).
// Places: the macroblock rows are split over the host places, and each host's share over its GPU places or its CPU
// place.
#include "sad.hpp"

#include "parboil_apgas.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#if defined(__CUDA_ARCH__)
#define UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)  // nvcc's host pass: cudafe++ rejects GCC's pragma and g++ nvcc's
#define UNROLL
#else
#define UNROLL _Pragma("GCC unroll 4")
#endif

namespace {

constexpr const char* prog = "apgas_parboil_sad";
using u16 = std::uint16_t;
using sad::dim;
using sad::padded;
constexpr int pairs = padded / 2;  // u16 pairs (u32) per sub-block
constexpr int pad = sad::search_range;

APGAS_KERNEL inline int clamp_to(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }
APGAS_KERNEL inline int absdiff(int a, int b) { return a > b ? a - b : b - a; }

// One place's part: macroblock rows [r0, r1) of a w x h frame pair.
struct part {
  int w, h, r0, r1;
  APGAS_KERNEL int mb_w() const { return w / 16; }
  APGAS_KERNEL int mbs() const { return mb_w() * (r1 - r0); }
  APGAS_KERNEL int pw() const { return w + 2 * pad; }  // the padded reference frame's width
};

// The padded reference frame's rows the part reads: pad[y][x] = ref[clamp(y - 16)][clamp(x - 16)].
void pad_reference(apgas::in_order_queue& q, part pt, apgas::remote_array<u16> ref, apgas::remote_array<u16> padref) {
  q.async(apgas::cuda_kernel(apgas::grid{16 * (pt.r1 - pt.r0) + 2 * pad, 128}, [=] APGAS_KERNEL (apgas::thread_block b) {
    const int y = 16 * pt.r0 + static_cast<int>(b.block());
    const u16* src = ref.data() + static_cast<long>(clamp_to(y - pad, pt.h - 1)) * pt.w;
    u16* dst = padref.data() + static_cast<long>(y) * pt.pw();
    for (int x0 = 0; x0 < pt.pw(); x0 += 128) {
      b.for_threads([&](apgas::thread_index t) {
        if (x0 + t.x < pt.pw()) dst[x0 + t.x] = src[clamp_to(x0 + t.x - pad, pt.w - 1)];
      });
    }
  }));
}

// mb_sad_calc<<<dim3(w / 4, h / 4), dim3(33, 11)>>>: the 1089 SADs of every 4x4 block (type 7).
void mb_sad_calc(apgas::in_order_queue& q, part pt, apgas::remote_array<u16> cur, apgas::remote_array<u16> padref,
                 apgas::remote_array<u16> sads) {
  q.async(apgas::cuda_kernel(
      apgas::grid{{pt.w / 4, 4 * (pt.r1 - pt.r0)}, {dim, dim / 3}},
      apgas::shared_uninit<u16, 16>(),       // frame_loc: the current 4x4 block
      apgas::shared_uninit<u16, padded>(),   // sad_loc: its SADs
      [=] APGAS_KERNEL (apgas::thread_block b, apgas::shared_span<u16, 16> blk, apgas::shared_span<u16, padded> sad_loc) {
        const int bx = b.block_idx().x, by = b.block_idx().y;  // by: from the part's first row
        const int x0 = 4 * bx, y0 = 16 * pt.r0 + 4 * by;       // the 4x4 block's pixels
        const int W = pt.pw();
        const u16* R = padref.data();
        const u16* C = cur.data();
        b.for_threads([&](apgas::thread_index t) {
          if (t.linear < 16) blk[t.linear] = C[static_cast<long>(y0 + t.linear / 4) * pt.w + x0 + t.linear % 4];
          if (t.linear >= 16 && t.linear < 16 + padded - dim * dim) sad_loc[dim * dim + t.linear - 16] = 0;
        });
        b.sync();
        b.for_threads([&](apgas::thread_index t) {  // positions (dx, dy) = (t.x, 3 t.y + 0..2) - 16
          const u16* r = R + static_cast<long>(y0 + 3 * t.y) * W + x0 + t.x;  // padded: pixel (x0 + dx, y0 + dy)
          int s0 = 0, s1 = 0, s2 = 0;
          UNROLL for (int y = 0; y < 4; ++y) {
            UNROLL for (int x = 0; x < 4; ++x) {
              const int c = blk[4 * y + x];
              s0 += absdiff(r[y * W + x], c);
              s1 += absdiff(r[(y + 1) * W + x], c);
              s2 += absdiff(r[(y + 2) * W + x], c);
            }
          }
          const int p = 3 * t.y * dim + t.x;
          sad_loc[p] = static_cast<u16>(s0);
          sad_loc[p + dim] = static_cast<u16>(s1);
          sad_loc[p + 2 * dim] = static_cast<u16>(s2);
        });
        b.sync();
        // Out in 8-byte words, to sub-block (bx % 4, by % 4) of the macroblock's 4x4 SADs (type 7: after 25 of each).
        const long mb = (by / 4) * (pt.w / 16) + bx / 4;
        auto* out = reinterpret_cast<unsigned long long*>(
            sads.data() + (25L * pt.mbs() + mb * 16 + 4 * (by % 4) + bx % 4) * padded);
        b.for_threads([&](apgas::thread_index t) {
          if (t.linear >= padded / 4) return;
          const int i = 4 * t.linear;
          out[t.linear] = sad_loc[i] | static_cast<unsigned long long>(sad_loc[i + 1]) << 16 |
                          static_cast<unsigned long long>(sad_loc[i + 2]) << 32 |
                          static_cast<unsigned long long>(sad_loc[i + 3]) << 48;
        });
      }));
}

// larger_sad_calc_8<<<dim3(mb_w, mb_h), ...>>>: per macroblock and 8x8 block (t.y), the 4x8, 8x4 and 8x8 SADs of
// positions 2i, 2i + 1 (u32 i) from its four 4x4 ones. Sub-block offsets in u32: (first * mbs + mb * count + k) * 548.
void larger_sad_calc_8(apgas::in_order_queue& q, part pt, apgas::remote_array<u16> sads) {
  q.async(apgas::cuda_kernel(apgas::grid{{pt.mb_w(), pt.r1 - pt.r0}, {pairs / 4, 4}}, [=] APGAS_KERNEL (apgas::thread_block b) {
    const long mbs = pt.mbs(), mb = b.block();
    auto* s = reinterpret_cast<unsigned*>(sads.data());
    for (int i0 = 0; i0 < pairs; i0 += pairs / 4) {
      b.for_threads([&](apgas::thread_index t) {
        const long i = i0 + t.x, tx = t.y & 1, ty = t.y >> 1;
        const unsigned* in = s + (25 * mbs + mb * 16 + 8 * ty + 2 * tx) * pairs + i;
        const unsigned i00 = in[0], i01 = in[pairs], i10 = in[4 * pairs], i11 = in[5 * pairs];
        unsigned* o6 = s + (17 * mbs + mb * 8 + 4 * ty + 2 * tx) * pairs + i;  // 4 wide, 8 tall
        o6[0] = i00 + i10;
        o6[pairs] = i01 + i11;
        unsigned* o5 = s + (9 * mbs + mb * 8 + 4 * ty + tx) * pairs + i;  // 8 wide, 4 tall
        o5[0] = i00 + i01;
        o5[2 * pairs] = i10 + i11;
        s[(5 * mbs + mb * 4 + 2 * ty + tx) * pairs + i] = (i00 + i01) + (i10 + i11);  // 8x8
      });
    }
  }));
}

// larger_sad_calc_16: per macroblock, the 8x16, 16x8 and 16x16 SADs from its four 8x8 ones.
void larger_sad_calc_16(apgas::in_order_queue& q, part pt, apgas::remote_array<u16> sads) {
  q.async(apgas::cuda_kernel(apgas::grid{{pt.mb_w(), pt.r1 - pt.r0}, pairs / 4}, [=] APGAS_KERNEL (apgas::thread_block b) {
    const long mbs = pt.mbs(), mb = b.block();
    auto* s = reinterpret_cast<unsigned*>(sads.data());
    for (int i0 = 0; i0 < pairs; i0 += pairs / 4) {
      b.for_threads([&](apgas::thread_index t) {
        const long i = i0 + t.x;
        const unsigned* in = s + (5 * mbs + mb * 4) * pairs + i;
        const unsigned i00 = in[0], i01 = in[pairs], i10 = in[2 * pairs], i11 = in[3 * pairs];
        unsigned* o3 = s + (3 * mbs + mb * 2) * pairs + i;  // 8 wide, 16 tall
        o3[0] = i00 + i10;
        o3[pairs] = i01 + i11;
        unsigned* o2 = s + (mbs + mb * 2) * pairs + i;  // 16 wide, 8 tall
        o2[0] = i00 + i01;
        o2[pairs] = i10 + i11;
        s[mb * pairs + i] = (i00 + i01) + (i10 + i11);  // 16x16
      });
    }
  }));
}

using rows_t = std::vector<std::vector<u16>>;  // the six output rows (empty: held by another place)

// At a host place: macroblock rows [r0, r1), split over its compute places. Returns the output rows among them.
rows_t run_host(bool cpu, int w, int h, int r0, int r1, const std::vector<u16>& ref, const std::vector<u16>& cur) {
  const auto places = parboil::compute_places(cpu);
  const int np = static_cast<int>(places.size()), mb_w = w / 16;
  const auto rows = sad::output_rows(h / 16);
  struct on_place {
    part pt{};
    apgas::remote_array<u16> ref, cur, padref, sads;
  };
  std::vector<on_place> ps(places.size());
  rows_t got(6);  // per output row: its sub-blocks type by type (the SAD array's layout for one row), padded
  apgas::finish([&] {
    for (int i = 0; i < np; ++i) {
      const auto [a, b] = parboil::share(r1 - r0, i, np);
      on_place& p = ps[i];
      p.pt = part{w, h, r0 + static_cast<int>(a), r0 + static_cast<int>(b)};
      if (a == b) continue;
      p.ref = apgas::make_remote_array(places[i], std::span<const u16>(ref));
      p.cur = apgas::make_remote_array(places[i], std::span<const u16>(cur));
      p.padref = apgas::make_remote_array<u16>(places[i], static_cast<std::size_t>(p.pt.pw()) * (h + 2 * pad));
      p.sads = apgas::make_remote_array<u16>(places[i], static_cast<std::size_t>(p.pt.mbs()) * sad::sub_blocks * padded);
      auto q = apgas::in_order(places[i]);
      pad_reference(q, p.pt, p.ref, p.padref);
      mb_sad_calc(q, p.pt, p.cur, p.padref, p.sads);
      larger_sad_calc_8(q, p.pt, p.sads);
      larger_sad_calc_16(q, p.pt, p.sads);
      for (int k = 0; k < 6; ++k) {  // copy back the output rows: per block type one contiguous range
        if (rows[k] < p.pt.r0 || rows[k] >= p.pt.r1) continue;
        got[k].resize(static_cast<std::size_t>(mb_w) * sad::sub_blocks * padded);
        for (int t = 1; t <= 7; ++t) {
          q.async_copy(p.sads, sad::offset(t, p.pt.mbs(), (rows[k] - p.pt.r0) * mb_w, 0),
                       std::span<u16>(got[k]).subspan(sad::offset(t, mb_w, 0, 0),
                                                      static_cast<std::size_t>(mb_w) * sad::count[t] * padded));
        }
      }
    }
  });
  for (on_place& p : ps) {
    for (auto* a : {&p.ref, &p.cur, &p.padref, &p.sads}) apgas::free_remote_array(*a);
  }
  rows_t out(6);
  for (int k = 0; k < 6; ++k) {
    if (got[k].empty()) continue;
    out[k].resize(sad::row_values(mb_w));
    sad::extract_row(got[k].data(), mb_w, 0, mb_w, out[k].data());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = std::string(sad::usage) + parboil::common_usage;
  return parboil::main(argc, argv, prog, usage.c_str(), sad::size_names, [](const parboil::options& o) {
    sad::frames f;
    if (!sad::load(o, f)) return 0;
    parboil::timer timer;
    timer.start();
    const auto hosts = apgas::places();
    std::vector<rows_t> parts(hosts.size());
    apgas::finish([&] {
      for (std::size_t i = 0; i < hosts.size(); ++i) {
        apgas::async([&, i] {  // host i: macroblock rows [r0, r1)
          const auto [r0, r1] = parboil::share(f.mb_h(), static_cast<int>(i), static_cast<int>(hosts.size()));
          const bool cpu = o.cpu;
          const int w = f.w, h = f.h, a = static_cast<int>(r0), b = static_cast<int>(r1);
          parts[i] = apgas::at(
              hosts[i],
              [cpu, w, h, a, b](const std::vector<u16>& ref, const std::vector<u16>& cur) {
                return run_host(cpu, w, h, a, b, ref, cur);
              },
              f.ref, f.cur);
        });
      }
    });
    std::vector<u16> out;
    for (int k = 0; k < 6; ++k) {
      for (const rows_t& p : parts) {
        if (!p[k].empty()) {
          out.insert(out.end(), p[k].begin(), p[k].end());
          break;
        }
      }
    }
    timer.stop();
    if (!o.output.empty()) sad::write_output(o.output, f.mb_w(), out);
    const bool ok = sad::check(o, f, out, prog);
    return parboil::report(sad::name, sad::fields(f) + " " + parboil::places_field(o.cpu), timer.seconds(), o, ok);
  });
}
