// Conv2d fprop kernels for layers with few input channels (C = 1 to 4: the RGB or RGBA first
// layer of a network), any filter size, stride, padding and dilation, K a multiple of 8 output
// channels; fp16 NHWC activations as they are (no padded copy), KRSC filters, NPQK fp16 output,
// fp32 accumulation. Plain CUDA with SM80's tensor-core instructions (ldmatrix, mma.sync
// m16n8k16), which SM90 runs too.
//
// Implicit GEMM: M = N*P*Q output pixels, N = K output channels, reduction over (r, s, c). For one
// pixel and filter row r the S*C inputs are contiguous in memory (dilation 1), so the reduction
// is laid out by filter row: row r occupies `row` = S*C rounded up to 8 columns, and the whole
// reduction R*row rounded up to 16 (7x7x3: 7 * 24 -> 176; 3x3x3: 3 * 16 -> 48). Each filter
// row's run of S*C halves is copied with 16-byte loads of the chunks that hold it and funnel
// shifts, whatever its alignment; columns past S*C hold zeros.
//
// A CTA keeps a BN-channel slice of the filter, [BN x reduction], in shared memory for its whole
// (persistent) life and walks pixel tiles: per tile its threads build the im2col tile
// [BM x reduction] in shared memory from the NHWC input (zero fill for padding), the warps
// (WM x WN of them) multiply it with the filter slice (ldmatrix + mma.sync), and the fp32
// accumulators go through shared memory (fp16) to 16-byte coalesced stores. Several CTAs per SM
// overlap one's loads with another's multiply-adds and a third's stores.
//
// Use: `Kernel::unsupported(n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
// dilation_w)` (nullptr when the kernel can run the convolution), then `Kernel::initialize(args,
// x, w, y, <the same 13 integers>)` once per set of operands (nullptr on success, else what
// failed; x and y must be 16-byte aligned), then `Kernel::run(args, multiprocessor_count, stream)`.
// The kernel reads whole 16-byte chunks around the pixels it needs, never past the 16-byte chunk
// that holds a tensor's last element.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace kernelgen {
namespace few_channels {

constexpr int kMaxChannels = 4;
constexpr int kPiece = 8;  // halves per 16-byte chunk of shared memory

__host__ __device__ constexpr int round_up(int n, int to) { return (n + to - 1) / to * to; }
__host__ __device__ constexpr int max_of(int a, int b) { return a > b ? a : b; }

// The columns filter row r takes in the reduction, and the whole reduction.
__host__ __device__ constexpr int row_columns(int s, int c) { return round_up(s * c, kPiece); }
__host__ __device__ constexpr int reduction_columns(int r, int s, int c) { return round_up(r * row_columns(s, c), 16); }

// Shared memory of a CTA: the filter slice and the im2col tile, each row padded by one 16-byte
// chunk (ldmatrix reads 8 rows without bank conflicts), the tile doubling as the epilogue's
// staging buffer [BM x (BN + 8)], and one int4 per pixel of the tile.
__host__ __device__ constexpr int shared_bytes(int bm, int bn, int reduction) {
  return 2 * (bn * (reduction + kPiece) + bm * (max_of(reduction, bn) + kPiece)) + 16 * bm;
}

// The convolution as the kernel reads it.
struct Shape {
  int n, h, w, c, k, r, s;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int p, q;
  int row;             // columns per filter row: S*C rounded up to 8
  int reduction;       // R*row rounded up to 16
  long long pixels;    // N*P*Q
  int tiles;           // pixel tiles of BM
  int channel_blocks;  // filter slices of BN output channels
};

__device__ __forceinline__ uint4 load_chunk(const uint4* p) { return __ldg(p); }

// Copies the run of `len` halves starting at element e0 of `src` to `dst` (16-byte aligned) as
// `pieces` 16-byte chunks, the halves past `len` zero: the 16-byte chunks of src that hold the
// run are loaded once each and shifted into place.
__device__ __forceinline__ void copy_run(const __half* src, long long e0, int len, __half* dst, int pieces) {
  const uint4* chunk = reinterpret_cast<const uint4*>(src + (e0 & ~7LL));
  const int o = int(e0 & 7);
  const int chunks = (o + len + 7) >> 3;
  const int shift = (o & 1) * 16, word = o >> 1;
  uint4 cur = load_chunk(chunk);
  for (int p = 0; p < pieces; ++p) {
    const uint4 next = p + 1 < chunks ? load_chunk(chunk + p + 1) : make_uint4(0, 0, 0, 0);
    const uint32_t v[8] = {cur.x, cur.y, cur.z, cur.w, next.x, next.y, next.z, next.w};
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = word == 0 ? v[i] : word == 1 ? v[i + 1] : word == 2 ? v[i + 2] : v[i + 3];
      const uint32_t hi = word == 0 ? v[i + 1] : word == 1 ? v[i + 2] : word == 2 ? v[i + 3] : v[i + 4];
      out[i] = __funnelshift_r(lo, hi, shift);
    }
    const int valid = len - p * kPiece;
    if (valid < kPiece) {
#pragma unroll
      for (int i = 0; i < 4; ++i) out[i] = 2 * i >= valid ? 0u : 2 * i + 1 >= valid ? out[i] & 0xFFFFu : out[i];
    }
    *reinterpret_cast<uint4*>(dst + p * kPiece) = make_uint4(out[0], out[1], out[2], out[3]);
    cur = next;
  }
}

__device__ __forceinline__ void zero_run(__half* dst, int pieces) {
  for (int p = 0; p < pieces; ++p) *reinterpret_cast<uint4*>(dst + p * kPiece) = make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ uint32_t pack(__half lo, __half hi) {
  return uint32_t(__half_as_ushort(lo)) | uint32_t(__half_as_ushort(hi)) << 16;
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int BM, int BN, int WM, int WN, int Blocks>
__global__ void __launch_bounds__(WM * WN * 32, Blocks)
    fprop_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y, Shape g) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN;  // a warp's pixels and channels
  constexpr int MT = TM / 16, NT = TN / 8;   // its m16 and n8 MMA tiles
  static_assert(TM % 16 == 0 && TN % 16 == 0, "a warp's tile is whole 16 x 16 blocks");

  extern __shared__ __align__(16) char smem[];
  const int fstride = g.reduction + kPiece;  // halves per filter row and per im2col row
  constexpr int sstride = BN + kPiece;       // halves per staging row
  __half* filter = reinterpret_cast<__half*>(smem);
  __half* tile = filter + BN * fstride;
  int4* pixel = reinterpret_cast<int4*>(tile + BM * max_of(fstride, sstride));

  const int channel_block = blockIdx.x % g.channel_blocks;
  const int first = blockIdx.x / g.channel_blocks, stride = gridDim.x / g.channel_blocks;
  const int k0 = channel_block * BN;
  const int pieces = g.row / kPiece, run = g.s * g.c;
  const bool tail = g.r * g.row < g.reduction;  // one zero chunk closes each row

  // The filter slice: output channel k0 + i, filter row r -> shared row i, columns r * row + ...
  for (int t = threadIdx.x; t < BN * g.r; t += kThreads) {
    const int i = t / g.r, r = t - i * g.r;
    __half* dst = filter + i * fstride + r * g.row;
    if (k0 + i < g.k) {
      copy_run(w, (long long)(k0 + i) * g.r * run + (long long)r * run, run, dst, pieces);
    } else {
      zero_run(dst, pieces);
    }
    if (tail && r == 0) zero_run(filter + i * fstride + g.r * g.row, 1);
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % WM, wn = warp / WM;
  // ldmatrix addresses of this lane at reduction column 0: A (im2col rows), B (filter rows)
  uint32_t a_address[MT], b_address[NT / 2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
    a_address[i] = shared_address(tile + (wm * TM + i * 16 + lane % 16) * fstride + lane / 16 * 8);
#pragma unroll
  for (int j = 0; j < NT / 2; ++j)
    b_address[j] = shared_address(filter + (wn * TN + j * 16 + lane / 16 * 8 + lane % 8) * fstride + lane / 8 % 2 * 8);

  const int pq = g.p * g.q;
  for (int t = first; t < g.tiles; t += stride) {
    const long long pixel0 = (long long)t * BM;
    // Each pixel's image row offset, first input row and column (and whether its S inputs of
    // every filter row lie inside the image, contiguous).
    for (int m = threadIdx.x; m < BM; m += kThreads) {
      const long long index = pixel0 + m;
      int4 v = make_int4(0, INT_MIN / 2, 0, 0);  // past the last pixel: every row is padding
      if (index < g.pixels) {
        const int image = int(index / pq), rest = int(index - (long long)image * pq);
        const int p = rest / g.q, q = rest - p * g.q;
        const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
        v = make_int4(image * g.h, h0, w0, g.dilation_w == 1 && w0 >= 0 && w0 + g.s <= g.w);
      }
      pixel[m] = v;
    }
    __syncthreads();

    // im2col: one (pixel, filter row) run per task, consecutive threads on consecutive pixels
    for (int task = threadIdx.x; task < BM * g.r; task += kThreads) {
      const int r = task / BM, m = task - r * BM;
      const int4 v = pixel[m];
      const int h = v.y + r * g.dilation_h;
      __half* dst = tile + m * fstride + r * g.row;
      if (h < 0 || h >= g.h) {
        zero_run(dst, pieces);
      } else if (v.w) {
        copy_run(x, ((long long)(v.x + h) * g.w + v.z) * g.c, run, dst, pieces);
      } else {  // at the image's left or right edge, or dilated: element by element
        const long long row0 = (long long)(v.x + h) * g.w;
        for (int piece = 0; piece < pieces; ++piece) {
          uint32_t out[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            __half e[2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int col = piece * kPiece + 2 * i + j, s = col / g.c, c = col - s * g.c;
              const int wi = v.z + s * g.dilation_w;
              e[j] = col < run && wi >= 0 && wi < g.w ? x[(row0 + wi) * g.c + c] : __ushort_as_half(0);
            }
            out[i] = pack(e[0], e[1]);
          }
          *reinterpret_cast<uint4*>(dst + piece * kPiece) = make_uint4(out[0], out[1], out[2], out[3]);
        }
      }
    }
    if (tail) {
      for (int m = threadIdx.x; m < BM; m += kThreads) zero_run(tile + m * fstride + g.r * g.row, 1);
    }
    __syncthreads();

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll 2
    for (int kk = 0; kk < g.reduction; kk += 16) {
      uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4(a[i], a_address[i] + kk * 2);
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) ldmatrix_x4(b[j], b_address[j] + kk * 2);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma(acc[i][j], a[i], b[j / 2][j % 2 * 2], b[j / 2][j % 2 * 2 + 1]);
    }
    __syncthreads();  // every warp is done with the im2col tile: it becomes the staging buffer

    // accumulator e of tile (i, j): pixel 16 i + lane / 4 + 8 (e / 2), channel 8 j + 2 (lane % 4) + e % 2
    __half* staging = tile;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int row = wm * TM + i * 16 + lane / 4, col = wn * TN + j * 8 + lane % 4 * 2;
        *reinterpret_cast<__half2*>(staging + row * sstride + col) = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<__half2*>(staging + (row + 8) * sstride + col) =
            __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
      }
    }
    __syncthreads();

    constexpr int kChunks = BN / kPiece;  // 16-byte chunks per pixel
    for (int i = threadIdx.x; i < BM * kChunks; i += kThreads) {
      const int m = i / kChunks, chunk = i - m * kChunks;
      const long long index = pixel0 + m;
      const int channel = k0 + chunk * kPiece;
      if (index < g.pixels && channel < g.k)
        *reinterpret_cast<uint4*>(y + index * g.k + channel) =
            *reinterpret_cast<const uint4*>(staging + m * sstride + chunk * kPiece);
    }
    // the next tile's pixel table is written before a barrier that every thread passes only after
    // these reads of the staging buffer, which the next im2col tile overwrites
  }
}

}  // namespace few_channels

// A few-channels conv2d fprop kernel: BM x BN tiles (pixels x output channels), WM x WN warps,
// at most `MaxReduction` reduction columns (the filter slice and the im2col tile stay in shared
// memory whole), built for `Blocks` CTAs per SM (__launch_bounds__).
template <int BM, int BN, int WM, int WN, int MaxReduction, int Blocks>
struct FewChannelsFprop {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kSharedBytes = few_channels::shared_bytes(BM, BN, MaxReduction);  // at most

  struct Arguments {
    const __half* x;
    const __half* w;
    __half* y;
    few_channels::Shape shape;
    int shared_bytes;   // for this convolution's reduction
    int blocks_per_sm;  // CTAs an SM holds at that shared memory
  };

  // Nullptr when the kernel computes this convolution (NHWC x, KRSC w, NPQK y), else why not.
  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w,
                                 int stride_h, int stride_w, int dilation_h, int dilation_w) {
    if (c < 1 || c > few_channels::kMaxChannels) return "needs 1 to 4 input channels (a first layer)";
    if (k < 8 || k % 8) return "needs a multiple of 8 output channels";
    if (n < 1 || h < 1 || w < 1 || r < 1 || s < 1 || pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1 ||
        dilation_h < 1 || dilation_w < 1)
      return "needs positive extents, strides and dilations and no negative padding";
    if (few_channels::reduction_columns(r, s, c) > MaxReduction)
      return "R * S * C is too large: the filter slice and im2col tile would not fit this kernel's shared memory";
    const long long p = (h + 2LL * pad_h - (long long)dilation_h * (r - 1) - 1) / stride_h + 1;
    const long long q = (w + 2LL * pad_w - (long long)dilation_w * (s - 1) - 1) / stride_w + 1;
    if (p < 1 || q < 1) return "the convolution has no output";
    if ((long long)n * h * w * c >= INT_MAX || (long long)n * h >= INT_MAX / 2 ||
        n * p * q / BM >= INT_MAX || n * p * q * k >= (1LL << 62))
      return "the tensors are too large for this kernel's index arithmetic";
    return nullptr;
  }

  // Binds operands: x (n x h x w x c), w (k x r x s x c), y (n x p x q x k). Nullptr on success.
  static const char* initialize(Arguments& args, const void* x, const void* w, void* y, int n, int h, int width,
                                int c, int k, int r, int s, int pad_h, int pad_w, int stride_h, int stride_w,
                                int dilation_h, int dilation_w) {
    using namespace few_channels;
    if (const char* why = unsupported(n, h, width, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
                                      dilation_w))
      return why;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(w) % 16 ||
        reinterpret_cast<uintptr_t>(y) % 16)
      return "needs 16-byte aligned activations, filters and output";
    Shape g{};
    g.n = n, g.h = h, g.w = width, g.c = c, g.k = k, g.r = r, g.s = s;
    g.pad_h = pad_h, g.pad_w = pad_w, g.stride_h = stride_h, g.stride_w = stride_w;
    g.dilation_h = dilation_h, g.dilation_w = dilation_w;
    g.p = (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1;
    g.q = (width + 2 * pad_w - dilation_w * (s - 1) - 1) / stride_w + 1;
    g.row = row_columns(s, c);
    g.reduction = reduction_columns(r, s, c);
    g.pixels = (long long)n * g.p * g.q;
    g.tiles = int((g.pixels + BM - 1) / BM);
    g.channel_blocks = (k + BN - 1) / BN;
    args = Arguments{static_cast<const __half*>(x), static_cast<const __half*>(w), static_cast<__half*>(y), g,
                     shared_bytes(BM, BN, g.reduction), 1};
    auto kernel = fprop_kernel<BM, BN, WM, WN, Blocks>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) != cudaSuccess)
      return "cannot reserve the kernel's shared memory";
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&args.blocks_per_sm, kernel, kThreads, args.shared_bytes) !=
            cudaSuccess ||
        args.blocks_per_sm < 1)
      return "the kernel does not fit on a multiprocessor";
    return nullptr;
  }

  // Persistent CTAs: as many as the SMs hold (`sms`: the device's multiprocessor count), a whole
  // number per filter slice, at most one per tile.
  static cudaError_t run(const Arguments& args, int sms, cudaStream_t stream) {
    const few_channels::Shape& g = args.shape;
    long long per_block = (long long)sms * args.blocks_per_sm / g.channel_blocks;
    if (per_block < 1) per_block = 1;
    if (per_block > g.tiles) per_block = g.tiles;
    few_channels::fprop_kernel<BM, BN, WM, WN, Blocks>
        <<<unsigned(per_block * g.channel_blocks), kThreads, args.shared_bytes, stream>>>(args.x, args.w, args.y, g);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
