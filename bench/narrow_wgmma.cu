// Benchmark: the narrow 3x3 convolution (stride 1, padding 1; C of 32 or 64 channels in, K of 32 or
// 64 out) on SM90's warpgroup MMA from shared memory, where profiler/narrow_conv.h's mma.sync
// kernels read every k-step's fragments through ldmatrix and lose to CUTLASS's implicit GEMMs on
// the layers of 64 output channels (docs/results.md, "The narrow 3x3 family").
//
// A CTA of one warpgroup computes TR output rows by 64 output columns of one image, all K channels:
// an M tile of wgmma.m64nKk16 is 64 consecutive outputs of one row. Its input window, TR + 2 rows of
// 66 pixels, lies in shared memory chunk-major, [C / 8 chunks][66 (TR + 2) pixels][8 channels], so
// that for filter tap (r, s) the 64 rows of A are the window pixels from (row + r) * 66 + s on, 16
// bytes apart: a K-major operand of no swizzle whose 8-row core matrices are 128 bytes apart (the
// descriptor's stride offset) and whose two 8-channel halves of a k-step are a chunk apart (its
// leading offset). The filter lies [9 C / 8 chunks (tap, chunk)][K][8], B of each k-step likewise.
// A row's 9 x C / 16 wgmmas are issued back to back, the rows' chains one after the other, then
// waited for together. A CTA a block, or (persistent) as many CTAs as stay on the GPU, each copying
// the filter once and the next block's window into a second buffer while it computes one.
//
// First GPU run (H100, 2026-12-06; docs/results.md, "The narrow 3x3 family"), a CTA a block: every
// configuration verified (relative L2 error 2.1e-4), and slow, its CTAs each copying the filter and
// waiting for their loads: 32x147x147 32 -> 64 in 0.2074 ms at 4 rows (0.3084 at 2, 0.5247 at 1)
// where the mma.sync kernel takes 0.1001 and CUTLASS's implicit GEMM 0.0916. The persistent
// variant, its first run (the same day, docs/results.md, "Cold builds: ..."): verified, 0.1371 ms
// at 4 rows on that layer (0.0801 on 32x112x112 32 -> 64), still behind both.
//
// Each layer is checked against the fp32 reference and timed as bench/narrow_conv.cu's (bench/
// conv_bench.h). --descriptors prints, on the CPU, the shared-memory byte each lane-free element of
// a k-step's A and B is read from, as the descriptors address them (the canonical no-swizzle
// K-major layout: ((8, m), (8, 2)) : ((16 B, SBO), (2 B, LBO))), against the layout meant.
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a bench/narrow_wgmma.cu -o narrow_wgmma
//   ./narrow_wgmma [n h w c k ...]         (default: 32x147x147 32 -> 64, 32x112x112 32 -> 64 and 32 -> 32)
//   ./narrow_wgmma --descriptors
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "conv_bench.h"

namespace {

using namespace bench;

constexpr int kColumns = 64;             // output columns an M tile computes
constexpr int kWindowQ = kColumns + 2;   // window pixels a row

template <int C, int K, int TR, int BUFFERS = 1>
struct Layout {
  static_assert(C % 16 == 0 && K % 8 == 0 && K <= 256, "k-steps of 16 channels, N a multiple of 8");
  static constexpr int kChunks = C / 8;
  static constexpr int kWindowPixels = (TR + 2) * kWindowQ;
  static constexpr int kChunkBytes = kWindowPixels * 16;       // one 8-channel chunk of every window pixel
  static constexpr int kWindowBytes = kChunks * kChunkBytes;  // one window; BUFFERS of them, then the filter
  static constexpr int kFilterChunkBytes = K * 16;             // one (tap, chunk) of every output channel
  static constexpr int kFilterBytes = 9 * kChunks * kFilterChunkBytes;
  static constexpr int kFilterAt = BUFFERS * kWindowBytes;
  static constexpr int kSmemBytes = kFilterAt + kFilterBytes;
  static constexpr int kSteps = C / 16;                        // k-steps a tap

  // Byte offsets, from the start of shared memory, of a k-step's operands: A for output row `row`
  // (of the CTA's TR), tap `tap`, step `step`; B for tap `tap`, step `step`.
  __host__ __device__ static int a_start(int row, int tap, int step) {
    return 2 * step * kChunkBytes + ((row + tap / 3) * kWindowQ + tap % 3) * 16;
  }
  __host__ __device__ static int b_start(int tap, int step) {
    return kFilterAt + (tap * kChunks + 2 * step) * kFilterChunkBytes;
  }
  // The window's chunk `chunk` of pixel `pixel`, and the filter's chunk (tap, chunk) of channel k.
  __host__ __device__ static int window_at(int pixel, int chunk) { return chunk * kChunkBytes + pixel * 16; }
  __host__ __device__ static int filter_at(int k, int tap, int chunk) {
    return kFilterAt + (tap * kChunks + chunk) * kFilterChunkBytes + k * 16;
  }
};

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading
// byte offset (K: between the two 8-element halves), stride byte offset (between 8-row core
// matrices), all >> 4; no swizzle.
__host__ __device__ inline uint64_t descriptor(uint32_t address, uint32_t leading, uint32_t stride) {
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t((leading & 0x3FFFF) >> 4) << 16 |
         uint64_t((stride & 0x3FFFF) >> 4) << 32;
}

// What a descriptor addresses, as the CPU reads the canonical K-major no-swizzle layout: the byte
// of element (m, k) of a 64 x 16 (or N x 16) operand.
inline uint32_t element_byte(uint64_t desc, int m, int k) {
  const uint32_t start = uint32_t(desc & 0x3FFF) << 4, leading = uint32_t(desc >> 16 & 0x3FFF) << 4,
                 stride = uint32_t(desc >> 32 & 0x3FFF) << 4;
  return start + (m / 8) * stride + (m % 8) * 16 + (k / 8) * leading + (k % 8) * 2;
}

#define KG_ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                   "+f"(d[i + 6]), "+f"(d[i + 7])

template <int K>
__device__ __forceinline__ void wgmma(float (&d)[K / 2], uint64_t a, uint64_t b, int accumulate);

template <>
__device__ __forceinline__ void wgmma<64>(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : KG_ACC8(0), KG_ACC8(8), KG_ACC8(16), KG_ACC8(24)
      : "l"(a), "l"(b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma<32>(float (&d)[16], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n}\n"
      : KG_ACC8(0), KG_ACC8(8)
      : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void copy16(uint32_t shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(global));
}

// The window of block `block` (TR rows x 64 columns of one image) into buffer `buffer` (cp.async;
// zeros outside the image).
template <typename S, int C, int TR>
__device__ __forceinline__ void load_window(const Layer& L, const __half* __restrict__ x, uint8_t* smem, uint32_t base,
                                            int block, int buffer) {
  const int P = L.p(), Q = L.q(), across = (Q + kColumns - 1) / kColumns, down = (P + TR - 1) / TR;
  const int n = block / (across * down), p0 = block / across % down * TR, q0 = block % across * kColumns;
  for (int i = threadIdx.x; i < S::kWindowPixels * S::kChunks; i += 128) {
    const int pixel = i / S::kChunks, chunk = i % S::kChunks;
    const int h = p0 - L.pad + pixel / kWindowQ, col = q0 - L.pad + pixel % kWindowQ;
    const int at = buffer * S::kWindowBytes + S::window_at(pixel, chunk);
    if (h >= 0 && h < L.h && col >= 0 && col < L.w)
      copy16(base + at, x + ((size_t(n) * L.h + h) * L.w + col) * C + 8 * chunk);
    else
      *reinterpret_cast<uint4*>(smem + at) = make_uint4(0, 0, 0, 0);
  }
}

// Block `block` from the window in buffer `buffer`: the rows' wgmma chains, then their outputs.
template <typename S, int K, int TR>
__device__ __forceinline__ void compute_block(const Layer& L, __half* __restrict__ y, uint32_t base, int block,
                                              int buffer) {
  float d[TR][K / 2] = {};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
  for (int row = 0; row < TR; ++row) {
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
#pragma unroll
      for (int step = 0; step < S::kSteps; ++step) {
        const uint64_t a = descriptor(base + buffer * S::kWindowBytes + S::a_start(row, tap, step), S::kChunkBytes, 128);
        const uint64_t b = descriptor(base + S::b_start(tap, step), S::kFilterChunkBytes, 128);
        wgmma<K>(d[row], a, b, tap + step > 0);
      }
    }
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

  // D of m64nK: warp w's rows 16 w.., lane's row lane / 4 (+ 8 for the second pair), columns
  // 8 j + 2 (lane % 4) (+ 1) in register 4 j + ...
  const int P = L.p(), Q = L.q(), across = (Q + kColumns - 1) / kColumns, down = (P + TR - 1) / TR;
  const int n = block / (across * down), p0 = block / across % down * TR, q0 = block % across * kColumns;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int row = 0; row < TR; ++row) {
    const int p = p0 + row;
    if (p >= P) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int q = q0 + 16 * warp + lane / 4 + 8 * half;
      if (q >= Q) continue;
      __half* out = y + ((size_t(n) * P + p) * Q + q) * K + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < K / 8; ++j)
        *reinterpret_cast<__half2*>(out + 8 * j) = __floats2half2_rn(d[row][4 * j + 2 * half], d[row][4 * j + 2 * half + 1]);
    }
  }
}

// A CTA a block (PERSISTENT false), or CTAs that stay, the filter copied once, taking blocks
// blockIdx.x, + gridDim.x, ..., the next block's window copied while this one's is computed.
template <int C, int K, int TR, bool PERSISTENT>
__global__ void __launch_bounds__(128) narrow_wgmma(Layer L, int blocks, const __half* __restrict__ x,
                                                    const __half* __restrict__ w, __half* __restrict__ y) {
  using S = Layout<C, K, TR, PERSISTENT ? 2 : 1>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int first = blockIdx.x, stride = gridDim.x;
  for (int i = threadIdx.x; i < K * 9 * S::kChunks; i += 128) {  // filter: K x 3 x 3 x C, chunk i % (9 C / 8)
    const int k = i / (9 * S::kChunks), rest = i % (9 * S::kChunks);
    copy16(base + S::filter_at(k, rest / S::kChunks, rest % S::kChunks), w + 8 * size_t(i));
  }
  load_window<S, C, TR>(L, x, smem, base, first, 0);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  if (PERSISTENT && first + stride < blocks) load_window<S, C, TR>(L, x, smem, base, first + stride, 1);
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#pragma unroll 1
  for (int block = first, i = 0; block < blocks; block += stride, ++i) {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // this block's window (and the filter)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the generic proxy's writes, to wgmma
    __syncthreads();
    compute_block<S, K, TR>(L, y, base, block, PERSISTENT ? i % 2 : 0);
    if (!PERSISTENT) break;
    __syncthreads();  // every warp is done with the buffer the block after next fills
    if (block + 2 * stride < blocks) load_window<S, C, TR>(L, x, smem, base, block + 2 * stride, i % 2);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
}

template <int C, int K, int TR, bool PERSISTENT>
void time_one(const Layer& L, const Buffers& b) {
  using S = Layout<C, K, TR, PERSISTENT ? 2 : 1>;
  const auto kernel = narrow_wgmma<C, K, TR, PERSISTENT>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes), "cudaFuncSetAttribute");
  const int blocks = L.n * ((L.p() + TR - 1) / TR) * ((L.q() + kColumns - 1) / kColumns);
  int grid = blocks;
  if (PERSISTENT) {  // as many CTAs as stay on the GPU at once
    int device = 0, sms = 0, per_sm = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, S::kSmemBytes), "occupancy");
    grid = std::min(blocks, std::max(1, per_sm) * sms);
  }
  const std::string label = std::string(PERSISTENT ? "wgmma persistent " : "wgmma ") + std::to_string(TR) +
                            " x 64 outputs, " + std::to_string(S::kSmemBytes) + " B";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    kernel<<<grid, 128, S::kSmemBytes, stream>>>(L, blocks, x, w, y);
  });
}

template <int C, int K>
void configurations(const Layer& L, const Buffers& b) {
  time_one<C, K, 2, false>(L, b);
  time_one<C, K, 4, false>(L, b);
  time_one<C, K, 1, true>(L, b);
  time_one<C, K, 2, true>(L, b);
  time_one<C, K, 4, true>(L, b);
}

void measure(const Layer& L) {
  const bool served = L.r == 3 && L.s == 3 && L.pad == 1 && L.stride == 1 && L.groups == 1 &&
                      (L.c == 32 || L.c == 64) && (L.k == 32 || L.k == 64);
  if (!served) {
    std::printf("%d,%d,%d,%d,%d  not served: 3x3, stride 1, padding 1; C and K of 32 or 64\n", L.n, L.h, L.w, L.c, L.k);
    return;
  }
  Buffers b = allocate(L, size_t(L.k) * 9 * L.c);
  if (L.c == 32 && L.k == 64) configurations<32, 64>(L, b);
  else if (L.c == 32) configurations<32, 32>(L, b);
  else if (L.k == 64) configurations<64, 64>(L, b);
  else configurations<64, 32>(L, b);
  release(b);
}

// The descriptors of every k-step of a CTA of 2 rows, 32 -> 64 channels, read as the canonical
// layout says, against the layout the loads write: A's element (m, k) is window pixel
// (row + r) * 66 + s + m's channel 16 step + k, B's element (n, k) filter channel n's (tap, 16 step
// + k). Returns the elements that differ.
int check_descriptors() {
  using S = Layout<32, 64, 2>;
  int wrong = 0;
  for (int row = 0; row < 2; ++row)
    for (int tap = 0; tap < 9; ++tap)
      for (int step = 0; step < S::kSteps; ++step) {
        const uint64_t a = descriptor(S::a_start(row, tap, step), S::kChunkBytes, 128);
        const uint64_t b = descriptor(S::b_start(tap, step), S::kFilterChunkBytes, 128);
        for (int m = 0; m < 64; ++m)
          for (int k = 0; k < 16; ++k) {
            const int c = 16 * step + k, pixel = (row + tap / 3) * kWindowQ + tap % 3 + m;
            wrong += element_byte(a, m, k) != uint32_t(S::window_at(pixel, c / 8) + 2 * (c % 8));
          }
        for (int n = 0; n < 64; ++n)
          for (int k = 0; k < 16; ++k) {
            const int c = 16 * step + k;
            wrong += element_byte(b, n, k) != uint32_t(S::filter_at(n, tap, c / 8) + 2 * (c % 8));
          }
      }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--descriptors") {
    const int wrong = check_descriptors();
    std::printf("descriptors: %d elements addressed other than the layout meant  %s\n", wrong, wrong ? "WRONG" : "ok");
    return wrong ? 1 : 0;
  }
  std::vector<Layer> layers;
  if (argc > 1) {
    if (!read_3x3_layers(argc, argv, layers)) return 2;
  } else {
    layers = {{32, 147, 147, 32, 64, 3, 3, 1, 1, 1}, {32, 112, 112, 32, 64, 3, 3, 1, 1, 1},
              {32, 112, 112, 32, 32, 3, 3, 1, 1, 1}};
  }
  for (const Layer& layer : layers) measure(layer);
  return 0;
}
