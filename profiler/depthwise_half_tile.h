// What depthwise_half_first.h's and depthwise_half_each.h's kernels share: a thread's sums of one tile
// in fp16 pairs from the window in shared memory, and their stores; and the tensor map of the
// layer's input whose boxes bring the windows. depthwise_half.h keeps its own copy of both: a kernel's
// hash covers the headers it includes, so depthwise_half.h unchanged keeps its kernels' measured
// rows current.
#pragma once

#include "depthwise_half.h"

namespace kernelgen {
namespace depthwise {

// The thread's TPT x TQ outputs of its two channels (c, c + 1) of the tile at (n, p0, q0): summed
// from `in` (the thread's first 4-byte word of the stage's window, a pixel CB * 4 words) with `tap`
// (the channel pair's R x S taps), kHalf every product added in fp16, kRows each filter row's
// products in fp16 and the rows in fp32; stored where they lie within the layer's P x Q outputs and
// channels.
template <int R, int S, int Stride, int TPT, int TQ, int CB, Sums SUMS, typename Shape>
__device__ __forceinline__ void half_tile(const Conv2dProblem& p, int P, int Q, const __half2* in,
                                          const __half2 (&tap)[R * S], __half* __restrict__ y, int n, int p_base,
                                          int q_base, int c) {
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
    __half* const out = y + ((size_t(n) * P + p_base) * Q + q_base) * p.k + c;
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

// The tensor map of the layer's fp16 NHWC input `x` whose boxes are a tile's window, CB * 8 channels
// of Shape::kInP x Shape::kInQ pixels of one image; false where the driver could not encode it.
template <typename Shape, int CB>
bool half_input_map(CUtensorMap* map, const Conv2dProblem& p, const __half* x) {
  const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
  const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
  const cuuint32_t box[4] = {cuuint32_t(CB * 8), cuuint32_t(Shape::kInQ), cuuint32_t(Shape::kInP), 1};
  const cuuint32_t ones[4] = {1, 1, 1, 1};
  return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<__half*>(x), dims, strides, box,
                              ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace depthwise
}  // namespace kernelgen
