// Adapter for plain CUDA kernels (no CUTLASS): a type with
//   static std::string can_implement(const Conv2dProblem&);
//   static void launch(const Conv2dProblem&, const Conv2dBinding&, cudaStream_t);
#pragma once

#include <string>
#include <vector>

#include "operation.h"

namespace kernelgen {

template <typename Kernel>
class DirectOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override { return Kernel::can_implement(problem); }

  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t) override {
    problem_ = problem;
    bindings_ = bindings;
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    Kernel::launch(problem_, bindings_[index], stream);
    return cudaPeekAtLastError() == cudaSuccess;
  }

 private:
  Conv2dProblem problem_{};
  std::vector<Conv2dBinding> bindings_;
};

}  // namespace kernelgen
