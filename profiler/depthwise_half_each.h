// depthwise_half.h's kernels (fp16-pair depthwise convolutions, each tile's window brought by one
// bulk tensor copy, HFMA2 sums) that take a tile's channel blocks in turn: a CTA's run goes through
// the channel blocks of one tile of pixels, then of the next, where depthwise_half.h's goes through
// the tiles of one channel block. Each tile's taps (2 x R x S halves a thread, contiguous in the
// filter) are read from global memory straight into registers as its window is waited for; no
// shared memory, no barrier.
//
// Written for what depthwise_half.h's 3x3 kernel of 8x32 tiles read from DRAM under Nsight Compute
// on an H100: 56 MB of EfficientNet-B0's 28.9 MB 56x56 input of 144 channels at batch 32, taken for
// that order's doing (a copy's 128-byte lines also hold the neighbouring blocks' channels, which CTAs
// far apart in the run read later). Here a CTA asks for every block of the same pixels one after
// the other; measured since, these read that input 1.68 times and the fp32 kernels of the other
// order 1.16 times (docs/results.md, 2026-12-07): the order is not the cause.
//
// It repeats depthwise_half.h's kernel rather than changing it: a kernel's hash covers the headers
// it includes, so depthwise_half.h unchanged keeps its kernels' measured rows current (as
// depthwise_half_first.h does); its configuration and launch are depthwise_run.h's.
//
// kernelgen::DepthwiseHalfEach<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, SUMS, PDL> is a kernel
// type for DepthwiseOperation (depthwise_adapter.h), as kernelgen::DepthwiseHalf is.
#pragma once

#include "depthwise_half.h"
#include "depthwise_run.h"

namespace kernelgen {
namespace depthwise {

// A run's list of (pixel tile, channel block) items, the channel block fastest.
struct BlockTiling {
  int P, Q, items;
  Divisor c_blocks, tiles_q, tiles_p;
};

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS, Sums SUMS, bool PDL>
__global__ void __launch_bounds__(THREADS, (TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>::kMinCtas))
    depthwise_half_each_kernel(Conv2dProblem p, BlockTiling tiling, const __grid_constant__ CUtensorMap input,
                               const __half* __restrict__ w, __half* __restrict__ y) {
  using Shape = TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
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
    int tq, tp;
    int s = tiling.c_blocks.divide(item, at.cb);
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

  // Item `item`'s window into stage `stage` (by thread 0; nothing past the run).
  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      barrier_expect(&full[stage], Shape::kBoxBytes);
      copy_box(stages_memory + stage * Shape::kStageBytes, &input, &full[stage], at.cb * CB * 8,
               at.q0 * Stride - p.pad_w, at.p0 * Stride - p.pad_h, at.n);
    }
  };

  // 4-byte words (a channel pair): a pixel is CB * 4 of them; the thread's window starts at `first`.
  const int first = (thread_row * TPT * Stride * Shape::kInQ + thread_column * TQ * Stride) * (CB * 4) + pair;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c = at.cb * CB * 8 + 2 * pair;
    // The thread's two channels' taps, 2 x R x S halves from channel c's first (c is even, so the
    // run starts on 4 bytes), in flight while the window is waited for; zeros past the channels.
    unsigned raw[R * S];
    const unsigned* const from = reinterpret_cast<const unsigned*>(w + size_t(c) * (R * S));
#pragma unroll
    for (int j = 0; j < R * S; ++j) raw[j] = c < p.c ? __ldg(from + j) : 0u;
    barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    auto half_at = [&](int k) {  // half k of the thread's 2 x R x S
      return __ushort_as_half((unsigned short)((k & 1) ? raw[k >> 1] >> 16 : raw[k >> 1] & 0xFFFFu));
    };
    __half2 tap[R * S];
#pragma unroll
    for (int rs = 0; rs < R * S; ++rs) tap[rs] = __halves2half2(half_at(rs), half_at(R * S + rs));

    // kHalf: the sums themselves; kRows: the fp32 sums, each row's added from `part`.
    __half2 acc[TPT][TQ];
    float2 rows[SUMS == Sums::kRows ? TPT : 1][SUMS == Sums::kRows ? TQ : 1];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
        acc[a][t] = __float2half2_rn(0.0f);
        if constexpr (SUMS == Sums::kRows) rows[a][t] = make_float2(0.0f, 0.0f);
      }
    }
    const __half2* in = reinterpret_cast<const __half2*>(stages_memory + stage * Shape::kStageBytes) + first;
#pragma unroll
    for (int ir = 0; ir < Shape::kThreadRows; ++ir) {
      __half2 window[Shape::kWindow];
#pragma unroll
      for (int j = 0; j < Shape::kWindow; ++j) window[j] = in[(ir * Shape::kInQ + j) * (CB * 4)];
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
        const int r = ir - a * Stride;  // output row a reads input row a * Stride + r
        if (r >= 0 && r < R) {
#pragma unroll
          for (int t = 0; t < TQ; ++t) {
            if constexpr (SUMS == Sums::kRows) {
              __half2 part = __hmul2(window[t * Stride], tap[r * S]);
#pragma unroll
              for (int s = 1; s < S; ++s) part = __hfma2(window[t * Stride + s], tap[r * S + s], part);
              const float2 f = __half22float2(part);
              rows[a][t].x += f.x;
              rows[a][t].y += f.y;
            } else {
#pragma unroll
              for (int s = 0; s < S; ++s) acc[a][t] = __hfma2(window[t * Stride + s], tap[r * S + s], acc[a][t]);
            }
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
          if (p_base + a < P && q_base + t < Q) {
            if constexpr (SUMS == Sums::kRows)
              *reinterpret_cast<__half2*>(out + a * out_row + t * p.k) = __float22half2_rn(rows[a][t]);
            else
              *reinterpret_cast<__half2*>(out + a * out_row + t * p.k) = acc[a][t];
          }
        }
      }
    }
  }
}

}  // namespace depthwise

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS = 256,
          depthwise::Sums SUMS = depthwise::Sums::kHalf, bool PDL = false>
struct DepthwiseHalfEach {
  using Shape = depthwise::TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
  using Layout = DepthwiseTma<__half, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;  // what it serves

  static constexpr auto kernel =
      depthwise::depthwise_half_each_kernel<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, SUMS, PDL>;

  static std::string can_implement(const Conv2dProblem& p, int groups) { return Layout::can_implement(p, groups); }

  static int configure(std::string& why) { return depthwise::run_ctas(kernel, THREADS, Shape::kBytes, why); }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    depthwise::BlockTiling tiling;
    tiling.P = p.p(), tiling.Q = p.q();
    const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + Shape::kQ - 1) / Shape::kQ;
    const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
    tiling.items = p.n * tiles_p * tiles_q * c_blocks;
    tiling.c_blocks = depthwise::Divisor(c_blocks), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
    const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
    const cuuint32_t box[4] = {cuuint32_t(CB * 8), cuuint32_t(Shape::kInQ), cuuint32_t(Shape::kInP), 1};
    const cuuint32_t ones[4] = {1, 1, 1, 1};
    const auto x = static_cast<const __half*>(b.x), w = static_cast<const __half*>(b.w);
    const bool encoded =
        depthwise::tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<__half*>(x), dims, strides,
                                        box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    depthwise::launch_run<PDL>(kernel, encoded, grid, THREADS, Shape::kBytes, stream, p, tiling, map, w,
                               static_cast<__half*>(b.y));
  }
};

}  // namespace kernelgen
