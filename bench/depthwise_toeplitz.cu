// Benchmark: stride-1 depthwise convolutions of large filters (ConvNeXt's 7x7) on tensor cores,
// each filter row a Toeplitz matrix and the input window staged channel-major, so that the A
// fragments come by ldmatrix with no byte permutes and a warp keeps its channels' filters as B
// fragments in registers.
//
// Why: the fp16-pair CUDA-core kernels (depthwise_half) run ConvNeXt-T's 7x7 layers at 2.3 to 5.1
// times their floor (the bytes once at copy bandwidth) on the H200, bound by instruction issue:
// 49 HFMA2 a pair of outputs and their loads (docs/results.md). Here one mma.sync m16n8k16 makes
// 16 x 8 outputs of one channel for one filter row (B[k][j] = w[r][k - j], K 16 input columns for
// 8 outputs, 7 of them non-zero): 7 mma and 7 ldmatrix.x4 for 128 outputs where the pairs take
// 64 x 49 HFMA2. depthwise_mma (docs/kernels.md) takes A from a channels-last window by byte
// permutes and keeps 8 channels' filters (112 registers); here the window is transposed once as it
// is staged, and a warp's CPW channels take 2 R registers each.
//
// The kernel: a CTA takes a block of CB channels (8 or 16; C a multiple of 16) and, in turn, tiles
// of 16 x 16 outputs of one image (tile t = blockIdx.y, + gridDim.y, ...). Its warps copy the
// tile's window (16 + R - 1 rows of 24 columns, zeros outside the image) as the tensor holds it
// (cp.async of 16 bytes, a pixel's channels padded to 48 bytes at CB 16), then transpose it
// channel-major by ldmatrix.trans (8 pixels by 8 channels a matrix; a channel's window rows of 48
// bytes, so that 8 lanes' ldmatrix rows fall in 8 different 16-byte bank groups). Each of its
// WARPS warps computes CB / WARPS channels: for each filter row and each of the tile's two 8-column
// halves one ldmatrix.x4 (rows i + r, columns 8h .. 8h + 15) and one mma into fp32 sums; the sums
// go as fp16 pairs to a channel-major output tile (where the copied window was), transposed back
// by ldmatrix.trans into 4-byte stores of 2 channels of a pixel. By the SASS (nvcc 13.0, sm_90a)
// and its loops' trips, CB 16 of 4 warps issues about 840 warp instructions a warp a 16 x 16 tile:
// 0.8 an output, against 1.4 for the fp16-pair kernel of 8x8 tiles on ConvNeXt-T's 56x56 layer
// (13.4 M instructions under Nsight Compute, docs/results.md); the copies, the transposes and
// their index arithmetic are two thirds of it, the 56 mma and 56 ldmatrix an eighth.
//
// Pipelined, a CTA copies its next tile's window into a second buffer while it computes this one
// (2 x CB's staged windows, the channel-major one and the output tile in dynamic shared memory).
//
// Measured on an H100 (2026-12-07, docs/results.md): every configuration verified, and each layer's
// best 1.4 to 1.8 times the fp16-pair kernel chosen for it (2.8 to 3.6 on 7x7 images, whose 16 x 16
// tiles are mostly padding): a CTA copies, transposes, computes and stores a tile in turn behind
// three barriers, which the instruction count above does not weigh.
//
// For each layer (default: ConvNeXt-T's four 7x7 layers at batch 32 and its 14x14 one at batch 1,
// EfficientNet-B0's four stride-1 5x5 layers at batch 32),
// every configuration (CB, WARPS, tiles a CTA, pipelined or not) is checked against a plain fp32 reference
// on the same operands and timed as the profiler times (bench/conv_bench.h). `--model` runs both
// channel blocks' index functions on the CPU (ldmatrix, .trans and mma.sync as the PTX ISA places
// their registers) against the reference on small odd layers; no GPU needed.
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a bench/depthwise_toeplitz.cu -o toeplitz
//   ./toeplitz [n h w c ...]        (7x7 filters, padding 3, stride 1)
//   ./toeplitz --model
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../profiler/grouped_mma.h"  // grouped_mma::mma16816, ldmatrix_x4; depthwise::copy16, commit, wait_all_but
#include "conv_bench.h"

namespace toeplitz {

constexpr int kTile = 16;     // output rows and columns a tile
constexpr int kColumns = 24;  // a window row: 16 + 8 columns (16-byte rows for ldmatrix)

template <int R, int CB>
struct Shape {
  static_assert(R % 2 == 1 && R <= 9, "odd filters up to 9: an 8-output half's 8 + R - 1 inputs within 16");
  static_assert(CB == 8 || CB == 16, "channel blocks of 8 or 16");
  static constexpr int kRows = kTile + R - 1;          // window rows
  static constexpr int kChunks = CB / 8;               // 16-byte chunks of a pixel's channels
  // Staged as copied (NHWC): a pixel's CB channels, padded to 48 bytes at 16 so that the 8 pixels
  // of a transposing ldmatrix fall in 8 different 16-byte bank groups.
  static constexpr int kPixel = CB == 8 ? 8 : CB + 8;  // halves
  static constexpr int kStage = kRows * kColumns * kPixel;
  // Channel-major: a channel's window (rows of 48 bytes), padded by 8 halves so that the 8 channels
  // of a transposed store fall in different banks.
  static constexpr int kWindow = kRows * kColumns + 8;
  static constexpr int kOutput = kTile * kTile + 8;  // a channel's output tile (+8: banks)
  // bytes: the staged window, then the channel-major window; the output tile over the staged one
  static constexpr int kBytes = (kStage + CB * kWindow) * 2;
  static_assert(CB * kOutput <= kStage, "the output tile fits where the staged window was");
};

// Offset in a channel's window of the row that ldmatrix.x4 lane `lane` addresses for filter row r
// and the tile's column half h: matrices (rows 0-7 | 8-15) x (columns 8h .. +7 | 8h + 8 .. +15).
__host__ __device__ constexpr int a_row_offset(int lane, int r, int h) {
  return ((lane % 8) + (lane / 8 % 2) * 8 + r) * kColumns + 8 * h + (lane / 16) * 8;
}
// The filter column of a B fragment's half `e` (0, 1) of register `reg` (0, 1) of lane (g, t):
// B[k][j] = w[r][k - j], k = 2t + e + 8 reg, j = g; outside [0, R) the fragment holds zero.
__host__ __device__ constexpr int b_tap(int g, int t, int reg, int e) { return 2 * t + e + 8 * reg - g; }
// Offset in a channel's output tile of sum `e` of lane (g, t) in column half h: row g + 8 (e / 2),
// column 8h + 2t + e % 2.
__host__ __device__ constexpr int sum_offset(int g, int t, int h, int e) {
  return (g + 8 * (e / 2)) * kTile + 8 * h + 2 * t + e % 2;
}

// A transposing block of the window: 8 consecutive pixels of a window row by 8 channels.
struct InBlock {
  int row, column, chunk;
};
// Offset in the staged window of the 16-byte row (pixel i of the block, its 8 channels) that an
// ldmatrix.trans lane addresses; a transposed register holds channel chunk * 8 + g of the block's
// pixels 2t, 2t + 1: its offset in the channel-major window.
template <int R, int CB>
__host__ __device__ constexpr int staged_row(InBlock blk, int i) {
  return (blk.row * kColumns + blk.column + i) * Shape<R, CB>::kPixel + blk.chunk * 8;
}
template <int R, int CB>
__host__ __device__ constexpr int window_pair(InBlock blk, int g, int t) {
  return (blk.chunk * 8 + g) * Shape<R, CB>::kWindow + blk.row * kColumns + blk.column + 2 * t;
}
// An output block: 8 consecutive pixels of the tile (row-major) by 8 channels. The ldmatrix.trans
// lane addresses channel chunk * 8 + i's 8 pixels; a transposed register holds channels
// chunk * 8 + 2t, + 1 of pixel first + g.
struct OutBlock {
  int first, chunk;
};
template <int R, int CB>
__host__ __device__ constexpr int output_row(OutBlock blk, int i) {
  return (blk.chunk * 8 + i) * Shape<R, CB>::kOutput + blk.first;
}

__device__ __forceinline__ uint32_t pack(__half lo, __half hi) {
  return uint32_t(__half_as_ushort(lo)) | uint32_t(__half_as_ushort(hi)) << 16;
}

// ldmatrix .trans of 1 or 2 matrices (lanes 8j .. 8j + 7 addressing matrix j's rows).
__device__ __forceinline__ void ldmatrix_trans(const void* row, uint32_t (&a)[1]) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(a[0]) : "r"(address));
}
__device__ __forceinline__ void ldmatrix_trans(const void* row, uint32_t (&a)[2]) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(a[0]), "=r"(a[1]) : "r"(address));
}

// A tile: its image and first output row and column.
struct Tile {
  int n, p0, q0;
};
__device__ __forceinline__ Tile tile_at(int tile, int tiles_p, int tiles_q) {
  return {tile / (tiles_p * tiles_q), tile / tiles_q % tiles_p * kTile, tile % tiles_q * kTile};
}

// The CTA's copies of a tile's window as the tensor holds it (zeros outside the image and past the
// filter's columns) into `stage`: a warp a window row in turn, a lane a (column, chunk) of it.
template <int R, int CB, int WARPS>
__device__ __forceinline__ void copy_window(const __half* __restrict__ x, __half* stage, Tile at, int c0, int H,
                                            int W, int C) {
  using S = Shape<R, CB>;
  const int pad = R / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int row = warp; row < S::kRows; row += WARPS) {
    const int h = at.p0 - pad + row;
#pragma unroll
    for (int pair = lane; pair < kColumns * S::kChunks; pair += 32) {
      const int col = pair / S::kChunks, chunk = pair % S::kChunks, ww = at.q0 - pad + col;
      const bool in = h >= 0 && h < H && ww >= 0 && ww < W && col < kTile + R - 1;
      const __half* from = in ? x + ((size_t(at.n) * H + h) * W + ww) * C + c0 + chunk * 8 : x;
      kernelgen::depthwise::copy16(stage + (row * kColumns + col) * S::kPixel + chunk * 8, from, in);
    }
  }
  kernelgen::depthwise::commit();
}

// `stage` transposed channel-major into `window`: a window row's 8 columns by its CB channels an
// ldmatrix.trans.
template <int R, int CB, int WARPS>
__device__ __forceinline__ void transpose_window(const __half* stage, __half* window) {
  using S = Shape<R, CB>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int row = warp; row < S::kRows; row += WARPS) {
#pragma unroll
    for (int column = 0; column < kColumns; column += 8) {
      uint32_t v[S::kChunks];
      ldmatrix_trans(stage + staged_row<R, CB>({row, column, lane / 8 % S::kChunks}, lane % 8), v);
#pragma unroll
      for (int chunk = 0; chunk < S::kChunks; ++chunk)
        *reinterpret_cast<uint32_t*>(window + window_pair<R, CB>({row, column, chunk}, g, t)) = v[chunk];
    }
  }
}

// The warp's channels of the tile from `window` into `tile_out` (channel-major, fp16).
template <int R, int CB, int WARPS>
__device__ __forceinline__ void compute_tile(const __half* window, __half* tile_out,
                                             const uint32_t (&b)[CB / WARPS][R][2]) {
  using S = Shape<R, CB>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int cc = 0; cc < CB / WARPS; ++cc) {
    const int channel = warp * (CB / WARPS) + cc;
    const __half* base = window + channel * S::kWindow;
    float acc[2][4] = {};
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t a[4];
        kernelgen::grouped_mma::ldmatrix_x4(a, base + a_row_offset(lane, r, h));
        kernelgen::grouped_mma::mma16816<__half>(acc[h], a, b[cc][r]);
      }
    }
    __half* out = tile_out + channel * S::kOutput;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        *reinterpret_cast<__half2*>(out + sum_offset(g, t, h, e)) = __floats2half2_rn(acc[h][e], acc[h][e + 1]);
    }
  }
}

// `tile_out` back to NHWC: 8 pixels by the CB channels an ldmatrix.trans, 4 bytes a lane a chunk.
template <int R, int CB, int WARPS>
__device__ __forceinline__ void store_tile(const __half* tile_out, __half* __restrict__ y, Tile at, int c0, int H,
                                           int W, int C) {
  using S = Shape<R, CB>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int first = warp * 8; first < kTile * kTile; first += WARPS * 8) {
    uint32_t v[S::kChunks];
    ldmatrix_trans(tile_out + output_row<R, CB>({first, lane / 8 % S::kChunks}, lane % 8), v);
    const int row = first / kTile, col = first % kTile + g;
    if (at.p0 + row < H && at.q0 + col < W) {
      __half* to = y + ((size_t(at.n) * H + at.p0 + row) * W + at.q0 + col) * C + c0 + 2 * t;
#pragma unroll
      for (int chunk = 0; chunk < S::kChunks; ++chunk) *reinterpret_cast<uint32_t*>(to + chunk * 8) = v[chunk];
    }
  }
}

// Shared memory of a CTA: the staged window (two with Pipelined: the next tile's copied while this
// one is computed), the channel-major window and the output tile (over the staged window where
// not Pipelined).
template <int R, int CB, bool Pipelined>
constexpr int shared_bytes() {
  using S = Shape<R, CB>;
  return Pipelined ? (2 * S::kStage + CB * S::kWindow + CB * S::kOutput) * 2 : S::kBytes;
}

template <int R, int CB, int WARPS, bool Pipelined>
__global__ void __launch_bounds__(WARPS * 32)
    kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y, int n_images, int H,
           int W, int C) {
  using S = Shape<R, CB>;
  constexpr int kPerWarp = CB / WARPS;
  static_assert(CB % WARPS == 0, "the same count of channels a warp");
  extern __shared__ __align__(16) unsigned char smem[];
  __half* stage = reinterpret_cast<__half*>(smem);
  __half* window = stage + (Pipelined ? 2 : 1) * S::kStage;
  __half* tile_out = Pipelined ? window + CB * S::kWindow : stage;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int c0 = blockIdx.x * CB;
  const int tiles_p = (H + kTile - 1) / kTile, tiles_q = (W + kTile - 1) / kTile;
  const int tiles = n_images * tiles_p * tiles_q;

  uint32_t b[kPerWarp][R][2];  // the warp's channels' filter rows as B fragments
#pragma unroll
  for (int cc = 0; cc < kPerWarp; ++cc) {
    const __half* taps = w + size_t(c0 + warp * kPerWarp + cc) * R * R;
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int reg = 0; reg < 2; ++reg) {
        __half e[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int s = b_tap(g, t, reg, i);
          e[i] = s >= 0 && s < R ? taps[r * R + s] : __float2half(0.0f);
        }
        b[cc][r][reg] = pack(e[0], e[1]);
      }
    }
  }

  if (Pipelined && blockIdx.y < tiles) copy_window<R, CB, WARPS>(x, stage, tile_at(blockIdx.y, tiles_p, tiles_q), c0, H, W, C);
  int buffer = 0;
  for (int tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const Tile at = tile_at(tile, tiles_p, tiles_q);
    __half* staged = stage + buffer * S::kStage;
    if (!Pipelined) {
      __syncthreads();  // the last tile's outputs stored: they share the staged window's memory
      copy_window<R, CB, WARPS>(x, staged, at, c0, H, W, C);
    }
    kernelgen::depthwise::wait_all_but<0>();
    __syncthreads();  // the window copied, every warp past the last tile's stores
    transpose_window<R, CB, WARPS>(staged, window);
    __syncthreads();
    if (Pipelined && tile + gridDim.y < tiles) {  // the next tile's copies, into the other buffer
      buffer ^= 1;
      copy_window<R, CB, WARPS>(x, stage + buffer * S::kStage, tile_at(tile + gridDim.y, tiles_p, tiles_q), c0, H,
                                W, C);
    }
    compute_tile<R, CB, WARPS>(window, tile_out, b);
    __syncthreads();
    store_tile<R, CB, WARPS>(tile_out, y, at, c0, H, W, C);
  }
}

// The CPU model of one configuration: the window staged and transposed as the kernel does,
// ldmatrix.x4 (plain and .trans) and mma.sync m16n8k16 as the PTX ISA places their registers, the
// lanes' addresses and B registers through the index functions, the outputs transposed back the
// same way; small integers, so every sum is exact in float.
// An ldmatrix.x4 (transposed or not) from `memory`, lanes 8j .. 8j + 7 addressing matrix j's rows.
inline void ldmatrix_model(const std::vector<float>& memory, const int (&rows)[32], bool transposed,
                           float (&v)[32][4][2]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 4; ++j)
      for (int e = 0; e < 2; ++e) {
        const int g = lane / 4, t = lane % 4;
        // plain: row g, columns 2t + e; transposed: row 2t + e, column g
        v[lane][j][e] = transposed ? memory[rows[8 * j + 2 * t + e] + g] : memory[rows[8 * j + g] + 2 * t + e];
      }
}

template <int R, int CB>
float model(int N, int H, int W, int C) {
  using S = Shape<R, CB>;
  const int pad = R / 2;
  auto value = [](unsigned seed, size_t i) { return float(int((i * 2654435761u + seed) % 7u) - 3); };
  std::vector<float> x(size_t(N) * H * W * C), w(size_t(C) * R * R), y(size_t(N) * H * W * C, -99.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = value(1, i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = value(2, i);
  std::vector<float> stage(S::kStage), window(CB * S::kWindow), out(CB * S::kOutput);
  for (int n = 0; n < N; ++n)
    for (int p0 = 0; p0 < H; p0 += kTile)
      for (int q0 = 0; q0 < W; q0 += kTile)
        for (int c0 = 0; c0 < C; c0 += CB) {
          for (int pixel = 0; pixel < S::kRows * kColumns; ++pixel)
            for (int c = 0; c < CB; ++c) {
              const int row = pixel / kColumns, col = pixel % kColumns, h = p0 - pad + row, ww = q0 - pad + col;
              stage[pixel * S::kPixel + c] = h >= 0 && h < H && ww >= 0 && ww < W && col < kTile + R - 1
                                                 ? x[((size_t(n) * H + h) * W + ww) * C + c0 + c] : 0.0f;
            }
          for (int row = 0; row < S::kRows; ++row)
            for (int column = 0; column < kColumns; column += 8) {
              int rows[32];
              float v[32][4][2];
              for (int lane = 0; lane < 32; ++lane)
                rows[lane] = staged_row<R, CB>({row, column, lane / 8 % S::kChunks}, lane % 8);
              ldmatrix_model(stage, rows, true, v);
              for (int lane = 0; lane < 32; ++lane)
                for (int chunk = 0; chunk < S::kChunks; ++chunk)
                  for (int e = 0; e < 2; ++e)
                    window[window_pair<R, CB>({row, column, chunk}, lane / 4, lane % 4) + e] = v[lane][chunk][e];
            }
          for (int channel = 0; channel < CB; ++channel) {
            float acc[2][32][4] = {};
            std::vector<float> plane(window.begin() + channel * S::kWindow, window.begin() + (channel + 1) * S::kWindow);
            for (int r = 0; r < R; ++r)
              for (int h = 0; h < 2; ++h) {
                int rows[32];
                float v[32][4][2];
                for (int lane = 0; lane < 32; ++lane) rows[lane] = a_row_offset(lane, r, h);
                ldmatrix_model(plane, rows, false, v);
                // mma.sync m16n8k16: A from the lanes' registers (a[0] rows g, columns 2t + e; a[1]
                // rows g + 8; a[2] and a[3] the same rows, columns 8 + 2t + e), B from each lane's
                // b_tap registers (rows 2t + e + 8 reg, column g)
                float A[16][16], B[16][8];
                for (int lane = 0; lane < 32; ++lane) {
                  const int g = lane / 4, t = lane % 4;
                  for (int reg = 0; reg < 4; ++reg)
                    for (int e = 0; e < 2; ++e) A[g + 8 * (reg % 2)][2 * t + e + 8 * (reg / 2)] = v[lane][reg][e];
                  for (int reg = 0; reg < 2; ++reg)
                    for (int e = 0; e < 2; ++e) {
                      const int tap = b_tap(g, t, reg, e);
                      B[2 * t + e + 8 * reg][g] = tap >= 0 && tap < R ? w[(size_t(c0 + channel) * R + r) * R + tap] : 0.0f;
                    }
                }
                for (int lane = 0; lane < 32; ++lane)
                  for (int e = 0; e < 4; ++e) {
                    float sum = 0;
                    for (int k = 0; k < 16; ++k) sum += A[lane / 4 + 8 * (e / 2)][k] * B[k][2 * (lane % 4) + e % 2];
                    acc[h][lane][e] += sum;
                  }
              }
            for (int lane = 0; lane < 32; ++lane)
              for (int h = 0; h < 2; ++h)
                for (int e = 0; e < 4; ++e)
                  out[channel * S::kOutput + sum_offset(lane / 4, lane % 4, h, e)] = acc[h][lane][e];
          }
          for (int first = 0; first < kTile * kTile; first += 8) {
            int rows[32];
            float v[32][4][2];
            for (int lane = 0; lane < 32; ++lane) rows[lane] = output_row<R, CB>({first, lane / 8 % S::kChunks}, lane % 8);
            ldmatrix_model(out, rows, true, v);
            for (int lane = 0; lane < 32; ++lane) {
              const int row = first / kTile, col = first % kTile + lane / 4;
              if (p0 + row < H && q0 + col < W)
                for (int chunk = 0; chunk < S::kChunks; ++chunk)
                  for (int e = 0; e < 2; ++e)
                    y[((size_t(n) * H + p0 + row) * W + q0 + col) * C + c0 + chunk * 8 + 2 * (lane % 4) + e] =
                        v[lane][chunk][e];
            }
          }
        }
  float worst = 0;
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < H; ++p)
      for (int q = 0; q < W; ++q)
        for (int c = 0; c < C; ++c) {
          float sum = 0;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) {
              const int h = p - pad + r, ww = q - pad + s;
              if (h >= 0 && h < H && ww >= 0 && ww < W) sum += x[((size_t(n) * H + h) * W + ww) * C + c] * w[(size_t(c) * R + r) * R + s];
            }
          worst = std::fmax(worst, std::fabs(sum - y[((size_t(n) * H + p) * W + q) * C + c]));
        }
  return worst;
}

template <int R, int CB, int WARPS, bool Pipelined>
void measure(const bench::Layer& L, const bench::Buffers& b, int per_cta) {
  const int tiles = L.n * ((L.h + kTile - 1) / kTile) * ((L.w + kTile - 1) / kTile);
  const dim3 grid(L.c / CB, (tiles + per_cta - 1) / per_cta);
  constexpr int bytes = shared_bytes<R, CB, Pipelined>();
  bench::check(cudaFuncSetAttribute(kernel<R, CB, WARPS, Pipelined>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    bytes), "cudaFuncSetAttribute");
  char label[80];
  std::snprintf(label, sizeof label, "toeplitz R%d CB%d warps%d tiles/CTA %d%s", R, CB, WARPS, per_cta,
                Pipelined ? " pipelined" : "");
  bench::run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    kernel<R, CB, WARPS, Pipelined><<<grid, WARPS * 32, bytes, stream>>>(x, w, y, L.n, L.h, L.w, L.c);
  });
}

// Every configuration on a layer of R x R filters.
template <int R>
void measure_all(const bench::Layer& L, const bench::Buffers& b) {
  for (int per_cta : {1, 2, 4}) {
    measure<R, 16, 4, false>(L, b, per_cta);
    measure<R, 16, 8, false>(L, b, per_cta);
    measure<R, 8, 4, false>(L, b, per_cta);
    measure<R, 8, 2, false>(L, b, per_cta);
  }
  for (int per_cta : {2, 4, 8}) {  // pipelined: the next tile's window copied while one is computed
    measure<R, 16, 4, true>(L, b, per_cta);
    measure<R, 8, 4, true>(L, b, per_cta);
    measure<R, 8, 2, true>(L, b, per_cta);
  }
}

}  // namespace toeplitz

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--model") == 0) {
    const int layers[][4] = {{2, 15, 13, 3}, {1, 7, 7, 2}, {1, 17, 33, 1}, {1, 1, 20, 2}, {1, 16, 16, 1}};
    bool ok = true;
    for (const auto& l : layers) {
      const float worst = std::fmax(std::fmax(toeplitz::model<7, 16>(l[0], l[1], l[2], l[3] * 16),
                                              toeplitz::model<7, 8>(l[0], l[1], l[2], l[3] * 8)),
                                    std::fmax(toeplitz::model<5, 16>(l[0], l[1], l[2], l[3] * 16),
                                              toeplitz::model<5, 8>(l[0], l[1], l[2], l[3] * 8)));
      std::printf("model 7x7 and 5x5 n=%d h=%d w=%d c=%d and %d: largest difference %g  %s\n", l[0], l[1], l[2], l[3] * 16,
                  l[3] * 8, worst,
                  worst == 0 ? "ok" : "WRONG");
      ok = ok && worst == 0;
    }
    return ok ? 0 : 1;
  }
  // (n h w c r): the command line's 7x7, else ConvNeXt-T's four at batch 32 and its 14x14 at batch 1,
  // and EfficientNet-B0's stride-1 5x5 layers at batch 32
  std::vector<std::vector<int>> groups;
  if (argc > 1) {
    if (!bench::read_groups(argc, argv, 4, "[n h w c ...]", groups)) return 2;
    for (auto& v : groups) v.push_back(7);
  } else {
    groups = {{32, 56, 56, 96, 7}, {32, 28, 28, 192, 7}, {32, 14, 14, 384, 7}, {32, 7, 7, 768, 7}, {1, 14, 14, 384, 7},
              {32, 28, 28, 240, 5}, {32, 14, 14, 480, 5}, {32, 14, 14, 672, 5}, {32, 7, 7, 1152, 5}};
  }
  for (const auto& v : groups) {
    if (v[3] % 16) {
      std::fprintf(stderr, "%s: c=%d is not a multiple of 16 (the channel blocks)\n", argv[0], v[3]);
      return 2;
    }
  }
  for (const auto& v : groups) {
    const int r = v[4];
    const bench::Layer L{v[0], v[1], v[2], v[3], v[3], r, r, r / 2, 1, v[3]};
    bench::Buffers b = bench::allocate(L, size_t(L.c) * r * r);
    if (r == 7)
      toeplitz::measure_all<7>(L, b);
    else
      toeplitz::measure_all<5>(L, b);
    bench::release(b);
  }
  return 0;
}
