// Matrix-vector kernels for GEMMs of up to 32 rows, a lane a row: D (m x n) = A (m x k) B^T, B
// n x k row-major, fp16 in and out, fp32 accumulation. The squeeze-excite 1x1 convolutions on 1x1
// images at batch 32 (A: the 32 images' pooled channels), where gemv.h's scheme (threads over K,
// every row of A in each thread's sums) spends its time reducing 32 x Rows sums across the CTA.
//
// Here lane i of every warp keeps row i's sums for the CTA's Rows output columns, so a warp needs
// no reduction: each step it loads a chunk of its row of A (lanes past m read row m - 1 and write
// nothing) and the same chunk of each of the Rows rows of B (one address for the whole warp: a
// broadcast), Unroll steps in flight. The CTA's warps take every kWarps-th chunk of K and add their
// sums through shared memory; the CTA writes Rows x m outputs. The grid is ceil(n / Rows) CTAs. A
// chunk is Vector halves: 8 (16-byte loads, K a multiple of 8) or 2 (4-byte loads, K even).
//
// kernelgen::GemvLanes<MaxM, Rows, Threads, Unroll> (16-byte chunks) and GemvLanesNarrow<...>
// (4-byte chunks) are kernel types for DirectOperation (direct_adapter.h), MaxM = 32.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "operation.h"

namespace kernelgen {
namespace gemv_lanes {

template <int Vector>
struct Chunk;
template <>
struct Chunk<8> {
  using type = uint4;
};
template <>
struct Chunk<2> {
  using type = __half2;
};

// acc += the dot product of the halves of a and b, in fp32.
__device__ __forceinline__ void dot(const __half2& a, const __half2& b, float& acc) {
  const float2 af = __half22float2(a), bf = __half22float2(b);
  acc = fmaf(af.x, bf.x, acc);
  acc = fmaf(af.y, bf.y, acc);
}

__device__ __forceinline__ void dot(const uint4& a, const uint4& b, float& acc) {
  const __half2* a2 = reinterpret_cast<const __half2*>(&a);
  const __half2* b2 = reinterpret_cast<const __half2*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) dot(a2[i], b2[i], acc);
}

template <int Rows, int Threads, int Unroll, int Vector>
__global__ void __launch_bounds__(Threads)
    kernel(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ d, int m, int n, int k) {
  using C = typename Chunk<Vector>::type;
  constexpr int kWarps = Threads / 32;
  const int n0 = blockIdx.x * Rows, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = k / Vector;
  const C* row = reinterpret_cast<const C*>(a) + size_t(min(lane, m - 1)) * chunks;
  const C* rows[Rows];  // rows past n read row n - 1 (in bounds) and are never written
#pragma unroll
  for (int r = 0; r < Rows; ++r) rows[r] = reinterpret_cast<const C*>(b) + size_t(min(n0 + r, n - 1)) * chunks;

  float acc[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0f;
  int c = warp;
  for (; c + (Unroll - 1) * kWarps < chunks; c += Unroll * kWarps) {
    C av[Unroll], bv[Unroll][Rows];  // every load of this step issued before any is used
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      av[u] = __ldg(row + c + u * kWarps);
#pragma unroll
      for (int r = 0; r < Rows; ++r) bv[u][r] = __ldg(rows[r] + c + u * kWarps);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) dot(av[u], bv[u][r], acc[r]);
    }
  }
  for (; c < chunks; c += kWarps) {
    const C av = __ldg(row + c);
#pragma unroll
    for (int r = 0; r < Rows; ++r) dot(av, __ldg(rows[r] + c), acc[r]);
  }

  __shared__ float partial[kWarps][32][Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) partial[warp][lane][r] = acc[r];
  __syncthreads();
  for (int idx = threadIdx.x; idx < 32 * Rows; idx += Threads) {
    const int i = idx / Rows, r = idx % Rows;  // consecutive threads: consecutive columns of a row
    if (i < m && n0 + r < n) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][i][r];
      d[size_t(i) * n + n0 + r] = __float2half_rn(sum);
    }
  }
}

}  // namespace gemv_lanes

template <int MaxM, int Rows, int Threads, int Unroll, int Vector>
struct GemvLanesOf {
  static_assert(MaxM == 32, "a lane a row of A: 32 rows");
  static_assert(Rows >= 1 && Unroll >= 1, "Rows and Unroll must be positive");
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "Threads: whole warps, at most 1024");
  static constexpr int kMaxM = MaxM;
  static constexpr int kRows = Rows;
  static constexpr int kThreads = Threads;

  // The GEMM a problem is (m = N*P*Q, n = K, k = C), if it is one this kernel runs; empty if so.
  static std::string can_implement(const Conv2dProblem& p) {
    bool gemm = p.r == 1 && p.s == 1 && p.pad_h == 0 && p.pad_w == 0 && p.dilation_h == 1 && p.dilation_w == 1 &&
                ((p.stride_h == 1 && p.stride_w == 1) || (p.h == 1 && p.w == 1));
    if (!gemm) return "not a GEMM: needs a 1x1, stride-1, unpadded convolution";
    long long m = 1LL * p.n * p.p() * p.q();
    if (m > MaxM) return "a matrix-vector kernel for at most " + std::to_string(MaxM) + " rows, not " + std::to_string(m);
    if (p.c % Vector)
      return Vector == 8 ? "K (the input channels) must be a multiple of 8 for 16-byte loads"
                         : "K (the input channels) must be even for 4-byte loads";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const int m = p.n * p.p() * p.q(), n = p.k, k = p.c;
    gemv_lanes::kernel<Rows, Threads, Unroll, Vector><<<(n + Rows - 1) / Rows, Threads, 0, stream>>>(
        static_cast<const __half*>(b.x), static_cast<const __half*>(b.w), static_cast<__half*>(b.y), m, n, k);
  }
};

template <int MaxM, int Rows, int Threads, int Unroll>
using GemvLanes = GemvLanesOf<MaxM, Rows, Threads, Unroll, 8>;
template <int MaxM, int Rows, int Threads, int Unroll>
using GemvLanesNarrow = GemvLanesOf<MaxM, Rows, Threads, Unroll, 2>;

}  // namespace kernelgen
