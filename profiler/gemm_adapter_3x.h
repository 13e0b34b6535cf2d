// Arguments for CUTLASS 3.x cutlass::gemm::device::GemmUniversalAdapter, applied to the
// convolutions that are GEMMs: 1x1, stride 1, no padding, NHWC. Then M = N*H*W, N = K,
// K = C; the activations are A (M x K, row-major), the KRSC filters are B (K contiguous)
// and the output is D (M x N, row-major).
#pragma once

#include <string>

#include "cute/tensor.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "adapter_common.h"

namespace kernelgen {

template <typename DeviceOp>
struct GemmArguments3x {
  using Kernel = typename DeviceOp::GemmKernel;
  using Operands = Operands3x<DeviceOp>;

  static std::string unsupported(const Conv2dProblem& p) {
    bool gemm = p.r == 1 && p.s == 1 && p.pad_h == 0 && p.pad_w == 0 && p.dilation_h == 1 && p.dilation_w == 1 &&
                ((p.stride_h == 1 && p.stride_w == 1) || (p.h == 1 && p.w == 1));
    return gemm ? std::string() : "not a GEMM: needs a 1x1, stride-1, unpadded convolution";
  }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    int m = p.n * p.p() * p.q(), n = p.k, k = p.c;
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, k, 1));
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(n, k, 1));
    auto stride_c = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, cute::make_shape(m, n, 1));
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(m, n, 1));
    return typename DeviceOp::Arguments{cutlass::gemm::GemmUniversalMode::kGemm,
                                        {m, n, k, 1},
                                        {Operands::x(b), stride_a, Operands::w(b), stride_b},
                                        Operands::epilogue(b, stride_c, stride_d)};
  }
};

template <typename DeviceOp>
using GemmOperation3x = CutlassOperation<DeviceOp, GemmArguments3x<DeviceOp>>;

}  // namespace kernelgen
