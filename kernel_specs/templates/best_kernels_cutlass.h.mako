## best_kernels_cutlass.h: the chosen kernels' CUTLASS types and compile-time lookups from a
## problem to its kernel's type, for a build that instantiates the kernels itself (best_kernels.h
## and libbest_kernels.a need none of this). It includes best_kernels.h.
## Inputs: banner, gpu, driver, cuda, cutlass, defines (macros the kernels were compiled with, set
## before CUTLASS's headers), includes, embedded (project headers the kernels need: name -> text),
## type_definitions, conv_entries, gemm_entries, device_arch (the kernels' compute capability,
## e.g. 90), arch_specific (whether they need its arch-specific target) and device_target (the
## nvcc target every device pass must name: 90a, or 80; targets.TARGETS gives the suffix).
${banner}
//
// For each workload, the fastest kernel whose output matched a reference convolution on
// the same inputs, as measured on: GPU ${gpu}, driver ${driver}, CUDA ${cuda}, CUTLASS ${cutlass}
// (${timing}).
//
// Flags. Compile this header as the profiler compiled the kernels it measured: nvcc, the CUTLASS
// include directories (include/ and tools/util/include/), and
<% target = f"compute_{device_target},code=sm_{device_target}" %>\
//     -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -gencode=arch=${target}
// Built without one of them it stops with an #error naming it. Without -DNDEBUG, CUTLASS's
// device-side asserts make ptxas serialize the wgmma instructions (warning C7510): the kernels
// run slower than measured (-DBEST_KERNELS_ALLOW_ASSERTS accepts that, for a debug build).
% if arch_specific:
// The kernels use sm_${device_target} instructions: every device pass must be compute_${device_target}.
% else:
// The kernels need sm_${device_arch} or later: no device pass may target an older GPU.
% endif
% if defines:
//
// Dependent launch. The kernels whose names carry _pdl were measured, and are launched, with
// programmatic dependent launch: such a kernel may start while the kernel before it on the
// stream finishes, and waits for that kernel's writes before it touches memory. It needs
// ${" and ".join(defines)} defined before any CUTLASS header, which this header does:
// include it before other CUTLASS headers (its device code stops with an #error otherwise).
// The macro compiles the same waits into this header's other CUTLASS 3.x kernels, which are
// launched without the attribute and so wait for nothing.
% endif
//
// The kernels of best_kernels.h's tables as CUTLASS types, for a build that instantiates them
// itself; best_kernels.h and libbest_kernels.a (the launcher and the compiled kernels) need none of
// this header.
//
// Compile-time lookup: best_kernels::Conv2dFprop<N, H, W, C, K, R, S, PadH, PadW,
//                          StrideH, StrideW, DilationH, DilationW[, Groups]>::Kernel,
//                      best_kernels::Gemm<M, N, K>::Kernel
// (problems of no epilogue: a fused kernel's epilogue takes a bias and residual its CUTLASS
// arguments are given, as best_kernels_launcher.cu gives them; it is looked up at run time only;
// a kernel named *_eoptional_relu applies a ReLU or none as its arguments say:
// args.epilogue.thread.activation.kind = int(best_kernels::Activation::kRelu or kNone), optional_relu.h)
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
// A kernel named *_splitk<S>_* or *_stream_k_* is kernelgen::SplitK<GemmUniversalAdapter<...>, S>
// (the embedded stream_k_adapter.h): CUTLASS's stream-K tile scheduler splitting each tile's K S
// ways (S = 0: as the scheduler chooses). Its workspace holds counters that must be zero when it
// starts: the launcher zeroes them before every launch (a memset on the stream; it was timed so).
// A kernel named *_patch (a filter as wide as its stride along W, unpadded and undilated there) is
// CUTLASS's ConvUniversal run on the layer seen as S*C channels a pixel: activations
// N x H x (W/S) x (S*C) of strides {H*W*C, W*C, S*C, 1}, filters K x R x 1 x (S*C) (the same bytes),
// the output as the layer's; where the filter is also as tall as its stride (unpadded along H,
// H a multiple of R) the images are N*P of R rows each, strides {R*W*C, W*C, S*C, 1}, at stride 1
// (the launcher's adapter, kernelgen's patch_adapter_3x.h, makes that shape).
// A kernel named *_padc runs a layer of C no multiple of 8 on copies of its activations and
// filters with C padded by zeros to the next multiple of 8 (N x H x W x Cp, K x R x S x Cp): the
// type is the unpadded kernel's, given the padded problem; the launcher's adapter (kernelgen's
// padded_adapter.h) makes the copies in the workspace before each launch.
// A kernel named *_groupwise is CUTLASS's ConvUniversal launched once a group on views of the
// layer's tensors: group g's activations from channel g*C/groups (a pixel's stride C), its filters
// the K/groups rows of the KRS(C/groups) filter from row g*K/groups, its output from channel
// g*K/groups (a pixel's stride K); the launcher spreads the groups over up to 8 streams.
// A kernel named kernelgen_sm80_simt_gemv_* is a matrix-vector kernel of the embedded gemv.h for
// GEMMs of at most m<MaxM> rows: `Kernel::launch(problem, binding, stream)`.
// A GEMM workload is D (m x n, row-major) = A (m x k, row-major) B^T, B (n x k, row-major).
#pragma once

// The flags the kernels were measured with; without one, an #error names it and nothing else is
// compiled.
#if !defined(__CUDACC__)
#error "best_kernels_cutlass.h: compile it with nvcc (in a .cu file): it holds CUDA kernels"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if __cplusplus < 201703L
#error "best_kernels_cutlass.h: compile with -std=c++17 (or later), as its kernels were measured"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if !defined(NDEBUG) && !defined(BEST_KERNELS_ALLOW_ASSERTS)
#error "best_kernels_cutlass.h: compile with -DNDEBUG, as its kernels were measured: with CUTLASS's asserts ptxas serializes wgmma (C7510) and the kernels run slower (-DBEST_KERNELS_ALLOW_ASSERTS accepts that)"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if !defined(__CUDACC_RELAXED_CONSTEXPR__)
#error "best_kernels_cutlass.h: compile with --expt-relaxed-constexpr, as its kernels were measured"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% if arch_specific:
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != ${device_arch}0 || !defined(__CUDA_ARCH_FEAT_SM${device_arch}_ALL))
#error "best_kernels_cutlass.h: compile for sm_${device_target} only (-gencode=arch=compute_${device_target},code=sm_${device_target}): its kernels were measured as sm_${device_target} code and run on no other target"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% else:
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < ${device_arch}0
#error "best_kernels_cutlass.h: compile for sm_${device_arch} or later (-gencode=arch=compute_${device_arch},code=sm_${device_arch}): its kernels need it"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% endif
#if !defined(BEST_KERNELS_WRONG_FLAGS)

#include "best_kernels.h"

% for define in defines:
#if !defined(${define})
#define ${define}
#endif
% endfor
#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
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
// Left undefined: no kernel was chosen for this problem.
template <int N, int H, int W, int C, int K, int R, int S, int PadH, int PadW, int StrideH, int StrideW,
          int DilationH, int DilationW, int Groups = 1>
struct Conv2dFprop;

% for e in conv_entries:
% if not e['epilogue']:
template <>
struct Conv2dFprop<${", ".join(map(str, e['problem'].args()))}, ${e['problem'].groups}> {
  using Kernel = ${e['kernel']};
  static constexpr const char* name = "${e['kernel']}";
  static constexpr const char* setting = "${e['setting']}";  // its tile scheduler's arguments as measured ("" for CUTLASS's defaults)
  static constexpr double runtime_ms = ${"%.6g" % e['runtime_ms']};
};
% endif
% endfor

// Left undefined: no kernel was chosen for this problem.
template <int M, int N, int K>
struct Gemm;

% for e in gemm_entries:
% if not e['epilogue']:
template <>
struct Gemm<${e['problem'].m}, ${e['problem'].n}, ${e['problem'].k}> {
  using Kernel = ${e['kernel']};
  static constexpr const char* name = "${e['kernel']}";
  static constexpr const char* setting = "${e['setting']}";  // its tile scheduler's arguments as measured ("" for CUTLASS's defaults)
  static constexpr double runtime_ms = ${"%.6g" % e['runtime_ms']};
};
% endif
% endfor

}  // namespace best_kernels

#endif  // !BEST_KERNELS_WRONG_FLAGS
