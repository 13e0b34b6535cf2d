// Matrix-vector kernels for GEMMs of up to 32 rows, a lane a row, with A staged in shared memory:
// D (m x n) = A (m x k) B^T, B n x k row-major, fp16 in and out, fp32 accumulation. The
// squeeze-excite 1x1 convolutions on 1x1 images at batch 32 whose rows of A are not 16-byte
// multiples (308, 222 or 84 channels: RegNetY), or whose A is read by many CTAs.
//
// gemv_lanes.h's lanes read their own rows of A from global memory: a warp's load touches 32 rows
// (32 sectors for 4 bytes each with 4-byte chunks, eight times the bytes it uses). Here each CTA
// first copies A (m rows of k halves, consecutive threads consecutive chunks: whole sectors) into
// shared memory, each row padded to an odd number of chunks so that the 32 lanes' rows fall in
// different banks (4-byte chunks; 16-byte chunks: in different 16-byte segments of each quarter
// warp). Then as gemv_lanes.h: lane i of every warp keeps row i's sums for the CTA's Rows output
// columns, each step a chunk of its row (now from shared memory) and the same chunk of each of the
// Rows rows of B (a broadcast), Unroll steps in flight; the warps take every kWarps-th chunk of K
// and add their sums through shared memory. A of more than 48 KiB takes the opt-in shared memory
// (up to 227 KiB less the sums': K up to about 3,500 at 32 rows).
//
// kernelgen::GemvStaged<MaxM, Rows, Threads, Unroll> (16-byte chunks, K a multiple of 8) and
// GemvStagedNarrow<...> (4-byte chunks, K even) are kernel types for DirectOperation
// (direct_adapter.h), MaxM = 32.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gemv_lanes.h"  // gemv_lanes::Chunk, gemv_lanes::dot
#include "operation.h"

namespace kernelgen {
namespace gemv_staged {

constexpr int kSharedMemory = 227 * 1024;  // a CTA's shared memory on SM90, opted in
constexpr int kDefaultSharedMemory = 48 * 1024;

// Chunks a row of A takes in shared memory: its chunks, rounded up to an odd number.
__host__ __device__ inline int pitch(int chunks) { return chunks | 1; }

template <int Rows, int Threads, int Unroll, int Vector>
__global__ void __launch_bounds__(Threads)
    kernel(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ d, int m, int n, int k) {
  using C = typename gemv_lanes::Chunk<Vector>::type;
  constexpr int kWarps = Threads / 32;
  extern __shared__ __align__(16) unsigned char staged[];
  C* as = reinterpret_cast<C*>(staged);
  const int chunks = k / Vector, stride = pitch(chunks);
  const C* ag = reinterpret_cast<const C*>(a);
  for (int idx = threadIdx.x; idx < m * chunks; idx += Threads) {
    const int i = idx / chunks;
    as[i * stride + idx - i * chunks] = __ldg(ag + idx);
  }
  __syncthreads();

  const int n0 = blockIdx.x * Rows, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const C* row = as + min(lane, m - 1) * stride;  // lanes past m read row m - 1 and write nothing
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
      av[u] = row[c + u * kWarps];
#pragma unroll
      for (int r = 0; r < Rows; ++r) bv[u][r] = __ldg(rows[r] + c + u * kWarps);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) gemv_lanes::dot(av[u], bv[u][r], acc[r]);
    }
  }
  for (; c < chunks; c += kWarps) {
    const C av = row[c];
#pragma unroll
    for (int r = 0; r < Rows; ++r) gemv_lanes::dot(av, __ldg(rows[r] + c), acc[r]);
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

}  // namespace gemv_staged

template <int MaxM, int Rows, int Threads, int Unroll, int Vector>
struct GemvStagedOf {
  static_assert(MaxM == 32, "a lane a row of A: 32 rows");
  static_assert(Rows >= 1 && Unroll >= 1, "Rows and Unroll must be positive");
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "Threads: whole warps, at most 1024");
  static constexpr int kMaxM = MaxM;
  static constexpr int kRows = Rows;
  static constexpr int kThreads = Threads;
  static constexpr int kSums = Threads / 32 * 32 * Rows * int(sizeof(float));  // the warps' sums

  // Bytes of shared memory A takes: m rows of k halves, each padded to an odd number of chunks.
  static long long staged_bytes(long long m, int k) {
    return m * gemv_staged::pitch(k / Vector) * Vector * int(sizeof(__half));
  }

  // The GEMM a problem is (m = N*P*Q, n = K, k = C), if it is one this kernel runs; empty if so.
  static std::string can_implement(const Conv2dProblem& p) {
    std::string lanes = GemvLanesOf<MaxM, Rows, Threads, Unroll, Vector>::can_implement(p);
    if (!lanes.empty()) return lanes;
    const long long bytes = staged_bytes(1LL * p.n * p.p() * p.q(), p.c);
    if (bytes + kSums > gemv_staged::kSharedMemory)
      return "A staged in shared memory takes " + std::to_string(bytes) + " bytes (K = " + std::to_string(p.c) +
             "), more than the " + std::to_string(gemv_staged::kSharedMemory - kSums) + " a CTA has beside its sums";
    return {};
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, cudaStream_t stream) {
    const int m = p.n * p.p() * p.q(), n = p.k, k = p.c;
    const int bytes = int(staged_bytes(m, k));
    auto* fn = gemv_staged::kernel<Rows, Threads, Unroll, Vector>;
    if (bytes + kSums > gemv_staged::kDefaultSharedMemory)  // opt in (a launch past the default fails without it)
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    fn<<<(n + Rows - 1) / Rows, Threads, bytes, stream>>>(static_cast<const __half*>(b.x),
                                                          static_cast<const __half*>(b.w),
                                                          static_cast<__half*>(b.y), m, n, k);
  }
};

template <int MaxM, int Rows, int Threads, int Unroll>
using GemvStaged = GemvStagedOf<MaxM, Rows, Threads, Unroll, 8>;
template <int MaxM, int Rows, int Threads, int Unroll>
using GemvStagedNarrow = GemvStagedOf<MaxM, Rows, Threads, Unroll, 2>;

}  // namespace kernelgen
