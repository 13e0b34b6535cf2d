// GEMMs of few columns over a short reduction, D (m x n) = A (m x k) B^T with k <= KMAX and
// n <= NMAX of any value, m any (ConViT's positional projection: m = 32 * 196 * 196, n = 4, k = 3,
// ten a forward pass): a product bound by reading A and writing D once, which a tensor-core tile
// (C padded to 8, N to 32) spends most of its work and stores on padding. fp16 in and out, fp32
// sums, on the CUDA cores.
//
// A CTA takes a block of BM = THREADS * ROWS consecutive rows: A's block (BM * k halves, one
// contiguous run of memory) comes into shared memory by 16-byte loads, B (n x k) too; each thread
// computes ROWS rows (thread t: rows t, t + THREADS, ...), its n sums of each in fp32, into a
// shared block of D (BM * n halves), which the CTA stores by 16-byte stores. A block's runs start
// at row0 * k and row0 * n halves, 16-byte aligned (BM a multiple of 8, A and D 16-byte aligned);
// the last block's tail is copied by 2-byte accesses.
//
// kernelgen::GemmThin<KMAX, NMAX, ROWS, THREADS> is a kernel type for DirectOperation
// (direct_adapter.h): the GEMM as the profiler poses it, a 1x1 stride-1 unpadded convolution of
// m = N*P*Q pixels, n = K output channels, k = C input channels.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "operation.h"

namespace kernelgen {
namespace gemm_thin {

// `count` halves from `from` (global, 16-byte aligned) to `to` (shared, 16-byte aligned) by the
// CTA's threads: whole 16-byte chunks, then the tail half by half.
template <int THREADS>
__device__ __forceinline__ void copy_in(__half* to, const __half* from, long long count) {
  const long long chunks = count / 8;
  for (long long i = threadIdx.x; i < chunks; i += THREADS)
    reinterpret_cast<uint4*>(to)[i] = __ldg(reinterpret_cast<const uint4*>(from) + i);
  for (long long i = chunks * 8 + threadIdx.x; i < count; i += THREADS) to[i] = from[i];
}

template <int KMAX, int NMAX, int ROWS, int THREADS>
__global__ void __launch_bounds__(THREADS) kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                                  __half* __restrict__ d, long long m, int n, int k) {
  constexpr int kBlock = THREADS * ROWS;
  __shared__ __align__(16) __half a_block[kBlock * KMAX];
  __shared__ __align__(16) __half d_block[kBlock * NMAX];
  __shared__ float b_shared[NMAX * KMAX];
  const long long row0 = (long long)blockIdx.x * kBlock;
  const int rows = (int)min((long long)kBlock, m - row0);
  for (int i = threadIdx.x; i < n * k; i += THREADS) b_shared[i] = __half2float(b[i]);
  copy_in<THREADS>(a_block, a + row0 * k, (long long)rows * k);
  __syncthreads();
  for (int j = 0; j < ROWS; ++j) {
    const int row = threadIdx.x + j * THREADS;
    if (row < rows) {
      float x[KMAX];
#pragma unroll
      for (int c = 0; c < KMAX; ++c) x[c] = c < k ? __half2float(a_block[row * k + c]) : 0.0f;
#pragma unroll
      for (int o = 0; o < NMAX; ++o) {
        if (o < n) {
          float sum = 0.0f;
#pragma unroll
          for (int c = 0; c < KMAX; ++c) sum += c < k ? x[c] * b_shared[o * k + c] : 0.0f;
          d_block[row * n + o] = __float2half_rn(sum);
        }
      }
    }
  }
  __syncthreads();
  // D's block: rows * n halves at row0 * n, by 16-byte stores, then the tail
  const long long count = (long long)rows * n, chunks = count / 8;
  __half* const out = d + row0 * n;
  for (long long i = threadIdx.x; i < chunks; i += THREADS)
    reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(d_block)[i];
  for (long long i = chunks * 8 + threadIdx.x; i < count; i += THREADS) out[i] = d_block[i];
}

}  // namespace gemm_thin

template <int KMAX, int NMAX, int ROWS, int THREADS>
struct GemmThin {
  static_assert(KMAX >= 1 && KMAX <= 16 && NMAX >= 1 && NMAX <= 16, "a reduction and columns of 1 to 16");
  static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024, "THREADS: whole warps, at most 1024");
  static_assert(THREADS * ROWS % 8 == 0, "a block of rows a multiple of 8: its runs of A and D start 16-byte aligned");
  static_assert(THREADS * ROWS * (KMAX + NMAX) * 2 + NMAX * KMAX * 4 <= 48 * 1024, "the blocks fit 48 KiB of shared memory");

  // The GEMM a problem is (m = N*P*Q, n = K, k = C), if it is one this kernel runs; empty if so.
  static std::string can_implement(const Conv2dProblem& p) {
    bool gemm = p.r == 1 && p.s == 1 && p.pad_h == 0 && p.pad_w == 0 && p.dilation_h == 1 && p.dilation_w == 1 &&
                ((p.stride_h == 1 && p.stride_w == 1) || (p.h == 1 && p.w == 1));
    if (!gemm) return "not a GEMM: needs a 1x1, stride-1, unpadded convolution";
    if (p.c > KMAX) return "a thin GEMM of a reduction of at most " + std::to_string(KMAX) + ", not " + std::to_string(p.c);
    if (p.k > NMAX) return "a thin GEMM of at most " + std::to_string(NMAX) + " columns, not " + std::to_string(p.k);
    const long long blocks = (1LL * p.n * p.p() * p.q() + THREADS * ROWS - 1) / (THREADS * ROWS);
    if (blocks > 2147483647LL) return "more blocks of rows than a grid holds";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const long long m = 1LL * p.n * p.p() * p.q();
    const long long blocks = (m + THREADS * ROWS - 1) / (THREADS * ROWS);
    if (blocks == 0) return;
    gemm_thin::kernel<KMAX, NMAX, ROWS, THREADS><<<(unsigned)blocks, THREADS, 0, stream>>>(
        static_cast<const __half*>(b.x), static_cast<const __half*>(b.w), static_cast<__half*>(b.y), m, p.k, p.c);
  }
};

}  // namespace kernelgen
