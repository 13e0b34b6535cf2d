// Grouped 3x3 convolutions on tensor cores (grouped_mma.h's units, windows and fragments), a CTA a
// tile of TP x TQ output pixels and a slice of exactly Units units of output channels (Units x
// Unit::kOut channels, whole groups), C a multiple of the slice. GroupedMma and GroupedMmaSliced
// give each of a CTA's 8 warps a unit in turn and cut C only into halves that keep a unit for each
// warp: a layer of 144, 320 or 784 channels in groups of 16 (9, 20 or 49 units) is never cut, so a
// CTA's warps compute 2 to 7 units one after the other and a layer of few tiles (7x7 or 14x14
// pixels, batch 1) has a handful of CTAs. Here the slice is the kernel's, so 784 channels are 7
// slices of 7 units; where a slice has fewer units than 8 warps, 8 / Units warps share each unit,
// each taking every (8 / Units)-th 16-pixel tile of the CTA's tile (the rest of the warps idle).
//
// kernelgen::GroupedMmaSpread<T, CG, Stride, TP, TQ, Parity, Units> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h).
#pragma once

#include <string>

#include "grouped_mma.h"

namespace kernelgen {
namespace grouped_mma {

// Whether warp `warp` computes unit `local` of a CTA's slice of Units units on the CTA's 16-pixel
// tile `tile` ((tp / kTileRows) * kRowTiles + mt): with fewer units than warps, warp w computes unit
// w % Units on the tiles of index w / Units modulo 8 / Units (the last 8 % Units warps none); else
// units w, w + 8, ... on every tile.
template <int Units>
__host__ __device__ constexpr bool spread_computes(int warp, int local, int tile) {
  constexpr int kShare = Units >= 8 ? 1 : 8 / Units;
  return kShare > 1 ? warp < Units * kShare && local == warp % Units && tile % kShare == warp / Units
                    : local % 8 == warp;
}

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units>
__global__ void __launch_bounds__(256) grouped_mma_spread_kernel(Conv2dProblem L, int P, int Q, int splits,
                                                                 const T* __restrict__ x, const T* __restrict__ w,
                                                                 T* __restrict__ y) {
  using U = Unit<CG>;
  using Win = Window<Stride, TP, TQ, Parity>;
  constexpr int kSlice = Units * U::kOut;
  constexpr int kShare = Units >= 8 ? 1 : 8 / Units;  // the warps that share a unit
  static_assert(kSlice % CG == 0, "a slice of whole groups");
  extern __shared__ __align__(16) unsigned char window[];
  const int q0 = int(blockIdx.x) * TQ, p0 = int(blockIdx.y) * TP;
  const int n = int(blockIdx.z) / splits, c0 = kSlice * (int(blockIdx.z) % splits);
  for (int v = threadIdx.x; v < Win::vectors(kSlice); v += 256) {
    int byte;
    const long long at = Win::source(L, kSlice, n, c0, p0, q0, v, byte);
    depthwise::copy16(window + byte, at < 0 ? x : x + at, at >= 0);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // the units spread_computes gives this warp (each on some of the tiles)
  for (int local = kShare > 1 ? warp % Units : warp; local < Units; local += kShare > 1 ? Units : 8) {
    const int unit = c0 / U::kOut + local;
    uint32_t b[U::kSteps][U::kBlocks][2];
    load_filter<T, CG>(w, unit, lane, b);
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
  }
}

}  // namespace grouped_mma

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int Units>
struct GroupedMmaSpread {
  using Win = grouped_mma::Window<Stride, TP, TQ, Parity>;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;
  static constexpr int kSlice = Units * grouped_mma::Unit<CG>::kOut;
  static_assert(kSlice % CG == 0, "a slice of whole groups");

  // The channels a CTA computes: always the slice.
  static int slice(const Conv2dProblem&, int) { return kSlice; }

  // Whether a CTA's warp computes unit `local` of its slice on its 16-pixel tile `tile`.
  static bool computes(int warp, int local, int tile) { return grouped_mma::spread_computes<Units>(warp, local, tile); }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups != 0 || p.c / groups != CG || p.k != p.c)
      return "built for " + std::to_string(CG) + " channels a group in and out (K = C = " + std::to_string(CG) +
             " x groups)";
    if (p.r != 3 || p.s != 3) return "built for 3x3 filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % kSlice != 0) return "C must be a multiple of the slice of " + std::to_string(kSlice) + " channels";
    if ((long long)p.n * (p.c / kSlice) > 65535 || (p.p() + TP - 1) / TP > 65535)
      return "more images or tile rows than a grid holds";
    return {};
  }

  // The kernel's shared memory set up once, and the most a SM may give its CTAs (several small
  // windows a SM); the SMs (`ctas`, unused by the launch); 0 with a reason in `why`.
  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_spread_kernel<T, CG, Stride, TP, TQ, Parity, Units>;
    int device = 0, sms = 0, per_sm = 0;
    const int bytes = int(Win::bytes(kSlice));
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, size_t(bytes)) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "needs " + std::to_string(bytes) + " bytes of shared memory, more than a CTA may have here";
      return 0;
    }
    return sms;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int, cudaStream_t stream) {
    const int splits = p.c / kSlice;
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n * splits);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_spread_kernel<T, CG, Stride, TP, TQ, Parity, Units>
        <<<grid, 256, size_t(Win::bytes(kSlice)), stream>>>(p, p.p(), p.q(), splits, static_cast<const T*>(b.x),
                                                            static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
