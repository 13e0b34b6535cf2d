// Arguments for CUTLASS 3.x cutlass::conv::device::ConvUniversalAdapter (conv2d fprop).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"

#include "adapter_common.h"

namespace kernelgen {

template <typename DeviceOp>
struct Conv2dFpropArguments3x {
  using Kernel = typename DeviceOp::ConvKernel;
  using ProblemShape = typename Kernel::ProblemShape;
  using ElementA = typename DeviceOp::ElementA;
  using ElementB = typename DeviceOp::ElementB;
  using ElementC = typename DeviceOp::ElementC;
  using ElementD = typename DeviceOp::ElementD;
  using StrideC = typename Kernel::StrideC;
  using StrideD = typename Kernel::StrideD;

  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    ProblemShape shape(cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, p.c}, {p.k, p.r, p.s, p.c},
                       {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, {p.stride_h, p.stride_w},
                       {p.dilation_h, p.dilation_w}, 1);
    StrideC stride_c;
    StrideD stride_d;
    cute::for_each(cute::make_seq<cute::rank<0>(StrideC{})>{}, [&](auto i) {
      cute::get<0, i>(stride_c) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    // alpha = 1, beta = 0: the output is written, never read.
    return typename DeviceOp::Arguments{
        shape,
        {static_cast<const ElementA*>(b.x), static_cast<const ElementB*>(b.w)},
        {{1.0f, 0.0f}, static_cast<const ElementC*>(b.y), stride_c, static_cast<ElementD*>(b.y), stride_d}};
  }
};

template <typename DeviceOp>
using Conv2dOperation3x = CutlassOperation<DeviceOp, Conv2dFpropArguments3x<DeviceOp>>;

}  // namespace kernelgen
