// Depthwise and grouped convolutions that walk rows, at one stride (1 or 2), any padding, dilation 1:
// kernelgen::DepthwiseStrip<T, R, STRIDE, TQ, LANES, PDL, V> (groups = C = K, C even: above all C no
// multiple of 8) and kernelgen::GroupedStrip<T, R, STRIDE, TQ, LANES, CPG, PDL> (CPG = 4 or 8
// channels a group, K = C: RegNet's groups of 8).
//
// A CTA walks the output rows of one segment of one image, for one strip of TQ * LANES output
// columns. In NHWC the input columns a strip reads of one input row are one contiguous run of
// memory whatever C is: each input row's run is copied once to a ring of shared-memory slots in
// 16-byte pieces (cp.async, from the 16-byte boundary at or before its start), the copies of the
// next kAhead output rows' new input rows in flight while the CTA computes one (strip::Ring).
//  - DepthwiseItem: a thread computes V channels (c .. c + V - 1: a pair, or four where C is a
//    multiple of 4) of TQ consecutive output columns of each row, its taps in registers, reading
//    each input vector of its window from shared memory once a filter row: consecutive threads on
//    consecutive vectors (4- or 8-byte words of consecutive addresses; a slot starts 16-byte
//    aligned at the boundary at or before its run, so channel c of any column lies V-aligned).
//    depthwise_flat.h copies a band's whole input rows for each band, with no overlap of the
//    copies and the arithmetic, and reads the taps and R x (TP + R - 1) input pairs from shared
//    memory for each output pair.
//  - HalfItem (kernelgen::DepthwiseStripHalf<R, STRIDE, TQ, LANES, PDL>, fp16 only): DepthwiseItem's
//    pairs, multiplied and added as one __half2 (HFMA2, fp16 sums): half the instructions, and the
//    taps of a 7x7 filter in 49 registers.
//  - GroupedItem: a thread computes one output channel k of TQ columns, its group's R x R x CPG
//    taps in registers, reading the group's CPG input channels of each window column as one 8- or
//    16-byte word (the threads of a group read the same word, a broadcast). grouped_mma.h's tensor
//    cores take 16 channels a group and more; at 8 a group their tiles compute half empty.
//
// What a CTA does (its copies and its threads' outputs) is host and device code:
// tests/test_direct_conv.py runs each kernel's CTAs on the CPU, through the same ring of slots.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dependent_kernel.h"
#include "direct_conv.h"

namespace kernelgen {
namespace strip {

constexpr int kMostShared = 227 * 1024;  // a CTA's shared memory on sm_90 (opt-in)
constexpr long long kMostElements = 1LL << 31;  // 32-bit indices within the tensors
constexpr int kAhead = 2;  // output rows whose new input rows are being copied while one is computed
constexpr int kCheckRows = 3;  // output rows a segment in the CPU check (items, run)

// The output rows a CTA walks: `rows` a segment, `count` segments an image's strip.
struct Segments {
  int rows, count;
};

// One CTA's work: image n, output columns [q0, q0 + TQ * LANES) and rows [p0, p1); the input columns
// its strip reads, [first, last], within the image.
struct Cta {
  int n, q0, p0, p1, first, last;
};

// A copy of `bytes` (2 to 16) from global to shared memory, the rest of the 16 bytes zero: an
// asynchronous copy on the GPU (cp.async, completed by wait<>), a plain one on the host.
__host__ __device__ __forceinline__ void copy_piece(void* to, const void* from, int bytes) {
#ifdef __CUDA_ARCH__
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(from), "r"(bytes) : "memory");
#else
  std::memset(to, 0, 16);
  std::memcpy(to, from, bytes);
#endif
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// What the items share: a strip's geometry, its CTAs' segments, and the ring of input rows.
template <typename T_, int R, int STRIDE, int TQ, int LANES>
struct Ring {
  using T = T_;
  static_assert(R == 3 || R == 5 || R == 7, "R = S: 3, 5 or 7");
  static_assert(STRIDE == 1 || STRIDE == 2, "stride 1 or 2");
  static_assert(TQ >= 1 && TQ <= 8, "TQ output columns a thread: 1 to 8");
  static_assert(LANES >= 1 && LANES <= 8, "LANES threads across a strip: 1 to 8");
  static constexpr int kR = R, kS = R;
  static constexpr int kColumns = TQ * LANES;                       // output columns a strip
  static constexpr int kWindow = (TQ - 1) * STRIDE + R;             // input columns a thread reads
  static constexpr int kInputColumns = (kColumns - 1) * STRIDE + R;  // input columns a strip reads
  static constexpr int kSlots = R + STRIDE * kAhead;                // input rows staged at once

  __host__ __device__ static int rows_out(const Conv2dProblem& p) { return (p.h + 2 * p.pad_h - R) / STRIDE + 1; }
  __host__ __device__ static int columns_out(const Conv2dProblem& p) { return (p.w + 2 * p.pad_w - R) / STRIDE + 1; }
  __host__ __device__ static int strips(const Conv2dProblem& p) { return (columns_out(p) + kColumns - 1) / kColumns; }

  // A slot holds one input row's run of a strip, from the 16-byte boundary at or before its start.
  static long long slot_elements(const Conv2dProblem& p) { return ((long long)kInputColumns * p.c + 14) / 8 * 8; }
  static long long shared_bytes(const Conv2dProblem& p) { return kSlots * slot_elements(p) * (long long)sizeof(T); }

  // Segments of `rows` output rows, as many as make about `ctas` CTAs (at least one a strip).
  static Segments segments(const Conv2dProblem& p, long long ctas) {
    const long long base = (long long)p.n * strips(p);
    const int P = rows_out(p);
    long long count = base > 0 ? (ctas + base - 1) / base : 1;
    count = count < 1 ? 1 : count > P ? P : count;
    const int rows = int((P + count - 1) / count);
    return Segments{rows, (P + rows - 1) / rows};
  }

  // CTA `index`: segments innermost (a strip's neighbouring segments share their halo rows in L2),
  // then strips, then images.
  __host__ __device__ static Cta cta(const Conv2dProblem& p, const Segments& s, int index) {
    Cta at;
    const int segment = index % s.count, rest = index / s.count, strip = rest % strips(p);
    at.n = rest / strips(p);
    at.q0 = strip * kColumns;
    at.p0 = segment * s.rows;
    const int P = rows_out(p);
    at.p1 = at.p0 + s.rows < P ? at.p0 + s.rows : P;
    const int first = at.q0 * STRIDE - p.pad_w, last = first + kInputColumns - 1;
    at.first = first < 0 ? 0 : first;
    at.last = last >= p.w ? p.w - 1 : last;
    return at;
  }

  // Where input row h's run starts in x (the strip's first column), and the 16-byte boundary at or
  // before it: element `origin` of x is element 0 of the row's slot.
  __host__ __device__ static int run_start(const Conv2dProblem& p, const Cta& at, int h) {
    return ((at.n * p.h + h) * p.w + at.first) * p.c;
  }
  __host__ __device__ static int origin(const Conv2dProblem& p, const Cta& at, int h) { return run_start(p, at, h) & ~7; }
  __host__ __device__ static int slot_of(int h) { return h % kSlots; }

  // Pieces i, i + step, ... of input row h's run into its slot (h within the image).
  __host__ __device__ static void stage_row(const Conv2dProblem& p, const Cta& at, int h, long long slot_elements,
                                            const T* x, T* slots, int i, int step) {
    const int total = p.n * p.h * p.w * p.c;
    const int from = origin(p, at, h), end = run_start(p, at, h) + (at.last - at.first + 1) * p.c;
    T* slot = slots + slot_of(h) * slot_elements;
    for (int k = i; k < (end - from + 7) / 8; k += step) {
      const int g = from + 8 * k, left = total - g;
      copy_piece(slot + 8 * k, x + g, left >= 8 ? 16 : 2 * left);
    }
  }

  // The copies output row `row` adds to the ring: all its input rows if it is the CTA's first, else
  // the STRIDE rows past the previous output row's; none past the CTA's rows or outside the image.
  __host__ __device__ static void stage_output_row(const Conv2dProblem& p, const Cta& at, int row,
                                                   long long slot_elements, const T* x, T* slots, int i, int step) {
    if (row >= at.p1) return;
    const int top = row * STRIDE - p.pad_h;
    for (int r = row == at.p0 ? 0 : R - STRIDE; r < R; ++r) {
      if (top + r >= 0 && top + r < p.h) stage_row(p, at, top + r, slot_elements, x, slots, i, step);
    }
  }

  // For each filter row r and window column i (0 .. kWindow - 1) of the TQ output columns from q of
  // output row `row` that lie in the image, visit(r, i, element): element the slot's copy of input
  // (h, col, c) (a slot's element 0 is x's element origin(h)).
  template <class Visit>
  __host__ __device__ static void walk(const Conv2dProblem& p, const Cta& at, int row, int c, int q,
                                       long long slot_elements, const T* slots, Visit&& visit) {
    const int left = q * STRIDE - p.pad_w;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int h = row * STRIDE - p.pad_h + r;
      if (h < 0 || h >= p.h) continue;
      const T* slot = slots + slot_of(h) * slot_elements;
      const int base = ((at.n * p.h + h) * p.w) * p.c + c - origin(p, at, h);
#pragma unroll
      for (int i = 0; i < kWindow; ++i) {
        const int col = left + i;
        if (col >= 0 && col < p.w) visit(r, i, slot + base + col * p.c);
      }
    }
  }

  // The checks every item makes after its channels': the stride, dilation 1, 32-bit indices (then
  // fit_refused: its threads and the ring).
  static std::string shape_refused(const Conv2dProblem& p) {
    if (p.stride_h != STRIDE || p.stride_w != STRIDE) return "built for stride " + std::to_string(STRIDE);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if ((long long)p.n * p.h * p.w * p.c >= kMostElements ||
        (long long)p.n * rows_out(p) * columns_out(p) * p.k >= kMostElements) {
      return "2^31 elements or more (32-bit indices)";
    }
    return {};
  }
  // `units` threads of `what` for each of the LANES, at most `most` a CTA; then the ring.
  static std::string fit_refused(const Conv2dProblem& p, int units, const char* what, int most) {
    if (units * LANES > most) {
      return std::to_string(units) + " " + what + " x " + std::to_string(LANES) + " lanes is more than " +
             std::to_string(most) + " threads a CTA";
    }
    if (shared_bytes(p) > kMostShared) {
      return std::to_string(kSlots) + " input rows of a strip are more than a CTA's shared memory";
    }
    return {};
  }

  // A depthwise item's checks (V channels a thread, `most` threads a CTA), in their order.
  static std::string depthwise_refused(const Conv2dProblem& p, int groups, int V, int most) {
    if (groups != p.c || p.k != p.c) return "a depthwise kernel: needs groups = C = K";
    if (p.c % V != 0) {
      return V == 2 ? "C must be even (two channels a 4-byte access)" : "C must be a multiple of 4 (four channels an 8-byte access)";
    }
    std::string why = shape_refused(p);
    if (!why.empty()) return why;
    return fit_refused(p, p.c / V, V == 2 ? "channel pairs" : "channel quads", most);
  }

  // The CPU check's CTAs: segments of kCheckRows output rows.
  static long long check_ctas(const Conv2dProblem& p) {
    const int P = rows_out(p);
    return (long long)p.n * strips(p) * ((P + kCheckRows - 1) / kCheckRows);
  }

  // CTA `index` of the CPU check's, on the host as its threads run it on the GPU: the ring's slots
  // start as NaN, so that an output read from a row not copied (or overwritten) is wrong.
  template <class Item>
  static void run_cta(const Conv2dProblem& p, int index, const T* x, const T* w, T* y) {
    const int P = rows_out(p);
    const Segments s{kCheckRows, (P + kCheckRows - 1) / kCheckRows};
    const Cta at = cta(p, s, index);
    const long long slot = slot_elements(p);
    std::vector<uint16_t> storage(size_t(kSlots * slot) + 8, 0x7e00);
    T* slots = reinterpret_cast<T*>(storage.data());
    for (int k = 0; k < kAhead; ++k) stage_output_row(p, at, at.p0 + k, slot, x, slots, 0, 1);
    for (int row = at.p0; row < at.p1; ++row) {
      stage_output_row(p, at, row + kAhead, slot, x, slots, 0, 1);
      for (int u = 0; u < Item::units(p); ++u) {
        typename Item::Taps tap;
        Item::taps(p, u, w, tap);
        Item::compute(p, at, row, u, slot, slots, tap, y);
      }
    }
  }
};

template <typename T_, int R, int STRIDE, int TQ, int LANES, int V = 2>
struct DepthwiseItem : Ring<T_, R, STRIDE, TQ, LANES> {
  using Base = Ring<T_, R, STRIDE, TQ, LANES>;
  using T = T_;
  using Base::columns_out;
  using Base::rows_out;
  static_assert(V == 2 || V == 4, "V channels a thread: 2 or 4");
  static_assert(R <= 5, "7x7 taps of fp32 pairs do not fit a thread's registers (HalfItem)");
  // a CTA's threads at most, so that a thread's taps, sums and window fit its registers without
  // spilling: 64 (3x3 pairs), 128 (3x3 quads, 5x5 pairs) or 168 (5x5 quads)
  static constexpr int kMostThreads = R == 3 && V == 2 ? 1024 : R == 5 && V == 4 ? 384 : 512;
  using Taps = float[R * R][V];

  // A thread V channels of TQ columns: C / V vectors for each of the strip's LANES.
  __host__ __device__ static int units(const Conv2dProblem& p) { return p.c / V * LANES; }

  // V consecutive elements at `at` (V-aligned) in one 4- or 8-byte access, and back.
  using Word = typename std::conditional<V == 2, uint32_t, uint2>::type;
  __host__ __device__ static void load(const T* at, float (&out)[V]) {
    const Word bits = *reinterpret_cast<const Word*>(at);
    T e[V];
    memcpy(e, &bits, sizeof(Word));
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = direct::to_float(e[v]);
  }
  __host__ __device__ static void store(T* at, const float (&in)[V]) {
    T e[V];
#pragma unroll
    for (int v = 0; v < V; ++v) e[v] = direct::from_float<T>(in[v]);
    Word bits;
    memcpy(&bits, e, sizeof(Word));
    *reinterpret_cast<Word*>(at) = bits;
  }

  // The taps of unit u's channels c .. c + V - 1, from the K x R x S filter (one channel a filter).
  __host__ __device__ static void taps(const Conv2dProblem& p, int u, const T* w, Taps& tap) {
    const int c = V * (u % (p.c / V));
#pragma unroll
    for (int t = 0; t < R * R; ++t) {
#pragma unroll
      for (int v = 0; v < V; ++v) tap[t][v] = direct::to_float(direct::read(w + (c + v) * R * R + t));
    }
  }

  // Unit u's outputs of output row `row`: channels c .. c + V - 1 of its TQ columns, from the slots.
  __host__ __device__ static void compute(const Conv2dProblem& p, const Cta& at, int row, int u,
                                          long long slot_elements, const T* slots, const Taps& tap,
                                          T* y) {
    const int c = V * (u % (p.c / V)), q = at.q0 + (u / (p.c / V)) * TQ;
    const int P = rows_out(p), Q = columns_out(p);
    float sums[TQ][V] = {};
    Base::walk(p, at, row, c, q, slot_elements, slots, [&](int r, int i, const T* element) {
      float in[V];
      load(element, in);
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
        const int s = i - t * STRIDE;  // the filter column input column i is to output column q + t
        if (s < 0 || s >= R) continue;
#pragma unroll
        for (int v = 0; v < V; ++v) sums[t][v] += in[v] * tap[r * R + s][v];
      }
    });
#pragma unroll
    for (int t = 0; t < TQ; ++t) {
      if (q + t >= Q || row >= P) continue;
      store(y + (((at.n * P + row) * Q + q + t) * p.c + c), sums[t]);
    }
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return Base::depthwise_refused(p, groups, V, kMostThreads);
  }

  static long long items(const Conv2dProblem& p, const direct::Shape&) { return Base::check_ctas(p); }
  static void run(const Conv2dProblem& p, const direct::Shape&, long long index, const T* x, const T* w, T* y) {
    Base::template run_cta<DepthwiseItem>(p, int(index), x, w, y);
  }
};

// a * b + c, a pair at a time in fp16 (HFMA2 on the GPU; on the host each half's fp32 fused
// multiply-add, rounded once to fp16, as HFMA2 rounds).
__host__ __device__ __forceinline__ __half2 fma2(__half2 a, __half2 b, __half2 c) {
#ifdef __CUDA_ARCH__
  return __hfma2(a, b, c);
#else
  __half x[2], y[2], z[2], r[2];
  memcpy(x, &a, 4);
  memcpy(y, &b, 4);
  memcpy(z, &c, 4);
  for (int i = 0; i < 2; ++i) r[i] = __float2half_rn(std::fma(__half2float(x[i]), __half2float(y[i]), __half2float(z[i])));
  __half2 out;
  memcpy(&out, r, 4);
  return out;
#endif
}

// DepthwiseItem's pairs in fp16 arithmetic: the taps of channels (c, c + 1) one __half2 a tap, each
// input pair multiplied and added as one.
template <int R, int STRIDE, int TQ, int LANES>
struct HalfItem : Ring<__half, R, STRIDE, TQ, LANES> {
  using Base = Ring<__half, R, STRIDE, TQ, LANES>;
  using T = __half;
  using Base::columns_out;
  using Base::rows_out;
  static constexpr int kMostThreads = R == 7 ? 384 : R == 5 ? 512 : 1024;  // 168, 128 or 64 registers
  static constexpr double kTolerance = 2e-2;                // fp16 sums (the CPU check's)
  using Taps = __half2[R * R];

  __host__ __device__ static int units(const Conv2dProblem& p) { return p.c / 2 * LANES; }

  __host__ __device__ static void taps(const Conv2dProblem& p, int u, const T* w, Taps& tap) {
    const int c = 2 * (u % (p.c / 2));
#pragma unroll
    for (int t = 0; t < R * R; ++t) {
      const T two[2] = {direct::read(w + c * R * R + t), direct::read(w + (c + 1) * R * R + t)};
      memcpy(&tap[t], two, 4);
    }
  }

  __host__ __device__ static void compute(const Conv2dProblem& p, const Cta& at, int row, int u,
                                          long long slot_elements, const T* slots, const Taps& tap, T* y) {
    const int c = 2 * (u % (p.c / 2)), q = at.q0 + (u / (p.c / 2)) * TQ;
    const int P = rows_out(p), Q = columns_out(p);
    __half2 sums[TQ];
    const uint32_t zero = 0;
#pragma unroll
    for (int t = 0; t < TQ; ++t) memcpy(&sums[t], &zero, 4);
    Base::walk(p, at, row, c, q, slot_elements, slots, [&](int r, int i, const T* element) {
      const __half2 in = *reinterpret_cast<const __half2*>(element);
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
        const int s = i - t * STRIDE;  // the filter column input column i is to output column q + t
        if (s >= 0 && s < R) sums[t] = fma2(in, tap[r * R + s], sums[t]);
      }
    });
#pragma unroll
    for (int t = 0; t < TQ; ++t) {
      if (q + t >= Q || row >= P) continue;
      *reinterpret_cast<__half2*>(y + (((at.n * P + row) * Q + q + t) * p.c + c)) = sums[t];
    }
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    return Base::depthwise_refused(p, groups, 2, kMostThreads);
  }

  static long long items(const Conv2dProblem& p, const direct::Shape&) { return Base::check_ctas(p); }
  static void run(const Conv2dProblem& p, const direct::Shape&, long long index, const T* x, const T* w, T* y) {
    Base::template run_cta<HalfItem>(p, int(index), x, w, y);
  }
};

// One output channel k of TQ columns a thread, for groups of CPG channels and K = C (CPG output
// channels a group): the group's CPG inputs of a window column in one 8- or 16-byte word.
template <typename T_, int R, int STRIDE, int TQ, int LANES, int CPG>
struct GroupedItem : Ring<T_, R, STRIDE, TQ, LANES> {
  using Base = Ring<T_, R, STRIDE, TQ, LANES>;
  using T = T_;
  using Base::columns_out;
  using Base::rows_out;
  static_assert(CPG == 4 || CPG == 8, "CPG channels a group: 4 or 8");
  static constexpr int kMostThreads = 512;  // 128 registers a thread: R x R x CPG taps
  static_assert(R == 3 || CPG == 4, "5x5 taps of 8 channels do not fit a thread's registers");
  using Taps = float[R * R][CPG];
  using Word = typename std::conditional<CPG == 4, uint2, uint4>::type;

  // A thread an output channel of TQ columns: K for each of the strip's LANES.
  __host__ __device__ static int units(const Conv2dProblem& p) { return p.k * LANES; }

  // The taps of unit u's output channel k: its filter's R x R x CPG (KRSC, C of the group), a tap's
  // CPG channels one 8- or 16-byte read.
  __host__ __device__ static void taps(const Conv2dProblem& p, int u, const T* w, Taps& tap) {
    const int k = u % p.k;
#pragma unroll
    for (int t = 0; t < R * R; ++t) {
      const Word bits = direct::read(reinterpret_cast<const Word*>(w + (k * R * R + t) * CPG));
      T e[CPG];
      memcpy(e, &bits, sizeof(Word));
#pragma unroll
      for (int c = 0; c < CPG; ++c) tap[t][c] = direct::to_float(e[c]);
    }
  }

  // Unit u's outputs of output row `row`: output channel k of its TQ columns, from the slots.
  __host__ __device__ static void compute(const Conv2dProblem& p, const Cta& at, int row, int u,
                                          long long slot_elements, const T* slots, const Taps& tap, T* y) {
    const int k = u % p.k, c0 = k / CPG * CPG, q = at.q0 + (u / p.k) * TQ;
    const int P = rows_out(p), Q = columns_out(p);
    float sums[TQ] = {};
    Base::walk(p, at, row, c0, q, slot_elements, slots, [&](int r, int i, const T* element) {
      const Word bits = *reinterpret_cast<const Word*>(element);
      T e[CPG];
      memcpy(e, &bits, sizeof(Word));
      float in[CPG];
#pragma unroll
      for (int c = 0; c < CPG; ++c) in[c] = direct::to_float(e[c]);
#pragma unroll
      for (int t = 0; t < TQ; ++t) {
        const int s = i - t * STRIDE;  // the filter column input column i is to output column q + t
        if (s < 0 || s >= R) continue;
#pragma unroll
        for (int c = 0; c < CPG; ++c) sums[t] += in[c] * tap[r * R + s][c];
      }
    });
#pragma unroll
    for (int t = 0; t < TQ; ++t) {
      if (q + t >= Q || row >= P) continue;
      y[((at.n * P + row) * Q + q + t) * p.k + k] = direct::from_float<T>(sums[t]);
    }
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (p.c / groups != CPG) return "built for " + std::to_string(CPG) + " channels a group";
    if (p.k != p.c) return "needs K = C (as many output channels a group as input channels)";
    std::string why = Base::shape_refused(p);
    if (!why.empty()) return why;
    return Base::fit_refused(p, p.k, "output channels", kMostThreads);
  }

  static long long items(const Conv2dProblem& p, const direct::Shape&) { return Base::check_ctas(p); }
  static void run(const Conv2dProblem& p, const direct::Shape&, long long index, const T* x, const T* w, T* y) {
    Base::template run_cta<GroupedItem>(p, int(index), x, w, y);
  }
};

// A CTA a strip's segment: the ring's first kAhead output rows' copies, then for each output row
// the copies of the row kAhead ahead and this row's outputs.
template <typename Item, bool PDL>
__global__ void __launch_bounds__(Item::kMostThreads) strip_kernel(Conv2dProblem p, Segments s, long long slot,
                                                                  const typename Item::T* x,
                                                                  const typename Item::T* w, typename Item::T* y) {
  using T = typename Item::T;
  extern __shared__ uint4 shared[];
  T* slots = reinterpret_cast<T*>(shared);
  if constexpr (PDL) pdl::wait_then_release();  // the kernel before it has written the input
  const Cta at = Item::cta(p, s, blockIdx.x);
  const int u = threadIdx.x;
  const bool active = u < Item::units(p);
  typename Item::Taps tap;
  if (active) Item::taps(p, u, w, tap);
#pragma unroll
  for (int k = 0; k < kAhead; ++k) {
    Item::stage_output_row(p, at, at.p0 + k, slot, x, slots, threadIdx.x, blockDim.x);
    commit();
  }
  for (int row = at.p0; row < at.p1; ++row) {
    wait<kAhead - 1>();  // this thread's copies of this row's input rows are done
    __syncthreads();     // and every thread's; every thread is past the previous row's outputs
    Item::stage_output_row(p, at, row + kAhead, slot, x, slots, threadIdx.x, blockDim.x);
    commit();
    if (active) Item::compute(p, at, row, u, slot, slots, tap, y);
  }
  wait<0>();
}

}  // namespace strip

// A kernel type for direct_conv.h's DirectOperation (DirectConv's checks, then the item's): a CTA a
// segment of a strip, as many segments as make about the CTAs the GPU holds at once; `ctas` from
// configure() is the SM count.
template <typename Item, bool PDL>
struct StripConv : DirectConv<Item> {
  using T = typename Item::T;

  static int& registers() {
    static int kept = 0;
    return kept;
  }

  static int configure(std::string& why) {
    const auto kernel = strip::strip_kernel<Item, PDL>;
    int device = 0, sms = 0;
    cudaFuncAttributes attributes{};
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, strip::kMostShared) != cudaSuccess ||
        cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    registers() = attributes.numRegs;
    return sms;
  }

  // The CTAs of `threads` threads and `shared` bytes a SM holds at once (sm_90: 2048 threads, 64K
  // registers allocated 256 a warp at a time, 228 KB of shared memory with 1 KB reserved a CTA).
  static int resident(int threads, long long shared) {
    const int warps = threads / 32, per_warp = (registers() * 32 + 255) / 256 * 256;
    int most = 2048 / threads;
    const int by_registers = per_warp > 0 ? 65536 / (per_warp * warps) : most;
    const int by_shared = int(228 * 1024 / (shared + 1024));
    most = by_registers < most ? by_registers : most;
    most = by_shared < most ? by_shared : most;
    return most < 1 ? 1 : most > 32 ? 32 : most;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int sms, cudaStream_t stream, int) {
    const int threads = (Item::units(p) + 31) / 32 * 32;  // a thread a unit, whole warps
    const long long shared = Item::shared_bytes(p);
    const strip::Segments s = Item::segments(p, (long long)sms * resident(threads, shared));
    const int grid = p.n * Item::strips(p) * s.count;
    if (grid == 0) return;
    const auto kernel = strip::strip_kernel<Item, PDL>;
    const T* x = static_cast<const T*>(b.x);
    const T* w = static_cast<const T*>(b.w);
    T* y = static_cast<T*>(b.y);
    if constexpr (PDL) {
      pdl::launch(kernel, dim3(grid), dim3(threads), size_t(shared), stream, p, s, Item::slot_elements(p), x, w, y);
    } else {
      kernel<<<grid, threads, size_t(shared), stream>>>(p, s, Item::slot_elements(p), x, w, y);
    }
  }
};

template <typename T, int R, int STRIDE, int TQ, int LANES, bool PDL = false, int V = 2>
using DepthwiseStrip = StripConv<strip::DepthwiseItem<T, R, STRIDE, TQ, LANES, V>, PDL>;
template <typename T, int R, int STRIDE, int TQ, int LANES, int CPG, bool PDL = false>
using GroupedStrip = StripConv<strip::GroupedItem<T, R, STRIDE, TQ, LANES, CPG>, PDL>;
template <int R, int STRIDE, int TQ, int LANES, bool PDL = false>
using DepthwiseStripHalf = StripConv<strip::HalfItem<R, STRIDE, TQ, LANES>, PDL>;

}  // namespace kernelgen
