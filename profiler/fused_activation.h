// Activations of the fused epilogues (kernelgen/fusion.py: ACTIVATION_FUNCTORS) that this project
// computes itself, as functors of CUTLASS's epilogue visitor tree (Sm90Compute calls them on
// Array<float, N> fragments).
#pragma once

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/fast_math.h"

namespace kernelgen {

// GELU in its tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), tanh by the hardware's
// approximation (tanh.approx.f32, cutlass::fast_tanh): as cuBLASLt's GELU epilogue computes it.
// It serves the layers of torch.nn.GELU(): it differs from the erf form by at most 4.8e-4 (at
// |x| = 2.7, tests/test_fusion.py), half an fp16 unit at 1, and the profiler checks each fused kernel
// against the erf form. The erf form costs a fused GEMM with a short K its speed: on the H200 the
// epilogue outweighs the main loop, and ConvNeXt-T's m=100352 n=384 k=96 expansion took 0.123 ms
// with cutlass::epilogue::thread::GELU (erff), 0.112 ms with an erf of a dozen instructions
// (Abramowitz and Stegun 7.1.26), and 0.050 ms with this one (docs/results.md).
template <typename T>
struct Gelu {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  T operator()(T const &value) const {
    float const x = static_cast<float>(value);
    float const inner = 0.7978845608028654f * x * (1.0f + 0.044715f * x * x);
    return T(0.5f * x * (1.0f + cutlass::fast_tanh(inner)));
  }
};

template <typename T, int N>
struct Gelu<cutlass::Array<T, N>> {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  cutlass::Array<T, N> operator()(cutlass::Array<T, N> const &value) const {
    cutlass::Array<T, N> y;
    Gelu<T> gelu;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      y[i] = gelu(value[i]);
    }
    return y;
  }
};

// The same GELU for a kernel of fp16 output (kernelgen/fusion.py: fusion_cpp), two values an
// instruction on the device: each pair of the fp32 fragment rounded to fp16 as the output is
// (saturated to the largest finite value, so that x/2 (1 + tanh) of a large negative x is 0, not
// inf - inf), then the polynomial in fp16x2 arithmetic and tanh.approx.f16x2: a pair of values
// takes one tanh.approx where the fp32 form takes two, and five fp16x2 operations and three
// conversions where it takes ten fp32 operations. A fused GEMM of short K waits for its last tiles'
// epilogues, and there this form is faster (docs/results.md).
// Its error: within 1.5e-3 of the erf form relative to max(1, |y|), where the fp32 form is within
// 4.8e-4; largest for x near -3, where x/2 (1 + tanh) cancels and tanh's fp16 rounding counts
// (tests/test_fusion.py measures both on the GPU). On the host, the fp32 form.
template <typename T>
struct GeluF16x2 : Gelu<T> {};

template <int N>
struct GeluF16x2<cutlass::Array<float, N>> {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  cutlass::Array<float, N> operator()(cutlass::Array<float, N> const &value) const {
    cutlass::Array<float, N> y;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t const c0 = 0x3a623a62u;  // sqrt(2/pi) in fp16, twice: 0.7979
    uint32_t const c1 = 0x28912891u;  // sqrt(2/pi) * 0.044715 in fp16, twice: 0.03567
    uint32_t const half = 0x38003800u;  // 0.5, twice
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i + 1 < N; i += 2) {
      uint32_t x, x2, inner, t, hx, r;
      asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(x) : "f"(value[i + 1]), "f"(value[i]));
      asm("mul.rn.f16x2 %0, %1, %1;" : "=r"(x2) : "r"(x));
      asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(inner) : "r"(x2), "r"(c1), "r"(c0));
      asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(inner) : "r"(inner), "r"(x));
      asm("tanh.approx.f16x2 %0, %1;" : "=r"(t) : "r"(inner));
      asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(hx) : "r"(x), "r"(half));
      asm("fma.rn.f16x2 %0, %1, %2, %1;" : "=r"(r) : "r"(hx), "r"(t));
      unsigned short lo = static_cast<unsigned short>(r & 0xffffu), hi = static_cast<unsigned short>(r >> 16);
      asm("cvt.f32.f16 %0, %1;" : "=f"(y[i]) : "h"(lo));
      asm("cvt.f32.f16 %0, %1;" : "=f"(y[i + 1]) : "h"(hi));
    }
    if (N % 2) {
      y[N - 1] = Gelu<float>()(value[N - 1]);
    }
#else
    Gelu<float> gelu;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      y[i] = gelu(value[i]);
    }
#endif
    return y;
  }
};

}  // namespace kernelgen
