// Conv2d fprop kernels for 1x1 layers of few channels, memory-bound, whether or not their channels
// are multiples of 8 (ReXNet's 27 -> 162 and 162 -> 38, ShuffleNetV2's 24 -> 58, MobileNetV3's
// 16 -> 16 on 112x112): stride 1, no padding, any C up to the reduction a kernel holds, any K;
// fp16 NHWC in and out, KRSC (here K x C) filters, fp32 accumulation, SM80's ldmatrix and mma.sync
// (which SM90 runs too).
//
// With a 1x1 filter at stride 1 a tile of BM consecutive output pixels reads one contiguous run
// of BM*C input halves and writes one contiguous run of BM*K output halves (where one filter slice
// holds every output channel, K <= BN), whatever C and K are: kernels of 2- or 4-byte accesses
// (C or K odd, or twice odd) move those runs in pieces a warp's stores scatter over rows. Here a
// persistent CTA keeps a BN-channel filter slice in shared memory, as conv_few_channels.h's
// kernel does, and per tile:
//   - each pixel's C inputs go to its row of the A tile (C rounded up to 8, then 16, zero filled)
//     by the 16-byte chunks that hold them, shifted into place (few_channels::copy_runs);
//   - the warps multiply it with the filter slice (ldmatrix + mma.sync);
//   - the fp16 results are staged in shared memory packed as the output lies, [BM x width] for
//     the slice's width = min(BN, K - k0) channels, and stored: when width = K the tile's run is
//     one contiguous block starting 16-byte aligned (BM is a multiple of 8), stored in 16-byte
//     pieces; else each pixel's run of width channels, in 4-byte pieces (K even) or 2-byte ones,
//     consecutive threads on consecutive addresses.
//
// Use as FewChannelsFprop (the same Arguments, `unsupported`, `initialize` and `run`; the adapter
// is few_channels_adapter.h). The kernel reads whole 16-byte chunks around the pixels it needs,
// never past the 16-byte chunk that holds a tensor's last element.
#pragma once

#include "conv_few_channels.h"

namespace kernelgen {
namespace packed {

using few_channels::kPiece;

// Shared memory of a CTA: conv_few_channels.h's for a 1x1 filter (the filter slice and the A tile,
// rows padded by one 16-byte chunk; the tile doubles as the staging buffer), less its pixel table.
__host__ __device__ constexpr int shared_bytes(int bm, int bn, int reduction) {
  return few_channels::shared_bytes(bm, bn, reduction) - 16 * bm;
}

template <int BM, int BN, int WM, int WN, int Blocks>
__global__ void __launch_bounds__(WM * WN * 32, Blocks)
    fprop_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y,
                 few_channels::Shape g) {
  using namespace few_channels;
  constexpr int kThreads = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN;  // a warp's pixels and channels
  constexpr int MT = TM / 16, NT = TN / 8;   // its m16 and n8 MMA tiles
  static_assert(TM % 16 == 0 && TN % 16 == 0, "a warp's tile is whole 16 x 16 blocks");
  static_assert(BM % kPiece == 0, "a tile's output run starts 16-byte aligned");

  extern __shared__ __align__(16) char smem[];
  const int fstride = g.reduction + kPiece;  // halves per filter row and per A row
  __half* filter = reinterpret_cast<__half*>(smem);
  __half* tile = filter + BN * fstride;

  const int channel_block = blockIdx.x % g.channel_blocks;
  const int first = blockIdx.x / g.channel_blocks, stride = gridDim.x / g.channel_blocks;
  const int k0 = channel_block * BN, width = min_of(BN, g.k - k0);
  const bool tail = g.row < g.reduction;  // one zero chunk closes each row
  const Copy copy = make_copy(g.row / kPiece, g.c);
  const uint32_t filter_address = shared_address(filter), tile_address = shared_address(tile);

  // The filter slice: output channel k0 + i -> shared row i (zeros past K)
  copy_runs(BN, copy, [&](int i) {
    return make_run(w, (long long)(k0 + i) * g.c, 0, k0 + i < g.k ? g.c : 0, filter_address + i * fstride * 2);
  });
  if (tail) {
    for (int i = threadIdx.x; i < BN; i += kThreads) zero_run(filter + i * fstride + g.row, 1);
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % WM, wn = warp / WM;
  uint32_t a_address[MT], b_address[NT / 2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
    a_address[i] = shared_address(tile + (wm * TM + i * 16 + lane % 16) * fstride + lane / 16 * 8);
#pragma unroll
  for (int j = 0; j < NT / 2; ++j)
    b_address[j] = shared_address(filter + (wn * TN + j * 16 + lane / 16 * 8 + lane % 8) * fstride + lane / 8 % 2 * 8);

  for (int t = first; t < g.tiles; t += stride) {
    const long long pixel0 = (long long)t * BM;
    const int rows = int(min((long long)BM, g.pixels - pixel0));
    // pixel m's C inputs -> A row m; rows past the last pixel are zero
    copy_runs(BM, copy, [&](int m) {
      return make_run(x, m < rows ? (pixel0 + m) * g.c : 0, 0, m < rows ? g.c : 0, tile_address + m * fstride * 2);
    });
    if (tail) {
      for (int m = threadIdx.x; m < BM; m += kThreads) zero_run(tile + m * fstride + g.row, 1);
    }
    __syncthreads();

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll 2
    for (int kk = 0; kk < g.reduction; kk += 16) {
      uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4(a[i], a_address[i] + kk * 2);
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) ldmatrix_x4(b[j], b_address[j] + kk * 2);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma(acc[i][j], a[i], b[j / 2][j % 2 * 2], b[j / 2][j % 2 * 2 + 1]);
    }
    __syncthreads();  // every warp is done with the A tile: it becomes the staging buffer

    // accumulator e of tile (i, j): pixel 16 i + lane / 4 + 8 (e / 2), channel 8 j + 2 (lane % 4) + e % 2,
    // staged at [pixel x width] (channels past the slice's width dropped)
    __half* staging = tile;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int row = wm * TM + i * 16 + lane / 4, col = wn * TN + j * 8 + lane % 4 * 2;
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          __half* at = staging + (row + 8 * h2) * width + col;
          if (col + 1 < width && width % 2 == 0) {
            *reinterpret_cast<__half2*>(at) = __floats2half2_rn(acc[i][j][2 * h2], acc[i][j][2 * h2 + 1]);
          } else {
            if (col < width) at[0] = __float2half_rn(acc[i][j][2 * h2]);
            if (col + 1 < width) at[1] = __float2half_rn(acc[i][j][2 * h2 + 1]);
          }
        }
      }
    }
    __syncthreads();

    if (width == g.k) {  // the tile's output is one run of rows * K halves, 16-byte aligned
      __half* out = y + pixel0 * g.k;
      const int count = rows * g.k, whole = count / kPiece * kPiece;
      for (int i = threadIdx.x * kPiece; i < whole; i += kThreads * kPiece)
        *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(staging + i);
      for (int i = whole + threadIdx.x; i < count; i += kThreads) out[i] = staging[i];
    } else if (g.k % 2 == 0) {  // pixel m's width channels at (pixel0 + m) * K + k0, in pairs
      const int pairs = width / 2;
      for (int i = threadIdx.x; i < rows * pairs; i += kThreads) {
        const int m = i / pairs, c = 2 * (i - m * pairs);
        *reinterpret_cast<__half2*>(y + (pixel0 + m) * g.k + k0 + c) =
            *reinterpret_cast<const __half2*>(staging + m * width + c);
      }
    } else {
      for (int i = threadIdx.x; i < rows * width; i += kThreads) {
        const int m = i / width, c = i - m * width;
        y[(pixel0 + m) * g.k + k0 + c] = staging[i];
      }
    }
    __syncthreads();  // the staging buffer is read before the next tile's A rows overwrite it
  }
}

}  // namespace packed

// A packed 1x1 conv2d fprop kernel: BM x BN tiles (pixels x output channels), WM x WN warps, C up
// to `MaxReduction` (rounded up to 16; the filter slice and the A tile stay in shared memory
// whole), built for `Blocks` CTAs per SM (__launch_bounds__).
template <int BM, int BN, int WM, int WN, int MaxReduction, int Blocks>
struct PackedPointwiseFprop {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kSharedBytes = packed::shared_bytes(BM, BN, MaxReduction);  // at most
  using Arguments = typename FewChannelsFprop<BM, BN, WM, WN, MaxReduction, Blocks>::Arguments;

  // Nullptr when the kernel computes this convolution (NHWC x, K x 1 x 1 x C w, NHWK y), else why not.
  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w,
                                 int stride_h, int stride_w, int dilation_h, int dilation_w) {
    if (n < 1 || h < 1 || w < 1 || c < 1 || k < 1 || dilation_h < 1 || dilation_w < 1)
      return "needs positive extents and dilations";
    if (r != 1 || s != 1 || stride_h != 1 || stride_w != 1 || pad_h != 0 || pad_w != 0)
      return "built for 1x1 filters at stride 1 without padding";
    if (few_channels::reduction_columns(1, 1, c) > MaxReduction)
      return "C is too large: the filter slice and A tile would not fit this kernel's shared memory";
    if ((long long)n * h * w >= INT_MAX) return "the tensors are too large for this kernel's index arithmetic";
    return nullptr;
  }

  // Binds operands: x (n x h x w x c), w (k x 1 x 1 x c), y (n x h x w x k). Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int width,
                                int c, int k, int r, int s, int pad_h, int pad_w, int stride_h, int stride_w,
                                int dilation_h, int dilation_w) {
    if (const char* why = unsupported(n, h, width, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
                                      dilation_w))
      return why;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(w) % 16 ||
        reinterpret_cast<uintptr_t>(y) % 16)
      return "needs 16-byte aligned activations, filters and output";
    few_channels::Shape g{};
    g.n = n, g.h = h, g.w = width, g.c = c, g.k = k, g.r = 1, g.s = 1;
    g.stride_h = g.stride_w = g.dilation_h = g.dilation_w = 1;
    g.p = h, g.q = width;
    g.row = few_channels::row_columns(1, c);
    g.reduction = few_channels::reduction_columns(1, 1, c);
    g.pixels = (long long)n * h * width;
    g.tiles = int((g.pixels + BM - 1) / BM);
    g.channel_blocks = (k + BN - 1) / BN;
    args = Arguments{static_cast<const __half*>(x), static_cast<const __half*>(w), static_cast<__half*>(y), g,
                     packed::shared_bytes(BM, BN, g.reduction), 1};
    auto kernel = packed::fprop_kernel<BM, BN, WM, WN, Blocks>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&args.blocks_per_sm, kernel, kThreads, args.shared_bytes) !=
            cudaSuccess ||
        args.blocks_per_sm < 1)
      return "the kernel does not fit on a multiprocessor";
    return nullptr;
  }

  // Persistent CTAs: as many as the SMs hold, a whole number per filter slice, at most one per tile.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const few_channels::Shape& g = args.shape;
    long long per_block = (long long)sms * args.blocks_per_sm / g.channel_blocks;
    if (per_block < 1) per_block = 1;
    if (per_block > g.tiles) per_block = g.tiles;
    packed::fprop_kernel<BM, BN, WM, WN, Blocks>
        <<<unsigned(per_block * g.channel_blocks), kThreads, args.shared_bytes, stream>>>(args.x, args.w, args.y, g);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
