// parboil_sad_native: the native CUDA baseline of apgas_parboil_sad — Parboil's optimised sad (src/cuda) in CUDA
// runtime code on one GPU, with the same kernels as the apgas version:
//   pad_reference       the reference frame padded by 16 pixels of its edge pixels (explicit clamp-to-edge
//                       addressing, once), in place of Parboil's 2-D texture with clamp addressing (texture references
//                       were removed in CUDA 12);
//   mb_sad_calc         one block per 4x4 block: the current block in shared memory, 33 x 11 threads of three
//                       vertically neighbouring search positions each, the SADs staged in shared memory and copied out
//                       in 8-byte words;
//   larger_sad_calc_8   4x8, 8x4, 8x8 SADs from the 4x4 ones (u16 pairs packed in u32);
//   larger_sad_calc_16  8x16, 16x8, 16x16 from the 8x8 ones;
//   pack_rows           the six output macroblock rows gathered in the output's order, copied back in one piece
//                       (Parboil copied the whole SAD array back).
// Input, output and check are sad.hpp's.
#include "sad.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char* prog = "parboil_sad_native";
using u16 = std::uint16_t;
using sad::dim;
using sad::padded;
constexpr int pairs = padded / 2;
constexpr int pad = sad::search_range;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__device__ int clamp_to(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }
__device__ int absdiff(int a, int b) { return a > b ? a - b : b - a; }
// Sub-block s (0..40, the output's order) of a macroblock: its block type's first sub-block, and how many it has.
__device__ int first_of(int s) { return s < 1 ? 0 : s < 3 ? 1 : s < 5 ? 3 : s < 9 ? 5 : s < 17 ? 9 : s < 25 ? 17 : 25; }
__device__ int count_of(int s) { return s < 1 ? 1 : s < 5 ? 2 : s < 9 ? 4 : s < 25 ? 8 : 16; }

// One block per padded row: padref[y][x] = ref[clamp(y - 16)][clamp(x - 16)], W = w + 32.
__global__ void pad_reference(const u16* __restrict__ ref, u16* __restrict__ padref, int w, int h) {
  const int y = blockIdx.x, W = w + 2 * pad;
  const u16* src = ref + static_cast<long>(clamp_to(y - pad, h - 1)) * w;
  for (int x = threadIdx.x; x < W; x += blockDim.x)
    padref[static_cast<long>(y) * W + x] = src[clamp_to(x - pad, w - 1)];
}

// <<<dim3(w / 4, h / 4), dim3(33, 11)>>>: the 1089 SADs of a 4x4 block (type 7).
__global__ void mb_sad_calc(const u16* __restrict__ cur, const u16* __restrict__ padref, u16* __restrict__ sads, int w,
                            int mbs) {
  __shared__ u16 blk[16];
  __shared__ __align__(8) u16 sad_loc[padded];
  const int bx = blockIdx.x, by = blockIdx.y, x0 = 4 * bx, y0 = 4 * by, W = w + 2 * pad;
  const int linear = threadIdx.y * blockDim.x + threadIdx.x;
  if (linear < 16) blk[linear] = cur[static_cast<long>(y0 + linear / 4) * w + x0 + linear % 4];
  if (linear >= 16 && linear < 16 + padded - dim * dim) sad_loc[dim * dim + linear - 16] = 0;
  __syncthreads();
  const u16* r = padref + static_cast<long>(y0 + 3 * threadIdx.y) * W + x0 + threadIdx.x;
  int s0 = 0, s1 = 0, s2 = 0;
#pragma unroll
  for (int y = 0; y < 4; ++y) {
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int c = blk[4 * y + x];
      s0 += absdiff(r[y * W + x], c);
      s1 += absdiff(r[(y + 1) * W + x], c);
      s2 += absdiff(r[(y + 2) * W + x], c);
    }
  }
  const int p = 3 * threadIdx.y * dim + threadIdx.x;
  sad_loc[p] = s0;
  sad_loc[p + dim] = s1;
  sad_loc[p + 2 * dim] = s2;
  __syncthreads();
  const long mb = (by / 4) * (w / 16) + bx / 4;
  auto* out = reinterpret_cast<unsigned long long*>(sads + (25L * mbs + mb * 16 + 4 * (by % 4) + bx % 4) * padded);
  if (linear < padded / 4) {
    const int i = 4 * linear;
    out[linear] = sad_loc[i] | static_cast<unsigned long long>(sad_loc[i + 1]) << 16 |
                  static_cast<unsigned long long>(sad_loc[i + 2]) << 32 |
                  static_cast<unsigned long long>(sad_loc[i + 3]) << 48;
  }
}

// <<<dim3(mb_w, mb_h), dim3(137, 4)>>>: per macroblock and 8x8 block (threadIdx.y), the 4x8, 8x4, 8x8 SADs.
__global__ void larger_sad_calc_8(u16* sads_u16, int mbs) {
  auto* s = reinterpret_cast<unsigned*>(sads_u16);
  const long mb = blockIdx.y * gridDim.x + blockIdx.x, tx = threadIdx.y & 1, ty = threadIdx.y >> 1;
  for (long i = threadIdx.x; i < pairs; i += blockDim.x) {
    const unsigned* in = s + (25L * mbs + mb * 16 + 8 * ty + 2 * tx) * pairs + i;
    const unsigned i00 = in[0], i01 = in[pairs], i10 = in[4 * pairs], i11 = in[5 * pairs];
    unsigned* o6 = s + (17L * mbs + mb * 8 + 4 * ty + 2 * tx) * pairs + i;
    o6[0] = i00 + i10;
    o6[pairs] = i01 + i11;
    unsigned* o5 = s + (9L * mbs + mb * 8 + 4 * ty + tx) * pairs + i;
    o5[0] = i00 + i01;
    o5[2 * pairs] = i10 + i11;
    s[(5L * mbs + mb * 4 + 2 * ty + tx) * pairs + i] = (i00 + i01) + (i10 + i11);
  }
}

// <<<dim3(mb_w, mb_h), 137>>>: per macroblock, the 8x16, 16x8, 16x16 SADs from the 8x8 ones.
__global__ void larger_sad_calc_16(u16* sads_u16, int mbs) {
  auto* s = reinterpret_cast<unsigned*>(sads_u16);
  const long mb = blockIdx.y * gridDim.x + blockIdx.x;
  for (long i = threadIdx.x; i < pairs; i += blockDim.x) {
    const unsigned* in = s + (5L * mbs + mb * 4) * pairs + i;
    const unsigned i00 = in[0], i01 = in[pairs], i10 = in[2 * pairs], i11 = in[3 * pairs];
    unsigned* o3 = s + (3L * mbs + mb * 2) * pairs + i;
    o3[0] = i00 + i10;
    o3[pairs] = i01 + i11;
    unsigned* o2 = s + (1L * mbs + mb * 2) * pairs + i;
    o2[0] = i00 + i01;
    o2[pairs] = i10 + i11;
    s[mb * pairs + i] = (i00 + i01) + (i10 + i11);
  }
}

// <<<dim3(41, mb_w, 6), 128>>>: sub-block blockIdx.x of macroblock blockIdx.y of output row blockIdx.z, packed.
__global__ void pack_rows(const u16* __restrict__ sads, u16* __restrict__ out, int mbs, sad::held_rows rows) {
  const int s = blockIdx.x, mb = blockIdx.y, k = blockIdx.z, mb_w = gridDim.y, first = first_of(s);
  const u16* src = sads + (static_cast<long>(first) * mbs + (rows.r[k] * mb_w + mb) * count_of(s) + s - first) * padded;
  u16* dst = out + ((static_cast<long>(k) * mb_w + mb) * sad::sub_blocks + s) * sad::positions;
  for (int i = threadIdx.x; i < sad::positions; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

int main(int argc, char** argv) {
  static const std::string usage = sad::usage(prog);
  return parboil::guarded(prog, usage.c_str(), [&] {
    const parboil::options o = parboil::parse(argc, argv, sad::size_names);
    sad::frames f;
    if (!sad::load(o, f)) return 0;
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "%s: no CUDA GPU (%s)\n", prog, e != cudaSuccess ? cudaGetErrorString(e) : "no device");
      return 0;
    }
    check(cudaFree(nullptr), "cudaFree (context creation)");
    parboil::timer timer;
    timer.start();
    const int mb_w = f.mb_w(), mb_h = f.mb_h(), mbs = mb_w * mb_h, W = f.w + 2 * pad, H = f.h + 2 * pad;
    const std::size_t frame_bytes = f.ref.size() * sizeof(u16);
    u16 *d_ref = nullptr, *d_cur = nullptr, *d_pad = nullptr, *d_sads = nullptr;
    check(cudaMalloc(&d_ref, frame_bytes), "cudaMalloc");
    check(cudaMalloc(&d_cur, frame_bytes), "cudaMalloc");
    check(cudaMalloc(&d_pad, static_cast<std::size_t>(W) * H * sizeof(u16)), "cudaMalloc");
    check(cudaMalloc(&d_sads, static_cast<std::size_t>(mbs) * sad::sub_blocks * padded * sizeof(u16)), "cudaMalloc");
    check(cudaMemcpy(d_ref, f.ref.data(), frame_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(d_cur, f.cur.data(), frame_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    pad_reference<<<H, 128>>>(d_ref, d_pad, f.w, f.h);
    check(cudaGetLastError(), "pad_reference launch");
    mb_sad_calc<<<dim3(f.w / 4, f.h / 4), dim3(dim, dim / 3)>>>(d_cur, d_pad, d_sads, f.w, mbs);
    check(cudaGetLastError(), "mb_sad_calc launch");
    larger_sad_calc_8<<<dim3(mb_w, mb_h), dim3(pairs / 4, 4)>>>(d_sads, mbs);
    check(cudaGetLastError(), "larger_sad_calc_8 launch");
    larger_sad_calc_16<<<dim3(mb_w, mb_h), pairs / 4>>>(d_sads, mbs);
    check(cudaGetLastError(), "larger_sad_calc_16 launch");
    std::vector<u16> out(6 * sad::row_values(mb_w));
    u16* d_out = nullptr;
    check(cudaMalloc(&d_out, out.size() * sizeof(u16)), "cudaMalloc");
    pack_rows<<<dim3(sad::sub_blocks, mb_w, 6), 128>>>(d_sads, d_out, mbs, sad::rows_held(mb_h, 0, mb_h));
    check(cudaGetLastError(), "pack_rows launch");
    check(cudaMemcpy(out.data(), d_out, out.size() * sizeof(u16), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (u16* d : {d_ref, d_cur, d_pad, d_sads, d_out}) check(cudaFree(d), "cudaFree");
    timer.stop();
    if (!o.output.empty()) sad::write_output(o.output, mb_w, out);
    const bool ok = sad::check(o, f, out, prog);
    return parboil::report(sad::name, sad::fields(f) + " gpus=1", timer.seconds(), o, ok);
  });
}
