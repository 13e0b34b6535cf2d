// depthwise_mma.h's kernels with 4 channels a warp (half a channel vector) in place of 8: the same
// Toeplitz filter rows on mma.sync m16n8k16, the same units, windows and swizzle, but a warp keeps
// the B fragments of 4 channels (8 R registers, 56 for 7x7) and reads 8 bytes of a pixel at a time,
// so that a thread needs about 128 registers, not 255, and a SM holds 16 warps where the
// 8-channel kernels hold 8. A quarter warp's 8-byte reads hit each 16-byte bank pair twice (its 16
// lanes read 8 chunks of one half): twice the shared-memory wavefronts an mma of the 8-channel
// kernels take, which those kernels' latency, not their bandwidth, was short of.
//
// Each channel vector of a tile has 2 x (warps / 2 / CB) warps: slot = warp % (2 CB) is the vector
// (slot / 2) and its half (slot % 2); warp / (2 CB) the first mma tile it takes.
//
// The launch helpers (configure_persistent, tensor_map) are what a persistent kernel of tensor-copy
// windows needs from the host; kernelgen::DepthwiseMmaHalf<T, R, S, TP, TQ, CB, STAGES, THREADS> is a
// kernel type for DepthwiseOperation (depthwise_adapter.h).
#pragma once

#include "depthwise_mma.h"

namespace kernelgen {
namespace depthwise_mma {

// The 4 channels' A registers of one window row's 16 columns from x0 (a_registers for half a
// vector): lo[c] (columns 2t, 2t + 1), hi[c] (2t + 8, 2t + 9), from the four 8-byte loads.
__host__ __device__ inline void a_registers_half(const uint2& first, const uint2& second, const uint2& first8,
                                                 const uint2& second8, int g, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  const unsigned ls = low_selector(g), hs = high_selector(g);
  const uint32_t f[2] = {first.x, first.y}, s[2] = {second.x, second.y};
  const uint32_t f8[2] = {first8.x, first8.y}, s8[2] = {second8.x, second8.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lo[2 * i] = byte_perm(f[i], s[i], ls);
    lo[2 * i + 1] = byte_perm(f[i], s[i], hs);
    hi[2 * i] = byte_perm(f8[i], s8[i], ls);
    hi[2 * i + 1] = byte_perm(f8[i], s8[i], hs);
  }
}

// The byte offset in a stage of half `half` (4 channels) of channel vector `vector` of window pixel `pixel`.
template <int CB>
__host__ __device__ inline unsigned swizzled_half(int pixel, int vector, int half) {
  return swizzled<CB>(pixel, vector) + 8 * half;
}

// CTAs a SM at least: 16 warps (128 registers a thread), but 12 for a 7x7 filter in CTAs of 128
// threads (170 registers: its 56 filter registers and the rest spill at 128).
template <int R, int THREADS>
constexpr int kHalfMinCtas = THREADS == 128 ? (R == 7 ? 3 : 4) : 2;

template <typename T, int R, int S, int TP, int TQ, int CB, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS, (kHalfMinCtas<R, THREADS>))
    depthwise_mma_half_kernel(Conv2dProblem p, RunTiling tiling, const __grid_constant__ CUtensorMap input,
                              const T* __restrict__ w, T* __restrict__ y) {
  using Sh = Shape<R, S, TP, TQ, CB, STAGES, THREADS>;
  static_assert(Sh::kWarps % (2 * CB) == 0, "each half of a channel vector has the same warps");
  extern __shared__ __align__(128) unsigned char raw_memory[];
  __shared__ __align__(8) uint64_t full[STAGES];
  const unsigned raw_address = depthwise::shared_address(raw_memory);
  unsigned char* const stages = raw_memory + (((raw_address + 1023) & ~1023u) - raw_address);
  uint16_t* const taps = reinterpret_cast<uint16_t*>(stages + STAGES * Sh::kStageBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int slot = warp % (2 * CB), vector = slot / 2, half = slot % 2;
  const int first_tile = warp / (2 * CB), tile_step = Sh::kWarps / (2 * CB);
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

  uint32_t b[4][R][2];  // the warp's 4 channels' B fragments, filter row by row
  int taps_of = -1;
  for (int item = begin, i = 0; item < end; ++item, ++i) {
    const int stage = i % STAGES;
    const Where at = where(item);
    const int c_base = at.cb * CB * 8;
    if (at.cb != taps_of) {
      taps_of = at.cb;
      const int tap_vectors = (min(CB * 8, p.c - c_base) * R * S) / 8;
      if (i > 0) __syncthreads();
      for (int v = tid; v < Sh::kTapBytes / 16; v += THREADS)
        reinterpret_cast<uint4*>(taps)[v] =
            v < tap_vectors ? __ldg(reinterpret_cast<const uint4*>(w + size_t(c_base) * (R * S)) + v)
                            : make_uint4(0, 0, 0, 0);
      __syncthreads();
#pragma unroll
      for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int r = 0; r < R; ++r) b_fragment<S>(taps + ((vector * 8 + half * 4 + c) * R + r) * S, g, t, b[c][r]);
      }
    }
    depthwise::barrier_wait(&full[stage], (i / STAGES) & 1);
    __syncthreads();
    fetch(item + STAGES - 1, (i + STAGES - 1) % STAGES);

    const unsigned char* const window = stages + stage * Sh::kStageBytes;
    const int c = c_base + vector * 8 + half * 4;
    for (int m = first_tile; m < Sh::kMmaTiles; m += tile_step) {
      const int index = m * 8 + g;
      const Unit u = unit<TP, TQ>(index < Sh::kUnits ? index : 0);
      auto row = [&](int window_row, uint32_t(&lo)[4], uint32_t(&hi)[4]) {
        const int base = window_row * Sh::kInQ + u.x0;
        auto load = [&](int pixel) {
          return *reinterpret_cast<const uint2*>(window + swizzled_half<CB>(pixel, vector, half));
        };
        a_registers_half(load(base + first_column(g, t)), load(base + second_column(g, t)),
                         load(base + first_column(g, t) + 8), load(base + second_column(g, t) + 8), g, lo, hi);
      };
      float acc[4][4];
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.0f;
      uint32_t lo[4], hi[4];
      row(u.py, lo, hi);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint32_t lo1[4], hi1[4];
        row(u.py + 1 + r, lo1, hi1);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint32_t a[4] = {lo[k], lo1[k], hi[k], hi1[k]};
          grouped_mma::mma16816<T>(acc[k], a, b[k][r]);
          lo[k] = lo1[k];
          hi[k] = hi1[k];
        }
      }
      if (index < Sh::kUnits && c < p.c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int py = at.p0 + u.py + e / 2, qx = at.q0 + u.x0 + 2 * t + e % 2;
          if (py < P && qx < Q) {
            uint2 out;
            out.x = depthwise::pair_from_float<T>(make_float2(acc[0][e], acc[1][e]));
            out.y = depthwise::pair_from_float<T>(make_float2(acc[2][e], acc[3][e]));
            *reinterpret_cast<uint2*>(y + ((size_t(at.n) * P + py) * Q + qx) * p.k + c) = out;
          }
        }
      }
    }
  }
}

// The CTAs a persistent grid of `kernel` (THREADS threads, `bytes` of dynamic shared memory) has
// on this GPU, its shared memory set up; 0 and why where it cannot run.
template <typename Kernel>
inline int configure_persistent(Kernel kernel, int threads, int bytes, std::string& why) {
  int device = 0, sms = 0, per_sm = 0;
  if (!depthwise::tensor_map_encoder()) {
    why = "the driver has no cuTensorMapEncodeTiled";
    return 0;
  }
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes) != cudaSuccess) {
    why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
    return 0;
  }
  if (per_sm < 1) {
    why = "needs " + std::to_string(bytes) + " bytes of shared memory, more than a CTA may have here";
    return 0;
  }
  return sms * per_sm;
}

// The layer's tiles of TP x TQ outputs by CB channel vectors, channel block by channel block.
inline RunTiling run_tiling(const Conv2dProblem& p, int TP, int TQ, int CB) {
  RunTiling tiling;
  tiling.P = p.p(), tiling.Q = p.q();
  const int tiles_p = (tiling.P + TP - 1) / TP, tiles_q = (tiling.Q + TQ - 1) / TQ;
  const int c_blocks = (p.c + CB * 8 - 1) / (CB * 8);
  tiling.spatial = p.n * tiles_p * tiles_q;
  tiling.items = tiling.spatial * c_blocks;
  tiling.spatial_tiles = depthwise::Divisor(tiling.spatial), tiling.tiles_q = depthwise::Divisor(tiles_q);
  tiling.tiles_p = depthwise::Divisor(tiles_p);
  return tiling;
}

// The tensor map of the NHWC activations x whose boxes are CB channel vectors by `columns` by `rows`
// of one image, swizzled at CB * 16 bytes; false where the driver refuses it.
template <typename T>
inline bool tensor_map(CUtensorMap& map, const Conv2dProblem& p, const void* x, int CB, int columns, int rows) {
  const CUtensorMapDataType type =
      std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle swizzle =
      CB == 8 ? CU_TENSOR_MAP_SWIZZLE_128B : CB == 4 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
  const cuuint64_t dims[4] = {cuuint64_t(p.c), cuuint64_t(p.w), cuuint64_t(p.h), cuuint64_t(p.n)};
  const cuuint64_t strides[3] = {cuuint64_t(p.c) * 2, cuuint64_t(p.w) * p.c * 2, cuuint64_t(p.h) * p.w * p.c * 2};
  const cuuint32_t box[4] = {cuuint32_t(CB * 8), cuuint32_t(columns), cuuint32_t(rows), 1};
  const cuuint32_t ones[4] = {1, 1, 1, 1};
  return depthwise::tensor_map_encoder()(&map, type, 4, const_cast<void*>(x), dims, strides, box, ones,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace depthwise_mma

template <typename T, int R, int S, int TP, int TQ, int CB, int STAGES, int THREADS = 256>
struct DepthwiseMmaHalf {
  using Shape = depthwise_mma::Shape<R, S, TP, TQ, CB, STAGES, THREADS>;

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return DepthwiseMma<T, R, S, TP, TQ, CB, STAGES, THREADS>::can_implement(p, groups);
  }

  static int configure(std::string& why) {
    return depthwise_mma::configure_persistent(
        depthwise_mma::depthwise_mma_half_kernel<T, R, S, TP, TQ, CB, STAGES, THREADS>, THREADS, Shape::kBytes, why);
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const depthwise::RunTiling tiling = depthwise_mma::run_tiling(p, TP, TQ, CB);
    const int grid = tiling.items < ctas ? tiling.items : ctas;
    if (grid == 0) return;
    CUtensorMap map;
    const bool mapped = depthwise_mma::tensor_map<T>(map, p, b.x, CB, Shape::kInQ, Shape::kInP);
    // Where the driver refused the map, a launch of no CTAs leaves the error the caller's
    // cudaPeekAtLastError sees.
    depthwise_mma::depthwise_mma_half_kernel<T, R, S, TP, TQ, CB, STAGES, THREADS>
        <<<mapped ? grid : 0, THREADS, mapped ? Shape::kBytes : 0, stream>>>(
            p, tiling, map, static_cast<const T*>(b.w), static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
