## The header other builds include: per workload the chosen kernel, its CUTLASS type,
## its measured time, and lookups from a problem to its kernel.
## Inputs: banner, source, gpu, driver, cuda, cutlass, includes, embedded (project headers
## the kernels need: name -> text), type_definitions, conv_entries, gemm_entries.
${banner}
//
// For each workload, the fastest kernel whose output matched a reference convolution on
// the same inputs, as measured on: GPU ${gpu}, driver ${driver}, CUDA ${cuda}, CUTLASS ${cutlass}.
//
// Runtime lookup:      best_kernels::find(best_kernels::Conv2dFpropProblem{...}),
//                      best_kernels::find(best_kernels::GemmProblem{m, n, k})
// Compile-time lookup: best_kernels::Conv2dFprop<N, H, W, C, K, R, S, PadH, PadW,
//                          StrideH, StrideW, DilationH, DilationW>::Kernel,
//                      best_kernels::Gemm<M, N, K>::Kernel
//
// A kernel named cutlass3x_sm90_tensorop_gemm_* chosen for a convolution (1x1, stride 1, no
// padding) runs it as the GEMM M = N*H*W, N = K, K = C: A = the NHWC activations (M x K,
// row-major), B = the KRSC filters (K contiguous), D = the NHWC output (M x N, row-major).
// A kernel named cutlass3x_sm90_tensorop_fprop_*_{pingpong,cooperative}_* is a
// cutlass::gemm::device::GemmUniversalAdapter running CUTLASS's conv mainloop (see the embedded
// conv_sm90_persistent.h); with `using Mainloop = Kernel::GemmKernel::CollectiveMainloop`,
// `Mainloop::ConvShape shape` the convolution and (M, N) the first two extents of
// `Mainloop::gemm_shape(shape)`, its arguments are {kGemm, Mainloop::gemm_shape(shape), {{x, w}, shape},
// {{alpha, beta}, y, stride_y, y, stride_y}}, stride_y = cutlass::make_cute_packed_stride(StrideD{},
// {M, N, 1}). The output is D = Y, (N*P*Q) x K row-major, or for a *_transposed kernel
// (conv_sm90_transposed.h) D = Y^T, K x (N*P*Q) column-major: the same NHWC bytes.
// A kernel named kernelgen_sm90_tensorop_fprop_* (a halo 3x3 or pointwise 1x1 kernel of the
// embedded conv_sm90_resident.h) is not CUTLASS's: `typename Kernel::Arguments args;`, then
// `Kernel::initialize(args, x, w, y, n, h, w, c, k)` once per set of operands (nullptr on success,
// else what failed), then `Kernel::run(args, multiprocessor_count, stream)`.
// A GEMM workload is D (m x n, row-major) = A (m x k, row-major) B^T, B (n x k, row-major).
#pragma once

% for header in includes:
#include "${header}"
% endfor
% for header, text in embedded.items():

// ---- ${header}, from kernelgen, embedded so that this header needs only CUTLASS ----
${text}
% endfor

namespace best_kernels {

% for definition in type_definitions:
${definition}
% endfor
// A forward convolution, fp16 NHWC activations, KRSC filters, NPQK output.
struct Conv2dFpropProblem {
  int n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
};

constexpr bool operator==(const Conv2dFpropProblem& a, const Conv2dFpropProblem& b) {
  return a.n == b.n && a.h == b.h && a.w == b.w && a.c == b.c && a.k == b.k && a.r == b.r && a.s == b.s &&
         a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w;
}

struct Choice {
  const char* workload;
  Conv2dFpropProblem problem;
  const char* kernel;   // the kernel's procedural name, also its type's name in this namespace
  double runtime_ms;    // median measured time
  double gflops;
};

% if conv_entries:
inline constexpr Choice kConv2dFprop[] = {
% for e in conv_entries:
    {"${e['problem'].name}",
     {${", ".join(map(str, e['problem'].args()))}},
     "${e['kernel']}", ${"%.6g" % e['runtime_ms']}, ${"%.1f" % e['gflops']}},
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

// Left undefined: no kernel was chosen for this problem.
template <int N, int H, int W, int C, int K, int R, int S, int PadH, int PadW, int StrideH, int StrideW,
          int DilationH, int DilationW>
struct Conv2dFprop;

% for e in conv_entries:
template <>
struct Conv2dFprop<${", ".join(map(str, e['problem'].args()))}> {
  using Kernel = ${e['kernel']};
  static constexpr const char* name = "${e['kernel']}";
  static constexpr double runtime_ms = ${"%.6g" % e['runtime_ms']};
};
% endfor

// A GEMM D (m x n) = A (m x k) B^T in fp16, B n x k.
struct GemmProblem {
  int m, n, k;
};

constexpr bool operator==(const GemmProblem& a, const GemmProblem& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k;
}

struct GemmChoice {
  const char* workload;
  GemmProblem problem;
  const char* kernel;
  double runtime_ms;
  double gflops;
};

% if gemm_entries:
inline constexpr GemmChoice kGemm[] = {
% for e in gemm_entries:
    {"${e['problem'].name}", {${e['problem'].m}, ${e['problem'].n}, ${e['problem'].k}}, "${e['kernel']}",
     ${"%.6g" % e['runtime_ms']}, ${"%.1f" % e['gflops']}},
% endfor
};

constexpr const GemmChoice* find(const GemmProblem& problem) {
  for (const GemmChoice& choice : kGemm) {
    if (choice.problem == problem) return &choice;
  }
  return nullptr;
}
% endif

// Left undefined: no kernel was chosen for this problem.
template <int M, int N, int K>
struct Gemm;

% for e in gemm_entries:
template <>
struct Gemm<${e['problem'].m}, ${e['problem'].n}, ${e['problem'].k}> {
  using Kernel = ${e['kernel']};
  static constexpr const char* name = "${e['kernel']}";
  static constexpr double runtime_ms = ${"%.6g" % e['runtime_ms']};
};
% endfor

}  // namespace best_kernels
