// CUTLASS 2.x cutlass::conv::device::ImplicitGemmConvolution (conv2d fprop) whose kernel type says
// DeviceOp::kSplitKSlices: each output tile's K iterations split that many ways, the CTAs of a tile
// adding their partial sums into the output in turn (CUTLASS's serial split-K; the later CTAs'
// beta is 1, set by CUTLASS), ordered by a semaphore a tile in the workspace.
//
// A CTA waits until its tile's semaphore holds its split's index; the last resets it to 0. CUTLASS
// zeroes the semaphores in initialize(), once, and a launch on a workspace something else wrote
// since would wait forever (a caller's workspace from an allocator that hands the same memory to
// others between calls). Each run here zeroes them first, as stream_k_adapter.h does its
// counters: a memset on the same stream, captured with the kernel in a CUDA graph, and timed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "conv2d_adapter_2x.h"

namespace kernelgen {

template <typename DeviceOp>
struct Conv2dFpropArguments2xSplit {
  static std::string unsupported(const Conv2dProblem&) { return {}; }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    typename DeviceOp::Arguments args = Conv2dFpropArguments2x<DeviceOp>::make(p, b);
    args.problem_size.split_k_slices = DeviceOp::kSplitKSlices;
    return args;
  }
};

template <typename DeviceOp>
class Conv2dOperation2xSplit final : public Operation {
 public:
  using Arguments = Conv2dFpropArguments2xSplit<DeviceOp>;

  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = Arguments::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(Arguments::make(problem, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(Arguments::make(problem, {}));
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    launches_.clear();
    const size_t bytes = workspace_bytes(problem);
    for (const Conv2dBinding& binding : bindings) {
      auto op = std::make_unique<DeviceOp>();
      std::string error = status_text(op->initialize(Arguments::make(problem, binding), binding.workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
      launches_.push_back({binding.workspace, bytes});
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    const Launch& launch = launches_[index];
    if (launch.bytes > 0 && cudaMemsetAsync(launch.workspace, 0, launch.bytes, stream) != cudaSuccess) return false;
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  struct Launch {
    void* workspace;
    size_t bytes;
  };
  std::vector<std::unique_ptr<DeviceOp>> ops_;
  std::vector<Launch> launches_;
};

}  // namespace kernelgen
