// Adapter for CUTLASS 2.x grouped convolution (cutlass::conv::device::ImplicitGemmConvolution over
// DefaultConv2dGroupFprop): a GroupedOperation (grouped.h) whose problems carry the groups it was
// told with set_groups(); the filter is K x R x S x C/groups.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/layout/tensor.h"
#include "cutlass/tensor_ref.h"

#include "adapter_common.h"
#include "grouped.h"

namespace kernelgen {

template <typename DeviceOp>
class GroupedConv2dOperation2x final : public GroupedOperation {
 public:
  void set_groups(int groups) override { groups_ = groups; }

  std::string can_implement(const Conv2dProblem& problem) override {
    if (groups_ < 2) return "a grouped-convolution kernel, given no groups";
    return status_text(DeviceOp::can_implement(arguments(problem, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(arguments(problem, {}));
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    std::string why = can_implement(problem);
    if (!why.empty()) return why;
    ops_.clear();
    for (const Conv2dBinding& binding : bindings) {
      auto op = std::make_unique<DeviceOp>();
      std::string error = status_text(op->initialize(arguments(problem, binding), binding.workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  typename DeviceOp::Arguments arguments(const Conv2dProblem& p, const Conv2dBinding& b) const {
    using ElementA = typename DeviceOp::ElementA;
    using ElementB = typename DeviceOp::ElementB;
    using ElementC = typename DeviceOp::ElementC;
    using LayoutA = typename DeviceOp::LayoutA;
    using LayoutB = typename DeviceOp::LayoutB;
    using LayoutC = typename DeviceOp::LayoutC;
    using ElementCompute = typename DeviceOp::EpilogueOutputOp::ElementCompute;
    cutlass::conv::Conv2dProblemSize size(p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.p(), p.q(), p.pad_h, p.pad_w,
                                          p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
                                          cutlass::conv::Mode::kCrossCorrelation, 1, groups_);
    constexpr auto kOp = cutlass::conv::Operator::kFprop;
    cutlass::TensorRef<ElementA, LayoutA> x(static_cast<ElementA*>(const_cast<void*>(b.x)),
                                            LayoutA::packed(cutlass::conv::implicit_gemm_tensor_a_extent(kOp, size)));
    cutlass::TensorRef<ElementB, LayoutB> w(static_cast<ElementB*>(const_cast<void*>(b.w)),
                                            LayoutB::packed(cutlass::conv::implicit_gemm_tensor_b_extent(kOp, size)));
    cutlass::TensorRef<ElementC, LayoutC> y(static_cast<ElementC*>(b.y),
                                            LayoutC::packed(cutlass::conv::implicit_gemm_tensor_c_extent(kOp, size)));
    // alpha = 1, beta = 0: the output is written, never read.
    return typename DeviceOp::Arguments(size, x, w, y, y, {ElementCompute(1), ElementCompute(0)});
  }

  int groups_ = 1;
  std::vector<std::unique_ptr<DeviceOp>> ops_;
};

}  // namespace kernelgen
