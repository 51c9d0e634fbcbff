#pragma once
// sad: what apgas_parboil_sad, parboil_sad_native and parboil_sad_omp share — Parboil's H.264 full-pel motion search:
// the sizes, the frame files, the generator, the layout of the SAD array, the output of six macroblock rows, the
// serial reference and the exact check. No apgas and no CUDA here.
//
// The problem: a reference frame and a current frame, w x h pixels (multiples of 16). For every 4x4 block of the
// current frame and every search position (dx, dy) in -16..16 (33 x 33 = 1089 positions, position = (dy + 16) * 33 +
// dx + 16), the sum of absolute differences against the reference frame shifted by (dx, dy), reading the reference
// clamped to its edges (Parboil's texture with clamp addressing: the search window leaves the image). From these,
// by adding neighbours, the SADs of the larger sub-blocks of each 16x16 macroblock: H.264's seven block types,
// 41 sub-blocks per macroblock:
//   type 1: 16x16 (1 per macroblock), 2: 16x8 (2), 3: 8x16 (2), 4: 8x8 (4), 5: 8x4 (8), 6: 4x8 (8), 7: 4x4 (16).
// The SAD array (u16) holds, type by type, the sub-blocks of every macroblock, each 1096 values (1089 used, padded
// to a multiple of 4 for 8-byte stores): sub-block k of macroblock mb of type t at
// ((first[t] * mbs + mb * count[t] + k) * 1096). Sub-blocks are numbered row by row within the macroblock.
//
// Pixels are 8-bit luma stored as 16 bits (Parboil's frames): a 16x16 SAD is at most 256 * 255 = 65280, so the u16
// sums, and the kernels' additions of two u16 packed in a u32, never carry. Input pixels outside 0..255 are refused.
#include "parboil.hpp"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace sad {

inline constexpr const char* name = "sad";
inline constexpr int search_range = 16;
inline constexpr int dim = 2 * search_range + 1;  ///< 33 positions per row
inline constexpr int positions = dim * dim;       ///< MAX_POS, 1089
inline constexpr int padded = 1096;               ///< MAX_POS_PADDED
inline constexpr int sub_blocks = 41;
/// Sub-blocks per macroblock of block type t (1..7), and the first of type t, in macroblocks' worth of sub-blocks.
inline constexpr int count[8] = {0, 1, 2, 2, 4, 8, 8, 16};
inline constexpr int first[8] = {0, 0, 1, 3, 5, 9, 17, 25};

/// Where sub-block k of type t of macroblock mb starts in a SAD array of mbs macroblocks.
inline std::size_t offset(int t, int mbs, int mb, int k) {
  return (static_cast<std::size_t>(first[t]) * mbs + static_cast<std::size_t>(mb) * count[t] + k) * padded;
}

/// The size sets: a small one for tests, Parboil's default (QCIF) and large (1920 x 1072, Sintel frames' size).
inline std::array<int, 2> size_of(const std::string& name) {
  if (name == "small") return {96, 64};
  if (name == "large") return {1920, 1072};
  return {176, 144};  // "default", ""
}
inline const std::initializer_list<std::string_view> size_names = {"small", "default", "large"};

/// The usage text of a sad program.
inline std::string usage(const char* prog) {
  return std::string("usage: ") + prog +
         " [-i reference.bin,frame.bin] [-o OUT] [options]\n"
         "  sizes (--size): small (96 x 64), default (176 x 144, QCIF), large (1920 x 1072)\n" +
         parboil::common_usage;
}

struct frames {
  int w = 0, h = 0;
  std::vector<std::uint16_t> ref, cur;
  int mb_w() const { return w / 16; }
  int mb_h() const { return h / 16; }
};

// ---- generated frames: a textured background panning by (-2, +1) and a square object moving by (+5, +3) ----------
inline std::uint32_t hash(int x, int y, std::uint32_t seed) {
  std::uint32_t v = static_cast<std::uint32_t>(x) * 0x9e3779b1u ^ static_cast<std::uint32_t>(y) * 0x85ebca77u ^ seed;
  v ^= v >> 15;
  v *= 0x2c1b3c6du;
  v ^= v >> 12;
  v *= 0x297a2d39u;
  return v ^ (v >> 15);
}
/// Smooth noise in 0..255: random values on a lattice of `step` pixels, interpolated bilinearly (integers only).
inline int texture(int x, int y, int step, std::uint32_t seed) {
  const int i = (x >= 0 ? x : x - step + 1) / step, j = (y >= 0 ? y : y - step + 1) / step;
  const int fx = x - i * step, fy = y - j * step;
  const int a = static_cast<int>(hash(i, j, seed) & 255), b = static_cast<int>(hash(i + 1, j, seed) & 255);
  const int c = static_cast<int>(hash(i, j + 1, seed) & 255), d = static_cast<int>(hash(i + 1, j + 1, seed) & 255);
  return ((a * (step - fx) + b * fx) * (step - fy) + (c * (step - fx) + d * fx) * fy) / (step * step);
}
inline frames generate(int w, int h) {
  frames f;
  f.w = w;
  f.h = h;
  const int side = std::min(w, h) / 3, ox = w / 3, oy = h / 3;  // the object's place in the reference frame
  auto pixel = [&](int x, int y, int pan_x, int pan_y, int obj_x, int obj_y, int noise) {
    int v = (texture(x + pan_x, y + pan_y, 8, 11) + texture(x + pan_x, y + pan_y, 3, 12)) / 2;
    if (x >= obj_x && x < obj_x + side && y >= obj_y && y < obj_y + side) {
      v = 40 + texture(x - obj_x, y - obj_y, 5, 13) * 3 / 4;
    }
    return static_cast<std::uint16_t>(std::clamp(v + noise, 0, 255));
  };
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      f.ref.push_back(pixel(x, y, 0, 0, ox, oy, 0));
      f.cur.push_back(pixel(x, y, 2, -1, ox + 5, oy + 3, static_cast<int>(hash(x, y, 14) % 5) - 2));
    }
  }
  return f;
}

// ---- files: u16 width, u16 height, then width * height 16-bit pixels, little-endian -------------------------------
inline std::vector<std::uint16_t> read_frame(const std::string& path, int& w, int& h) {
  parboil::binary_file f(path);
  w = f.read<std::uint16_t>("the frame width");
  h = f.read<std::uint16_t>("the frame height");
  if (w == 0 || h < 32 || w % 16 != 0 || h % 16 != 0) {
    f.fail(0, "frame of " + std::to_string(w) + " x " + std::to_string(h) +
                  " pixels: expected a width and a height that are multiples of 16, the height at least 32");
  }
  const std::size_t at = f.offset();
  std::vector<std::int16_t> px = f.read_vector<std::int16_t>(static_cast<std::size_t>(w) * h, "pixels");
  f.expect_end();
  std::vector<std::uint16_t> v(px.size());
  for (std::size_t i = 0; i < px.size(); ++i) {
    if (px[i] < 0 || px[i] > 255) {
      f.fail(at + 2 * i, "pixel value " + std::to_string(px[i]) +
                             " outside 0..255 (8-bit luma stored as 16 bits: the 16-bit SADs must not overflow)");
    }
    v[i] = static_cast<std::uint16_t>(px[i]);
  }
  return v;
}
inline void write_frame(const std::string& path, int w, int h, const std::vector<std::uint16_t>& px) {
  parboil::output_file f(path, true);
  f.write(static_cast<std::uint16_t>(w));
  f.write(static_cast<std::uint16_t>(h));
  f.write(std::span<const std::uint16_t>(px));
  f.close();
}

/// The input the options ask for: read with -i, else generated (--size). With --write-input it writes the
/// generated frames and returns false (the program then exits with 0).
inline bool load(const parboil::options& o, frames& f) {
  parboil::expect_inputs(o, 2, "the reference frame and the current frame");
  if (!o.params.empty()) throw parboil::usage_error("sad takes no parameters after --");
  if (!o.inputs.empty()) {
    f.ref = read_frame(o.inputs[0], f.w, f.h);
    int w = 0, h = 0;
    f.cur = read_frame(o.inputs[1], w, h);
    if (w != f.w || h != f.h) {
      throw parboil::input_error("input file '" + o.inputs[1] + "': a frame of " + std::to_string(w) + " x " +
                                 std::to_string(h) + " pixels, but the reference frame '" + o.inputs[0] + "' is " +
                                 std::to_string(f.w) + " x " + std::to_string(f.h));
    }
    return true;
  }
  const auto [w, h] = size_of(o.size);
  f = generate(w, h);
  if (!o.write_inputs.empty()) {
    write_frame(o.write_inputs[0], f.w, f.h, f.ref);
    write_frame(o.write_inputs[1], f.w, f.h, f.cur);
    return false;
  }
  return true;
}

// ---- the output: six macroblock rows ------------------------------------------------------------------------------
/// The rows Parboil writes: the top two, the middle two, the bottom two (in that order: for frames of 2 or 3
/// macroblock rows, 32 or 48 pixels high, rows repeat and do not increase).
inline std::array<int, 6> output_rows(int mb_h) { return {0, 1, mb_h / 2 - 1, mb_h / 2, mb_h - 2, mb_h - 1}; }
/// Values of one output row: per macroblock, types 1..7, their sub-blocks, 1089 SADs each.
inline std::size_t row_values(int mb_w) { return static_cast<std::size_t>(mb_w) * sub_blocks * positions; }

/// Output row: macroblocks [mb, mb + mb_w) of a SAD array of mbs macroblocks, in the output's order, into out.
inline void extract_row(const std::uint16_t* sads, int mbs, int mb, int mb_w, std::uint16_t* out) {
  for (int m = mb; m < mb + mb_w; ++m) {
    for (int t = 1; t <= 7; ++t) {
      for (int k = 0; k < count[t]; ++k) {
        const std::uint16_t* s = sads + offset(t, mbs, m, k);
        out = std::copy(s, s + positions, out);
      }
    }
  }
}

/// The six output rows (local indices) a part of the frame holds, for the kernel that packs them: rows [r0, r1) of
/// the frame; n of the six fall in it, r[0..n) their indices counted from r0, slot[0..n) their places among the six.
struct held_rows {
  int n = 0;
  int r[6] = {};
  int slot[6] = {};
};
inline held_rows rows_held(int mb_h, int r0, int r1) {
  held_rows h;
  const auto rows = output_rows(mb_h);
  for (int k = 0; k < 6; ++k) {
    if (rows[k] >= r0 && rows[k] < r1) {
      h.r[h.n] = rows[k] - r0;
      h.slot[h.n++] = k;
    }
  }
  return h;
}
/// The output rows a part of rows [r0, r1) returned (rows_held's, packed in that order) put in their slots of out.
inline void place_rows(std::vector<std::uint16_t>& out, int mb_w, int mb_h, int r0, int r1,
                       const std::vector<std::uint16_t>& rows) {
  const held_rows h = rows_held(mb_h, r0, r1);
  const std::size_t n = row_values(mb_w);
  for (int k = 0; k < h.n; ++k) std::copy_n(rows.begin() + k * n, n, out.begin() + h.slot[k] * n);
}

/// Parboil's output file: u32 (6 * mb_w), u32 0, then the six rows (6 * row_values(mb_w) u16).
inline void write_output(const std::string& path, int mb_w, const std::vector<std::uint16_t>& out) {
  parboil::output_file f(path, true);
  f.write(static_cast<std::uint32_t>(6 * mb_w));
  f.write(static_cast<std::uint32_t>(0));
  f.write(std::span<const std::uint16_t>(out));
  f.close();
}
inline std::vector<std::uint16_t> read_output(const std::string& path, int mb_w) {
  parboil::binary_file f(path);
  const auto n = f.read<std::uint32_t>("the number of macroblocks");
  if (n != static_cast<std::uint32_t>(6 * mb_w)) {
    f.fail(0, std::to_string(n) + " macroblocks, expected 6 rows of " + std::to_string(mb_w) + " for these frames");
  }
  if (f.read<std::uint32_t>("a zero word") != 0) f.fail(4, "expected a zero word");
  std::vector<std::uint16_t> v = f.read_vector<std::uint16_t>(6 * row_values(mb_w), "SADs");
  f.expect_end();
  return v;
}

// ---- the serial reference, on the six rows the check compares ------------------------------------------------------
/// The SADs of the output rows, straight from the definition (clamped reads, then sums of neighbouring sub-blocks),
/// for the six output rows only (the check compares nothing else).
inline std::vector<std::uint16_t> reference(const frames& f) {
  const int w = f.w, h = f.h, mb_w = f.mb_w();
  std::vector<std::uint16_t> out(6 * row_values(mb_w));
  std::uint16_t* o = out.data();
  std::vector<std::uint16_t> s(static_cast<std::size_t>(sub_blocks) * positions);  // one macroblock, output order
  auto sb = [&](int t, int k) { return s.data() + static_cast<std::size_t>(first[t] + k) * positions; };
  auto add = [&](int t, int k, int ta, int a, int b) {
    for (int p = 0; p < positions; ++p) sb(t, k)[p] = static_cast<std::uint16_t>(sb(ta, a)[p] + sb(ta, b)[p]);
  };
  for (const int row : output_rows(f.mb_h())) {
    for (int mb = 0; mb < mb_w; ++mb) {
      for (int k = 0; k < 16; ++k) {
        const int x0 = 16 * mb + 4 * (k % 4), y0 = 16 * row + 4 * (k / 4);
        for (int p = 0; p < positions; ++p) {
          const int dx = p % dim - search_range, dy = p / dim - search_range;
          int v = 0;
          for (int y = 0; y < 4; ++y) {
            for (int x = 0; x < 4; ++x) {
              const int rx = std::clamp(x0 + x + dx, 0, w - 1), ry = std::clamp(y0 + y + dy, 0, h - 1);
              v += std::abs(int{f.cur[static_cast<std::size_t>(y0 + y) * w + x0 + x]} -
                            int{f.ref[static_cast<std::size_t>(ry) * w + rx]});
            }
          }
          sb(7, k)[p] = static_cast<std::uint16_t>(v);
        }
      }
      for (int k = 0; k < 8; ++k) add(6, k, 7, 8 * (k / 4) + k % 4, 8 * (k / 4) + k % 4 + 4);  // 4x8: 4 wide, 8 tall
      for (int k = 0; k < 8; ++k) add(5, k, 7, 2 * k, 2 * k + 1);                              // 8x4
      for (int k = 0; k < 4; ++k) add(4, k, 5, 4 * (k / 2) + k % 2, 4 * (k / 2) + k % 2 + 2);  // 8x8
      for (int k = 0; k < 2; ++k) add(3, k, 4, k, k + 2);                                      // 8x16
      for (int k = 0; k < 2; ++k) add(2, k, 4, 2 * k, 2 * k + 1);                              // 16x8
      add(1, 0, 2, 0, 1);                                                                      // 16x16
      o = std::copy(s.begin(), s.end(), o);
    }
  }
  return out;
}

/// The check: every SAD of the six rows equal (Parboil's rule), against --check FILE or the serial reference.
inline bool check(const parboil::options& o, const frames& f, const std::vector<std::uint16_t>& got, const char* prog) {
  if (!o.check) return true;
  const bool from_file = !o.check_file.empty();
  const std::vector<std::uint16_t> ref = from_file ? read_output(o.check_file, f.mb_w()) : reference(f);
  parboil::check_result r;
  const auto rows = output_rows(f.mb_h());
  const std::size_t per_mb = static_cast<std::size_t>(sub_blocks) * positions;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    r.expect(ref[i] == got[i], [&] {
      const std::size_t mb = i / per_mb, in_mb = i % per_mb / positions;
      int t = 7;
      while (first[t] > static_cast<int>(in_mb)) --t;
      return "row " + std::to_string(rows[mb / f.mb_w()]) + ", macroblock " + std::to_string(mb % f.mb_w()) +
             ", block type " + std::to_string(t) + " sub-block " + std::to_string(in_mb - first[t]) + ", position " +
             std::to_string(i % positions) + ": " + std::to_string(got[i]) + ", expected " + std::to_string(ref[i]);
    });
  }
  r.print(prog, from_file ? o.check_file.c_str() : "the serial reference");
  return r.ok();
}

inline std::string fields(const frames& f) { return "frame=" + std::to_string(f.w) + "x" + std::to_string(f.h); }

}  // namespace sad
