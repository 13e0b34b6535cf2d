// SiLU and sigmoid of the fused epilogues (kernelgen/fusion.py: ACTIVATION_FUNCTORS) through the
// hardware's tanh approximation, as functors of CUTLASS's epilogue visitor tree (Sm90Compute calls
// them on Array<float, N> fragments): sigmoid(x) = 1/2 + tanh(x/2)/2, one tanh.approx.f32
// (cutlass::fast_tanh) and a multiply-add, where CUTLASS's Sigmoid and SiLu take an expf and a full
// fp32 division a value. On the H200 those make a 1x1 layer of few input channels several times
// slower than its bias-only epilogue (EfficientNet-B0's 112x112 16->96 layer at batch 32: 0.036 ms
// with bias, 0.097-0.147 ms with bias and SiLU; docs/results.md). tanh.approx's relative error is at
// most 2^-10.99, so sigmoid's absolute error is under 2.5e-4, a quarter of an fp16 unit at 1.
#pragma once

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/fast_math.h"

namespace kernelgen {

template <typename T>
struct SigmoidTanh {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  T operator()(T const &value) const {
    float const x = static_cast<float>(value);
    return T(0.5f * cutlass::fast_tanh(0.5f * x) + 0.5f);
  }
};

template <typename T>
struct SiluTanh {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  T operator()(T const &value) const {
    float const x = static_cast<float>(value);
    return T(x * (0.5f * cutlass::fast_tanh(0.5f * x) + 0.5f));
  }
};

// The fragments' forms: each element as above.
template <template <typename> class Op, typename T, int N>
struct Elementwise {
  static const bool kIsHeavy = true;

  CUTLASS_HOST_DEVICE
  cutlass::Array<T, N> operator()(cutlass::Array<T, N> const &value) const {
    cutlass::Array<T, N> y;
    Op<T> op;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      y[i] = op(value[i]);
    }
    return y;
  }
};

template <typename T, int N>
struct SigmoidTanh<cutlass::Array<T, N>> : Elementwise<SigmoidTanh, T, N> {};

template <typename T, int N>
struct SiluTanh<cutlass::Array<T, N>> : Elementwise<SiluTanh, T, N> {};

}  // namespace kernelgen
