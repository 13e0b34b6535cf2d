// Depthwise convolution for the channel counts this project's 16-byte kernels (depthwise.h) cannot
// take: C a multiple of V = 2 (4-byte accesses of two channels: ShuffleNetV2's 58 and 116) or any C
// (V = 1). groups = C = K, NHWC activations, K x R x S filters (KRS(C/groups) with C/groups = 1),
// NPQK output, 16-bit elements (fp16 or bf16), fp32 accumulation; any padding, stride and dilation.
//
// No shared memory: a thread computes TQ consecutive output columns of one output row for V
// channels, reading its input window and the channels' taps through the read-only cache (the
// threads of a warp take consecutive channel groups of one pixel, so a warp reads contiguous bytes
// along C). A grid-stride loop over the layer's items (an item: an image row's TQ columns of V
// channels), channels innermost.
//
// kernelgen::DepthwiseNarrow<T, R, S, V, TQ> is a kernel type for DepthwiseOperation
// (depthwise_adapter.h): can_implement(problem, groups), configure() and launch(problem, binding,
// ctas, stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "operation.h"

namespace kernelgen {
namespace depthwise_narrow {

constexpr int kThreads = 256;

template <typename T>
__host__ __device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same<T, __half>::value) return __half2float(v);
  else return __bfloat162float(v);
}
template <typename T>
__host__ __device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same<T, __half>::value) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// A read through the read-only cache on the GPU (a plain read on the host: tests/test_depthwise_narrow.py
// runs `item` on the CPU).
template <typename U>
__host__ __device__ __forceinline__ U read(const U* at) {
#ifdef __CUDA_ARCH__
  return __ldg(at);
#else
  return *at;
#endif
}

// V consecutive elements at `at` (4-byte aligned where V = 2) as floats.
template <typename T, int V>
__host__ __device__ __forceinline__ void load(const T* at, float (&out)[V]) {
  if constexpr (V == 2) {
    const uint32_t bits = read(reinterpret_cast<const unsigned int*>(at));
    T pair[2];
    memcpy(pair, &bits, 4);
    out[0] = to_float(pair[0]);
    out[1] = to_float(pair[1]);
  } else {
    out[0] = to_float(at[0]);
  }
}

template <typename T, int V>
__host__ __device__ __forceinline__ void store(T* at, const float (&in)[V]) {
  if constexpr (V == 2) {
    T pair[2] = {from_float<T>(in[0]), from_float<T>(in[1])};
    uint32_t bits;
    memcpy(&bits, pair, 4);
    *reinterpret_cast<uint32_t*>(at) = bits;
  } else {
    at[0] = from_float<T>(in[0]);
  }
}

// One item of the layer (item < n * P * ceil(Q / TQ) * C / V): TQ output columns of one output row
// of V channels, channels innermost.
template <typename T, int R, int S, int V, int TQ>
__host__ __device__ __forceinline__ void item(const Conv2dProblem& p, int P, int Q, long long index, const T* x,
                                              const T* w, T* y) {
  const int groups = p.c / V, tiles_q = (Q + TQ - 1) / TQ;
  const int g = int(index % groups);
  long long rest = index / groups;
  const int q0 = int(rest % tiles_q) * TQ;
  rest /= tiles_q;
  const int out_p = int(rest % P);
  const int n = int(rest / P);
  const int c = g * V;
  float taps[V][R * S];
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int t = 0; t < R * S; ++t) taps[v][t] = to_float(read(w + (size_t)(c + v) * R * S + t));
  }
  float sums[TQ][V] = {};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int h = out_p * p.stride_h - p.pad_h + r * p.dilation_h;
    if (h < 0 || h >= p.h) continue;
    const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c;
#pragma unroll
    for (int s = 0; s < S; ++s) {
#pragma unroll
      for (int j = 0; j < TQ; ++j) {
        const int col = (q0 + j) * p.stride_w - p.pad_w + s * p.dilation_w;
        if (col < 0 || col >= p.w) continue;
        float in[V];
        load<T, V>(row + (size_t)col * p.c, in);
#pragma unroll
        for (int v = 0; v < V; ++v) sums[j][v] += in[v] * taps[v][r * S + s];
      }
    }
  }
  T* out = y + (((size_t)n * P + out_p) * Q) * p.c + c;
#pragma unroll
  for (int j = 0; j < TQ; ++j) {
    if (q0 + j < Q) store<T, V>(out + (size_t)(q0 + j) * p.c, sums[j]);
  }
}

template <typename T, int R, int S, int V, int TQ>
__global__ void __launch_bounds__(kThreads) depthwise_narrow_kernel(Conv2dProblem p, int P, int Q, long long items,
                                                                   const T* x, const T* w, T* y) {
  for (long long index = blockIdx.x * (long long)kThreads + threadIdx.x; index < items;
       index += (long long)gridDim.x * kThreads) {
    item<T, R, S, V, TQ>(p, P, Q, index, x, w, y);
  }
}

}  // namespace depthwise_narrow

template <typename T, int R, int S, int V, int TQ>
struct DepthwiseNarrow {
  static_assert(V == 1 || V == 2, "V channels a thread: 1 or 2");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.c % V != 0) return "C must be a multiple of " + std::to_string(V) + " (" + std::to_string(2 * V) +
                             "-byte accesses along C)";
    if (p.p() < 1 || p.q() < 1) return "no output";
    return {};
  }

  // The CTAs a launch uses on the current device (as many as it runs at once).
  static int configure(std::string& why) {
    const auto kernel = depthwise_narrow::depthwise_narrow_kernel<T, R, S, V, TQ>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, depthwise_narrow::kThreads, 0) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "no CTA of the kernel fits a SM here";
      return 0;
    }
    return sms * per_sm;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const long long items = (long long)p.n * p.p() * ((p.q() + TQ - 1) / TQ) * (p.c / V);
    const long long needed = (items + depthwise_narrow::kThreads - 1) / depthwise_narrow::kThreads;
    const int grid = int(needed < ctas ? needed : ctas);
    if (grid == 0) return;
    depthwise_narrow::depthwise_narrow_kernel<T, R, S, V, TQ><<<grid, depthwise_narrow::kThreads, 0, stream>>>(
        p, p.p(), p.q(), items, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
