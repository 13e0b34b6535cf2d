// profiler/depthwise_mma.h's kernels run on the CPU: every tile, warp, mma tile and filter row of a
// layer, with the kernels' own index functions (depthwise_mma::unit, swizzled, first_column,
// second_column, a_registers, b_fragment) on a window laid out as the tensor copy's swizzle
// lays it out, and mma.sync m16n8k16 as the PTX ISA defines it from the lanes' registers, against a
// plain depthwise convolution of the same operands (small integers: every sum exact in float).
// tests/test_depthwise_mma.py compiles it with a header (shapes.h) defining SHAPES(X), X(R, S, TP, TQ,
// CB, WARPS) for each kernel shape, and reads one line a shape:
// the largest difference from the reference (0 when the kernel is right).
//
//   depthwise_mma_model N H W C R PAD    (R = S: the shapes of that filter only)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "depthwise_mma.h"
#include "mma_sync_model.h"
#include "shapes.h"

namespace {

namespace dm = kernelgen::depthwise_mma;

using mma_sync_model::bits;
using mma_sync_model::from_bits;
using mma_sync_model::mma;
using mma_sync_model::value;

// The layer by the kernel of this shape; the largest difference from the reference.
template <int R, int S, int TP, int TQ, int CB, int WARPS>
float run(int N, int H, int W, int C, int pad) {
  using Sh = dm::Shape<R, S, TP, TQ, CB, 2, WARPS * 32>;
  const int P = H + 2 * pad - R + 1, Q = W + 2 * pad - S + 1;
  std::vector<uint16_t> x(size_t(N) * H * W * C), w(size_t(C) * R * S), y(size_t(N) * P * Q * C, bits(-99.0f));
  for (size_t i = 0; i < x.size(); ++i) x[i] = bits(value(1, i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = bits(value(2, i));

  std::vector<unsigned char> window(Sh::kBoxBytes);
  for (int n = 0; n < N; ++n)
    for (int p0 = 0; p0 < P; p0 += TP)
      for (int q0 = 0; q0 < Q; q0 += TQ)
        for (int c_base = 0; c_base < C; c_base += CB * 8) {
          // The tensor copy: box (c_base.., q0 - pad.., p0 - pad..), zeros outside the tensor, swizzled.
          for (int row = 0; row < Sh::kInP; ++row)
            for (int col = 0; col < Sh::kInQ; ++col)
              for (int c = 0; c < CB * 8; ++c) {
                const int h = p0 - pad + row, ww = q0 - pad + col, cc = c_base + c;
                const uint16_t v = h >= 0 && h < H && ww >= 0 && ww < W && cc < C
                                       ? x[((size_t(n) * H + h) * W + ww) * C + cc] : 0;
                const unsigned at = dm::swizzled<CB>(row * Sh::kInQ + col, c / 8) + (c % 8) * 2;
                *reinterpret_cast<uint16_t*>(&window[at]) = v;
              }
          std::vector<uint16_t> taps(size_t(CB) * 8 * R * S, 0);
          for (int c = 0; c < CB * 8 && c_base + c < C; ++c)
            for (int rs = 0; rs < R * S; ++rs) taps[size_t(c) * R * S + rs] = w[size_t(c_base + c) * R * S + rs];
          constexpr int CW = 8;  // channels a warp: one channel vector
          for (int warp = 0; warp < WARPS; ++warp) {
            const int vector = warp % CB;
            uint32_t b[32][CW][R][2];
            for (int lane = 0; lane < 32; ++lane)
              for (int k = 0; k < CW; ++k)
                for (int r = 0; r < R; ++r)
                  dm::b_fragment<S>(&taps[(size_t(vector * CW + k) * R + r) * S], lane / 4, lane % 4, b[lane][k][r]);
            for (int m = warp / CB; m < Sh::kMmaTiles; m += WARPS / CB) {
              float acc[CW][32][4] = {};
              uint32_t lo[32][CW], hi[32][CW];
              dm::Unit units[32] = {};
              auto row = [&](int lane, int window_row, uint32_t(&l)[CW], uint32_t(&h)[CW]) {
                const int g = lane / 4, t = lane % 4;
                const int base = window_row * Sh::kInQ + units[lane].x0;
                const int first = base + dm::first_column(g, t), second = base + dm::second_column(g, t);
                auto load = [&](int pixel) { return *reinterpret_cast<const uint4*>(&window[dm::swizzled<CB>(pixel, vector)]); };
                dm::a_registers(load(first), load(second), load(first + 8), load(second + 8), g, l, h);
              };
              for (int lane = 0; lane < 32; ++lane) {
                const int index = m * 8 + lane / 4;
                units[lane] = dm::unit<TP, TQ>(index < Sh::kUnits ? index : 0);
                row(lane, units[lane].py, lo[lane], hi[lane]);
              }
              for (int r = 0; r < R; ++r) {
                uint32_t lo1[32][CW], hi1[32][CW];
                for (int lane = 0; lane < 32; ++lane) row(lane, units[lane].py + 1 + r, lo1[lane], hi1[lane]);
                for (int k = 0; k < CW; ++k) {
                  uint32_t a[32][4], bb[32][2];
                  for (int lane = 0; lane < 32; ++lane) {
                    a[lane][0] = lo[lane][k], a[lane][1] = lo1[lane][k], a[lane][2] = hi[lane][k], a[lane][3] = hi1[lane][k];
                    bb[lane][0] = b[lane][k][r][0], bb[lane][1] = b[lane][k][r][1];
                  }
                  mma(acc[k], a, bb);
                }
                for (int lane = 0; lane < 32; ++lane)
                  for (int k = 0; k < CW; ++k) lo[lane][k] = lo1[lane][k], hi[lane][k] = hi1[lane][k];
              }
              for (int lane = 0; lane < 32; ++lane) {
                const int index = m * 8 + lane / 4, t = lane % 4, c = c_base + vector * CW;
                if (index >= Sh::kUnits || c >= C) continue;
                for (int e = 0; e < 4; ++e) {
                  const int py = p0 + units[lane].py + e / 2, qx = q0 + units[lane].x0 + 2 * t + e % 2;
                  if (py < P && qx < Q)
                    for (int k = 0; k < CW; ++k) y[((size_t(n) * P + py) * Q + qx) * C + c + k] = bits(acc[k][lane][e]);
                }
              }
            }
          }
        }

  float worst = 0;
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int c = 0; c < C; ++c) {
          float sum = 0;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s) {
              const int h = p - pad + r, ww = q - pad + s;
              if (h >= 0 && h < H && ww >= 0 && ww < W)
                sum += from_bits(x[((size_t(n) * H + h) * W + ww) * C + c]) * from_bits(w[size_t(c) * R * S + r * S + s]);
            }
          worst = std::fmax(worst, std::fabs(sum - from_bits(y[((size_t(n) * P + p) * Q + q) * C + c])));
        }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s N H W C R PAD\n", argv[0]);
    return 2;
  }
  const int N = std::atoi(argv[1]), H = std::atoi(argv[2]), W = std::atoi(argv[3]), C = std::atoi(argv[4]),
            filter = std::atoi(argv[5]), pad = std::atoi(argv[6]);
#define RUN(R, S, TP, TQ, CB, WARPS) \
  if (R == filter)                    \
    std::printf("%d %d %d %d %d %d %g\n", R, S, TP, TQ, CB, WARPS, run<R, S, TP, TQ, CB, WARPS>(N, H, W, C, pad));
  SHAPES(RUN)
  return 0;
}
