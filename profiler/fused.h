// Fused epilogues for the profiler and the launcher, beside operation.h's plain convolution.
//
// A fused kernel computes y = activation(conv(x, w) + bias + residual): the bias one value an
// output channel (K of them), the residual a tensor of the output's shape and layout, each of the
// output's element type and 16-byte aligned; which of them it reads and its activation are the
// kernel's epilogue (kernelgen.fusion). Such a kernel is a FusedOperation: its epilogue operands,
// one pair a binding, are given with set_epilogue() before prepare(), which binds them with the
// binding of the same index. An operand the kernel's epilogue does not read may be null; a bias
// that is null reads as zeros.
#pragma once

#include <vector>

#include "operation.h"

namespace kernelgen {

struct EpilogueOperands {
  const void* bias = nullptr;      // K values, or null
  const void* residual = nullptr;  // the output's shape, or null where the epilogue adds none
};

class FusedOperation : public Operation {
 public:
  // The epilogue operands of the bindings the next prepare() is given, in their order.
  virtual void set_epilogue(const std::vector<EpilogueOperands>& operands) = 0;
};

}  // namespace kernelgen
