// Direct 3x3 conv2d fprop at stride 1 or 2 (STRIDE) on tensor cores for layers of few channels in
// and out (C and K multiples of 8 up to 64), where an implicit GEMM reads each input pixel once a
// filter tap and fills a tile of 64 or more output channels with a fraction of them: EfficientNetV2's
// 24 -> 24 layers at 112x112, Inception-v3's 32 -> 32 and 32 -> 64 at 147-149 px, DLA-34's 16 -> 32
// at stride 2 on 224x224. fp16 NHWC in and out, KRSC filters, fp32 accumulation, SM80's ldmatrix,
// cp.async and mma.sync (which SM90 runs too).
//
// A CTA computes TP x TQ output pixels of one image, every output channel. It copies its input
// window (((TP - 1) STRIDE + 3) x ((TQ - 1) STRIDE + 3) pixels of C channels from (STRIDE p0 - pad_h,
// STRIDE q0 - pad_w), zeros outside the image; at stride 2 each window row's even columns first,
// then its odd ones, so that the 8 output pixels an ldmatrix phase reads, 2 window columns apart, lie
// in consecutive rows of shared memory) and the whole K x 3 x 3 x C filter into shared memory
// (cp.async), then each of its
// WARPS warps computes TP * TQ / 16 / WARPS tiles of 16 output pixels by K channels with
// mma.sync m16n8k16: the GEMM's K is the 9 taps x C channels in (tap, 8-channel chunk) pairs, two
// a k-step, so a k-step's A is an ldmatrix.x4 of 16 window pixels' chunks (the tile's pixels
// shifted by the tap) and its B an ldmatrix.x2 a group of 8 output channels, read once a k-step
// for the warp's tiles; the k-steps unrolled, a lane finds its rows once and each step adds its
// tap's and chunk's constant offset. A pixel's C channels, and an output channel's 9 x C filter values, are
// rows of shared memory whose stride is 4 words more than a multiple of 8, so the 8 rows an
// ldmatrix phase reads fall in 8 different quarters of the banks. A pair past the 9 x C / 8 real
// ones reads a zero line. Persistent (PERSISTENT): as many CTAs as stay on the GPU at once, each
// copying the filter once and taking blocks blockIdx.x, + gridDim.x, ..., the next block's window
// copied into the second of two buffers while this one's is computed; else a CTA a block.
//
// The epilogue (fused.h): y = activation(acc + bias[k] + residual), the bias (BIAS; a null bias
// reads as zeros) and the residual (ADD) of the output's type, the activation ACT one of
// activation_at_launch.h's kinds, computed in fp32 as torch does (GELU by erf).
//
// bench/narrow_conv.cu checks the address functions of Tiling on the CPU (--model) and times the
// tilings; narrow_adapter.h makes a kernel an Operation.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "activation_at_launch.h"

namespace kernelgen {
namespace narrow {

// The layer's extents a kernel needs: NHWC input, NPQK output, padding.
struct Shape {
  int n, h, w, p, q, pad_h, pad_w;
};

// A shared-memory row stride in 32-bit words for `words` words of data: the next one that is 4 more
// than a multiple of 8 (16-byte rows an ldmatrix phase reads then start in 8 different bank quarters).
__host__ __device__ constexpr int row_words(int words) { return words % 8 == 4 ? words : words + (12 - words % 8) % 8; }

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT, int STRIDE = 1>
struct Tiling {
  static_assert(C % 8 == 0 && K % 8 == 0 && C >= 8 && K >= 8 && C <= 64 && K <= 64,
                "8 to 64 channels in and out, multiples of 8");
  static_assert(TP * TQ % (16 * WARPS) == 0, "whole tiles of 16 pixels for every warp");
  static_assert(STRIDE == 1 || STRIDE == 2, "stride 1 or 2");
  static constexpr int kStride = STRIDE;
  static constexpr int kWP = (TP - 1) * STRIDE + 3, kWQ = (TQ - 1) * STRIDE + 3;  // the window's rows and columns
  static constexpr int kEven = (kWQ + 1) / 2;                       // a window row's even columns (stride 2)
  static constexpr int kPixelWords = row_words(C / 2);              // a window pixel's row
  static constexpr int kChunks = C / 8;                             // 8-channel chunks a pixel
  static constexpr int kPairs = 9 * kChunks;                        // (tap, chunk) pairs: the GEMM's K / 8
  static constexpr int kSteps = (kPairs + 1) / 2;                   // k-steps of 16
  static constexpr int kFilterWords = row_words(9 * C / 2);         // an output channel's row
  static constexpr int kWindowWords = kWP * kWQ * kPixelWords;
  static constexpr int kBuffers = PERSISTENT ? 2 : 1;               // windows: the one computed, the next
  static constexpr int kFilterAt = kBuffers * kWindowWords, kZeroAt = kFilterAt + K * kFilterWords;
  static constexpr int kSmemBytes = 4 * (kZeroAt + 4);              // and a zero line of 16 bytes
  static constexpr int kTilesPerWarp = TP * TQ / 16 / WARPS;
  static constexpr int kNTiles = K / 8;

  // The place in its window row of window column `column` (at stride 2 the even columns first, then
  // the odd ones), and the column at place `slot`.
  __host__ __device__ static constexpr int slot(int column) {
    return STRIDE == 1 ? column : column % 2 * kEven + column / 2;
  }
  __host__ __device__ static constexpr int column(int slot) {
    return STRIDE == 1 ? slot : slot < kEven ? 2 * slot : 2 * (slot - kEven) + 1;
  }

  // The layer's TP x TQ output blocks (image by image, rows of blocks).
  __host__ __device__ static int blocks(const Shape& g) {
    return g.n * ((g.p + TP - 1) / TP) * ((g.q + TQ - 1) / TQ);
  }

  // Block `block`'s image and first output row and column.
  __host__ __device__ static void origin(const Shape& g, int block, int& n, int& p0, int& q0) {
    const int across = (g.q + TQ - 1) / TQ, down = (g.p + TP - 1) / TP;
    n = block / (across * down), p0 = block / across % down * TP, q0 = block % across * TQ;
  }

  // The shared-memory word where `lane`'s ldmatrix.x4 row of A starts, for tile `tile` (of the
  // block's TP * TQ / 16) at k-step `step`, its window in buffer `buffer`: lanes 8j..8j+7 give matrix
  // j's rows, matrix j holding rows 8 (j % 2).. of the tile and its pair 2 step + j / 2 (mma's a0..a3).
  // The lane's tile pixel (a_lane) and the pair's tap and chunk (a_pair) apart: the kernel adds them,
  // the second known at compile time where the k-steps are unrolled.
  __host__ __device__ static int a_word(int lane, int tile, int step, int buffer) {
    const int pair = a_pair_of(lane, step);
    return pair >= kPairs ? kZeroAt : a_lane(lane, tile, buffer) + a_pair(pair);
  }
  __host__ __device__ static int a_pair_of(int lane, int step) { return 2 * step + lane / 16; }
  __host__ __device__ static int a_lane(int lane, int tile, int buffer) {
    const int row = lane % 8 + 8 * (lane / 8 % 2), pixel = tile * 16 + row, p = pixel / TQ, q = pixel % TQ;
    return buffer * kWindowWords + (p * STRIDE * kWQ + slot(q * STRIDE)) * kPixelWords;
  }
  // (the tap's place apart from the pixel's: slot(STRIDE q + s) - slot(STRIDE q) = slot(s))
  __host__ __device__ static constexpr int a_pair(int pair) {
    return ((pair / kChunks / 3) * kWQ + slot(pair / kChunks % 3)) * kPixelWords + 4 * (pair % kChunks);
  }

  // The word where `lane`'s ldmatrix.x2 row of B starts, output channels 8 ntile.. at k-step `step`:
  // lanes 0-7 matrix 0 (pair 2 step, mma's b0), 8-15 matrix 1 (pair 2 step + 1, b1); a row is an
  // output channel's 8 filter values of the pair (the others' addresses, unused, repeat them). The
  // lane's output channel (b_lane) and the step's 8 words apart, as for A.
  __host__ __device__ static int b_word(int lane, int ntile, int step) {
    return 2 * step + (lane / 8) % 2 >= kPairs ? kZeroAt : b_lane(lane, ntile) + 8 * step;
  }
  __host__ __device__ static int b_lane(int lane, int ntile) {
    return kFilterAt + (ntile * 8 + lane % 8) * kFilterWords + 4 * ((lane / 8) % 2);
  }

  // The window's 16-byte piece `i` (of kWP * kWQ * kChunks) for the window from input row h0,
  // column w0 (STRIDE times the block's first output row and column, less the padding), in buffer
  // `buffer`: its word in shared memory, and the input pixel it copies (row h, column w; outside the
  // image it is zeros).
  __host__ __device__ static int window_piece(int i, int h0, int w0, int buffer, int& h, int& w) {
    const int chunk = i % kChunks, pixel = i / kChunks, wr = pixel / kWQ, wc = column(pixel % kWQ);
    h = h0 + wr, w = w0 + wc;
    return buffer * kWindowWords + pixel * kPixelWords + 4 * chunk;
  }

  // The filter's 16-byte piece `i` (of K * kPairs): its word in shared memory; it copies the 8 values
  // from 8 i in the K x 3 x 3 x C filter (an output channel's 9 x C values are contiguous).
  __host__ __device__ static int filter_piece(int i) { return kFilterAt + (i / kPairs) * kFilterWords + 4 * (i % kPairs); }

  // Output pixel of the block's tile `tile`, row `row` (0-15): its place (p, q) in the TP x TQ block.
  __host__ __device__ static void tile_pixel(int tile, int row, int& p, int& q) {
    const int pixel = tile * 16 + row;
    p = pixel / TQ, q = pixel % TQ;
  }
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void copy16(uint32_t shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(global));
}

// `v` through activation ACT (activation_at_launch.h's kinds), in fp32 as torch computes it.
template <int ACT>
__device__ __forceinline__ float activate(float v) {
  if constexpr (ACT == kActivationRelu) return fmaxf(v, 0.0f);
  if constexpr (ACT == kActivationSilu) return v / (1.0f + __expf(-v));
  if constexpr (ACT == kActivationGelu) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  if constexpr (ACT == kActivationHardswish) return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f);
  if constexpr (ACT == kActivationSigmoid) return 1.0f / (1.0f + __expf(-v));
  return v;
}

// What the epilogue reads besides the accumulators: K biases and the residual, of the output's
// shape (either null where the kernel reads none).
struct EpilogueArgs {
  const __half* bias;
  const __half* residual;
};

// One block's window into buffer `buffer` (cp.async; zeros outside the image).
template <typename S>
__device__ __forceinline__ void load_window(const Shape& g, const __half* __restrict__ x, uint32_t* words,
                                            uint32_t base, int block, int buffer, int threads) {
  int n, p0, q0;
  S::origin(g, block, n, p0, q0);
  for (int i = threadIdx.x; i < S::kWP * S::kWQ * S::kChunks; i += threads) {
    int h, col;
    const int at = S::window_piece(i, S::kStride * p0 - g.pad_h, S::kStride * q0 - g.pad_w, buffer, h, col);
    if (h >= 0 && h < g.h && col >= 0 && col < g.w)
      copy16(base + 4 * at, x + ((size_t(n) * g.h + h) * g.w + col) * (S::kChunks * 8) + 8 * (i % S::kChunks));
    else
      *reinterpret_cast<uint4*>(words + at) = make_uint4(0, 0, 0, 0);
  }
}

// One block from the window in buffer `buffer`: each warp's tiles, then their outputs through the
// epilogue.
template <typename S, int K, bool BIAS, bool ADD, int ACT>
__device__ __forceinline__ void compute_block(const Shape& g, __half* __restrict__ y, EpilogueArgs e, uint32_t base,
                                              int block, int buffer) {
  const int lane = threadIdx.x % 32, first = (threadIdx.x / 32) * S::kTilesPerWarp;
  float d[S::kTilesPerWarp][S::kNTiles][4] = {};
  uint32_t a_at[S::kTilesPerWarp], b_at[S::kNTiles];  // the lane's rows at k-step 0
#pragma unroll
  for (int mt = 0; mt < S::kTilesPerWarp; ++mt) a_at[mt] = base + 4 * S::a_lane(lane, first + mt, buffer);
#pragma unroll
  for (int nt = 0; nt < S::kNTiles; ++nt) b_at[nt] = base + 4 * S::b_lane(lane, nt);
  const uint32_t zero = base + 4 * S::kZeroAt;
  // Unrolled: each step's pair offsets are constants. A lane whose pair is past the last (the last
  // step, 9 C / 8 odd: mma's second half of K) reads the zero line.
#pragma unroll
  for (int step = 0; step < S::kSteps; ++step) {
    const bool past_a = S::a_pair_of(lane, step) >= S::kPairs, past_b = 2 * step + (lane / 8) % 2 >= S::kPairs;
    uint32_t b[S::kNTiles][2];
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) ldmatrix_x2(b[nt], past_b ? zero : b_at[nt] + 32 * step);
    const int a_offset = 4 * S::a_pair(2 * step + (lane >= 16 ? 1 : 0));  // a_pair_of(lane, step)
#pragma unroll
    for (int mt = 0; mt < S::kTilesPerWarp; ++mt) {
      uint32_t a[4];
      ldmatrix_x4(a, past_a ? zero : a_at[mt] + a_offset);
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) mma(d[mt][nt], a, b[nt]);
    }
  }
  float2 bias[S::kNTiles];
#pragma unroll
  for (int nt = 0; nt < S::kNTiles; ++nt)
    bias[nt] = BIAS && e.bias != nullptr
                   ? __half22float2(*reinterpret_cast<const __half2*>(e.bias + 8 * nt + 2 * (lane % 4)))
                   : make_float2(0.0f, 0.0f);
  int n, p0, q0;
  S::origin(g, block, n, p0, q0);
#pragma unroll
  for (int mt = 0; mt < S::kTilesPerWarp; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // mma's D: lane / 4 + 8 h is the row, 2 (lane % 4) the column
      int p, q;
      S::tile_pixel(first + mt, lane / 4 + 8 * h, p, q);
      if (p0 + p >= g.p || q0 + q >= g.q) continue;
      const size_t at = ((size_t(n) * g.p + p0 + p) * g.q + q0 + q) * K + 2 * (lane % 4);
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
        float v0 = d[mt][nt][2 * h] + bias[nt].x, v1 = d[mt][nt][2 * h + 1] + bias[nt].y;
        if constexpr (ADD) {
          const float2 r = __half22float2(*reinterpret_cast<const __half2*>(e.residual + at + 8 * nt));
          v0 += r.x, v1 += r.y;
        }
        *reinterpret_cast<__half2*>(y + at + 8 * nt) = __floats2half2_rn(activate<ACT>(v0), activate<ACT>(v1));
      }
    }
  }
}

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT, bool BIAS, bool ADD, int ACT, int STRIDE>
__global__ void __launch_bounds__(32 * WARPS) fprop_kernel(Shape g, int blocks, const __half* __restrict__ x,
                                                           const __half* __restrict__ w, __half* __restrict__ y,
                                                           EpilogueArgs e) {
  using S = Tiling<C, K, TP, TQ, WARPS, PERSISTENT, STRIDE>;
  extern __shared__ uint4 shared[];
  uint32_t* const words = reinterpret_cast<uint32_t*>(shared);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const int threads = 32 * WARPS, first = blockIdx.x, stride = gridDim.x;
  for (int i = threadIdx.x; i < K * S::kPairs; i += threads) copy16(base + 4 * S::filter_piece(i), w + 8 * size_t(i));
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(words + S::kZeroAt) = make_uint4(0, 0, 0, 0);
  load_window<S>(g, x, words, base, first, 0, threads);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  if (!PERSISTENT) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    compute_block<S, K, BIAS, ADD, ACT>(g, y, e, base, first, 0);
    return;
  }
  if (first + stride < blocks) load_window<S>(g, x, words, base, first + stride, 1, threads);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#pragma unroll 1
  for (int block = first, i = 0; block < blocks; block += stride, ++i) {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // this block's window (and the filter)
    __syncthreads();
    compute_block<S, K, BIAS, ADD, ACT>(g, y, e, base, block, i % 2);
    __syncthreads();  // every warp is done with the buffer the block after next fills
    if (block + 2 * stride < blocks) load_window<S>(g, x, words, base, block + 2 * stride, i % 2, threads);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
}

}  // namespace narrow

// A narrow 3x3 conv2d fprop kernel: C -> K channels at stride STRIDE, blocks of TP x TQ output
// pixels on WARPS warps, persistent CTAs or a CTA a block; its epilogue a bias (BIAS), a residual add
// (ADD) and activation ACT (activation_at_launch.h).
template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT, bool BIAS = false, bool ADD = false,
          int ACT = kActivationNone, int STRIDE = 1>
struct NarrowFprop {
  using Tiling = narrow::Tiling<C, K, TP, TQ, WARPS, PERSISTENT, STRIDE>;
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kSharedBytes = Tiling::kSmemBytes;

  struct Arguments {
    const __half* x;
    const __half* w;
    __half* y;
    narrow::EpilogueArgs epilogue;
    narrow::Shape shape;
    int blocks;  // the layer's TP x TQ blocks
    int grid;    // CTAs launched
  };

  // Nullptr when the kernel computes this convolution (NHWC x, K x 3 x 3 x C w, NPQK y), else why not.
  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w, int stride_h,
                                 int stride_w, int dilation_h, int dilation_w) {
    if (n < 1 || h < 1 || w < 1 || c < 1 || k < 1 || pad_h < 0 || pad_w < 0) return "needs positive extents";
    if (r != 3 || s != 3) return "built for 3x3 filters";
    if (stride_h != STRIDE || stride_w != STRIDE || dilation_h != 1 || dilation_w != 1)
      return STRIDE == 1 ? "built for stride 1, dilation 1" : "built for stride 2, dilation 1";
    if (c != C || k != K) return "built for another number of input or output channels";
    if (h + 2 * pad_h < 3 || w + 2 * pad_w < 3) return "the padded image is smaller than the filter";
    const long long p = (h + 2 * pad_h - 3) / STRIDE + 1, q = (w + 2 * pad_w - 3) / STRIDE + 1;
    if ((long long)n * ((p + TP - 1) / TP) * ((q + TQ - 1) / TQ) > INT_MAX)
      return "more blocks than the kernel's index arithmetic holds";
    return nullptr;
  }

  // Binds operands: x (n x h x w x C), w (K x 3 x 3 x C), y (n x p x q x K), the epilogue's bias
  // (K) and residual (y's shape), each may be null where the epilogue reads none. Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, const void* bias,
                                const void* residual, int n, int h, int width, int c, int k, int r, int s, int pad_h,
                                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w) {
    if (const char* why = unsupported(n, h, width, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w))
      return why;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(w) % 16 ||
        reinterpret_cast<uintptr_t>(y) % 16 || reinterpret_cast<uintptr_t>(bias) % 16 ||
        reinterpret_cast<uintptr_t>(residual) % 16)
      return "needs 16-byte aligned activations, filters, output, bias and residual";
    if (ADD && residual == nullptr) return "the epilogue adds a residual: it needs one";
    if (!ADD && residual != nullptr) return "this kernel adds no residual";
    args.x = static_cast<const __half*>(x), args.w = static_cast<const __half*>(w), args.y = static_cast<__half*>(y);
    args.epilogue = {static_cast<const __half*>(bias), static_cast<const __half*>(residual)};
    args.shape = {n, h, width, (h + 2 * pad_h - 3) / STRIDE + 1, (width + 2 * pad_w - 3) / STRIDE + 1, pad_h, pad_w};
    args.blocks = Tiling::blocks(args.shape);
    args.grid = args.blocks;
    auto kernel = narrow::fprop_kernel<C, K, TP, TQ, WARPS, PERSISTENT, BIAS, ADD, ACT, STRIDE>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    if (PERSISTENT) {  // as many CTAs as stay on the GPU at once
      int device = 0, sms = 0, per_sm = 0;
      if (cudaGetDevice(&device) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kSharedBytes) != cudaSuccess)
        return "cannot query the device's multiprocessors";
      if (per_sm < 1) return "the kernel does not fit on a multiprocessor";
      if ((long long)per_sm * sms < args.blocks) args.grid = per_sm * sms;
    }
    return nullptr;
  }

  static cudaError_t run(const Arguments& args, cudaStream_t stream) {
    narrow::fprop_kernel<C, K, TP, TQ, WARPS, PERSISTENT, BIAS, ADD, ACT, STRIDE><<<args.grid, kThreads, kSharedBytes, stream>>>(
        args.shape, args.blocks, args.x, args.w, args.y, args.epilogue);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
