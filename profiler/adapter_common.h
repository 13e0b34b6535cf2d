// The generic CUTLASS adapter: a device-level operator plus an argument builder is a
// kernelgen::Operation. The argument builders for each CUTLASS API live beside it
// (conv2d_adapter_2x.h, conv2d_adapter_3x.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cutlass/cutlass.h"

#include "operation.h"

namespace kernelgen {

inline std::string status_text(cutlass::Status status) {
  return status == cutlass::Status::kSuccess ? std::string() : cutlassGetStatusString(status);
}

// A binding's tensors as a CUTLASS 3.x device operator's arguments take them: x and w for the
// mainloop, y for the epilogue.
template <typename DeviceOp>
struct Operands3x {
  static auto x(const Conv2dBinding& b) { return static_cast<const typename DeviceOp::ElementA*>(b.x); }
  static auto w(const Conv2dBinding& b) { return static_cast<const typename DeviceOp::ElementB*>(b.w); }

  // alpha = 1, beta = 0: the output is written, never read.
  template <typename StrideC, typename StrideD>
  static auto epilogue(const Conv2dBinding& b, StrideC stride_c, StrideD stride_d) {
    using Arguments = decltype(std::declval<typename DeviceOp::Arguments>().epilogue);
    return Arguments{{1.0f, 0.0f}, static_cast<const typename DeviceOp::ElementC*>(b.y), stride_c,
                     static_cast<typename DeviceOp::ElementD*>(b.y), stride_d};
  }
};

// DeviceOp: a CUTLASS device operator (static can_implement and get_workspace_size,
// initialize(args, workspace, stream), run(stream)). ArgumentsFor: a type whose static
// `make(problem, binding)` returns DeviceOp::Arguments and whose static
// `unsupported(problem)` says why the operator cannot express `problem` (empty if it can).
template <typename DeviceOp, typename ArgumentsFor>
class CutlassOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = ArgumentsFor::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(ArgumentsFor::make(problem, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(ArgumentsFor::make(problem, {}));
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    for (const Conv2dBinding& binding : bindings) {
      auto op = std::make_unique<DeviceOp>();
      std::string error =
          status_text(op->initialize(ArgumentsFor::make(problem, binding), binding.workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  std::vector<std::unique_ptr<DeviceOp>> ops_;
};

}  // namespace kernelgen
