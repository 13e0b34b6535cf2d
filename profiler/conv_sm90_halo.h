// A 3x3, stride-1, pad-1 conv2d fprop for SM90 that loads each input pixel once per tile.
//
// CUTLASS's im2col mainloop fetches a tile's pixels once per filter tap (nine times for 3x3).
// This kernel instead loads a halo tile -- `Rows + 2` input rows of `Width + 2` pixels (the
// padding comes from TMA's zero fill), all 64 channels -- and runs the nine taps as wgmma over
// shifted views of it. The trick is a virtual output grid `Width + 2` pixels wide: output pixel
// (p, q) of the tile is virtual pixel v = p * (Width + 2) + q, and tap (r, s) reads halo line
// v + r * (Width + 2) + s, so every tap's B operand is one contiguous run of 128-byte lines, a
// plain K-major 128B-swizzled wgmma operand at a line offset. The two extra columns per row are
// computed and dropped (Width / (Width + 2) of the multiply-adds are useful).
//
// Output channels are wgmma's M (64, the whole filter, resident in shared memory for the kernel's
// life), virtual pixels its N (Rows * (Width + 2) <= 256). Persistent, one CTA per SM: a producer
// warp loads halos (TMA, two stages) and two consumer warpgroups take alternate tiles, their
// mainloops ordered (ping-pong) so one's epilogue overlaps the other's multiply-adds. The epilogue
// transposes fp32 accumulators to NHWC fp16 through shared memory (stmatrix) and stores by TMA.
//
// Use: `Kernel::unsupported(...)` (nullptr when the kernel can run the convolution), then
// `Kernel::initialize(args, x, w, y, problem)` once per set of operands, `Kernel::run(args, stream)`.
// The wgmma type `Mma` is SM90's 64 x (Rows * (Width + 2)) x 16 f32 += f16 * f16, both operands
// K-major, from shared memory (cute::SM90::GMMA::MMA_64xNx16_F32F16F16_SS<Major::K, Major::K>).
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cute/arch/mma_sm90_desc.hpp"
#include "cute/arch/mma_sm90_gmma_ext.hpp"  // wgmma N that are multiples of 8, not 16
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cuda_host_adapter.hpp"

namespace kernelgen {
namespace halo {

constexpr int kChannels = 64;      // C and K: one 128-byte line per pixel and per filter row
constexpr int kTaps = 9;           // 3x3
constexpr int kLine = 128;         // bytes per pixel (and per filter row) in shared memory
constexpr int kFilterTapBytes = kChannels * kLine;
constexpr int kThreads = 384;      // producer warpgroup + two consumer warpgroups
constexpr uint64_t kEvictNormal = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);

template <int Width, int Rows>
struct Geometry {
  static constexpr int kVirtualWidth = Width + 2;
  static constexpr int kPixels = Rows * kVirtualWidth;  // wgmma N
  static_assert(kPixels % 8 == 0 && kPixels <= 256, "Rows * (Width + 2) must be a multiple of 8, at most 256");
  static_assert(kVirtualWidth <= 256 && Rows + 2 <= 256, "a TMA box dimension is at most 256");
  static constexpr int kHaloLines = (Rows + 2) * kVirtualWidth;    // what TMA writes
  static constexpr int kReadLines = kPixels + 2 * kVirtualWidth + 2;  // what the last tap reads
  static constexpr int kHaloBytes = kHaloLines * kLine;
  static constexpr int kHaloStageBytes = (kReadLines * kLine + 1023) / 1024 * 1024;
  static constexpr int kOutLines = Rows * Width;
  static constexpr int kStagingBytes = (kOutLines + 8) * kLine;  // + 8 lines for dropped columns
  static constexpr int kStages = 2;

  static constexpr int kFilterOffset = 0;
  static constexpr int kHaloOffset = kFilterOffset + kTaps * kFilterTapBytes;
  static constexpr int kStagingOffset = kHaloOffset + kStages * kHaloStageBytes;
  static constexpr int kBarrierOffset = kStagingOffset + 2 * ((kStagingBytes + 1023) / 1024 * 1024);
  static constexpr int kSharedBytes = kBarrierOffset + 8 * sizeof(uint64_t) + 1024;  // + alignment slack
};

// A K-major, 128B-swizzled wgmma operand descriptor: 8-line core matrices 1024 bytes apart.
// The swizzle follows the shared memory address (as TMA's does), so an operand may start at
// any 128-byte line of a 1024-byte aligned buffer with the descriptor's base offset left 0
// (setting it to the line phase gives wrong products on the H200).
__device__ __forceinline__ uint64_t operand_descriptor(uint32_t addr) {
  uint64_t desc = uint64_t((addr & 0x3FFFF) >> 4);
  desc |= uint64_t(1) << 16;               // leading byte offset: unused for swizzled K-major
  desc |= uint64_t(1024 >> 4) << 32;       // stride byte offset
  desc |= uint64_t(1) << 62;               // 128-byte swizzle
  return desc;
}

template <class Mma, size_t... I>
__device__ __forceinline__ void mma(uint64_t a, uint64_t b, float* acc, cute::SM90::GMMA::ScaleOut scale,
                                    std::index_sequence<I...>) {
  Mma::fma(a, b, acc[I]..., scale);
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <int Width, int Rows, class Mma>
__global__ void __launch_bounds__(kThreads, 1)
    fprop_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                 const __grid_constant__ CUtensorMap y_map, int images, int height) {
#if defined(__CUDA_ARCH__) && defined(CUTE_ARCH_MMA_SM90A_ENABLED)
  using G = Geometry<Width, Rows>;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kAcc = G::kPixels / 2;  // fp32 accumulators per thread
  static_assert(sizeof(typename Mma::CRegisters) == kAcc * sizeof(float), "Mma must be 64 x Rows * (Width + 2) x 16");

  extern __shared__ char raw_smem[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw_smem) + 1023) / 1024 * 1024);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + G::kBarrierOffset);
  uint64_t* filter_full = bars + 0;
  uint64_t* full = bars + 1;   // [2]
  uint64_t* empty = bars + 3;  // [2]
  uint64_t* order = bars + 5;  // [2]: consumer c may start its next mainloop

  const int warpgroup = threadIdx.x / 128;
  const int tiles_per_image = (height + Rows - 1) / Rows;
  const int tiles = images * tiles_per_image;

  if (threadIdx.x == 0) {
    Barrier::init(filter_full, 1);
    for (int s = 0; s < 2; ++s) {
      Barrier::init(&full[s], 1);
      Barrier::init(&empty[s], 1);
      Barrier::init(&order[s], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x == 0) {
      cute::prefetch_tma_descriptor(&x_map);
      cute::prefetch_tma_descriptor(&w_map);
      Barrier::arrive_and_expect_tx(filter_full, kTaps * kFilterTapBytes);
      for (int t = 0; t < kTaps; ++t)
        cute::SM90_TMA_LOAD_3D::copy(&w_map, filter_full, kEvictNormal, smem + G::kFilterOffset + t * kFilterTapBytes, 0, t, 0);
      int i = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++i) {
        const int s = i & 1;
        Barrier::wait(&empty[s], ((i >> 1) & 1) ^ 1);
        Barrier::arrive_and_expect_tx(&full[s], G::kHaloBytes);
        const int n = tile / tiles_per_image, h0 = tile % tiles_per_image * Rows;
        cute::SM90_TMA_LOAD_4D::copy(&x_map, &full[s], kEvictNormal, smem + G::kHaloOffset + s * G::kHaloStageBytes, 0, -1,
                                     h0 - 1, n);
      }
    }
    return;
  }

  // consumers: warpgroup 1 takes local tiles 0, 2, 4, ..., warpgroup 2 tiles 1, 3, 5, ...
  cutlass::arch::warpgroup_reg_alloc<232>();
  const int c = warpgroup - 1;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const bool leader = thread == 0;
  char* halo = smem + G::kHaloOffset + c * G::kHaloStageBytes;
  char* staging = smem + G::kStagingOffset + c * ((G::kStagingBytes + 1023) / 1024 * 1024);
  const uint32_t filter_addr = cute::cast_smem_ptr_to_uint(smem + G::kFilterOffset);
  const uint32_t halo_addr = cute::cast_smem_ptr_to_uint(halo);
  const uint32_t staging_addr = cute::cast_smem_ptr_to_uint(staging);
  if (leader) cute::prefetch_tma_descriptor(&y_map);

  float acc[kAcc];
  Barrier::wait(filter_full, 0);

  int j = 0;
  for (int tile = blockIdx.x + c * gridDim.x; tile < tiles; tile += 2 * gridDim.x, ++j) {
    Barrier::wait(&full[c], j & 1);
    if (c == 1) {
      Barrier::wait(&order[1], j & 1);
    } else if (j > 0) {
      Barrier::wait(&order[0], (j - 1) & 1);
    }
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int tap = 0; tap < kTaps; ++tap) {
      const int shift = tap / 3 * G::kVirtualWidth + tap % 3;
#pragma unroll
      for (int k = 0; k < kChannels / 16; ++k) {
        uint64_t a = operand_descriptor(filter_addr + tap * kFilterTapBytes + k * 32);
        uint64_t b = operand_descriptor(halo_addr + shift * kLine + k * 32);
        mma<Mma>(a, b, acc, (tap | k) ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero,
                 std::make_index_sequence<kAcc>{});
      }
    }
    cute::warpgroup_commit_batch();
    if (leader) cutlass::arch::ClusterBarrier::arrive(&order[1 - c]);
    cute::warpgroup_wait<0>();
    for (int i = 0; i < kAcc; ++i) cute::warpgroup_fence_operand(acc[i]);
    if (leader) cutlass::arch::ClusterBarrier::arrive(&empty[c]);

    // epilogue: the previous store from this staging buffer has been read, then write and store
    if (leader) cute::tma_store_wait<0>();
    cutlass::arch::NamedBarrier::sync(128, 1 + c);
    // accumulator i: channel 16 * warp + lane / 4 + 8 * (i / 2 % 2), virtual pixel 8 * (i / 4) + 2 * (lane % 4) + i % 2
    // stmatrix.trans: lane l addresses line (l % 8) of matrix l / 8, matrix m = pixel group j0 + m / 2, channel half m % 2
    const int m = lane / 8;
#pragma unroll
    for (int g = 0; g < G::kPixels / 8; g += 2) {
      const int groups = (g + 1 < G::kPixels / 8) ? 2 : 1;
      const int v = 8 * (g + (groups == 2 ? m / 2 : 0)) + lane % 8;
      const int p = v / G::kVirtualWidth, q = v % G::kVirtualWidth;
      const int line = q < Width ? p * Width + q : G::kOutLines + lane % 8;
      const int chunk = 2 * warp + (m & 1);
      const uint32_t addr = staging_addr + line * kLine + ((chunk ^ (line & 7)) << 4);
      const float* d = acc + 4 * g;
      if (groups == 2) {
        asm volatile("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                     "r"(pack_half2(d[0], d[1])), "r"(pack_half2(d[2], d[3])), "r"(pack_half2(d[4], d[5])),
                     "r"(pack_half2(d[6], d[7])));
      } else {
        asm volatile("stmatrix.sync.aligned.x2.trans.m8n8.shared.b16 [%0], {%1, %2};\n" ::"r"(addr),
                     "r"(pack_half2(d[0], d[1])), "r"(pack_half2(d[2], d[3])));
      }
    }
    cutlass::arch::fence_view_async_shared();
    cutlass::arch::NamedBarrier::sync(128, 1 + c);
    if (leader) {
      const int n = tile / tiles_per_image, h0 = tile % tiles_per_image * Rows;
      cute::SM90_TMA_STORE_4D::copy(&y_map, staging, 0, 0, h0, n);
      cute::tma_store_arrive();
    }
  }
  if (leader) cute::tma_store_wait<0>();
#endif
}

// A tensor map over a packed fp16 tensor with the given extents (innermost first), 128B-swizzled
// boxes. Nullptr on success, else what failed.
inline const char* encode(CUtensorMap* map, const void* base, int rank, const cuuint64_t* dims,
                          const cuuint32_t* box) {
  cuuint64_t strides[4];
  cuuint64_t stride = 2;
  for (int i = 0; i < rank - 1; ++i) strides[i] = stride *= dims[i];
  cuuint32_t ones[4] = {1, 1, 1, 1};
  CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, const_cast<void*>(base), dims, strides, box, ones,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled failed (operands not 16-byte aligned?)";
}

}  // namespace halo

// A halo conv2d fprop kernel for activations `Width` pixels wide, `Rows` output rows per tile.
template <int Width, int Rows, class Mma>
struct HaloFprop {
  using Geometry = halo::Geometry<Width, Rows>;
  static constexpr int kSharedBytes = Geometry::kSharedBytes;

  struct Arguments {
    CUtensorMap x, w, y;
    int n, p;  // images, output rows
  };

  // Nullptr when the kernel computes this convolution (NHWC x, KRSC w, NPQK y), else why not.
  static const char* unsupported(int w, int c, int k, int r, int s, int pad_h, int pad_w, int stride_h,
                                 int stride_w, int dilation_h, int dilation_w) {
    if (r != 3 || s != 3) return "needs a 3x3 filter";
    if (pad_h != 1 || pad_w != 1 || stride_h != 1 || stride_w != 1 || dilation_h != 1 || dilation_w != 1)
      return "needs padding 1, stride 1, dilation 1";
    if (c != halo::kChannels || k != halo::kChannels) return "needs 64 input and 64 output channels";
    if (w != Width) return "built for another image width";
    return nullptr;
  }

  // Binds operands of an n x h x Width x 64 convolution (same-size output). Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h) {
    const cuuint64_t x_dims[4] = {halo::kChannels, Width, cuuint64_t(h), cuuint64_t(n)};
    const cuuint32_t x_box[4] = {halo::kChannels, Geometry::kVirtualWidth, Rows + 2, 1};
    const cuuint64_t w_dims[3] = {halo::kChannels, halo::kTaps, halo::kChannels};
    const cuuint32_t w_box[3] = {halo::kChannels, 1, halo::kChannels};
    const cuuint32_t y_box[4] = {halo::kChannels, Width, Rows, 1};
    const char* err = halo::encode(&args.x, x, 4, x_dims, x_box);
    if (!err) err = halo::encode(&args.w, w, 3, w_dims, w_box);
    if (!err) err = halo::encode(&args.y, y, 4, x_dims, y_box);
    if (err) return err;
    args.n = n;
    args.p = h;
    if (cudaFuncSetAttribute(halo::fprop_kernel<Width, Rows, Mma>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    return nullptr;
  }

  // One persistent CTA per SM (`sms`: the device's multiprocessor count), at most one per tile.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const int tiles = args.n * ((args.p + Rows - 1) / Rows);
    halo::fprop_kernel<Width, Rows, Mma><<<tiles < sms ? tiles : sms, halo::kThreads, kSharedBytes, stream>>>(
        args.x, args.w, args.y, args.n, args.p);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
