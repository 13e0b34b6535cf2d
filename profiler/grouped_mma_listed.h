// Grouped 3x3 convolutions on tensor cores: the spread pipelined kernels (grouped_mma_spread_pipelined.h)
// with each thread's window copies listed once. There a tile's window is loaded by 16-byte copies
// that each find their pixel, channel chunk, byte in shared memory and offset in the input from
// their index (Window::source): about 36 instructions a copy in the SASS of the kernel of 16
// channels a group at stride 2 on 8x8 tiles (sm_90a), more than half of what a thread issues a
// tile, where Nsight Compute on the H200 found that kernel's issue slots 56% busy and its DRAM 29%
// (RegNetX-800MF's 112x112 layer at batch 32, 2026-12-05). A thread's copies are the same for every
// tile but for the window's origin: here, before its first tile, each thread lists its copies'
// bytes in the window, their rows and columns in it and their offsets in the input from the
// window's first pixel; a tile's copy is then one add, and its row and column checked against the
// image where the window reaches past it. The pixels' 16 bytes of padding (zeros) are written
// once, in both windows, and a CTA's next tile is found with carries, not divisions.
//
// kernelgen::GroupedMmaSpreadListed<T, CG, Stride, TP, TQ, Parity, Units, PDL> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h), as GroupedMmaSpreadPipelined.
#pragma once

#include <algorithm>
#include <string>

#include "grouped_mma_spread_pipelined.h"

namespace kernelgen {
namespace grouped_mma {

// The 16-byte copies thread `thread` makes of a window of kSlice channels: data vectors
// v = thread + 256 j of the window's kRows x kColumns x kSlice / 8.
template <int Stride, int TP, int TQ, bool Parity, int kSlice>
struct ListedCopies {
  using Win = Window<Stride, TP, TQ, Parity>;
  static constexpr int kChunks = kSlice / 8;  // data vectors a pixel
  static constexpr int kPixels = Win::kRows * Win::kColumns;
  static constexpr int kVectors = kPixels * kChunks;
  static constexpr int kEach = (kVectors + 255) / 256;  // a thread's copies, the last maybe none
  int from[kEach];   // the element of x from the window's first pixel, channel c0
  int to[kEach];     // the byte in the window
  int place[kEach];  // row << 16 | column in the window; -1: no copy

  __host__ __device__ __forceinline__ void list(const Conv2dProblem& L, int thread) {
#pragma unroll
    for (int j = 0; j < kEach; ++j) {
      const int v = thread + 256 * j;
      const int pixel = v / kChunks, chunk = v % kChunks, r = pixel / Win::kColumns, c = pixel % Win::kColumns;
      from[j] = (r * L.w + c) * L.c + chunk * 8;
      to[j] = (r * Win::kColumns + Win::column(c)) * int(Win::pitch(kSlice)) + chunk * 16;
      place[j] = v < kVectors ? (r << 16 | c) : -1;
    }
  }

  // The byte of the 16 bytes of padding (zeros) after the pixel kept `slot`-th in the window.
  __host__ __device__ static int padding(int slot) { return slot * int(Win::pitch(kSlice)) + kChunks * 16; }

  // Whether the thread makes copy j (all but maybe its last).
  __host__ __device__ __forceinline__ bool has(int j) const { return j < kEach - 1 || place[j] >= 0; }

  // Whether copy j's pixel is in the image, for the window whose first pixel is row h0, column w0.
  __host__ __device__ __forceinline__ bool inside(const Conv2dProblem& L, int h0, int w0, int j) const {
    return unsigned(h0 + (place[j] >> 16)) < unsigned(L.h) && unsigned(w0 + (place[j] & 0xffff)) < unsigned(L.w);
  }

  // The first pixel of the window of the tile at output row p0, column q0 (its row h0 and column
  // w0 in the image, above or left of it where the window reaches past its edge), and the offset
  // in x of that pixel's channel c0 of image n.
  __host__ __device__ __forceinline__ static long long origin(const Conv2dProblem& L, int n, int c0, int p0, int q0,
                                                              int& h0, int& w0) {
    h0 = p0 * Stride - L.pad_h, w0 = q0 * Stride - L.pad_w;
    return (((long long)n * L.h + h0) * L.w + w0) * L.c + c0;
  }

  // Copy j (one the thread makes) of that tile: its byte in the window (`byte`) and the offset in
  // x of its first element, or -1 where its pixel is outside the image (zeros). What `load` copies.
  __host__ __device__ __forceinline__ long long copy(const Conv2dProblem& L, int n, int c0, int p0, int q0, int j,
                                                     int& byte) const {
    int h0, w0;
    const long long first = origin(L, n, c0, p0, q0, h0, w0);
    byte = to[j];
    return inside(L, h0, w0, j) ? first + from[j] : -1;
  }

  // Every pixel's padding in `window`, zeroed (plain stores; the first tile's __syncthreads
  // orders them before any read).
  __device__ __forceinline__ static void zero_padding(unsigned char* window) {
    for (int slot = int(threadIdx.x); slot < kPixels; slot += 256)
      *reinterpret_cast<uint4*>(window + padding(slot)) = make_uint4(0, 0, 0, 0);
  }

  // The window of that tile into `buffer`, as one cp.async group: a window inside the image
  // without a check a copy.
  template <typename T>
  __device__ __forceinline__ void load(const Conv2dProblem& L, const T* __restrict__ x, int n, int c0, int p0,
                                       int q0, unsigned char* buffer) const {
    int h0, w0;
    // the window's first pixel, channel c0 (outside the image where the window reaches past its
    // top or left edge: only the copies inside read from it)
    const T* const first = x + origin(L, n, c0, p0, q0, h0, w0);
    if (h0 >= 0 && w0 >= 0 && h0 + Win::kRows <= L.h && w0 + Win::kColumns <= L.w) {
#pragma unroll
      for (int j = 0; j < kEach; ++j) {
        if (!has(j)) break;
        depthwise::copy16(buffer + to[j], first + from[j], true);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kEach; ++j) {
        if (!has(j)) break;
        const bool in = inside(L, h0, w0, j);
        depthwise::copy16(buffer + to[j], in ? first + from[j] : x, in);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
};

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units, bool PDL>
__global__ void __launch_bounds__(256) grouped_mma_spread_listed_kernel(Conv2dProblem L, int P, int Q,
                                                                        const T* __restrict__ x,
                                                                        const T* __restrict__ w,
                                                                        T* __restrict__ y) {
  using U = Unit<CG>;
  using Win = Window<Stride, TP, TQ, Parity>;
  constexpr int kSlice = Units * U::kOut;
  static_assert(Units >= 1 && Units <= 8 && kSlice % CG == 0, "1 to 8 units of whole groups");
  constexpr int kWindow = int(Pipeline<Stride, TP, TQ, Parity, kSlice>::kWindow);
  extern __shared__ __align__(16) unsigned char windows[];
  const int tiles_p = (P + TP - 1) / TP, tiles_q = (Q + TQ - 1) / TQ, per_image = tiles_p * tiles_q;
  const int tiles = L.n * per_image, c0 = kSlice * int(blockIdx.y);
  int t = int(blockIdx.x);
  if (t >= tiles) return;
  using Copies = ListedCopies<Stride, TP, TQ, Parity, kSlice>;
  Copies copies;
  copies.list(L, int(threadIdx.x));
  Copies::zero_padding(windows);
  Copies::zero_padding(windows + kWindow);
  // a tile as image, tile row, tile column; the next of the CTA's is gridDim.x tiles on, added
  // with carries (no division a tile)
  const int step = int(gridDim.x), step_q = step % tiles_q, step_p = step / tiles_q % tiles_p, step_n = step / per_image;
  int n = t / per_image, tile_p = t % per_image / tiles_q, tile_q = t % tiles_q;
  if constexpr (PDL) pdl::wait_then_release();  // the kernel before it has written the input
  copies.load(L, x, n, c0, tile_p * TP, tile_q * TQ, windows);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int local = warp % Units, unit = c0 / U::kOut + local;  // a warp's one unit (spread_computes)
  uint32_t b[U::kSteps][U::kBlocks][2];
  load_filter<T, CG>(w, unit, lane, b);
  for (int stage = 0; t < tiles; t += step, stage ^= 1) {
    const unsigned char* window = windows + stage * kWindow;
    const int p0 = tile_p * TP, q0 = tile_q * TQ, image = n;
    tile_q += step_q;
    const int carry_q = tile_q >= tiles_q;
    tile_q -= carry_q ? tiles_q : 0;
    tile_p += step_p + carry_q;
    const int carry_p = tile_p >= tiles_p;
    tile_p -= carry_p ? tiles_p : 0;
    n += step_n + carry_p;
    if (t + step < tiles) {
      copies.load(L, x, n, c0, tile_p * TP, tile_q * TQ, windows + (stage ^ 1) * kWindow);
    } else {
      asm volatile("cp.async.commit_group;\n" ::: "memory");  // none: the wait below is for this tile's
    }
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();
#pragma unroll 1
    for (int tp = 0; tp < TP; tp += Win::kTileRows) {
      if (p0 + tp >= P) break;
#pragma unroll
      for (int mt = 0; mt < Win::kRowTiles; ++mt) {
        if (!spread_computes<Units>(warp, local, (tp / Win::kTileRows) * Win::kRowTiles + mt)) continue;
        float d[U::kBlocks][4] = {};
#pragma unroll
        for (int i = 0; i < U::kSteps; ++i) {
          uint32_t a[4];
          ldmatrix_x4(a, window + Win::template a_row<CG>(kSlice, local, tp, mt, i, lane));
#pragma unroll
          for (int nb = 0; nb < U::kBlocks; ++nb) mma16816<T>(d[nb], a, b[i][nb]);
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
#pragma unroll
          for (int nb = 0; nb < U::kBlocks; ++nb) {
            const long long at = Win::template d_offset<CG>(L, P, Q, image, p0 + tp, q0, mt, unit, nb, lane, e);
            const float2 pair = make_float2(d[nb][2 * e], d[nb][2 * e + 1]);
            if (at >= 0) *reinterpret_cast<uint32_t*>(y + at) = depthwise::pair_from_float<T>(pair);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this window before the next load overwrites it
  }
}

}  // namespace grouped_mma

// The spread pipelined kernel's slices, schedule and launch (GroupedMmaSpreadPipelined), its window
// copies listed.
template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units, bool PDL = false>
struct GroupedMmaSpreadListed : GroupedMmaSpreadPipelined<T, CG, Stride, TP, TQ, Parity, Units, PDL> {
  using Base = GroupedMmaSpreadPipelined<T, CG, Stride, TP, TQ, Parity, Units, PDL>;
  using Stages = typename Base::Stages;
  using Copies = grouped_mma::ListedCopies<Stride, TP, TQ, Parity, Base::kSlice>;
  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_spread_listed_kernel<T, CG, Stride, TP, TQ, Parity, Units, PDL>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Stages::kShared)) !=
            cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, size_t(Stages::kShared)) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "needs " + std::to_string(Stages::kShared) + " bytes of shared memory, more than a CTA may have here";
      return 0;
    }
    return sms * per_sm;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int splits = p.c / Base::kSlice;
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ);
    const long long per_slice = std::max(1LL, std::min(tiles, (long long)ctas / splits));
    if (tiles == 0 || splits == 0) return;
    const auto kernel = grouped_mma::grouped_mma_spread_listed_kernel<T, CG, Stride, TP, TQ, Parity, Units, PDL>;
    const dim3 grid{unsigned(per_slice), unsigned(splits)};
    const auto x = static_cast<const T*>(b.x), w = static_cast<const T*>(b.w);
    if constexpr (PDL) {
      pdl::launch(kernel, grid, dim3(256), size_t(Stages::kShared), stream, p, p.p(), p.q(), x, w, static_cast<T*>(b.y));
    } else {
      kernel<<<grid, 256, size_t(Stages::kShared), stream>>>(p, p.p(), p.q(), x, w, static_cast<T*>(b.y));
    }
  }
};

}  // namespace kernelgen
