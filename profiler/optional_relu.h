// The activation of the fused kernels of epilogue "optional_relu" (activation_at_launch.h): ReLU or
// none, chosen at launch, so that one compiled kernel computes the epilogues of steps bias, add and
// relu (bias, bias+relu, bias+add, bias+add+relu, ...), as a network's layers ask for one tile with
// and without a ReLU. The kind is an argument of the epilogue (CUTLASS's Sm90Compute passes a
// functor's Arguments to it), the same for every thread of a launch; a fragment's values are its
// ReLU or themselves, a select an element. (A switch over every activation of the fused epilogues
// made the kernels 3% slower with ReLU and 20-70% with GELU, SiLU or sigmoid: docs/results.md.)
#pragma once

#include "activation_at_launch.h"
#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"

namespace kernelgen {

struct OptionalReluArguments {
  int kind = kActivationNone;  // kActivationNone or kActivationRelu
};

template <typename T>
struct OptionalRelu {
  static const bool kIsHeavy = false;
  using Arguments = OptionalReluArguments;

  CUTLASS_HOST_DEVICE
  T operator()(T const &value, Arguments const &args) const {
    T const relu = cutlass::epilogue::thread::ReLu<T>{}(value);
    return args.kind == kActivationRelu ? relu : value;
  }
};

}  // namespace kernelgen
