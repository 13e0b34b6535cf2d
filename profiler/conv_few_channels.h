// Conv2d fprop kernels for layers with few input channels (C = 1 to 4: the RGB or RGBA first
// layer of a network), any filter size, stride, padding and dilation, K a multiple of 8 output
// channels; fp16 NHWC activations as they are (no padded copy), KRSC filters, NPQK fp16 output,
// fp32 accumulation. Plain CUDA with SM80's tensor-core instructions (ldmatrix, mma.sync
// m16n8k16), which SM90 runs too.
//
// Implicit GEMM: M = N*P*Q output pixels, N = K output channels, reduction over (r, s, c). For one
// pixel and filter row r the S*C inputs are contiguous in memory (dilation 1), so the reduction
// is laid out by filter row: row r occupies `row` = S*C rounded up to 8 columns, and the whole
// reduction R*row rounded up to 16 (7x7x3: 7 * 24 -> 176; 3x3x3: 3 * 16 -> 48); columns past S*C
// hold zeros.
//
// A CTA keeps a BN-channel slice of the filter, [BN x reduction], in shared memory for its whole
// (persistent) life and walks tiles of BM consecutive output pixels: per tile its threads build
// the im2col tile [BM x reduction] in shared memory from the NHWC input (each filter row's run of
// S*C halves by 16-byte loads of the chunks that hold it, shifted into place whatever its
// alignment; zero fill for padding), the warps (WM x WN of them) multiply it with the filter slice
// (ldmatrix + mma.sync), and the fp32 accumulators go through shared memory (fp16) to 16-byte
// coalesced stores. Several CTAs per SM overlap one's loads with another's multiply-adds.
//
// Use: `Kernel::unsupported(n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h,
// dilation_w)` (nullptr when the kernel can run the convolution), then `Kernel::initialize(args,
// x, w, y, <the same 13 integers>)` once per set of operands (nullptr on success, else what
// failed; x, w and y must be 16-byte aligned), then `Kernel::run(args, multiprocessor_count,
// stream)`. The kernel reads whole 16-byte chunks around the pixels it needs, never past the
// 16-byte chunk that holds a tensor's last element.
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
__host__ __device__ constexpr int min_of(int a, int b) { return a < b ? a : b; }

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

// A run to copy: halves [lo, hi) of the run of a filter row's S*C inputs that starts at element e0
// of the source go to the same offsets of dst (16-byte aligned shared memory); every other half of
// dst's 16-byte pieces is zero (padding, channels past K, columns past S*C). The 16-byte chunks of
// the source that hold a half of [lo, hi) are loaded, kGroup + 1 at once, and shifted into place;
// other chunks are never read.
struct Run {
  const uint4* chunk;  // the 16-byte chunk of the source holding element e0
  int o;               // e0's place in it
  int lo, hi;
  uint32_t dst;  // shared memory address
};

// What every run of one copy shares: its 16-byte pieces, the run's length, and which halves of
// the last piece lie inside the run.
struct Copy {
  int pieces, len;
  uint32_t tail[4];
};

__device__ __forceinline__ Copy make_copy(int pieces, int len) {
  Copy copy{pieces, len, {}};
  const int last = len - (pieces - 1) * kPiece;
#pragma unroll
  for (int i = 0; i < 4; ++i) copy.tail[i] = 2 * i >= last ? 0u : 2 * i + 1 >= last ? 0xFFFFu : ~0u;
  return copy;
}

__device__ __forceinline__ Run make_run(const __half* src, long long e0, int lo, int hi, uint32_t dst) {
  return Run{reinterpret_cast<const uint4*>(src + (e0 & ~7LL)), int(e0 & 7), lo, hi, dst};
}

__device__ __forceinline__ void store_shared(uint32_t address, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}

constexpr int kGroup = 3;  // pieces stored per group of kGroup + 1 chunks

__device__ __forceinline__ void load_group(const Run& run, int group, uint4 (&c)[kGroup + 1]) {
#pragma unroll
  for (int i = 0; i <= kGroup; ++i) {
    const int k = group * kGroup + i, first = k * kPiece - run.o;  // the run's half at chunk k's start
    c[i] = first < run.hi && first + kPiece > run.lo ? __ldg(run.chunk + k) : make_uint4(0, 0, 0, 0);
  }
}

__device__ __forceinline__ void store_group(const Run& run, int group, const Copy& copy,
                                            const uint4 (&c)[kGroup + 1]) {
  const int shift = (run.o & 1) * 16;
  const bool two = run.o & 4, one = run.o & 2;  // the run starts (o >> 1) words into the chunk
  const bool whole = run.lo == 0 && run.hi == copy.len;
#pragma unroll
  for (int j = 0; j < kGroup; ++j) {
    const int p = group * kGroup + j;
    if (p >= copy.pieces) break;
    const uint32_t v[8] = {c[j].x, c[j].y, c[j].z, c[j].w, c[j + 1].x, c[j + 1].y, c[j + 1].z, c[j + 1].w};
    uint32_t u[6], t[5], keep[4];
#pragma unroll
    for (int i = 0; i < 6; ++i) u[i] = two ? v[i + 2] : v[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) t[i] = one ? u[i + 1] : u[i];  // t[i] = v[i + (o >> 1)]
    if (whole) {  // only the last piece has halves past the run
#pragma unroll
      for (int i = 0; i < 4; ++i) keep[i] = p + 1 == copy.pieces ? copy.tail[i] : ~0u;
    } else {  // at the image's edge (or a filter slice past K): halves outside [lo, hi) are zero
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = p * kPiece + 2 * i;
        keep[i] = (h >= run.lo && h < run.hi ? 0xFFFFu : 0u) | (h + 1 >= run.lo && h + 1 < run.hi ? 0xFFFF0000u : 0u);
      }
    }
    // run halves 8p + 2i and 8p + 2i + 1 are halves 2i + o and 2i + o + 1 of v
    store_shared(run.dst + p * 16, __funnelshift_r(t[0], t[1], shift) & keep[0],
                 __funnelshift_r(t[1], t[2], shift) & keep[1], __funnelshift_r(t[2], t[3], shift) & keep[2],
                 __funnelshift_r(t[3], t[4], shift) & keep[3]);
  }
}

// Copies runs 0 .. count - 1 (`make(i)` gives run i), two per thread at a time so that the loads
// of both are in flight together.
template <class MakeRun>
__device__ __forceinline__ void copy_runs(int count, const Copy& copy, const MakeRun& make) {
  const int groups = (copy.pieces + kGroup - 1) / kGroup;
  for (int t = threadIdx.x; t < count; t += 2 * blockDim.x) {
    const Run a = make(t);
    const Run b = t + int(blockDim.x) < count ? make(t + blockDim.x) : a;
    for (int g = 0; g < groups; ++g) {
      uint4 ca[kGroup + 1], cb[kGroup + 1];
      load_group(a, g, ca);
      load_group(b, g, cb);
      store_group(a, g, copy, ca);
      store_group(b, g, copy, cb);
    }
  }
}

__device__ __forceinline__ void zero_run(__half* dst, int pieces) {
  for (int p = 0; p < pieces; ++p) *reinterpret_cast<uint4*>(dst + p * kPiece) = make_uint4(0, 0, 0, 0);
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
  const Copy copy = make_copy(pieces, run);
  const uint32_t filter_address = shared_address(filter), tile_address = shared_address(tile);

  // The filter slice: output channel k0 + i, filter row r -> shared row i, columns r * row + ...
  copy_runs(BN * g.r, copy, [&](int t) {
    const int i = t / g.r, r = t - i * g.r;
    return make_run(w, (long long)(k0 + i) * g.r * run + (long long)r * run, 0, k0 + i < g.k ? run : 0,
                    filter_address + (i * fstride + r * g.row) * 2);
  });
  if (tail) {
    for (int i = threadIdx.x; i < BN; i += kThreads) zero_run(filter + i * fstride + g.r * g.row, 1);
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
    // Each pixel's first input element (n, h0, w0, 0), first input row h0, the halves [lo, hi) of
    // a filter row's run inside the image (dilation 1), and first input column w0.
    for (int m = threadIdx.x; m < BM; m += kThreads) {
      const long long index = pixel0 + m;
      int4 v = make_int4(0, INT_MIN / 2, 0, 0);  // past the last pixel: every row is padding
      if (index < g.pixels) {
        const unsigned image = unsigned(index) / unsigned(pq), rest = unsigned(index) - image * unsigned(pq);
        const int p = int(rest / unsigned(g.q)), q = int(rest - unsigned(p) * unsigned(g.q));
        const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
        const int lo = max_of(0, -w0) * g.c, hi = max_of(0, min_of(g.s, g.w - w0)) * g.c;
        v = make_int4((int(image) * g.h + h0) * g.w * g.c + w0 * g.c, h0, lo | hi << 16, w0);
      }
      pixel[m] = v;
    }
    __syncthreads();

    // im2col: one run per (pixel, filter row), consecutive threads on consecutive pixels
    const int row_step = g.dilation_h * g.w * g.c;  // elements between the input rows of two filter rows
    if (g.dilation_w == 1) {
      copy_runs(BM * g.r, copy, [&](int task) {
        const int r = task / BM, m = task - r * BM;
        const int4 v = pixel[m];
        const int h = v.y + r * g.dilation_h;
        const bool inside = h >= 0 && h < g.h;  // else padding: nothing loaded, zeros stored
        const int e0 = int(unsigned(v.x) + unsigned(r) * unsigned(row_step));
        return make_run(x, inside ? e0 : 0, v.z & 0xFFFF, inside ? v.z >> 16 : 0,
                        tile_address + (m * fstride + r * g.row) * 2);
      });
    } else {  // dilated: the S inputs of a filter row are not contiguous; element by element
      for (int task = threadIdx.x; task < BM * g.r; task += kThreads) {
        const int r = task / BM, m = task - r * BM;
        const int4 v = pixel[m];
        const int h = v.y + r * g.dilation_h;
        __half* dst = tile + m * fstride + r * g.row;
        zero_run(dst, pieces);
        if (h < 0 || h >= g.h) continue;
        const long long row0 = (long long)v.x - (long long)v.w * g.c + (long long)r * row_step;  // (n, h, 0, 0)
        for (int s = 0; s < g.s; ++s) {
          const int wi = v.w + s * g.dilation_w;
          if (wi < 0 || wi >= g.w) continue;
          for (int c = 0; c < g.c; ++c) dst[s * g.c + c] = x[row0 + (long long)wi * g.c + c];
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
    if ((long long)n * h * w * c >= INT_MAX || (long long)n * h >= INT_MAX / 2 || n * p * q >= INT_MAX)
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


// ---------------------------------------------------------------------------------------------
// Rows mode: no im2col tile. For output pixel (p, q) and filter row r the S*C inputs are the
// contiguous run of input row h = p*stride_h - pad_h + r*dilation_h starting at pixel
// q*stride_w - pad_w (dilation_w = 1). A tile of BM consecutive output pixels of one image spans
// a few output rows; its CTA stages the input rows they need once, each pixel widened to 4 halves
// (8 bytes, channels past C zero) with pad_w zero pixels on the left and zeros on the right, rows
// outside the image zero. The reduction is laid out by filter row as k = s*4 + c, S*4 rounded up
// to 16 (7x7 -> 32 a row, 224 in all), and the A fragment of mma.m16n8k16 at reduction column k
// of filter row r is read straight from the staged row at pixel q*stride_w, k/4 pixels in: by
// ldmatrix when stride_w is even (every row address 16-byte aligned), else by 32-bit loads (every
// pixel is 8 bytes, so a pair of halves never straddles one). The filter slice stays resident,
// [BN][R][S*4 rounded up], columns past S*4, channels past C and channels past K zero, so that the
// staged values those columns meet (zeros or finite inputs) add nothing.
namespace few_channels {

constexpr int kPixelHalves = 4;  // a staged pixel: C channels padded to 4 halves

__host__ __device__ constexpr long long max_ll(long long a, long long b) { return a > b ? a : b; }
__host__ __device__ constexpr long long min_ll(long long a, long long b) { return a < b ? a : b; }

// Reduction columns of one filter row in rows mode, and of the whole filter.
__host__ __device__ constexpr int rows_row_columns(int s) { return round_up(s * kPixelHalves, 16); }
__host__ __device__ constexpr int rows_reduction_columns(int r, int s) { return r * rows_row_columns(s); }

// Pixels of one staged input row: pad_w zeros, the W pixels, pad_w zeros, and as many more as the
// last output column's reduction columns reach; even, so that every staged row starts 16-byte aligned.
__host__ __device__ constexpr long long rows_width(long long w, long long pad_w, long long q, long long stride_w,
                                                   int s) {
  return (max_ll(w + 2 * pad_w, (q - 1) * stride_w + rows_row_columns(s) / kPixelHalves) + 1) / 2 * 2;
}

// Output rows that BM consecutive pixels of one P x Q image span at most, and the input rows a
// tile of that many output rows stages.
__host__ __device__ constexpr long long rows_spanned(long long bm, long long p, long long q) {
  return min_ll(p, (bm + q - 2) / q + 1);
}
__host__ __device__ constexpr long long rows_staged(long long spanned, long long r, long long stride_h,
                                                    long long dilation_h) {
  return (spanned - 1) * stride_h + (r - 1) * dilation_h + 1;
}

// Shared memory of a rows-mode CTA: the filter slice (rows padded by one 16-byte chunk for
// ldmatrix), the staged input pixels (8 bytes each) and the epilogue's [BM x (BN + 8)] staging.
__host__ __device__ constexpr int rows_shared_bytes(int bm, int bn, int reduction, int staged) {
  return 2 * bn * (reduction + kPiece) + 8 * staged + 2 * bm * (bn + kPiece);
}

// The convolution as the rows-mode kernel reads it.
struct RowsShape {
  int n, h, w, c, k, r, s;
  int pad_h, pad_w, stride_h, stride_w, dilation_h;
  int p, q, pq;
  int row;              // reduction columns per filter row: S*4 rounded up to 16
  int reduction;        // R * row
  int width;            // pixels per staged input row
  int staged;           // pixels of the staged rows' buffer
  int units;            // 8-pixel units per input row
  int tiles_per_image;  // BM-pixel tiles per image (a tile never spans two images)
  int tiles;            // N * tiles_per_image
  int channel_blocks;   // filter slices of BN output channels
};

// The 8 pixels of input row element e onwards (count of them inside the row, 1 to 8): the 16-byte
// chunks holding them, C + 1 at most, loaded (none when !inside), widened to 4 halves each.
template <int C>
__device__ __forceinline__ void load_unit(const __half* x, int e, int count, bool inside, uint32_t (&v)[4 * (C + 1)]) {
  const uint4* chunk = reinterpret_cast<const uint4*>(x + (e & ~7));
  const int end = (e & 7) + count * C;  // the unit's end, in halves from the first chunk's start
#pragma unroll
  for (int i = 0; i <= C; ++i) {
    const uint4 c = inside && i * kPiece < end ? __ldg(chunk + i) : make_uint4(0, 0, 0, 0);
    v[4 * i] = c.x, v[4 * i + 1] = c.y, v[4 * i + 2] = c.z, v[4 * i + 3] = c.w;
  }
}

template <int C>
__device__ __forceinline__ void store_unit(const uint32_t (&v)[4 * (C + 1)], int o, int count, bool pairs,
                                           __half* dst) {
  constexpr int kWords = 4 * C;  // the unit's 8*C halves, from half o of v on
  uint32_t u[kWords + 2], w[kWords + 1], t[kWords];
#pragma unroll
  for (int i = 0; i < kWords + 2; ++i) u[i] = o & 4 ? v[i + 2] : v[i];
#pragma unroll
  for (int i = 0; i < kWords + 1; ++i) w[i] = o & 2 ? u[i + 1] : u[i];
#pragma unroll
  for (int i = 0; i < kWords; ++i) t[i] = __funnelshift_r(w[i], w[i + 1], (o & 1) * 16);  // halves 2i, 2i + 1
  uint2 px[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int k = i * C;  // the pixel's first half
    const uint32_t first = t[k / 2], second = t[min_of(k / 2 + 1, kWords - 1)];
    const uint32_t pair = k % 2 ? __byte_perm(first, second, 0x5432) : first;  // halves k, k + 1
    const uint32_t single = k % 2 ? first >> 16 : first & 0xFFFFu;              // half k
    uint32_t lo = C == 1 ? single : pair, hi = 0;
    if constexpr (C == 3) hi = k % 2 ? second >> 16 : second & 0xFFFFu;  // half k + 2
    if constexpr (C == 4) hi = second;                                   // halves k + 2, k + 3
    px[i] = i < count ? make_uint2(lo, hi) : make_uint2(0, 0);
  }
  if (pairs) {  // dst 16-byte aligned: a pixel past the row's end lands on a zero padding pixel
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (2 * j < count)
        *reinterpret_cast<uint4*>(dst + 8 * j) = make_uint4(px[2 * j].x, px[2 * j].y, px[2 * j + 1].x, px[2 * j + 1].y);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < count) *reinterpret_cast<uint2*>(dst + 4 * i) = px[i];
  }
}

// Stages input rows hbase .. hbase + used - 1 of `image` into rows[0 .. used - 1] (pixels
// pad_w .. pad_w + W - 1 of each staged row; zeros for rows outside the image), one 8-pixel unit
// per thread, two units in flight at once.
template <int C, int kThreads>
__device__ __forceinline__ void stage_rows(const __half* __restrict__ x, __half* rows, const RowsShape& g, int image,
                                           int hbase, int used) {
  const int tasks = used * g.units;
  const bool pairs = g.pad_w % 2 == 0;
  for (int a = threadIdx.x; a < tasks; a += 2 * kThreads) {
    int e[2], count[2];
    bool inside[2], real[2];
    __half* dst[2];
    uint32_t v[2][4 * (C + 1)];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int task = a + i * kThreads;
      real[i] = task < tasks;
      const int slot = (real[i] ? task : a) / g.units, unit = (real[i] ? task : a) - slot * g.units;
      const int h = hbase + slot;
      inside[i] = real[i] && h >= 0 && h < g.h;
      count[i] = min_of(kPiece, g.w - unit * kPiece);
      e[i] = inside[i] ? ((image * g.h + h) * g.w + unit * kPiece) * C : 0;
      dst[i] = rows + (slot * g.width + g.pad_w + unit * kPiece) * kPixelHalves;
      load_unit<C>(x, e[i], count[i], inside[i], v[i]);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (real[i]) store_unit<C>(v[i], e[i] & 7, count[i], pairs, dst[i]);
  }
}

__device__ __forceinline__ uint32_t load_shared(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return v;
}

// The multiply-adds of one tile: A fragments straight from the staged rows (ldmatrix when kEven:
// stride_w even), B fragments from the filter slice. m0: the warp's first pixel in the tile.
template <bool kEven, int MT, int NT>
__device__ __forceinline__ void rows_mainloop(float (&acc)[MT][NT][4], const RowsShape& g, uint32_t rows_address,
                                              const uint32_t (&b_address)[NT / 2], int m0, int pixel0, int last,
                                              int p_first, int lane) {
  constexpr int kBases = kEven ? 1 : 2;  // fragment rows of an m16 tile this lane addresses
  uint32_t base[MT][kBases];             // at filter row 0, reduction column 0
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int b = 0; b < kBases; ++b) {
      const int m = m0 + i * 16 + (kEven ? lane % 16 : lane / 4 + 8 * b);
      const int index = min_of(pixel0 + m, last);  // a pixel past the image's last computes its neighbour's, unused
      const int p = index / g.q, q = index - p * g.q;
      base[i][b] = rows_address + ((p - p_first) * g.stride_h * g.width + q * g.stride_w) * (kPixelHalves * 2) +
                   (kEven ? lane / 16 * 16 : lane % 4 * 4);
    }
  const int ksteps = g.row / 16, steps = g.reduction / 16;
  const uint32_t skip = uint32_t(g.dilation_h * g.width * kPixelHalves * 2 - ksteps * 32);  // to the next filter row
  uint32_t offset = 0;
  int ks = 0;
#pragma unroll 2
  for (int step = 0; step < steps; ++step) {
    uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (kEven) {
        ldmatrix_x4(a[i], base[i][0] + offset);
      } else {
        a[i][0] = load_shared(base[i][0] + offset);
        a[i][1] = load_shared(base[i][kBases - 1] + offset);
        a[i][2] = load_shared(base[i][0] + offset + 16);
        a[i][3] = load_shared(base[i][kBases - 1] + offset + 16);
      }
    }
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) ldmatrix_x4(b[j], b_address[j] + step * 32);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma(acc[i][j], a[i], b[j / 2][j % 2 * 2], b[j / 2][j % 2 * 2 + 1]);
    offset += 32;
    if (++ks == ksteps) ks = 0, offset += skip;
  }
}

template <int BM, int BN, int WM, int WN, int Blocks>
__global__ void __launch_bounds__(WM * WN * 32, Blocks)
    rows_fprop_kernel(const __half* __restrict__ x, const __half* __restrict__ w, __half* __restrict__ y, RowsShape g) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN;  // a warp's pixels and channels
  constexpr int MT = TM / 16, NT = TN / 8;   // its m16 and n8 MMA tiles
  static_assert(TM % 16 == 0 && TN % 16 == 0, "a warp's tile is whole 16 x 16 blocks");

  extern __shared__ __align__(16) char smem[];
  const int fstride = g.reduction + kPiece;  // halves per filter row
  constexpr int sstride = BN + kPiece;       // halves per epilogue staging row
  __half* filter = reinterpret_cast<__half*>(smem);
  __half* rows = filter + BN * fstride;
  __half* staging = rows + g.staged * kPixelHalves;

  const int channel_block = blockIdx.x % g.channel_blocks;
  const int first = blockIdx.x / g.channel_blocks, stride = gridDim.x / g.channel_blocks;
  const int k0 = channel_block * BN;

  // Zeros everywhere in the staged rows: their padding pixels are never written again.
  for (int i = threadIdx.x; i < g.staged / 2; i += kThreads) reinterpret_cast<uint4*>(rows)[i] = make_uint4(0, 0, 0, 0);
  // The filter slice: output channel k0 + i, tap (r, s), channel c -> shared row i, column r * row + s * 4 + c.
  const unsigned short* w16 = reinterpret_cast<const unsigned short*>(w);
  const int taps = g.row / kPixelHalves;  // staged pixels a filter row reads, S and zero ones
  for (int t = threadIdx.x; t < BN * g.r * taps; t += kThreads) {
    const int i = t / (g.r * taps), rest = t - i * g.r * taps, r = rest / taps, s = rest - r * taps;
    uint32_t c[kMaxChannels] = {0, 0, 0, 0};
    if (s < g.s && k0 + i < g.k) {
      const unsigned short* src = w16 + ((k0 + i) * g.r + r) * g.s * g.c + s * g.c;
#pragma unroll
      for (int j = 0; j < kMaxChannels; ++j)
        if (j < g.c) c[j] = __ldg(src + j);
    }
    *reinterpret_cast<uint2*>(filter + i * fstride + r * g.row + s * kPixelHalves) =
        make_uint2(c[0] | c[1] << 16, c[2] | c[3] << 16);
  }
  __syncthreads();  // the zeros are in place before the first tile's rows land on them

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % WM, wn = warp / WM;
  uint32_t b_address[NT / 2];  // ldmatrix addresses of this lane in the filter slice at reduction column 0
#pragma unroll
  for (int j = 0; j < NT / 2; ++j)
    b_address[j] = shared_address(filter + (wn * TN + j * 16 + lane / 16 * 8 + lane % 8) * fstride + lane / 8 % 2 * 8);
  const uint32_t rows_address = shared_address(rows);
  const bool even = g.stride_w % 2 == 0;

  for (int t = first; t < g.tiles; t += stride) {
    const int image = t / g.tiles_per_image;
    const int pixel0 = (t - image * g.tiles_per_image) * BM;  // within the image
    const int last = min_of(pixel0 + BM, g.pq) - 1;
    const int p_first = pixel0 / g.q;
    const int used = (last / g.q - p_first) * g.stride_h + (g.r - 1) * g.dilation_h + 1;
    const int hbase = p_first * g.stride_h - g.pad_h;  // the input row of staged row 0
    switch (g.c) {
      case 1: stage_rows<1, kThreads>(x, rows, g, image, hbase, used); break;
      case 2: stage_rows<2, kThreads>(x, rows, g, image, hbase, used); break;
      case 3: stage_rows<3, kThreads>(x, rows, g, image, hbase, used); break;
      default: stage_rows<4, kThreads>(x, rows, g, image, hbase, used); break;
    }
    __syncthreads();  // the staged rows (and, on the first tile, the filter slice) are complete

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    if (even)
      rows_mainloop<true>(acc, g, rows_address, b_address, wm * TM, pixel0, last, p_first, lane);
    else
      rows_mainloop<false>(acc, g, rows_address, b_address, wm * TM, pixel0, last, p_first, lane);

    // accumulator e of tile (i, j): pixel 16 i + lane / 4 + 8 (e / 2), channel 8 j + 2 (lane % 4) + e % 2.
    // The previous tile's reads of the staging buffer came before every thread's barrier above.
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
    __syncthreads();  // the staging buffer is complete; every warp is done with the staged rows

    constexpr int kChunks = BN / kPiece;  // 16-byte chunks per pixel
    const long long out0 = (long long)image * g.pq + pixel0;
    for (int i = threadIdx.x; i < BM * kChunks; i += kThreads) {
      const int m = i / kChunks, chunk = i - m * kChunks;
      const int channel = k0 + chunk * kPiece;
      if (pixel0 + m <= last && channel < g.k)
        *reinterpret_cast<uint4*>(y + (out0 + m) * g.k + channel) =
            *reinterpret_cast<const uint4*>(staging + m * sstride + chunk * kPiece);
    }
  }
}

}  // namespace few_channels

// A rows-mode few-channels conv2d fprop kernel: BM x BN tiles (pixels x output channels), WM x WN
// warps, at most `MaxReduction` reduction columns (R * (S*4 rounded up to 16)) and `MaxStaged`
// staged input pixels, built for `Blocks` CTAs per SM (__launch_bounds__). The same interface as
// FewChannelsFprop.
template <int BM, int BN, int WM, int WN, int MaxReduction, int MaxStaged, int Blocks>
struct FewChannelsRowsFprop {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kSharedBytes = few_channels::rows_shared_bytes(BM, BN, MaxReduction, MaxStaged);  // at most

  struct Arguments {
    const __half* x;
    const __half* w;
    __half* y;
    few_channels::RowsShape shape;
    int shared_bytes;   // for this convolution's reduction and staged rows
    int blocks_per_sm;  // CTAs an SM holds at that shared memory
  };

  // Nullptr when the kernel computes this convolution (NHWC x, KRSC w, NPQK y), else why not.
  static const char* unsupported(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w,
                                 int stride_h, int stride_w, int dilation_h, int dilation_w) {
    using namespace few_channels;
    if (c < 1 || c > kMaxChannels) return "needs 1 to 4 input channels (a first layer)";
    if (k < 8 || k % 8) return "needs a multiple of 8 output channels";
    if (n < 1 || h < 1 || w < 1 || r < 1 || s < 1 || pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1 ||
        dilation_h < 1 || dilation_w < 1)
      return "needs positive extents, strides and dilations and no negative padding";
    if (dilation_w != 1) return "the rows mode needs dilation_w = 1 (a filter row's inputs contiguous)";
    if ((long long)s * kPixelHalves > MaxReduction ||
        (long long)r * rows_row_columns(s) > MaxReduction)
      return "R * S (channels padded to 4) is too large: the filter slice would not fit this kernel's shared memory";
    const long long p = (h + 2LL * pad_h - (long long)dilation_h * (r - 1) - 1) / stride_h + 1;
    const long long q = (w + 2LL * pad_w - (s - 1) - 1) / stride_w + 1;
    if (p < 1 || q < 1) return "the convolution has no output";
    if ((long long)n * h * w * c >= INT_MAX || (long long)n * h >= INT_MAX / 2 || n * p * q >= INT_MAX)
      return "the tensors are too large for this kernel's index arithmetic";
    if (rows_staged(rows_spanned(BM, p, q), r, stride_h, dilation_h) * rows_width(w, pad_w, q, stride_w, s) >
        MaxStaged)
      return "the input rows a tile stages do not fit this kernel's shared memory (the image is too wide)";
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
    RowsShape g{};
    g.n = n, g.h = h, g.w = width, g.c = c, g.k = k, g.r = r, g.s = s;
    g.pad_h = pad_h, g.pad_w = pad_w, g.stride_h = stride_h, g.stride_w = stride_w, g.dilation_h = dilation_h;
    g.p = (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1;
    g.q = (width + 2 * pad_w - (s - 1) - 1) / stride_w + 1;
    g.pq = g.p * g.q;
    g.row = rows_row_columns(s);
    g.reduction = rows_reduction_columns(r, s);
    g.width = int(rows_width(width, pad_w, g.q, stride_w, s));
    g.staged = int(rows_staged(rows_spanned(BM, g.p, g.q), r, stride_h, dilation_h)) * g.width;
    g.units = (width + kPiece - 1) / kPiece;
    g.tiles_per_image = (g.pq + BM - 1) / BM;
    g.tiles = n * g.tiles_per_image;
    g.channel_blocks = (k + BN - 1) / BN;
    args = Arguments{static_cast<const __half*>(x), static_cast<const __half*>(w), static_cast<__half*>(y), g,
                     rows_shared_bytes(BM, BN, g.reduction, g.staged), 1};
    auto kernel = rows_fprop_kernel<BM, BN, WM, WN, Blocks>;
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
    const few_channels::RowsShape& g = args.shape;
    long long per_block = (long long)sms * args.blocks_per_sm / g.channel_blocks;
    if (per_block < 1) per_block = 1;
    if (per_block > g.tiles) per_block = g.tiles;
    few_channels::rows_fprop_kernel<BM, BN, WM, WN, Blocks>
        <<<unsigned(per_block * g.channel_blocks), kThreads, args.shared_bytes, stream>>>(args.x, args.w, args.y, g);
    return cudaPeekAtLastError();
  }
};

}  // namespace kernelgen
