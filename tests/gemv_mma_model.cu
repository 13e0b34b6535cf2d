// profiler/gemv_mma.h's kernels run on the CPU: every CTA, warp, group of loads and mma step of a
// launch, with the kernel's own index functions (gemv_mma::a_row, first_k, a_fragment, b_fragment,
// sum_row, sum_column) and mma.sync m16n8k16 as the PTX ISA defines it from the lanes' registers,
// against a plain product of the same operands (small integers: every sum exact in float). Each
// load is checked to lie inside its operand and on its own width (16 or 4 bytes), as the GPU
// requires. tests/test_small_problems.py compiles it with a header (shapes.h) defining SHAPES(X),
// X(MaxM, Rows, Threads, Unroll, Vector) for each kernel shape, and reads one line a shape that
// takes the product: the shape and the largest difference from the reference (0 when right).
//
//   gemv_mma_model M N K
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemv_mma.h"
#include "mma_sync_model.h"
#include "shapes.h"

namespace {

namespace gm = kernelgen::gemv_mma;
using mma_sync_model::bits;
using mma_sync_model::from_bits;
using mma_sync_model::value;

// A lane's load of Vector halves at `at` of `operand` (zeros where `in` is false), as its words.
template <int Vector>
void load(const std::vector<uint16_t>& operand, size_t at, bool in, uint32_t* words) {
  if (in && (at + Vector > operand.size() || at % Vector)) {
    std::fprintf(stderr, "a load of %d halves at %zu: outside the operand (%zu) or off its width\n", Vector, at,
                 operand.size());
    std::exit(3);
  }
  for (int w = 0; w < Vector / 2; ++w)
    words[w] = in ? uint32_t(operand[at + 2 * w]) | uint32_t(operand[at + 2 * w + 1]) << 16 : 0u;
}

// The product by the kernel of this shape; the largest difference from the reference.
template <int MaxM, int Rows, int Threads, int Unroll, int Vector>
float run(int m, int n, int k) {
  constexpr int kWarps = Threads / 32, kMt = MaxM / 16, kNt = Rows / 8, kWords = Vector / 2;
  constexpr int kStream = Unroll * kWords;
  std::vector<uint16_t> a(size_t(m) * k), b(size_t(n) * k);
  std::vector<float> d(size_t(m) * n, -99.0f);  // the sums before the kernel rounds them to fp16
  for (size_t i = 0; i < a.size(); ++i) a[i] = bits(value(1, i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = bits(value(2, i));
  const int blocks = (k + 4 * Vector - 1) / (4 * Vector);

  for (int n0 = 0; n0 < n; n0 += Rows) {  // a CTA
    std::vector<float> partial(size_t(kWarps) * MaxM * Rows, 0.0f);
    for (int warp = 0; warp < kWarps; ++warp) {
      static float acc[kMt][kNt][32][4];
      for (auto& tile : acc)
        for (auto& column : tile)
          for (auto& lane : column)
            for (float& e : lane) e = 0.0f;
      for (int b0 = warp * Unroll; b0 < blocks; b0 += kWarps * Unroll) {
        static uint32_t aw[32][kMt][2][kStream], bw[32][kNt][kStream];
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          for (int u = 0; u < Unroll; ++u) {
            const int kk = gm::first_k<Vector>(b0 + u, t);
            const bool in = kk < k;
            for (int mt = 0; mt < kMt; ++mt)
              for (int h = 0; h < 2; ++h)
                load<Vector>(a, size_t(std::min(gm::a_row(mt, g, h), m - 1)) * k + kk, in, &aw[lane][mt][h][u * kWords]);
            for (int nt = 0; nt < kNt; ++nt)
              load<Vector>(b, size_t(std::min(n0 + nt * 8 + g, n - 1)) * k + kk, in, &bw[lane][nt][u * kWords]);
          }
        }
        for (int s = 0; s < kStream / 2; ++s)
          for (int mt = 0; mt < kMt; ++mt)
            for (int nt = 0; nt < kNt; ++nt) {
              uint32_t af[32][4], bf[32][2];
              for (int lane = 0; lane < 32; ++lane) {
                gm::a_fragment(aw[lane][mt][0], aw[lane][mt][1], s, af[lane]);
                gm::b_fragment(bw[lane][nt], s, bf[lane]);
              }
              mma_sync_model::mma(acc[mt][nt], af, bf);
            }
      }
      for (int lane = 0; lane < 32; ++lane)
        for (int mt = 0; mt < kMt; ++mt)
          for (int nt = 0; nt < kNt; ++nt)
            for (int e = 0; e < 4; ++e)
              partial[(size_t(warp) * MaxM + mt * 16 + gm::sum_row(lane / 4, e)) * Rows + nt * 8 +
                      gm::sum_column(lane % 4, e)] = acc[mt][nt][lane][e];
    }
    for (int i = 0; i < m && i < MaxM; ++i)
      for (int r = 0; r < Rows && n0 + r < n; ++r) {
        float sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) sum += partial[(size_t(w) * MaxM + i) * Rows + r];
        d[size_t(i) * n + n0 + r] = sum;
      }
  }

  float worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float sum = 0;
      for (int c = 0; c < k; ++c) sum += from_bits(a[size_t(i) * k + c]) * from_bits(b[size_t(j) * k + c]);
      worst = std::fmax(worst, std::fabs(sum - d[size_t(i) * n + j]));
    }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s M N K\n", argv[0]);
    return 2;
  }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
#define X(MAXM, ROWS, THREADS, UNROLL, VECTOR)                                                     \
  if (m <= MAXM && k % VECTOR == 0)                                                                \
    std::printf("%d %d %d %d %d %g\n", MAXM, ROWS, THREADS, UNROLL, VECTOR,                       \
                run<MAXM, ROWS, THREADS, UNROLL, VECTOR>(m, n, k));
  SHAPES(X)
#undef X
  return 0;
}
