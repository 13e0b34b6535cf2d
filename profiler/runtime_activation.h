// The activation of the fused kernels of epilogue "any" (fused_any.h), chosen at launch: one
// compiled kernel computes every activation of the fused epilogues. The kind is an argument of the
// epilogue (CUTLASS's Sm90Compute passes a functor's Arguments to it), the same for every thread
// of a launch, so each fragment takes one branch; each branch is the functor the kernel of that
// one epilogue computes (kernelgen/fusion.py: ACTIVATION_FUNCTORS).
#pragma once

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "fused_activation.h"
#include "fused_any.h"
#include "tanh_activation.h"

namespace kernelgen {

struct RuntimeActivationArguments {
  int kind = kActivationNone;  // ActivationKind
};

// GeluFn: the GELU of the kernel's output type (fusion.py: FP16_FUNCTORS).
template <template <typename> class GeluFn, typename T>
struct RuntimeActivationOf {
  static const bool kIsHeavy = true;
  using Arguments = RuntimeActivationArguments;

  CUTLASS_HOST_DEVICE
  T operator()(T const &value, Arguments const &args) const {
    switch (args.kind) {
      case kActivationRelu: return cutlass::epilogue::thread::ReLu<T>{}(value);
      case kActivationSilu: return SiluTanh<T>{}(value);
      case kActivationGelu: return GeluFn<T>{}(value);
      case kActivationHardswish: return cutlass::epilogue::thread::HardSwish<T>{}(value);
      case kActivationSigmoid: return SigmoidTanh<T>{}(value);
      default: return value;
    }
  }
};

template <typename T>
struct RuntimeActivation : RuntimeActivationOf<Gelu, T> {};

template <typename T>
struct RuntimeActivationF16x2 : RuntimeActivationOf<GeluF16x2, T> {};

}  // namespace kernelgen
