// Device-side helpers of the profiler: random operands, the reference convolution
// and the comparison of a kernel's output against it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "operation.h"

namespace kernelgen {

// The element type of a workload's operands and output (a job line's DTYPE): 16 bits each.
enum class Element { f16, bf16 };

// The element named `name` (f16, bf16) into `element`; false if there is none of that name.
bool element_named(const char* name, Element* element);

// Fills `count` values with uniform random numbers in [-1, 1), a function of (seed, index),
// rounded to the element type.
void fill_random(Element element, void* data, size_t count, uint64_t seed, cudaStream_t stream);

// Fills `count` values with NaN, so that an element a kernel never writes cannot pass.
void fill_nan(Element element, void* data, size_t count, cudaStream_t stream);

// y_ref[n,p,q,k] = sum over r,s,c of x[n,h,w,c] * w[k,r,s,c], accumulated in double (the
// products of two 16-bit values are exact in fp32). With `groups` (grouped.h), c runs over the
// C/groups channels of k's group and w is KRS(C/groups).
void reference_conv2d_fprop(Element element, const Conv2dProblem& problem, const void* x, const void* w,
                            float* y_ref, cudaStream_t stream, int groups = 1);

// What a fused kernel's output goes through after the product (fused.h), in the network's order:
// a per-channel bias, a residual add, an activation; at most kMaxSteps of them.
enum class EpilogueStep : int { bias, add, relu, silu, gelu, hardswish, sigmoid };

struct EpilogueSteps {
  static constexpr int kMaxSteps = 4;
  int count = 0;
  EpilogueStep step[kMaxSteps] = {};
};

// The steps of an epilogue's text ('+'-joined: bias, add, relu, silu, gelu, hardswish, sigmoid)
// into `steps`; false if a step is none of those or there are more than kMaxSteps.
bool epilogue_named(const char* text, EpilogueSteps* steps);

// y_ref (the reference's fp32 output, NPQK, K channels) through `steps`, each in double: `bias`
// adds bias[k], `add` the residual (of the output's shape), an activation as torch computes it
// (gelu: erf's). bias and residual are of the element type.
void reference_epilogue(Element element, const EpilogueSteps& steps, size_t count, int k, const void* bias,
                        const void* residual, float* y_ref, cudaStream_t stream);

struct Comparison {
  double sum_sq_diff;   // sum of (y - ref)^2
  double sum_sq_ref;    // sum of ref^2
  double max_abs_diff;  // max |y - ref|
  double max_abs_ref;   // max |ref|
  unsigned long long nonfinite;  // elements of y that are NaN or infinite

  double relative_l2() const;       // ||y - ref|| / ||ref||
  double relative_max() const;      // max |y - ref| / max |ref|
};

// Compares output y of the element type against the reference; `scratch` is device memory for
// one Comparison.
Comparison compare(Element element, const void* y, const float* y_ref, size_t count, Comparison* scratch,
                   cudaStream_t stream);

}  // namespace kernelgen
