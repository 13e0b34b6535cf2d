// Arguments for CUTLASS 2.x cutlass::conv::device::ImplicitGemmConvolution (conv2d fprop).
#pragma once

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/layout/tensor.h"
#include "cutlass/tensor_ref.h"

#include "adapter_common.h"

namespace kernelgen {

template <typename DeviceOp>
struct Conv2dFpropArguments2x {
  using ElementA = typename DeviceOp::ElementA;
  using ElementB = typename DeviceOp::ElementB;
  using ElementC = typename DeviceOp::ElementC;
  using LayoutA = typename DeviceOp::LayoutA;
  using LayoutB = typename DeviceOp::LayoutB;
  using LayoutC = typename DeviceOp::LayoutC;
  using ElementCompute = typename DeviceOp::EpilogueOutputOp::ElementCompute;

  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    cutlass::conv::Conv2dProblemSize size(
        p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.p(), p.q(), p.pad_h, p.pad_w, p.stride_h, p.stride_w,
        p.dilation_h, p.dilation_w, cutlass::conv::Mode::kCrossCorrelation, 1, 1);
    constexpr auto kOp = cutlass::conv::Operator::kFprop;
    cutlass::TensorRef<ElementA, LayoutA> x(
        static_cast<ElementA*>(const_cast<void*>(b.x)),
        LayoutA::packed(cutlass::conv::implicit_gemm_tensor_a_extent(kOp, size)));
    cutlass::TensorRef<ElementB, LayoutB> w(
        static_cast<ElementB*>(const_cast<void*>(b.w)),
        LayoutB::packed(cutlass::conv::implicit_gemm_tensor_b_extent(kOp, size)));
    cutlass::TensorRef<ElementC, LayoutC> y(
        static_cast<ElementC*>(b.y), LayoutC::packed(cutlass::conv::implicit_gemm_tensor_c_extent(kOp, size)));
    // alpha = 1, beta = 0: the output is written, never read.
    return typename DeviceOp::Arguments(size, x, w, y, y, {ElementCompute(1), ElementCompute(0)});
  }
};

template <typename DeviceOp>
using Conv2dOperation2x = CutlassOperation<DeviceOp, Conv2dFpropArguments2x<DeviceOp>>;

}  // namespace kernelgen
