// Adapter for this project's depthwise kernels (depthwise.h): a GroupedOperation (grouped.h) over a
// type with
//   static std::string can_implement(const Conv2dProblem&, int groups);
//   static int configure(std::string& why);  // the CTAs a launch uses; 0 and why if it cannot run
//   static void launch(const Conv2dProblem&, const Conv2dBinding&, int ctas, cudaStream_t);
#pragma once

#include <string>
#include <vector>

#include "grouped.h"

namespace kernelgen {

template <typename Kernel>
class DepthwiseOperation final : public GroupedOperation {
 public:
  void set_groups(int groups) override { groups_ = groups; }

  std::string can_implement(const Conv2dProblem& problem) override {
    if (groups_ < 2) return "a grouped-convolution kernel, given no groups";
    return Kernel::can_implement(problem, groups_);
  }

  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t) override {
    std::string why = can_implement(problem);
    if (!why.empty()) return why;
    ctas_ = Kernel::configure(why);
    if (ctas_ == 0) return why;
    problem_ = problem;
    bindings_ = bindings;
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    Kernel::launch(problem_, bindings_[index], ctas_, stream);
    return cudaPeekAtLastError() == cudaSuccess;
  }

 private:
  int groups_ = 1;
  int ctas_ = 0;
  Conv2dProblem problem_{};
  std::vector<Conv2dBinding> bindings_;
};

}  // namespace kernelgen
