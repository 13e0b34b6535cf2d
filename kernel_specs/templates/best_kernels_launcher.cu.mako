## The launcher of libbest_kernels.a: best_kernels.h's functions, dispatching to the chosen kernels
## through the factories their profiler objects define (kernel.cu.mako: make_<name>() returns the
## kernel behind the adapter it was measured through). Needs no CUTLASS: profiler/operation.h only.
## Inputs: banner, conv_entries, gemm_entries (each with 'launcher', its kernel's index in
## launchers), launchers (the kernels in the fallback order: name, 'epilogue', the
## best_kernels::Epilogue a fused one computes: its initializer, "{}" for none; 'optional_relu',
## whether it is a kernel of epilogue "optional_relu": the ReLU or none set at launch; and 'setting',
## the launch setting it was measured with, "" for none: a kernel chosen with two is two launchers).
${banner}
#include "best_kernels.h"

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "fused.h"
#include "activation_at_launch.h"
#include "grouped.h"
#include "launch_settings.h"
#include "operation.h"

namespace kernelgen {
% for name in dict.fromkeys(launcher['name'] for launcher in launchers):
std::unique_ptr<Operation> make_${name}();
% endfor
}  // namespace kernelgen

namespace best_kernels {
namespace detail {
namespace {  // this library's own: another set's library may be linked beside it

// The fallback order: the kernels as first chosen in kConv2dFprop, then in kGemm (kLaunchOrder).
constexpr kernelgen::OperationFactory kMake[] = {
% for launcher in launchers:
    &kernelgen::make_${launcher['name']},
% endfor
};
constexpr int kLauncherCount = int(sizeof(kMake) / sizeof(kMake[0]));

// The epilogue kMake[i]'s kernel computes: a fused kernel runs the problems of its epilogue only,
// a plain one those of none.
constexpr Epilogue kEpilogueOf[] = {
% for launcher in launchers:
    ${launcher['epilogue']},
% endfor
};
// Whether kMake[i]'s kernel is of epilogue "optional_relu" (activation_at_launch.h): it runs the
// problems of an epilogue of ReLU or no activation, of a residual add only where kEpilogueOf[i]
// reads one, the activation set at each launch.
constexpr bool kOptionalRelu[] = {${", ".join("true" if launcher['optional_relu'] else "false" for launcher in launchers)}};
// The launch setting (launch_settings.h) kMake[i]'s kernel was measured with and is launched with;
// "" for a kernel of none.
constexpr const char* kSetting[] = {${", ".join('"%s"' % launcher['setting'] for launcher in launchers)}};
static_assert(kLauncherCount == int(sizeof(kLaunchOrder) / sizeof(kLaunchOrder[0])),
              "best_kernels.h and its library name the same kernels");
% if conv_entries:

// kConv2dFprop[i]'s kernel is kMake[kConv2dFpropLauncher[i]].
constexpr int kConv2dFpropLauncher[] = {${", ".join(str(e['launcher']) for e in conv_entries)}};
% endif
% if gemm_entries:

// kGemm[i]'s kernel is kMake[kGemmLauncher[i]].
constexpr int kGemmLauncher[] = {${", ".join(str(e['launcher']) for e in gemm_entries)}};
% endif

bool same(const kernelgen::Conv2dProblem& a, const kernelgen::Conv2dProblem& b) {
  return a.n == b.n && a.h == b.h && a.w == b.w && a.c == b.c && a.k == b.k && a.r == b.r && a.s == b.s &&
         a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w;
}

bool same(const kernelgen::Conv2dBinding& a, const kernelgen::Conv2dBinding& b) {
  return a.x == b.x && a.w == b.w && a.y == b.y && a.workspace == b.workspace;
}

bool same(const kernelgen::EpilogueOperands& a, const kernelgen::EpilogueOperands& b) {
  return a.bias == b.bias && a.residual == b.residual;
}

// Each thread's operations, one per kernel: `probe` answers can_implement and workspace_bytes,
// `prepared` is the one it last prepared, with the problem, operands, stream and device it was
// prepared for: launching the same again (a layer run call after call) skips the host-side setup
// (the kernel's arguments, TMA descriptors, shared-memory attributes). An operation serves one
// device and one number of groups: another makes a fresh one (a grouped kernel's streams are its
// device's, and its launches fork to as many of them as its groups take; grouped_adapter_3x.h).
struct Prepared {
  bool valid = false;
  kernelgen::Conv2dProblem problem{};
  int groups = 1;
  kernelgen::Conv2dBinding binding{};
  kernelgen::EpilogueOperands epilogue{};
  int activation = 0;  // an optional_relu kernel's (kernelgen::ActivationKind)
  cudaStream_t stream = nullptr;
  int device = -1;
  std::unique_ptr<kernelgen::Operation> operation;
};

struct Kernels {
  std::unique_ptr<kernelgen::Operation> probe[kLauncherCount];
  Prepared prepared[kLauncherCount];
};

Kernels& kernels() {
  thread_local Kernels each;
  return each;
}

// `operation` told the groups of the problems it is given (grouped.h), or nullptr where it cannot
// take them: a grouped problem is a GroupedOperation's only, a dense one never is.
kernelgen::Operation* with_groups(kernelgen::Operation* operation, int groups) {
  auto* grouped = dynamic_cast<kernelgen::GroupedOperation*>(operation);
  if ((grouped != nullptr) != (groups > 1)) return nullptr;
  if (grouped != nullptr) grouped->set_groups(groups);
  return operation;
}

// kMake[i]'s kernel set to launch with kSetting[i], or nullptr where it offers no such setting.
std::unique_ptr<kernelgen::Operation> make(int i) {
  std::unique_ptr<kernelgen::Operation> operation = kMake[i]();
  auto* settings = dynamic_cast<kernelgen::SettingsAtLaunch*>(operation.get());
  if (kSetting[i][0] == '\0') return settings == nullptr ? std::move(operation) : nullptr;
  const long index = settings == nullptr ? -1 : kernelgen::setting_index(*settings, kSetting[i]);
  if (index < 0) return nullptr;
  settings->set_setting(static_cast<size_t>(index));
  return operation;
}

kernelgen::Operation* probe(int i, int groups) {
  auto& operation = kernels().probe[i];
  if (!operation) operation = make(i);
  return operation == nullptr ? nullptr : with_groups(operation.get(), groups);
}

bool supports(int i, const kernelgen::Conv2dProblem& p, int groups, const Epilogue& epilogue) {
  if (kOptionalRelu[i] ? epilogue == Epilogue{} || (epilogue.add && !kEpilogueOf[i].add) ||
                            (epilogue.activation != Activation::kNone && epilogue.activation != Activation::kRelu)
                       : !(kEpilogueOf[i] == epilogue))
    return false;
  kernelgen::Operation* operation = probe(i, groups);
  return operation != nullptr && operation->can_implement(p).empty();
}

size_t workspace_of(int i, const kernelgen::Conv2dProblem& p, int groups) {
  kernelgen::Operation* operation = probe(i, groups);
  return operation == nullptr ? 0 : operation->workspace_bytes(p);
}

bool launch_kernel(int i, const kernelgen::Conv2dProblem& p, int groups, const kernelgen::Conv2dBinding& b,
                   const kernelgen::EpilogueOperands& e, int activation, cudaStream_t stream) {
  Prepared& last = kernels().prepared[i];
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();  // no device: prepare() says why, if it must
  if (!(last.valid && same(last.problem, p) && last.groups == groups && same(last.binding, b) &&
        same(last.epilogue, e) && last.activation == activation && last.stream == stream && last.device == device)) {
    last.valid = false;
    if (!last.operation || last.groups != groups || last.device != device) last.operation = make(i);
    if (last.operation == nullptr || with_groups(last.operation.get(), groups) == nullptr) return false;
    auto* fused = dynamic_cast<kernelgen::FusedOperation*>(last.operation.get());
    if ((fused != nullptr) != !(kEpilogueOf[i] == Epilogue{})) return false;
    if (fused != nullptr) fused->set_epilogue({e});
    auto* at_launch = dynamic_cast<kernelgen::ActivationAtLaunch*>(last.operation.get());
    if ((at_launch != nullptr) != kOptionalRelu[i]) return false;
    if (at_launch != nullptr) at_launch->set_activation(activation);
    if (!last.operation->prepare(p, {b}, stream).empty()) return false;
    last.problem = p, last.groups = groups, last.binding = b, last.epilogue = e, last.activation = activation;
    last.stream = stream;
    last.device = device;
    last.valid = true;
  }
  return last.operation->run(0, stream);
}

// A GEMM is the 1x1 convolution of m pixels with k channels by n filters, as it was profiled.
kernelgen::Conv2dProblem as_conv(const Conv2dFpropProblem& p) {
  return {p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w};
}
kernelgen::Conv2dProblem as_conv(const GemmProblem& p) { return {p.m, 1, 1, p.k, p.n, 1, 1, 0, 0, 1, 1, 1, 1}; }
int groups_of(const Conv2dFpropProblem& p) { return p.groups; }
int groups_of(const GemmProblem&) { return 1; }

int chosen(const Conv2dFpropProblem& problem) {
% if conv_entries:
  const Choice* choice = find(problem);
  return choice ? kConv2dFpropLauncher[choice - kConv2dFprop] : -1;
% else:
  (void)problem;
  return -1;
% endif
}

int chosen(const GemmProblem& problem) {
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
bool fits_int(std::initializer_list<long long> factors) {
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
Status check(const kernelgen::Conv2dProblem& p, int groups = 1) {
  if (p.n < 1 || p.h < 1 || p.w < 1 || p.c < 1 || p.k < 1 || p.r < 1 || p.s < 1 || p.pad_h < 0 || p.pad_w < 0 ||
      p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 || groups < 1 || p.c % groups != 0 ||
      p.k % groups != 0)
    return Status::kErrorInvalidProblem;
  const long long padded_h = p.h + 2LL * p.pad_h, padded_w = p.w + 2LL * p.pad_w;
  const long long filter_h = 1LL * p.dilation_h * (p.r - 1) + 1, filter_w = 1LL * p.dilation_w * (p.s - 1) + 1;
  if (padded_h < filter_h || padded_w < filter_w)
    return Status::kErrorInvalidProblem;  // the dilated filter does not fit the padded input
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
  return fits ? Status::kSuccess : Status::kErrorNotSupported;
}

// The index in kMake of the kernel that runs `p`: `chosen` (measured on `p`, so its
// can_implement accepted it), else the first of its epilogue that accepts it, else -1.
int pick(const kernelgen::Conv2dProblem& p, int groups, const Epilogue& epilogue, int chosen) {
  if (check(p, groups) != Status::kSuccess) return -1;
  if (chosen >= 0) return chosen;
  for (int i = 0; i < kLauncherCount; ++i) {
    if (supports(i, p, groups, epilogue)) return i;
  }
  return -1;
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

Status launch(const kernelgen::Conv2dProblem& p, int groups, const Epilogue& epilogue, int chosen, const void* x,
              const void* w, void* y, const void* bias, const void* residual, void* workspace, size_t workspace_bytes,
              cudaStream_t stream) {
  Status status = check(p, groups);
  if (status != Status::kSuccess) return status;
  if (x == nullptr || w == nullptr || y == nullptr) return Status::kErrorInvalidProblem;
  if ((bias != nullptr) != epilogue.bias || (residual != nullptr) != epilogue.add) return Status::kErrorInvalidProblem;
  if (!aligned(x) || !aligned(w) || !aligned(y) || !aligned(workspace) || !aligned(bias) || !aligned(residual))
    return Status::kErrorMisalignedOperand;
  const int index = pick(p, groups, epilogue, chosen);
  if (index < 0) return Status::kErrorNotSupported;
  const size_t needed = workspace_of(index, p, groups);
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) return Status::kErrorWorkspaceNull;
  return launch_kernel(index, p, groups, {x, w, y, needed > 0 ? workspace : nullptr}, {bias, residual},
                       static_cast<int>(epilogue.activation), stream)
             ? Status::kSuccess
             : Status::kErrorInternal;
}

size_t workspace(const kernelgen::Conv2dProblem& p, int groups, const Epilogue& epilogue, int chosen) {
  const int index = pick(p, groups, epilogue, chosen);
  return index < 0 ? 0 : workspace_of(index, p, groups);
}

const char* kernel(const kernelgen::Conv2dProblem& p, int groups, const Epilogue& epilogue, int chosen) {
  const int index = pick(p, groups, epilogue, chosen);
  return index < 0 ? nullptr : kLaunchOrder[index];
}

}  // namespace
}  // namespace detail

size_t workspace_size(const Conv2dFpropProblem& problem) {
  return detail::workspace(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                           detail::chosen(problem));
}

size_t workspace_size(const GemmProblem& problem) {
  return detail::workspace(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                           detail::chosen(problem));
}

const char* kernel_for(const Conv2dFpropProblem& problem) {
  return detail::kernel(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                        detail::chosen(problem));
}

const char* kernel_for(const GemmProblem& problem) {
  return detail::kernel(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                        detail::chosen(problem));
}

Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                    const Element* bias, const Element* residual, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream) {
  return detail::launch(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                        detail::chosen(problem), x, w, y, bias, residual, workspace, workspace_bytes, stream);
}

Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, const Element* bias,
            const Element* residual, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return detail::launch(detail::as_conv(problem), detail::groups_of(problem), problem.epilogue,
                        detail::chosen(problem), a, b, d, bias, residual, workspace, workspace_bytes, stream);
}

Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x, const Element* w, Element* y,
                    void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return conv2d_fprop(problem, x, w, y, nullptr, nullptr, workspace, workspace_bytes, stream);
}

Status gemm(const GemmProblem& problem, const Element* a, const Element* b, Element* d, void* workspace,
            size_t workspace_bytes, cudaStream_t stream) {
  return gemm(problem, a, b, d, nullptr, nullptr, workspace, workspace_bytes, stream);
}

const char* status_string(Status status) {
  switch (status) {
    case Status::kSuccess: return "Success";
    case Status::kErrorMisalignedOperand: return "Error Misaligned Operand";
    case Status::kErrorInvalidProblem: return "Error Invalid Problem";
    case Status::kErrorNotSupported: return "Error Not Supported";
    case Status::kErrorWorkspaceNull: return "Error Workspace Null";
    case Status::kErrorInternal: return "Error Internal";
  }
  return "Unknown status";
}

}  // namespace best_kernels
