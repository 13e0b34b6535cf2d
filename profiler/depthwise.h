// Depthwise convolution kernels of this project (grouped.h: groups = C = K): NHWC activations,
// K x R x S filters (KRS(C/groups) with C/groups = 1), NPQK output, 16-bit elements (fp16 or
// bf16), fp32 accumulation. Each output channel k reads input channel k alone, R*S products an
// output: a depthwise layer is bound by memory, and its floor is its bytes moved once.
//
// A thread computes TQ consecutive output columns of one output row for 8 consecutive channels
// (one 16-byte vector): for each filter row it loads the (TQ - 1) * Stride + S input vectors its
// outputs read, once each, and keeps them in registers while it sums; the filter taps of its
// channels come from shared memory, where the CTA puts its channels' R x S taps as [r][s][c]
// (read from the K x R x S filter once per CTA). A CTA is CB channel vectors (threadIdx.x,
// contiguous 16-byte loads along C) by 256 / CB output tiles (threadIdx.y); blockIdx.y picks the
// CTA's channels, blockIdx.x its tiles (n, p, a run of TQ columns).
//
// kernelgen::Depthwise<T, R, S, Stride, TQ, CB> is a kernel type for DepthwiseOperation
// (depthwise_adapter.h): can_implement(problem, groups) and launch(problem, binding, stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "operation.h"

namespace kernelgen {
namespace depthwise {

template <typename T>
struct Vector8;  // 8 elements of T <-> 8 floats

template <>
struct Vector8<__half> {
  static __device__ __forceinline__ void to_float(const uint4& v, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 t = __half22float2(h[i]);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  }
  static __device__ __forceinline__ uint4 from_float(const float* f) {
    uint4 v;
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    return v;
  }
};

template <>
struct Vector8<__nv_bfloat16> {
  static __device__ __forceinline__ void to_float(const uint4& v, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 t = __bfloat1622float2(h[i]);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  }
  static __device__ __forceinline__ uint4 from_float(const float* f) {
    uint4 v;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return v;
  }
};

template <typename T, int R, int S, int Stride, int TQ, int CB>
__global__ void __launch_bounds__(256) depthwise_kernel(Conv2dProblem p, int P, int Q, int tiles_q, long long tiles,
                                                        const T* __restrict__ x, const T* __restrict__ w,
                                                        T* __restrict__ y) {
  constexpr int kWindow = (TQ - 1) * Stride + S;  // input columns a thread's TQ outputs read in a row
  __shared__ alignas(16) T taps[R * S][CB * 8];
  const int c_base = blockIdx.y * CB * 8;
  const int channels = min(CB * 8, p.c - c_base);
  // The CTA's channels' taps, [r][s][c]: the filter is K x R x S, so a channel's taps are contiguous.
  for (int i = threadIdx.y * CB + threadIdx.x; i < CB * 8 * R * S; i += CB * (256 / CB)) {
    const int c = i / (R * S), rs = i % (R * S);
    taps[rs][c] = c < channels ? w[size_t(c_base + c) * (R * S) + rs] : T(0.0f);
  }
  __syncthreads();
  const long long tile = (long long)blockIdx.x * (256 / CB) + threadIdx.y;
  const int c = c_base + threadIdx.x * 8;
  if (tile >= tiles || c >= p.c) return;
  const int q0 = int(tile % tiles_q) * TQ;
  const long long row = tile / tiles_q;  // n * P + p
  const int out_p = int(row % P), n = int(row / P);
  float acc[TQ][8];
#pragma unroll
  for (int t = 0; t < TQ; ++t) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[t][j] = 0.0f;
  }
  const int w0 = q0 * Stride - p.pad_w;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int h = out_p * Stride - p.pad_h + r;
    if (h < 0 || h >= p.h) continue;
    const T* x_row = x + (size_t(n) * p.h + h) * p.w * p.c + c;
    float in[kWindow][8];
#pragma unroll
    for (int j = 0; j < kWindow; ++j) {
      const int col = w0 + j;
      if (col >= 0 && col < p.w) {
        Vector8<T>::to_float(*reinterpret_cast<const uint4*>(x_row + size_t(col) * p.c), in[j]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) in[j][e] = 0.0f;
      }
    }
#pragma unroll
    for (int s = 0; s < S; ++s) {
      float tap[8];
      Vector8<T>::to_float(*reinterpret_cast<const uint4*>(&taps[r * S + s][threadIdx.x * 8]), tap);
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[t][e] = fmaf(in[t * Stride + s][e], tap[e], acc[t][e]);
      }
    }
  }
  T* y_row = y + (size_t(n) * P + out_p) * Q * p.k + c;
#pragma unroll
  for (int t = 0; t < TQ; ++t) {
    if (q0 + t < Q) *reinterpret_cast<uint4*>(y_row + size_t(q0 + t) * p.k) = Vector8<T>::from_float(acc[t]);
  }
}

}  // namespace depthwise

template <typename T, int R, int S, int Stride, int TQ, int CB>
struct Depthwise {
  static_assert(CB == 8 || CB == 16 || CB == 32, "CB channel vectors a CTA: 8, 16 or 32");

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const int P = p.p(), Q = p.q(), tiles_q = (Q + TQ - 1) / TQ;
    const long long tiles = (long long)p.n * P * tiles_q;
    const dim3 block(CB, 256 / CB);
    const dim3 grid(unsigned((tiles + block.y - 1) / block.y), unsigned((p.c + CB * 8 - 1) / (CB * 8)));
    depthwise::depthwise_kernel<T, R, S, Stride, TQ, CB><<<grid, block, 0, stream>>>(
        p, P, Q, tiles_q, tiles, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
