// Grouped 3x3 convolutions of 4 or 8 channels a group on tensor cores (grouped.h: 1 < groups < C,
// K = C): ResNeXt's and RegNet-style layers, where CUTLASS's group kernels pad a tile of 64 or more
// output channels with zeros. NHWC activations, KRS(C/groups) filters, NPQK output, fp16 or bf16,
// fp32 accumulation.
//
// One mma.sync m16n8k16 takes 16 output pixels (A's rows) by the 8 output channels of a group of 8
// channels (B's columns), its K two taps of those 8 input channels: a group's 3x3 filter is 5
// k-steps (the tenth tap's B is zero), held in registers. Groups of 4 channels are taken two at a
// time as one of 8, their filter block-diagonal (B zero across the two groups).
//
// A CTA of 8 warps computes TP output rows by TQ output columns (a multiple of 16) of one image for
// every channel: its input window ((TP - 1) * Stride + 3 rows by (TQ - 1) * Stride + 3 columns, all
// C channels, zeros outside the image) comes into shared memory with 16-byte cp.async copies along
// the channels, each pixel padded by 16 bytes so that the eight pixels an ldmatrix reads fall in
// different banks; a warp takes every eighth group of 8 channels, and reads each k-step's A
// fragment (16 pixels, two taps of 8 channels) with one ldmatrix.x4 (the tenth tap reads the
// ninth's: its B is zero). The window of all C channels must fit 227 KiB of shared memory.
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

constexpr int kSteps = 5;  // 9 taps, two a k-step
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

// The fragment layouts (PTX ISA, mma.m16n8k16 with 16-bit inputs): lane = 4 * row + t. B's
// registers hold (k 2t..2t+1, n row) and (k 8 + 2t.., n row); D's (row, 2t..2t+1) and (row + 8,
// 2t..2t+1). A column of B is an output channel of the group of 8, its k a (tap, channel) pair:
// k 0-7 tap 2i, 8-15 tap 2i+1 of k-step i. A lane's B registers for the group of 8 channels
// `group8` of a KRS(CG) filter: zero for the tenth tap and, with 4 channels a group, across groups.
template <typename T, int CG>
__device__ __forceinline__ void load_filter(const T* __restrict__ w, int group8, int lane, uint32_t (&b)[kSteps][2]) {
  const int out = lane / 4;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
#pragma unroll
    for (int reg = 0; reg < 2; ++reg) {
      const int tap = 2 * i + reg;
      T v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * (lane % 4) + e;
        const bool zero = tap >= 9 || (CG == 4 && j / 4 != out / 4);
        v[e] = zero ? T(0.0f) : w[(size_t(group8 * 8 + out) * 9 + tap) * CG + j % CG];
      }
      b[i][reg] = *reinterpret_cast<const uint32_t*>(v);
    }
  }
}

template <int Stride, int TP, int TQ>
struct Window {
  static constexpr int kRows = (TP - 1) * Stride + 3, kColumns = (TQ - 1) * Stride + 3;
  static long long pitch(int c) { return 2LL * c + 16; }  // bytes a pixel, padded
  static long long bytes(int c) { return kRows * kColumns * pitch(c); }
};

template <typename T, int CG, int Stride, int TP, int TQ>
__global__ void __launch_bounds__(256) grouped_mma_kernel(Conv2dProblem L, int P, int Q, const T* __restrict__ x,
                                                          const T* __restrict__ w, T* __restrict__ y) {
  static_assert(CG == 4 || CG == 8, "4 or 8 channels a group");
  static_assert(TQ % 16 == 0, "whole 16-pixel tiles along a row");
  using Win = Window<Stride, TP, TQ>;
  extern __shared__ __align__(16) unsigned char window[];
  const int pitch = 2 * L.c + 16, vectors = L.c / 8;
  const int q0 = int(blockIdx.x) * TQ, p0 = int(blockIdx.y) * TP, n = int(blockIdx.z);
  const int h0 = p0 * Stride - L.pad_h, w0 = q0 * Stride - L.pad_w;
  for (int v = threadIdx.x; v < Win::kRows * Win::kColumns * vectors; v += 256) {
    const int pixel = v / vectors, chunk = v % vectors, r = pixel / Win::kColumns, c = pixel % Win::kColumns;
    const int h = h0 + r, col = w0 + c;
    const bool valid = h >= 0 && h < L.h && col >= 0 && col < L.w;
    const T* from = valid ? x + ((size_t(n) * L.h + h) * L.w + col) * L.c + chunk * 8 : x;
    copy16(window + pixel * pitch + chunk * 16, from, valid);
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int matrix = lane / 8, row = (matrix % 2) * 8 + lane % 8;  // the A row this lane's address gives
  for (int group8 = warp; group8 < L.c / 8; group8 += 8) {
    uint32_t b[kSteps][2];
    load_filter<T, CG>(w, group8, lane, b);
#pragma unroll 1
    for (int tp = 0; tp < TP; ++tp) {
      if (p0 + tp >= P) break;
#pragma unroll
      for (int mt = 0; mt < TQ / 16; ++mt) {
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < kSteps; ++i) {
          const int tap = min(2 * i + matrix / 2, 8);
          const int pixel = (tp * Stride + tap / 3) * Win::kColumns + (mt * 16 + row) * Stride + tap % 3;
          uint32_t a[4];
          ldmatrix_x4(a, window + pixel * pitch + group8 * 16);
          mma16816<T>(d, a, b[i]);
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = q0 + mt * 16 + lane / 4 + 8 * e;
          if (q < Q)
            *reinterpret_cast<uint32_t*>(y + ((size_t(n) * P + p0 + tp) * Q + q) * L.k + group8 * 8 + 2 * (lane % 4)) =
                pair_from_float<T>(d[2 * e], d[2 * e + 1]);
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

  // The kernel's shared memory set up once (as much as a CTA may have); 0 with a reason in `why`
  // if the device cannot run it. Its grid is the layer's tiles: `ctas` is not used.
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

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int, cudaStream_t stream) {
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ><<<grid, 256, size_t(Win::bytes(p.c)), stream>>>(
        p, p.p(), p.q(), static_cast<const T*>(b.x), static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
