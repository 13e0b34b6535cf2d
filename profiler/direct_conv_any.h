// Direct grouped convolutions of any filter, its R x S given at run time (direct_conv.h's items, whose
// filters are template parameters): the depthwise and grouped layers whose filters no other kernel
// of this project or CUTLASS is built for: 1x1 depthwise layers (a re-parameterized network's
// scale branches, at stride 1 or 2), 9x9 and larger ones (MixNet, EdgeNeXt), 1xS and Rx1 bands
// (GhostNetV2's 1x5 and 5x1, InceptionNeXt's 1x11 and 11x1). Any padding, stride and dilation; no
// shared memory: a grid-stride loop of CTAs of 256 threads walks the layer's items, a thread an
// item, reading its window and its taps through the read-only cache at each use (a filter of any
// size does not fit registers of a count fixed when the kernel is compiled).
//
//  - NarrowAnyItem<T, V, TQ> (kernelgen::DepthwiseNarrowAny): a depthwise layer (groups = C = K) of
//    C a multiple of V (2: two channels in one 4-byte access; 1: any C), TQ output columns of one
//    output row for V channels, channels innermost.
//  - GroupedAnyItem<T, V, TQ> (kernelgen::GroupedDirectAny): any channels a group (a depthwise
//    layer's channel multiplier K = m*C among them), K/groups a multiple of V: TQ output columns of
//    one output row for V output channels of one group, output channels innermost.
//
// An item is host and device code: tests/test_direct_conv.py runs each kernel's items on the CPU.
#pragma once

#include <string>

#include "direct_conv.h"

namespace kernelgen {
namespace direct {

template <typename T_, int V, int TQ>
struct NarrowAnyItem : Items<V, TQ> {
  using T = T_;
  static_assert(V == 1 || V == 2, "V channels a thread: 1 or 2");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return NarrowItem<T, 1, 1, V, TQ>::can_implement(p, groups);
  }

  __host__ __device__ static void run(const Conv2dProblem& p, const Shape& shape, long long index, const T* x,
                                      const T* w, T* y) {
    const Place at = Items<V, TQ>::place(index, p.k, shape);  // K = C: channel at.k0 reads channel at.k0
    const int c = at.k0, q0 = at.q0, out_p = at.p, n = at.n, taps = p.r * p.s;
    float sums[TQ][V] = {};
    for (int r = 0; r < p.r; ++r) {
      const int h = out_p * p.stride_h - p.pad_h + r * p.dilation_h;
      if (h < 0 || h >= p.h) continue;
      const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c;
      for (int s = 0; s < p.s; ++s) {
        float tap[V];
#pragma unroll
        for (int v = 0; v < V; ++v) tap[v] = to_float(read(w + (size_t)(c + v) * taps + r * p.s + s));
#pragma unroll
        for (int j = 0; j < TQ; ++j) {
          const int col = (q0 + j) * p.stride_w - p.pad_w + s * p.dilation_w;
          if (col < 0 || col >= p.w) continue;
          float in[V];
          NarrowItem<T, 1, 1, V, TQ>::load(row + (size_t)col * p.c, in);
#pragma unroll
          for (int v = 0; v < V; ++v) sums[j][v] += in[v] * tap[v];
        }
      }
    }
    T* out = y + (((size_t)n * shape.P + out_p) * shape.Q) * p.c + c;
#pragma unroll
    for (int j = 0; j < TQ; ++j) {
      if (q0 + j < shape.Q) NarrowItem<T, 1, 1, V, TQ>::store(out + (size_t)(q0 + j) * p.c, sums[j]);
    }
  }
};

template <typename T_, int V, int TQ>
struct GroupedAnyItem : Items<V, TQ> {
  using T = T_;
  static_assert(V == 1 || V == 2 || V == 4, "V output channels a thread: 1, 2 or 4");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return GroupedItem<T, 1, 1, V, TQ>::can_implement(p, groups);
  }

  __host__ __device__ static void run(const Conv2dProblem& p, const Shape& shape, long long index, const T* x,
                                      const T* w, T* y) {
    const int group_c = p.c / shape.groups, group_k = p.k / shape.groups, taps = p.r * p.s;
    const Place at = Items<V, TQ>::place(index, p.k, shape);
    const int k0 = at.k0, q0 = at.q0, out_p = at.p, n = at.n;
    const int c0 = (k0 / group_k) * group_c;  // the group's first input channel
    float sums[TQ][V] = {};
    for (int r = 0; r < p.r; ++r) {
      const int h = out_p * p.stride_h - p.pad_h + r * p.dilation_h;
      if (h < 0 || h >= p.h) continue;
      const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c0;
      for (int s = 0; s < p.s; ++s) {
        const T* tap_at = w + ((size_t)k0 * taps + r * p.s + s) * group_c;  // filter k0's tap (r, s)
        for (int ci = 0; ci < group_c; ++ci) {
          float tap[V];
#pragma unroll
          for (int v = 0; v < V; ++v) tap[v] = to_float(read(tap_at + (size_t)v * taps * group_c + ci));
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

}  // namespace direct

// DirectConv, but for a filter of any size: can_implement asks nothing of R and S.
template <typename Item>
struct AnyFilterConv : DirectConv<Item> {
  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups || p.k % groups) return "needs groups (at least 2) dividing C and K";
    if (p.r < 1 || p.s < 1) return "no filter";
    if (p.p() < 1 || p.q() < 1) return "no output";
    return Item::can_implement(p, groups);
  }
};

template <typename T, int V, int TQ>
using DepthwiseNarrowAny = AnyFilterConv<direct::NarrowAnyItem<T, V, TQ>>;
template <typename T, int V, int TQ>
using GroupedDirectAny = AnyFilterConv<direct::GroupedAnyItem<T, V, TQ>>;

}  // namespace kernelgen
