// Adapter for the few-channels conv2d fprop kernels (conv_few_channels.h): one set of arguments
// per binding.
#pragma once

#include <string>
#include <vector>

#include "operation.h"

namespace kernelgen {

template <typename Kernel>
class FewChannelsOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& p) override {
    const char* why = Kernel::unsupported(p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h,
                                          p.stride_w, p.dilation_h, p.dilation_w);
    return why ? why : "";
  }

  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }

  std::string prepare(const Conv2dProblem& p, const std::vector<Conv2dBinding>& bindings, cudaStream_t) override {
    args_.assign(bindings.size(), {});
    for (size_t i = 0; i < bindings.size(); ++i) {
      const Conv2dBinding& b = bindings[i];
      if (const char* err = Kernel::initialize(args_[i], b.x, b.w, b.y, p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h,
                                               p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w))
        return err;
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return "cannot query the device's multiprocessor count";
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    return Kernel::run(args_[index], sms_, stream) == cudaSuccess;
  }

 private:
  std::vector<typename Kernel::Arguments> args_;
  int sms_ = 1;
};

}  // namespace kernelgen
