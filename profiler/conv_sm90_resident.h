// Filter-resident conv2d fprop kernels for SM90 with 64-channel pixels: the CTA keeps its filter
// slice in shared memory for its whole (persistent) life and streams pixel tiles through.
// `Element` is the 16-bit type of activations, filters and output: cutlass::half_t or
// cutlass::bfloat16_t; accumulation is fp32.
//
// Output channels are wgmma's M (64 per CTA), pixels its N, both operands K-major 128-byte lines
// (one line = 64 channels), 128B-swizzled by TMA. A producer thread loads pixel tiles (TMA,
// `Stages` buffers); two consumer warpgroups take alternate tiles, their mainloops ordered
// (ping-pong) so that one's epilogue overlaps the other's multiply-adds. The epilogue transposes
// the fp32 accumulators to NHWC `Element` lines in shared memory (stmatrix) and stores them by TMA.
//
// Two tilings:
//  - HaloTiling<Width, Rows>: 3x3, stride 1, pad 1, C = 64, K a multiple of 64 (a 64-channel slice
//    of the filter per CTA, as for the pointwise tiling). CUTLASS's im2col mainloop loads a
//    tile's pixels once per filter tap; this loads `Rows + 2` input rows of `Width + 2` pixels
//    once (TMA zero-fills the padding) and runs the nine taps over shifted views of them. Output
//    pixel (p, q) of the tile is virtual pixel v = p * (Width + 2) + q and tap (r, s) reads halo
//    line v + r * (Width + 2) + s, so each tap's operand is one contiguous run of lines; the two
//    extra columns per row are computed and dropped. Built for one image width.
//  - PointwiseTiling<CBlocks, Stages>: 1x1, stride 1, no padding, C = 64 * CBlocks, K a multiple
//    of 64: the GEMM of 256-pixel tiles with a 64-channel filter slice per CTA (CTAs for the same
//    pixels and other slices run side by side, so the pixels come from L2 after the first).
//
// Use: `Kernel::unsupported(...)` (nullptr when the kernel can run the convolution), then
// `Kernel::initialize(args, x, w, y, n, h, w, c, k)` once per set of operands, and
// `Kernel::run(args, sms, stream)`. `Mma` is SM90's 64 x kPixels x 16 f32 += Element * Element
// wgmma, both operands K-major from shared memory (cute::SM90::GMMA::MMA_64xNx16_F32F16F16_SS<K, K>
// for fp16, MMA_64xNx16_F32BF16BF16_SS for bf16).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/arch/mma_sm90.hpp"
#include "cute/arch/mma_sm90_desc.hpp"
#include "cute/arch/mma_sm90_gmma_ext.hpp"  // wgmma N that are multiples of 8, not 16
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cuda_host_adapter.hpp"
#include "cutlass/numeric_types.h"

namespace kernelgen {
namespace resident {

constexpr int kChannels = 64;  // channels per 128-byte line, and output channels per CTA
constexpr int kLine = 128;
constexpr int kBlockBytes = kChannels * kLine;  // a 64 x 64 filter block
constexpr int kThreads = 384;                   // producer warpgroup + two consumer warpgroups
constexpr uint64_t kEvictNormal = uint64_t(cute::TMA::CacheHintSm90::EVICT_NORMAL);

constexpr int round_up(int n, int to) { return (n + to - 1) / to * to; }

// What a launch covers: `tiles` pixel tiles for each of `channel_blocks` 64-channel output slices.
struct Params {
  int tiles, channel_blocks;
  int tiles_per_image;  // halo tiling: tiles per image
};

template <int Width, int Rows>
struct HaloTiling {
  static constexpr int kVirtualWidth = Width + 2;
  static constexpr int kPixels = Rows * kVirtualWidth;
  static_assert(kPixels % 8 == 0 && kPixels <= 256, "Rows * (Width + 2) must be a multiple of 8, at most 256");
  static_assert(kVirtualWidth <= 256 && Rows + 2 <= 256, "a TMA box dimension is at most 256");
  static constexpr int kStages = 2;
  static constexpr int kFilterBytes = 9 * kBlockBytes;
  static constexpr int kLoadBytes = (Rows + 2) * kVirtualWidth * kLine;  // what TMA writes per tile
  // the last tap reads two lines past the halo (only for dropped columns)
  static constexpr int kStageBytes = round_up((kPixels + 2 * kVirtualWidth + 2) * kLine, 1024);
  static constexpr int kStagingLines = Rows * Width + 8;  // + 8 lines taking the dropped columns

  __device__ static void load_filter(const CUtensorMap* w, uint64_t* bar, char* smem, int channel_block) {
    for (int t = 0; t < 9; ++t)
      cute::SM90_TMA_LOAD_3D::copy(w, bar, kEvictNormal, smem + t * kBlockBytes, 0, t, channel_block * kChannels);
  }
  __device__ static void load_tile(const CUtensorMap* x, uint64_t* bar, char* smem, const Params& p, int tile) {
    const int n = tile / p.tiles_per_image, h0 = tile % p.tiles_per_image * Rows;
    cute::SM90_TMA_LOAD_4D::copy(x, bar, kEvictNormal, smem, 0, -1, h0 - 1, n);
  }
  // (filter, pixel) byte offsets of k-step `step` of the mainloop
  static constexpr int kSteps = 9 * 4;
  __device__ static constexpr int2 step(int i) {
    const int tap = i / 4, k = i % 4;
    return {tap * kBlockBytes + k * 32, (tap / 3 * kVirtualWidth + tap % 3) * kLine + k * 32};
  }
  // the staging line of virtual pixel v, or -1 for a dropped column
  __device__ static int line(int v) {
    const int p = v / kVirtualWidth, q = v % kVirtualWidth;
    return q < Width ? p * Width + q : -1;
  }
  __device__ static void store_tile(const CUtensorMap* y, const char* smem, const Params& p, int tile,
                                    int channel_block) {
    const int n = tile / p.tiles_per_image, h0 = tile % p.tiles_per_image * Rows;
    cute::SM90_TMA_STORE_4D::copy(y, smem, channel_block * kChannels, 0, h0, n);
  }
};

template <int CBlocks, int Stages>
struct PointwiseTiling {
  // Waits on a stage's barrier go by phase parity, which tells phases apart only one apart: each
  // consumer must own its stages (local tile i uses stage i % Stages, consumer i % 2 takes it).
  static_assert(Stages % 2 == 0, "an even number of stages: each consumer owns every other one");
  static constexpr int kPixels = 256;
  static constexpr int kStages = Stages;
  static constexpr int kFilterBytes = CBlocks * kBlockBytes;
  static constexpr int kLoadBytes = CBlocks * kPixels * kLine;
  static constexpr int kStageBytes = kLoadBytes;
  static constexpr int kStagingLines = kPixels;

  __device__ static void load_filter(const CUtensorMap* w, uint64_t* bar, char* smem, int channel_block) {
    for (int b = 0; b < CBlocks; ++b)
      cute::SM90_TMA_LOAD_2D::copy(w, bar, kEvictNormal, smem + b * kBlockBytes, b * kChannels,
                                   channel_block * kChannels);
  }
  __device__ static void load_tile(const CUtensorMap* x, uint64_t* bar, char* smem, const Params&, int tile) {
    for (int b = 0; b < CBlocks; ++b)
      cute::SM90_TMA_LOAD_2D::copy(x, bar, kEvictNormal, smem + b * kPixels * kLine, b * kChannels, tile * kPixels);
  }
  static constexpr int kSteps = CBlocks * 4;
  __device__ static constexpr int2 step(int i) {
    return {i / 4 * kBlockBytes + i % 4 * 32, i / 4 * kPixels * kLine + i % 4 * 32};
  }
  __device__ static int line(int v) { return v; }
  __device__ static void store_tile(const CUtensorMap* y, const char* smem, const Params&, int tile, int channel_block) {
    cute::SM90_TMA_STORE_2D::copy(y, smem, channel_block * kChannels, tile * kPixels);
  }
};

template <class Tiling>
struct Layout {  // shared memory, from a 1024-byte aligned base
  static constexpr int kStagingBytes = round_up(Tiling::kStagingLines * kLine, 1024);
  static constexpr int kFilter = 0;
  static constexpr int kStages = round_up(Tiling::kFilterBytes, 1024);
  static constexpr int kStaging = kStages + Tiling::kStages * Tiling::kStageBytes;
  static constexpr int kBarriers = kStaging + 2 * kStagingBytes;
  static constexpr int kBarrierCount = 1 + 2 * Tiling::kStages + 2;
  static constexpr int kSharedBytes = kBarriers + kBarrierCount * 8 + 1024;  // + alignment slack
};

// A K-major, 128B-swizzled wgmma operand descriptor: 8-line core matrices 1024 bytes apart.
// The swizzle follows the shared memory address (as TMA's does), so an operand may start at
// any 128-byte line of a 1024-byte aligned buffer with the descriptor's base offset left 0
// (setting it to the line phase gives wrong products on the H200).
__device__ __forceinline__ uint64_t operand_descriptor(uint32_t addr) {
  uint64_t desc = uint64_t((addr & 0x3FFFF) >> 4);
  desc |= uint64_t(1) << 16;          // leading byte offset: unused for swizzled K-major
  desc |= uint64_t(1024 >> 4) << 32;  // stride byte offset
  desc |= uint64_t(1) << 62;          // 128-byte swizzle
  return desc;
}

template <class Mma, size_t... I>
__device__ __forceinline__ void mma(uint64_t a, uint64_t b, float* acc, cute::SM90::GMMA::ScaleOut scale,
                                    std::index_sequence<I...>) {
  Mma::fma(a, b, acc[I]..., scale);
}

// Two fp32 values rounded to Element, packed in one 32-bit register (`lo` in the low half).
template <class Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  static_assert(std::is_same_v<Element, cutlass::half_t> || std::is_same_v<Element, cutlass::bfloat16_t>,
                "resident kernels are written for fp16 and bf16");
  if constexpr (std::is_same_v<Element, cutlass::half_t>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

template <class Tiling, class Mma, class Element>
__global__ void __launch_bounds__(kThreads, 1)
    fprop_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                 const __grid_constant__ CUtensorMap y_map, Params params) {
#if defined(__CUDA_ARCH__) && defined(CUTE_ARCH_MMA_SM90A_ENABLED)
  using L = Layout<Tiling>;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kAcc = Tiling::kPixels / 2;  // fp32 accumulators per thread
  constexpr int S = Tiling::kStages;
  static_assert(sizeof(typename Mma::CRegisters) == kAcc * sizeof(float), "Mma must be 64 x kPixels x 16");

  extern __shared__ char raw_smem[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw_smem) + 1023) / 1024 * 1024);
  uint64_t* filter_full = reinterpret_cast<uint64_t*>(smem + L::kBarriers);
  uint64_t* full = filter_full + 1;  // [S]
  uint64_t* empty = full + S;        // [S]
  uint64_t* order = empty + S;       // [2]: consumer c may start its next mainloop

  // this CTA's output channels, and its pixel tiles: first, first + stride, ...
  const int channel_block = blockIdx.x % params.channel_blocks;
  const int first = blockIdx.x / params.channel_blocks, stride = gridDim.x / params.channel_blocks;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    Barrier::init(filter_full, 1);
    for (int s = 0; s < S; ++s) {
      Barrier::init(&full[s], 1);
      Barrier::init(&empty[s], 1);
    }
    Barrier::init(&order[0], 1);
    Barrier::init(&order[1], 1);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x == 0) {
      cute::prefetch_tma_descriptor(&x_map);
      cute::prefetch_tma_descriptor(&w_map);
      Barrier::arrive_and_expect_tx(filter_full, Tiling::kFilterBytes);
      Tiling::load_filter(&w_map, filter_full, smem + L::kFilter, channel_block);
      int i = 0;
      for (int tile = first; tile < params.tiles; tile += stride, ++i) {
        const int s = i % S;
        Barrier::wait(&empty[s], ((i / S) & 1) ^ 1);
        Barrier::arrive_and_expect_tx(&full[s], Tiling::kLoadBytes);
        Tiling::load_tile(&x_map, &full[s], smem + L::kStages + s * Tiling::kStageBytes, params, tile);
      }
    }
    return;
  }

  // consumers: warpgroup 1 takes local tiles 0, 2, 4, ..., warpgroup 2 tiles 1, 3, 5, ...
  cutlass::arch::warpgroup_reg_alloc<232>();
  const int c = warpgroup - 1;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const bool leader = thread == 0;
  char* staging = smem + L::kStaging + c * L::kStagingBytes;
  const uint32_t filter_addr = cute::cast_smem_ptr_to_uint(smem + L::kFilter);
  const uint32_t staging_addr = cute::cast_smem_ptr_to_uint(staging);
  if (leader) cute::prefetch_tma_descriptor(&y_map);

  float acc[kAcc];
  Barrier::wait(filter_full, 0);

  int j = 0;
  for (int tile = first + c * stride; tile < params.tiles; tile += 2 * stride, ++j) {
    const int i = 2 * j + c, s = i % S;
    Barrier::wait(&full[s], (i / S) & 1);
    if (c == 1) {
      Barrier::wait(&order[1], j & 1);
    } else if (j > 0) {
      Barrier::wait(&order[0], (j - 1) & 1);
    }
    const uint32_t pixels_addr = cute::cast_smem_ptr_to_uint(smem + L::kStages + s * Tiling::kStageBytes);
    for (int a = 0; a < kAcc; ++a) cute::warpgroup_fence_operand(acc[a]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int k = 0; k < Tiling::kSteps; ++k) {
      const int2 offset = Tiling::step(k);
      mma<Mma>(operand_descriptor(filter_addr + offset.x), operand_descriptor(pixels_addr + offset.y), acc,
               k ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero,
               std::make_index_sequence<kAcc>{});
    }
    cute::warpgroup_commit_batch();
    if (leader) cutlass::arch::ClusterBarrier::arrive(&order[1 - c]);
    cute::warpgroup_wait<0>();
    for (int a = 0; a < kAcc; ++a) cute::warpgroup_fence_operand(acc[a]);
    if (leader) cutlass::arch::ClusterBarrier::arrive(&empty[s]);

    // epilogue: once the previous store from this staging buffer has been read, write and store
    if (leader) cute::tma_store_wait<0>();
    cutlass::arch::NamedBarrier::sync(128, 1 + c);
    // accumulator a: channel 16 * warp + lane / 4 + 8 * (a / 2 % 2), pixel 8 * (a / 4) + 2 * (lane % 4) + a % 2.
    // stmatrix.trans: lane l addresses line l % 8 of matrix l / 8; matrix m: pixel group g + m / 2,
    // channel half m % 2. Lines are 128B-swizzled as TMA expects.
    const int m = lane / 8;
#pragma unroll
    for (int g = 0; g < Tiling::kPixels / 8; g += 2) {
      const bool pair = g + 1 < Tiling::kPixels / 8;
      const int v = 8 * (g + (pair ? m / 2 : 0)) + lane % 8;
      const int mapped = Tiling::line(v);
      const int line = mapped >= 0 ? mapped : Tiling::kStagingLines - 8 + lane % 8;
      const int chunk = 2 * warp + (m & 1);
      const uint32_t addr = staging_addr + line * kLine + ((chunk ^ (line & 7)) << 4);
      const float* d = acc + 4 * g;
      if (pair) {
        asm volatile("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                     "r"(pack2<Element>(d[0], d[1])), "r"(pack2<Element>(d[2], d[3])),
                     "r"(pack2<Element>(d[4], d[5])), "r"(pack2<Element>(d[6], d[7])));
      } else {
        asm volatile("stmatrix.sync.aligned.x2.trans.m8n8.shared.b16 [%0], {%1, %2};\n" ::"r"(addr),
                     "r"(pack2<Element>(d[0], d[1])), "r"(pack2<Element>(d[2], d[3])));
      }
    }
    cutlass::arch::fence_view_async_shared();
    cutlass::arch::NamedBarrier::sync(128, 1 + c);
    if (leader) {
      Tiling::store_tile(&y_map, staging, params, tile, channel_block);
      cute::tma_store_arrive();
    }
  }
  if (leader) cute::tma_store_wait<0>();
#endif
}

// A tensor map over a packed tensor of Element with the given extents (innermost first),
// 128B-swizzled boxes. Nullptr on success, else what failed.
template <class Element>
inline const char* encode(CUtensorMap* map, const void* base, int rank, const cuuint64_t* dims,
                          const cuuint32_t* box) {
  static_assert(sizeof(Element) == 2, "the strides below count 2-byte elements");
  constexpr CUtensorMapDataType kType = std::is_same_v<Element, cutlass::bfloat16_t>
                                            ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  cuuint64_t strides[4];
  cuuint64_t stride = 2;
  for (int i = 0; i < rank - 1; ++i) strides[i] = stride *= dims[i];
  cuuint32_t ones[4] = {1, 1, 1, 1};
  CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      map, kType, rank, const_cast<void*>(base), dims, strides, box, ones,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled failed (operands not 16-byte aligned?)";
}

// The part of a kernel type that does not depend on its tiling: arguments and launch.
template <class Tiling, class Mma, class Element>
struct Kernel {
  static constexpr int kSharedBytes = Layout<Tiling>::kSharedBytes;

  struct Arguments {
    CUtensorMap x, w, y;
    Params params;
  };

  static const char* reserve_shared_memory() {
    return cudaFuncSetAttribute(fprop_kernel<Tiling, Mma, Element>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kSharedBytes) == cudaSuccess
               ? nullptr
               : "cannot reserve the kernel's shared memory";
  }

  // One persistent CTA per SM (`sms`: the device's multiprocessor count), a whole number of CTAs
  // per output channel block, at most one per tile.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const int blocks = args.params.channel_blocks;
    int per_block = sms / blocks > 0 ? sms / blocks : 1;
    if (per_block > args.params.tiles) per_block = args.params.tiles;
    fprop_kernel<Tiling, Mma, Element><<<per_block * blocks, kThreads, kSharedBytes, stream>>>(
        args.x, args.w, args.y, args.params);
    return cudaPeekAtLastError();
  }
};

}  // namespace resident

// A 3x3 halo kernel for activations `Width` pixels wide, `Rows` output rows per tile.
template <int Width, int Rows, class Mma, class Element = cutlass::half_t>
struct HaloFprop : resident::Kernel<resident::HaloTiling<Width, Rows>, Mma, Element> {
  using Base = resident::Kernel<resident::HaloTiling<Width, Rows>, Mma, Element>;
  using typename Base::Arguments;

  // Nullptr when the kernel computes this convolution (NHWC x, KRSC w, NPQK y), else why not.
  static const char* unsupported(int w, int c, int k, int r, int s, int pad_h, int pad_w, int stride_h,
                                 int stride_w, int dilation_h, int dilation_w) {
    if (r != 3 || s != 3) return "needs a 3x3 filter";
    if (pad_h != 1 || pad_w != 1 || stride_h != 1 || stride_w != 1 || dilation_h != 1 || dilation_w != 1)
      return "needs padding 1, stride 1, dilation 1";
    if (c != resident::kChannels) return "needs 64 input channels";
    if (k % resident::kChannels) return "needs a multiple of 64 output channels";
    if (w != Width) return "built for another image width";
    return nullptr;
  }

  // Binds operands: n images of h x Width x 64 (x), a k x 3 x 3 x 64 filter, n x h x Width x k (y).
  // Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int, int,
                                int k) {
    using namespace resident;
    const cuuint64_t x_dims[4] = {kChannels, Width, cuuint64_t(h), cuuint64_t(n)};
    const cuuint32_t x_box[4] = {kChannels, Width + 2, Rows + 2, 1};
    const cuuint64_t w_dims[3] = {kChannels, 9, cuuint64_t(k)};
    const cuuint64_t y_dims[4] = {cuuint64_t(k), Width, cuuint64_t(h), cuuint64_t(n)};
    const cuuint32_t w_box[3] = {kChannels, 1, kChannels};
    const cuuint32_t y_box[4] = {kChannels, Width, Rows, 1};
    const char* err = encode<Element>(&args.x, x, 4, x_dims, x_box);
    if (!err) err = encode<Element>(&args.w, w, 3, w_dims, w_box);
    if (!err) err = encode<Element>(&args.y, y, 4, y_dims, y_box);
    if (err) return err;
    const int per_image = (h + Rows - 1) / Rows;
    args.params = Params{n * per_image, k / kChannels, per_image};
    return Base::reserve_shared_memory();
  }
};

// A 1x1 pointwise kernel for C = 64 * CBlocks input channels, any multiple of 64 output channels.
template <int CBlocks, int Stages, class Mma, class Element = cutlass::half_t>
struct PointwiseFprop : resident::Kernel<resident::PointwiseTiling<CBlocks, Stages>, Mma, Element> {
  using Base = resident::Kernel<resident::PointwiseTiling<CBlocks, Stages>, Mma, Element>;
  using typename Base::Arguments;

  static const char* unsupported(int, int c, int k, int r, int s, int pad_h, int pad_w, int stride_h, int stride_w,
                                 int, int) {
    if (r != 1 || s != 1 || pad_h != 0 || pad_w != 0 || stride_h != 1 || stride_w != 1)
      return "needs a 1x1 filter, stride 1, no padding";
    if (c != CBlocks * resident::kChannels) return "built for another number of input channels";
    if (k % resident::kChannels) return "needs a multiple of 64 output channels";
    return nullptr;
  }

  // Binds operands: n x h x w pixels of c channels (x), k x c filters, n x h x w x k (y).
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int width,
                                int c, int k) {
    using namespace resident;
    const cuuint64_t pixels = cuuint64_t(n) * h * width;
    const cuuint64_t x_dims[2] = {cuuint64_t(c), pixels};
    const cuuint32_t x_box[2] = {kChannels, 256};
    const cuuint64_t w_dims[2] = {cuuint64_t(c), cuuint64_t(k)};
    const cuuint32_t w_box[2] = {kChannels, kChannels};
    const cuuint64_t y_dims[2] = {cuuint64_t(k), pixels};
    const cuuint32_t y_box[2] = {kChannels, 256};
    const char* err = encode<Element>(&args.x, x, 2, x_dims, x_box);
    if (!err) err = encode<Element>(&args.w, w, 2, w_dims, w_box);
    if (!err) err = encode<Element>(&args.y, y, 2, y_dims, y_box);
    if (err) return err;
    args.params = Params{int((pixels + 255) / 256), k / kChannels, 0};
    return Base::reserve_shared_memory();
  }
};

}  // namespace kernelgen
