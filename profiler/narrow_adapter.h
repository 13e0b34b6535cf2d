// Adapters for the narrow 3x3 conv2d fprop kernels (narrow_conv.h): one set of arguments per
// binding. NarrowOperation runs a kernel of no epilogue; FusedNarrowOperation one of a fused
// epilogue, its bias and residual given with set_epilogue() (fused.h).
#pragma once

#include <string>
#include <vector>

#include "fused.h"
#include "narrow_conv.h"
#include "operation.h"

namespace kernelgen {

// What both adapters do: Kernel's arguments for each binding, with its epilogue's operands.
template <typename Kernel>
class NarrowLaunches {
 public:
  static std::string can_implement(const Conv2dProblem& p) {
    const char* why = Kernel::unsupported(p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                          p.dilation_h, p.dilation_w);
    return why ? why : "";
  }

  std::string prepare(const Conv2dProblem& p, const std::vector<Conv2dBinding>& bindings,
                      const std::vector<EpilogueOperands>& epilogue) {
    args_.assign(bindings.size(), {});
    for (size_t i = 0; i < bindings.size(); ++i) {
      const Conv2dBinding& b = bindings[i];
      const EpilogueOperands e = i < epilogue.size() ? epilogue[i] : EpilogueOperands{};
      if (const char* err = Kernel::initialize(args_[i], b.x, b.w, b.y, e.bias, e.residual, p.n, p.h, p.w, p.c, p.k,
                                               p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                               p.dilation_w))
        return err;
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) { return Kernel::run(args_[index], stream) == cudaSuccess; }

 private:
  std::vector<typename Kernel::Arguments> args_;
};

template <typename Kernel>
class NarrowOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& p) override { return NarrowLaunches<Kernel>::can_implement(p); }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  std::string prepare(const Conv2dProblem& p, const std::vector<Conv2dBinding>& bindings, cudaStream_t) override {
    return launches_.prepare(p, bindings, {});
  }
  bool run(size_t index, cudaStream_t stream) override { return launches_.run(index, stream); }

 private:
  NarrowLaunches<Kernel> launches_;
};

template <typename Kernel>
class FusedNarrowOperation final : public FusedOperation {
 public:
  std::string can_implement(const Conv2dProblem& p) override { return NarrowLaunches<Kernel>::can_implement(p); }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  void set_epilogue(const std::vector<EpilogueOperands>& operands) override { epilogue_ = operands; }
  std::string prepare(const Conv2dProblem& p, const std::vector<Conv2dBinding>& bindings, cudaStream_t) override {
    if (epilogue_.size() != bindings.size())
      return "a fused kernel needs its epilogue's operands for each binding (set_epilogue: " +
             std::to_string(epilogue_.size()) + ", bindings: " + std::to_string(bindings.size()) + ")";
    return launches_.prepare(p, bindings, epilogue_);
  }
  bool run(size_t index, cudaStream_t stream) override { return launches_.run(index, stream); }

 private:
  std::vector<EpilogueOperands> epilogue_;
  NarrowLaunches<Kernel> launches_;
};

}  // namespace kernelgen
