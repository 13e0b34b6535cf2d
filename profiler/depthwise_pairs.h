// Depthwise convolutions (groups = C = K) of channel counts no multiple of 8 (ReXNet's 162 to
// 702, ShuffleNetV2's 58 to 232, GhostNet's 12 and 20): depthwise.h's tiles, stages and arithmetic,
// with each pixel's channels copied to shared memory in pieces of BYTES (4: C a multiple of 2; 8: C
// a multiple of 4; 16, C a multiple of 8, is depthwise.h's kernel) instead of 16-byte vectors.
//
// depthwise.h's kernel needs 16-byte vectors along C: a pixel's channels start on a 16-byte
// boundary only where C is a multiple of 8. The narrow kernels of these layers (depthwise_rows.h,
// strip_conv.h) read their windows from global memory, each input pixel once for every thread whose
// window holds it (3 to 4.5 times the input from L2 for a 3x3 filter); here a CTA copies its tile's
// window once (cp.async of 4 or 8 bytes, zeros outside the image and past the layer's channels,
// the taps likewise) into the stages the persistent grid keeps in flight, and its threads compute
// from shared memory as depthwise.h's do: TPT x TQ outputs of two channels, 4 bytes a pixel.
//
// With HALF (fp16 only), a thread's two channels are one __half2 from the stage to the store, each
// product added in fp16 by HFMA2 (depthwise_half.h's sums): half the multiply-add instructions and
// no conversions.
//
// kernelgen::DepthwisePairs<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, BYTES, HALF> is a kernel type
// for DepthwiseOperation (depthwise_adapter.h).
#pragma once

#include <string>
#include <type_traits>

#include "depthwise.h"

namespace kernelgen {
namespace depthwise {

// BYTES (4, 8 or 16) global -> shared, asynchronously; zeros where !valid (src must still be a valid address).
template <int BYTES>
__device__ __forceinline__ void copy_piece(void* shared, const void* global, bool valid) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(to), "l"(global), "n"(BYTES),
                 "r"(valid ? BYTES : 0));
}

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int BYTES, bool HALF>
__global__ void __launch_bounds__(256) pairs_kernel(Conv2dProblem p, Tiling tiling, const T* __restrict__ x,
                                                    const T* __restrict__ w, T* __restrict__ y) {
  using Shape = Tile<R, S, Stride, TP, TPT, TQ, CB, STAGES>;
  constexpr int kPieces = CB * 16 / BYTES;             // a pixel's copies
  constexpr int kPieceElements = BYTES / 2;            // 16-bit elements a copy
  constexpr int kInputPieces = Shape::kInputVectors * (16 / BYTES);
  constexpr int kTapPieces = Shape::kTapVectors * (16 / BYTES);
  static_assert(256 % kPieces == 0, "a thread copies the same piece of every pixel it copies");
  static_assert(!HALF || std::is_same<T, __half>::value, "fp16 sums of fp16 elements");
  using Sum = typename std::conditional<HALF, __half2, float2>::type;  // a thread's two channels
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

  // The copies of a tile's input: piece v = tid + i * 256 of the tile's kInP x kInQ x kPieces is
  // the tile's input row (v / kPieces) / kInQ, column (v / kPieces) % kInQ, channels c_thread ..
  // c_thread + kPieceElements - 1 (the layer's C a multiple of kPieceElements: a piece is in or out whole).
  constexpr int kCopies = (kInputPieces + 255) / 256;
  const int c_thread = (tid % kPieces) * kPieceElements;
  const int image_elements = p.h * p.w * p.c;

  auto fetch = [&](int tile, int stage_index) {
    if (tile < tiles) {
      uint4* const stage = shared + stage_index * Shape::kStageVectors;
      char* const pieces = reinterpret_cast<char*>(stage);
      const Where at = where(tile);
      const int h0 = at.p0 * Stride - p.pad_h, w0 = at.q0 * Stride - p.pad_w;
      const bool channel_in = c_thread < at.channels;
      const T* const corner = x + size_t(at.n) * image_elements + at.c_base + c_thread;
      const int corner_pixel = (h0 * p.w + w0) * p.c;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        if (i < kCopies - 1 || tid + i * 256 < kInputPieces) {
          const int pixel = (tid + i * 256) / kPieces, row = pixel / Shape::kInQ, column = pixel % Shape::kInQ;
          const int h = h0 + row, col = w0 + column;
          const bool valid = channel_in && unsigned(h) < unsigned(p.h) && unsigned(col) < unsigned(p.w);
          copy_piece<BYTES>(pieces + (tid + i * 256) * BYTES,
                            valid ? corner + (corner_pixel + (row * p.w + column) * p.c) : x, valid);
        }
      }
      // The filter is K x R x S: the block's taps are contiguous from c_base * R * S (16-byte
      // aligned), channels * R * S of them (a multiple of kPieceElements).
      char* const taps = reinterpret_cast<char*>(stage + Shape::kInputVectors);
      const int tap_pieces = at.channels * R * S / kPieceElements;
      for (int v = tid; v < kTapPieces; v += 256) {
        const bool valid = v < tap_pieces;
        copy_piece<BYTES>(taps + v * BYTES, valid ? w + size_t(at.c_base) * (R * S) + v * kPieceElements : w, valid);
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
    Sum tap[R * S];
#pragma unroll
    for (int rs = 0; rs < R * S; ++rs) {
      if constexpr (HALF) tap[rs] = __halves2half2(raw[rs], raw[R * S + rs]);
      else tap[rs] = make_float2(element_to_float<T>(raw[rs]), element_to_float<T>(raw[R * S + rs]));
    }
    Sum acc[TPT][TQ];
#pragma unroll
    for (int a = 0; a < TPT; ++a) {
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
        if constexpr (HALF) acc[a][t] = __float2half2_rn(0.0f);
        else acc[a][t] = make_float2(0.0f, 0.0f);
      }
    }
    const uint32_t* in = reinterpret_cast<const uint32_t*>(stage) + first;
#pragma unroll
    for (int ir = 0; ir < Shape::kThreadRows; ++ir) {
      Sum window[Shape::kWindow];
#pragma unroll
      for (int j = 0; j < Shape::kWindow; ++j) {
        const uint32_t word = in[(ir * Shape::kInQ + j) * (CB * 4)];
        if constexpr (HALF) window[j] = *reinterpret_cast<const __half2*>(&word);
        else window[j] = pair_to_float<T>(word);
      }
#pragma unroll
      for (int a = 0; a < TPT; ++a) {
        const int r = ir - a * Stride;  // output row a reads input row a * Stride + r
        if (r >= 0 && r < R) {
#pragma unroll
          for (int t = 0; t < TQ; ++t) {
#pragma unroll
            for (int s = 0; s < S; ++s) {
              if constexpr (HALF) {
                acc[a][t] = __hfma2(window[t * Stride + s], tap[r * S + s], acc[a][t]);
              } else {
                acc[a][t].x = fmaf(window[t * Stride + s].x, tap[r * S + s].x, acc[a][t].x);
                acc[a][t].y = fmaf(window[t * Stride + s].y, tap[r * S + s].y, acc[a][t].y);
              }
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
          if (p_base + a < P && q_base + t < Q) {
            if constexpr (HALF) *reinterpret_cast<__half2*>(out + a * out_row + t * p.k) = acc[a][t];
            else *reinterpret_cast<uint32_t*>(out + a * out_row + t * p.k) = pair_from_float<T>(acc[a][t]);
          }
        }
      }
    }
  }
}

}  // namespace depthwise

template <typename T, int R, int S, int Stride, int TP, int TPT, int TQ, int CB, int STAGES, int BYTES, bool HALF = false>
struct DepthwisePairs {
  static_assert(CB == 1 || CB == 2 || CB == 4 || CB == 8 || CB == 16, "CB 8-channel blocks a CTA: 1 to 16");
  using Shape = depthwise::Tile<R, S, Stride, TP, TPT, TQ, CB, STAGES>;
  static constexpr int kChannelMultiple = BYTES / 2;  // a copy's elements

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (BYTES < 16 && p.c % 8 == 0) return "C a multiple of 8: the 16-byte kernels (depthwise.h) take it";
    if (p.c % kChannelMultiple != 0)
      return "C must be a multiple of " + std::to_string(kChannelMultiple) + " (" + std::to_string(BYTES) +
             "-byte copies along C)";
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + Shape::kQ - 1) / Shape::kQ) *
                            ((p.c + CB * 8 - 1) / (CB * 8));
    if (tiles > 2147483647LL) return "more tiles than an int counts";
    if ((long long)p.h * p.w * p.c > 2147483647LL) return "an image of more elements than an int counts";
    return {};
  }

  // The CTAs a launch uses on the current device (as many as it runs at once), after setting the
  // kernel's shared memory; 0 with a reason in `why` if the device cannot run it.
  static int configure(std::string& why) {
    const auto kernel = depthwise::pairs_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, BYTES, HALF>;
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
    depthwise::pairs_kernel<T, R, S, Stride, TP, TPT, TQ, CB, STAGES, BYTES, HALF><<<grid, 256, Shape::kBytes, stream>>>(
        p, tiling, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
