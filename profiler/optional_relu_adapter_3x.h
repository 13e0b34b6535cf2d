// CUTLASS 3.x kernels of epilogue "optional_relu" (kernelgen/fusion.py: OPTIONAL_RELU;
// LinCombPerColBiasEltAct with optional_relu.h's activation) as kernelgen::FusedOperation and
// ActivationAtLaunch: the fused kernels' arguments (fused_adapter_3x.h's FusedArguments) with the
// activation that set_activation() gave, ReLU or none: one kernel for the layers of the epilogues
// of steps bias, add and relu of its tile.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "activation_at_launch.h"
#include "fused_adapter_3x.h"
#include "optional_relu.h"
#include "patch_adapter_3x.h"

namespace kernelgen {

// DeviceOp run with Arguments (FusedArguments) and the activation; ZeroWorkspace: a stream-K
// kernel's counters zeroed before each launch, as FusedCutlassOperation does.
template <typename DeviceOp, typename Arguments, bool ZeroWorkspace>
class FusedOptionalReluOperation final : public FusedOperation, public ActivationAtLaunch {
 public:
  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = Arguments::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(make(problem, {}, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(make(problem, {}, {}));
  }

  void set_epilogue(const std::vector<EpilogueOperands>& operands) override { epilogue_ = operands; }

  void set_activation(int kind) override { kind_ = kind; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    args_.clear();
    if (kind_ != kActivationNone && kind_ != kActivationRelu) {
      return "activation " + std::to_string(kind_) + ": this kernel computes ReLU or none (optional_relu.h)";
    }
    if (epilogue_.size() != bindings.size()) {
      return "a fused kernel needs its epilogue's operands for each binding (set_epilogue: " +
             std::to_string(epilogue_.size()) + ", bindings: " + std::to_string(bindings.size()) + ")";
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      auto op = std::make_unique<DeviceOp>();
      auto args = make(problem, bindings[i], epilogue_[i]);
      std::string error = status_text(op->initialize(args, bindings[i].workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
      args_.push_back({args, bindings[i].workspace});
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    if constexpr (ZeroWorkspace) {
      if (DeviceOp::GemmKernel::initialize_workspace(args_[index].first, args_[index].second, stream) !=
          cutlass::Status::kSuccess) {
        return false;
      }
    }
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b, const EpilogueOperands& e) const {
    auto args = Arguments::make(p, b, e);
    args.epilogue.thread.activation.kind = kind_;
    return args;
  }

  int kind_ = kActivationNone;
  std::vector<EpilogueOperands> epilogue_;
  std::vector<std::unique_ptr<DeviceOp>> ops_;
  std::vector<std::pair<typename DeviceOp::Arguments, void*>> args_;
};

template <typename DeviceOp>
using FusedOptionalReluGemmOperation3x = FusedOptionalReluOperation<DeviceOp, FusedArguments<DeviceOp, GemmArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedOptionalReluGemmStreamKOperation3x =
    FusedOptionalReluOperation<DeviceOp, FusedArguments<DeviceOp, StreamKArguments<DeviceOp, GemmArguments3x<DeviceOp>>>, true>;

template <typename DeviceOp>
using FusedOptionalReluConv2dOperation3x =
    FusedOptionalReluOperation<DeviceOp, FusedArguments<DeviceOp, Conv2dFpropArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedOptionalReluConv2dPersistentOperation3x =
    FusedOptionalReluOperation<DeviceOp, FusedArguments<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>, false>;

template <typename DeviceOp>
using FusedOptionalReluConv2dPersistentStreamKOperation3x = FusedOptionalReluOperation<
    DeviceOp, FusedArguments<DeviceOp, StreamKArguments<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>>, true>;

template <typename DeviceOp>
using FusedOptionalReluPatchConv2dOperation3x =
    FusedOptionalReluOperation<DeviceOp, FusedArguments<DeviceOp, PatchConv2dArguments3x<DeviceOp>>, false>;

}  // namespace kernelgen
