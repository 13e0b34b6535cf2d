// Direct grouped convolutions on the CUDA cores, for the layers the other kernels of this project and
// CUTLASS cannot take (grouped.h: 1 < groups dividing C and K; NHWC activations, KRS(C/groups)
// filters, NPQK output, 16-bit elements (fp16 or bf16), fp32 accumulation; any padding, stride and
// dilation). No shared memory: a grid-stride loop of CTAs of 256 threads walks the layer's items, a
// thread an item, reading its window and taps through the read-only cache.
//
//  - NarrowItem<T, R, S, V, TQ> (kernelgen::DepthwiseNarrow): a depthwise layer (groups = C = K) of
//    C a multiple of V (2: two channels in one 4-byte access, ShuffleNetV2's 58 and 116; 1: any C).
//    An item: TQ output columns of one output row for V channels, channels innermost; the channels'
//    taps in registers.
//  - GroupedItem<T, R, S, V, TQ> (kernelgen::GroupedDirect): any channels a group (RegNet's 48, 56,
//    112, 232; a depthwise layer's channel multiplier K = m*C), K/groups a multiple of V. An item:
//    TQ output columns of one output row for V output channels of one group, output channels
//    innermost, summing the group's input channels of each tap (two a 4-byte access where the group
//    has an even number).
//
// An item is host and device code: tests/test_direct_conv.py runs each kernel's items on the CPU.
// DirectConv<Item> is a kernel type for DirectOperation: can_implement(problem, groups), configure()
// and launch(problem, binding, ctas, stream, groups).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "grouped.h"

namespace kernelgen {
namespace direct {

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

// Two consecutive elements at `at` (4-byte aligned) as floats, in one access.
template <typename T>
__host__ __device__ __forceinline__ void pair(const T* at, float (&out)[2]) {
  const uint32_t bits = read(reinterpret_cast<const unsigned int*>(at));
  T two[2];
  memcpy(two, &bits, 4);
  out[0] = to_float(two[0]);
  out[1] = to_float(two[1]);
}

// The sizes an item needs besides the problem's: the output's and the groups.
struct Shape {
  int P, Q, groups;
};

// What an item of V output channels by TQ output columns is of a layer of K output channels (items
// run output channels innermost, then tiles of TQ columns of an output row, then rows, then images):
// how many the layer has, and where one lies (its first output channel and column, its output row
// and its image).
struct Place {
  int k0, q0, p, n;
};

template <int V, int TQ>
struct Items {
  static long long items(const Conv2dProblem& p, const Shape& shape) {
    return (long long)p.n * shape.P * ((shape.Q + TQ - 1) / TQ) * (p.k / V);
  }

  __host__ __device__ static Place place(long long index, int k, const Shape& shape) {
    const int vectors = k / V, tiles_q = (shape.Q + TQ - 1) / TQ;
    Place at;
    at.k0 = int(index % vectors) * V;
    long long rest = index / vectors;
    at.q0 = int(rest % tiles_q) * TQ;
    rest /= tiles_q;
    at.p = int(rest % shape.P);
    at.n = int(rest / shape.P);
    return at;
  }
};

template <typename T_, int R, int S, int V, int TQ>
struct NarrowItem : Items<V, TQ> {
  using T = T_;
  static_assert(V == 1 || V == 2, "V channels a thread: 1 or 2");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");
  static constexpr int kR = R, kS = S;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.c % V != 0) return "C must be a multiple of " + std::to_string(V) + " (" + std::to_string(2 * V) +
                             "-byte accesses along C)";
    return {};
  }

  // V consecutive elements at `at` (4-byte aligned where V = 2) as floats.
  __host__ __device__ static void load(const T* at, float (&out)[V]) {
    if constexpr (V == 2) pair(at, out);
    else out[0] = to_float(at[0]);
  }

  __host__ __device__ static void store(T* at, const float (&in)[V]) {
    if constexpr (V == 2) {
      T pair[2] = {from_float<T>(in[0]), from_float<T>(in[1])};
      uint32_t bits;
      memcpy(&bits, pair, 4);
      *reinterpret_cast<uint32_t*>(at) = bits;
    } else {
      at[0] = from_float<T>(in[0]);
    }
  }

  __host__ __device__ static void run(const Conv2dProblem& p, const Shape& shape, long long index, const T* x,
                                      const T* w, T* y) {
    const Place at = Items<V, TQ>::place(index, p.k, shape);  // K = C: channel at.k0 reads channel at.k0
    const int c = at.k0, q0 = at.q0, out_p = at.p, n = at.n;
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
          load(row + (size_t)col * p.c, in);
#pragma unroll
          for (int v = 0; v < V; ++v) sums[j][v] += in[v] * taps[v][r * S + s];
        }
      }
    }
    T* out = y + (((size_t)n * shape.P + out_p) * shape.Q) * p.c + c;
#pragma unroll
    for (int j = 0; j < TQ; ++j) {
      if (q0 + j < shape.Q) store(out + (size_t)(q0 + j) * p.c, sums[j]);
    }
  }
};

template <typename T_, int R, int S, int V, int TQ>
struct GroupedItem : Items<V, TQ> {
  using T = T_;
  static_assert(V == 1 || V == 2 || V == 4, "V output channels a thread: 1, 2 or 4");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");
  static constexpr int kR = R, kS = S;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if ((p.k / groups) % V) return "K / groups must be a multiple of " + std::to_string(V);
    return {};
  }

  __host__ __device__ static void run(const Conv2dProblem& p, const Shape& shape, long long index, const T* x,
                                      const T* w, T* y) {
    const int group_c = p.c / shape.groups, group_k = p.k / shape.groups;
    const Place at = Items<V, TQ>::place(index, p.k, shape);
    const int k0 = at.k0, q0 = at.q0, out_p = at.p, n = at.n;
    const int c0 = (k0 / group_k) * group_c;  // the group's first input channel
    float sums[TQ][V] = {};
    for (int r = 0; r < R; ++r) {
      const int h = out_p * p.stride_h - p.pad_h + r * p.dilation_h;
      if (h < 0 || h >= p.h) continue;
      const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c0;
      for (int s = 0; s < S; ++s) {
        const T* taps = w + ((size_t)k0 * R * S + r * S + s) * group_c;  // filter k0's tap (r, s)
        if (group_c % 2 == 0) {  // two channels a 4-byte access (the group's first channel and C even)
          for (int ci = 0; ci < group_c; ci += 2) {
            float tap[V][2];
#pragma unroll
            for (int v = 0; v < V; ++v) pair(taps + (size_t)v * R * S * group_c + ci, tap[v]);
#pragma unroll
            for (int j = 0; j < TQ; ++j) {
              const int col = (q0 + j) * p.stride_w - p.pad_w + s * p.dilation_w;
              if (col < 0 || col >= p.w) continue;
              float in[2];
              pair(row + (size_t)col * p.c + ci, in);
#pragma unroll
              for (int v = 0; v < V; ++v) sums[j][v] += in[0] * tap[v][0] + in[1] * tap[v][1];
            }
          }
          continue;
        }
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
};

template <typename Item>
__global__ void __launch_bounds__(kThreads) walk(Conv2dProblem p, Shape shape, long long items,
                                                const typename Item::T* x, const typename Item::T* w,
                                                typename Item::T* y) {
  for (long long index = blockIdx.x * (long long)kThreads + threadIdx.x; index < items;
       index += (long long)gridDim.x * kThreads) {
    Item::run(p, shape, index, x, w, y);
  }
}

}  // namespace direct

template <typename Item>
struct DirectConv {
  using T = typename Item::T;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups || p.k % groups) return "needs groups (at least 2) dividing C and K";
    if (p.r != Item::kR || p.s != Item::kS) {
      return "built for " + std::to_string(Item::kR) + "x" + std::to_string(Item::kS) + " filters";
    }
    if (p.p() < 1 || p.q() < 1) return "no output";
    return Item::can_implement(p, groups);
  }

  // The CTAs a launch uses on the current device (as many as it runs at once).
  static int configure(std::string& why) {
    const auto kernel = direct::walk<Item>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, direct::kThreads, 0) != cudaSuccess) {
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
    const direct::Shape shape{p.p(), p.q(), groups};
    const long long items = Item::items(p, shape);
    const long long needed = (items + direct::kThreads - 1) / direct::kThreads;
    const int grid = int(needed < ctas ? needed : ctas);
    if (grid == 0) return;
    direct::walk<Item><<<grid, direct::kThreads, 0, stream>>>(p, shape, items, static_cast<const T*>(b.x),
                                                              static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

template <typename T, int R, int S, int V, int TQ>
using DepthwiseNarrow = DirectConv<direct::NarrowItem<T, R, S, V, TQ>>;
template <typename T, int R, int S, int V, int TQ>
using GroupedDirect = DirectConv<direct::GroupedItem<T, R, S, V, TQ>>;

// DepthwiseOperation's (depthwise_adapter.h, whose kernels are measured and so unchanged), but for
// the groups a launch is given.
template <typename Kernel>
class DirectOperation final : public GroupedOperation {
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
