// The interface between the profiler driver and the generated kernels.
//
// Each generated kernel translation unit defines one factory,
// `std::unique_ptr<kernelgen::Operation> kernelgen::make_<procedural name>()`, and the
// generated manifest lists them all in `kernelgen::registry()`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kernelgen {

// A 2-D forward convolution: NHWC activations, KRSC filters, NPQK output.
struct Conv2dProblem {
  int n, h, w, c, k, r, s;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;

  int p() const { return (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1; }
  int q() const { return (w + 2 * pad_w - dilation_w * (s - 1) - 1) / stride_w + 1; }
  size_t activation_elements() const { return size_t(n) * h * w * c; }
  size_t filter_elements() const { return size_t(k) * r * s * c; }
  size_t output_elements() const { return size_t(n) * p() * q() * k; }
  double flops() const { return 2.0 * double(output_elements()) * double(c) * r * s; }
};

// One set of operands a kernel is bound to, and the workspace it may use.
struct Conv2dBinding {
  const void* x;    // activations
  const void* w;    // filters
  void* y;          // output
  void* workspace;  // workspace_bytes() bytes, or nullptr when that is 0
};

class Operation {
 public:
  virtual ~Operation() = default;

  // Empty when the kernel can run `problem`; otherwise the reason it cannot.
  virtual std::string can_implement(const Conv2dProblem& problem) = 0;

  virtual size_t workspace_bytes(const Conv2dProblem& problem) = 0;

  // Binds one launch per binding (all host-side setup happens here, none in run()).
  // Empty on success; otherwise what failed.
  virtual std::string prepare(const Conv2dProblem& problem,
                              const std::vector<Conv2dBinding>& bindings,
                              cudaStream_t stream) = 0;

  // Launches the kernel on the operands of binding `index`. False if the launch failed.
  virtual bool run(size_t index, cudaStream_t stream) = 0;
};

using OperationFactory = std::unique_ptr<Operation> (*)();

struct Registration {
  const char* name;  // the kernel's procedural name
  OperationFactory make;
};

// Every kernel linked into this profiler, sorted by name (defined by the generated manifest).
const std::vector<Registration>& registry();

}  // namespace kernelgen
