## The header other builds include: per workload the chosen kernel, its measured time, lookups
## from a problem to its choice, and the declarations of the launcher that libbest_kernels.a
## (beside it) defines. It includes CUDA runtime headers only: no CUTLASS, no kernel.
## Inputs: banner, set_name, source, gpu, driver, cuda, cutlass, timing (how the times were taken),
## element (the CUDA type of every operand and output: the set's dtype), element_header (the
## toolkit header declaring it), conv_entries, gemm_entries, launchers (the kernels in the
## launcher's fallback order: name), device_target (the nvcc target the kernels were compiled for).
${banner}
//
// Set ${set_name}: for each workload, the fastest kernel whose output matched a reference
// convolution on the same inputs within its accumulator's tolerance (a few depthwise kernels sum in
// fp16; a build with ACCUMULATE=f32 keeps to kernels of fp32 sums), as measured on:
// GPU ${gpu}, driver ${driver}, CUDA ${cuda}, CUTLASS ${cutlass} (${timing}).
//
// Use. Include this header (C++17; nvcc or any host compiler, CUDA's include directory on the
// path) and link libbest_kernels.a, which sits beside it, with the CUDA runtime:
// best_kernels-config.cmake (beside it too) defines the imported target best_kernels::best_kernels.
// The library holds the launcher and the chosen kernels (sm_${device_target} code), compiled as the
// profiler compiled what it measured. best_kernels_cutlass.h declares the kernels' CUTLASS types
// for a build that instantiates them itself (it needs CUTLASS and the profiler's flags).
//
//   best_kernels::Conv2dFpropProblem p{n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w,
//                                      dilation_h, dilation_w};
//   size_t bytes = best_kernels::workspace_size(p);  // allocate that much (cudaMalloc), or none if 0
//   best_kernels::Status status = best_kernels::conv2d_fprop(p, x, w, y, workspace, bytes, stream);
//
// Launcher: device pointers, each 16-byte aligned; x NHWC, w KRSC, y NPQK (as for find() below),
// a, b, d as for a GEMM workload below.
//   size_t      best_kernels::workspace_size(problem)     bytes of workspace a launch needs
//   Status      best_kernels::conv2d_fprop(problem, x, w, y, workspace, workspace_bytes, stream)
//   Status      best_kernels::gemm(problem, a, b, d, workspace, workspace_bytes, stream)
//   Status      best_kernels::conv2d_fprop(problem, x, w, y, bias, residual, workspace, workspace_bytes, stream)
//   Status      best_kernels::gemm(problem, a, b, d, bias, residual, workspace, workspace_bytes, stream)
//                                                        a problem of an epilogue (its `epilogue`, below):
//                                                        bias K (n) values, residual the output's shape,
//                                                        each given exactly where the epilogue reads it
//   const char* best_kernels::kernel_for(problem)         the kernel a launch runs, or nullptr
//   const char* best_kernels::status_string(status)       as cutlassGetStatusString says it
// A problem listed below runs its chosen kernel. Any other problem runs the first of the
// library's kernels whose profiler adapter's can_implement accepts it, in the order they are first
// chosen in kConv2dFprop, then in kGemm (kLaunchOrder). A launch is asynchronous on `stream`;
// it returns
//   kSuccess                 launched
//   kErrorInvalidProblem     an extent below 1, padding below 0, a stride or dilation below 1, an empty
//                            output, groups that do not divide C and K, a null x, w, y (a, b, d), or
//                            a bias or residual missing where the epilogue reads it, given where not
//   kErrorMisalignedOperand  an operand, or the workspace, not 16-byte aligned
//   kErrorWorkspaceNull      workspace_bytes below workspace_size(problem), or a null workspace that
//                            is needed
//   kErrorNotSupported       no kernel of the library runs the problem, or one of its sizes exceeds
//                            INT_MAX (the kernels compute them in int)
//   kErrorInternal           the kernel could not be set up or launched (e.g. not an sm_${device_target} GPU;
//                            cudaGetLastError() says why)
// and launches nothing unless it returns kSuccess or kErrorInternal. Each thread keeps the kernel
// it last prepared with its problem, operands and stream, so a layer launched again with the same
// ones skips the host-side setup (arguments, TMA descriptors).
//
// Runtime lookup:      best_kernels::find(best_kernels::Conv2dFpropProblem{...}),
//                      best_kernels::find(best_kernels::GemmProblem{m, n, k})
// A GEMM workload is D (m x n, row-major) = A (m x k, row-major) B^T, B (n x k, row-major).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>
#include <${element_header}>

// How many entries kConv2dFprop and kGemm hold (an empty table is left out), for #if.
#define BEST_KERNELS_CONV2D_FPROP_COUNT ${len(conv_entries)}
#define BEST_KERNELS_GEMM_COUNT ${len(gemm_entries)}

namespace best_kernels {

// The type of every operand and output of this header's problems (the set's dtype).
using Element = ${element};

// What a problem's output goes through after the product (its workload's epilogue=), computed by
// a fused kernel: y = activation(product + bias + residual), the bias one value an output channel,
// the residual of the output's shape and layout, both of Element; none of them by default.
enum class Activation : int { kNone, kRelu, kSilu, kGelu, kHardswish, kSigmoid };

struct Epilogue {
  bool bias = false;  // adds bias[channel]
  bool add = false;   // adds the residual (before the activation)
  Activation activation = Activation::kNone;
};

constexpr bool operator==(const Epilogue& a, const Epilogue& b) {
  return a.bias == b.bias && a.add == b.add && a.activation == b.activation;
}

// A forward convolution, NHWC activations, KRSC filters, NPQK output, all of Element. With
// groups > 1, each group's K/groups filters of R x S x C/groups read its C/groups channels
// (KRS(C/groups) filters); groups = C = K is a depthwise convolution.
struct Conv2dFpropProblem {
  int n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int groups = 1;
  Epilogue epilogue = {};
};

constexpr bool operator==(const Conv2dFpropProblem& a, const Conv2dFpropProblem& b) {
  return a.n == b.n && a.h == b.h && a.w == b.w && a.c == b.c && a.k == b.k && a.r == b.r && a.s == b.s &&
         a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && a.groups == b.groups &&
         a.epilogue == b.epilogue;
}

struct Choice {
  const char* workload;
  Conv2dFpropProblem problem;
  const char* kernel;   // the kernel's procedural name (its type's name in best_kernels_cutlass.h)
  const char* setting;  // the launch setting it was measured and is launched with ("" for none)
  double runtime_ms;    // median measured time
  double gflops;
};

% if conv_entries:
inline constexpr Choice kConv2dFprop[] = {
% for e in conv_entries:
    {"${e['problem'].name}",
     {${", ".join(map(str, e['problem'].args()))}, ${e['problem'].groups}${e['epilogue']}},
     "${e['kernel']}", "${e['setting']}", ${"%.6g" % e['runtime_ms']}, ${"%.1f" % e['gflops']}},
% endfor
};

// The choice for `problem`, or nullptr when no kernel was chosen for it.
constexpr const Choice* find(const Conv2dFpropProblem& problem) {
  for (const Choice& choice : kConv2dFprop) {
    if (choice.problem == problem) return &choice;
  }
  return nullptr;
}
% endif

// A GEMM D (m x n) = A (m x k) B^T of Element, B n x k (its epilogue's bias n values).
struct GemmProblem {
  int m, n, k;
  Epilogue epilogue = {};
};

constexpr bool operator==(const GemmProblem& a, const GemmProblem& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.epilogue == b.epilogue;
}

struct GemmChoice {
  const char* workload;
  GemmProblem problem;
  const char* kernel;
  const char* setting;
  double runtime_ms;
  double gflops;
};

% if gemm_entries:
inline constexpr GemmChoice kGemm[] = {
% for e in gemm_entries:
    {"${e['problem'].name}", {${e['problem'].m}, ${e['problem'].n}, ${e['problem'].k}${e['epilogue']}}, "${e['kernel']}",
     "${e['setting']}", ${"%.6g" % e['runtime_ms']}, ${"%.1f" % e['gflops']}},
% endfor
};

constexpr const GemmChoice* find(const GemmProblem& problem) {
  for (const GemmChoice& choice : kGemm) {
    if (choice.problem == problem) return &choice;
  }
  return nullptr;
}
% endif

// The library's kernels in the launcher's fallback order.
inline constexpr const char* kLaunchOrder[] = {
% for launcher in launchers:
    "${launcher['name']}",
% endfor
};

// The values are CUTLASS's (cutlass/cutlass.h: Status), so that either converts to the other.
enum class Status : int {
  kSuccess = 0,
  kErrorMisalignedOperand = 1,
  kErrorInvalidProblem = 4,
  kErrorNotSupported = 5,
  kErrorWorkspaceNull = 6,
  kErrorInternal = 7,
};

// The launcher (see the top of this header), defined in libbest_kernels.a.
size_t workspace_size(const Conv2dFpropProblem& problem);
size_t workspace_size(const GemmProblem& problem);
const char* kernel_for(const Conv2dFpropProblem& problem);
const char* kernel_for(const GemmProblem& problem);
Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream);
Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, void* workspace,
            size_t workspace_bytes, cudaStream_t stream);
Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                    const Element* bias, const Element* residual, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream);
Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, const Element* bias,
            const Element* residual, void* workspace, size_t workspace_bytes, cudaStream_t stream);
const char* status_string(Status status);

}  // namespace best_kernels
