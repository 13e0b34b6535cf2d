## What a kernel's object holds when nvcc refused its source (site_tools/nvcc.py): the factory the
## registry names, making an operation that runs nothing and says why on every problem.
## Inputs: banner, name.
${banner}
#include "operation.h"

namespace kernelgen {
namespace {

class DidNotCompile : public Operation {
 public:
  std::string can_implement(const Conv2dProblem&) override { return kReason; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override {
    return kReason;
  }
  bool run(size_t, cudaStream_t) override { return false; }

 private:
  static constexpr const char* kReason = "did not compile (nvcc refused the kernel's source; scons printed why)";
};

}  // namespace

std::unique_ptr<Operation> make_${name}() { return std::make_unique<DidNotCompile>(); }

}  // namespace kernelgen
