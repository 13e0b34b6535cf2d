// best_conv.conv2d(x, w, stride=1, padding=0, dilation=1, out=None, bias=None, residual=None,
// activation="none", groups=1): the convolution of channels_last CUDA tensors x (N, C, H, W) and
// w (K, C/groups, R, S) of the header's element type (float16 or bfloat16, best_conv.element())
// through best_kernels.h's launcher, as torch.nn.functional.conv2d(x, w, None, stride, padding,
// dilation, groups) computes it; with bias (K values), residual (the output's shape, channels_last) or an activation
// (relu, silu, gelu, hardswish, sigmoid), activation(conv + bias + residual), a problem of that
// epilogue: the header's fused kernel for it runs, or none.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <array>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "best_conv.h"

namespace {

namespace py = pybind11;

// Refusals raise ValueError with a message built here: on the H200 machine's PyTorch 2.11 an
// extension's TORCH_CHECK with a number in its message crashed the process instead of raising.
void append(std::string& out, const char* part) { out += part; }
void append(std::string& out, const std::string& part) { out += part; }
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
void append(std::string& out, T part) {
  out += std::to_string(part);
}

template <typename... Parts>
void require(bool ok, const Parts&... parts) {
  if (ok) return;
  std::string message = "best_conv: ";
  (append(message, parts), ...);
  throw std::invalid_argument(message);
}

std::string shape(c10::IntArrayRef sizes) {
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + ")";
}
std::string shape(const torch::Tensor& t) { return shape(t.sizes()); }

// best_kernels::Activation's values, by name.
const char* const kActivations[] = {"none", "relu", "silu", "gelu", "hardswish", "sigmoid"};

int activation_of(const std::string& name) {
  for (int i = 0; i < int(sizeof(kActivations) / sizeof(kActivations[0])); ++i) {
    if (name == kActivations[i]) return i;
  }
  require(false, "activation must be one of none, relu, silu, gelu, hardswish, sigmoid, not '", name.substr(0, 40), "'");
  return 0;
}

// An int, or a sequence of one or two ints, as (height, width).
std::array<int, 2> pair(const py::object& value, const char* name, int least) {
  std::vector<int64_t> values;
  if (py::isinstance<py::int_>(value)) {
    values = {value.cast<int64_t>(), value.cast<int64_t>()};
  } else {
    try {
      values = value.cast<std::vector<int64_t>>();
    } catch (const py::cast_error&) {
      require(false, name, " must be an int or a pair of ints");
    }
    if (values.size() == 1) values.push_back(values[0]);
  }
  require(values.size() == 2, name, " must be an int or a pair of ints, got ",
              values.size(), " values");
  for (int64_t v : values) {
    require(v >= least && v <= (1 << 30), name, " must be at least ", least, ", got ", v);
  }
  return {int(values[0]), int(values[1])};
}

// A CUDA tensor of the header's element type.
void check_element(const torch::Tensor& t, const char* name) {
  require(t.is_cuda(), name, " must be a CUDA tensor");
  const bool bf16 = std::string(best_conv::element()) == "bf16";  // best_kernels.h's element type
  require(t.scalar_type() == (bf16 ? torch::kBFloat16 : torch::kHalf), name, " must be ", bf16 ? "bfloat16" : "float16",
          ", got ", c10::toString(t.scalar_type()));
}

void check_operand(const torch::Tensor& t, const char* name, const char* dims) {
  check_element(t, name);
  require(t.dim() == 4, name, " must be 4-D ", dims, ", got ", t.dim(), "-D");
  require(t.is_contiguous(torch::MemoryFormat::ChannelsLast), name,
              " must be channels_last (", name, ".to(memory_format=torch.channels_last))");
  for (int64_t extent : t.sizes()) {
    require(extent >= 1 && extent <= (1 << 30), name, " has an extent ", extent);
  }
}

// A bias operand: a contiguous (k,) CUDA tensor of `like`'s type on its device (`like` named
// `name` in the messages); an undefined tensor where `bias` is None.
torch::Tensor bias_operand(const py::object& bias, const torch::Tensor& like, const char* name, int64_t k) {
  if (bias.is_none()) return {};
  const torch::Tensor t = bias.cast<torch::Tensor>();
  require(t.is_cuda() && t.device() == like.device(), "bias must be a CUDA tensor on ", name, "'s device");
  require(t.scalar_type() == like.scalar_type(), "bias must be of ", name, "'s type, got ", c10::toString(t.scalar_type()));
  require(t.dim() == 1 && t.size(0) == k && t.is_contiguous(), "bias must be a contiguous (", k, ",) tensor, got ",
          shape(t));
  return t;
}

best_conv::Problem problem_of(const torch::Tensor& x, const torch::Tensor& w, const py::object& stride,
                              const py::object& padding, const py::object& dilation, int64_t groups) {
  check_operand(x, "x", "(N, C, H, W)");
  check_operand(w, "w", "(K, C/groups, R, S)");
  require(x.device() == w.device(), "x and w are on different devices");
  require(groups >= 1 && groups <= x.size(1), "groups must be from 1 to x's ", x.size(1), " channels, got ", groups);
  require(x.size(1) % groups == 0 && w.size(0) % groups == 0, "groups ", groups, " must divide x's ", x.size(1),
          " channels and w's ", w.size(0), " filters");
  require(w.size(1) * groups == x.size(1), "w has ", w.size(1), " input channels a group, x has ", x.size(1),
          " in ", groups, " group(s)");
  auto [stride_h, stride_w] = pair(stride, "stride", 1);
  auto [pad_h, pad_w] = pair(padding, "padding", 0);
  auto [dilation_h, dilation_w] = pair(dilation, "dilation", 1);
  best_conv::Problem p{int(x.size(0)), int(x.size(2)), int(x.size(3)), int(x.size(1)), int(w.size(0)),
                       int(w.size(2)), int(w.size(3)), pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w};
  p.groups = int(groups);
  return p;
}

torch::Tensor conv2d(const torch::Tensor& x, const torch::Tensor& w, const py::object& stride,
                     const py::object& padding, const py::object& dilation, const py::object& out,
                     const py::object& bias, const py::object& residual, const std::string& activation,
                     int64_t groups) {
  best_conv::Problem p = problem_of(x, w, stride, padding, dilation, groups);
  p.bias = !bias.is_none(), p.add = !residual.is_none(), p.activation = activation_of(activation);
  torch::Tensor bias_t = bias_operand(bias, x, "x", p.k), residual_t;
  const int64_t out_h = (int64_t(p.h) + 2 * p.pad_h - int64_t(p.dilation_h) * (p.r - 1) - 1) / p.stride_h + 1;
  const int64_t out_w = (int64_t(p.w) + 2 * p.pad_w - int64_t(p.dilation_w) * (p.s - 1) - 1) / p.stride_w + 1;
  require(out_h >= 1 && out_w >= 1, "the ", p.r, "x", p.s,
              " filter does not fit the padded ", p.h, "x", p.w, " input");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor y;
  if (out.is_none()) {
    y = torch::empty({p.n, p.k, out_h, out_w}, x.options().memory_format(torch::MemoryFormat::ChannelsLast));
  } else {  // the caller's output tensor, written in place
    y = out.cast<torch::Tensor>();
    check_operand(y, "out", "(N, K, P, Q)");
    require(y.device() == x.device(), "out is on another device than x");
    require(y.size(0) == p.n && y.size(1) == p.k && y.size(2) == out_h && y.size(3) == out_w, "out is ", shape(y),
            ", the output is (", p.n, ", ", p.k, ", ", out_h, ", ", out_w, ")");
  }
  if (p.add) {
    residual_t = residual.cast<torch::Tensor>();
    check_operand(residual_t, "residual", "(N, K, P, Q)");
    require(residual_t.device() == x.device(), "residual is on another device than x");
    require(residual_t.sizes() == y.sizes(), "residual is ", shape(residual_t), ", the output is ", shape(y));
  }
  const size_t bytes = best_conv::workspace_size(p);
  torch::Tensor workspace = torch::empty({int64_t(bytes)}, x.options().dtype(torch::kUInt8));
  const std::string error = best_conv::conv2d_fprop(
      p, x.data_ptr(), w.data_ptr(), y.data_ptr(), p.bias ? bias_t.data_ptr() : nullptr,
      p.add ? residual_t.data_ptr() : nullptr, bytes ? workspace.data_ptr() : nullptr, bytes,
      c10::cuda::getCurrentCUDAStream().stream());
  require(error.empty(), "best_kernels::conv2d_fprop refused x ", shape(x), ", w ", shape(w),
              ", stride (", p.stride_h, ", ", p.stride_w, "), padding (", p.pad_h, ", ", p.pad_w, "), dilation (",
              p.dilation_h, ", ", p.dilation_w, "), groups ", p.groups, ": ", error);
  return y;
}

py::object kernel_for(const torch::Tensor& x, const torch::Tensor& w, const py::object& stride,
                      const py::object& padding, const py::object& dilation, bool bias, bool residual,
                      const std::string& activation, int64_t groups) {
  best_conv::Problem p = problem_of(x, w, stride, padding, dilation, groups);
  p.bias = bias, p.add = residual, p.activation = activation_of(activation);
  const char* name = best_conv::kernel_for(p);
  return name ? py::object(py::str(name)) : py::object(py::none());
}

// A row-major CUDA matrix (or batch of rows: x's leading dimensions are the GEMM's m) of the header's
// element type.
void check_matrix(const torch::Tensor& t, const char* name, const char* dims, bool two_d) {
  check_element(t, name);
  require(two_d ? t.dim() == 2 : t.dim() >= 2, name, " must be ", dims, ", got ", t.dim(), "-D");
  require(t.is_contiguous(), name, " must be contiguous (", name, ".contiguous())");
  require(t.numel() >= 1 && t.numel() <= (int64_t(1) << 31) - 1, name, " has ", t.numel(), " elements");
}

best_conv::GemmProblem gemm_of(const torch::Tensor& x, const torch::Tensor& w, bool bias, bool residual,
                               const std::string& activation) {
  const int act = activation_of(activation);
  check_matrix(x, "x", "(..., in_features) with at least 2 dimensions", false);
  check_matrix(w, "w", "(out_features, in_features)", true);
  require(x.device() == w.device(), "x and w are on different devices");
  require(x.size(-1) == w.size(1), "x has ", x.size(-1), " features, w takes ", w.size(1));
  best_conv::GemmProblem p{int(x.numel() / x.size(-1)), int(w.size(0)), int(w.size(1))};
  p.bias = bias, p.add = residual, p.activation = act;
  return p;
}

// best_conv.linear(x, w, out=None, bias=None, residual=None, activation="none"): x @ w.T (as
// torch.nn.functional.linear(x, w)) through best_kernels::gemm, x's leading dimensions its rows;
// with bias (out_features values), residual (the output's shape) or an activation, a problem of
// that epilogue.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const py::object& out, const py::object& bias,
                     const py::object& residual, const std::string& activation) {
  const best_conv::GemmProblem p = gemm_of(x, w, !bias.is_none(), !residual.is_none(), activation);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = p.n;
  torch::Tensor bias_t = bias_operand(bias, x, "x", p.n), residual_t, y;
  const c10::cuda::CUDAGuard guard(x.device());
  if (out.is_none()) {
    y = torch::empty(sizes, x.options());
  } else {
    y = out.cast<torch::Tensor>();
    check_matrix(y, "out", "of the output's shape", false);
    require(y.device() == x.device(), "out is on another device than x");
    require(y.sizes() == c10::IntArrayRef(sizes), "out is ", shape(y), ", the output is ", shape(sizes));
  }
  if (p.add) {
    residual_t = residual.cast<torch::Tensor>();
    check_matrix(residual_t, "residual", "of the output's shape", false);
    require(residual_t.device() == x.device(), "residual is on another device than x");
    require(residual_t.sizes() == y.sizes(), "residual is ", shape(residual_t), ", the output is ", shape(y));
  }
  const size_t bytes = best_conv::workspace_size(p);
  torch::Tensor workspace = torch::empty({int64_t(bytes)}, x.options().dtype(torch::kUInt8));
  const std::string error = best_conv::gemm(p, x.data_ptr(), w.data_ptr(), y.data_ptr(),
                                            p.bias ? bias_t.data_ptr() : nullptr, p.add ? residual_t.data_ptr() : nullptr,
                                            bytes ? workspace.data_ptr() : nullptr, bytes,
                                            c10::cuda::getCurrentCUDAStream().stream());
  require(error.empty(), "best_kernels::gemm refused m ", p.m, ", n ", p.n, ", k ", p.k, ": ", error);
  return y;
}

py::object linear_kernel_for(const torch::Tensor& x, const torch::Tensor& w, bool bias, bool residual,
                             const std::string& activation) {
  const char* name = best_conv::kernel_for(gemm_of(x, w, bias, residual, activation));
  return name ? py::object(py::str(name)) : py::object(py::none());
}

// best_conv.bias_activation_(y, bias, activation="none"): y = activation(y + bias) in place, one
// pass, the bias one value a channel: y a channels_last (N, K, H, W) tensor, or a contiguous one
// whose last dimension is K (a linear layer's output); returns y.
torch::Tensor bias_activation_(const torch::Tensor& y, const torch::Tensor& bias, const std::string& activation) {
  const int act = activation_of(activation);
  check_element(y, "y");
  const bool nhwc = y.dim() == 4 && y.is_contiguous(torch::MemoryFormat::ChannelsLast);
  require(nhwc || (y.dim() >= 1 && y.is_contiguous()), "y must be channels_last (N, K, H, W) or contiguous");
  const int64_t k = nhwc ? y.size(1) : y.size(-1);
  bias_operand(py::cast(bias), y, "y", k);
  const c10::cuda::CUDAGuard guard(y.device());
  const std::string error = best_conv::bias_activation(y.data_ptr(), bias.data_ptr(), int(k), size_t(y.numel()), act,
                                                       c10::cuda::getCurrentCUDAStream().stream());
  require(error.empty(), "bias_activation_: ", error);
  return y;
}

// [((m, n, k), (bias, residual, activation), ms), ...]: the header's GEMM problems.
py::list profiled_gemms() {
  py::list out;
  for (int i = 0; i < best_conv::profiled_gemm_count(); ++i) {
    const best_conv::GemmProblem p = best_conv::profiled_gemm(i);
    out.append(py::make_tuple(py::make_tuple(p.m, p.n, p.k), py::make_tuple(p.bias, p.add, kActivations[p.activation]),
                              best_conv::profiled_gemm_ms(i)));
  }
  return out;
}

// [((n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, groups), ms), ...] of
// the problems of no epilogue; with fused, [(problem, (bias, residual, activation), ms), ...] of the others.
py::list profiled(bool fused) {
  py::list out;
  for (int i = 0; i < best_conv::profiled_count(); ++i) {
    const best_conv::Problem p = best_conv::profiled(i);
    if ((p.bias || p.add || p.activation != 0) != fused) continue;
    py::tuple problem = py::make_tuple(p.n, p.h, p.w, p.c, p.k, p.r, p.s, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                       p.dilation_h, p.dilation_w, p.groups);
    if (fused) {
      out.append(py::make_tuple(problem, py::make_tuple(p.bias, p.add, kActivations[p.activation]),
                                best_conv::profiled_ms(i)));
    } else {
      out.append(py::make_tuple(problem, best_conv::profiled_ms(i)));
    }
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Convolutions through the launcher of kernelgen's best_kernels.h";
  m.def("conv2d", &conv2d,
        "conv2d(x, w, stride=1, padding=0, dilation=1, out=None, bias=None, residual=None, activation='none', "
        "groups=1): channels_last CUDA tensors of the header's element type; the output is written to out when "
        "given (a channels_last tensor of the output's shape); with bias, residual or an activation, "
        "activation(conv + bias + residual) by a fused kernel",
        py::arg("x"), py::arg("w"), py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1,
        py::arg("out") = py::none(), py::arg("bias") = py::none(), py::arg("residual") = py::none(),
        py::arg("activation") = "none", py::arg("groups") = 1);
  m.def("kernel_for", &kernel_for, "the kernel conv2d would run, or None", py::arg("x"), py::arg("w"),
        py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("bias") = false,
        py::arg("residual") = false, py::arg("activation") = "none", py::arg("groups") = 1);
  m.def("profiled", &profiled, "the problems of best_kernels.h and their profiled times (ms); fused=True: "
        "those of an epilogue, with it", py::arg("fused") = false);
  m.def("linear", &linear,
        "linear(x, w, out=None, bias=None, residual=None, activation='none'): x @ w.T of contiguous CUDA tensors "
        "of the header's element type (x's leading dimensions its rows) through best_kernels::gemm; with bias, "
        "residual or an activation, activation(x @ w.T + bias + residual) by a fused kernel",
        py::arg("x"), py::arg("w"), py::arg("out") = py::none(), py::arg("bias") = py::none(),
        py::arg("residual") = py::none(), py::arg("activation") = "none");
  m.def("linear_kernel_for", &linear_kernel_for, "the kernel linear would run, or None", py::arg("x"), py::arg("w"),
        py::arg("bias") = false, py::arg("residual") = false, py::arg("activation") = "none");
  m.def("profiled_gemms", &profiled_gemms, "the GEMM problems of best_kernels.h, their epilogues and profiled times (ms)");
  m.def("bias_activation_", &bias_activation_,
        "bias_activation_(y, bias, activation='none'): y = activation(y + bias) in place, one pass (y channels_last "
        "(N, K, H, W), or contiguous with K last); returns y", py::arg("y"), py::arg("bias"),
        py::arg("activation") = "none");
  m.def("element", &best_conv::element, "the header's element type: f16 or bf16");
}
