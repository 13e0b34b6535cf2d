// Grouped 3x3 convolutions of 4 to 64 channels a group on tensor cores (grouped.h: 1 < groups < C,
// K = C): ResNeXt's and RegNet's layers, where CUTLASS's group kernels pad a tile of 32 or more output channels
// with zeros. NHWC activations, KRS(C/groups) filters, NPQK output, fp16 or bf16, fp32 accumulation.
//
// One mma.sync m16n8k16 takes 16 output pixels (A's rows) by 8 output channels (B's columns). A
// warp computes a unit of output channels at a time (Unit): 8 (one group of 8, or two of 4 taken as
// one with a block-diagonal filter), whose k-steps are two taps of the 8 input channels (5 k-steps
// for 9 taps, the tenth's B zero); or 16 of a group of 16 or 32, or 8 of a group of 24 or 64, whose
// k-steps are 16 input channels of one tap, one mma.sync a k-step for each block of 8 output
// channels (a group of 24: 8 of its output channels a unit, two k-steps a tap, the second's last 8
// B rows zero). The unit's filter stays in registers.
//
// A CTA of 8 warps computes TP output rows by TQ output columns (a multiple of 16) of one image for
// a slice of the channels (all C, or, where the layer has fewer tiles than two a SM, C halved while
// each half keeps 8 units and whole groups): its input window ((TP - 1) * Stride + 3 rows by (TQ - 1) * Stride + 3
// columns of the slice's channels, zeros outside the image) comes into shared memory with 16-byte
// cp.async copies, each pixel padded by 16 bytes (zeros) so that the eight pixels an ldmatrix reads
// fall in different banks; a warp takes every eighth unit and reads each k-step's A fragment (16 pixels by
// 16 (tap, channel) pairs) with one ldmatrix.x4. The window of all C channels must fit 227 KiB.
//
// At stride 2 a window may keep each row's even columns before its odd ones (Parity), so that the
// pixels an ldmatrix reads are consecutive and fall in different banks.
//
// kernelgen::GroupedMma<T, CG, Stride, TP, TQ, Parity> is a kernel type for DepthwiseOperation
// (depthwise_adapter.h): can_implement(problem, groups), configure() and launch(problem, binding,
// ctas, stream).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "depthwise.h"  // depthwise::copy16 (cp.async with zero fill), depthwise::pair_from_float
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

// How a group of CG channels maps onto mma.sync m16n8k16 (A: 16 output pixels by K, B: K by 8
// output channels). A unit is the output channels a warp computes at once: 8 (a group of 8, or two
// of 4), 16 (of a group of 16 or 32) or 8 (of a group of 24 or 64), in blocks of 8. A k-step is two
// taps of a unit's 8 input channels (groups of 4 or 8: 5 k-steps, the tenth tap's B zero), or 16
// input channels of one tap (larger groups: CG / 16 k-steps a tap, rounded up; past the group's
// last channel B is zero, and A reads the next group's channels or the window's zeroed padding).
// The unit's B stays in registers: 20, 36, 36, 72 and 72 of them.
template <int CG>
struct Unit {
  static_assert(CG == 4 || CG == 8 || CG == 16 || CG == 24 || CG == 32 || CG == 64,
                "4, 8, 16, 24, 32 or 64 channels a group");
  static constexpr int kOut = CG == 16 || CG == 32 ? 16 : 8;  // output channels a unit
  static constexpr int kBlocks = kOut / 8;                     // mma.sync N blocks of 8 output channels
  static constexpr int kSplit = CG <= 8 ? 1 : (CG + 15) / 16;  // k-steps a tap (groups of 16 or more)
  static constexpr int kSteps = CG <= 8 ? 5 : 9 * kSplit;
};

// The fragment layouts (PTX ISA, mma.m16n8k16 with 16-bit inputs): lane = 4 * row + t. B's
// registers hold (k 2t..2t+1, n row) and (k 8 + 2t.., n row); D's (row, 2t..2t+1) and (row + 8,
// 2t..2t+1). A lane's B registers for unit `unit` of a KRS(CG) filter: with groups of 4 or 8, k
// 0-7 is tap 2i and 8-15 tap 2i+1 of k-step i (zero for the tenth tap and, with 4 channels a group,
// across the unit's two groups); with larger groups, k is the input channel (i % kSplit) * 16 + k
// of tap i / kSplit.
// The offset in w (KRS(CG)) of element e (0-1) of B register `reg` (0-1) of output block `nb` that
// `lane` holds at k-step i for unit `unit`, or -1 where the element is zero.
template <int CG>
__host__ __device__ inline long long b_offset(int unit, int lane, int i, int nb, int reg, int e) {
  using U = Unit<CG>;
  const int out = nb * 8 + lane / 4;  // the output channel within the unit
  int tap, j;                         // the tap, and the input channel within the group
  if (CG <= 8) {
    tap = 2 * i + reg, j = 2 * (lane % 4) + e;
    if (tap >= 9 || (CG == 4 && j / 4 != out / 4)) return -1;
    j %= CG;
  } else {
    tap = i / U::kSplit, j = (i % U::kSplit) * 16 + 8 * reg + 2 * (lane % 4) + e;
    if (j >= CG) return -1;
  }
  return ((long long)(unit * U::kOut + out) * 9 + tap) * CG + j;
}

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
          const long long at = b_offset<CG>(unit, lane, i, nb, reg, e);
          v[e] = at < 0 ? T(0.0f) : w[at];
        }
        b[i][nb][reg] = *reinterpret_cast<const uint32_t*>(v);
      }
    }
  }
}

// A CTA's input window. With Parity (stride 2), each row holds its even columns, then its odd ones:
// the consecutive output pixels of a tap then read consecutive pixels of the window, whose pitch
// puts the eight an ldmatrix reads in different banks (two columns apart they share banks).
// A tile of 8 columns (TQ = 8, for images 7 or 14 wide) takes its 16-pixel mma tiles two output
// rows at a time: pixel j of such a tile is row j / 8, column j % 8 of the two.
template <int Stride, int TP, int TQ, bool Parity = false>
struct Window {
  static_assert(!Parity || Stride == 2, "columns split by parity at stride 2 only");
  static_assert(TQ % 16 == 0 || (TQ == 8 && TP % 2 == 0), "whole 16-pixel tiles: of a row, or of two of 8");
  static constexpr int kRows = (TP - 1) * Stride + 3, kColumns = (TQ - 1) * Stride + 3;
  static constexpr int kTileRows = TQ < 16 ? 16 / TQ : 1;  // output rows a 16-pixel tile spans
  static constexpr int kRowTiles = TQ < 16 ? 1 : TQ / 16;  // 16-pixel tiles along those rows
  static constexpr int kEven = (kColumns + 1) / 2;  // the even columns of a row (Parity)
  // where column c of a row is kept
  __host__ __device__ static constexpr int column(int c) { return Parity ? (c % 2) * kEven + c / 2 : c; }
  __host__ __device__ static long long pitch(int c) { return 2LL * c + 16; }  // bytes a pixel, padded
  static long long bytes(int c) { return kRows * kColumns * pitch(c); }

  // The byte, in the window of `slice` channels, of the A row `lane` gives ldmatrix.x4 at k-step i
  // of output row tp (the first of kTileRows) and 16-pixel tile mt, for the window's unit `local` of
  // CG channels a group:
  // the lane's matrix (lane / 8) says the row's pixel (its half of the tile's 16) and its k half (8
  // channels a unit: tap 2i or 2i+1, the tenth reading the ninth's pixels, its B zero; 16: the
  // unit's first or last 8 channels of tap i).
  // The 16-byte vectors a window of `slice` channels is loaded in: each pixel's channels and its
  // padding (zeros: a group of 24 channels reads 8 past the last group's).
  __host__ __device__ static int vectors(int slice) { return kRows * kColumns * (slice / 8 + 1); }

  // Vector v of the window of `slice` channels from c0 of the CTA whose tile starts at output row
  // p0 and column q0 of image n: its byte in the window (`byte`), and the offset in x of its first
  // element, or -1 where it is zeros (outside the image, or the pixel's padding).
  __host__ __device__ static long long source(const Conv2dProblem& L, int slice, int n, int c0, int p0, int q0, int v,
                                              int& byte) {
    const int per_pixel = slice / 8 + 1, pixel = v / per_pixel, chunk = v % per_pixel;
    const int h = p0 * Stride - L.pad_h + pixel / kColumns, col = q0 * Stride - L.pad_w + pixel % kColumns;
    byte = ((pixel / kColumns) * kColumns + column(pixel % kColumns)) * int(pitch(slice)) + chunk * 16;
    if (chunk == per_pixel - 1 || h < 0 || h >= L.h || col < 0 || col >= L.w) return -1;
    return (((long long)n * L.h + h) * L.w + col) * L.c + c0 + chunk * 8;
  }

  template <int CG>
  __host__ __device__ static int a_row(int slice, int local, int tp, int mt, int i, int lane) {
    using U = Unit<CG>;
    const int matrix = lane / 8, row = (matrix % 2) * 8 + lane % 8;
    const int tap = CG <= 8 ? (2 * i + matrix / 2 < 8 ? 2 * i + matrix / 2 : 8) : i / U::kSplit;
    // the unit's input channels: its own 8, or its group's, 16 of them a k-step
    const int bytes = CG <= 8 ? local * 16
                              : (local * U::kOut / CG) * CG * 2 + (i % U::kSplit) * 32 + (matrix / 2) * 16;
    const int j = mt * 16 + row, r = tp + j / TQ, q = j % TQ;  // the output pixel of the tile's row
    const int pixel = (r * Stride + tap / 3) * kColumns + column(q * Stride + tap % 3);
    return pixel * int(pitch(slice)) + bytes;
  }

  // The offset in y of the two outputs of D registers 2e, 2e+1 of output block nb that `lane` holds
  // for tile mt of output row p (the first of kTileRows) of image n (its tiles from column q0),
  // unit `unit`; -1 past the row or the image.
  template <int CG>
  __host__ __device__ static long long d_offset(const Conv2dProblem& L, int P, int Q, int n, int p, int q0, int mt,
                                                int unit, int nb, int lane, int e) {
    const int j = mt * 16 + lane / 4 + 8 * e, q = q0 + j % TQ;
    p += j / TQ;
    if (q >= Q || p >= P) return -1;
    return (((long long)n * P + p) * Q + q) * L.k + unit * Unit<CG>::kOut + nb * 8 + 2 * (lane % 4);
  }
};

// A CTA: TP x TQ output pixels of image blockIdx.z / splits, for the `slice` channels (whole units)
// from slice * (blockIdx.z % splits).
template <typename T, int CG, int Stride, int TP, int TQ, bool Parity>
__global__ void __launch_bounds__(256) grouped_mma_kernel(Conv2dProblem L, int P, int Q, int slice, int splits,
                                                          const T* __restrict__ x, const T* __restrict__ w,
                                                          T* __restrict__ y) {
  using U = Unit<CG>;
  using Win = Window<Stride, TP, TQ, Parity>;
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
struct GroupedMma {
  using Win = grouped_mma::Window<Stride, TP, TQ, Parity>;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;

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
    const auto kernel = grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ, Parity>;
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
    while (slice % 2 == 0 && (slice / 2) % (8 * grouped_mma::Unit<CG>::kOut) == 0 && (slice / 2) % CG == 0 &&
           tiles * (p.c / slice) < 2LL * ctas && (long long)p.n * (p.c / slice) * 2 <= 65535)
      slice /= 2;
    return slice;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int channels = slice(p, ctas), splits = p.c / channels;
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n * splits);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ, Parity><<<grid, 256, size_t(Win::bytes(channels)), stream>>>(
        p, p.p(), p.q(), channels, splits, static_cast<const T*>(b.x), static_cast<const T*>(b.w),
        static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
