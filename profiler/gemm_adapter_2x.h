// Arguments for CUTLASS 2.x cutlass::gemm::device::Gemm running a 1x1 convolution at stride 1
// without padding, transposed: M the output channels, N the pixels (N x P x Q), K the input
// channels; A the filter (K x C, row-major: a 1x1 KRSC filter), B the activations (C x NPQ,
// column-major: NHWC), C and D the output (K x NPQ, column-major: NHWC). The output's few channels
// are one tile of M, its pixels the long N (as cuBLAS's CUTLASS 2.x kernels run such layers).
#pragma once

#include <climits>
#include <string>

#include "cutlass/gemm_coord.h"
#include "cutlass/layout/matrix.h"
#include "cutlass/tensor_ref.h"

#include "adapter_common.h"

namespace kernelgen {

template <typename DeviceOp>
struct TransposedGemmArguments2x {
  using ElementA = typename DeviceOp::ElementA;
  using ElementB = typename DeviceOp::ElementB;
  using ElementC = typename DeviceOp::ElementC;
  using LayoutA = typename DeviceOp::LayoutA;
  using LayoutB = typename DeviceOp::LayoutB;
  using LayoutC = typename DeviceOp::LayoutC;
  using ElementCompute = typename DeviceOp::EpilogueOutputOp::ElementCompute;

  static std::string unsupported(const Conv2dProblem& p) {
    if (p.r != 1 || p.s != 1 || p.stride_h != 1 || p.stride_w != 1 || p.pad_h != 0 || p.pad_w != 0)
      return "a GEMM: needs a 1x1 filter at stride 1 without padding";
    if ((long long)p.n * p.p() * p.q() > INT_MAX) return "more pixels than the GEMM's extent holds";
    return {};
  }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    const cutlass::gemm::GemmCoord size(p.k, p.n * p.p() * p.q(), p.c);
    const cutlass::TensorRef<ElementA const, LayoutA> w(static_cast<ElementA const*>(b.w), LayoutA(p.c));
    const cutlass::TensorRef<ElementB const, LayoutB> x(static_cast<ElementB const*>(b.x), LayoutB(p.c));
    const cutlass::TensorRef<ElementC const, LayoutC> c(static_cast<ElementC const*>(b.y), LayoutC(p.k));
    const cutlass::TensorRef<ElementC, LayoutC> y(static_cast<ElementC*>(b.y), LayoutC(p.k));
    // alpha = 1, beta = 0: the output is written, never read.
    return typename DeviceOp::Arguments(size, w, x, c, y, {ElementCompute(1), ElementCompute(0)});
  }
};

template <typename DeviceOp>
using TransposedGemmOperation2x = CutlassOperation<DeviceOp, TransposedGemmArguments2x<DeviceOp>>;

}  // namespace kernelgen
