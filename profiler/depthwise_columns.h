// Depthwise convolution kernels of this project for channels no multiple of 8 (ReXNet's 162 to 1044,
// ShuffleNetV2's 58 and 116, GhostNet's 36 to 360): depthwise_half.h's kernels (a CTA's run of tiles
// of one channel block, the block's taps in registers, HFMA2 sums in fp16) whose window arrives as
// one bulk tensor copy an input column rather than one a tile.
//
// A tensor map's strides are multiples of 16 bytes, so a pixel of C channels (C * 2 bytes apart)
// cannot be a dimension of one unless C is a multiple of 8, and the kernels of one copy a tile
// refuse the others. An image row of W * C channels is one when W * C is a multiple of 8: the map
// here is {W * C, H, N}. A copy's first element must lie on 16 bytes (on an H100 any other start is
// an illegal instruction), and w * C + c0, where the window's column w and channels c0 to
// c0 + 8 * CB - 1 begin, lies 0, 4, 8 or 12 bytes past them (C even, c0 a multiple of 8): so the box
// is 8 * CB + 8 channels wide, at (w * C + c0 rounded down to 8, h0, n), and a thread reads its
// channel pair (w * C mod 8) / 2 words further on. The box runs on into the next pixel's channels
// (their sums, past the layer's channels in the last block, are never stored); past the row's end,
// and above or below the image, the copy itself brings zeros. A column left of the image (padding)
// reads the row before it or zeros there, so a thread reads such a column as zeros whatever the
// copy brought.
//
// Each column's copy lands 128-byte aligned in shared memory ([column][row][channel], kColumnBytes a
// column, kRowWords 4-byte words a row). A warp's two-channel threads read consecutive words of one
// row of one column where CB = 8 (one pixel position a warp); where CB = 4 a warp spans two
// positions, whose words may fall on the same banks.
//
// With PDL, a kernel is launched as a programmatic dependent of the kernel before it
// (dependent_kernel.h), as depthwise_half.h's.
//
// It repeats depthwise_half.h's run of tiles and taps rather than sharing them: a kernel's hash
// covers the headers it includes, so those headers unchanged keep their kernels' measured rows
// current (as depthwise_half_first.h does); its configuration and launch are depthwise_run.h's.
//
// kernelgen::DepthwiseColumns<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, PDL> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h), as kernelgen::DepthwiseHalf is.
#pragma once

#include "dependent_kernel.h"
#include "depthwise_run.h"
#include "depthwise_tma.h"

namespace kernelgen {
namespace depthwise {

// The box of a map of {W * C, H, N} at (x, h, n) into shared memory; the barrier counts its bytes.
__device__ __forceinline__ void copy_column(void* shared, const CUtensorMap* map, uint64_t* barrier, int x, int h,
                                            int n) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(barrier)), "r"(x), "r"(h), "r"(n)
      : "memory");
}

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS>
struct ColumnsTile : TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS> {
  using Base = TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
  static constexpr int kBoxChannels = CB * 8 + 8;  // a copy's channels: the block's and up to 8 before them
  static constexpr int kRowWords = kBoxChannels / 2;
  static constexpr int kColumnBytes = (Base::kInP * kBoxChannels * 2 + 127) / 128 * 128;  // a column's copy, aligned
  static constexpr int kColumnWords = kColumnBytes / 4;
  static constexpr int kBoxBytes = Base::kInQ * Base::kInP * kBoxChannels * 2;  // what a tile's copies bring
  static constexpr int kStageBytes = Base::kInQ * kColumnBytes;
  static constexpr int kBytes = STAGES * kStageBytes + Base::kTapVectors * 16;
  static_assert(kBytes <= 227 * 1024, "the stages fit 227 KiB of shared memory");
  static_assert(Base::kWindow <= 32, "a thread's columns fit a 32-bit mask");
  static_assert(kBoxChannels <= 256, "a tensor copy's box spans at most 256 a dimension");
};

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS, bool PDL>
__global__ void __launch_bounds__(THREADS, (TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>::kMinCtas))
    depthwise_columns_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
                             const __half* __restrict__ w, __half* __restrict__ y) {
  using Shape = ColumnsTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
  extern __shared__ __align__(128) unsigned char stages_memory[];
  __shared__ __align__(8) uint64_t full[STAGES];
  const int tid = threadIdx.x;
  const int pair = tid % Shape::kPairs, position = tid / Shape::kPairs;
  const int thread_row = position / Shape::kPC, thread_column = position % Shape::kPC;
  const int P = tiling.P, Q = tiling.Q;

  // This CTA's run of the list: [begin, end).
  const int begin = int((long long)blockIdx.x * tiling.items / gridDim.x);
  const int end = int((long long)(blockIdx.x + 1) * tiling.items / gridDim.x);

  struct Where {
    int n, p0, q0, cb;
  };
  auto where = [&](int item) {
    Where at;
    int s, tq, tp;
    at.cb = tiling.spatial_tiles.divide(item, s);
    s = tiling.tiles_q.divide(s, tq);
    at.n = tiling.tiles_p.divide(s, tp);
    at.q0 = tq * Shape::kQ;
    at.p0 = tp * TP;
    return at;
  };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) barrier_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&input)) : "memory");
  }
  __syncthreads();
  if constexpr (PDL) pdl::wait_then_release();  // the kernel before it has written the input

  // Item `item`'s window into stage `stage`, a copy a column (by thread 0; nothing past the run).
  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      barrier_expect(&full[stage], Shape::kBoxBytes);
      unsigned char* const to = stages_memory + stage * Shape::kStageBytes;
      const int w0 = at.q0 * Stride - p.pad_w, h0 = at.p0 * Stride - p.pad_h, c0 = at.cb * CB * 8;
#pragma unroll 1
      for (int j = 0; j < Shape::kInQ; ++j)
        copy_column(to + j * Shape::kColumnBytes, &input, &full[stage], ((w0 + j) * p.c + c0) & ~7, h0, at.n);
    }
  };

  // 4-byte words (a channel pair): a column's row is kRowWords of them; the thread's window starts at
  // `first`, each of its columns `shift` words further on.
  const int first = thread_column * TQ * Stride * Shape::kColumnWords + thread_row * TPT * Stride * Shape::kRowWords + pair;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  __half2 tap[R * S];
  int taps_of = -1;  // the channel block whose taps `tap` holds
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c_base = at.cb * CB * 8, c = c_base + 2 * pair;
    if (at.cb != taps_of) {  // at most twice a run, while the first tile's copies are in flight
      // The block's taps (K x R x S, c_base * R * S * 2 bytes in: 16-byte aligned) into shared
      // memory in 16-byte vectors, the last one's halves past the layer's channels zeros; then each
      // thread's two channels' into registers.
      taps_of = at.cb;
      uint4* const taps = reinterpret_cast<uint4*>(stages_memory + STAGES * Shape::kStageBytes);
      const __half* const from = w + size_t(c_base) * (R * S);
      const int tap_halves = min(CB * 8, p.c - c_base) * (R * S), tap_vectors = tap_halves / 8;
      if (i > 0) __syncthreads();  // every thread has its registers from the block before
      for (int v = tid; v < Shape::kTapVectors; v += THREADS) {
        if (v < tap_vectors) {
          taps[v] = __ldg(reinterpret_cast<const uint4*>(from) + v);
        } else {
          __align__(16) __half part[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) part[e] = 8 * v + e < tap_halves ? from[8 * v + e] : __float2half(0.0f);
          taps[v] = *reinterpret_cast<const uint4*>(part);
        }
      }
      __syncthreads();
      const __half* const raw = reinterpret_cast<const __half*>(taps) + 2 * pair * (R * S);
#pragma unroll
      for (int rs = 0; rs < R * S; ++rs) tap[rs] = __halves2half2(raw[rs], raw[R * S + rs]);
    }
    barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    // The thread's window columns inside the image (the others read as zeros), and where each
    // column's block of channels begins in its copy.
    const int x0 = at.q0 * Stride - p.pad_w + thread_column * TQ * Stride;
    unsigned inside = 0;
    int shift[Shape::kWindow];
#pragma unroll
    for (int j = 0; j < Shape::kWindow; ++j) {
      inside |= unsigned(unsigned(x0 + j) < unsigned(p.w)) << j;
      shift[j] = j * Shape::kColumnWords + ((((x0 + j) * p.c) & 7) >> 1);
    }

    __half2 acc[TPT][TQ];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) acc[a][t] = __float2half2_rn(0.0f);
    }
    const __half2* in = reinterpret_cast<const __half2*>(stages_memory + stage * Shape::kStageBytes) + first;
    const __half2 zero = __float2half2_rn(0.0f);
#pragma unroll
    for (int ir = 0; ir < Shape::kThreadRows; ++ir) {
      __half2 window[Shape::kWindow];
#pragma unroll
      for (int j = 0; j < Shape::kWindow; ++j)
        window[j] = (inside >> j) & 1u ? in[shift[j] + ir * Shape::kRowWords] : zero;
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
        const int r = ir - a * Stride;  // output row a reads input row a * Stride + r
        if (r >= 0 && r < R) {
#pragma unroll
          for (int t = 0; t < TQ; ++t) {
#pragma unroll
            for (int s = 0; s < S; ++s) acc[a][t] = __hfma2(window[t * Stride + s], tap[r * S + s], acc[a][t]);
          }
        }
      }
    }
    if (c < p.c) {
      const int p_base = at.p0 + thread_row * TPT, q_base = at.q0 + thread_column * TQ;
      __half* const out = y + ((size_t(at.n) * P + p_base) * Q + q_base) * p.k + c;
      const size_t out_row = size_t(Q) * p.k;
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
#pragma unroll
        for (int t = 0; t < TQ; ++t) {
          if (p_base + a < P && q_base + t < Q) *reinterpret_cast<__half2*>(out + a * out_row + t * p.k) = acc[a][t];
        }
      }
    }
  }
}

}  // namespace depthwise

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS = 128, bool PDL = false>
struct DepthwiseColumns {
  static_assert(CB == 1 || CB == 2 || CB == 4 || CB == 8 || CB == 16 || CB == 32,
                "CB channel vectors a CTA: 1, 2, 4, 8, 16 or 32");
  using Shape = depthwise::ColumnsTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;

  static constexpr auto kernel = depthwise::depthwise_columns_kernel<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, PDL>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S || p.stride_h != Stride || p.stride_w != Stride)
      return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters, stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 2 != 0) return "C must be even (a thread's two channels)";
    if (p.c % 8 == 0) return "C is a multiple of 8: served by the kernels of one tensor copy a tile";
    if ((long long)p.w * p.c % 8 != 0) return "W * C must be a multiple of 8 (an image row 16-byte aligned)";
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + Shape::kQ - 1) / Shape::kQ) *
                            ((p.c + CB * 8 - 1) / (CB * 8));
    if (tiles > 2147483647LL) return "more tiles than an int counts";
    if ((long long)(p.w + 2 * p.pad_w + Shape::kInQ) * p.c > 2147483647LL)
      return "an image row of more elements than an int counts";
    if ((long long)p.n * p.h * p.w * p.c * 2 >= (1LL << 40)) return "a tensor copy addresses under 2^40 bytes";
    return {};
  }

  static int configure(std::string& why) { return depthwise::run_ctas(kernel, THREADS, Shape::kBytes, why); }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    depthwise::RunTiling tiling;
    tiling.P = p.p(), tiling.Q = p.q();
    const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + Shape::kQ - 1) / Shape::kQ;
    const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
    tiling.spatial = p.n * tiles_p * tiles_q;
    tiling.items = tiling.spatial * c_blocks;
    tiling.spatial_tiles = depthwise::Divisor(tiling.spatial), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    const cuuint64_t dims[3] = {cuuint64_t(p.w) * p.c, cuuint64_t(p.h), cuuint64_t(p.n)};
    const cuuint64_t strides[2] = {cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
    const cuuint32_t box[3] = {cuuint32_t(Shape::kBoxChannels), cuuint32_t(Shape::kInP), 1};
    const cuuint32_t ones[3] = {1, 1, 1};
    const auto x = static_cast<const __half*>(b.x), w = static_cast<const __half*>(b.w);
    const bool encoded =
        depthwise::tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<__half*>(x), dims, strides,
                                        box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    depthwise::launch_run<PDL>(kernel, encoded, grid, THREADS, Shape::kBytes, stream, p, tiling, map, w,
                               static_cast<__half*>(b.y));
  }
};

}  // namespace kernelgen
