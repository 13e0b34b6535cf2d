// Depthwise convolutions at stride 1 on tensor cores (SM90: tiles by tensor copies): ConvNeXt's 7x7
// layers and the 5x5 and 3x3 ones of the mobile networks, where the CUDA-core kernels
// (depthwise.h, depthwise_tma.h) spend R * S fp32 multiply-adds an output and run at the FFMA pipe's
// pace, not the memory's.
//
// One channel's filter row r is a Toeplitz matrix: for 8 output columns j and 16 input columns k,
// B_r[k][j] = w[r][k - j] (zero outside 0 <= k - j < S, so S <= 9). One mma.sync m16n8k16 takes A's
// 16 rows as 16 output rows' input rows (each 16 input columns wide) and gives 16 x 8 outputs of
// that channel for filter row r; R of them (r = 0 .. R-1) make the whole filter. A warp keeps the
// B fragments of 8 channels (one 16-byte channel vector) in registers (2 R a channel) and computes
// the 8 channels of each mma tile together: each 16-byte shared-memory load brings the 8 channels
// of one input pixel, and byte permutes make the channels' A fragments from them.
//
// An mma tile is 8 units, one a lane group g = lane / 4: a unit is two vertically adjacent output
// rows (py, py + 1) by 8 output columns (x0 .. x0 + 7), A's rows g and g + 8. Filter row r + 1's A
// row g is filter row r's A row g + 8 (the same input row), so a step r loads one new input row a
// lane, not two. A CTA's tile is TP output rows (even) by TQ output columns (a multiple of 8) of one
// image and CB channel vectors: TP / 2 * TQ / 8 units, in mma tiles of 8 (the last one's spare
// lanes compute a copy of unit 0 and store nothing).
//
// The tile's input window (TP + R - 1 rows by TQ + 8 columns: the 16 columns an mma reads past the
// last unit's; zeros outside the image) comes by one bulk tensor copy, swizzled at CB * 16 bytes a
// pixel (32, 64 or 128 bytes: the 16-byte chunk c of pixel x lands at c ^ (x's bits), so that the 8
// lanes of a quarter warp, reading 8 pixels of even offsets apart from lanes of one parity, hit 8
// different banks; odd lane groups read their two columns in the other order). The persistent grid
// walks the layer's tiles as depthwise_tma.h's does (a run of tiles of one channel block a CTA,
// STAGES windows in flight); each warp takes one channel vector (warp % CB) and every (warps / CB)-th
// mma tile of the tile.
//
// kernelgen::DepthwiseMma<T, R, S, TP, TQ, CB, STAGES, THREADS> is a kernel type for
// DepthwiseOperation (depthwise_adapter.h): can_implement(problem, groups), configure() and
// launch(problem, binding, ctas, stream). Its index functions are host-callable (Mma::*), so that
// tests/depthwise_mma_model.cu can run a tile on the CPU.
#pragma once

#include "depthwise_tma.h"
#include "grouped_mma.h"  // grouped_mma::mma16816

namespace kernelgen {
namespace depthwise_mma {

template <int R, int S, int TP, int TQ, int CB, int STAGES, int THREADS>
struct Shape {
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kInP = TP + R - 1;           // window rows
  static constexpr int kInQ = TQ + 8;               // window columns: an mma reads 16 from a unit's x0
  static constexpr int kPixelBytes = CB * 16;       // one swizzle row
  static constexpr int kBoxBytes = kInP * kInQ * kPixelBytes;
  static constexpr int kStageBytes = (kBoxBytes + 1023) / 1024 * 1024;  // swizzle atoms stay aligned
  static constexpr int kUnits = TP / 2 * (TQ / 8);
  static constexpr int kMmaTiles = (kUnits + 7) / 8;
  static constexpr int kTapBytes = CB * 8 * R * S * 2;
  static constexpr int kBytes = 1024 + STAGES * kStageBytes + (kTapBytes + 15) / 16 * 16;  // 1024: alignment
  static_assert(S <= 9, "a filter row of at most 9 taps: 8 outputs of 16 input columns");
  static_assert(TP % 2 == 0 && TQ % 8 == 0, "tiles of pairs of rows by blocks of 8 columns");
  static_assert(CB == 2 || CB == 4 || CB == 8, "2, 4 or 8 channel vectors a CTA (a swizzle of 32, 64 or 128 bytes)");
  static_assert(kWarps % CB == 0, "each channel vector has the same warps");
  static_assert(kInP <= 256 && kInQ <= 256, "a tensor copy's box spans at most 256 a dimension");
  static_assert(kBytes <= 227 * 1024, "the stages fit 227 KiB of shared memory");
};

// A unit's first output row and column in the tile.
struct Unit {
  int py, x0;
};

template <int TP, int TQ>
__host__ __device__ inline Unit unit(int index) {
  constexpr int kBlocks = TQ / 8;
  return {index / kBlocks * 2, index % kBlocks * 8};
}

// The byte offset in a stage of channel vector `vector` of window pixel `pixel` (row * kInQ +
// column): the tensor copy's swizzle of CB * 16 bytes (chunk bits [4, 7) ^= bits [7, 10) & (CB - 1)).
template <int CB>
__host__ __device__ inline unsigned swizzled(int pixel, int vector) {
  const unsigned o = unsigned(pixel) * (CB * 16) + unsigned(vector) * 16;
  return o ^ (((o >> 7) & (CB - 1)) << 4);
}

// The two window columns a lane reads for A's columns 2t, 2t + 1 (and + 8, + 9): in that order for
// an even lane group, swapped for an odd one.
__host__ __device__ inline int first_column(int g, int t) { return 2 * t + (g & 1); }
__host__ __device__ inline int second_column(int g, int t) { return 2 * t + 1 - (g & 1); }

// __byte_perm selectors that make channel 2i's and 2i + 1's A register (columns 2t, 2t + 1, the
// lower column in the lower half) from the two pixels' 32-bit words i, as read in that order.
__host__ __device__ inline unsigned low_selector(int g) { return (g & 1) ? 0x1054u : 0x5410u; }
__host__ __device__ inline unsigned high_selector(int g) { return (g & 1) ? 0x3276u : 0x7632u; }

__host__ __device__ inline unsigned byte_perm(unsigned x, unsigned y, unsigned s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const unsigned long long both = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned out = 0;
  for (int b = 0; b < 4; ++b) out |= unsigned((both >> (8 * ((s >> (4 * b)) & 7))) & 0xff) << (8 * b);
  return out;
#endif
}

// The 8 channels' A registers of one window row's 16 columns from x0: lo[c] (columns 2t, 2t + 1)
// and hi[c] (2t + 8, 2t + 9), from the four 16-byte loads `first`, `second` (columns first_column
// and second_column) and `first8`, `second8` (the same + 8).
__host__ __device__ inline void a_registers(const uint4& first, const uint4& second, const uint4& first8,
                                            const uint4& second8, int g, uint32_t (&lo)[8], uint32_t (&hi)[8]) {
  const unsigned ls = low_selector(g), hs = high_selector(g);
  const uint32_t f[4] = {first.x, first.y, first.z, first.w}, s[4] = {second.x, second.y, second.z, second.w};
  const uint32_t f8[4] = {first8.x, first8.y, first8.z, first8.w}, s8[4] = {second8.x, second8.y, second8.z, second8.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo[2 * i] = byte_perm(f[i], s[i], ls);
    lo[2 * i + 1] = byte_perm(f[i], s[i], hs);
    hi[2 * i] = byte_perm(f8[i], s8[i], ls);
    hi[2 * i + 1] = byte_perm(f8[i], s8[i], hs);
  }
}

// Lane (g, t)'s B fragment of a channel's filter row `row` (S taps, 16-bit): b[0] = (B[2t][g],
// B[2t + 1][g]), b[1] = (B[2t + 8][g], B[2t + 9][g]), B[k][j] = row[k - j], zero outside [0, S).
template <int S>
__host__ __device__ inline void b_fragment(const uint16_t* row, int g, int t, uint32_t (&b)[2]) {
  auto tap = [&](int s) -> uint32_t { return s >= 0 && s < S ? row[s] : 0u; };
  b[0] = tap(2 * t - g) | (tap(2 * t + 1 - g) << 16);
  b[1] = tap(2 * t + 8 - g) | (tap(2 * t + 9 - g) << 16);
}

// The layer's tiles, channel block by channel block (depthwise_tma.h's RunTiling).
using depthwise::RunTiling;

template <typename T, int R, int S, int TP, int TQ, int CB, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
    depthwise_mma_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
                         const T* __restrict__ w, T* __restrict__ y) {
  using Sh = Shape<R, S, TP, TQ, CB, STAGES, THREADS>;
  extern __shared__ __align__(128) unsigned char raw_memory[];
  __shared__ __align__(8) uint64_t full[STAGES];
  // The stages from the first 1024-byte boundary (the 128-byte swizzle's atom).
  const unsigned raw_address = depthwise::shared_address(raw_memory);
  unsigned char* const stages = raw_memory + (((raw_address + 1023) & ~1023u) - raw_address);
  uint16_t* const taps = reinterpret_cast<uint16_t*>(stages + STAGES * Sh::kStageBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int vector = warp % CB;                 // this warp's channel vector of the block
  const int first_tile = warp / CB, tile_step = Sh::kWarps / CB;
  const int P = tiling.P, Q = tiling.Q;
  const int begin = int((long long)blockIdx.x * tiling.items / gridDim.x);
  const int end = int((long long)(blockIdx.x + 1) * tiling.items / gridDim.x);

  struct Where {
    int n, p0, q0, cb;
  };
  auto where = [&](int item) {
    Where at;
    int s, tq, tp;
    at.cb = tiling.spatial_tiles.divide(item, s);
    s = tiling.tiles_q.divide(s, tq);
    at.n = tiling.tiles_p.divide(s, tp);
    at.q0 = tq * TQ;
    at.p0 = tp * TP;
    return at;
  };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) depthwise::barrier_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&input)) : "memory");
  }
  __syncthreads();

  auto fetch = [&](int item, int stage) {
    if (tid == 0 && item < end) {
      const Where at = where(item);
      depthwise::barrier_expect(&full[stage], Sh::kBoxBytes);
      depthwise::copy_box(stages + stage * Sh::kStageBytes, &input, &full[stage], at.cb * CB * 8, at.q0 - p.pad_w,
                          at.p0 - p.pad_h, at.n);
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) fetch(begin + s, s);

  uint32_t b[8][R][2];  // the warp's 8 channels' B fragments, filter row by row
  int taps_of = -1;
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c_base = at.cb * CB * 8;
    if (at.cb != taps_of) {  // the block's taps, [c][r][s], into shared memory, then B fragments
      taps_of = at.cb;
      const int tap_vectors = (min(CB * 8, p.c - c_base) * R * S) / 8;
      if (i > 0) __syncthreads();
      for (int v = tid; v < Sh::kTapBytes / 16; v += THREADS)
        reinterpret_cast<uint4*>(taps)[v] =
            v < tap_vectors ? __ldg(reinterpret_cast<const uint4*>(w + size_t(c_base) * (R * S)) + v)
                            : make_uint4(0, 0, 0, 0);
      __syncthreads();
#pragma unroll
      for (int c = 0; c < 8; ++c) {
#pragma unroll
        for (int r = 0; r < R; ++r) b_fragment<S>(taps + ((vector * 8 + c) * R + r) * S, g, t, b[c][r]);
      }
    }
    depthwise::barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();  // every thread is done with the stage the next fetch fills
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    const unsigned char* const window = stages + stage * Sh::kStageBytes;
    const int c = c_base + vector * 8;
    for (int m = first_tile; m < Sh::kMmaTiles; m += tile_step) {
      const int index = m * 8 + g;
      const Unit u = unit<TP, TQ>(index < Sh::kUnits ? index : 0);
      auto row = [&](int window_row, uint32_t(&lo)[8], uint32_t(&hi)[8]) {
        const int base = window_row * Sh::kInQ + u.x0;
        const uint4 f = *reinterpret_cast<const uint4*>(window + swizzled<CB>(base + first_column(g, t), vector));
        const uint4 s = *reinterpret_cast<const uint4*>(window + swizzled<CB>(base + second_column(g, t), vector));
        const uint4 f8 = *reinterpret_cast<const uint4*>(window + swizzled<CB>(base + first_column(g, t) + 8, vector));
        const uint4 s8 = *reinterpret_cast<const uint4*>(window + swizzled<CB>(base + second_column(g, t) + 8, vector));
        a_registers(f, s, f8, s8, g, lo, hi);
      };
      float acc[8][4];
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.0f;
      uint32_t lo[8], hi[8];
      row(u.py, lo, hi);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint32_t lo1[8], hi1[8];
        row(u.py + 1 + r, lo1, hi1);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const uint32_t a[4] = {lo[k], lo1[k], hi[k], hi1[k]};
          grouped_mma::mma16816<T>(acc[k], a, b[k][r]);
          lo[k] = lo1[k];
          hi[k] = hi1[k];
        }
      }
      // Lane (g, t) holds outputs (py, x0 + 2t), (py, x0 + 2t + 1) (acc[.][0], [1]) and row py + 1's
      // ([2], [3]) of the 8 channels: one 16-byte store a pixel.
      if (index < Sh::kUnits && c < p.c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int py = at.p0 + u.py + e / 2, qx = at.q0 + u.x0 + 2 * t + e % 2;
          if (py < P && qx < Q) {
            uint4 out;
            out.x = depthwise::pair_from_float<T>(make_float2(acc[0][e], acc[1][e]));
            out.y = depthwise::pair_from_float<T>(make_float2(acc[2][e], acc[3][e]));
            out.z = depthwise::pair_from_float<T>(make_float2(acc[4][e], acc[5][e]));
            out.w = depthwise::pair_from_float<T>(make_float2(acc[6][e], acc[7][e]));
            *reinterpret_cast<uint4*>(y + ((size_t(at.n) * P + py) * Q + qx) * p.k + c) = out;
          }
        }
      }
    }
  }
}

}  // namespace depthwise_mma

template <typename T, int R, int S, int TP, int TQ, int CB, int STAGES, int THREADS = 256>
struct DepthwiseMma {
  using Shape = depthwise_mma::Shape<R, S, TP, TQ, CB, STAGES, THREADS>;
  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.r != R || p.s != S) return "built for " + std::to_string(R) + "x" + std::to_string(S) + " filters";
    if (p.stride_h != 1 || p.stride_w != 1) return "built for stride 1";
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    const long long tiles =
        (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ) * ((p.c + CB * 8 - 1) / (CB * 8));
    if (tiles > 2147483647LL) return "more tiles than an int counts";
    if ((long long)p.n * p.h * p.w * p.c * 2 >= (1LL << 40)) return "a tensor copy addresses under 2^40 bytes";
    return {};
  }

  static int configure(std::string& why) {
    const auto kernel = depthwise_mma::depthwise_mma_kernel<T, R, S, TP, TQ, CB, STAGES, THREADS>;
    int device = 0, sms = 0, per_sm = 0;
    if (!depthwise::tensor_map_encoder()) {
      why = "the driver has no cuTensorMapEncodeTiled";
      return 0;
    }
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, Shape::kBytes) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    if (per_sm < 1) {
      why = "needs " + std::to_string(Shape::kBytes) + " bytes of shared memory, more than a CTA may have here";
      return 0;
    }
    return sms * per_sm;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    depthwise::RunTiling tiling;
    tiling.P = p.p(), tiling.Q = p.q();
    const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + TQ - 1) / TQ;
    const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
    tiling.spatial = p.n * tiles_p * tiles_q;
    tiling.items = tiling.spatial * c_blocks;
    tiling.spatial_tiles = depthwise::Divisor(tiling.spatial), tiling.tiles_q = depthwise::Divisor(tiles_q);
    tiling.tiles_p = depthwise::Divisor(tiles_p);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    constexpr CUtensorMapDataType kType =
        std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    constexpr CUtensorMapSwizzle kSwizzle = CB == 8   ? CU_TENSOR_MAP_SWIZZLE_128B
                                            : CB == 4 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                      : CU_TENSOR_MAP_SWIZZLE_32B;
    const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
    const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
    const cuuint32_t box[4] = {cuuint32_t(CB * 8), cuuint32_t(Shape::kInQ), cuuint32_t(Shape::kInP), 1};
    const cuuint32_t ones[4] = {1, 1, 1, 1};
    if (depthwise::tensor_map_encoder()(&map, kType, 4, const_cast<void*>(b.x), dims, strides, box, ones,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, kSwizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      // The launch is not made; the caller's cudaPeekAtLastError sees the error this leaves.
      depthwise_mma::depthwise_mma_kernel<T, R, S, TP, TQ, CB, STAGES, THREADS><<<0, THREADS, 0, stream>>>(p, tiling, map, static_cast<const T*>(b.w), static_cast<T*>(b.y));
      return;
    }
    depthwise_mma::depthwise_mma_kernel<T, R, S, TP, TQ, CB, STAGES, THREADS><<<grid, THREADS, Shape::kBytes, stream>>>(
        p, tiling, map, static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
