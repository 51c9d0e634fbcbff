// parboil_sad_omp: the OpenMP baseline of apgas_parboil_sad — the same SAD array computed the way one would for a
// CPU: the reference frame padded by 16 edge pixels once (the clamp-to-edge reads), then per 4x4 block (a static
// schedule: every block is the same work) the 33 positions of a search row at once, innermost and vectorised; then
// per macroblock the larger sub-blocks as sums of whole 1089-value rows; the six output rows taken out at the end.
#include "sad.hpp"

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  constexpr const char* prog = "parboil_sad_omp";
  using u16 = std::uint16_t;
  static const std::string usage = sad::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, sad::size_names);
    sad::frames f;
    if (!sad::load(o, f)) return 0;
    parboil::timer timer;
    timer.start();
    constexpr int pad = sad::search_range, dim = sad::dim;
    const int w = f.w, h = f.h, mb_w = f.mb_w(), mbs = mb_w * f.mb_h(), W = w + 2 * pad, H = h + 2 * pad;
    std::vector<u16> padref(static_cast<std::size_t>(W) * H);
    std::vector<u16> sads(static_cast<std::size_t>(mbs) * sad::sub_blocks * sad::padded);
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (int y = 0; y < H; ++y) {
        const u16* src = f.ref.data() + static_cast<std::size_t>(std::clamp(y - pad, 0, h - 1)) * w;
        for (int x = 0; x < W; ++x) padref[static_cast<std::size_t>(y) * W + x] = src[std::clamp(x - pad, 0, w - 1)];
      }
#pragma omp for collapse(2) schedule(static)
      for (int by = 0; by < h / 4; ++by) {
        for (int bx = 0; bx < w / 4; ++bx) {
          const int x0 = 4 * bx, y0 = 4 * by;
          u16* out = sads.data() + sad::offset(7, mbs, (by / 4) * mb_w + bx / 4, 4 * (by % 4) + bx % 4);
          for (int py = 0; py < dim; ++py) {  // search row dy = py - 16: its 33 positions at once
            int s[dim] = {};
            for (int y = 0; y < 4; ++y) {
              const u16* r = padref.data() + static_cast<std::size_t>(y0 + py + y) * W + x0;
              for (int x = 0; x < 4; ++x) {
                const int c = f.cur[static_cast<std::size_t>(y0 + y) * w + x0 + x];
                for (int px = 0; px < dim; ++px) s[px] += std::abs(r[px + x] - c);
              }
            }
            for (int px = 0; px < dim; ++px) out[py * dim + px] = static_cast<u16>(s[px]);
          }
          std::fill(out + sad::positions, out + sad::padded, u16{0});
        }
      }
      // Larger sub-blocks: sums of two smaller ones, position by position.
      auto add = [&](int mb, int t, int k, int ta, int a, int b) {
        u16* o = sads.data() + sad::offset(t, mbs, mb, k);
        const u16* x = sads.data() + sad::offset(ta, mbs, mb, a);
        const u16* y = sads.data() + sad::offset(ta, mbs, mb, b);
        for (int p = 0; p < sad::padded; ++p) o[p] = static_cast<u16>(x[p] + y[p]);
      };
#pragma omp for schedule(static)
      for (int mb = 0; mb < mbs; ++mb) {
        for (int k = 0; k < 8; ++k) add(mb, 6, k, 7, 8 * (k / 4) + k % 4, 8 * (k / 4) + k % 4 + 4);  // 4 wide, 8 tall
        for (int k = 0; k < 8; ++k) add(mb, 5, k, 7, 2 * k, 2 * k + 1);                              // 8 wide, 4 tall
        for (int k = 0; k < 4; ++k) add(mb, 4, k, 5, 4 * (k / 2) + k % 2, 4 * (k / 2) + k % 2 + 2);  // 8x8
        for (int k = 0; k < 2; ++k) add(mb, 3, k, 4, k, k + 2);                                      // 8x16
        for (int k = 0; k < 2; ++k) add(mb, 2, k, 4, 2 * k, 2 * k + 1);                              // 16x8
        add(mb, 1, 0, 2, 0, 1);                                                                      // 16x16
      }
    }
    std::vector<u16> out(6 * sad::row_values(mb_w));
    const auto rows = sad::output_rows(f.mb_h());
    for (int k = 0; k < 6; ++k)
      sad::extract_row(sads.data(), mbs, rows[k] * mb_w, mb_w, out.data() + k * sad::row_values(mb_w));
    timer.stop();
    if (!o.output.empty()) sad::write_output(o.output, mb_w, out);
    const bool ok = sad::check(o, f, out, prog);
    return parboil::report(sad::name, sad::fields(f) + " threads=" + std::to_string(omp_get_max_threads()),
                           timer.seconds(), o, ok);
  });
}
