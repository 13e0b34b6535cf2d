// depthwise_half.h's kernels (fp16-pair depthwise convolutions: a CTA's run of tiles of one channel
// block, each tile's window brought by one bulk tensor copy, the block's taps in registers, HFMA2
// sums) with the run's first channel block's taps asked for first: each thread loads its share of
// them (16-byte vectors) into registers before thread 0 asks for the run's first windows, and
// stores them to shared memory while those copies are in flight. In depthwise_half.h's order the
// taps' loads follow every CTA's first windows, about the whole layer's input at once, and wait
// for them: under Nsight Compute on an H100 that wait at the start of each CTA's run was 18% of the
// warps' stall samples on ConvNeXt-T's 7x7 layers (docs/results.md). A later block's taps are
// loaded as the block begins, as there.
//
// It repeats depthwise_half.h's run rather than changing it: a kernel's hash covers the headers it
// includes, so depthwise_half.h unchanged keeps its kernels' measured rows current (as
// depthwise_multiplier.h does). A tile's sums, stores and tensor map are depthwise_half_tile.h's,
// shared with depthwise_half_each.h; its configuration and launch are depthwise_run.h's.
//
// kernelgen::DepthwiseHalfFirst<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, SUMS, PDL> is a kernel
// type for DepthwiseOperation (depthwise_adapter.h), as kernelgen::DepthwiseHalf is.
#pragma once

#include "depthwise_half_tile.h"
#include "depthwise_run.h"

namespace kernelgen {
namespace depthwise {

// The CTAs a SM the kernel is built for: TmaTile::kMinCtas (as many as 384 threads make), or fewer
// where the stages leave room for fewer (a CTA's shared memory and the 1 KB the SM reserves it, of
// 228 KB): two CTAs of 128 threads, as the 5x5 tile of 14x14 of 64 channels and the 9x9 tiles, may
// keep 255 registers a thread where three keep 168. (DepthwiseHalf.max_registers in depthwise_half.py says the same.)
template <class Shape>
constexpr int resident_ctas() {
  constexpr int by_memory = (228 * 1024) / (Shape::kBytes + 1024);
  return by_memory < 1 ? 1 : (by_memory < Shape::kMinCtas ? by_memory : Shape::kMinCtas);
}

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS, Sums SUMS, bool PDL>
__global__ void __launch_bounds__(THREADS, (resident_ctas<TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>>()))
    depthwise_half_first_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
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

  // Item `item`'s window into stage `stage` (by thread 0; nothing past the run).
  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      barrier_expect(&full[stage], Shape::kBoxBytes);
      copy_box(stages_memory + stage * Shape::kStageBytes, &input, &full[stage], at.cb * CB * 8,
               at.q0 * Stride - p.pad_w, at.p0 * Stride - p.pad_h, at.n);
    }
  };

  // This thread's share of channel block `cb`'s taps (16-byte vectors tid, tid + THREADS, ...),
  // loaded into registers; zeros past the layer's channels.
  constexpr int kStaged = (Shape::kTapVectors + THREADS - 1) / THREADS;
  uint4 staged[kStaged];
  auto load_taps = [&](int cb) {
    const int c_base = cb * CB * 8;
    const int tap_vectors = (min(CB * 8, p.c - c_base) * R * S) / 8;
    const uint4* const from = reinterpret_cast<const uint4*>(w + size_t(c_base) * (R * S));
#pragma unroll
    for (int j = 0; j < kStaged; ++j) {
      const int v = tid + j * THREADS;
      staged[j] = v < tap_vectors ? __ldg(from + v) : make_uint4(0, 0, 0, 0);
    }
  };
  // The run's first block's taps are asked for before its first windows: behind them, they would
  // wait for every CTA's windows, about the whole input at once.
  if (begin < end) load_taps(where(begin).cb);

  // 4-byte words (a channel pair): a pixel is CB * 4 of them; the thread's window starts at `first`.
  const int first = (thread_row * TPT * Stride * Shape::kInQ + thread_column * TQ * Stride) * (CB * 4) + pair;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  __half2 tap[R * S];
  int taps_of = -1;  // the channel block whose taps `tap` holds
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c = at.cb * CB * 8 + 2 * pair;
    if (at.cb != taps_of) {  // at most twice a run, while the first tile's copy is in flight
      taps_of = at.cb;
      uint4* const taps = reinterpret_cast<uint4*>(stages_memory + STAGES * Shape::kStageBytes);
      if (i > 0) {
        load_taps(at.cb);
        __syncthreads();  // every thread has its registers from the block before
      }
#pragma unroll
      for (int j = 0; j < kStaged; ++j) {
        const int v = tid + j * THREADS;
        if (v < Shape::kTapVectors) taps[v] = staged[j];
      }
      __syncthreads();
      const __half* const raw = reinterpret_cast<const __half*>(taps) + 2 * pair * (R * S);
#pragma unroll
      for (int rs = 0; rs < R * S; ++rs) tap[rs] = __halves2half2(raw[rs], raw[R * S + rs]);
    }
    barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    half_tile<R, S, Stride, TPT, TQ, CB, SUMS, Shape>(
        p, P, Q, reinterpret_cast<const __half2*>(stages_memory + stage * Shape::kStageBytes) + first, tap, y, at.n,
        at.p0 + thread_row * TPT, at.q0 + thread_column * TQ, c);
  }
}

}  // namespace depthwise

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS = 256,
          depthwise::Sums SUMS = depthwise::Sums::kHalf, bool PDL = false>
struct DepthwiseHalfFirst {
  using Shape = depthwise::TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
  using Layout = DepthwiseTma<__half, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;  // what it serves

  static constexpr auto kernel =
      depthwise::depthwise_half_first_kernel<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, SUMS, PDL>;

  static std::string can_implement(const Conv2dProblem& p, int groups) { return Layout::can_implement(p, groups); }

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
    const bool encoded = depthwise::half_input_map<Shape, CB>(&map, p, static_cast<const __half*>(b.x));
    depthwise::launch_run<PDL>(kernel, encoded, grid, THREADS, Shape::kBytes, stream, p, tiling, map,
                               static_cast<const __half*>(b.w), static_cast<__half*>(b.y));
  }
};

}  // namespace kernelgen
