// Depthwise convolution kernels of this project (grouped.h: groups = C = K): NHWC activations,
// K x R x S filters (KRS(C/groups) with C/groups = 1), NPQK output, 16-bit elements (fp16 or
// bf16), fp32 accumulation. Each output channel k reads input channel k alone, R*S products an
// output: a depthwise layer is bound by memory (its floor is its bytes moved once) or, for 7x7
// filters, by the CUDA cores' fp32 multiply-adds.
//
// Work is a list of tiles: TP output rows by TILE_Q output columns of one image, for CB * 8
// consecutive channels (channels innermost, so that the CTAs running at once read the same input
// pixels). A persistent grid of as many CTAs of 256 threads as the GPU holds at once walks the
// list; each CTA keeps STAGES tiles' input ((TP - 1) * Stride + R rows by (TILE_Q - 1) * Stride + S
// columns, CB 16-byte vectors a pixel, zeros outside the image) and taps in flight into shared
// memory with cp.async while it computes the oldest. A thread computes TPT x TQ outputs of two
// channels: the two channels' taps in registers (fp32), each input row of its window read from
// shared memory once (4 bytes a pixel, one warp reading 128 contiguous bytes where CB >= 8),
// converted once, and used by every output row and column it feeds.
//
// kernelgen::Depthwise<T, R, S, Stride, TP, TPT, TQ, CB, STAGES> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h): can_implement(problem, groups), configure() (the grid a
// launch may use, its shared memory set up once before any launch) and launch(problem, binding,
// ctas, stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "operation.h"

namespace kernelgen {
namespace depthwise {

// 16 bytes global -> shared, asynchronously; zeros where !valid (src must still be a valid address).
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void wait_all_but() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Two 16-bit elements as two floats, and back.
template <typename T>
__device__ __forceinline__ float2 pair_to_float(uint32_t v) {
  if constexpr (std::is_same<T, __half>::value) return __half22float2(*reinterpret_cast<const __half2*>(&v));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
template <typename T>
__device__ __forceinline__ uint32_t pair_from_float(float2 f) {
  uint32_t v;
  if constexpr (std::is_same<T, __half>::value) *reinterpret_cast<__half2*>(&v) = __floats2half2_rn(f.x, f.y);
  else *reinterpret_cast<__nv_bfloat162*>(&v) = __floats2bfloat162_rn(f.x, f.y);
  return v;
}
template <typename T>
__device__ __forceinline__ float element_to_float(T v) {
  if constexpr (std::is_same<T, __half>::value) return __half2float(v);
  else return __bfloat162float(v);
}

template <int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES>
struct Tile {
  static constexpr int kThreads = 256;
  static constexpr int kPairs = CB * 4;                // threads along C, two channels each
  static constexpr int kPositions = kThreads / kPairs;  // threads along the pixels
  static constexpr int kPR = TP / TPT;                 // thread rows a tile
  static constexpr int kPC = kPositions / kPR;         // thread columns a tile
  static constexpr int kQ = kPC * TQ;                  // output columns a tile
  static constexpr int kInP = (TP - 1) * Stride + R;   // input rows a tile reads
  static constexpr int kInQ = (kQ - 1) * Stride + S;   // input columns a tile reads
  static constexpr int kThreadRows = (TPT - 1) * Stride + R;  // input rows a thread reads
  static constexpr int kWindow = (TQ - 1) * Stride + S;       // input columns a thread reads
  static constexpr int kInputVectors = kInP * kInQ * CB;
  static constexpr int kTapVectors = R * S * CB;  // the channels' taps as stored, [c][r][s]
  static constexpr int kStageVectors = kInputVectors + kTapVectors;
  static constexpr int kBytes = STAGES * kStageVectors * 16;
  static_assert(kThreads % kPairs == 0, "the CTA's threads cover its channels evenly");
  static_assert(TP % TPT == 0 && kPositions % kPR == 0, "the CTA's threads cover its tile's rows evenly");
  static_assert(STAGES >= 2, "at least two stages: one computed, one in flight");
  static_assert(kBytes <= 227 * 1024, "the stages fit 227 KiB of shared memory");
};

// n / d and n % d for 0 <= n < 2^31 by a multiply and a shift (d fixed for a launch).
struct Divisor {
  int d;
  unsigned multiplier;
  int shift;
  Divisor() = default;
  explicit Divisor(int divisor) : d(divisor), multiplier(0), shift(0) {
    if (d > 1) {
      int log2 = 0;
      while ((1u << log2) < unsigned(d)) ++log2;
      const int p = 31 + log2;
      multiplier = unsigned(((1ull << p) + unsigned(d) - 1) / unsigned(d));
      shift = p - 32;
    }
  }
  __device__ __forceinline__ int divide(int n, int& remainder) const {
    const int q = d == 1 ? n : int(__umulhi(unsigned(n), multiplier) >> shift);
    remainder = n - q * d;
    return q;
  }
};

// The layer as a list of tiles: tile = ((n * tiles_p + tp) * tiles_q + tq) * c_blocks + cb.
struct Tiling {
  int P, Q, tiles;
  Divisor c_blocks, tiles_q, tiles_p;
};

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES>
__global__ void __launch_bounds__(256) depthwise_kernel(Conv2dProblem p, Tiling tiling, const T* __restrict__ x,
                                                        const T* __restrict__ w, T* __restrict__ y) {
  using Shape = Tile<R, S, Stride, TP, TPT, TQ, CB, STAGES>;
  extern __shared__ uint4 shared[];
  const int tid = threadIdx.x;
  const int pair = tid % Shape::kPairs, position = tid / Shape::kPairs;
  const int thread_row = position / Shape::kPC, thread_column = position % Shape::kPC;
  const int P = tiling.P, Q = tiling.Q, tiles = tiling.tiles;

  struct Where {
    int n, p0, q0, c_base, channels;
  };
  auto where = [&](int tile) {
    Where at;
    int cb, tq, tp;
    tile = tiling.c_blocks.divide(tile, cb);
    tile = tiling.tiles_q.divide(tile, tq);
    at.n = tiling.tiles_p.divide(tile, tp);
    at.q0 = tq * Shape::kQ;
    at.p0 = tp * TP;
    at.c_base = cb * CB * 8;
    at.channels = min(CB * 8, p.c - at.c_base);
    return at;
  };

  // The copies of a tile's input: vector v = tid + i * 256 of the tile's kInP x kInQ x CB is the
  // tile's input row (v / CB) / kInQ, column (v / CB) % kInQ, channels c_thread..c_thread + 7.
  constexpr int kCopies = (Shape::kInputVectors + 255) / 256;
  const int c_thread = (tid % CB) * 8;  // 256 % CB == 0: v % CB == tid % CB
  const int image_elements = p.h * p.w * p.c;

  // A tile's input and taps into a stage, every copy issued at once (one commit group a stage,
  // empty past the last tile).
  auto fetch = [&](int tile, int stage_index) {
    if (tile < tiles) {
      uint4* const stage = shared + stage_index * Shape::kStageVectors;
      const Where at = where(tile);
      const int h0 = at.p0 * Stride - p.pad_h, w0 = at.q0 * Stride - p.pad_w;
      const bool channel_in = c_thread < at.channels;
      const T* const corner = x + size_t(at.n) * image_elements + at.c_base + c_thread;
      const int corner_pixel = (h0 * p.w + w0) * p.c;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        if (i < kCopies - 1 || tid + i * 256 < Shape::kInputVectors) {
          const int pixel = (tid + i * 256) / CB, row = pixel / Shape::kInQ, column = pixel % Shape::kInQ;
          const int h = h0 + row, col = w0 + column;
          const bool valid = channel_in && unsigned(h) < unsigned(p.h) && unsigned(col) < unsigned(p.w);
          copy16(stage + tid + i * 256, valid ? corner + (corner_pixel + (row * p.w + column) * p.c) : x, valid);
        }
      }
      // The filter is K x R x S: the block's taps are contiguous, 16-byte aligned (c_base * R * S * 2 bytes).
      const int tap_vectors = at.channels * R * S / 8;
      for (int v = tid; v < Shape::kTapVectors; v += 256) {
        const bool valid = v < tap_vectors;
        copy16(stage + Shape::kInputVectors + v, valid ? w + size_t(at.c_base) * (R * S) + v * 8 : w, valid);
      }
    }
    commit();
  };

  // 4-byte words: a pixel is CB * 4 of them; the thread's window starts at `first`.
  const int first = (thread_row * TPT * Stride * Shape::kInQ + thread_column * TQ * Stride) * (CB * 4) + pair;
  int tile = blockIdx.x;
  const int step = gridDim.x;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(tile + s * step, s);
  for (int i = 0; tile < tiles; ++i, tile += step) {
    wait_all_but<STAGES - 2>();
    __syncthreads();  // this tile's stage is in; every thread is done with the stage the next fetch fills
    fetch(tile + (STAGES - 1) * step, (i + STAGES - 1) % STAGES);
    const uint4* const stage = shared + (i % STAGES) * Shape::kStageVectors;
    // The thread's two channels' taps, zeros past the layer's channels (the copy filled them so).
    const T* raw = reinterpret_cast<const T*>(stage + Shape::kInputVectors) + 2 * pair * (R * S);
    float2 tap[R * S];
#pragma unroll
    for (int rs = 0; rs < R * S; ++rs)
      tap[rs] = make_float2(element_to_float<T>(raw[rs]), element_to_float<T>(raw[R * S + rs]));
    float2 acc[TPT][TQ];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) acc[a][t] = make_float2(0.0f, 0.0f);
    }
    const uint32_t* in = reinterpret_cast<const uint32_t*>(stage) + first;
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
    const Where at = where(tile);
    if (2 * pair < at.channels) {
      const int p_base = at.p0 + thread_row * TPT, q_base = at.q0 + thread_column * TQ;
      T* const out = y + ((size_t(at.n) * P + p_base) * Q + q_base) * p.k + at.c_base + 2 * pair;
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

}  // namespace depthwise

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES>
struct Depthwise {
  static_assert(CB == 1 || CB == 2 || CB == 4 || CB == 8 || CB == 16 || CB == 32,
                "CB channel vectors a CTA: 1, 2, 4, 8, 16 or 32");
  using Shape = depthwise::Tile<R, S, Stride, TP, TPT, TQ, CB, STAGES>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + Shape::kQ - 1) / Shape::kQ) *
                            ((p.c + CB * 8 - 1) / (CB * 8));
    if (tiles > 2147483647LL) return "more tiles than an int counts";
    if ((long long)p.h * p.w * p.c > 2147483647LL) return "an image of more elements than an int counts";
    return {};
  }

  // The CTAs a launch uses on the current device (as many as it runs at once), after setting the
  // kernel's shared memory; 0 with a reason in `why` if the device cannot run it.
  static int configure(std::string& why) {
    const auto kernel = depthwise::depthwise_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, Shape::kBytes) != cudaSuccess) {
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
    depthwise::Tiling tiling;
    tiling.P = p.p(), tiling.Q = p.q();
    const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + Shape::kQ - 1) / Shape::kQ;
    const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
    tiling.tiles = p.n * tiles_p * tiles_q * c_blocks;
    tiling.c_blocks = depthwise::Divisor(c_blocks), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.tiles < ctas ? tiling.tiles : ctas;
    if (grid == 0) return;
    depthwise::depthwise_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES><<<grid, 256, Shape::kBytes, stream>>>(
        p, tiling, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
