// Depthwise convolutions of a channel multiplier (groups = C, K = M * C: FastViT's 7x7 and 3x3
// stride-2 patch embeddings and its 3x3 expansion, K = 2C) in fp16 pairs: depthwise_half.h's
// kernel (a CTA's run of tiles of one block of CB * 8 output channels, each tile's window brought
// by one bulk tensor copy, the block's taps in registers, HFMA2 sums) whose block reads CB * 8 / M
// input channels: output channel k is computed from input channel k / M, so a thread's two output
// channels (2j, 2j + 1; M even) read one input channel, its value broadcast to both halves of the
// __half2. Before it only the direct kernels of any channels a group served such a layer
// (direct_conv.h, direct_conv_any.h: each input read again by every thread whose window holds it).
//
// The filter is K x R x S x 1 (one input channel a group), so a block's taps are those of its
// output channels, as depthwise_half.h loads them; the output is stored as there. The window's
// pixels are CB * 8 / M halves, a tensor copy's box row a multiple of 16 bytes (CB a multiple of
// M); C must be a multiple of 8 (the tensor map's strides, 16-byte multiples).
//
// It repeats depthwise_half.h's kernel and launch rather than generalising them: a kernel's hash
// covers the headers it includes, so depthwise_half.h unchanged keeps its kernels' measured rows
// current.
//
// kernelgen::DepthwiseMultiplier<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, M, PDL> is a kernel
// type for DepthwiseOperation (depthwise_adapter.h), as kernelgen::DepthwiseHalf is.
#pragma once

#include "dependent_kernel.h"
#include "depthwise_tma.h"

namespace kernelgen {
namespace depthwise {

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS, int M>
struct MultiplierTile {
  using Tile = TmaTile<R, S, Stride, TP, TPT, TQ, CB, 2, THREADS>;  // the thread layout; the stages are below
  static constexpr int kPairs = Tile::kPairs, kPC = Tile::kPC, kQ = Tile::kQ, kInP = Tile::kInP, kInQ = Tile::kInQ;
  static constexpr int kThreadRows = Tile::kThreadRows, kWindow = Tile::kWindow, kMinCtas = Tile::kMinCtas;
  static constexpr int kInputChannels = CB * 8 / M;  // of a block of CB * 8 output channels
  static constexpr int kBoxBytes = kInP * kInQ * kInputChannels * 2;
  static constexpr int kStageBytes = (kBoxBytes + 127) / 128 * 128;
  static constexpr int kTapVectors = Tile::kTapVectors;  // the block's output channels' taps
  static constexpr int kBytes = STAGES * kStageBytes + kTapVectors * 16;
  static_assert(M == 2 || M == 4, "a channel multiplier of 2 or 4: a thread's two output channels read one input channel");
  static_assert(kInputChannels % 8 == 0, "a tensor copy's box row of 16-byte multiples: CB a multiple of M");
  static_assert(STAGES >= 2, "at least two stages: one computed, one in flight");
  static_assert(kBytes <= 227 * 1024, "the stages fit 227 KiB of shared memory");
};

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS, int M, bool PDL>
__global__ void __launch_bounds__(THREADS, (MultiplierTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, M>::kMinCtas))
    depthwise_multiplier_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
                                const __half* __restrict__ w, __half* __restrict__ y) {
  using Shape = MultiplierTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, M>;
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
    int n, p0, q0, kb;
  };
  auto where = [&](int item) {
    Where at;
    int s, tq, tp;
    at.kb = tiling.spatial_tiles.divide(item, s);
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

  // Item `item`'s window (its block's input channels) into stage `stage` (by thread 0; nothing past the run).
  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      barrier_expect(&full[stage], Shape::kBoxBytes);
      copy_box(stages_memory + stage * Shape::kStageBytes, &input, &full[stage], at.kb * Shape::kInputChannels,
               at.q0 * Stride - p.pad_w, at.p0 * Stride - p.pad_h, at.n);
    }
  };

  // Halves: a pixel is kInputChannels of them; the thread's input channel is 2 * pair / M of its block's.
  const int first = (thread_row * TPT * Stride * Shape::kInQ + thread_column * TQ * Stride) * Shape::kInputChannels +
                    2 * pair / M;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  __half2 tap[R * S];
  int taps_of = -1;  // the output channel block whose taps `tap` holds
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int k_base = at.kb * CB * 8, k = k_base + 2 * pair;
    if (at.kb != taps_of) {  // at most twice a run, while the first tile's copy is in flight
      taps_of = at.kb;
      uint4* const taps = reinterpret_cast<uint4*>(stages_memory + STAGES * Shape::kStageBytes);
      const int tap_vectors = (min(CB * 8, p.k - k_base) * R * S) / 8;
      if (i > 0) __syncthreads();  // every thread has its registers from the block before
      for (int v = tid; v < Shape::kTapVectors; v += THREADS)
        taps[v] = v < tap_vectors ? __ldg(reinterpret_cast<const uint4*>(w + size_t(k_base) * (R * S)) + v)
                                  : make_uint4(0, 0, 0, 0);
      __syncthreads();
      const __half* const raw = reinterpret_cast<const __half*>(taps) + 2 * pair * (R * S);
#pragma unroll
      for (int rs = 0; rs < R * S; ++rs) tap[rs] = __halves2half2(raw[rs], raw[R * S + rs]);
    }
    barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    __half2 acc[TPT][TQ];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) acc[a][t] = __float2half2_rn(0.0f);
    }
    const __half* in = reinterpret_cast<const __half*>(stages_memory + stage * Shape::kStageBytes) + first;
#pragma unroll
    for (int ir = 0; ir < Shape::kThreadRows; ++ir) {
      __half2 window[Shape::kWindow];
#pragma unroll
      for (int j = 0; j < Shape::kWindow; ++j) window[j] = __half2half2(in[(ir * Shape::kInQ + j) * Shape::kInputChannels]);
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
    if (k < p.k) {
      const int p_base = at.p0 + thread_row * TPT, q_base = at.q0 + thread_column * TQ;
      __half* const out = y + ((size_t(at.n) * P + p_base) * Q + q_base) * p.k + k;
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

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS = 256, int M = 2,
          bool PDL = false>
struct DepthwiseMultiplier {
  using Shape = depthwise::MultiplierTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, M>;

  static constexpr auto kernel =
      depthwise::depthwise_multiplier_kernel<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS, M, PDL>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != M * p.c)
      return "a depthwise kernel of channel multiplier " + std::to_string(M) + ": needs groups = C, K = " +
             std::to_string(M) + " * C";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + Shape::kQ - 1) / Shape::kQ) *
                            ((p.k + CB * 8 - 1) / (CB * 8));
    if (tiles > 2147483647LL) return "more tiles than an int counts";
    if ((long long)p.p() * p.q() * p.k > 2147483647LL) return "an image of more elements than an int counts";
    if ((long long)p.n * p.h * p.w * p.c * 2 >= (1LL << 40)) return "a tensor copy addresses under 2^40 bytes";
    return {};
  }

  static int configure(std::string& why) {
    int device = 0, sms = 0, per_sm = 0;
    if (!depthwise::tensor_map_encoder()) {
      why = "the driver has no cuTensorMapEncodeTiled";
      return 0;
    }
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, Shape::kBytes) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "needs " + std::to_string(Shape::kBytes) + " bytes of shared memory, more than a CTA may have here";
      return 0;
    }
    return sms * per_sm;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    depthwise::RunTiling tiling;
    tiling.P = p.p(), tiling.Q = p.q();
    const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + Shape::kQ - 1) / Shape::kQ;
    const int k_blocks = (p.k + CB * 8 - 1) / (CB * 8);
    tiling.spatial = p.n * tiles_p * tiles_q;
    tiling.items = tiling.spatial * k_blocks;
    tiling.spatial_tiles = depthwise::Divisor(tiling.spatial), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
    const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
    const cuuint32_t box[4] = {cuuint32_t(Shape::kInputChannels), cuuint32_t(Shape::kInQ), cuuint32_t(Shape::kInP), 1};
    const cuuint32_t ones[4] = {1, 1, 1, 1};
    const auto x = static_cast<const __half*>(b.x), w = static_cast<const __half*>(b.w);
    if (depthwise::tensor_map_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<__half*>(x), dims,
                                        strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      // The launch is not made; the caller's cudaPeekAtLastError sees the error this leaves.
      kernel<<<0, THREADS, 0, stream>>>(p, tiling, map, w, static_cast<__half*>(b.y));
      return;
    }
    if constexpr (PDL) {
      pdl::launch(kernel, dim3(grid), dim3(THREADS), Shape::kBytes, stream, p, tiling, map, w, static_cast<__half*>(b.y));
    } else {
      kernel<<<grid, THREADS, Shape::kBytes, stream>>>(p, tiling, map, w, static_cast<__half*>(b.y));
    }
  }
};

}  // namespace kernelgen
