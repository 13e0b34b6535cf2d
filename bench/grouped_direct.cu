// Benchmark: a direct grouped convolution for few channels a group, ResNeXt's 3x3 layers with 4
// and 8 input and output channels a group (groups = 32), where CUTLASS's group kernels take 4 to 19
// times cuDNN's time (docs/results.md, "Grouped layers of ResNeXt-50") and a tensor-core tile
// (K 4 or 8 a group) is mostly padding.
//
// The kernel: 32 groups a CTA, one a thread across the warp (the warp reads 32 groups' channels of
// a pixel, 256 or 512 contiguous bytes); the 32 groups' filters in shared memory, laid out so that
// the warp reads 32 consecutive values; a thread computes TQ consecutive output columns of PR
// output rows, all KG output channels of its group, from a register window of its input row
// ((TQ - 1) * Stride + S pixels of CG channels), fp32 multiply-adds. NHWC input, KRS(C/groups)
// filter, NPQK output, fp16.
//
// Beside it, a tensor-core kernel (grouped_mma): 8 channels in and out are one mma.sync m16n8k16's
// N, and two taps of 8 channels its K, so a group's 3x3 filter is 5 k-steps of B held in registers
// (the ninth tap's pair padded with zeros); 4 channels a group are taken two groups at a time as one
// of 8, their filter block-diagonal. A warp computes 16 output pixels (consecutive in N, P, Q order)
// of one such group at a time, TILES tiles in turn; the CTA's WARPS warps take neighbouring groups of
// the same pixels, so that together they read whole 32-byte sectors of each input pixel; each
// thread loads the 2 channels of 2 pixels and 2 taps its A fragments hold straight from global
// memory (L1 serves the taps' overlap), and stores the 2 outputs of 2 pixels its accumulators hold.
// A third (mma staged) is the grouped_mma family's kernel (profiler/grouped_mma.h,
// kernel_specs/families/grouped_mma.toml): the same tiles from a CTA's input window in shared memory
// through ldmatrix; --model checks neither its window nor its ldmatrix addressing, which only the
// comparison with the reference on the GPU (here, and the profiler's) does.
//
// For each layer (default: ResNeXt-50 32x4d's three 3x3 layers of 4 and 8 channels a group, at
// batch 32 and 1), every configuration (TQ, threads along Q, PR) is checked against a plain fp32
// reference on the same operands (relative L2 error and largest element error, both within 1e-3 to
// pass) and timed as the profiler times (bench/conv_bench.h): operands rotated over enough copies to cover four times
// the L2 cache, back-to-back launches captured in one CUDA graph, the median over 20 replays.
// Prints one line a layer and configuration; cuDNN's time for the same layers is in
// docs/results.md (or `scons compare` once the kernel is a family).
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a bench/grouped_direct.cu -o grouped_direct
//   ./grouped_direct [n h w c k stride groups ...]        (3x3 filters, padding 1)
//   ./grouped_direct --model        (no GPU: grouped_mma's fragments through a CPU model of mma.sync)
//
// The direct kernel measured on the H200: docs/results.md, "Grouped layers of ResNeXt-50"; the
// tensor-core kernel's indexing passes --model. Its first H200 run (docs/results.md, "ConvNeXt-T's
// fused chains") divided 64-bit pixel indices for every register of every k-step; each tile's two
// windows a lane are now computed once (lane_windows), not yet timed.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../profiler/grouped_mma.h"
#include "conv_bench.h"

namespace {

using namespace bench;

// CG 16-bit elements from global memory (CG * 2 bytes, aligned so) as floats.
template <int CG>
__device__ __forceinline__ void load(const __half* from, float* to) {
  static_assert(CG % 4 == 0, "4 or more channels a group, a multiple of 4");
#pragma unroll
  for (int v = 0; v < CG / 4; ++v) {
    const uint2 bits = __ldg(reinterpret_cast<const uint2*>(from) + v);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&bits.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&bits.y));
    to[4 * v] = a.x, to[4 * v + 1] = a.y, to[4 * v + 2] = b.x, to[4 * v + 3] = b.y;
  }
}

// The fragment layouts (PTX ISA, mma.m16n8k16 with .f16): lane = 4 * row + t. A's registers hold
// (row, 2t..2t+1), (row + 8, 2t..), (row, 8 + 2t..), (row + 8, 8 + 2t..); B's (k 2t..2t+1, n row) and
// (k 8 + 2t.., n row); D's (row, 2t..2t+1) and (row + 8, 2t..2t+1). Here a row of A is an output
// pixel of the tile, a column a (tap, channel) pair: columns 0-7 tap 2i, 8-15 tap 2i+1 of k-step i;
// a column of B an output channel of the group of 8 channels. The three functions below say where
// a lane's registers come from and go to; the kernel and the CPU model (--model) share them.
constexpr int kMmaSteps = 5;  // 9 taps, two a k-step

// The input window of output pixel m (consecutive in N, P, Q order; m < 2^31, checked before any
// launch): its image, and its top-left input row and column (padding included); n = -1 past the last.
struct Window {
  int n, h0, w0;
};

__host__ __device__ inline Window window_of(const Layer& L, int stride, int m) {
  if (m >= L.n * L.p() * L.q()) return {-1, 0, 0};
  const int q = m % L.q(), pq = m / L.q(), p = pq % L.p();
  return {pq / L.p(), p * stride - L.pad, q * stride - L.pad};
}

// The windows of a lane's two A rows (lane / 4 and lane / 4 + 8) for the tile of pixels from m0:
// computed once a tile; each register's offset then costs a few adds (its tap a constant).
__host__ __device__ inline void lane_windows(const Layer& L, int stride, int m0, int lane, Window (&win)[2]) {
  for (int e = 0; e < 2; ++e) win[e] = window_of(L, stride, m0 + lane / 4 + 8 * e);
}

// A register `reg` (0-3) of `lane` at k-step `i`, from the lane's windows: the offset in x of its
// first element (the second follows it), or -1 where it is zeros (padding, the tenth tap, a pixel
// past the last).
__host__ __device__ inline long long a_offset(const Layer& L, const Window (&win)[2], int group8, int lane, int i,
                                              int reg) {
  const Window& at = win[reg % 2];
  const int tap = 2 * i + reg / 2, h = at.h0 + tap / 3, col = at.w0 + tap % 3;
  if (tap >= 9 || at.n < 0 || h < 0 || h >= L.h || col < 0 || col >= L.w) return -1;
  return ((long long)(at.n * L.h + h) * L.w + col) * L.c + group8 * 8 + 2 * (lane % 4);
}

// Element `e` (0-1) of B register `reg` (0-1) of `lane` at k-step `i`: the offset in w (KRS(CG))
// of its value, or -1 where it is zero (the tenth tap; with 4 channels a group, across groups).
__host__ __device__ inline long long b_offset(int cg, int group8, int lane, int i, int reg, int e) {
  const int out = lane / 4, j = 2 * (lane % 4) + e, tap = 2 * i + reg;
  if (tap >= 9 || (cg == 4 && j / 4 != out / 4)) return -1;
  return ((long long)(group8 * 8 + out) * 9 + tap) * cg + j % cg;
}

// D registers 2e, 2e+1 of `lane` for the tile from m0: the offset in y of the first (the second
// follows it), or -1 past the last pixel.
__host__ __device__ inline long long d_offset(const Layer& L, int group8, long long m0, int lane, int e) {
  const long long m = m0 + lane / 4 + 8 * e;
  return m < (long long)L.n * L.p() * L.q() ? m * L.k + group8 * 8 + 2 * (lane % 4) : -1;
}

// A lane's B registers of the five k-steps for the group of 8 channels `group8` (b_offset).
template <int CG>
__device__ __forceinline__ void load_filter(const __half* __restrict__ w, int group8, int lane,
                                            uint32_t (&b)[kMmaSteps][2]) {
#pragma unroll
  for (int i = 0; i < kMmaSteps; ++i) {
#pragma unroll
    for (int reg = 0; reg < 2; ++reg) {
      __half v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long at = b_offset(CG, group8, lane, i, reg, e);
        v[e] = at >= 0 ? w[at] : __float2half(0.0f);
      }
      b[i][reg] = *reinterpret_cast<const uint32_t*>(v);
    }
  }
}

template <int CG, int Stride, int WARPS, int TILES>
__global__ void __launch_bounds__(32 * WARPS) grouped_mma(Layer L, const __half* __restrict__ x,
                                                         const __half* __restrict__ w, __half* __restrict__ y) {
  static_assert(CG == 4 || CG == 8, "4 or 8 channels a group");
  const int lane = threadIdx.x % 32;
  const int group8 = int(blockIdx.y) * WARPS + int(threadIdx.x) / 32;  // a group of 8 channels
  if (group8 * 8 >= L.c) return;
  uint32_t b[kMmaSteps][2];
  load_filter<CG>(w, group8, lane, b);
  const long long pixels = (long long)L.n * L.p() * L.q();
#pragma unroll 1
  for (int tile = 0; tile < TILES; ++tile) {
    const long long m0 = ((long long)blockIdx.x * TILES + tile) * 16;
    if (m0 >= pixels) return;
    Window win[2];
    lane_windows(L, Stride, int(m0), lane, win);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kMmaSteps; ++i) {
      uint32_t a[4];
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) {
        const long long at = a_offset(L, win, group8, lane, i, reg);
        a[reg] = at >= 0 ? __ldg(reinterpret_cast<const uint32_t*>(x + at)) : 0u;
      }
      kernelgen::grouped_mma::mma16816<__half>(d, a, b[i]);
    }
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const long long at = d_offset(L, group8, m0, lane, e);
      if (at >= 0) *reinterpret_cast<__half2*>(y + at) = __floats2half2_rn(d[2 * e], d[2 * e + 1]);
    }
  }
}

// The CPU model of grouped_mma: every warp's tiles, with mma.sync done as the PTX ISA defines it
// from the lanes' registers (lane_windows, a_offset, b_offset, d_offset above), against a plain convolution of
// the same float operands. Returns the largest difference relative to the largest output.
double mma_model(const Layer& L) {
  const int cg = L.c / L.groups;
  std::vector<float> x(size_t(L.n) * L.h * L.w * L.c), w(size_t(L.k) * 9 * cg), y(size_t(L.n) * L.p() * L.q() * L.k, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 17) - 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 104729 % 13) - 6);
  const long long pixels = (long long)L.n * L.p() * L.q();
  for (int group8 = 0; group8 < L.c / 8; ++group8) {
    for (long long m0 = 0; m0 < pixels; m0 += 16) {
      float D[16][8] = {};
      for (int i = 0; i < kMmaSteps; ++i) {
        float A[16][16], B[16][8];
        for (int lane = 0; lane < 32; ++lane) {
          const int row = lane / 4, t = lane % 4;
          Window win[2];
          lane_windows(L, L.stride, int(m0), lane, win);
          for (int reg = 0; reg < 4; ++reg) {  // the ISA's A layout
            const long long at = a_offset(L, win, group8, lane, i, reg);
            for (int e = 0; e < 2; ++e) A[row + 8 * (reg % 2)][8 * (reg / 2) + 2 * t + e] = at >= 0 ? x[at + e] : 0.0f;
          }
          for (int reg = 0; reg < 2; ++reg) {  // the ISA's B layout
            for (int e = 0; e < 2; ++e) {
              const long long at = b_offset(cg, group8, lane, i, reg, e);
              B[8 * reg + 2 * t + e][row] = at >= 0 ? w[at] : 0.0f;
            }
          }
        }
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < 8; ++c)
            for (int k = 0; k < 16; ++k) D[r][c] += A[r][k] * B[k][c];
      }
      for (int lane = 0; lane < 32; ++lane) {  // the ISA's D layout
        for (int e = 0; e < 2; ++e) {
          const long long at = d_offset(L, group8, m0, lane, e);
          if (at < 0) continue;
          y[at] = D[lane / 4 + 8 * e][2 * (lane % 4)];
          y[at + 1] = D[lane / 4 + 8 * e][2 * (lane % 4) + 1];
        }
      }
    }
  }
  double largest = 0, largest_diff = 0;
  for (long long m = 0; m < pixels; ++m) {
    const int q = int(m % L.q()), p = int(m / L.q() % L.p()), n = int(m / ((long long)L.p() * L.q()));
    for (int k = 0; k < L.k; ++k) {
      const int g = k / cg;
      double acc = 0;
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) {
          const int h = p * L.stride - L.pad + r, col = q * L.stride - L.pad + s;
          if (h < 0 || h >= L.h || col < 0 || col >= L.w) continue;
          for (int j = 0; j < cg; ++j)
            acc += double(x[((size_t(n) * L.h + h) * L.w + col) * L.c + g * cg + j]) * w[(size_t(k) * 9 + r * 3 + s) * cg + j];
        }
      largest = std::max(largest, std::fabs(acc));
      const double got = y[size_t(m) * L.k + k];
      largest_diff = std::max(largest_diff, std::isnan(got) ? INFINITY : std::fabs(got - acc));
    }
  }
  return largest_diff / std::max(largest, 1e-30);
}

template <int CG, int KG, int R, int S, int Stride, int TQ, int PY, int PR>
__global__ void __launch_bounds__(32 * PY) grouped_direct(Layer L, const __half* __restrict__ x,
                                                          const __half* __restrict__ w, __half* __restrict__ y) {
  constexpr int kTaps = R * S, kWindow = (TQ - 1) * Stride + S, kFilter = KG * kTaps * CG;
  extern __shared__ __half taps[];  // [r * S + s][kk][j][group of the CTA]
  const int group_blocks = L.groups / 32;
  const int gb = int(blockIdx.z) % group_blocks, n = int(blockIdx.z) / group_blocks;
  const int lane = threadIdx.x, g = gb * 32 + lane;
  // The CTA's 32 groups' filters, KG * R * S * CG contiguous values a group in global memory.
  const __half* block_filter = w + size_t(gb) * 32 * kFilter;
  for (int i = threadIdx.y * 32 + lane; i < 32 * kFilter; i += 32 * PY) {
    const int group = i / kFilter, rest = i % kFilter;
    const int kk = rest / (kTaps * CG), rs = rest % (kTaps * CG) / CG, j = rest % CG;
    taps[((rs * KG + kk) * CG + j) * 32 + group] = block_filter[i];
  }
  __syncthreads();
  const int P = L.p(), Q = L.q();
  const int q0 = (int(blockIdx.x) * PY + int(threadIdx.y)) * TQ;
  if (q0 >= Q) return;
#pragma unroll 1
  for (int pr = 0; pr < PR; ++pr) {
    const int p = int(blockIdx.y) * PR + pr;
    if (p >= P) return;
    float acc[TQ][KG];
#pragma unroll
    for (int t = 0; t < TQ; ++t) {
#pragma unroll
      for (int kk = 0; kk < KG; ++kk) acc[t][kk] = 0.0f;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int h = p * Stride - L.pad + r;
      if (h < 0 || h >= L.h) continue;
      const __half* row = x + (size_t(n) * L.h + h) * L.w * L.c + g * CG;
      float in[kWindow][CG];
#pragma unroll
      for (int c = 0; c < kWindow; ++c) {
        const int col = q0 * Stride - L.pad + c;
        if (col >= 0 && col < L.w) {
          load<CG>(row + size_t(col) * L.c, in[c]);
        } else {
#pragma unroll
          for (int j = 0; j < CG; ++j) in[c][j] = 0.0f;
        }
      }
#pragma unroll
      for (int s = 0; s < S; ++s) {
        float tap[KG][CG];
#pragma unroll
        for (int kk = 0; kk < KG; ++kk) {
#pragma unroll
          for (int j = 0; j < CG; ++j) tap[kk][j] = __half2float(taps[(((r * S + s) * KG + kk) * CG + j) * 32 + lane]);
        }
#pragma unroll
        for (int t = 0; t < TQ; ++t) {
#pragma unroll
          for (int kk = 0; kk < KG; ++kk) {
#pragma unroll
            for (int j = 0; j < CG; ++j) acc[t][kk] = fmaf(in[t * Stride + s][j], tap[kk][j], acc[t][kk]);
          }
        }
      }
    }
    __half* out = y + ((size_t(n) * P + p) * Q + q0) * L.k + g * KG;
#pragma unroll
    for (int t = 0; t < TQ; ++t) {
      if (q0 + t < Q) {
#pragma unroll
        for (int kk = 0; kk < KG; kk += 2)
          *reinterpret_cast<__half2*>(out + size_t(t) * L.k + kk) = __floats2half2_rn(acc[t][kk], acc[t][kk + 1]);
      }
    }
  }
}

template <int CG, int Stride, int TQ, int PY, int PR>
void direct(const Layer& L, const Buffers& b) {
  const auto kernel = grouped_direct<CG, CG, 3, 3, Stride, TQ, PY, PR>;
  const int smem = 32 * CG * 9 * CG * int(sizeof(__half));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute");
  const dim3 grid((L.q() + PY * TQ - 1) / (PY * TQ), (L.p() + PR - 1) / PR, L.n * (L.groups / 32));
  const dim3 block(32, PY);
  const std::string label = "direct TQ " + std::to_string(TQ) + " x " + std::to_string(PY) + " threads, " +
                            std::to_string(PR) + " row(s) a CTA";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    kernel<<<grid, block, smem, stream>>>(L, x, w, y);
  });
}

template <int CG, int Stride, int WARPS, int TILES>
void tensor_cores(const Layer& L, const Buffers& b) {
  const long long pixels = (long long)L.n * L.p() * L.q();
  if (pixels > 2147483647LL - 16) {  // window_of's pixel index is an int
    std::printf("mma: skipped, %lld output pixels are more than an int counts\n", pixels);
    return;
  }
  const dim3 grid(unsigned((pixels + 16 * TILES - 1) / (16 * TILES)), unsigned((L.c / 8 + WARPS - 1) / WARPS));
  const std::string label = "mma " + std::to_string(WARPS) + " groups of 8 a CTA, " + std::to_string(TILES) +
                            " tiles a warp";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    grouped_mma<CG, Stride, WARPS, TILES><<<grid, 32 * WARPS, 0, stream>>>(L, x, w, y);
  });
}

// The grouped_mma family's kernel (profiler/grouped_mma.h), launched as the profiler launches it.
template <int CG, int Stride, int TP, int TQ>
void staged(const Layer& L, const Buffers& b) {
  using Kernel = kernelgen::GroupedMma<__half, CG, Stride, TP, TQ>;
  const kernelgen::Conv2dProblem p{L.n, L.h, L.w, L.c, L.k, L.r, L.s, L.pad, L.pad, L.stride, L.stride, 1, 1};
  std::string why = Kernel::can_implement(p, L.groups);
  const int ctas = why.empty() ? Kernel::configure(why) : 0;
  if (!why.empty()) {
    std::printf("mma staged: skipped, %s\n", why.c_str());
    return;
  }
  const std::string label = "mma staged " + std::to_string(TP) + " x " + std::to_string(TQ) + " outputs a CTA";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    Kernel::launch(p, kernelgen::Conv2dBinding{x, w, y, nullptr}, ctas, stream);
  });
}

template <int CG, int Stride>
void configurations(const Layer& L, const Buffers& b) {
  direct<CG, Stride, 4, 8, 1>(L, b);
  direct<CG, Stride, 7, 4, 1>(L, b);
  direct<CG, Stride, 7, 8, 2>(L, b);
  direct<CG, Stride, 2, 8, 2>(L, b);
  direct<CG, Stride, 4, 4, 4>(L, b);
  tensor_cores<CG, Stride, 4, 1>(L, b);
  tensor_cores<CG, Stride, 4, 4>(L, b);
  tensor_cores<CG, Stride, 8, 2>(L, b);
  tensor_cores<CG, Stride, 2, 8>(L, b);
  staged<CG, Stride, 1, 16>(L, b);
  staged<CG, Stride, 1, 32>(L, b);
  staged<CG, Stride, 2, 32>(L, b);
  staged<CG, Stride, 4, 16>(L, b);
}

void measure(const Layer& L) {
  const int cg = L.c / L.groups, kg = L.k / L.groups;
  if (L.c % L.groups || L.k % L.groups || L.groups % 32 || cg != kg || (cg != 4 && cg != 8) ||
      (L.stride != 1 && L.stride != 2)) {
    std::printf("%d,%d,%d,%d,%d,%d,g%d  not served: groups a multiple of 32, 4 or 8 channels a group in and out, "
                "stride 1 or 2\n", L.n, L.h, L.w, L.c, L.k, L.stride, L.groups);
    return;
  }
  Buffers b = allocate(L, size_t(L.k) * 9 * cg);
  if (cg == 4) {
    if (L.stride == 1) configurations<4, 1>(L, b);
    else configurations<4, 2>(L, b);
  } else {
    if (L.stride == 1) configurations<8, 1>(L, b);
    else configurations<8, 2>(L, b);
  }
  release(b);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--model") {  // no GPU: the tensor-core kernel's indexing
    bool all = true;
    for (const Layer& L : {Layer{2, 9, 11, 64, 64, 3, 3, 1, 1, 8}, Layer{2, 9, 11, 64, 64, 3, 3, 1, 2, 8},
                           Layer{3, 7, 5, 64, 64, 3, 3, 1, 1, 16}, Layer{3, 8, 8, 64, 64, 3, 3, 1, 2, 16}}) {
      const double error = mma_model(L);
      std::printf("model %d,%d,%d,%d,%d,%d,g%d  largest difference / largest output %.2e  %s\n", L.n, L.h, L.w, L.c,
                  L.k, L.stride, L.groups, error, error < 1e-6 ? "ok" : "WRONG");
      all = all && error < 1e-6;
    }
    return all ? 0 : 1;
  }
  std::vector<Layer> layers;
  if (argc > 1) {
    std::vector<std::vector<int>> groups;
    if (!read_groups(argc, argv, 7, "[n h w c k stride groups ...]", groups)) return 2;
    for (const auto& v : groups) layers.push_back({v[0], v[1], v[2], v[3], v[4], 3, 3, 1, v[5], v[6]});
  } else {
    for (int n : {32, 1}) {
      layers.push_back({n, 56, 56, 128, 128, 3, 3, 1, 1, 32});
      layers.push_back({n, 56, 56, 256, 256, 3, 3, 1, 2, 32});
      layers.push_back({n, 28, 28, 256, 256, 3, 3, 1, 1, 32});
    }
  }
  for (const Layer& layer : layers) measure(layer);
  return 0;
}
