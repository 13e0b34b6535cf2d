// Fused kernels whose activation is chosen at launch (epilogue "optional_relu", kernelgen/fusion.py:
// ReLU or none, optional_relu.h): one kernel serves the layers of several epilogues of its tile,
// y = activation(conv(x, w) + bias + residual), the bias and residual given as for the other fused
// kernels (fused.h) and the activation with set_activation() before prepare().
#pragma once

#include "fused.h"

namespace kernelgen {

// The activations, as best_kernels::Activation numbers them (best_kernels.h).
enum ActivationKind : int { kActivationNone, kActivationRelu, kActivationSilu, kActivationGelu,
                            kActivationHardswish, kActivationSigmoid };

class ActivationAtLaunch {
 public:
  virtual ~ActivationAtLaunch() = default;
  // The activation (ActivationKind) of the launches the next prepare() sets up.
  virtual void set_activation(int kind) = 0;
};

}  // namespace kernelgen
