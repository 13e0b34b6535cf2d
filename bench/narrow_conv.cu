// Benchmark: a direct 3x3 convolution on tensor cores for layers of few channels in and out (8 to 64,
// multiples of 8) at stride 1, where every kernel of the space is an implicit GEMM that reads each
// input pixel once a filter tap and fills a tile of 64 or more output channels with a fraction of
// them: EfficientNetV2-S's 24 -> 24 layer at 112x112 (batch 32: 0.102 ms, cuDNN 0.083 ms, its floor
// 0.013 ms on an H100; docs/results.md, "Four networks no workload file held"), Inception-v3's
// 32 -> 64 at 147x147.
//
// The kernel: a CTA computes TP x TQ output pixels of one image, every output channel. It copies its
// input window ((TP + 2) x (TQ + 2) pixels of C channels, zeros outside the image) and the whole
// K x 3 x 3 x C filter into shared memory once (cp.async), then each of its WARPS warps computes
// MT = TP * TQ / 16 / WARPS tiles of 16 output pixels by K channels with mma.sync m16n8k16: the
// GEMM's K is the 9 taps x C channels in (tap, 8-channel chunk) pairs, two a k-step, so a k-step's
// A is an ldmatrix.x4 of 16 window pixels' chunks (the tile's pixels shifted by the tap) and its B
// an ldmatrix.x2 a group of 8 output channels, read once a k-step for the warp's MT tiles. A pixel's
// C channels, and an output channel's 9 x C filter values, are rows of shared memory whose stride is
// 4 words more than a multiple of 8 (padded where it is not), so the 8 rows an ldmatrix phase reads
// fall in 8 different quarters of the banks. A pair past the 9 x C / 8 real ones reads a zero line.
// Persistent: as many CTAs as stay on the GPU at once, each copying the filter once and taking
// blocks blockIdx.x, + gridDim.x, ..., the next block's window copied into the second of two
// buffers while this one's is computed.
//
// For each layer (default: those two layers and their batch-1 versions), every configuration
// (TP x TQ outputs a block, WARPS, persistent or a CTA a block) is checked against the plain fp32
// reference on the same operands and timed (bench/conv_bench.h); one line a layer and configuration. --model runs on the CPU, no GPU:
// every CTA's shared memory filled and every warp's fragments taken as ldmatrix and mma.sync define
// them (PTX ISA) from the same address functions as the kernel, against a plain convolution.
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a bench/narrow_conv.cu -o narrow_conv
//   ./narrow_conv [n h w c k ...]          (3x3 filters, stride 1, padding 1)
//   ./narrow_conv --model
//
// Written and checked by --model; not yet run on a GPU.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "conv_bench.h"

namespace {

using namespace bench;

// A shared-memory row stride in 32-bit words for `words` words of data: the next one that is 4 more
// than a multiple of 8 (16-byte rows an ldmatrix phase reads then start in 8 different bank quarters).
constexpr int row_words(int words) { return words % 8 == 4 ? words : words + (12 - words % 8) % 8; }

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT>
struct Narrow {
  static_assert(C % 8 == 0 && K % 8 == 0 && C <= 64 && K <= 64, "8 to 64 channels in and out, multiples of 8");
  static_assert(TP * TQ % (16 * WARPS) == 0, "whole tiles of 16 pixels for every warp");
  static constexpr int kWP = TP + 2, kWQ = TQ + 2;                 // the window's rows and columns
  static constexpr int kPixelWords = row_words(C / 2);              // a window pixel's row
  static constexpr int kChunks = C / 8;                             // 8-channel chunks a pixel
  static constexpr int kPairs = 9 * kChunks;                        // (tap, chunk) pairs: the GEMM's K / 8
  static constexpr int kSteps = (kPairs + 1) / 2;                   // k-steps of 16
  static constexpr int kFilterWords = row_words(9 * C / 2);         // an output channel's row
  static constexpr int kWindowWords = kWP * kWQ * kPixelWords;
  static constexpr int kBuffers = PERSISTENT ? 2 : 1;               // windows: the one computed, the next
  static constexpr int kFilterAt = kBuffers * kWindowWords, kZeroAt = kFilterAt + K * kFilterWords;
  static constexpr int kSmemBytes = 4 * (kZeroAt + 4);              // and a zero line of 16 bytes
  static constexpr int kTilesPerWarp = TP * TQ / 16 / WARPS;        // MT
  static constexpr int kNTiles = K / 8;

  // Block `block` of the layer's TP x TQ output blocks (image by image, rows of blocks): its image
  // and first output row and column.
  __host__ __device__ static void origin(const Layer& L, int block, int& n, int& p0, int& q0) {
    const int across = (L.q() + TQ - 1) / TQ, down = (L.p() + TP - 1) / TP;
    n = block / (across * down), p0 = block / across % down * TP, q0 = block % across * TQ;
  }

  // The shared-memory word where `lane`'s ldmatrix.x4 row of A starts, for tile `tile` (of the
  // block's TP * TQ / 16) at k-step `step`, its window in buffer `buffer`: lanes 8j..8j+7 give matrix
  // j's rows, matrix j holding rows 8 (j % 2).. of the tile and its pair 2 step + j / 2 (mma's a0..a3).
  __host__ __device__ static int a_word(int lane, int tile, int step, int buffer) {
    const int j = lane / 8, row = lane % 8 + 8 * (j % 2), pair = 2 * step + j / 2;
    if (pair >= kPairs) return kZeroAt;
    const int pixel = tile * 16 + row, p = pixel / TQ, q = pixel % TQ;
    const int tap = pair / kChunks, chunk = pair % kChunks;
    return buffer * kWindowWords + ((p + tap / 3) * kWQ + q + tap % 3) * kPixelWords + 4 * chunk;
  }

  // The word where `lane`'s ldmatrix.x2 row of B starts, output channels 8 ntile.. at k-step `step`:
  // lanes 0-7 matrix 0 (pair 2 step, mma's b0), 8-15 matrix 1 (pair 2 step + 1, b1); a row is an
  // output channel's 8 filter values of the pair (the others' addresses, unused, repeat them).
  __host__ __device__ static int b_word(int lane, int ntile, int step) {
    const int pair = 2 * step + (lane / 8) % 2, out = ntile * 8 + lane % 8;
    return pair >= kPairs ? kZeroAt : kFilterAt + out * kFilterWords + 4 * pair;
  }

  // The window's 16-byte piece `i` (of kWP * kWQ * kChunks) for the block from (p0, q0), in buffer
  // `buffer`: its word in shared memory, and the input pixel it copies (row h, column w; outside the
  // image it is zeros).
  __host__ __device__ static int window_piece(int i, int p0, int q0, int buffer, int& h, int& w) {
    const int chunk = i % kChunks, pixel = i / kChunks, wr = pixel / kWQ, wc = pixel % kWQ;
    h = p0 - 1 + wr, w = q0 - 1 + wc;
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

// One block's window into buffer `buffer` (cp.async; zeros outside the image).
template <typename S>
__device__ __forceinline__ void load_window(const Layer& L, const __half* __restrict__ x, uint32_t* words,
                                            uint32_t base, int block, int buffer, int threads) {
  int n, p0, q0;
  S::origin(L, block, n, p0, q0);
  for (int i = threadIdx.x; i < S::kWP * S::kWQ * S::kChunks; i += threads) {
    int h, col;
    const int at = S::window_piece(i, p0, q0, buffer, h, col);
    if (h >= 0 && h < L.h && col >= 0 && col < L.w)
      copy16(base + 4 * at, x + ((size_t(n) * L.h + h) * L.w + col) * (S::kChunks * 8) + 8 * (i % S::kChunks));
    else
      *reinterpret_cast<uint4*>(words + at) = make_uint4(0, 0, 0, 0);
  }
}

// One block from the window in buffer `buffer`: each warp's tiles, then their outputs.
template <typename S, int K>
__device__ __forceinline__ void compute_block(const Layer& L, __half* __restrict__ y, uint32_t base, int block,
                                              int buffer) {
  const int lane = threadIdx.x % 32, first = (threadIdx.x / 32) * S::kTilesPerWarp;
  float d[S::kTilesPerWarp][S::kNTiles][4] = {};
#pragma unroll 1
  for (int step = 0; step < S::kSteps; ++step) {
    uint32_t b[S::kNTiles][2];
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) ldmatrix_x2(b[nt], base + 4 * S::b_word(lane, nt, step));
#pragma unroll
    for (int mt = 0; mt < S::kTilesPerWarp; ++mt) {
      uint32_t a[4];
      ldmatrix_x4(a, base + 4 * S::a_word(lane, first + mt, step, buffer));
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) mma(d[mt][nt], a, b[nt]);
    }
  }
  int n, p0, q0;
  S::origin(L, block, n, p0, q0);
  const int P = L.p(), Q = L.q();
#pragma unroll
  for (int mt = 0; mt < S::kTilesPerWarp; ++mt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {  // mma's D: lane / 4 + 8 e is the row, 2 (lane % 4) the column
      int p, q;
      S::tile_pixel(first + mt, lane / 4 + 8 * e, p, q);
      if (p0 + p >= P || q0 + q >= Q) continue;
      __half* out = y + ((size_t(n) * P + p0 + p) * Q + q0 + q) * K + 2 * (lane % 4);
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt)
        *reinterpret_cast<__half2*>(out + 8 * nt) = __floats2half2_rn(d[mt][nt][2 * e], d[mt][nt][2 * e + 1]);
    }
  }
}

// A CTA a block (PERSISTENT false), or CTAs that stay, the filter copied once, taking blocks
// blockIdx.x, + gridDim.x, ..., the next block's window copied while this one's is computed.
template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT>
__global__ void __launch_bounds__(32 * WARPS) narrow_conv(Layer L, int blocks, const __half* __restrict__ x,
                                                          const __half* __restrict__ w, __half* __restrict__ y) {
  using S = Narrow<C, K, TP, TQ, WARPS, PERSISTENT>;
  extern __shared__ uint4 shared[];
  uint32_t* const words = reinterpret_cast<uint32_t*>(shared);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const int threads = 32 * WARPS, first = blockIdx.x, stride = gridDim.x;
  for (int i = threadIdx.x; i < K * S::kPairs; i += threads) copy16(base + 4 * S::filter_piece(i), w + 8 * size_t(i));
  if (threadIdx.x == 0) *reinterpret_cast<uint4*>(words + S::kZeroAt) = make_uint4(0, 0, 0, 0);
  load_window<S>(L, x, words, base, first, 0, threads);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  if (!PERSISTENT) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    compute_block<S, K>(L, y, base, first, 0);
    return;
  }
  if (first + stride < blocks) load_window<S>(L, x, words, base, first + stride, 1, threads);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#pragma unroll 1
  for (int block = first, i = 0; block < blocks; block += stride, ++i) {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // this block's window (and the filter)
    __syncthreads();
    compute_block<S, K>(L, y, base, block, i % 2);
    __syncthreads();  // every warp is done with the buffer the block after next fills
    if (block + 2 * stride < blocks) load_window<S>(L, x, words, base, block + 2 * stride, i % 2, threads);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
}

// The CPU model: for each block, shared memory filled as the kernel fills it (window_piece into the
// buffer of the block's parity where there are two, filter_piece; NaN elsewhere), then each warp's
// k-steps with ldmatrix's rows taken from the lanes' addresses (a_word, b_word) and handed out as the
// PTX ISA says (lane l holds row l / 4, elements 2 (l % 4) and the next, of each matrix), mma.sync's
// A, B and D layouts likewise; against a plain convolution of the same floats.
// Returns the largest difference relative to the largest output.
template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT>
double model(const Layer& L) {
  using S = Narrow<C, K, TP, TQ, WARPS, PERSISTENT>;
  std::vector<float> x(size_t(L.n) * L.h * L.w * C), w(size_t(K) * 9 * C), y(size_t(L.n) * L.p() * L.q() * K, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 17) - 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 104729 % 13) - 6);
  const int P = L.p(), Q = L.q();
  std::vector<float> smem(2 * S::kSmemBytes / 4, NAN);  // halves, NaN where nothing was written
  auto put16 = [&](int word, const float* from) {
    for (int e = 0; e < 8; ++e) smem[2 * word + e] = from ? from[e] : 0.0f;
  };
  auto row8 = [&](int word, float* to) {  // an ldmatrix row: 8 halves from `word`
    for (int e = 0; e < 8; ++e) to[e] = smem[2 * word + e];
  };
  const int blocks = L.n * ((P + TP - 1) / TP) * ((Q + TQ - 1) / TQ);
  for (int block = 0; block < blocks; ++block) {
    int n, p0, q0;
    S::origin(L, block, n, p0, q0);
    const int buffer = block % S::kBuffers;
    std::fill(smem.begin(), smem.end(), NAN);
    for (int i = 0; i < S::kWP * S::kWQ * S::kChunks; ++i) {
      int h, col;
      const int at = S::window_piece(i, p0, q0, buffer, h, col);
      const bool inside = h >= 0 && h < L.h && col >= 0 && col < L.w;
      put16(at, inside ? &x[((size_t(n) * L.h + h) * L.w + col) * C + 8 * (i % S::kChunks)] : nullptr);
    }
    for (int i = 0; i < K * S::kPairs; ++i) put16(S::filter_piece(i), &w[8 * size_t(i)]);
    put16(S::kZeroAt, nullptr);
    for (int warp = 0; warp < WARPS; ++warp)
      for (int mt = 0; mt < S::kTilesPerWarp; ++mt) {
        const int tile = warp * S::kTilesPerWarp + mt;
        float D[16][K] = {};
        for (int step = 0; step < S::kSteps; ++step) {
          float A[16][16], B[16][K], row[8];
          for (int lane = 0; lane < 32; ++lane) {  // matrix lane / 8, its row lane % 8
            const int j = lane / 8, r = lane % 8;
            row8(S::a_word(lane, tile, step, buffer), row);
            for (int e = 0; e < 8; ++e) A[r + 8 * (j % 2)][8 * (j / 2) + e] = row[e];
          }
          for (int nt = 0; nt < S::kNTiles; ++nt)
            for (int lane = 0; lane < 16; ++lane) {  // x2: matrices 0 and 1, rows are output channels
              const int j = lane / 8, r = lane % 8;
              row8(S::b_word(lane, nt, step), row);
              for (int e = 0; e < 8; ++e) B[8 * j + e][8 * nt + r] = row[e];
            }
          for (int r = 0; r < 16; ++r)
            for (int c = 0; c < K; ++c)
              for (int k = 0; k < 16; ++k) D[r][c] += A[r][k] * B[k][c];
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 2; ++e) {
            int p, q;
            S::tile_pixel(tile, lane / 4 + 8 * e, p, q);
            if (p0 + p >= P || q0 + q >= Q) continue;
            for (int nt = 0; nt < S::kNTiles; ++nt)
              for (int v = 0; v < 2; ++v)
                y[((size_t(n) * P + p0 + p) * Q + q0 + q) * K + 8 * nt + 2 * (lane % 4) + v] =
                    D[lane / 4 + 8 * e][8 * nt + 2 * (lane % 4) + v];
          }
      }
  }
  double largest = 0, largest_diff = 0;
  for (int n = 0; n < L.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < K; ++k) {
          double acc = 0;
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int h = p - 1 + r, col = q - 1 + s;
              if (h < 0 || h >= L.h || col < 0 || col >= L.w) continue;
              for (int c = 0; c < C; ++c)
                acc += double(x[((size_t(n) * L.h + h) * L.w + col) * C + c]) * w[(size_t(k) * 9 + r * 3 + s) * C + c];
            }
          largest = std::max(largest, std::fabs(acc));
          const double got = y[((size_t(n) * P + p) * Q + q) * K + k];
          largest_diff = std::max(largest_diff, std::isnan(got) ? INFINITY : std::fabs(got - acc));
        }
  return largest_diff / std::max(largest, 1e-30);
}

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT>
void time_one(const Layer& L, const Buffers& b) {
  using S = Narrow<C, K, TP, TQ, WARPS, PERSISTENT>;
  const auto kernel = narrow_conv<C, K, TP, TQ, WARPS, PERSISTENT>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes), "cudaFuncSetAttribute");
  const int blocks = L.n * ((L.p() + TP - 1) / TP) * ((L.q() + TQ - 1) / TQ);
  int grid = blocks;
  if (PERSISTENT) {  // as many CTAs as stay on the GPU at once
    int device = 0, sms = 0, per_sm = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * WARPS, S::kSmemBytes), "occupancy");
    grid = std::min(blocks, std::max(1, per_sm) * sms);
  }
  const std::string label = std::string(PERSISTENT ? "narrow persistent " : "narrow ") + std::to_string(TP) + " x " +
                            std::to_string(TQ) + " outputs, " + std::to_string(WARPS) + " warps, " +
                            std::to_string(S::kSmemBytes) + " B";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    kernel<<<grid, 32 * WARPS, S::kSmemBytes, stream>>>(L, blocks, x, w, y);
  });
}

template <int C, int K>
void configurations(const Layer& L, const Buffers& b) {
  time_one<C, K, 4, 16, 4, false>(L, b);
  time_one<C, K, 8, 16, 4, false>(L, b);
  time_one<C, K, 8, 16, 8, false>(L, b);
  time_one<C, K, 4, 32, 4, false>(L, b);
  time_one<C, K, 8, 8, 4, false>(L, b);
  time_one<C, K, 16, 16, 8, false>(L, b);
  time_one<C, K, 4, 16, 4, true>(L, b);
  time_one<C, K, 8, 16, 4, true>(L, b);
  time_one<C, K, 8, 16, 8, true>(L, b);
  time_one<C, K, 4, 32, 4, true>(L, b);
}

bool served(const Layer& L) {
  return L.r == 3 && L.s == 3 && L.pad == 1 && L.stride == 1 && L.groups == 1 &&
         ((L.c == 24 && L.k == 24) || (L.c == 32 && L.k == 64) || (L.c == 32 && L.k == 32) || (L.c == 16 && L.k == 16) ||
          (L.c == 48 && L.k == 48) || (L.c == 64 && L.k == 64));
}

void measure(const Layer& L) {
  if (!served(L)) {
    std::printf("%d,%d,%d,%d,%d  not served: 3x3, stride 1, padding 1; C x K of 16x16, 24x24, 32x32, 32x64, "
                "48x48 or 64x64\n", L.n, L.h, L.w, L.c, L.k);
    return;
  }
  Buffers b = allocate(L, size_t(L.k) * 9 * L.c);
  if (L.c == 24) configurations<24, 24>(L, b);
  else if (L.c == 16) configurations<16, 16>(L, b);
  else if (L.c == 48) configurations<48, 48>(L, b);
  else if (L.c == 64) configurations<64, 64>(L, b);
  else if (L.k == 64) configurations<32, 64>(L, b);
  else configurations<32, 32>(L, b);
  release(b);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--model") {  // no GPU: the kernel's shared memory and fragments
    struct Case {
      Layer layer;
      double (*check)(const Layer&);
      const char* what;
    };
    const Case cases[] = {
        {{2, 9, 11, 24, 24, 3, 3, 1, 1, 1}, model<24, 24, 4, 16, 4, false>, "24x24, 4 x 16, 4 warps"},
        {{1, 19, 21, 24, 24, 3, 3, 1, 1, 1}, model<24, 24, 8, 8, 4, true>, "24x24, 8 x 8, 4 warps, persistent"},
        {{2, 7, 20, 32, 64, 3, 3, 1, 1, 1}, model<32, 64, 8, 16, 8, true>, "32x64, 8 x 16, 8 warps, persistent"},
        {{1, 5, 35, 16, 16, 3, 3, 1, 1, 1}, model<16, 16, 4, 32, 4, false>, "16x16, 4 x 32, 4 warps"},
        {{1, 6, 6, 48, 48, 3, 3, 1, 1, 1}, model<48, 48, 4, 16, 2, true>, "48x48, 4 x 16, 2 warps, persistent"},
    };
    bool all = true;
    for (const Case& c : cases) {
      const double error = c.check(c.layer);
      std::printf("model %d,%d,%d,%d,%d  %-36s largest difference / largest output %.2e  %s\n", c.layer.n, c.layer.h,
                  c.layer.w, c.layer.c, c.layer.k, c.what, error, error < 1e-6 ? "ok" : "WRONG");
      all = all && error < 1e-6;
    }
    return all ? 0 : 1;
  }
  std::vector<Layer> layers;
  if (argc > 1) {
    if ((argc - 1) % 5 != 0) {
      std::fprintf(stderr, "usage: %s [n h w c k ...]\n", argv[0]);
      return 2;
    }
    for (int i = 1; i < argc; i += 5) {
      int v[5];
      for (int j = 0; j < 5; ++j) v[j] = std::atoi(argv[i + j]);
      if (v[0] < 1 || v[1] < 1 || v[2] < 1 || v[3] < 1 || v[4] < 1) {
        std::fprintf(stderr, "narrow_conv: sizes must be positive integers\n");
        return 2;
      }
      layers.push_back({v[0], v[1], v[2], v[3], v[4], 3, 3, 1, 1, 1});
    }
  } else {
    for (int n : {32, 1}) {
      layers.push_back({n, 112, 112, 24, 24, 3, 3, 1, 1, 1});
      layers.push_back({n, 147, 147, 32, 64, 3, 3, 1, 1, 1});
    }
  }
  for (const Layer& layer : layers) measure(layer);
  return 0;
}
