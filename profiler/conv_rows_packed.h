// Rows-mode few-channels conv2d fprop kernels for first layers whose output channels are no
// multiple of 8 (R(2+1)D-18's stem: 3 -> 45 channels, 7x7 at stride 2): conv_few_channels.h's
// rows-mode kernel (each tile's input rows staged once, A fragments read from them, the filter
// slice resident), with one filter slice holding every output channel (K <= BN) and the tile's
// results stored packed as the output lies: a tile of pixels p0 .. p1 writes one contiguous run of
// (p1 - p0 + 1) * K halves, whatever K is, in 16-byte pieces where a piece lies inside it and
// element by element at its two ends (the pieces a neighbouring tile shares).
//
// Use as FewChannelsRowsFprop (the same Arguments, `unsupported`, `initialize` and `run`; the
// adapter is few_channels_adapter.h). The packed store is host and device code:
// tests/test_rows_packed.py runs it on the CPU.
#pragma once

#include "conv_few_channels.h"

namespace kernelgen {
namespace rows_packed {

// Elements i, i + step, ... of the tile's packed run, in 16-byte pieces (pieces of the 16-byte
// grid of y that lie inside the run; the others element by element): `count` pixels of `k`
// channels from `staging` (pixel m's channel j at m * stride + j), the run starting at element
// `base` of y.
__host__ __device__ inline void store_packed(const __half* staging, int stride, int k, int count, long long base,
                                             __half* y, int i, int step) {
  const long long end = base + (long long)count * k, first = base & ~7LL;
  const int pieces = int((end - first + 7) / 8);
  for (int j = i; j < pieces; j += step) {
    const long long g = first + 8LL * j;
    if (g >= base && g + 8 <= end) {
      alignas(16) __half v[8];
      for (int e = 0; e < 8; ++e) {
        const long long at = g + e - base;
        const int m = int(at / k);
        v[e] = staging[m * stride + int(at - (long long)m * k)];
      }
      *reinterpret_cast<uint4*>(y + g) = *reinterpret_cast<const uint4*>(v);
    } else {
      for (int e = 0; e < 8; ++e) {
        const long long at = g + e - base;
        if (at < 0 || g + e >= end) continue;
        const int m = int(at / k);
        y[g + e] = staging[m * stride + int(at - (long long)m * k)];
      }
    }
  }
}

using namespace few_channels;

// rows_fprop_kernel (conv_few_channels.h) with one filter slice (K <= BN) and the tile stored packed.
template <int BM, int BN, int WM, int WN, int Blocks>
__global__ void __launch_bounds__(WM * WN * 32, Blocks)
    rows_packed_fprop_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y, RowsShape g) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN;  // a warp's pixels and channels
  constexpr int MT = TM / 16, NT = TN / 8;   // its m16 and n8 MMA tiles
  static_assert(TM % 16 == 0 && TN % 16 == 0, "a warp's tile is whole 16 x 16 blocks");

  extern __shared__ __align__(16) char smem[];
  const int fstride = g.reduction + kPiece;  // halves per filter row
  constexpr int sstride = BN + kPiece;       // halves per epilogue staging row
  __half* filter = reinterpret_cast<__half*>(smem);
  __half* rows = filter + BN * fstride;
  __half* staging = rows + g.staged * kPixelHalves;

  const int channel_block = blockIdx.x % g.channel_blocks;
  const int first = blockIdx.x / g.channel_blocks, stride = gridDim.x / g.channel_blocks;
  const int k0 = channel_block * BN;

  // Zeros everywhere in the staged rows: their padding pixels are never written again.
  for (int i = threadIdx.x; i < g.staged / 2; i += kThreads) reinterpret_cast<uint4*>(rows)[i] = make_uint4(0, 0, 0, 0);
  // The filter slice: output channel k0 + i, tap (r, s), channel c -> shared row i, column r * row + s * 4 + c.
  const unsigned short* w16 = reinterpret_cast<const unsigned short*>(w);
  const int taps = g.row / kPixelHalves;  // staged pixels a filter row reads, S and zero ones
  for (int t = threadIdx.x; t < BN * g.r * taps; t += kThreads) {
    const int i = t / (g.r * taps), rest = t - i * g.r * taps, r = rest / taps, s = rest - r * taps;
    uint32_t c[kMaxChannels] = {0, 0, 0, 0};
    if (s < g.s && k0 + i < g.k) {
      const unsigned short* src = w16 + ((k0 + i) * g.r + r) * g.s * g.c + s * g.c;
#pragma unroll
      for (int j = 0; j < kMaxChannels; ++j)
        if (j < g.c) c[j] = __ldg(src + j);
    }
    *reinterpret_cast<uint2*>(filter + i * fstride + r * g.row + s * kPixelHalves) =
        make_uint2(c[0] | c[1] << 16, c[2] | c[3] << 16);
  }
  __syncthreads();  // the zeros are in place before the first tile's rows land on them

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % WM, wn = warp / WM;
  uint32_t b_address[NT / 2];  // ldmatrix addresses of this lane in the filter slice at reduction column 0
#pragma unroll
  for (int j = 0; j < NT / 2; ++j)
    b_address[j] = shared_address(filter + (wn * TN + j * 16 + lane / 16 * 8 + lane % 8) * fstride + lane / 8 % 2 * 8);
  const uint32_t rows_address = shared_address(rows);
  const bool even = g.stride_w % 2 == 0;

  for (int t = first; t < g.tiles; t += stride) {
    const int image = t / g.tiles_per_image;
    const int pixel0 = (t - image * g.tiles_per_image) * BM;  // within the image
    const int last = min_of(pixel0 + BM, g.pq) - 1;
    const int p_first = pixel0 / g.q;
    const int used = (last / g.q - p_first) * g.stride_h + (g.r - 1) * g.dilation_h + 1;
    const int hbase = p_first * g.stride_h - g.pad_h;  // the input row of staged row 0
    switch (g.c) {
      case 1: stage_rows<1, kThreads>(x, rows, g, image, hbase, used); break;
      case 2: stage_rows<2, kThreads>(x, rows, g, image, hbase, used); break;
      case 3: stage_rows<3, kThreads>(x, rows, g, image, hbase, used); break;
      default: stage_rows<4, kThreads>(x, rows, g, image, hbase, used); break;
    }
    __syncthreads();  // the staged rows (and, on the first tile, the filter slice) are complete

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    if (even)
      rows_mainloop<true>(acc, g, rows_address, b_address, wm * TM, pixel0, last, p_first, lane);
    else
      rows_mainloop<false>(acc, g, rows_address, b_address, wm * TM, pixel0, last, p_first, lane);

    // accumulator e of tile (i, j): pixel 16 i + lane / 4 + 8 (e / 2), channel 8 j + 2 (lane % 4) + e % 2.
    // The previous tile's reads of the staging buffer came before every thread's barrier above.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int row = wm * TM + i * 16 + lane / 4, col = wn * TN + j * 8 + lane % 4 * 2;
        *reinterpret_cast<__half2*>(staging + row * sstride + col) = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<__half2*>(staging + (row + 8) * sstride + col) =
            __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
      }
    }
    __syncthreads();  // the staging buffer is complete; every warp is done with the staged rows

    store_packed(staging, sstride, g.k, last - pixel0 + 1, ((long long)image * g.pq + pixel0) * g.k, y, threadIdx.x,
                 kThreads);
  }
}

}  // namespace rows_packed

// A rows-mode few-channels kernel of one filter slice (K <= BN, any K) storing its tiles packed:
// FewChannelsRowsFprop's checks for K rounded up to 8, its arguments for K, its launch of
// rows_packed::rows_packed_fprop_kernel.
template <int BM, int BN, int WM, int WN, int MaxReduction, int MaxStaged, int Blocks>
struct FewChannelsRowsPackedFprop : FewChannelsRowsFprop<BM, BN, WM, WN, MaxReduction, MaxStaged, Blocks> {
  using Base = FewChannelsRowsFprop<BM, BN, WM, WN, MaxReduction, MaxStaged, Blocks>;
  using Arguments = typename Base::Arguments;
  using Base::kThreads;

  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w,
                                 int stride_h, int stride_w, int dilation_h, int dilation_w) {
    if (k < 1 || k > BN) return "needs 1 to the tile's N output channels (one filter slice)";
    if (k % 8 == 0) return "K is a multiple of 8: FewChannelsRowsFprop stores it in 16-byte pieces";
    return Base::unsupported(n, h, w, c, (k + 7) / 8 * 8, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
                             dilation_w);
  }

  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int width,
                                int c, int k, int r, int s, int pad_h, int pad_w, int stride_h, int stride_w,
                                int dilation_h, int dilation_w) {
    if (const char* why = unsupported(n, h, width, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
                                      dilation_w))
      return why;
    if (const char* why = Base::initialize(args, x, w, y, n, h, width, c, (k + 7) / 8 * 8, r, s, pad_h, pad_w,
                                           stride_h, stride_w, dilation_h, dilation_w))
      return why;
    args.shape.k = k;  // the filter's and the output's; the slice's rows past K are zeros
    auto kernel = rows_packed::rows_packed_fprop_kernel<BM, BN, WM, WN, Blocks>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Base::kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&args.blocks_per_sm, kernel, kThreads, args.shared_bytes) !=
            cudaSuccess ||
        args.blocks_per_sm < 1)
      return "the kernel does not fit on a multiprocessor";
    return nullptr;
  }

  // Persistent CTAs, as many as the SMs hold, at most one per tile.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const few_channels::RowsShape& g = args.shape;
    long long ctas = (long long)sms * args.blocks_per_sm;
    if (ctas > g.tiles) ctas = g.tiles;
    rows_packed::rows_packed_fprop_kernel<BM, BN, WM, WN, Blocks>
        <<<unsigned(ctas), kThreads, args.shared_bytes, stream>>>(args.x, args.w, args.y, g);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
