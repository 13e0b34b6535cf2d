// CUTLASS 3.x kernels with a fused epilogue (kernelgen.fusion: CUTLASS's LinCombPerColBiasEltAct,
// D = activation(acc + bias + beta * C)) as kernelgen::FusedOperation: the plain kernels' arguments
// (conv2d_adapter_3x.h, gemm_adapter_3x.h, stream_k_adapter.h) with the epilogue's operands, the
// bias, and the residual as the source operand C, read with beta = 1.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "adapter_common.h"
#include "conv2d_adapter_3x.h"
#include "fused.h"
#include "gemm_adapter_3x.h"
#include "stream_k_adapter.h"

namespace kernelgen {

// ArgumentsFor's arguments with the epilogue's operands.
template <typename DeviceOp, typename ArgumentsFor>
struct FusedArguments {
  using Arguments = typename DeviceOp::Arguments;
  using Epilogue = decltype(std::declval<Arguments>().epilogue);
  using ElementC = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<Epilogue>().ptr_C)>>;
  static constexpr bool kReadsC = !std::is_void_v<ElementC>;

  static std::string unsupported(const Conv2dProblem& p) { return ArgumentsFor::unsupported(p); }

  static Arguments make(const Conv2dProblem& p, const Conv2dBinding& b, const EpilogueOperands& e) {
    Arguments args = ArgumentsFor::make(p, b);
    auto& fusion = args.epilogue.thread;
    fusion.bias_ptr = static_cast<std::remove_reference_t<decltype(fusion.bias_ptr)>>(e.bias);
    if constexpr (kReadsC) {
      if (e.residual != nullptr) {
        fusion.beta = 1.0f;
        args.epilogue.ptr_C = static_cast<const ElementC*>(e.residual);
      }
    }
    return args;
  }
};

// DeviceOp run with Arguments (FusedArguments); ZeroWorkspace: a stream-K kernel's counters zeroed
// before each launch, as StreamKOperation does.
template <typename DeviceOp, typename Arguments, bool ZeroWorkspace>
class FusedCutlassOperation final : public FusedOperation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = Arguments::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(Arguments::make(problem, {}, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(Arguments::make(problem, {}, {}));
  }

  void set_epilogue(const std::vector<EpilogueOperands>& operands) override { epilogue_ = operands; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    launches_.clear();
    if (epilogue_.size() != bindings.size()) {
      return "a fused kernel needs its epilogue's operands for each binding (set_epilogue: " +
             std::to_string(epilogue_.size()) + ", bindings: " + std::to_string(bindings.size()) + ")";
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      if (!Arguments::kReadsC && epilogue_[i].residual != nullptr) {
        return "this fused kernel adds no residual (its epilogue has no source operand)";
      }
      auto op = std::make_unique<DeviceOp>();
      auto args = Arguments::make(problem, bindings[i], epilogue_[i]);
      std::string error = status_text(op->initialize(args, bindings[i].workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
      launches_.push_back({args, bindings[i].workspace});
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    if constexpr (ZeroWorkspace) {
      const Launch& launch = launches_[index];
      if (DeviceOp::GemmKernel::initialize_workspace(launch.args, launch.workspace, stream) !=
          cutlass::Status::kSuccess) {
        return false;
      }
    }
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  struct Launch {
    typename DeviceOp::Arguments args;
    void* workspace;
  };
  std::vector<EpilogueOperands> epilogue_;
  std::vector<std::unique_ptr<DeviceOp>> ops_;
  std::vector<Launch> launches_;
};

template <typename DeviceOp>
using FusedGemmOperation3x = FusedCutlassOperation<DeviceOp, FusedArguments<DeviceOp, GemmArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedGemmStreamKOperation3x =
    FusedCutlassOperation<DeviceOp, FusedArguments<DeviceOp, StreamKArguments<DeviceOp, GemmArguments3x<DeviceOp>>>, true>;

template <typename DeviceOp>
using FusedConv2dOperation3x =
    FusedCutlassOperation<DeviceOp, FusedArguments<DeviceOp, Conv2dFpropArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedConv2dPersistentOperation3x =
    FusedCutlassOperation<DeviceOp, FusedArguments<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedConv2dPersistentStreamKOperation3x = FusedCutlassOperation<
    DeviceOp, FusedArguments<DeviceOp, StreamKArguments<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>>, true>;

}  // namespace kernelgen
