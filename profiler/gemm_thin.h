// GEMMs of few columns over a short reduction, D (m x n) = A (m x k) B^T with k <= KMAX and
// n <= NMAX of any value (1 to 64), m any: ConViT's positional projection (m = 32 * 196 * 196,
// n = 4, k = 3, ten a forward pass) and the 1x1 layers of mobile networks of few and odd channel
// counts (MixNet's 36 -> 12 on 56x56, ShuffleNetV2's 58 -> 58, EfficientNet's 32 -> 16 on
// 112x112): products bound by reading A and writing D once, which a tensor-core tile (C padded to
// 8, N to a tile of 16 or more) spends on padding and narrow copies. fp16 in and out, fp32 sums,
// on the CUDA cores.
//
// A CTA takes a block of BM = THREADS * ROWS consecutive rows: A's block (BM * k halves, one
// contiguous run of memory) comes by 16-byte loads into shared memory, each row at a stride of
// kKS halves (an odd number of 4-byte words: a warp's threads read their rows' pairs of columns
// from 32 different banks), zeros past k; B (n x k) is kept transposed in fp32 ([c][o], zeros past
// n and k) so that a thread reads four outputs' weights of one column in one broadcast load. Each
// thread computes ROWS rows (thread t: rows t, t + THREADS, ...), all kNP (NMAX rounded to 4) sums
// of each in fp32 registers, two columns of A a step, the weights it loads shared by its ROWS
// rows; then writes them into a shared block of D (rows at an odd word stride, where A's block
// was), which the CTA stores by 16-byte stores. A block's runs start at row0 * k and row0 * n
// halves, 16-byte aligned (BM a multiple of 8, A and D 16-byte aligned); each run's tail is
// copied by 2-byte accesses.
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

// A row stride of at least `columns` halves (rounded to pairs) that is an odd number of 4-byte words.
__host__ __device__ constexpr int odd_word_stride(int columns) {
  return (columns + 1) / 2 % 2 ? (columns + 1) / 2 * 2 : (columns + 1) / 2 * 2 + 2;
}

template <int KMAX, int NMAX, int ROWS, int THREADS>
struct Shape {
  static constexpr int kBlock = THREADS * ROWS;       // rows a CTA
  static constexpr int kKP = (KMAX + 1) / 2 * 2;      // columns of A a thread steps over, in pairs
  static constexpr int kNP = (NMAX + 3) / 4 * 4;      // sums a row, in fours
  static constexpr int kKS = odd_word_stride(KMAX);   // A's row stride in shared memory (halves)
  static constexpr int kNS = odd_word_stride(NMAX);   // D's
  static constexpr int kRowsBytes = (kBlock * (kKS > kNS ? kKS : kNS)) * 2;  // A's block, then D's
  static constexpr int kBytes = kRowsBytes + kKP * kNP * 4;                   // and B, fp32
};

// The run of `count` halves at `from` (global, 16-byte aligned), element e of it to
// to[(e / width) * stride + e % width] in shared memory: by 16-byte loads, then the tail.
template <int THREADS>
__device__ __forceinline__ void scatter_in(__half* to, const __half* from, long long count, int width, int stride) {
  const int chunks = int(count / 8);
  for (int i = threadIdx.x; i < chunks; i += THREADS) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(from) + i);
    const __half* h = reinterpret_cast<const __half*>(&v);
    int row = (8 * i) / width, column = (8 * i) % width;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      to[row * stride + column] = h[j];
      if (++column == width) column = 0, ++row;
    }
  }
  for (int e = chunks * 8 + threadIdx.x; e < count; e += THREADS) to[(e / width) * stride + e % width] = from[e];
}

// The reverse: the run of `count` halves at `to` (global, 16-byte aligned) from shared memory.
template <int THREADS>
__device__ __forceinline__ void gather_out(__half* to, const __half* from, long long count, int width, int stride) {
  const int chunks = int(count / 8);
  for (int i = threadIdx.x; i < chunks; i += THREADS) {
    uint4 v;
    __half* h = reinterpret_cast<__half*>(&v);
    int row = (8 * i) / width, column = (8 * i) % width;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      h[j] = from[row * stride + column];
      if (++column == width) column = 0, ++row;
    }
    reinterpret_cast<uint4*>(to)[i] = v;
  }
  for (int e = chunks * 8 + threadIdx.x; e < count; e += THREADS) to[e] = from[(e / width) * stride + e % width];
}

template <int KMAX, int NMAX, int ROWS, int THREADS>
__global__ void __launch_bounds__(THREADS) kernel(const __half* __restrict__ a, const __half* __restrict__ b,
                                                  __half* __restrict__ d, long long m, int n, int k) {
  using Shape = gemm_thin::Shape<KMAX, NMAX, ROWS, THREADS>;
  constexpr int kKP = Shape::kKP, kNP = Shape::kNP, kKS = Shape::kKS, kNS = Shape::kNS;
  __shared__ __align__(16) unsigned char rows_memory[Shape::kRowsBytes];
  __shared__ __align__(16) float b_t[kKP * kNP];
  __half* const block = reinterpret_cast<__half*>(rows_memory);
  const long long row0 = (long long)blockIdx.x * Shape::kBlock;
  const int rows = (int)min((long long)Shape::kBlock, m - row0);

  for (int i = threadIdx.x; i < kKP * kNP; i += THREADS) {
    const int c = i / kNP, o = i % kNP;
    b_t[i] = c < k && o < n ? __half2float(b[o * k + c]) : 0.0f;
  }
  scatter_in<THREADS>(block, a + row0 * k, (long long)rows * k, k, kKS);
  // this thread's rows: zeros in the columns past k (read with the last pair when k is odd)
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    const int row = threadIdx.x + j * THREADS;
    for (int c = k; c < kKP; ++c) block[row * kKS + c] = __float2half(0.0f);
  }
  __syncthreads();

  float acc[ROWS][kNP];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
#pragma unroll
    for (int o = 0; o < kNP; ++o) acc[j][o] = 0.0f;
  }
#pragma unroll
  for (int c = 0; c < kKP; c += 2) {
    if (c < k) {
      float2 x[ROWS];
#pragma unroll
      for (int j = 0; j < ROWS; ++j)
        x[j] = __half22float2(*reinterpret_cast<const __half2*>(block + (threadIdx.x + j * THREADS) * kKS + c));
      const float4* const w0 = reinterpret_cast<const float4*>(b_t + c * kNP);
      const float4* const w1 = reinterpret_cast<const float4*>(b_t + (c + 1) * kNP);
#pragma unroll
      for (int o = 0; o < kNP / 4; ++o) {
        const float4 u = w0[o], v = w1[o];
#pragma unroll
        for (int j = 0; j < ROWS; ++j) {
          acc[j][4 * o + 0] = fmaf(x[j].y, v.x, fmaf(x[j].x, u.x, acc[j][4 * o + 0]));
          acc[j][4 * o + 1] = fmaf(x[j].y, v.y, fmaf(x[j].x, u.y, acc[j][4 * o + 1]));
          acc[j][4 * o + 2] = fmaf(x[j].y, v.z, fmaf(x[j].x, u.z, acc[j][4 * o + 2]));
          acc[j][4 * o + 3] = fmaf(x[j].y, v.w, fmaf(x[j].x, u.w, acc[j][4 * o + 3]));
        }
      }
    }
  }
  __syncthreads();  // every thread has read A's block: D's takes its place
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    const int row = threadIdx.x + j * THREADS;
#pragma unroll
    for (int o = 0; o < kNP; o += 2)
      if (o < n && row < rows)
        *reinterpret_cast<__half2*>(block + row * kNS + o) = __floats2half2_rn(acc[j][o], acc[j][o + 1]);
  }
  __syncthreads();
  gather_out<THREADS>(d + row0 * n, block, (long long)rows * n, n, kNS);
}

}  // namespace gemm_thin

template <int KMAX, int NMAX, int ROWS, int THREADS>
struct GemmThin {
  static_assert(KMAX >= 1 && KMAX <= 64 && NMAX >= 1 && NMAX <= 64, "a reduction and columns of 1 to 64");
  static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024, "THREADS: whole warps, at most 1024");
  static_assert(THREADS * ROWS % 8 == 0, "a block of rows a multiple of 8: its runs of A and D start 16-byte aligned");
  static_assert(gemm_thin::Shape<KMAX, NMAX, ROWS, THREADS>::kBytes <= 48 * 1024, "the blocks fit 48 KiB of shared memory");

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
