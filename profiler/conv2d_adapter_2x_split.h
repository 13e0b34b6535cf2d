// Arguments for CUTLASS 2.x cutlass::conv::device::ImplicitGemmConvolution (conv2d fprop) whose
// kernel type says DeviceOp::kSplitKSlices: each output tile's K iterations split that many ways,
// the CTAs of a tile adding their partial sums into the output in turn (CUTLASS's serial
// split-K: a semaphore a tile in the workspace; the later CTAs' beta is 1, set by CUTLASS).
#pragma once

#include "conv2d_adapter_2x.h"

namespace kernelgen {

template <typename DeviceOp>
struct Conv2dFpropArguments2xSplit {
  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    typename DeviceOp::Arguments args = Conv2dFpropArguments2x<DeviceOp>::make(p, b);
    args.problem_size.split_k_slices = DeviceOp::kSplitKSlices;
    return args;
  }
};

template <typename DeviceOp>
using Conv2dOperation2xSplit = CutlassOperation<DeviceOp, Conv2dFpropArguments2xSplit<DeviceOp>>;

}  // namespace kernelgen
