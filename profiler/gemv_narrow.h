// Matrix-vector kernels for GEMMs with few rows whose K is even but no multiple of 8: the
// squeeze-excite 1x1 convolutions on 1x1 images of RegNet and EfficientNet (84, 222 or 30 input
// channels), where a row of B starts on a 4-byte boundary only, so gemv.h's 16-byte loads do not
// apply. The same scheme as gemv.h (each CTA computes Rows output columns for every row of A, its
// Threads threads stride over K, Unroll x Rows loads of B in flight, then a reduction by shuffles
// and shared memory), over pairs of halves (4-byte loads). fp16 in and out, fp32 accumulation.
//
// kernelgen::GemvNarrow<MaxM, Rows, Threads, Unroll> is a kernel type for DirectOperation
// (direct_adapter.h): can_implement(problem) and launch(problem, binding, stream).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "operation.h"

namespace kernelgen {
namespace gemv_narrow {

template <int MaxM, int Rows, int Threads, int Unroll>
__global__ void __launch_bounds__(Threads)
    kernel(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ d, int m, int n, int k) {
  constexpr int kWarps = Threads / 32;
  const int n0 = blockIdx.x * Rows;
  const int pairs = k / 2;  // 4-byte pairs of halves per row
  const __half2* a2 = reinterpret_cast<const __half2*>(a);
  const __half2* b2 = reinterpret_cast<const __half2*>(b);
  const __half2* rows[Rows];  // rows past n read row n - 1 (in bounds) and are never written
#pragma unroll
  for (int r = 0; r < Rows; ++r) rows[r] = b2 + size_t(min(n0 + r, n - 1)) * pairs;

  float acc[MaxM][Rows];
#pragma unroll
  for (int i = 0; i < MaxM; ++i) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) acc[i][r] = 0.0f;
  }
  auto consume = [&](const __half2 (&bv)[Rows], int c) {
#pragma unroll
    for (int i = 0; i < MaxM; ++i) {
      if (i < m) {
        const float2 af = __half22float2(__ldg(a2 + size_t(i) * pairs + c));
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
          const float2 bf = __half22float2(bv[r]);
          acc[i][r] = fmaf(af.y, bf.y, fmaf(af.x, bf.x, acc[i][r]));
        }
      }
    }
  };

  int c = threadIdx.x;
  for (; c + (Unroll - 1) * Threads < pairs; c += Unroll * Threads) {
    __half2 bv[Unroll][Rows];  // every load of this step issued before any is used
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) bv[u][r] = __ldcs(rows[r] + c + u * Threads);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) consume(bv[u], c + u * Threads);
  }
  for (; c < pairs; c += Threads) {
    __half2 bv[Rows];
#pragma unroll
    for (int r = 0; r < Rows; ++r) bv[r] = __ldcs(rows[r] + c);
    consume(bv, c);
  }

  __shared__ float partial[kWarps][MaxM * Rows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < MaxM; ++i) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      float v = acc[i][r];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][i * Rows + r] = v;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < MaxM * Rows; idx += Threads) {
    const int i = idx / Rows, r = idx % Rows;
    if (i < m && n0 + r < n) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][idx];
      d[size_t(i) * n + n0 + r] = __float2half_rn(sum);
    }
  }
}

}  // namespace gemv_narrow

template <int MaxM, int Rows, int Threads, int Unroll>
struct GemvNarrow {
  static_assert(MaxM >= 1 && Rows >= 1 && Unroll >= 1, "MaxM, Rows and Unroll must be positive");
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
    if (p.c % 2) return "K (the input channels) must be even for 4-byte loads";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const int m = p.n * p.p() * p.q(), n = p.k, k = p.c;
    gemv_narrow::kernel<MaxM, Rows, Threads, Unroll><<<(n + Rows - 1) / Rows, Threads, 0, stream>>>(
        static_cast<const __half*>(b.x), static_cast<const __half*>(b.w), static_cast<__half*>(b.y), m, n, k);
  }
};

}  // namespace kernelgen
