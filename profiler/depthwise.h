// Depthwise convolution kernels of this project (grouped.h: groups = C = K): NHWC activations,
// K x R x S filters (KRS(C/groups) with C/groups = 1), NPQK output, 16-bit elements (fp16 or
// bf16), fp32 accumulation. Each output channel k reads input channel k alone, R*S products an
// output: a depthwise layer is bound by memory, and its floor is its bytes moved once.
//
// A CTA computes a tile of TP output rows by TQ * (256 / (CB * TP)) output columns for CB * 8
// consecutive channels. It first copies the input pixels the tile reads ((TP - 1) * Stride + R
// rows by (TILE_Q - 1) * Stride + S columns, CB 16-byte vectors each; zeros outside the image) and
// its channels' R x S taps into shared memory, every thread issuing its 16-byte loads at once,
// so that each input byte is read from memory about once (the tiles' halos aside); then each
// thread computes TQ consecutive outputs of one row for 8 channels from shared memory, keeping a
// filter row's input window in registers.
//
// kernelgen::Depthwise<T, R, S, Stride, TP, TQ, CB> is a kernel type for DepthwiseOperation
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

template <int R, int S, int Stride, int TP, int TQ, int CB>
struct Tile {
  static constexpr int kSlots = 256 / CB;             // threads along the pixels
  static constexpr int kSegments = kSlots / TP;       // thread column runs a tile row
  static constexpr int kQ = kSegments * TQ;           // output columns a tile
  static constexpr int kInP = (TP - 1) * Stride + R;  // input rows a tile reads
  static constexpr int kInQ = (kQ - 1) * Stride + S;  // input columns a tile reads
  static constexpr int kWindow = (TQ - 1) * Stride + S;
  static constexpr int kBytes = (kInP * kInQ + R * S) * CB * 16;  // shared memory: input and taps
  static_assert(kSlots % TP == 0, "the CTA's threads cover its tile's rows evenly");
  static_assert(kBytes <= 48 * 1024, "the tile's input and taps fit 48 KiB of shared memory");
};

template <typename T, int R, int S, int Stride, int TP, int TQ, int CB>
__global__ void __launch_bounds__(256) depthwise_kernel(Conv2dProblem p, int P, int Q, int tiles_p, int tiles_q,
                                                        const T* __restrict__ x, const T* __restrict__ w,
                                                        T* __restrict__ y) {
  using Shape = Tile<R, S, Stride, TP, TQ, CB>;
  __shared__ alignas(16) uint4 input[Shape::kInP * Shape::kInQ][CB];
  __shared__ alignas(16) T taps[R * S][CB * 8];
  const int c_base = blockIdx.y * CB * 8;
  const int channels = min(CB * 8, p.c - c_base);
  int tile = blockIdx.x;
  const int tq = tile % tiles_q;
  tile /= tiles_q;
  const int tp = tile % tiles_p;
  const int n = tile / tiles_p;
  const int p0 = tp * TP, q0 = tq * Shape::kQ;
  const int h0 = p0 * Stride - p.pad_h, w0 = q0 * Stride - p.pad_w;
  const int tid = threadIdx.x;
  // The tile's input, every load issued before any is used; zeros outside the image or C.
  for (int v = tid; v < Shape::kInP * Shape::kInQ * CB; v += 256) {
    const int cv = v % CB, pixel = v / CB;
    const int h = h0 + pixel / Shape::kInQ, col = w0 + pixel % Shape::kInQ, c = cv * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (h >= 0 && h < p.h && col >= 0 && col < p.w && c < channels)
      value = *reinterpret_cast<const uint4*>(x + ((size_t(n) * p.h + h) * p.w + col) * p.c + c_base + c);
    input[pixel][cv] = value;
  }
  // The CTA's channels' taps, [r][s][c]: the filter is K x R x S, so a channel's taps are contiguous.
  for (int i = tid; i < CB * 8 * R * S; i += 256) {
    const int c = i / (R * S), rs = i % (R * S);
    taps[rs][c] = c < channels ? w[size_t(c_base + c) * (R * S) + rs] : T(0.0f);
  }
  __syncthreads();
  const int cv = tid % CB, slot = tid / CB;
  const int row = slot / Shape::kSegments, segment = slot % Shape::kSegments;
  const int out_p = p0 + row, out_q = q0 + segment * TQ;
  if (out_p >= P || out_q >= Q || cv * 8 >= channels) return;
  float acc[TQ][8];
#pragma unroll
  for (int t = 0; t < TQ; ++t) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[t][e] = 0.0f;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int in_row = row * Stride + r;
    float in[Shape::kWindow][8];
#pragma unroll
    for (int j = 0; j < Shape::kWindow; ++j)
      Vector8<T>::to_float(input[in_row * Shape::kInQ + segment * TQ * Stride + j][cv], in[j]);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      float tap[8];
      Vector8<T>::to_float(*reinterpret_cast<const uint4*>(&taps[r * S + s][cv * 8]), tap);
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[t][e] = fmaf(in[t * Stride + s][e], tap[e], acc[t][e]);
      }
    }
  }
  T* y_row = y + (size_t(n) * P + out_p) * Q * p.k + c_base + cv * 8;
#pragma unroll
  for (int t = 0; t < TQ; ++t) {
    if (out_q + t < Q) *reinterpret_cast<uint4*>(y_row + size_t(out_q + t) * p.k) = Vector8<T>::from_float(acc[t]);
  }
}

}  // namespace depthwise

template <typename T, int R, int S, int Stride, int TP, int TQ, int CB>
struct Depthwise {
  static_assert(CB == 4 || CB == 8 || CB == 16 || CB == 32, "CB channel vectors a CTA: 4, 8, 16 or 32");
  using Shape = depthwise::Tile<R, S, Stride, TP, TQ, CB>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + Shape::kQ - 1) / Shape::kQ);
    if (tiles > 2147483647LL) return "more tiles than a grid holds";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const int P = p.p(), Q = p.q(), tiles_p = (P + TP - 1) / TP, tiles_q = (Q + Shape::kQ - 1) / Shape::kQ;
    const dim3 grid(unsigned(p.n * tiles_p * tiles_q), unsigned((p.c + CB * 8 - 1) / (CB * 8)));
    depthwise::depthwise_kernel<T, R, S, Stride, TP, TQ, CB><<<grid, 256, 0, stream>>>(
        p, P, Q, tiles_p, tiles_q, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
