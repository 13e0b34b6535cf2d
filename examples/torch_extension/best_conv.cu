// The launcher of best_kernels.h (defined in libbest_kernels.a, which setup.py links) behind the
// plain interface of best_conv.h.
#include "best_kernels.h"

#include <cuda_bf16.h>

#include "best_conv.h"

#include <type_traits>

namespace best_conv {
namespace {

best_kernels::Conv2dFpropProblem convert(const Problem& p) {
  return {p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
          p.groups, {p.bias, p.add, static_cast<best_kernels::Activation>(p.activation)}};
}

best_kernels::GemmProblem convert(const GemmProblem& p) {
  return {p.m, p.n, p.k, {p.bias, p.add, static_cast<best_kernels::Activation>(p.activation)}};
}

const char* status_text(best_kernels::Status status) {
  return status == best_kernels::Status::kSuccess ? "" : best_kernels::status_string(status);
}

}  // namespace

const char* element() { return std::is_same_v<best_kernels::Element, __nv_bfloat16> ? "bf16" : "f16"; }

size_t workspace_size(const Problem& problem) { return best_kernels::workspace_size(convert(problem)); }

const char* kernel_for(const Problem& problem) { return best_kernels::kernel_for(convert(problem)); }

const char* conv2d_fprop(const Problem& problem, const void* x, const void* w, void* y, const void* bias,
                         const void* residual, void* workspace, size_t workspace_bytes, void* stream) {
  using E = best_kernels::Element;
  best_kernels::Status status = best_kernels::conv2d_fprop(
      convert(problem), static_cast<const E*>(x), static_cast<const E*>(w), static_cast<E*>(y),
      static_cast<const E*>(bias), static_cast<const E*>(residual), workspace, workspace_bytes,
      static_cast<cudaStream_t>(stream));
  return status_text(status);
}

size_t workspace_size(const GemmProblem& problem) { return best_kernels::workspace_size(convert(problem)); }

const char* kernel_for(const GemmProblem& problem) { return best_kernels::kernel_for(convert(problem)); }

const char* gemm(const GemmProblem& problem, const void* a, const void* b, void* d, const void* bias,
                 const void* residual, void* workspace, size_t workspace_bytes, void* stream) {
  using E = best_kernels::Element;
  return status_text(best_kernels::gemm(convert(problem), static_cast<const E*>(a), static_cast<const E*>(b),
                                        static_cast<E*>(d), static_cast<const E*>(bias),
                                        static_cast<const E*>(residual), workspace, workspace_bytes,
                                        static_cast<cudaStream_t>(stream)));
}

#if BEST_KERNELS_CONV2D_FPROP_COUNT
int profiled_count() { return BEST_KERNELS_CONV2D_FPROP_COUNT; }

Problem profiled(int index) {
  const best_kernels::Conv2dFpropProblem& p = best_kernels::kConv2dFprop[index].problem;
  return {p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
          p.epilogue.bias, p.epilogue.add, static_cast<int>(p.epilogue.activation), p.groups};
}

double profiled_ms(int index) { return best_kernels::kConv2dFprop[index].runtime_ms; }
#else
int profiled_count() { return 0; }
Problem profiled(int) { return {}; }
double profiled_ms(int) { return 0; }
#endif

#if BEST_KERNELS_GEMM_COUNT
int profiled_gemm_count() { return BEST_KERNELS_GEMM_COUNT; }

GemmProblem profiled_gemm(int index) {
  const best_kernels::GemmProblem& p = best_kernels::kGemm[index].problem;
  return {p.m, p.n, p.k, p.epilogue.bias, p.epilogue.add, static_cast<int>(p.epilogue.activation)};
}

double profiled_gemm_ms(int index) { return best_kernels::kGemm[index].runtime_ms; }
#else
int profiled_gemm_count() { return 0; }
GemmProblem profiled_gemm(int) { return {}; }
double profiled_gemm_ms(int) { return 0; }
#endif

}  // namespace best_conv
