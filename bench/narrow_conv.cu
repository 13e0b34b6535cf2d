// Benchmark: a direct 3x3 convolution on tensor cores for layers of few channels in and out (8 to 64,
// multiples of 8) at stride 1, where every kernel of the space is an implicit GEMM that reads each
// input pixel once a filter tap and fills a tile of 64 or more output channels with a fraction of
// them: EfficientNetV2-S's 24 -> 24 layer at 112x112 (batch 32: 0.102 ms, cuDNN 0.083 ms, its floor
// 0.013 ms on an H100; docs/results.md, "Four networks no workload file held"), Inception-v3's
// 32 -> 64 at 147x147.
//
// The kernel is the conv2d_fprop_narrow family's (profiler/narrow_conv.h: NarrowFprop, its tilings
// narrow::Tiling), launched through its initialize and run as the profiler's adapter does.
//
// For each layer (default: those two layers and their batch-1 versions), every configuration
// (TP x TQ outputs a block, WARPS, persistent or a CTA a block) is checked against the plain fp32
// reference on the same operands and timed (bench/conv_bench.h); one line a layer and configuration.
// --model runs on the CPU, no GPU:
// every CTA's shared memory filled and every warp's fragments taken as ldmatrix and mma.sync define
// them (PTX ISA) from the same address functions as the kernel, against a plain convolution.
//
//   nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a bench/narrow_conv.cu -o narrow_conv
//   ./narrow_conv [n h w c k ...]          (3x3 filters, stride 1, padding 1)
//   ./narrow_conv --model
//
// First GPU run (H100, 2026-12-06; docs/results.md, "The narrow 3x3 family"): every configuration
// verified; 32x112x112 24 -> 24 persistent 8 x 16 on 4 warps 0.0248 ms where cuDNN takes 0.0485.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../profiler/narrow_conv.h"
#include "conv_bench.h"

namespace {

using namespace bench;
using kernelgen::narrow::Shape;

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT, int STRIDE = 1>
using Narrow = kernelgen::narrow::Tiling<C, K, TP, TQ, WARPS, PERSISTENT, STRIDE>;

// The kernel's view of a bench layer (3x3).
Shape shape_of(const Layer& L) { return {L.n, L.h, L.w, L.p(), L.q(), L.pad, L.pad}; }

// The CPU model: for each block, shared memory filled as the kernel fills it (window_piece into the
// buffer of the block's parity where there are two, filter_piece; NaN elsewhere), then each warp's
// k-steps with ldmatrix's rows taken from the lanes' addresses (a_word, b_word) and handed out as the
// PTX ISA says (lane l holds row l / 4, elements 2 (l % 4) and the next, of each matrix), mma.sync's
// A, B and D layouts likewise; against a plain convolution of the same floats. And each ldmatrix
// phase of A (8 lanes' rows of real pixels) counted where its 8 rows of 16 bytes do not fall in 8
// different quarters of the 32 banks.
struct Outcome {
  double error;    // the largest difference relative to the largest output
  long conflicts;  // A's ldmatrix phases whose rows share a quarter of the banks
};

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT, int STRIDE = 1>
Outcome model(const Layer& L) {
  using S = Narrow<C, K, TP, TQ, WARPS, PERSISTENT, STRIDE>;
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
  const int blocks = S::blocks(shape_of(L));
  long conflicts = 0;
  for (int block = 0; block < blocks; ++block) {
    int n, p0, q0;
    S::origin(shape_of(L), block, n, p0, q0);
    const int buffer = block % S::kBuffers;
    std::fill(smem.begin(), smem.end(), NAN);
    for (int i = 0; i < S::kWP * S::kWQ * S::kChunks; ++i) {
      int h, col;
      const int at = S::window_piece(i, STRIDE * p0 - L.pad, STRIDE * q0 - L.pad, buffer, h, col);
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
          for (int j = 0; j < 4; ++j) {  // a phase: lanes 8j..8j+7
            unsigned quarters = 0;
            bool zero = false;
            for (int lane = 8 * j; lane < 8 * j + 8; ++lane) {
              const int word = S::a_word(lane, tile, step, buffer);
              zero = zero || word == S::kZeroAt;
              quarters |= 1u << (word % 32 / 4);
            }
            conflicts += !zero && quarters != 0xFFu;
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
              const int h = p * L.stride - L.pad + r, col = q * L.stride - L.pad + s;
              if (h < 0 || h >= L.h || col < 0 || col >= L.w) continue;
              for (int c = 0; c < C; ++c)
                acc += double(x[((size_t(n) * L.h + h) * L.w + col) * C + c]) * w[(size_t(k) * 9 + r * 3 + s) * C + c];
            }
          largest = std::max(largest, std::fabs(acc));
          const double got = y[((size_t(n) * P + p) * Q + q) * K + k];
          largest_diff = std::max(largest_diff, std::isnan(got) ? INFINITY : std::fabs(got - acc));
        }
  return {largest_diff / std::max(largest, 1e-30), conflicts};
}

template <int C, int K, int TP, int TQ, int WARPS, bool PERSISTENT>
void time_one(const Layer& L, const Buffers& b) {
  using Kernel = kernelgen::NarrowFprop<C, K, TP, TQ, WARPS, PERSISTENT>;
  typename Kernel::Arguments args{};  // bound once (grid, shared memory), its operands each launch's
  if (const char* why = Kernel::initialize(args, b.x[0], b.w, b.y[0], nullptr, nullptr, L.n, L.h, L.w, L.c, L.k, 3,
                                           3, L.pad, L.pad, 1, 1, 1, 1)) {
    std::printf("%d,%d,%d,%d,%d  narrow: %s\n", L.n, L.h, L.w, L.c, L.k, why);
    return;
  }
  const std::string label = std::string(PERSISTENT ? "narrow persistent " : "narrow ") + std::to_string(TP) + " x " +
                            std::to_string(TQ) + " outputs, " + std::to_string(WARPS) + " warps, " +
                            std::to_string(Kernel::kSharedBytes) + " B";
  run(L, b, label, [&](const __half* x, const __half* w, __half* y, cudaStream_t stream) {
    typename Kernel::Arguments launch = args;
    launch.x = x, launch.w = w, launch.y = y;
    check(Kernel::run(launch, stream), "narrow kernel launch");
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
  time_one<C, K, 16, 16, 4, false>(L, b);
  time_one<C, K, 4, 16, 4, true>(L, b);
  time_one<C, K, 8, 16, 4, true>(L, b);
  time_one<C, K, 8, 16, 8, true>(L, b);
  time_one<C, K, 4, 32, 4, true>(L, b);
  time_one<C, K, 8, 32, 4, true>(L, b);
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
      Outcome (*check)(const Layer&);
      const char* what;
    };
    const Case cases[] = {
        {{2, 9, 11, 24, 24, 3, 3, 1, 1, 1}, model<24, 24, 4, 16, 4, false>, "24x24, 4 x 16, 4 warps"},
        {{1, 19, 21, 24, 24, 3, 3, 1, 1, 1}, model<24, 24, 8, 8, 4, true>, "24x24, 8 x 8, 4 warps, persistent"},
        {{2, 7, 20, 32, 64, 3, 3, 1, 1, 1}, model<32, 64, 8, 16, 8, true>, "32x64, 8 x 16, 8 warps, persistent"},
        {{1, 5, 35, 16, 16, 3, 3, 1, 1, 1}, model<16, 16, 4, 32, 4, false>, "16x16, 4 x 32, 4 warps"},
        {{1, 6, 6, 48, 48, 3, 3, 1, 1, 1}, model<48, 48, 4, 16, 2, true>, "48x48, 4 x 16, 2 warps, persistent"},
        {{2, 13, 19, 32, 32, 3, 3, 0, 1, 1}, model<32, 32, 8, 16, 4, true>, "32x32, 8 x 16, 4 warps, pad 0"},
        {{2, 19, 37, 16, 32, 3, 3, 1, 2, 1}, model<16, 32, 8, 16, 4, true, 2>, "16x32, 8 x 16, 4 warps, persistent, stride 2"},
        {{1, 20, 17, 32, 64, 3, 3, 0, 2, 1}, model<32, 64, 4, 16, 4, false, 2>, "32x64, 4 x 16, 4 warps, stride 2, pad 0"},
        {{3, 9, 10, 64, 64, 3, 3, 2, 2, 1}, model<64, 64, 8, 8, 4, true, 2>, "64x64, 8 x 8, 4 warps, persistent, stride 2"},
    };
    bool all = true;
    for (const Case& c : cases) {
      const Outcome o = c.check(c.layer);
      const bool ok = o.error < 1e-6 && o.conflicts == 0;
      std::printf("model %d,%d,%d,%d,%d  %-46s largest difference / largest output %.2e, %ld phases of bank "
                  "conflicts  %s\n", c.layer.n, c.layer.h, c.layer.w, c.layer.c, c.layer.k, c.what, o.error,
                  o.conflicts, ok ? "ok" : "WRONG");
      all = all && ok;
    }
    return all ? 0 : 1;
  }
  std::vector<Layer> layers;
  if (argc > 1) {
    if (!read_3x3_layers(argc, argv, layers)) return 2;
  } else {
    for (int n : {32, 1}) {
      layers.push_back({n, 112, 112, 24, 24, 3, 3, 1, 1, 1});
      layers.push_back({n, 147, 147, 32, 64, 3, 3, 1, 1, 1});
    }
  }
  for (const Layer& layer : layers) measure(layer);
  return 0;
}
