// Grouped 3x3 convolutions of 4, 8 or 16 channels a group on tensor cores (grouped.h: 1 < groups <
// C, K = C): ResNeXt's layers, where CUTLASS's group kernels pad a tile of 32 or more output channels
// with zeros. NHWC activations, KRS(C/groups) filters, NPQK output, fp16 or bf16, fp32 accumulation.
//
// One mma.sync m16n8k16 takes 16 output pixels (A's rows) by 8 output channels (B's columns). A
// warp computes a unit of channels at a time: 8 (one group of 8, or two of 4 taken as one with a
// block-diagonal filter) whose k-steps are two taps of the 8 input channels (5 k-steps for 9 taps,
// the tenth's B zero), or 16 (one group) whose k-steps are one tap of its 16 input channels, two
// mma.sync a k-step for its two blocks of 8 output channels. The unit's filter stays in registers.
//
// A CTA of 8 warps computes TP output rows by TQ output columns (a multiple of 16) of one image for
// a slice of the channels (all C, or, where the layer has fewer tiles than two a SM, C halved while
// each half keeps 8 units): its input window ((TP - 1) * Stride + 3 rows by (TQ - 1) * Stride + 3
// columns of the slice's channels, zeros outside the image) comes into shared memory with 16-byte
// cp.async copies, each pixel padded by 16 bytes so that the eight pixels an ldmatrix reads fall in
// different banks; a warp takes every eighth unit and reads each k-step's A fragment (16 pixels by
// 16 (tap, channel) pairs) with one ldmatrix.x4. The window of all C channels must fit 227 KiB.
//
// kernelgen::GroupedMma<T, CG, Stride, TP, TQ> is a kernel type for DepthwiseOperation
// (depthwise_adapter.h): can_implement(problem, groups), configure() and launch(problem, binding,
// ctas, stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "operation.h"

namespace kernelgen {
namespace grouped_mma {

constexpr int kSharedMemory = 227 * 1024;

// D (16x8, f32) += A (16x16, row) B (16x8, col) of 16-bit T: one warp's mma.sync.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], const void* row) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(at));
}

// 16 bytes global -> shared, asynchronously; zeros where !valid (src must still be a valid address).
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global), "r"(valid ? 16 : 0));
}

template <typename T>
__device__ __forceinline__ uint32_t pair_from_float(float a, float b) {
  uint32_t v;
  if constexpr (std::is_same<T, __half>::value) *reinterpret_cast<__half2*>(&v) = __floats2half2_rn(a, b);
  else *reinterpret_cast<__nv_bfloat162*>(&v) = __floats2bfloat162_rn(a, b);
  return v;
}

// How a group of CG channels maps onto mma.sync m16n8k16 (A: 16 output pixels by K, B: K by 8
// output channels): a unit is the channels a warp computes at once, 8 (two groups of 4, or one of
// 8) or 16 (one group); a k-step is two taps of a unit of 8 channels, or one tap of 16.
template <int CG>
struct Unit {
  static_assert(CG == 4 || CG == 8 || CG == 16, "4, 8 or 16 channels a group");
  static constexpr int kChannels = CG < 8 ? 8 : CG;
  static constexpr int kSteps = CG <= 8 ? 5 : 9;  // 9 taps, two a k-step (the tenth's B zero), or one
  static constexpr int kBlocks = kChannels / 8;   // mma.sync N blocks of 8 output channels
};

// The fragment layouts (PTX ISA, mma.m16n8k16 with 16-bit inputs): lane = 4 * row + t. B's
// registers hold (k 2t..2t+1, n row) and (k 8 + 2t.., n row); D's (row, 2t..2t+1) and (row + 8,
// 2t..2t+1). A lane's B registers for unit `unit` of a KRS(CG) filter: with 8 channels a unit, k
// 0-7 is tap 2i and 8-15 tap 2i+1 of k-step i (zero for the tenth tap and, with 4 channels a group,
// across the unit's two groups); with 16, k is the channel of tap i.
template <typename T, int CG>
__device__ __forceinline__ void load_filter(const T* __restrict__ w, int unit, int lane,
                                            uint32_t (&b)[Unit<CG>::kSteps][Unit<CG>::kBlocks][2]) {
  using U = Unit<CG>;
#pragma unroll
  for (int i = 0; i < U::kSteps; ++i) {
#pragma unroll
    for (int nb = 0; nb < U::kBlocks; ++nb) {
#pragma unroll
      for (int reg = 0; reg < 2; ++reg) {
        T v[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int out = nb * 8 + lane / 4;  // the output channel within the unit
          int tap, j;                         // the tap and the input channel within the group
          bool zero;
          if constexpr (CG <= 8) {
            tap = 2 * i + reg, j = 2 * (lane % 4) + e;
            zero = tap >= 9 || (CG == 4 && j / 4 != out / 4);
            j %= CG;
          } else {
            tap = i, j = 8 * reg + 2 * (lane % 4) + e;
            zero = false;
          }
          v[e] = zero ? T(0.0f) : w[(size_t(unit * U::kChannels + out) * 9 + tap) * CG + j];
        }
        b[i][nb][reg] = *reinterpret_cast<const uint32_t*>(v);
      }
    }
  }
}

template <int Stride, int TP, int TQ>
struct Window {
  static constexpr int kRows = (TP - 1) * Stride + 3, kColumns = (TQ - 1) * Stride + 3;
  static long long pitch(int c) { return 2LL * c + 16; }  // bytes a pixel, padded
  static long long bytes(int c) { return kRows * kColumns * pitch(c); }
};

// A CTA: TP x TQ output pixels of image blockIdx.z / splits, for the `slice` channels (whole units)
// from slice * (blockIdx.z % splits).
template <typename T, int CG, int Stride, int TP, int TQ>
__global__ void __launch_bounds__(256) grouped_mma_kernel(Conv2dProblem L, int P, int Q, int slice, int splits,
                                                          const T* __restrict__ x, const T* __restrict__ w,
                                                          T* __restrict__ y) {
  static_assert(TQ % 16 == 0, "whole 16-pixel tiles along a row");
  using U = Unit<CG>;
  using Win = Window<Stride, TP, TQ>;
  extern __shared__ __align__(16) unsigned char window[];
  const int pitch = 2 * slice + 16, vectors = slice / 8;
  const int q0 = int(blockIdx.x) * TQ, p0 = int(blockIdx.y) * TP;
  const int n = int(blockIdx.z) / splits, c0 = slice * (int(blockIdx.z) % splits);
  const int h0 = p0 * Stride - L.pad_h, w0 = q0 * Stride - L.pad_w;
  for (int v = threadIdx.x; v < Win::kRows * Win::kColumns * vectors; v += 256) {
    const int pixel = v / vectors, chunk = v % vectors, r = pixel / Win::kColumns, c = pixel % Win::kColumns;
    const int h = h0 + r, col = w0 + c;
    const bool valid = h >= 0 && h < L.h && col >= 0 && col < L.w;
    const T* from = valid ? x + ((size_t(n) * L.h + h) * L.w + col) * L.c + c0 + chunk * 8 : x;
    copy16(window + pixel * pitch + chunk * 16, from, valid);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int matrix = lane / 8, row = (matrix % 2) * 8 + lane % 8;  // the A row this lane's address gives
  for (int local = warp; local < slice / U::kChannels; local += 8) {
    const int unit = c0 / U::kChannels + local;
    uint32_t b[U::kSteps][U::kBlocks][2];
    load_filter<T, CG>(w, unit, lane, b);
#pragma unroll 1
    for (int tp = 0; tp < TP; ++tp) {
      if (p0 + tp >= P) break;
#pragma unroll
      for (int mt = 0; mt < TQ / 16; ++mt) {
        float d[U::kBlocks][4] = {};
#pragma unroll
        for (int i = 0; i < U::kSteps; ++i) {
          // this lane's A row: a pixel of the tap (8 channels a unit: tap 2i or 2i+1 by the matrix,
          // the tenth reading the ninth's rows) and the unit's channels (16: the matrix's half)
          const int tap = CG <= 8 ? min(2 * i + matrix / 2, 8) : i;
          const int bytes = CG <= 8 ? local * 16 : local * 32 + (matrix / 2) * 16;
          const int pixel = (tp * Stride + tap / 3) * Win::kColumns + (mt * 16 + row) * Stride + tap % 3;
          uint32_t a[4];
          ldmatrix_x4(a, window + pixel * pitch + bytes);
#pragma unroll
          for (int nb = 0; nb < U::kBlocks; ++nb) mma16816<T>(d[nb], a, b[i][nb]);
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = q0 + mt * 16 + lane / 4 + 8 * e;
          if (q >= Q) continue;
          T* out = y + ((size_t(n) * P + p0 + tp) * Q + q) * L.k + unit * U::kChannels + 2 * (lane % 4);
#pragma unroll
          for (int nb = 0; nb < U::kBlocks; ++nb)
            *reinterpret_cast<uint32_t*>(out + nb * 8) = pair_from_float<T>(d[nb][2 * e], d[nb][2 * e + 1]);
        }
      }
    }
  }
}

}  // namespace grouped_mma

template <typename T, int CG, int Stride, int TP, int TQ>
struct GroupedMma {
  using Win = grouped_mma::Window<Stride, TP, TQ>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups != 0 || p.c / groups != CG || p.k != p.c)
      return "built for " + std::to_string(CG) + " channels a group in and out (K = C = " + std::to_string(CG) +
             " x groups)";
    if (p.r != 3 || p.s != 3) return "built for 3x3 filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    if (Win::bytes(p.c) > grouped_mma::kSharedMemory)
      return "the input window of " + std::to_string(p.c) + " channels needs " + std::to_string(Win::bytes(p.c)) +
             " bytes of shared memory, more than " + std::to_string(grouped_mma::kSharedMemory);
    if (p.n > 65535 || (p.p() + TP - 1) / TP > 65535) return "more images or tile rows than a grid holds";
    return {};
  }

  // The kernel's shared memory set up once (as much as a CTA may have), and the SMs (the `ctas` a
  // launch is given); 0 with a reason in `why` if the device cannot run it.
  static int configure(std::string& why) {
    const auto kernel = grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ>;
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, grouped_mma::kSharedMemory) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, grouped_mma::kSharedMemory) !=
            cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "needs " + std::to_string(grouped_mma::kSharedMemory) + " bytes of shared memory, more than a CTA may "
            "have here";
      return 0;
    }
    return sms;
  }

  // The channels a CTA computes: all C, or where the layer has fewer tiles than two a SM (`ctas`,
  // configure()'s), C halved while each half still holds a unit for each of the 8 warps.
  static int slice(const Conv2dProblem& p, int ctas) {
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ);
    int slice = p.c;
    while (slice % 2 == 0 && (slice / 2) % (8 * grouped_mma::Unit<CG>::kChannels) == 0 &&
           tiles * (p.c / slice) < 2LL * ctas && (long long)p.n * (p.c / slice) * 2 <= 65535)
      slice /= 2;
    return slice;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int channels = slice(p, ctas), splits = p.c / channels;
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n * splits);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ><<<grid, 256, size_t(Win::bytes(channels)), stream>>>(
        p, p.p(), p.q(), channels, splits, static_cast<const T*>(b.x), static_cast<const T*>(b.w),
        static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
