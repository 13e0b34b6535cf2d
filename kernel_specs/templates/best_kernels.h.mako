## The header other builds include: per workload the chosen kernel, its CUTLASS type,
## its measured time, lookups from a problem to its kernel, and a launcher that runs them.
## Inputs: banner, source, gpu, driver, cuda, cutlass, timing (how the times were taken), element
## (the C++ type of every operand and output: the set's dtype), defines (macros the kernels were
## compiled with, set before CUTLASS's headers), includes, embedded (project headers
## the kernels and their profiler adapters need: name -> text), type_definitions, conv_entries,
## gemm_entries (each with 'launcher', its kernel's index in launchers), launchers (the kernels in
## the launcher's fallback order: name, adapter), device_arch (the kernels' compute capability,
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
// Launcher: device pointers, each 16-byte aligned; x NHWC, w KRSC, y NPQK (as for find() below),
// a, b, d as for a GEMM workload below.
//   size_t          best_kernels::workspace_size(problem)     bytes of workspace a launch needs
//   cutlass::Status best_kernels::conv2d_fprop(problem, x, w, y, workspace, workspace_bytes, stream)
//   cutlass::Status best_kernels::gemm(problem, a, b, d, workspace, workspace_bytes, stream)
//   const char*     best_kernels::kernel_for(problem)         the kernel a launch runs, or nullptr
// Define BEST_KERNELS_IMPLEMENTATION before including this header in exactly one .cu file of a
// program: that file compiles the launcher and every kernel below (up to a minute of one core per
// CUTLASS 3.x kernel); other files see the declarations. To compile the kernels in parallel, split
// them into parts: with BEST_KERNELS_PARTS=n defined in every file that includes the header, the
// BEST_KERNELS_IMPLEMENTATION file compiles the launcher and part 0 of the kernels, and n - 1 other
// .cu files, each defining BEST_KERNELS_PART=1, ..., n-1 (and BEST_KERNELS_PARTS=n), compile the
// rest: kernel i of detail::kLaunchers is in part i % n. A problem listed below runs its chosen
// kernel. Any other problem runs the first kernel of detail::kLaunchers that its profiler
// adapter's can_implement accepts: the kernels below in the order they are first chosen in
// kConv2dFprop, then in kGemm. A launch is asynchronous on `stream`; it returns
//   kSuccess                 launched
//   kErrorInvalidProblem     an extent below 1, padding below 0, a stride or dilation below 1, an empty
//                            output, or a null x, w, y (a, b, d)
//   kErrorMisalignedOperand  an operand, or the workspace, not 16-byte aligned
//   kErrorWorkspaceNull      workspace_bytes below workspace_size(problem), or a null workspace that
//                            is needed
//   kErrorNotSupported       no kernel of this header runs the problem, or one of its sizes exceeds
//                            INT_MAX (the kernels compute them in int; detail::check lists them)
//   kErrorInternal           the kernel could not be set up or launched (e.g. not an sm_${device_arch} GPU;
//                            cudaGetLastError() says why)
// and launches nothing unless it returns kSuccess or kErrorInternal.
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
// A kernel named *_splitk<S>_* or *_stream_k_* is kernelgen::SplitK<GemmUniversalAdapter<...>, S>
// (the embedded stream_k_adapter.h): CUTLASS's stream-K tile scheduler splitting each tile's K S
// ways (S = 0: as the scheduler chooses). Its workspace holds counters that must be zero when it
// starts: the launcher zeroes them before every launch (a memset on the stream; it was timed so).
// A kernel named kernelgen_sm80_simt_gemv_* is a matrix-vector kernel of the embedded gemv.h for
// GEMMs of at most m<MaxM> rows: `Kernel::launch(problem, binding, stream)`.
// A GEMM workload is D (m x n, row-major) = A (m x k, row-major) B^T, B (n x k, row-major).
#pragma once

// The flags the kernels were measured with; without one, an #error names it and nothing else is
// compiled.
#if !defined(__CUDACC__)
#error "best_kernels.h: compile it with nvcc (in a .cu file): it holds CUDA kernels"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if __cplusplus < 201703L
#error "best_kernels.h: compile with -std=c++17 (or later), as its kernels were measured"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if !defined(NDEBUG) && !defined(BEST_KERNELS_ALLOW_ASSERTS)
#error "best_kernels.h: compile with -DNDEBUG, as its kernels were measured: with CUTLASS's asserts ptxas serializes wgmma (C7510) and the kernels run slower (-DBEST_KERNELS_ALLOW_ASSERTS accepts that)"
#define BEST_KERNELS_WRONG_FLAGS
#endif
#if !defined(__CUDACC_RELAXED_CONSTEXPR__)
#error "best_kernels.h: compile with --expt-relaxed-constexpr, as its kernels were measured"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% if arch_specific:
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != ${device_arch}0 || !defined(__CUDA_ARCH_FEAT_SM${device_arch}_ALL))
#error "best_kernels.h: compile for sm_${device_target} only (-gencode=arch=compute_${device_target},code=sm_${device_target}): its kernels were measured as sm_${device_target} code and run on no other target"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% else:
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < ${device_arch}0
#error "best_kernels.h: compile for sm_${device_arch} or later (-gencode=arch=compute_${device_arch},code=sm_${device_arch}): its kernels need it"
#define BEST_KERNELS_WRONG_FLAGS
#endif
% endif
#if !defined(BEST_KERNELS_WRONG_FLAGS)

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include <cuda_runtime.h>

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

// How many entries kConv2dFprop and kGemm hold (an empty table is left out), for #if.
#define BEST_KERNELS_CONV2D_FPROP_COUNT ${len(conv_entries)}
#define BEST_KERNELS_GEMM_COUNT ${len(gemm_entries)}

namespace best_kernels {

% for definition in type_definitions:
${definition}
% endfor
// The type of every operand and output of this header's problems (the set's dtype).
using Element = ${element};

// A forward convolution, NHWC activations, KRSC filters, NPQK output, all of Element.
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

// A GEMM D (m x n) = A (m x k) B^T of Element, B n x k.
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

// The launcher (see the top of this header).
size_t workspace_size(const Conv2dFpropProblem& problem);
size_t workspace_size(const GemmProblem& problem);
const char* kernel_for(const Conv2dFpropProblem& problem);
const char* kernel_for(const GemmProblem& problem);
cutlass::Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream);
cutlass::Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream);

// Which of the kernels this file compiles (see the top of this header).
#if defined(BEST_KERNELS_PARTS)
#if !defined(BEST_KERNELS_PART) && defined(BEST_KERNELS_IMPLEMENTATION)
#define BEST_KERNELS_PART 0
#endif
#if !defined(BEST_KERNELS_PART)
#error "best_kernels.h: with BEST_KERNELS_PARTS, a file defines BEST_KERNELS_IMPLEMENTATION (the launcher and part 0) or BEST_KERNELS_PART (1 to BEST_KERNELS_PARTS - 1)"
#elif BEST_KERNELS_PARTS < 1 || BEST_KERNELS_PART < 0 || BEST_KERNELS_PART >= BEST_KERNELS_PARTS
#error "best_kernels.h: BEST_KERNELS_PART must be 0 to BEST_KERNELS_PARTS - 1"
#endif
#define BEST_KERNELS_IN_THIS_PART(i) ((i) % BEST_KERNELS_PARTS == BEST_KERNELS_PART)
#elif defined(BEST_KERNELS_PART)
#error "best_kernels.h: BEST_KERNELS_PART needs BEST_KERNELS_PARTS, the number of parts"
#elif defined(BEST_KERNELS_IMPLEMENTATION)
#define BEST_KERNELS_IN_THIS_PART(i) 1
#else
#define BEST_KERNELS_IN_THIS_PART(i) 0
#endif

#if defined(BEST_KERNELS_IMPLEMENTATION) || defined(BEST_KERNELS_PARTS)
namespace detail {

// One kernel behind the adapter the profiler measured it through (embedded above).
struct Launcher {
  const char* kernel;
  bool (*supports)(const kernelgen::Conv2dProblem&);
  size_t (*workspace)(const kernelgen::Conv2dProblem&);
  bool (*launch)(const kernelgen::Conv2dProblem&, const kernelgen::Conv2dBinding&, cudaStream_t);
};

inline bool same(const kernelgen::Conv2dProblem& a, const kernelgen::Conv2dProblem& b) {
  return a.n == b.n && a.h == b.h && a.w == b.w && a.c == b.c && a.k == b.k && a.r == b.r && a.s == b.s &&
         a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w;
}

inline bool same(const kernelgen::Conv2dBinding& a, const kernelgen::Conv2dBinding& b) {
  return a.x == b.x && a.w == b.w && a.y == b.y && a.workspace == b.workspace;
}

template <typename Operation>
struct Adapted {
  static bool supports(const kernelgen::Conv2dProblem& p) { return Operation().can_implement(p).empty(); }
  static size_t workspace(const kernelgen::Conv2dProblem& p) { return Operation().workspace_bytes(p); }

  // Each thread keeps the operation it last prepared for this kernel, with the problem, operands,
  // stream and device it was prepared for: launching the same again (a layer run call after call)
  // skips the host-side setup (the kernel's arguments, TMA descriptors, shared-memory attributes).
  static bool launch(const kernelgen::Conv2dProblem& p, const kernelgen::Conv2dBinding& b, cudaStream_t stream) {
    struct Prepared {
      bool valid = false;
      kernelgen::Conv2dProblem problem{};
      kernelgen::Conv2dBinding binding{};
      cudaStream_t stream = nullptr;
      int device = -1;
      Operation operation;
    };
    thread_local Prepared last;
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();  // no device: prepare() says why, if it must
    if (!(last.valid && same(last.problem, p) && same(last.binding, b) && last.stream == stream &&
          last.device == device)) {
      last.valid = false;
      if (!last.operation.prepare(p, {b}, stream).empty()) return false;
      last.problem = p, last.binding = b, last.stream = stream, last.device = device, last.valid = true;
    }
    return last.operation.run(0, stream);
  }
};

// Each kernel's entry points, defined in the file of its part.
% for i, launcher in enumerate(launchers):

// kLaunchers[${i}]: ${launcher['name']}
bool supports_${i}(const kernelgen::Conv2dProblem& p);
size_t workspace_${i}(const kernelgen::Conv2dProblem& p);
bool launch_${i}(const kernelgen::Conv2dProblem& p, const kernelgen::Conv2dBinding& b, cudaStream_t stream);
#if BEST_KERNELS_IN_THIS_PART(${i})
using Operation${i} = ${launcher['adapter']};
bool supports_${i}(const kernelgen::Conv2dProblem& p) { return Adapted<Operation${i}>::supports(p); }
size_t workspace_${i}(const kernelgen::Conv2dProblem& p) { return Adapted<Operation${i}>::workspace(p); }
bool launch_${i}(const kernelgen::Conv2dProblem& p, const kernelgen::Conv2dBinding& b, cudaStream_t stream) {
  return Adapted<Operation${i}>::launch(p, b, stream);
}
#endif
% endfor

}  // namespace detail
#endif  // BEST_KERNELS_IMPLEMENTATION || BEST_KERNELS_PARTS

#if defined(BEST_KERNELS_IMPLEMENTATION)
namespace detail {

// The fallback order: the kernels as first chosen in kConv2dFprop, then in kGemm.
inline constexpr Launcher kLaunchers[] = {
% for i, launcher in enumerate(launchers):
    {"${launcher['name']}", &supports_${i}, &workspace_${i}, &launch_${i}},
% endfor
};
constexpr int kLauncherCount = int(sizeof(kLaunchers) / sizeof(kLaunchers[0]));
% if conv_entries:

// kConv2dFprop[i]'s kernel is kLaunchers[kConv2dFpropLauncher[i]].
inline constexpr int kConv2dFpropLauncher[] = {${", ".join(str(e['launcher']) for e in conv_entries)}};
% endif
% if gemm_entries:

// kGemm[i]'s kernel is kLaunchers[kGemmLauncher[i]].
inline constexpr int kGemmLauncher[] = {${", ".join(str(e['launcher']) for e in gemm_entries)}};
% endif

// A GEMM is the 1x1 convolution of m pixels with k channels by n filters, as it was profiled.
inline kernelgen::Conv2dProblem as_conv(const Conv2dFpropProblem& p) {
  return {p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w};
}
inline kernelgen::Conv2dProblem as_conv(const GemmProblem& p) { return {p.m, 1, 1, p.k, p.n, 1, 1, 0, 0, 1, 1, 1, 1}; }

inline int chosen(const Conv2dFpropProblem& problem) {
% if conv_entries:
  const Choice* choice = find(problem);
  return choice ? kConv2dFpropLauncher[choice - kConv2dFprop] : -1;
% else:
  (void)problem;
  return -1;
% endif
}

inline int chosen(const GemmProblem& problem) {
% if gemm_entries:
  const GemmChoice* choice = find(problem);
  return choice ? kGemmLauncher[choice - kGemm] : -1;
% else:
  (void)problem;
  return -1;
% endif
}

// Whether the product of `factors` (each at least 1) is at most INT_MAX; no factor or partial
// product overflows 64 bits, however large the factors.
inline bool fits_int(std::initializer_list<long long> factors) {
  long long product = 1;
  for (long long factor : factors) {
    if (factor > 2147483647LL / product) return false;
    product *= factor;
  }
  return true;
}

// kSuccess when `p` is a convolution some kernel may run. The adapters, CUTLASS and the kernels
// compute its sizes in int: P = (h + 2*pad_h - dilation_h*(r-1) - 1) / stride_h + 1 and Q, the
// implicit GEMM's extents, tensor offsets. Each is computed here in 64 bits first, and a problem
// where one exceeds INT_MAX is refused, so that none of them overflows there (a P computed from
// a wrapped h + 2*pad_h differs from this one, or is 0 and then a divisor). A workload line is
// refused on the same sizes (kernelgen/ops/conv2d_fprop.py): every problem of the tables passes.
inline cutlass::Status check(const kernelgen::Conv2dProblem& p) {
  if (p.n < 1 || p.h < 1 || p.w < 1 || p.c < 1 || p.k < 1 || p.r < 1 || p.s < 1 || p.pad_h < 0 || p.pad_w < 0 ||
      p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1)
    return cutlass::Status::kErrorInvalidProblem;
  const long long padded_h = p.h + 2LL * p.pad_h, padded_w = p.w + 2LL * p.pad_w;
  const long long filter_h = 1LL * p.dilation_h * (p.r - 1) + 1, filter_w = 1LL * p.dilation_w * (p.s - 1) + 1;
  if (padded_h < filter_h || padded_w < filter_w)
    return cutlass::Status::kErrorInvalidProblem;  // the dilated filter does not fit the padded input
  const long long p_out = (padded_h - filter_h) / p.stride_h + 1, q_out = (padded_w - filter_w) / p.stride_w + 1;
  // The padded extents bound P's and Q's numerators, the dilated filter's extents and the input
  // rows and columns p * stride - pad + r * dilation that the kernels compute. A GEMM (as_conv)
  // is n = m, c = k, k = n: the tensors' products are m*k, n*k and m*n.
  const bool fits = fits_int({padded_h}) && fits_int({padded_w}) &&
                    fits_int({p.n, p.h, p.w, p.c}) &&            // the input's elements
                    fits_int({p.k, p.r, p.s, p.c}) &&            // the filter's
                    fits_int({p.n, p_out, q_out, p.k}) &&        // the output's
                    fits_int({p.n, padded_h, padded_w, p.c}) &&  // the padded input's: offsets of padding pixels
                    fits_int({p.dilation_h, p.w, p.c});          // elements between the rows two filter rows read
  return fits ? cutlass::Status::kSuccess : cutlass::Status::kErrorNotSupported;
}

// The index in kLaunchers of the kernel that runs `p`: `chosen` (measured on `p`, so its
// can_implement accepted it), else the first that accepts it, else -1.
inline int pick(const kernelgen::Conv2dProblem& p, int chosen) {
  if (check(p) != cutlass::Status::kSuccess) return -1;
  if (chosen >= 0) return chosen;
  for (int i = 0; i < kLauncherCount; ++i) {
    if (kLaunchers[i].supports(p)) return i;
  }
  return -1;
}

inline bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

inline cutlass::Status launch(const kernelgen::Conv2dProblem& p, int chosen, const void* x, const void* w, void* y,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  cutlass::Status status = check(p);
  if (status != cutlass::Status::kSuccess) return status;
  if (x == nullptr || w == nullptr || y == nullptr) return cutlass::Status::kErrorInvalidProblem;
  if (!aligned(x) || !aligned(w) || !aligned(y) || !aligned(workspace)) return cutlass::Status::kErrorMisalignedOperand;
  const int index = pick(p, chosen);
  if (index < 0) return cutlass::Status::kErrorNotSupported;
  const size_t needed = kLaunchers[index].workspace(p);
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) return cutlass::Status::kErrorWorkspaceNull;
  return kLaunchers[index].launch(p, {x, w, y, needed > 0 ? workspace : nullptr}, stream)
             ? cutlass::Status::kSuccess
             : cutlass::Status::kErrorInternal;
}

inline size_t workspace(const kernelgen::Conv2dProblem& p, int chosen) {
  const int index = pick(p, chosen);
  return index < 0 ? 0 : kLaunchers[index].workspace(p);
}

inline const char* kernel(const kernelgen::Conv2dProblem& p, int chosen) {
  const int index = pick(p, chosen);
  return index < 0 ? nullptr : kLaunchers[index].kernel;
}

}  // namespace detail

size_t workspace_size(const Conv2dFpropProblem& problem) {
  return detail::workspace(detail::as_conv(problem), detail::chosen(problem));
}

size_t workspace_size(const GemmProblem& problem) {
  return detail::workspace(detail::as_conv(problem), detail::chosen(problem));
}

const char* kernel_for(const Conv2dFpropProblem& problem) {
  return detail::kernel(detail::as_conv(problem), detail::chosen(problem));
}

const char* kernel_for(const GemmProblem& problem) {
  return detail::kernel(detail::as_conv(problem), detail::chosen(problem));
}

cutlass::Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return detail::launch(detail::as_conv(problem), detail::chosen(problem), x, w, y, workspace, workspace_bytes,
                        stream);
}

cutlass::Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream) {
  return detail::launch(detail::as_conv(problem), detail::chosen(problem), a, b, d, workspace, workspace_bytes,
                        stream);
}
#endif  // BEST_KERNELS_IMPLEMENTATION

}  // namespace best_kernels

#endif  // !BEST_KERNELS_WRONG_FLAGS
