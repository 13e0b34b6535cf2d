// The launcher of best_kernels.h (defined in libbest_kernels.a, which setup.py links) behind the
// plain interface of best_conv.h.
#include "best_kernels.h"

#include <cuda_bf16.h>

#include "best_conv.h"

#include <cstdint>
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

// activation(v) as best_kernels::Activation's values name them, in float (GELU of erf, as the
// fused kernels' epilogue and PyTorch's default).
__device__ __forceinline__ float activate(float v, int activation) {
  switch (activation) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return v / (1.0f + __expf(-v));
    case 3: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case 4: return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    case 5: return 1.0f / (1.0f + __expf(-v));
    default: return v;
  }
}

template <typename E>
__device__ __forceinline__ float to_float(E v) {
  if constexpr (std::is_same_v<E, __half>) return __half2float(v);
  else return __bfloat162float(v);
}

template <typename E>
__device__ __forceinline__ E from_float(float v) {
  if constexpr (std::is_same_v<E, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

template <typename E>
__global__ void bias_activation_kernel(E* y, const E* bias, int k, size_t elements, int activation) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += size_t(gridDim.x) * blockDim.x) {
    y[i] = from_float<E>(activate(to_float(y[i]) + to_float(bias[i % k]), activation));
  }
}

// Eight elements (16 bytes) a step, where k is a multiple of 8 and y 16-byte aligned.
template <typename E>
__global__ void bias_activation_kernel8(uint4* y, const E* bias, int k, size_t vectors, int activation) {
  for (size_t v = size_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += size_t(gridDim.x) * blockDim.x) {
    uint4 data = y[v];
    E* values = reinterpret_cast<E*>(&data);
    const E* b = bias + (v * 8) % size_t(k);
#pragma unroll
    for (int j = 0; j < 8; ++j) values[j] = from_float<E>(activate(to_float(values[j]) + to_float(b[j]), activation));
    y[v] = data;
  }
}

}  // namespace

const char* bias_activation(void* y, const void* bias, int k, size_t elements, int activation, void* stream) {
  using E = best_kernels::Element;
  if (elements == 0) return "";
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const bool vectors = k % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const size_t steps = vectors ? elements / 8 : elements;
  const size_t blocks = (steps + 255) / 256, most = size_t(sms > 0 ? sms : 1) * 8;
  const unsigned grid = unsigned(blocks < most ? blocks : most);
  if (vectors) {
    bias_activation_kernel8<E><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<uint4*>(y), static_cast<const E*>(bias), k, steps, activation);
  } else {
    bias_activation_kernel<E><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<E*>(y), static_cast<const E*>(bias), k, elements, activation);
  }
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

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
