// What extension.cpp needs of best_kernels.h, without CUDA's types (best_conv.cu converts them).
#pragma once

#include <cstddef>

namespace best_conv {

// A forward convolution: NHWC activations, KRSC filters, NPQK output (best_kernels::Conv2dFpropProblem),
// and what its output goes through after the product (best_kernels::Epilogue): a bias, a residual
// added before the activation, the activation (best_kernels::Activation's value: 0 none, 1 relu,
// 2 silu, 3 gelu, 4 hardswish, 5 sigmoid); groups splits c and k into that many convolutions
// (filters KRS(C/groups); groups = c = k: depthwise).
struct Problem {
  int n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  bool bias = false, add = false;
  int activation = 0;
  int groups = 1;
};

size_t workspace_size(const Problem& problem);

// The kernel conv2d_fprop runs for `problem`, or nullptr when none of the header's kernels can.
const char* kernel_for(const Problem& problem);

// best_kernels::conv2d_fprop on device tensors of element(); `stream` is a cudaStream_t. Empty on
// success, else the launcher's status.
const char* conv2d_fprop(const Problem& problem, const void* x, const void* w, void* y, const void* bias,
                         const void* residual, void* workspace, size_t workspace_bytes, void* stream);

// A GEMM D (m x n) = A (m x k) B^T, all row-major (best_kernels::GemmProblem): a linear layer's
// input rows times its weight (n x k), with the epilogue as a convolution's (bias n values).
struct GemmProblem {
  int m, n, k;
  bool bias = false, add = false;
  int activation = 0;
};

size_t workspace_size(const GemmProblem& problem);

// The kernel gemm runs for `problem`, or nullptr when none of the header's kernels can.
const char* kernel_for(const GemmProblem& problem);

// best_kernels::gemm on device tensors of element(); empty on success, else the launcher's status.
const char* gemm(const GemmProblem& problem, const void* a, const void* b, void* d, const void* bias,
                 const void* residual, void* workspace, size_t workspace_bytes, void* stream);

// y = activation(y + bias[channel]) in place, over `elements` values whose channel is the index
// modulo k (NHWC, or any layout with the channels innermost): what follows a kernel that takes no
// epilogue, in one pass. Empty on success, else CUDA's error.
const char* bias_activation(void* y, const void* bias, int k, size_t elements, int activation, void* stream);

// The element type of best_kernels.h's operands: "f16" or "bf16".
const char* element();

// The problems best_kernels.h was profiled on (epilogue included), and the time of each one's chosen kernel.
int profiled_count();
Problem profiled(int index);
double profiled_ms(int index);
int profiled_gemm_count();
GemmProblem profiled_gemm(int index);
double profiled_gemm_ms(int index);

}  // namespace best_conv
