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

// CutlassOperation, and the semaphores zeroed before each run.
template <typename DeviceOp>
class Conv2dOperation2xSplit final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override { return inner_.can_implement(problem); }

  size_t workspace_bytes(const Conv2dProblem& problem) override { return inner_.workspace_bytes(problem); }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    bytes_ = workspace_bytes(problem);
    workspaces_.clear();
    for (const Conv2dBinding& binding : bindings) workspaces_.push_back(binding.workspace);
    return inner_.prepare(problem, bindings, stream);
  }

  bool run(size_t index, cudaStream_t stream) override {
    if (bytes_ > 0 && cudaMemsetAsync(workspaces_[index], 0, bytes_, stream) != cudaSuccess) return false;
    return inner_.run(index, stream);
  }

 private:
  CutlassOperation<DeviceOp, Conv2dFpropArguments2xSplit<DeviceOp>> inner_;
  size_t bytes_ = 0;
  std::vector<void*> workspaces_;
};

}  // namespace kernelgen
