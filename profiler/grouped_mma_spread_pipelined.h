// Grouped 3x3 convolutions on tensor cores: the spread kernels' slices (grouped_mma_spread.h: a
// slice of exactly Units units of output channels, up to 8, warps sharing a unit's 16-pixel tiles
// where there are fewer units than warps) on the pipelined kernels' persistent CTAs
// (grouped_mma_pipelined.h: a CTA computes its slice for every gridDim.x-th tile, its filter
// fragments loaded once, the next tile's window coming into a second buffer while it computes the
// current one). A spread CTA loads its window, then computes, then stores: on a layer of many
// tiles (RegNetY-800MF's 112x112 and 56x56 ones at batch 32) its SM's memory idles while it
// computes, two CTAs a SM as their registers allow.
//
// With PDL, a kernel is launched as a programmatic dependent of the kernel before it
// (dependent_kernel.h, sm_90): its CTAs are scheduled while that kernel finishes and wait for it
// before they load their first window.
//
// kernelgen::GroupedMmaSpreadPipelined<T, CG, Stride, TP, TQ, Parity, Units, PDL> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h): C a multiple of the slice, two windows of it within
// 227 KiB.
#pragma once

#include <algorithm>
#include <string>

#include "dependent_kernel.h"
#include "grouped_mma_pipelined.h"
#include "grouped_mma_spread.h"

namespace kernelgen {
namespace grouped_mma {

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units, bool PDL>
__global__ void __launch_bounds__(256) grouped_mma_spread_pipelined_kernel(Conv2dProblem L, int P, int Q,
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
  if constexpr (PDL) pdl::wait_then_release();  // the kernel before it has written the input
  // tile t's window into `buffer`, as one cp.async group
  auto load = [&](int tile, unsigned char* buffer) {
    const int n = tile / per_image, p0 = (tile % per_image) / tiles_q * TP, q0 = tile % tiles_q * TQ;
    for (int v = threadIdx.x; v < Win::vectors(kSlice); v += 256) {
      int byte;
      const long long at = Win::source(L, kSlice, n, c0, p0, q0, v, byte);
      depthwise::copy16(buffer + byte, at < 0 ? x : x + at, at >= 0);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  load(t, windows);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int local = warp % Units, unit = c0 / U::kOut + local;  // a warp's one unit (spread_computes)
  uint32_t b[U::kSteps][U::kBlocks][2];
  load_filter<T, CG>(w, unit, lane, b);
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
            const long long at = Win::template d_offset<CG>(L, P, Q, n, p0 + tp, q0, mt, unit, nb, lane, e);
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

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units, bool PDL = false>
struct GroupedMmaSpreadPipelined {
  using Win = grouped_mma::Window<Stride, TP, TQ, Parity>;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;
  static constexpr int kSlice = Units * grouped_mma::Unit<CG>::kOut;
  using Stages = grouped_mma::Pipeline<Stride, TP, TQ, Parity, kSlice>;
  static_assert(Stages::kShared <= grouped_mma::kSharedMemory, "two windows of the slice within 227 KiB");

  // The channels a CTA computes: always the slice.
  static int slice(const Conv2dProblem&, int) { return kSlice; }

  // Whether a CTA's warp computes unit `local` of its slice on its 16-pixel tile `tile`.
  static bool computes(int warp, int local, int tile) { return grouped_mma::spread_computes<Units>(warp, local, tile); }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return GroupedMmaSpread<T, CG, Stride, TP, TQ, Parity, Units>::can_implement(p, groups);
  }

  // The kernel's two windows of shared memory set up once; the CTAs the GPU holds at once (the
  // `ctas` a launch is given); 0 with a reason in `why` if the device cannot run it.
  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_spread_pipelined_kernel<T, CG, Stride, TP, TQ, Parity, Units, PDL>;
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
    const int splits = p.c / kSlice;
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ);
    const long long per_slice = std::max(1LL, std::min(tiles, (long long)ctas / splits));
    if (tiles == 0 || splits == 0) return;
    const auto kernel = grouped_mma::grouped_mma_spread_pipelined_kernel<T, CG, Stride, TP, TQ, Parity, Units, PDL>;
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
