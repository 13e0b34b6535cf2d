// GroupedMma (grouped_mma.h) with a window whose pixels are an odd number of 16-byte chunks apart.
// grouped_mma.h pads each pixel of the window by 16 bytes, so that the eight pixels an ldmatrix
// reads fall in different banks; that holds where C / 8 is even (2C + 16 bytes: an odd number of
// chunks). Where C / 8 is odd (RegNet's 120 and 888 channels in groups of 24: 5 and 37 groups) the
// pitch is a multiple of 128 bytes and the eight reads share one bank group. This window pads by
// 16 or 32 bytes, whichever makes the pitch an odd number of chunks; the padding is zeros.
//
// kernelgen::GroupedMmaOdd<T, CG, Stride, TP, TQ, Parity> is a kernel type for DepthwiseOperation
// (depthwise_adapter.h), as GroupedMma.
#pragma once

#include <string>

#include "grouped_mma.h"

namespace kernelgen {
namespace grouped_mma {

template <int Stride, int TP, int TQ, bool Parity = false>
struct OddWindow : Window<Stride, TP, TQ, Parity> {
  using Base = Window<Stride, TP, TQ, Parity>;
  using Base::column;
  using Base::kColumns;
  using Base::kRows;
  using Base::kTileRows;
  // 16-byte chunks a pixel of `c` channels takes: its channels, and one or two of zeros
  __host__ __device__ static int chunks(int c) { return c / 8 + 1 + (c / 8) % 2; }
  __host__ __device__ static long long pitch(int c) { return 16LL * chunks(c); }
  static long long bytes(int c) { return kRows * kColumns * pitch(c); }
  __host__ __device__ static int vectors(int slice) { return kRows * kColumns * chunks(slice); }

  // As Window::source, with this window's pitch: the chunks past the pixel's channels are zeros.
  __host__ __device__ static long long source(const Conv2dProblem& L, int slice, int n, int c0, int p0, int q0, int v,
                                              int& byte) {
    const int per_pixel = chunks(slice), pixel = v / per_pixel, chunk = v % per_pixel;
    const int h = p0 * Stride - L.pad_h + pixel / kColumns, col = q0 * Stride - L.pad_w + pixel % kColumns;
    byte = ((pixel / kColumns) * kColumns + column(pixel % kColumns)) * int(pitch(slice)) + chunk * 16;
    if (chunk >= slice / 8 || h < 0 || h >= L.h || col < 0 || col >= L.w) return -1;
    return (((long long)n * L.h + h) * L.w + col) * L.c + c0 + chunk * 8;
  }

  // As Window::a_row, with this window's pitch.
  template <int CG>
  __host__ __device__ static int a_row(int slice, int local, int tp, int mt, int i, int lane) {
    return Base::template a_row<CG>(slice, local, tp, mt, i, lane) / int(Base::pitch(slice)) * int(pitch(slice)) +
           Base::template a_row<CG>(slice, local, tp, mt, i, lane) % int(Base::pitch(slice));
  }
};

// grouped_mma_kernel over an OddWindow.
template <typename T, int CG, int Stride, int TP, int TQ, bool Parity>
__global__ void __launch_bounds__(256) grouped_mma_odd_kernel(Conv2dProblem L, int P, int Q, int slice, int splits,
                                                              const T* __restrict__ x, const T* __restrict__ w,
                                                              T* __restrict__ y) {
  using U = Unit<CG>;
  using Win = OddWindow<Stride, TP, TQ, Parity>;
  extern __shared__ __align__(16) unsigned char window[];
  const int q0 = int(blockIdx.x) * TQ, p0 = int(blockIdx.y) * TP;
  const int n = int(blockIdx.z) / splits, c0 = slice * (int(blockIdx.z) % splits);
  for (int v = threadIdx.x; v < Win::vectors(slice); v += 256) {
    int byte;
    const long long at = Win::source(L, slice, n, c0, p0, q0, v, byte);
    depthwise::copy16(window + byte, at < 0 ? x : x + at, at >= 0);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int local = warp; local < slice / U::kOut; local += 8) {
    const int unit = c0 / U::kOut + local;
    uint32_t b[U::kSteps][U::kBlocks][2];
    load_filter<T, CG>(w, unit, lane, b);
#pragma unroll 1
    for (int tp = 0; tp < TP; tp += Win::kTileRows) {
      if (p0 + tp >= P) break;
#pragma unroll
      for (int mt = 0; mt < Win::kRowTiles; ++mt) {
        float d[U::kBlocks][4] = {};
#pragma unroll
        for (int i = 0; i < U::kSteps; ++i) {
          uint32_t a[4];
          ldmatrix_x4(a, window + Win::template a_row<CG>(slice, local, tp, mt, i, lane));
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

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity = false>
struct GroupedMmaOdd {
  using Whole = GroupedMma<T, CG, Stride, TP, TQ, Parity>;
  using Win = grouped_mma::OddWindow<Stride, TP, TQ, Parity>;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    const std::string why = Whole::can_implement(p, groups);
    if (!why.empty() && why.rfind("the input window", 0) != 0) return why;  // not the window: as GroupedMma
    if (Win::bytes(p.c) > grouped_mma::kSharedMemory)
      return "the input window of " + std::to_string(p.c) + " channels needs " + std::to_string(Win::bytes(p.c)) +
             " bytes of shared memory, more than " + std::to_string(grouped_mma::kSharedMemory);
    return p.n > 65535 || (p.p() + TP - 1) / TP > 65535 ? "more images or tile rows than a grid holds" : "";
  }

  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_odd_kernel<T, CG, Stride, TP, TQ, Parity>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, grouped_mma::kSharedMemory) !=
        cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    return Whole::configure(why);
  }

  // The channels a CTA computes, as GroupedMma.
  static int slice(const Conv2dProblem& p, int ctas) { return Whole::slice(p, ctas); }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int channels = slice(p, ctas), splits = p.c / channels;
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n * splits);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_odd_kernel<T, CG, Stride, TP, TQ, Parity><<<grid, 256, size_t(Win::bytes(channels)), stream>>>(
        p, p.p(), p.q(), channels, splits, static_cast<const T*>(b.x), static_cast<const T*>(b.w),
        static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
