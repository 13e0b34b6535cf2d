// Depthwise convolutions (groups = C = K) of even channel counts, above all those no multiple of 8,
// at one stride (1 or 2), any padding, dilation 1: kernelgen::DepthwiseFlat<T, R, TP, STRIDE>.
//
// In NHWC the input rows a band of TP output rows reads, rows h0 * STRIDE - pad .. (h0 + TP - 1) *
// STRIDE - pad + R - 1 of one image, are one contiguous run of W * C elements a row, whatever C is: a CTA copies that run to
// shared memory in 16-byte pieces (from the 16-byte boundary at or before its start), the filter
// transposed beside it (tap-major, so channels c and c + 1 of a tap are one 4-byte word), and its
// threads compute the band's output pairs of channels (c, c + 1), C even, consecutive threads on
// consecutive pairs of a row: each reads its R x (TP + R - 1) input pairs from shared memory once,
// 4-byte words of consecutive addresses across a warp, its taps once, and stores TP 4-byte pairs.
// depthwise_rows.h reads the same layers from global memory in 4-byte accesses, each a thread's.
//
// The item (an output pair position of a band) is host and device code: tests/test_direct_conv.py
// runs each kernel's items on the CPU through the same staging.
#pragma once

#include <string>

#include "direct_conv.h"

namespace kernelgen {
namespace flat {

constexpr int kMostShared = 227 * 1024;  // a CTA's shared memory on sm_90 (opt-in)
constexpr long long kMostElements = 1LL << 31;  // 32-bit indices within the tensors

template <typename T_, int R, int TP, int STRIDE = 1>
struct FlatItem {
  using T = T_;
  static_assert(R == 3 || R == 5 || R == 7, "R = S: 3, 5 or 7");
  static_assert(TP >= 1 && TP <= 8, "TP output rows a band: 1 to 8");
  static_assert(STRIDE == 1 || STRIDE == 2, "stride 1 or 2");
  static constexpr int kR = R, kS = R;
  static constexpr int kRows = (TP - 1) * STRIDE + R;  // the input rows of a band's TP output rows

  // Where a band's staged input lies: elements [origin, end) of x (origin the 16-byte boundary at or
  // before the band's first input row's start), and its first output row.
  struct Band {
    long long origin, end;
    int n, h0;
  };

  // The output's rows and columns (Conv2dProblem's p() and q(), on the device too; dilation 1).
  __host__ __device__ static int rows_out(const Conv2dProblem& p) { return (p.h + 2 * p.pad_h - R) / STRIDE + 1; }
  __host__ __device__ static int columns_out(const Conv2dProblem& p) { return (p.w + 2 * p.pad_w - R) / STRIDE + 1; }

  __host__ __device__ static int bands(const Conv2dProblem& p) { return (rows_out(p) + TP - 1) / TP; }

  // The input row of a band's first output row's first filter row (before the image where padded).
  __host__ __device__ static int top(const Conv2dProblem& p, const Band& b) { return b.h0 * STRIDE - p.pad_h; }

  __host__ __device__ static Band band(const Conv2dProblem& p, int index) {
    Band b;
    b.n = index / bands(p);
    b.h0 = (index % bands(p)) * TP;
    const int row0 = b.h0 * STRIDE - p.pad_h, row1 = row0 + kRows - 1;
    const int first = row0 < 0 ? 0 : row0 >= p.h ? p.h - 1 : row0;
    const int last = row1 >= p.h ? p.h - 1 : row1 < first ? first : row1;
    const long long row = (long long)p.w * p.c;
    b.origin = (((long long)b.n * p.h + first) * row) & ~7LL;
    b.end = ((long long)b.n * p.h + last + 1) * row;
    return b;
  }

  // The elements of shared memory a band's input takes (whole 16-byte pieces), then the taps'.
  static long long staged(const Conv2dProblem& p) { return ((long long)kRows * p.w * p.c + 7 + 7) / 8 * 8; }
  static long long shared_bytes(const Conv2dProblem& p) {
    return (staged(p) + (long long)R * R * p.c) * (long long)sizeof(T);
  }

  // Items: the output pairs of a row, then bands, then images.
  static long long items(const Conv2dProblem& p, const direct::Shape&) {
    return (long long)p.n * bands(p) * ((long long)columns_out(p) * p.c / 2);
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.c % 2 != 0) return "C must be even (two channels a 4-byte access)";
    if (p.stride_h != STRIDE || p.stride_w != STRIDE) return "built for stride " + std::to_string(STRIDE);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if ((long long)p.n * p.h * p.w * p.c >= kMostElements || (long long)p.n * rows_out(p) * columns_out(p) * p.c >= kMostElements) {
      return "2^31 elements or more (32-bit indices)";
    }
    if (shared_bytes(p) > kMostShared) return "a band of " + std::to_string(kRows) + " input rows is more than a CTA's shared memory";
    return {};
  }

  // Pieces i, i + step, ... of the band's input, 16 bytes each where the tensor holds them all
  // (x's allocation ends with its last element), copied to `staged` (element 0 = x[origin]).
  __host__ __device__ static void stage(const Conv2dProblem& p, const Band& b, const T* x, T* staged, int i, int step) {
    const long long total = (long long)p.n * p.h * p.w * p.c;
    const int pieces = int((b.end - b.origin + 7) / 8);
    for (int k = i; k < pieces; k += step) {
      const long long g = b.origin + 8LL * k;
      if (g + 8 <= total) {
        *reinterpret_cast<uint4*>(staged + 8 * k) = *reinterpret_cast<const uint4*>(x + g);
      } else {
        for (int e = 0; e < 8 && g + e < total; ++e) staged[8 * k + e] = x[g + e];
      }
    }
  }

  // Taps i, i + step, ... of the filter (K x R x S, one channel a filter), tap-major into `taps`.
  __host__ __device__ static void stage_taps(const Conv2dProblem& p, const T* w, T* taps, int i, int step) {
    for (int e = i; e < p.c * R * R; e += step) taps[(e % (R * R)) * p.c + e / (R * R)] = w[e];
  }

  __host__ __device__ static void pair(const T* at, float (&out)[2]) {
    const uint32_t bits = *reinterpret_cast<const uint32_t*>(at);
    T two[2];
    memcpy(two, &bits, 4);
    out[0] = direct::to_float(two[0]);
    out[1] = direct::to_float(two[1]);
  }

  // Output pair `position` of a row (channels c, c + 1 of output column position * 2 / C) for the
  // band's TP output rows, from its staged input and taps.
  __host__ __device__ static void compute(const Conv2dProblem& p, const Band& b, int position, const T* staged,
                                          const T* taps, T* y) {
    const int c = (2 * position) % p.c, q = (2 * position) / p.c, col = q * STRIDE - p.pad_w;
    const int P = rows_out(p), Q = columns_out(p);
    float tap[R * R][2];
#pragma unroll
    for (int t = 0; t < R * R; ++t) pair(taps + t * p.c + c, tap[t]);
    float sums[TP][2] = {};
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int h = top(p, b) + i;
      if (h < 0 || h >= p.h) continue;
      const T* row = staged + ((((long long)b.n * p.h + h) * p.w * p.c + c) - b.origin);
#pragma unroll
      for (int s = 0; s < R; ++s) {
        const int at = col + s;
        if (at < 0 || at >= p.w) continue;
        float in[2];
        pair(row + (long long)at * p.c, in);
#pragma unroll
        for (int t = 0; t < TP; ++t) {
          const int r = i - t * STRIDE;  // the filter row input row i is to output row h0 + t
          if (r < 0 || r >= R) continue;
          sums[t][0] += in[0] * tap[r * R + s][0];
          sums[t][1] += in[1] * tap[r * R + s][1];
        }
      }
    }
#pragma unroll
    for (int t = 0; t < TP; ++t) {
      if (b.h0 + t >= P) continue;
      T two[2] = {direct::from_float<T>(sums[t][0]), direct::from_float<T>(sums[t][1])};
      uint32_t bits;
      memcpy(&bits, two, 4);
      *reinterpret_cast<uint32_t*>(y + (((long long)b.n * P + b.h0 + t) * Q * p.c + 2 * position)) = bits;
    }
  }

  // Item `index` alone, staged as a CTA stages its band: what the CPU check runs.
  static void run(const Conv2dProblem& p, const direct::Shape&, long long index, const T* x, const T* w, T* y) {
    const int positions = columns_out(p) * p.c / 2;
    const Band b = band(p, int(index / positions));
    std::vector<uint4> storage((shared_bytes(p) + 15) / 16);
    T* staged = reinterpret_cast<T*>(storage.data());
    stage(p, b, x, staged, 0, 1);
    stage_taps(p, w, staged + FlatItem::staged(p), 0, 1);
    compute(p, b, int(index % positions), staged, staged + FlatItem::staged(p), y);
  }
};

// A CTA a band: its input and taps staged, then its output pairs computed by the CTA's threads.
template <typename Item>
__global__ void __launch_bounds__(direct::kThreads) band_kernel(Conv2dProblem p, long long staged,
                                                          const typename Item::T* x, const typename Item::T* w,
                                                          typename Item::T* y) {
  using T = typename Item::T;
  extern __shared__ uint4 shared[];
  T* input = reinterpret_cast<T*>(shared);
  const typename Item::Band b = Item::band(p, blockIdx.x);
  Item::stage(p, b, x, input, threadIdx.x, direct::kThreads);
  Item::stage_taps(p, w, input + staged, threadIdx.x, direct::kThreads);
  __syncthreads();
  const int positions = Item::columns_out(p) * p.c / 2;
  for (int position = threadIdx.x; position < positions; position += direct::kThreads) {
    Item::compute(p, b, position, input, input + staged, y);
  }
}

}  // namespace flat

// A kernel type for direct_conv.h's DirectOperation: DirectConv's checks (filter, groups, output,
// then the item's), a CTA a band.
template <typename T, int R, int TP, int STRIDE = 1>
struct DepthwiseFlat : DirectConv<flat::FlatItem<T, R, TP, STRIDE>> {
  using Item = flat::FlatItem<T, R, TP, STRIDE>;

  // The kernel may take all of a CTA's shared memory; a launch needs no more than that.
  static int configure(std::string& why) {
    if (cudaFuncSetAttribute(flat::band_kernel<Item>, cudaFuncAttributeMaxDynamicSharedMemorySize, flat::kMostShared) !=
        cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    return 1;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int, cudaStream_t stream, int) {
    const int grid = p.n * Item::bands(p);
    if (grid == 0) return;
    flat::band_kernel<Item><<<grid, direct::kThreads, size_t(Item::shared_bytes(p)), stream>>>(
        p, Item::staged(p), static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
