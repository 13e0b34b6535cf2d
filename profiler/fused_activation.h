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

}  // namespace kernelgen
