// Matrix-vector kernels on tensor cores for GEMMs of up to 64 rows: D (m x n) = A (m x k) B^T, B
// n x k row-major, fp16 in and out, fp32 accumulation. The squeeze-excite 1x1 convolutions on 1x1
// images (A: the images' pooled channels) at batch 1 to 64, where gemv_lanes.h's lanes spend two
// FFMA and a conversion on each pair of products and walk K in many short steps.
//
// A warp computes MaxM x Rows outputs with mma.sync m16n8k16 (MaxM / 16 tiles of rows, Rows / 8
// of columns), loading its operands from global memory straight into the fragments' registers.
// The fragments' K slots may hold any K index, as long as A's and B's hold the same: lane (g, t)
// (g = lane / 4, t = lane % 4) loads Vector consecutive halves of rows g and g + 8 of A and of
// column g of B at K = 4 * Vector * block + Vector * t, so a load of 16 bytes (Vector 8, K a
// multiple of 8) or of 4 (Vector 2, K even) fills the slots of half an mma step (Vector 2) or of
// two; K past the end loads zeros. A warp keeps Unroll blocks of loads in flight before its mma
// steps; the CTA's warps take every kWarps-th group of Unroll blocks and add their sums through
// shared memory. Rows of A past m read row m - 1 and columns past n read column n - 1 (in
// bounds), and neither is written. The grid is ceil(n / Rows) CTAs.
//
// kernelgen::GemvMma<MaxM, Rows, Threads, Unroll> (16-byte loads) and GemvMmaNarrow<...> (4-byte
// loads) are kernel types for DirectOperation (direct_adapter.h). The GEMM test and the warps'
// reduction repeat gemv_lanes.h's and gemv_staged.h's rather than sharing them: there they are
// inline in a kernel and a type of 32 rows only, and moving them out would change those headers,
// whose kernels' measured rows count only while the headers they include stay as measured.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gemv_lanes.h"  // gemv_lanes::Chunk
#include "operation.h"

namespace kernelgen {
namespace gemv_mma {

// The 32-bit words of a load (gemv_lanes::Chunk<Vector>: 16 or 4 bytes), in K order.
__host__ __device__ inline void words(const uint4& v, uint32_t* w) { w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w; }
__host__ __device__ inline void words(const __half2& v, uint32_t* w) { w[0] = *reinterpret_cast<const uint32_t*>(&v); }

// The lanes' index functions (tests/gemv_mma_model.cu runs a kernel's warps on the CPU with them).
// Row of a tile of rows that lane (g, t)'s load h (0, 1) reads: g and g + 8.
__host__ __device__ constexpr int a_row(int tile, int g, int h) { return tile * 16 + g + 8 * h; }
// The first of the Vector consecutive K that lane (g, t) loads in a block: the block's 4 x Vector
// K, a quarter a lane of the row.
template <int Vector>
__host__ __device__ constexpr int first_k(int block, int t) {
  return block * 4 * Vector + Vector * t;
}
// The A fragment of mma step s from a lane's words of rows g (lo) and g + 8 (hi) of a group: slots
// 2t, 2t + 1 the step's first word, slots 2t + 8, 2t + 9 its second.
__host__ __device__ inline void a_fragment(const uint32_t* lo, const uint32_t* hi, int s, uint32_t (&a)[4]) {
  a[0] = lo[2 * s], a[1] = hi[2 * s], a[2] = lo[2 * s + 1], a[3] = hi[2 * s + 1];
}
// The B fragment of mma step s from a lane's words of column g: the same slots.
__host__ __device__ inline void b_fragment(const uint32_t* col, int s, uint32_t (&b)[2]) {
  b[0] = col[2 * s], b[1] = col[2 * s + 1];
}
// Row and column of a tile that sum e (0..3) of lane (g, t) holds.
__host__ __device__ constexpr int sum_row(int g, int e) { return g + 8 * (e / 2); }
__host__ __device__ constexpr int sum_column(int t, int e) { return 2 * t + e % 2; }

// c += a b (m16n8k16, A row-major, B column-major, fp16 in, fp32 sums).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int MaxM, int Rows, int Threads, int Unroll, int Vector>
__global__ void __launch_bounds__(Threads)
    kernel(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ d, int m, int n, int k) {
  using L = typename gemv_lanes::Chunk<Vector>::type;
  constexpr int kWarps = Threads / 32, kMt = MaxM / 16, kNt = Rows / 8;
  constexpr int kWords = Vector / 2;        // 32-bit words a load brings
  constexpr int kStream = Unroll * kWords;  // a lane's words of one operand row, each group
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * Rows;

  const __half* arow[kMt][2];  // rows g and g + 8 of each tile of rows
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) arow[mt][h] = a + size_t(min(a_row(mt, g, h), m - 1)) * k;
  }
  const __half* brow[kNt];  // column g of each tile of columns
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt) brow[nt] = b + size_t(min(n0 + nt * 8 + g, n - 1)) * k;

  float acc[kMt][kNt][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }

  const int blocks = (k + 4 * Vector - 1) / (4 * Vector);
  for (int b0 = warp * Unroll; b0 < blocks; b0 += kWarps * Unroll) {
    uint32_t aw[kMt][2][kStream], bw[kNt][kStream];  // every load of the group issued before any mma
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int kk = first_k<Vector>(b0 + u, t);
      const bool in = kk < k;  // K a multiple of Vector: a load is all in or all out
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const L v = in ? __ldg(reinterpret_cast<const L*>(arow[mt][h] + kk)) : L{};
          words(v, &aw[mt][h][u * kWords]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const L v = in ? __ldg(reinterpret_cast<const L*>(brow[nt] + kk)) : L{};
        words(v, &bw[nt][u * kWords]);
      }
    }
#pragma unroll
    for (int s = 0; s < kStream / 2; ++s) {
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        uint32_t af[4];
        a_fragment(aw[mt][0], aw[mt][1], s, af);
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt) {
          uint32_t bf[2];
          b_fragment(bw[nt], s, bf);
          mma(acc[mt][nt], af, bf);
        }
      }
    }
  }

  // sums: c0, c1 at row g, columns 2t, 2t + 1; c2, c3 at row g + 8
  __shared__ float partial[kWarps][MaxM][Rows];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp][mt * 16 + sum_row(g, e)][nt * 8 + sum_column(t, e)] = acc[mt][nt][e];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < MaxM * Rows; idx += Threads) {
    const int i = idx / Rows, r = idx % Rows;  // consecutive threads: consecutive columns of a row
    if (i < m && n0 + r < n) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][i][r];
      d[size_t(i) * n + n0 + r] = __float2half_rn(sum);
    }
  }
}

}  // namespace gemv_mma

template <int MaxM, int Rows, int Threads, int Unroll, int Vector>
struct GemvMmaOf {
  static_assert(MaxM % 16 == 0 && MaxM >= 16 && MaxM <= 64, "MaxM: 16, 32, 48 or 64 rows (tiles of 16)");
  static_assert(Rows % 8 == 0 && Rows >= 8 && Rows <= 32, "Rows: 8 to 32 columns, a multiple of 8");
  static_assert(Vector == 8 || Vector == 2, "loads of 8 or 2 halves");
  static_assert(Unroll >= 1 && Unroll * Vector % 4 == 0, "Unroll blocks of loads make whole mma steps");
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "Threads: whole warps, at most 1024");
  static_assert(Threads / 32 * MaxM * Rows * 4 <= 48 * 1024, "the warps' sums must fit 48 KiB of shared memory");
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
    gemv_mma::kernel<MaxM, Rows, Threads, Unroll, Vector><<<(n + Rows - 1) / Rows, Threads, 0, stream>>>(
        static_cast<const __half*>(b.x), static_cast<const __half*>(b.w), static_cast<__half*>(b.y), m, n, k);
  }
};

template <int MaxM, int Rows, int Threads, int Unroll>
using GemvMma = GemvMmaOf<MaxM, Rows, Threads, Unroll, 8>;
template <int MaxM, int Rows, int Threads, int Unroll>
using GemvMmaNarrow = GemvMmaOf<MaxM, Rows, Threads, Unroll, 2>;

}  // namespace kernelgen
