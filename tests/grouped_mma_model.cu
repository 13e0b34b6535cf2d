// profiler/grouped_mma.h's kernels run on the CPU: every CTA, warp and k-step of a launch, with
// the kernel's own index functions (Window::source, or a listed kernel's ListedCopies for each of
// the CTA's 256 threads; Window::a_row, b_offset, Window::d_offset) and
// ldmatrix.x4 and mma.sync m16n8k16 as the PTX ISA defines them from the lanes' registers, against
// a plain grouped convolution of the same operands (small integers: every sum exact in float).
// tests/test_grouped_mma.py compiles it with a header of the kernel types (kernel_types.h: the
// types, and KERNELS(X) applying X to each) and reads one line a kernel and problem:
// "refused", or the largest difference from the reference (0 when the kernel is right).
//
//   grouped_mma_model N H W C K PAD STRIDE GROUPS CTAS
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "grouped_mma_listed.h"
#include "grouped_mma_pipelined.h"
#include "grouped_mma_sliced.h"
#include "grouped_mma_spread.h"
#include "grouped_mma_spread_pipelined.h"
#include "grouped_mma_wide.h"
#include "kernel_types.h"

namespace {

using kernelgen::Conv2dProblem;

// Which warp computes a unit of the CTA's slice on one of its 16-pixel tiles: the kernel type's
// own `computes` (GroupedMmaSpread), else warp local % 8 on every tile (the other kernels' loop).
template <typename Kernel, typename = void>
struct Warps {
  static bool computes(int warp, int local, int) { return local % 8 == warp; }
};
template <typename Kernel>
struct Warps<Kernel, std::void_t<decltype(Kernel::computes(0, 0, 0))>> {
  static bool computes(int warp, int local, int tile) { return Kernel::computes(warp, local, tile); }
};

// The window's copies: the kernel type's listed ones (GroupedMmaSpreadListed::Copies) for each of
// the CTA's threads, or none (Window::source's vectors).
template <typename Kernel, typename = void>
struct Listed {
  static constexpr bool kListed = false;
  template <typename Fill>
  static bool each(const Conv2dProblem&, int, int, int, int, Fill&&) { return true; }
};
template <typename Kernel>
struct Listed<Kernel, std::void_t<typename Kernel::Copies>> {
  static constexpr bool kListed = true;
  // fill(byte, offset in x or -1) for every copy of every thread, then every pixel's padding
  template <typename Fill>
  static bool each(const Conv2dProblem& L, int n, int c0, int p0, int q0, Fill&& fill) {
    using Copies = typename Kernel::Copies;
    for (int thread = 0; thread < 256; ++thread) {
      Copies copies;
      copies.list(L, thread);
      for (int j = 0; j < Copies::kEach && copies.has(j); ++j) {
        int byte;
        const long long at = copies.copy(L, n, c0, p0, q0, j, byte);
        if (!fill(byte, at)) return false;
      }
    }
    for (int slot = 0; slot < Copies::kPixels; ++slot)
      if (!fill(Copies::padding(slot), -1)) return false;
    return true;
  }
};

float value(unsigned seed, size_t i) { return float(int((i * 2654435761u + seed) % 7u) - 3); }

template <typename Kernel>
void model(const char* name, const Conv2dProblem& L, int groups, int ctas) {
  constexpr int CG = Kernel::kGroupChannels, TP = Kernel::kRows, TQ = Kernel::kColumns;
  using Win = typename Kernel::Win;
  using U = kernelgen::grouped_mma::Unit<CG>;
  if (!Kernel::can_implement(L, groups).empty()) {
    std::printf("%s refused\n", name);
    return;
  }
  const int P = L.p(), Q = L.q(), slice = Kernel::slice(L, ctas), splits = L.c / slice;
  std::vector<float> x(size_t(L.n) * L.h * L.w * L.c), w(size_t(L.k) * 9 * CG), y(size_t(L.n) * P * Q * L.k, NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = value(17, i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = value(91, i);
  const size_t elements = size_t(Win::kRows * Win::kColumns) * size_t(Win::pitch(slice) / 2);
  double worst = 0;
  for (int z = 0; z < L.n * splits; ++z)
    for (int by = 0; by < (P + TP - 1) / TP; ++by)
      for (int bx = 0; bx < (Q + TQ - 1) / TQ; ++bx) {
        const int n = z / splits, c0 = slice * (z % splits), p0 = by * TP, q0 = bx * TQ;
        std::vector<float> window(elements, NAN);  // by 16-bit element: byte / 2
        auto fill = [&](int byte, long long at) {
          if (byte < 0 || size_t(byte / 2) + 8 > elements || (at >= 0 && size_t(at) + 8 > x.size())) return false;
          for (int c = 0; c < 8; ++c) window[byte / 2 + c] = at < 0 ? 0.0f : x[at + c];
          return true;
        };
        bool inside = Listed<Kernel>::each(L, n, c0, p0, q0, fill);
        for (int v = 0; inside && !Listed<Kernel>::kListed && v < Win::vectors(slice); ++v) {
          int byte;
          const long long at = Win::source(L, slice, n, c0, p0, q0, v, byte);
          inside = fill(byte, at);
        }
        if (!inside) {
          std::printf("%s loads outside its window or the input\n", name);
          return;
        }
        for (int warp = 0; warp < 8; ++warp)
          for (int local = 0; local < slice / U::kOut; ++local) {
            const int unit = c0 / U::kOut + local;
            for (int tp = 0; tp < TP && p0 + tp < P; tp += Win::kTileRows)
              for (int mt = 0; mt < Win::kRowTiles; ++mt) {
                if (!Warps<Kernel>::computes(warp, local, (tp / Win::kTileRows) * Win::kRowTiles + mt)) continue;
                double d[U::kBlocks][16][8] = {};
                for (int i = 0; i < U::kSteps; ++i) {
                  float a[32][4][2];  // ldmatrix.x4: register m of lane t is row t / 4 of matrix m, whose
                  for (int t = 0; t < 32; ++t)  // row r lane 8m + r addresses; elements 2(t % 4), +1
                    for (int m = 0; m < 4; ++m) {
                      const int at = Win::template a_row<CG>(slice, local, tp, mt, i, 8 * m + t / 4) / 2 + 2 * (t % 4);
                      if (at < 0 || size_t(at) + 2 > elements) {
                        std::printf("%s reads outside its window\n", name);
                        return;
                      }
                      a[t][m][0] = window[at], a[t][m][1] = window[at + 1];
                    }
                  for (int nb = 0; nb < U::kBlocks; ++nb) {
                    float A[16][16], B[16][8];  // mma.m16n8k16: lane 4g + t holds A (g, 2t..), (g + 8, 2t..),
                    for (int g = 0; g < 8; ++g)   // (g, 8 + 2t..), (g + 8, 8 + 2t..); B (2t.., g), (8 + 2t.., g)
                      for (int t = 0; t < 4; ++t)
                        for (int e = 0; e < 2; ++e) {
                          const int lane = 4 * g + t;
                          A[g][2 * t + e] = a[lane][0][e], A[g + 8][2 * t + e] = a[lane][1][e];
                          A[g][8 + 2 * t + e] = a[lane][2][e], A[g + 8][8 + 2 * t + e] = a[lane][3][e];
                          for (int reg = 0; reg < 2; ++reg) {
                            const long long at = kernelgen::grouped_mma::b_offset<CG>(unit, lane, i, nb, reg, e);
                            B[8 * reg + 2 * t + e][g] = at < 0 ? 0.0f : w[at];
                          }
                        }
                    for (int r = 0; r < 16; ++r)
                      for (int c = 0; c < 8; ++c)
                        for (int k = 0; k < 16; ++k) d[nb][r][c] += double(A[r][k]) * B[k][c];
                  }
                }
                for (int lane = 0; lane < 32; ++lane)  // D: lane 4g + t holds (g, 2t..2t+1), (g + 8, 2t..)
                  for (int e = 0; e < 2; ++e)
                    for (int nb = 0; nb < U::kBlocks; ++nb) {
                      const long long at =
                          Win::template d_offset<CG>(L, P, Q, n, p0 + tp, q0, mt, unit, nb, lane, e);
                      if (at < 0) continue;
                      if (size_t(at) + 2 > y.size()) {
                        std::printf("%s writes outside its output\n", name);
                        return;
                      }
                      y[at] = float(d[nb][lane / 4 + 8 * e][2 * (lane % 4)]);
                      y[at + 1] = float(d[nb][lane / 4 + 8 * e][2 * (lane % 4) + 1]);
                    }
              }
          }
      }
  for (int n = 0; n < L.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < L.k; ++k) {
          double sum = 0;
          const int group = k / CG;
          for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
              const int h = p * L.stride_h - L.pad_h + r, col = q * L.stride_w - L.pad_w + s;
              if (h < 0 || h >= L.h || col < 0 || col >= L.w) continue;
              for (int j = 0; j < CG; ++j)
                sum += double(x[((size_t(n) * L.h + h) * L.w + col) * L.c + group * CG + j]) *
                       w[(size_t(k) * 9 + r * 3 + s) * CG + j];
            }
          const float got = y[((size_t(n) * P + p) * Q + q) * L.k + k];
          worst = std::isnan(got) ? INFINITY : std::fmax(worst, std::fabs(got - sum));
          if (std::isinf(worst)) break;
        }
  std::printf("%s %g\n", name, worst);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "usage: grouped_mma_model N H W C K PAD STRIDE GROUPS CTAS\n");
    return 2;
  }
  int v[9];
  for (int i = 0; i < 9; ++i) v[i] = std::atoi(argv[1 + i]);
  const Conv2dProblem L{v[0], v[1], v[2], v[3], v[4], 3, 3, v[5], v[5], v[6], v[6], 1, 1};
#define MODEL(K) model<K>(#K, L, v[7], v[8]);
  KERNELS(MODEL)
  return 0;
}
