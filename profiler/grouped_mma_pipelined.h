// Grouped 3x3 convolutions on tensor cores (grouped_mma.h's units, windows and fragments), with
// persistent CTAs that pipeline their windows: a CTA computes one slice of Slice channels
// (blockIdx.y) for every gridDim.x-th tile of TP x TQ output pixels over the images, its warps'
// filter fragments loaded into registers once, and the window of its next tile coming into the
// second of two buffers (cp.async) while it computes the current one. GroupedMma (and
// GroupedMmaSliced) load a window, then compute, then store, a CTA a tile: the SM's memory idles
// while its tensor cores work and the filters are read again for every tile.
//
// kernelgen::GroupedMmaPipelined<T, CG, Stride, TP, TQ, Parity, Slice> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h): C a multiple of Slice, two windows of Slice channels
// within 227 KiB.
#pragma once

#include <algorithm>
#include <string>

#include "grouped_mma.h"

namespace kernelgen {
namespace grouped_mma {

template <int Stride, int TP, int TQ, bool Parity, int Slice>
struct Pipeline {
  using Win = Window<Stride, TP, TQ, Parity>;
  static constexpr long long kWindow = (long long)Win::kRows * Win::kColumns * (2LL * Slice + 16);  // Window::bytes
  static constexpr long long kShared = 2 * kWindow;
};

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Slice>
__global__ void __launch_bounds__(256) grouped_mma_pipelined_kernel(Conv2dProblem L, int P, int Q,
                                                                    const T* __restrict__ x, const T* __restrict__ w,
                                                                    T* __restrict__ y) {
  using U = Unit<CG>;
  using Win = Window<Stride, TP, TQ, Parity>;
  constexpr int kUnits = Slice / (8 * U::kOut);  // units a warp
  static_assert(Slice % (8 * U::kOut) == 0 && Slice % CG == 0, "whole groups and a unit for each warp");
  constexpr int kWindow = int(Pipeline<Stride, TP, TQ, Parity, Slice>::kWindow);
  extern __shared__ __align__(16) unsigned char windows[];
  const int tiles_p = (P + TP - 1) / TP, tiles_q = (Q + TQ - 1) / TQ, per_image = tiles_p * tiles_q;
  const int tiles = L.n * per_image, c0 = Slice * int(blockIdx.y);
  int t = int(blockIdx.x);
  if (t >= tiles) return;
  // tile t's window into `buffer`, as one cp.async group
  auto load = [&](int tile, unsigned char* buffer) {
    const int n = tile / per_image, p0 = (tile % per_image) / tiles_q * TP, q0 = tile % tiles_q * TQ;
    for (int v = threadIdx.x; v < Win::vectors(Slice); v += 256) {
      int byte;
      const long long at = Win::source(L, Slice, n, c0, p0, q0, v, byte);
      depthwise::copy16(buffer + byte, at < 0 ? x : x + at, at >= 0);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  load(t, windows);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t b[kUnits][U::kSteps][U::kBlocks][2];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) load_filter<T, CG>(w, c0 / U::kOut + warp + 8 * u, lane, b[u]);
  for (int stage = 0; t < tiles; t += int(gridDim.x), stage ^= 1) {
    const unsigned char* window = windows + stage * kWindow;
    if (t + int(gridDim.x) < tiles) {
      load(t + int(gridDim.x), windows + (stage ^ 1) * kWindow);
    } else {
      asm volatile("cp.async.commit_group;\n" ::: "memory");  // none: the wait below is for this tile's
    }
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();
    const int n = t / per_image, p0 = (t % per_image) / tiles_q * TP, q0 = t % tiles_q * TQ;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const int local = warp + 8 * u, unit = c0 / U::kOut + local;
#pragma unroll 1
      for (int tp = 0; tp < TP; tp += Win::kTileRows) {
        if (p0 + tp >= P) break;
#pragma unroll
        for (int mt = 0; mt < Win::kRowTiles; ++mt) {
          float d[U::kBlocks][4] = {};
#pragma unroll
          for (int i = 0; i < U::kSteps; ++i) {
            uint32_t a[4];
            ldmatrix_x4(a, window + Win::template a_row<CG>(Slice, local, tp, mt, i, lane));
#pragma unroll
            for (int nb = 0; nb < U::kBlocks; ++nb) mma16816<T>(d[nb], a, b[u][i][nb]);
          }
#pragma unroll
          for (int e = 0; e < 2; ++e) {
#pragma unroll
            for (int nb = 0; nb < U::kBlocks; ++nb) {
              const long long at = Win::template d_offset<CG>(L, P, Q, n, p0 + tp, q0, mt, unit, nb, lane, e);
              const float2 pair = make_float2(d[nb][2 * e], d[nb][2 * e + 1]);
              if (at >= 0) *reinterpret_cast<uint32_t*>(y + at) = depthwise::pair_from_float<T>(pair);
            }
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this window before the next load overwrites it
  }
}

}  // namespace grouped_mma

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Slice>
struct GroupedMmaPipelined {
  using Win = grouped_mma::Window<Stride, TP, TQ, Parity>;
  using Stages = grouped_mma::Pipeline<Stride, TP, TQ, Parity, Slice>;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;
  static_assert(Stages::kShared <= grouped_mma::kSharedMemory, "two windows of the slice within 227 KiB");

  // The channels a CTA computes: always Slice.
  static int slice(const Conv2dProblem&, int) { return Slice; }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups != 0 || p.c / groups != CG || p.k != p.c)
      return "built for " + std::to_string(CG) + " channels a group in and out (K = C = " + std::to_string(CG) +
             " x groups)";
    if (p.r != 3 || p.s != 3) return "built for 3x3 filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % Slice != 0) return "C must be a multiple of the slice of " + std::to_string(Slice) + " channels";
    if (p.c / Slice > 65535) return "more slices than a grid holds";
    return {};
  }

  // The kernel's two windows of shared memory set up once; the CTAs the GPU holds at once (the
  // `ctas` a launch is given); 0 with a reason in `why` if the device cannot run it.
  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_pipelined_kernel<T, CG, Stride, TP, TQ, Parity, Slice>;
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

  // As many CTAs as the GPU holds (`ctas`), shared by the slices; none more than the tiles.
  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int splits = p.c / Slice;
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ);
    const long long per_slice = std::max(1LL, std::min(tiles, (long long)ctas / splits));
    if (tiles == 0 || splits == 0) return;
    grouped_mma::grouped_mma_pipelined_kernel<T, CG, Stride, TP, TQ, Parity, Slice>
        <<<dim3(unsigned(per_slice), unsigned(splits)), 256, size_t(Stages::kShared), stream>>>(
            p, p.p(), p.q(), static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
