// Arguments for CUTLASS 3.x conv2d fprop kernels: cutlass::conv::device::ConvUniversalAdapter,
// and cutlass::gemm::device::GemmUniversalAdapter running a conv mainloop (conv_sm90_persistent.h).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "adapter_common.h"

namespace kernelgen {

// A CUTLASS 3.x convolution's shape: NHWC activations, KRSC filters, one group.
template <typename ProblemShape>
ProblemShape conv2d_shape_3x(const Conv2dProblem& p) {
  return ProblemShape(cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, p.c}, {p.k, p.r, p.s, p.c},
                      {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, {p.stride_h, p.stride_w},
                      {p.dilation_h, p.dilation_w}, 1);
}

template <typename DeviceOp>
struct Conv2dFpropArguments3x {
  using Kernel = typename DeviceOp::ConvKernel;
  using ProblemShape = typename Kernel::ProblemShape;
  using Operands = Operands3x<DeviceOp>;
  using StrideC = typename Kernel::StrideC;
  using StrideD = typename Kernel::StrideD;

  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    ProblemShape shape = conv2d_shape_3x<ProblemShape>(p);
    StrideC stride_c;
    StrideD stride_d;
    cute::for_each(cute::make_seq<cute::rank<0>(StrideC{})>{}, [&](auto i) {
      cute::get<0, i>(stride_c) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    return typename DeviceOp::Arguments{shape, {Operands::x(b), Operands::w(b)},
                                        Operands::epilogue(b, stride_c, stride_d)};
  }
};

template <typename DeviceOp>
using Conv2dOperation3x = CutlassOperation<DeviceOp, Conv2dFpropArguments3x<DeviceOp>>;

// A persistent conv (kernelgen::Fprop4GemmKernel mainloop): the kernel's problem is the
// linearised GEMM, the mainloop's arguments carry the convolution, and the NHWC output is the
// row-major (N*P*Q) x K matrix D.
template <typename DeviceOp>
struct Conv2dFpropPersistentArguments3x {
  using Kernel = typename DeviceOp::GemmKernel;
  using Mainloop = typename Kernel::CollectiveMainloop;
  using Operands = Operands3x<DeviceOp>;

  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    auto shape = conv2d_shape_3x<typename Mainloop::ConvShape>(p);
    auto gemm = Mainloop::gemm_shape(shape);
    auto mn1 = cute::make_shape(cute::get<0>(gemm), cute::get<1>(gemm), 1);
    return typename DeviceOp::Arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        gemm,
        {{Operands::x(b), Operands::w(b)}, shape},
        Operands::epilogue(b, cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, mn1),
                           cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, mn1))};
  }
};

template <typename DeviceOp>
using Conv2dPersistentOperation3x = CutlassOperation<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>;

}  // namespace kernelgen
