// Grouped convolution of any number of channels a group (grouped.h: 1 < groups, C and K multiples
// of groups), directly on the CUDA cores: the layers no tensor-core grouped kernel of this project
// or CUTLASS serves (RegNet's 48, 56, 112 or 232 channels a group, a depthwise layer's channel
// multiplier K = m*C). NHWC activations, KRS(C/groups) filters, NPQK output, 16-bit elements (fp16
// or bf16), fp32 accumulation; any padding, stride and dilation.
//
// No shared memory: a thread computes TQ consecutive output columns of one output row for V
// consecutive output channels of one group (K/groups a multiple of V), summing the group's C/groups
// input channels of each tap, the input read once a tap and channel for its V outputs, the filters
// through the read-only cache. A grid-stride loop over the layer's items (an item: an image row's TQ
// columns of V output channels), output channels innermost.
//
// kernelgen::GroupedDirect<T, R, S, V, TQ> is the kernel type, GroupedDirectOperation<Kernel> its
// operation (a GroupedOperation, grouped.h: DepthwiseOperation's, but for the groups its launch is
// given). grouped_direct::item is host and device code: tests/test_grouped_direct.py runs it on the
// CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "grouped.h"

namespace kernelgen {
namespace grouped_direct {

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

// A read through the read-only cache on the GPU, a plain read on the host.
template <typename U>
__host__ __device__ __forceinline__ U read(const U* at) {
#ifdef __CUDA_ARCH__
  return __ldg(at);
#else
  return *at;
#endif
}

// The sizes an item needs besides the problem's: the output's and the groups'.
struct Shape {
  int P, Q, groups;
};

// One item of the layer (index < n * P * ceil(Q / TQ) * K / V): TQ output columns of one output row
// for V output channels of one group, output channels innermost.
template <typename T, int R, int S, int V, int TQ>
__host__ __device__ __forceinline__ void item(const Conv2dProblem& p, const Shape& shape, long long index,
                                              const T* x, const T* w, T* y) {
  const int group_c = p.c / shape.groups, group_k = p.k / shape.groups;
  const int tiles_q = (shape.Q + TQ - 1) / TQ, vectors = p.k / V;
  const int k0 = int(index % vectors) * V;
  long long rest = index / vectors;
  const int q0 = int(rest % tiles_q) * TQ;
  rest /= tiles_q;
  const int out_p = int(rest % shape.P);
  const int n = int(rest / shape.P);
  const int c0 = (k0 / group_k) * group_c;  // the group's first input channel
  float sums[TQ][V] = {};
  for (int r = 0; r < R; ++r) {
    const int h = out_p * p.stride_h - p.pad_h + r * p.dilation_h;
    if (h < 0 || h >= p.h) continue;
    const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c0;
    for (int s = 0; s < S; ++s) {
      const T* taps = w + ((size_t)k0 * R * S + r * S + s) * group_c;  // filter k0's tap (r, s)
      for (int ci = 0; ci < group_c; ++ci) {
        float tap[V];
#pragma unroll
        for (int v = 0; v < V; ++v) tap[v] = to_float(read(taps + (size_t)v * R * S * group_c + ci));
#pragma unroll
        for (int j = 0; j < TQ; ++j) {
          const int col = (q0 + j) * p.stride_w - p.pad_w + s * p.dilation_w;
          if (col < 0 || col >= p.w) continue;
          const float in = to_float(read(row + (size_t)col * p.c + ci));
#pragma unroll
          for (int v = 0; v < V; ++v) sums[j][v] += in * tap[v];
        }
      }
    }
  }
  T* out = y + (((size_t)n * shape.P + out_p) * shape.Q) * p.k + k0;
#pragma unroll
  for (int j = 0; j < TQ; ++j) {
    if (q0 + j >= shape.Q) continue;
#pragma unroll
    for (int v = 0; v < V; ++v) out[(size_t)(q0 + j) * p.k + v] = from_float<T>(sums[j][v]);
  }
}

template <typename T, int R, int S, int V, int TQ>
__global__ void __launch_bounds__(kThreads) grouped_direct_kernel(Conv2dProblem p, Shape shape, long long items,
                                                                 const T* x, const T* w, T* y) {
  for (long long index = blockIdx.x * (long long)kThreads + threadIdx.x; index < items;
       index += (long long)gridDim.x * kThreads) {
    item<T, R, S, V, TQ>(p, shape, index, x, w, y);
  }
}

}  // namespace grouped_direct

template <typename T, int R, int S, int V, int TQ>
struct GroupedDirect {
  static_assert(V == 1 || V == 2 || V == 4, "V output channels a thread: 1, 2 or 4");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups || p.k % groups) return "needs groups (at least 2) dividing C and K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if ((p.k / groups) % V) return "K / groups must be a multiple of " + std::to_string(V);
    if (p.p() < 1 || p.q() < 1) return "no output";
    return {};
  }

  // The CTAs a launch uses on the current device (as many as it runs at once).
  static int configure(std::string& why) {
    const auto kernel = grouped_direct::grouped_direct_kernel<T, R, S, V, TQ>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, grouped_direct::kThreads, 0) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "no CTA of the kernel fits a SM here";
      return 0;
    }
    return sms * per_sm;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream, int groups) {
    const grouped_direct::Shape shape{p.p(), p.q(), groups};
    const long long items = (long long)p.n * shape.P * ((shape.Q + TQ - 1) / TQ) * (p.k / V);
    const long long needed = (items + grouped_direct::kThreads - 1) / grouped_direct::kThreads;
    const int grid = int(needed < ctas ? needed : ctas);
    if (grid == 0) return;
    grouped_direct::grouped_direct_kernel<T, R, S, V, TQ><<<grid, grouped_direct::kThreads, 0, stream>>>(
        p, shape, items, static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

template <typename Kernel>
class GroupedDirectOperation final : public GroupedOperation {
 public:
  void set_groups(int groups) override { groups_ = groups; }

  std::string can_implement(const Conv2dProblem& problem) override {
    if (groups_ < 2) return "a grouped-convolution kernel, given no groups";
    return Kernel::can_implement(problem, groups_);
  }

  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t) override {
    std::string why = can_implement(problem);
    if (!why.empty()) return why;
    ctas_ = Kernel::configure(why);
    if (ctas_ == 0) return why;
    problem_ = problem;
    bindings_ = bindings;
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    Kernel::launch(problem_, bindings_[index], ctas_, stream, groups_);
    return cudaPeekAtLastError() == cudaSuccess;
  }

 private:
  int groups_ = 1;
  int ctas_ = 0;
  Conv2dProblem problem_{};
  std::vector<Conv2dBinding> bindings_;
};

}  // namespace kernelgen
