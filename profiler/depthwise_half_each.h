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
// It repeats depthwise_half.h's run rather than changing it: a kernel's hash covers the headers it
// includes, so depthwise_half.h unchanged keeps its kernels' measured rows current (as
// depthwise_half_first.h does). A tile's sums, stores and tensor map are depthwise_half_tile.h's,
// shared with depthwise_half_first.h; its configuration and launch are depthwise_run.h's.
//
// kernelgen::DepthwiseHalfEach<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, SUMS, PDL> is a kernel
// type for DepthwiseOperation (depthwise_adapter.h), as kernelgen::DepthwiseHalf is.
#pragma once

#include "depthwise_half_tile.h"
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

    half_tile<R, S, Stride, TPT, TQ, CB, SUMS, Shape>(
        p, P, Q, reinterpret_cast<const __half2*>(stages_memory + stage * Shape::kStageBytes) + first, tap, y, at.n,
        at.p0 + thread_row * TPT, at.q0 + thread_column * TQ, c);
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
    const bool encoded = depthwise::half_input_map<Shape, CB>(&map, p, static_cast<const __half*>(b.x));
    depthwise::launch_run<PDL>(kernel, encoded, grid, THREADS, Shape::kBytes, stream, p, tiling, map,
                               static_cast<const __half*>(b.w), static_cast<__half*>(b.y));
  }
};

}  // namespace kernelgen
