#include "reference.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace kernelgen {
namespace {

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Conversions between float and each element type, and its NaN.
template <typename T>
struct Convert;

template <>
struct Convert<__half> {
  __device__ static __half from(float v) { return __float2half_rn(v); }
  __device__ static float to(__half v) { return __half2float(v); }
  __device__ static __half nan() { return __ushort_as_half(0x7E00); }
};

template <>
struct Convert<__nv_bfloat16> {
  __device__ static __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
  __device__ static float to(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 nan() { return __ushort_as_bfloat16(0x7FC0); }
};

template <typename T>
__global__ void fill_random_kernel(T* data, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t bits = splitmix64(seed * 0x100000001B3ull ^ i);
    float u = float(bits >> 40) * (1.0f / float(1ull << 24));  // [0, 1)
    data[i] = Convert<T>::from(2.0f * u - 1.0f);
  }
}

template <typename T>
__global__ void fill_nan_kernel(T* data, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    data[i] = Convert<T>::nan();
  }
}

template <typename T>
__global__ void reference_conv2d_fprop_kernel(Conv2dProblem p, int P, int Q, int groups, const T* x, const T* w,
                                              float* y) {
  const int group_c = p.c / groups, group_k = p.k / groups;
  size_t total = size_t(p.n) * P * Q * p.k;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    int k = int(i % p.k);
    size_t rest = i / p.k;
    int q = int(rest % Q);
    rest /= Q;
    int pp = int(rest % P);
    int n = int(rest / P);
    double acc = 0.0;
    for (int r = 0; r < p.r; ++r) {
      int h = pp * p.stride_h - p.pad_h + r * p.dilation_h;
      if (h < 0 || h >= p.h) continue;
      for (int s = 0; s < p.s; ++s) {
        int ww = q * p.stride_w - p.pad_w + s * p.dilation_w;
        if (ww < 0 || ww >= p.w) continue;
        const T* xp = x + ((size_t(n) * p.h + h) * p.w + ww) * p.c + size_t(k / group_k) * group_c;
        const T* wp = w + ((size_t(k) * p.r + r) * p.s + s) * group_c;
        for (int c = 0; c < group_c; ++c) {
          acc += double(Convert<T>::to(xp[c]) * Convert<T>::to(wp[c]));  // 16-bit products are exact in fp32
        }
      }
    }
    y[i] = float(acc);
  }
}

template <typename T>
__global__ void reference_epilogue_kernel(EpilogueSteps steps, size_t count, int k, const T* bias, const T* residual,
                                          float* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    double v = y[i];
    for (int j = 0; j < steps.count; ++j) {
      switch (steps.step[j]) {
        case EpilogueStep::bias: v += Convert<T>::to(bias[i % k]); break;
        case EpilogueStep::add: v += Convert<T>::to(residual[i]); break;
        case EpilogueStep::relu: v = v > 0 ? v : 0.0; break;
        case EpilogueStep::silu: v = v / (1.0 + exp(-v)); break;
        case EpilogueStep::gelu: v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440)); break;
        case EpilogueStep::hardswish: v = v * fmin(fmax(v + 3.0, 0.0), 6.0) / 6.0; break;
        case EpilogueStep::sigmoid: v = 1.0 / (1.0 + exp(-v)); break;
      }
    }
    y[i] = float(v);
  }
}

__device__ inline void atomic_max_nonnegative(double* address, double value) {
  // For non-negative doubles the IEEE bit patterns order like the values.
  atomicMax(reinterpret_cast<unsigned long long*>(address), __double_as_longlong(value));
}

template <typename T>
__global__ void compare_kernel(const T* y, const float* ref, size_t count, Comparison* out) {
  double sq_diff = 0.0, sq_ref = 0.0, max_diff = 0.0, max_ref = 0.0;
  unsigned long long nonfinite = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    double v = Convert<T>::to(y[i]);
    double r = ref[i];
    if (!isfinite(v)) {
      ++nonfinite;
      continue;
    }
    double d = fabs(v - r);
    sq_diff += d * d;
    sq_ref += r * r;
    max_diff = fmax(max_diff, d);
    max_ref = fmax(max_ref, fabs(r));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sq_diff += __shfl_down_sync(0xffffffffu, sq_diff, offset);
    sq_ref += __shfl_down_sync(0xffffffffu, sq_ref, offset);
    max_diff = fmax(max_diff, __shfl_down_sync(0xffffffffu, max_diff, offset));
    max_ref = fmax(max_ref, __shfl_down_sync(0xffffffffu, max_ref, offset));
    nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, offset);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->sum_sq_diff, sq_diff);
    atomicAdd(&out->sum_sq_ref, sq_ref);
    atomic_max_nonnegative(&out->max_abs_diff, max_diff);
    atomic_max_nonnegative(&out->max_abs_ref, max_ref);
    atomicAdd(&out->nonfinite, nonfinite);
  }
}

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;

int blocks_for(size_t count) {
  size_t blocks = (count + kThreads - 1) / kThreads;
  return int(blocks < kMaxBlocks ? (blocks ? blocks : 1) : kMaxBlocks);
}

}  // namespace

double Comparison::relative_l2() const {
  return sum_sq_ref > 0 ? std::sqrt(sum_sq_diff / sum_sq_ref) : (sum_sq_diff > 0 ? INFINITY : 0.0);
}

double Comparison::relative_max() const {
  return max_abs_ref > 0 ? max_abs_diff / max_abs_ref : (max_abs_diff > 0 ? INFINITY : 0.0);
}

bool element_named(const char* name, Element* element) {
  const std::string text = name;
  if (text == "f16") *element = Element::f16;
  else if (text == "bf16") *element = Element::bf16;
  else return false;
  return true;
}

// Runs `launch` with the C++ type of `element` (__half or __nv_bfloat16).
template <typename Launch>
void with_type(Element element, Launch&& launch) {
  if (element == Element::bf16) {
    launch(__nv_bfloat16{});
  } else {
    launch(__half{});
  }
}

void fill_random(Element element, void* data, size_t count, uint64_t seed, cudaStream_t stream) {
  with_type(element, [&](auto t) {
    using T = decltype(t);
    fill_random_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, seed);
  });
  check(cudaGetLastError(), "fill_random");
}

void fill_nan(Element element, void* data, size_t count, cudaStream_t stream) {
  with_type(element, [&](auto t) {
    using T = decltype(t);
    fill_nan_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), count);
  });
  check(cudaGetLastError(), "fill_nan");
}

void reference_conv2d_fprop(Element element, const Conv2dProblem& problem, const void* x, const void* w,
                            float* y_ref, cudaStream_t stream, int groups) {
  with_type(element, [&](auto t) {
    using T = decltype(t);
    reference_conv2d_fprop_kernel<<<blocks_for(problem.output_elements()), kThreads, 0, stream>>>(
        problem, problem.p(), problem.q(), groups, static_cast<const T*>(x), static_cast<const T*>(w), y_ref);
  });
  check(cudaGetLastError(), "reference_conv2d_fprop");
}

bool epilogue_named(const char* text, EpilogueSteps* steps) {
  static const char* const kNames[] = {"bias", "add", "relu", "silu", "gelu", "hardswish", "sigmoid"};
  EpilogueSteps parsed;
  std::string rest = text;
  while (true) {
    size_t plus = rest.find('+');
    std::string name = rest.substr(0, plus);
    int found = -1;
    for (int i = 0; i < int(sizeof(kNames) / sizeof(kNames[0])); ++i) {
      if (name == kNames[i]) found = i;
    }
    if (found < 0 || parsed.count == EpilogueSteps::kMaxSteps) return false;
    parsed.step[parsed.count++] = EpilogueStep(found);
    if (plus == std::string::npos) break;
    rest = rest.substr(plus + 1);
  }
  *steps = parsed;
  return true;
}

void reference_epilogue(Element element, const EpilogueSteps& steps, size_t count, int k, const void* bias,
                        const void* residual, float* y_ref, cudaStream_t stream) {
  with_type(element, [&](auto t) {
    using T = decltype(t);
    reference_epilogue_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
        steps, count, k, static_cast<const T*>(bias), static_cast<const T*>(residual), y_ref);
  });
  check(cudaGetLastError(), "reference_epilogue");
}

Comparison compare(Element element, const void* y, const float* y_ref, size_t count, Comparison* scratch,
                   cudaStream_t stream) {
  check(cudaMemsetAsync(scratch, 0, sizeof(Comparison), stream), "compare memset");
  with_type(element, [&](auto t) {
    using T = decltype(t);
    compare_kernel<<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const T*>(y), y_ref, count, scratch);
  });
  check(cudaGetLastError(), "compare");
  Comparison result{};
  check(cudaMemcpyAsync(&result, scratch, sizeof(Comparison), cudaMemcpyDeviceToHost, stream), "compare copy");
  check(cudaStreamSynchronize(stream), "compare");
  return result;
}

}  // namespace kernelgen
