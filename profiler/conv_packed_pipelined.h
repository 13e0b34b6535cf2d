// Packed 1x1 conv2d fprop kernels (conv_packed.h's layers: stride 1, no padding, any C up to the
// reduction a kernel holds, any K) whose CTAs copy the next tiles' inputs while they compute one.
//
// conv_packed.h's CTA builds each tile's A rows from global memory by the 16-byte chunks that hold
// them, a thread a pixel, then computes: a layer of many channels and few outputs (ReXNet's 162 ->
// 38 on 56x56) waits out several round trips to memory a tile, the SM otherwise idle. Here the
// tile of BM consecutive pixels, whose inputs are one contiguous run of BM*C halves starting
// 16-byte aligned (BM is a multiple of 8), is copied whole into a staging buffer by cp.async in
// 16-byte pieces, every thread on consecutive pieces, STAGES - 1 tiles ahead of the one computed
// (a ring of STAGES buffers; the last piece of the tensor zero-filled past its end). A tile's A
// rows are then built from its buffer in shared memory (each row's 16-byte pieces from the two
// chunks that hold them, shifted into place, zero past C), and the CTA multiplies and stores as
// conv_packed.h's does: the filter slice resident, ldmatrix + mma.sync, the fp16 results staged
// packed as the output lies and stored in 16-byte pieces where the slice holds every K.
//
// With PDL, a kernel is launched as a programmatic dependent of the kernel before it
// (dependent_kernel.h): its CTAs are scheduled while that kernel finishes and wait for it before
// they read the filter or the input.
//
// Use as PackedPointwiseFprop (the same Arguments, `unsupported`, `initialize` and `run`; the
// adapter is few_channels_adapter.h).
#pragma once

#include "conv_packed.h"
#include "dependent_kernel.h"

namespace kernelgen {
namespace packed_pipelined {

using few_channels::kPiece;

// Halves a tile's staging buffer takes: BM*C in whole 16-byte pieces, and one piece more (a row's
// last piece is shifted from two chunks, the second possibly past the tile's run).
__host__ __device__ constexpr int staged_halves(int bm, int c) { return (bm * c + kPiece - 1) / kPiece * kPiece + kPiece; }

// Shared memory of a CTA: conv_packed.h's (the filter slice, the A tile doubling as the output's
// staging) and STAGES staging buffers.
__host__ __device__ constexpr int shared_bytes(int bm, int bn, int reduction, int c, int stages) {
  return packed::shared_bytes(bm, bn, reduction) + 2 * stages * staged_halves(bm, c);
}

__device__ __forceinline__ void copy_piece(uint32_t to, const void* from, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(bytes) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// (hi:lo) >> shift, the low 32 bits (shift 0 or 16).
__host__ __device__ __forceinline__ uint32_t funnel_right(uint32_t lo, uint32_t hi, int shift) {
#ifdef __CUDA_ARCH__
  return __funnelshift_r(lo, hi, shift);
#else
  return uint32_t((((unsigned long long)hi << 32) | lo) >> shift);
#endif
}

// 8 halves of a staged run starting at half e of `staged` (16-byte aligned), halves `valid` and on
// zero: the chunks holding halves e / 8 * 8 .. + 15, shifted by e % 8 halves.
__host__ __device__ __forceinline__ uint4 shifted_piece(const __half* staged, int e, int valid) {
  const uint4* chunk = reinterpret_cast<const uint4*>(staged) + (e >> 3);
  const uint4 c0 = chunk[0], c1 = chunk[1];
  const int o = e & 7, shift = (o & 1) * 16;
  const uint32_t v[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
  uint32_t u[6], t[5], out[4];
#pragma unroll
  for (int i = 0; i < 6; ++i) u[i] = (o & 4) ? v[i + 2] : v[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) t[i] = (o & 2) ? u[i + 1] : u[i];  // t[i] = v[i + o / 2]
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t keep = (2 * i < valid ? 0xFFFFu : 0u) | (2 * i + 1 < valid ? 0xFFFF0000u : 0u);
    out[i] = funnel_right(t[i], t[i + 1], shift) & keep;
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Pieces i, i + step, ... of a tile's A rows from its staged run of `rows` pixels of C halves each:
// row m's halves 0 .. reduction - 1 at tile + m * fstride, zero past C and in rows past `rows` (host
// and device code: tests/test_packed.py runs it on the CPU).
__host__ __device__ __forceinline__ void build_rows(const __half* run, int rows, int bm, int c, int reduction,
                                                    __half* tile, int fstride, int i, int step) {
  const int row_pieces = reduction / kPiece;
  for (; i < bm * row_pieces; i += step) {
    const int m = i / row_pieces, h0 = (i - m * row_pieces) * kPiece;
    const uint4 piece = m < rows && h0 < c ? shifted_piece(run, m * c + h0, c - h0) : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(tile + m * fstride + h0) = piece;
  }
}

template <int BM, int BN, int WM, int WN, int Blocks, int STAGES, bool PDL>
__global__ void __launch_bounds__(WM * WN * 32, Blocks)
    fprop_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y,
                 few_channels::Shape g) {
  using namespace few_channels;
  constexpr int kThreads = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN;  // a warp's pixels and channels
  constexpr int MT = TM / 16, NT = TN / 8;   // its m16 and n8 MMA tiles
  static_assert(TM % 16 == 0 && TN % 16 == 0, "a warp's tile is whole 16 x 16 blocks");
  static_assert(BM % kPiece == 0, "a tile's input and output runs start 16-byte aligned");
  static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 staging buffers");

  extern __shared__ __align__(16) char smem[];
  const int fstride = g.reduction + kPiece;  // halves per filter row and per A row
  __half* filter = reinterpret_cast<__half*>(smem);
  __half* tile = filter + BN * fstride;
  __half* staging = tile + BM * (max_of(g.reduction, BN) + kPiece);
  const int staged = staged_halves(BM, g.c);

  const int channel_block = blockIdx.x % g.channel_blocks;
  const int first = blockIdx.x / g.channel_blocks, stride = gridDim.x / g.channel_blocks;
  const int k0 = channel_block * BN, width = min_of(BN, g.k - k0);
  const long long total = g.pixels * g.c;  // x's halves
  if constexpr (PDL) pdl::wait_then_release();  // the kernel before it has written the input

  // Tile t's input run (pixels t * BM .., each C halves) into staging buffer `buffer`; a group of
  // copies committed whether or not the tile exists, so that every thread counts groups alike.
  auto issue = [&](int t, int buffer) {
    if (t < g.tiles) {
      const long long e0 = (long long)t * BM * g.c;
      const int halves = int(min((long long)BM * g.c, total - e0));
      const uint32_t to = shared_address(staging + buffer * staged);
      for (int i = threadIdx.x; i * kPiece < halves; i += kThreads) {
        const long long left = total - (e0 + (long long)i * kPiece);
        copy_piece(to + 16 * i, x + e0 + (long long)i * kPiece, left >= kPiece ? 16 : int(2 * left));
      }
    }
    commit();
  };

  // The filter slice, as conv_packed.h loads it: output channel k0 + i -> shared row i (zeros past K)
  const Copy copy = make_copy(g.row / kPiece, g.c);
  const uint32_t filter_address = shared_address(filter);
  copy_runs(BN, copy, [&](int i) {
    return make_run(w, (long long)(k0 + i) * g.c, 0, k0 + i < g.k ? g.c : 0, filter_address + i * fstride * 2);
  });
  if (g.row < g.reduction) {
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

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) issue(first + s * stride, s);

  int j = 0;
  for (int t = first; t < g.tiles; t += stride, ++j) {
    const long long pixel0 = (long long)t * BM;
    const int rows = int(min((long long)BM, g.pixels - pixel0));
    const __half* run = staging + (j % STAGES) * staged;
    // the buffer tile j - 1 was built from takes the tile STAGES - 1 ahead (every thread passed the
    // barrier after building tile j - 1's A rows)
    issue(t + (STAGES - 1) * stride, (j + STAGES - 1) % STAGES);
    wait<STAGES - 1>();  // this thread's copies of tile j's run are done
    __syncthreads();     // and every thread's; the previous tile's output is stored (the A tile is free)

    build_rows(run, rows, BM, g.c, g.reduction, tile, fstride, threadIdx.x, kThreads);  // pixel m -> A row m
    __syncthreads();

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int jj = 0; jj < NT; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][jj][e] = 0.f;

#pragma unroll 2
    for (int kk = 0; kk < g.reduction; kk += 16) {
      uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4(a[i], a_address[i] + kk * 2);
#pragma unroll
      for (int jj = 0; jj < NT / 2; ++jj) ldmatrix_x4(b[jj], b_address[jj] + kk * 2);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int jj = 0; jj < NT; ++jj) mma(acc[i][jj], a[i], b[jj / 2][jj % 2 * 2], b[jj / 2][jj % 2 * 2 + 1]);
    }
    __syncthreads();  // every warp is done with the A tile: it becomes the output's staging

    // accumulator e of tile (i, jj): pixel 16 i + lane / 4 + 8 (e / 2), channel 8 jj + 2 (lane % 4) + e % 2,
    // staged at [pixel x width] (channels past the slice's width dropped)
    __half* out_staging = tile;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int jj = 0; jj < NT; ++jj) {
        const int row = wm * TM + i * 16 + lane / 4, col = wn * TN + jj * 8 + lane % 4 * 2;
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          __half* at = out_staging + (row + 8 * h2) * width + col;
          if (col + 1 < width && width % 2 == 0) {
            *reinterpret_cast<__half2*>(at) = __floats2half2_rn(acc[i][jj][2 * h2], acc[i][jj][2 * h2 + 1]);
          } else {
            if (col < width) at[0] = __float2half_rn(acc[i][jj][2 * h2]);
            if (col + 1 < width) at[1] = __float2half_rn(acc[i][jj][2 * h2 + 1]);
          }
        }
      }
    }
    __syncthreads();

    if (width == g.k) {  // the tile's output is one run of rows * K halves, 16-byte aligned
      __half* out = y + pixel0 * g.k;
      const int count = rows * g.k, whole = count / kPiece * kPiece;
      for (int i = threadIdx.x * kPiece; i < whole; i += kThreads * kPiece)
        *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(out_staging + i);
      for (int i = whole + threadIdx.x; i < count; i += kThreads) out[i] = out_staging[i];
    } else if (g.k % 2 == 0) {  // pixel m's width channels at (pixel0 + m) * K + k0, in pairs
      const int pairs = width / 2;
      for (int i = threadIdx.x; i < rows * pairs; i += kThreads) {
        const int m = i / pairs, c = 2 * (i - m * pairs);
        *reinterpret_cast<__half2*>(y + (pixel0 + m) * g.k + k0 + c) =
            *reinterpret_cast<const __half2*>(out_staging + m * width + c);
      }
    } else {
      for (int i = threadIdx.x; i < rows * width; i += kThreads) {
        const int m = i / width, c = i - m * width;
        y[(pixel0 + m) * g.k + k0 + c] = out_staging[i];
      }
    }
  }
  wait<0>();
}

}  // namespace packed_pipelined

// A packed 1x1 conv2d fprop kernel copying STAGES - 1 tiles ahead: PackedPointwiseFprop's tiles,
// warps, reduction and CTAs per SM, STAGES staging buffers of BM*C halves, and a programmatic
// dependent launch or not.
template <int BM, int BN, int WM, int WN, int MaxReduction, int Blocks, int STAGES, bool PDL = false>
struct PackedPipelinedFprop {
  using Base = PackedPointwiseFprop<BM, BN, WM, WN, MaxReduction, Blocks>;
  static constexpr int kThreads = Base::kThreads;
  static constexpr int kSharedBytes = packed_pipelined::shared_bytes(BM, BN, MaxReduction, MaxReduction, STAGES);  // at most
  using Arguments = typename Base::Arguments;

  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w,
                                 int stride_h, int stride_w, int dilation_h, int dilation_w) {
    return Base::unsupported(n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w);
  }

  // Binds operands as PackedPointwiseFprop::initialize does, with this kernel's shared memory (its
  // staging buffers for this C). Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int width,
                                int c, int k, int r, int s, int pad_h, int pad_w, int stride_h, int stride_w,
                                int dilation_h, int dilation_w) {
    if (const char* why = unsupported(n, h, width, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w))
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
                     packed_pipelined::shared_bytes(BM, BN, g.reduction, c, STAGES), 1};
    auto kernel = packed_pipelined::fprop_kernel<BM, BN, WM, WN, Blocks, STAGES, PDL>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&args.blocks_per_sm, kernel, kThreads, args.shared_bytes) !=
            cudaSuccess ||
        args.blocks_per_sm < 1)
      return "the kernel does not fit on a multiprocessor";
    return nullptr;
  }

  // Persistent CTAs, as PackedPointwiseFprop's.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const few_channels::Shape& g = args.shape;
    long long per_block = (long long)sms * args.blocks_per_sm / g.channel_blocks;
    if (per_block < 1) per_block = 1;
    if (per_block > g.tiles) per_block = g.tiles;
    const auto kernel = packed_pipelined::fprop_kernel<BM, BN, WM, WN, Blocks, STAGES, PDL>;
    const dim3 grid(unsigned(per_block * g.channel_blocks));
    if constexpr (PDL) {
      if (const cudaError_t error = pdl::launch(kernel, grid, dim3(kThreads), size_t(args.shared_bytes), stream, args.x,
                                                args.w, args.y, g))
        return error;
    } else {
      kernel<<<grid, kThreads, args.shared_bytes, stream>>>(args.x, args.w, args.y, g);
    }
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
