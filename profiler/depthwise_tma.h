// Depthwise convolution kernels of this project whose tiles arrive by the Tensor Memory Accelerator
// (SM90), and whose CTAs keep their channels' taps in registers from tile to tile. The arithmetic
// is depthwise.h's (a thread computes TPT x TQ outputs of two channels in fp32, each input row of
// its window read from shared memory once); what changes is what surrounds it:
//
// - One thread of a CTA asks for a tile's whole input window ((TP - 1) * Stride + R rows by
//   (kQ - 1) * Stride + S columns by CB * 8 channels of one image) with one bulk tensor copy, zeros
//   outside the image and past the layer's channels coming from the copy itself. depthwise.h's
//   threads each compute the addresses and bounds of a dozen 16-byte copies a tile (its 7x7 kernel
//   of 8x16 tiles is 3,800 SASS instructions, 1,568 of them FFMA; this one's, 2,728).
// - The layer's tiles are listed channel block by channel block, and a CTA takes a contiguous run
//   of that list: its tiles share a block of channels (at most two blocks a CTA), so its taps are
//   copied to shared memory and converted into registers once a block (while the first tile's copy
//   is in flight), not every tile. Neighbouring tiles of a run share their halo rows, which the L2
//   still holds when the next tile's copy asks for them.
// - CTAs of 128 threads may keep 168 registers a thread and run three a SM: a 7x7 filter's taps
//   alone are 98 registers, and a CTA of 256 threads at more than 128 runs alone on its SM.
//
// kernelgen::DepthwiseTma<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h), as kernelgen::Depthwise is: can_implement(problem,
// groups), configure() and launch(problem, binding, ctas, stream). The tensor map is encoded on the
// host at each launch (a kernel parameter, so a captured graph keeps the one it was captured with).
#pragma once

#include <cuda.h>          // CUtensorMap
#include <cudaTypedefs.h>  // its encoder's signature (the encoder is found at run time)

#include "depthwise.h"

namespace kernelgen {
namespace depthwise {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint64_t* barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(count) : "memory");
}

// The thread's arrival, and the bytes the copy it issues next will bring.
__device__ __forceinline__ void barrier_expect(uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void barrier_wait(uint64_t* barrier, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(parity)
        : "memory");
  }
}

// The box of the tensor map at (c, w, h, n) into shared memory; the barrier counts its bytes.
__device__ __forceinline__ void copy_box(void* shared, const CUtensorMap* map, uint64_t* barrier, int c, int w, int h,
                                         int n) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::
          "r"(shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(barrier)), "r"(c), "r"(w), "r"(h), "r"(n)
      : "memory");
}

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS>
struct TmaTile {
  static constexpr int kThreads = THREADS;
  static constexpr int kPairs = CB * 4;                 // threads along C, two channels each
  static constexpr int kPositions = kThreads / kPairs;  // threads along the pixels
  static constexpr int kPR = TP / TPT;                  // thread rows a tile
  static constexpr int kPC = kPositions / kPR;          // thread columns a tile
  static constexpr int kQ = kPC * TQ;                   // output columns a tile
  static constexpr int kInP = (TP - 1) * Stride + R;    // input rows a tile reads
  static constexpr int kInQ = (kQ - 1) * Stride + S;    // input columns a tile reads
  static constexpr int kThreadRows = (TPT - 1) * Stride + R;  // input rows a thread reads
  static constexpr int kWindow = (TQ - 1) * Stride + S;       // input columns a thread reads
  static constexpr int kBoxBytes = kInP * kInQ * CB * 16;       // what one copy brings
  static constexpr int kStageBytes = (kBoxBytes + 127) / 128 * 128;  // each stage 128-byte aligned
  static constexpr int kTapVectors = R * S * CB;  // a channel block's taps, [c][r][s], 16 bytes a vector
  static constexpr int kBytes = STAGES * kStageBytes + kTapVectors * 16;
  // As many CTAs a SM as 384 threads make: a CTA of 128 threads may keep 168 registers a thread.
  static constexpr int kMinCtas = 384 / kThreads;
  static_assert(kThreads == 128 || kThreads == 256, "CTAs of 128 or 256 threads");
  static_assert(kThreads % kPairs == 0, "the CTA's threads cover its channels evenly");
  static_assert(TP % TPT == 0 && kPositions % kPR == 0, "the CTA's threads cover its tile's rows evenly");
  static_assert(STAGES >= 2, "at least two stages: one computed, one in flight");
  static_assert(kBytes <= 227 * 1024, "the stages fit 227 KiB of shared memory");
  static_assert(kInP <= 256 && kInQ <= 256 && CB * 8 <= 256, "a tensor copy's box spans at most 256 a dimension");
};

// The layer's tiles, channel block by channel block: item = cb * spatial + s, with
// s = (n * tiles_p + tp) * tiles_q + tq.
struct RunTiling {
  int P, Q, spatial, items;
  Divisor spatial_tiles, tiles_q, tiles_p;
};

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS, (TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>::kMinCtas))
    depthwise_tma_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
                         const T* __restrict__ w, T* __restrict__ y) {
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

  // Item `item`'s window into stage `stage` (by thread 0; nothing past the run).
  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      barrier_expect(&full[stage], Shape::kBoxBytes);
      copy_box(stages_memory + stage * Shape::kStageBytes, &input, &full[stage], at.cb * CB * 8,
               at.q0 * Stride - p.pad_w, at.p0 * Stride - p.pad_h, at.n);
    }
  };

  // 4-byte words: a pixel is CB * 4 of them; the thread's window starts at `first`.
  const int first = (thread_row * TPT * Stride * Shape::kInQ + thread_column * TQ * Stride) * (CB * 4) + pair;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  float2 tap[R * S];
  int taps_of = -1;  // the channel block whose taps `tap` holds
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c_base = at.cb * CB * 8, c = c_base + 2 * pair;
    if (at.cb != taps_of) {  // at most twice a run, while the first tile's copy is in flight
      // The block's taps (contiguous in the K x R x S filter, 16-byte aligned: c_base * R * S * 2
      // bytes) into shared memory in 16-byte vectors, zeros past the layer's channels; then each
      // thread's two channels' into registers.
      taps_of = at.cb;
      uint4* const taps = reinterpret_cast<uint4*>(stages_memory + STAGES * Shape::kStageBytes);
      const int tap_vectors = (min(CB * 8, p.c - c_base) * R * S) / 8;
      if (i > 0) __syncthreads();  // every thread has its registers from the block before
      for (int v = tid; v < Shape::kTapVectors; v += THREADS)
        taps[v] = v < tap_vectors ? __ldg(reinterpret_cast<const uint4*>(w + size_t(c_base) * (R * S)) + v)
                                  : make_uint4(0, 0, 0, 0);
      __syncthreads();
      const T* const raw = reinterpret_cast<const T*>(taps) + 2 * pair * (R * S);
#pragma unroll
      for (int rs = 0; rs < R * S; ++rs)
        tap[rs] = make_float2(element_to_float<T>(raw[rs]), element_to_float<T>(raw[R * S + rs]));
    }
    barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    float2 acc[TPT][TQ];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) acc[a][t] = make_float2(0.0f, 0.0f);
    }
    const uint32_t* in = reinterpret_cast<const uint32_t*>(stages_memory + stage * Shape::kStageBytes) + first;
#pragma unroll
    for (int ir = 0; ir < Shape::kThreadRows; ++ir) {
      float2 window[Shape::kWindow];
#pragma unroll
      for (int j = 0; j < Shape::kWindow; ++j) window[j] = pair_to_float<T>(in[(ir * Shape::kInQ + j) * (CB * 4)]);
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
        const int r = ir - a * Stride;  // output row a reads input row a * Stride + r
        if (r >= 0 && r < R) {
#pragma unroll
          for (int t = 0; t < TQ; ++t) {
#pragma unroll
            for (int s = 0; s < S; ++s) {
              acc[a][t].x = fmaf(window[t * Stride + s].x, tap[r * S + s].x, acc[a][t].x);
              acc[a][t].y = fmaf(window[t * Stride + s].y, tap[r * S + s].y, acc[a][t].y);
            }
          }
        }
      }
    }
    if (c < p.c) {
      const int p_base = at.p0 + thread_row * TPT, q_base = at.q0 + thread_column * TQ;
      T* const out = y + ((size_t(at.n) * P + p_base) * Q + q_base) * p.k + c;
      const size_t out_row = size_t(Q) * p.k;
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
#pragma unroll
        for (int t = 0; t < TQ; ++t) {
          if (p_base + a < P && q_base + t < Q)
            *reinterpret_cast<uint32_t*>(out + a * out_row + t * p.k) = pair_from_float<T>(acc[a][t]);
        }
      }
    }
  }
}

// cuTensorMapEncodeTiled of the installed driver, found once (no link against libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      function = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

}  // namespace depthwise

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int THREADS = 256>
struct DepthwiseTma {
  static_assert(CB == 1 || CB == 2 || CB == 4 || CB == 8 || CB == 16 || CB == 32,
                "CB channel vectors a CTA: 1, 2, 4, 8, 16 or 32");
  using Shape = depthwise::TmaTile<R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    std::string why = Depthwise<T, R, S, Stride, TP, TPT, TQ, CB, 2>::can_implement(p, groups);
    if (!why.empty()) return why;
    if ((long long)p.n * p.h * p.w * p.c * 2 >= (1LL << 40)) return "a tensor copy addresses under 2^40 bytes";
    return {};
  }

  static int configure(std::string& why) {
    const auto kernel = depthwise::depthwise_tma_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS>;
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
    const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
    tiling.spatial = p.n * tiles_p * tiles_q;
    tiling.items = tiling.spatial * c_blocks;
    tiling.spatial_tiles = depthwise::Divisor(tiling.spatial), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    constexpr CUtensorMapDataType kType =
        std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
    const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
    const cuuint32_t box[4] = {cuuint32_t(CB * 8), cuuint32_t(Shape::kInQ), cuuint32_t(Shape::kInP), 1};
    const cuuint32_t ones[4] = {1, 1, 1, 1};
    if (depthwise::tensor_map_encoder()(&map, kType, 4, const_cast<void*>(b.x), dims, strides, box, ones,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      // The launch is not made; the caller's cudaPeekAtLastError sees the error this leaves.
      depthwise::depthwise_tma_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS><<<0, THREADS, 0, stream>>>(
          p, tiling, map, static_cast<const T*>(b.w), static_cast<T*>(b.y));
      return;
    }
    depthwise::depthwise_tma_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, THREADS><<<grid, THREADS, Shape::kBytes, stream>>>(
        p, tiling, map, static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
