// Depthwise convolutions (groups = C = K) of channel counts the 16-byte kernels cannot take, at one
// stride and dilation 1: kernelgen::DepthwiseRows<T, R, S, V, TQ, STRIDE, TP>. C a multiple of V (2:
// two channels in one 4-byte access, ReXNet's 162, 228, 300, ...; 1: any C).
//
// direct_conv.h's DepthwiseNarrow serves the same layers at any stride and dilation, reading the
// TQ * S columns of each filter row's window one by one and its taps again for every item, its
// place found by 64-bit divisions. Here an item (TQ output columns of TP output rows for V
// channels, channels innermost) reads each of the (TQ - 1) * STRIDE + S input columns of each of
// its (TP - 1) * STRIDE + R input rows once, into registers (each input row added to every output
// row whose filter it meets), and a thread keeps its channels for its every item: the walk's step is
// a multiple of the channel vectors, so the taps are read once a thread, and its indices are 32-bit
// (a layer of 2^30 items or more is refused).
//
// An item is host and device code: tests/test_depthwise_rows.py runs each kernel's items on the CPU.
#pragma once

#include <string>

#include "direct_conv.h"

namespace kernelgen {
namespace rows {

constexpr long long kMostItems = 1LL << 30;  // 32-bit indices: the walk adds a step to an index

template <typename T_, int R, int S, int V, int TQ, int STRIDE, int TP = 1>
struct RowsItem {
  using T = T_;
  static_assert(V == 1 || V == 2, "V channels a thread: 1 or 2");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");
  static_assert(TP >= 1 && TP <= 8, "TP output rows a thread: 1 to 8");
  static_assert(STRIDE == 1 || STRIDE == 2, "stride 1 or 2");
  static constexpr int kR = R, kS = S, kV = V;
  static constexpr int kWindow = (TQ - 1) * STRIDE + S;  // the input columns of an item's filter row
  static constexpr int kRows = (TP - 1) * STRIDE + R;    // the input rows of an item's TP output rows
  using Narrow = direct::NarrowItem<T, R, S, V, TQ>;     // its V-channel loads and stores

  // Items of TP output rows x TQ output columns x V channels: channels innermost, then column tiles,
  // row tiles, images.
  static long long items(const Conv2dProblem& p, const direct::Shape& shape) {
    return (long long)p.n * ((shape.P + TP - 1) / TP) * ((shape.Q + TQ - 1) / TQ) * (p.c / V);
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.c % V != 0) {
      return "C must be a multiple of " + std::to_string(V) + " (" + std::to_string(2 * V) + "-byte accesses along C)";
    }
    if (p.stride_h != STRIDE || p.stride_w != STRIDE) return "built for stride " + std::to_string(STRIDE);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (items(p, {p.p(), p.q(), groups}) >= kMostItems) return "2^30 work items or more (32-bit indices)";
    return {};
  }

  // The taps of channels c .. c + V - 1 (filters K x R x S).
  __host__ __device__ static void taps(const T* w, int c, float (&tap)[V][R * S]) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
#pragma unroll
      for (int t = 0; t < R * S; ++t) tap[v][t] = direct::to_float(direct::read(w + (size_t)(c + v) * R * S + t));
    }
  }

  // Item `tile` of channels c .. c + V - 1: the tile-th block of TP output rows x TQ output columns
  // (column tiles of a row tile, then row tiles, then images). Each of its kRows input rows is read
  // once, into a window of kWindow columns, and added to the output rows whose filter it meets.
  __host__ __device__ static void run_tile(const Conv2dProblem& p, const direct::Shape& shape, int c, int tile,
                                           const float (&tap)[V][R * S], const T* x, T* y) {
    const int tiles_q = (shape.Q + TQ - 1) / TQ, tiles_p = (shape.P + TP - 1) / TP;
    const int q0 = (tile % tiles_q) * TQ, rest = tile / tiles_q;
    const int p0 = (rest % tiles_p) * TP, n = rest / tiles_p;
    const int col0 = q0 * STRIDE - p.pad_w, row0 = p0 * STRIDE - p.pad_h;
    float sums[TP][TQ][V] = {};
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int h = row0 + i;
      if (h < 0 || h >= p.h) continue;
      const T* row = x + ((size_t)n * p.h + h) * p.w * p.c + c;
      float window[kWindow][V];
#pragma unroll
      for (int u = 0; u < kWindow; ++u) {
        const int col = col0 + u;
        if (col >= 0 && col < p.w) {
          Narrow::load(row + (size_t)col * p.c, window[u]);
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) window[u][v] = 0.0f;
        }
      }
#pragma unroll
      for (int t = 0; t < TP; ++t) {
        const int r = i - t * STRIDE;  // the filter row input row i is to output row p0 + t
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int j = 0; j < TQ; ++j) {
#pragma unroll
          for (int s = 0; s < S; ++s) {
#pragma unroll
            for (int v = 0; v < V; ++v) sums[t][j][v] += window[j * STRIDE + s][v] * tap[v][r * S + s];
          }
        }
      }
    }
#pragma unroll
    for (int t = 0; t < TP; ++t) {
      if (p0 + t >= shape.P) continue;
      T* out = y + (((size_t)n * shape.P + p0 + t) * shape.Q) * p.c + c;
#pragma unroll
      for (int j = 0; j < TQ; ++j) {
        if (q0 + j < shape.Q) Narrow::store(out + (size_t)(q0 + j) * p.c, sums[t][j]);
      }
    }
  }

  // Item `index` alone (channels innermost), its taps read for it: what the CPU check runs.
  __host__ __device__ static void run(const Conv2dProblem& p, const direct::Shape& shape, long long index,
                                      const T* x, const T* w, T* y) {
    const int vectors = p.c / V;
    float tap[V][R * S];
    taps(w, int(index % vectors) * V, tap);
    run_tile(p, shape, int(index % vectors) * V, int(index / vectors), tap, x, y);
  }
};

// A thread t < per_pass * vectors computes channel vector t % vectors of tiles t / vectors,
// t / vectors + per_pass, ...: its taps are read once.
template <typename Item>
__global__ void __launch_bounds__(direct::kThreads) walk(Conv2dProblem p, direct::Shape shape, int tiles,
                                                         int per_pass, const typename Item::T* x,
                                                         const typename Item::T* w, typename Item::T* y) {
  const int vectors = p.c / Item::kV;
  const int t = blockIdx.x * direct::kThreads + threadIdx.x;
  if (t >= per_pass * vectors) return;
  const int c = (t % vectors) * Item::kV;
  float tap[Item::kV][Item::kR * Item::kS];
  Item::taps(w, c, tap);
  for (int tile = t / vectors; tile < tiles; tile += per_pass) Item::run_tile(p, shape, c, tile, tap, x, y);
}

}  // namespace rows

// A kernel type for direct_conv.h's DirectOperation: DirectConv's checks (filter, groups, output,
// then the item's), its own walk.
template <typename T, int R, int S, int V, int TQ, int STRIDE, int TP = 1>
struct DepthwiseRows : DirectConv<rows::RowsItem<T, R, S, V, TQ, STRIDE, TP>> {
  using Item = rows::RowsItem<T, R, S, V, TQ, STRIDE, TP>;

  // The CTAs a launch uses on the current device (as many as it runs at once).
  static int configure(std::string& why) {
    const auto kernel = rows::walk<Item>;
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

  // As many tiles a pass as the CTAs' threads hold whole channel rows (at least one), the grid
  // rounded up to whole CTAs.
  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream, int groups) {
    const direct::Shape shape{p.p(), p.q(), groups};
    const int vectors = p.c / V;
    const int tiles = int(Item::items(p, shape) / vectors);
    if (tiles == 0) return;
    long long per_pass = (long long)ctas * direct::kThreads / vectors;
    per_pass = per_pass < 1 ? 1 : per_pass > tiles ? tiles : per_pass;
    const long long grid = (per_pass * vectors + direct::kThreads - 1) / direct::kThreads;
    rows::walk<Item><<<int(grid), direct::kThreads, 0, stream>>>(p, shape, tiles, int(per_pass),
                                                                static_cast<const T*>(b.x),
                                                                static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
