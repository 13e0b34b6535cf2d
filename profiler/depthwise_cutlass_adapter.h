// Adapter for CUTLASS's depthwise direct convolution (cutlass::conv::device::DirectConvolution over
// DefaultDepthwiseDirect2dConvFprop): a GroupedOperation (grouped.h) for groups = C = K. DeviceOp is
// a DirectConvolution with `static constexpr int kTilesPerCta` (the type kernel_specs/templates/
// depthwise_cutlass.mako renders).
//
// What DirectConvolution needs beyond an implicit-GEMM convolution:
//  - the filter reordered (K x RS -> RS x K): its main kernel reads only ref_reordered_B, which a
//    reorder kernel fills from ref_B before it each launch. The reordered copy lives in the
//    operation's workspace: workspace_bytes() is K*R*S elements (the profiler and the header give
//    each binding a workspace of its own, 256-byte aligned); CUTLASS's own workspace is 0 bytes.
//  - split_k_slices, which here is no split of the reduction: the grid is (1, C / groups, slices),
//    each CTA computing every slices-th output tile in turn (depthwise_gemm_k_iterations). It is the
//    layer's tiles / kTilesPerCta, rounded up, at most 65535 (grid.z; can_implement refuses more).
//  - the problem's groups (Conv2dProblemSize's last argument), as for any grouped convolution.
// The epilogue is LinearCombination in fp32, alpha 1, beta 0 (C points at the output, never read).
// Both launches are made here, as DirectConvolution::run makes them, but with the shared-memory
// attribute set once in prepare() rather than on each run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/convolution.h"
#include "cutlass/device_kernel.h"
#include "cutlass/layout/tensor.h"
#include "cutlass/tensor_ref.h"

#include "adapter_common.h"
#include "grouped.h"

namespace kernelgen {

template <typename DeviceOp>
class DepthwiseCutlassOperation final : public GroupedOperation {
  using Kernel = typename DeviceOp::UnderlyingKernel;
  using Params = typename Kernel::Params;
  using Reorder = typename DeviceOp::ReorderKernel;
  using FilterShape = typename DeviceOp::WarpMmaOperator::FilterShape;
  using TileShape = typename Kernel::ThreadBlockOutputShape;
  using ElementB = typename DeviceOp::ElementB;
  static constexpr int kMaxSharedBytes = 227 * 1024;  // what a CTA may opt in to on SM90
  static constexpr int kMaxSlices = 65535;
  static constexpr const char* kStride1Wrong = "3x3 at stride 1: wrong outputs on the H200 (every layer measured)";

 public:
  void set_groups(int groups) override { groups_ = groups; }

  std::string can_implement(const Conv2dProblem& p) override {
    if (groups_ < 2) return "a grouped-convolution kernel, given no groups";
    if (!(groups_ == p.c && p.c == p.k)) return "a depthwise kernel: needs groups = C = K";
    // CUTLASS checks R * S only; the window's shape is compiled for R x S.
    if (p.r != FilterShape::kRow || p.s != FilterShape::kColumn) {
      return "built for " + std::to_string(FilterShape::kRow) + "x" + std::to_string(FilterShape::kColumn) +
             " filters";
    }
    // Measured on the H200: every 3x3 layer at stride 1 came out wrong, with either iterator (fp32
    // sums; CUTLASS's own tests run 3x3 at stride 1 on single 8x8 tiles only, in fp16).
    if (FilterShape::kRow == 3 && FilterShape::kColumn == 3 && p.stride_h == 1 && p.stride_w == 1) return kStride1Wrong;
    typename DeviceOp::Arguments args = arguments(p, {});
    std::string why = status_text(DeviceOp::can_implement(args));
    if (!why.empty()) return why + " (stride, dilation or C % 8)";
    Params params(args, nullptr);
    if (params.get_smem_size() > kMaxSharedBytes) {
      return "needs " + std::to_string(params.get_smem_size()) + " bytes of shared memory, more than " +
             std::to_string(kMaxSharedBytes);
    }
    return {};
  }

  // The reordered filter, K x R x S elements.
  size_t workspace_bytes(const Conv2dProblem& p) override { return size_t(p.k) * p.r * p.s * sizeof(ElementB); }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t) override {
    std::string why = can_implement(problem);
    if (!why.empty()) return why;
    params_.clear();
    for (const Conv2dBinding& binding : bindings) {
      if (binding.workspace == nullptr) return "no workspace for the reordered filter";
      params_.emplace_back(arguments(problem, binding), nullptr);
    }
    smem_ = params_.empty() ? 0 : int(params_[0].get_smem_size());
    cudaError_t status = cudaFuncSetAttribute(cutlass::Kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              smem_);
    if (status != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(status);
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    Params& params = params_[index];
    cutlass::Kernel<Reorder><<<Reorder::get_grid_shape(params), Reorder::get_block_shape(), 0, stream>>>(params);
    typename Kernel::ThreadblockSwizzle swizzle;
    dim3 grid = swizzle.get_grid_shape(params.grid_tiled_shape);
    cutlass::Kernel<Kernel><<<grid, DeviceOp::kWarpCount * 32, smem_, stream>>>(params);
    return cudaPeekAtLastError() == cudaSuccess;
  }

 private:
  typename DeviceOp::Arguments arguments(const Conv2dProblem& p, const Conv2dBinding& b) const {
    using ElementA = typename DeviceOp::ElementA;
    using ElementC = typename DeviceOp::ElementC;
    using LayoutA = typename DeviceOp::LayoutA;
    using LayoutB = typename DeviceOp::LayoutB;
    using LayoutC = typename DeviceOp::LayoutC;
    using ElementCompute = typename DeviceOp::EpilogueOutputOp::ElementCompute;
    int64_t tiles = int64_t(p.n) * ((p.p() + TileShape::kH - 1) / TileShape::kH) *
                    ((p.q() + TileShape::kW - 1) / TileShape::kW);
    int slices = int(std::min<int64_t>((tiles + DeviceOp::kTilesPerCta - 1) / DeviceOp::kTilesPerCta, kMaxSlices));
    cutlass::conv::Conv2dProblemSize size(p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.p(), p.q(), p.pad_h, p.pad_w,
                                          p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
                                          cutlass::conv::Mode::kCrossCorrelation, slices, groups_);
    constexpr auto kOp = cutlass::conv::Operator::kFprop;
    auto b_extent = cutlass::conv::implicit_gemm_tensor_b_extent(kOp, size);
    cutlass::TensorRef<ElementA, LayoutA> x(static_cast<ElementA*>(const_cast<void*>(b.x)),
                                            LayoutA::packed(cutlass::conv::implicit_gemm_tensor_a_extent(kOp, size)));
    cutlass::TensorRef<ElementB, LayoutB> w(static_cast<ElementB*>(const_cast<void*>(b.w)), LayoutB::packed(b_extent));
    cutlass::TensorRef<ElementB, LayoutB> reordered(static_cast<ElementB*>(b.workspace), LayoutB::packed(b_extent));
    cutlass::TensorRef<ElementC, LayoutC> y(static_cast<ElementC*>(b.y),
                                            LayoutC::packed(cutlass::conv::implicit_gemm_tensor_c_extent(kOp, size)));
    // alpha = 1, beta = 0: the output is written, never read.
    return typename DeviceOp::Arguments(size, x, w, y, y, {ElementCompute(1), ElementCompute(0)}, reordered);
  }

  int groups_ = 1;
  int smem_ = 0;
  std::vector<Params> params_;
};

}  // namespace kernelgen
