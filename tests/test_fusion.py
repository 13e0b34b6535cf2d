"""Fused epilogues (site_scons/kernelgen/fusion.py, profiler/fused.h, fused_adapter_3x.h): a set's
epilogues give the fusible SM90 kernels fused variants, which serve the layers of their epilogue
only and render as the plain kernel with CUTLASS's bias/residual/activation fusion; the profiler's
job line carries the epilogue; a search build profiles the fused candidates, and the header keys
them by their epilogue (best_kernels::Epilogue) and its launcher takes their bias and residual; the library baselines run the epilogue PyTorch's way;
on a GPU every fused kernel is checked against the reference convolution through the same
epilogue."""

from dataclasses import replace
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, assert_kernels_compile, build_folder, requires_gpu, requires_nvcc
from kernelgen import fusion, render
from kernelgen.cost_model import serves
from kernelgen.families.conv2d_sm90 import Conv2dFpropSm90
from kernelgen.families.conv2d_sm90_transposed import Conv2dFpropSm90Transposed
from kernelgen.families.gemm_sm90 import GemmSm90
from kernelgen.ops import conv2d_fprop, gemm, serves as serves_op
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.ops.gemm import GemmProblem
from kernelgen.specs import load_catalog
from test_hostile_build import make_fake_build, run

CATALOG = load_catalog(ROOT / "kernel_specs" / "families")
TEMPLATES = render.lookup(ROOT / "kernel_specs" / "templates")
POINTWISE = dict(n=8, h=14, w=14, c=64, k=128, r=1, s=1)


def first(cls, **fields):
    """The first kernel of ``cls`` of ``fields`` (of fixed launch settings unless they say otherwise)."""
    fields = {"searched": False, **fields} if hasattr(cls, "searched") else fields
    return next(k for k in CATALOG if type(k) is cls and all(getattr(k, f) == v for f, v in fields.items()))


def test_a_sets_epilogues_give_the_fusible_kernels_fused_variants_and_no_others():
    problems = [Conv2dProblem(**POINTWISE, epilogue="bias+add+relu"), Conv2dProblem(**POINTWISE),
                GemmProblem(m=64, n=256, k=128, epilogue="bias+gelu"),
                GemmProblem(m=64, n=256, k=128, epilogue="bias+relu+add")]  # an add after the activation
    assert fusion.with_fused(CATALOG, problems[1:2]) is CATALOG, "a set without epilogues: the kernels as they are"
    everything = fusion.with_fused(CATALOG, problems)
    fused = [k for k in everything if ":" in k.op]
    fusible = [k for k in CATALOG if fusion.fusible(k)]
    assert fusible and len(fused) <= 3 * len(fusible)
    assert {k.op.split(":")[1] for k in fused} == {"bias+add+relu", "bias+gelu", "optional_relu"}
    assert all(k.name.endswith(("_ebias_add_relu", "_ebias_gelu", "_eoptional_relu")) for k in fused)
    assert set(CATALOG) <= set(everything) and len({k.name for k in everything}) == len(everything)
    assert not any(fusion.fusible(k) for k in CATALOG if getattr(k, "store_stages", None) is not None)
    assert fusion.refuses("bias+relu+add").endswith("a residual add after the activation (fused kernels add it before)")


def test_a_fused_kernel_serves_the_layers_of_its_epilogue_only():
    plain = first(GemmSm90, element="f16", source="void", scheduler="default", store_stages=None)
    relu = fusion.fused(plain, "bias+relu")
    fused_layer, plain_layer = Conv2dProblem(**POINTWISE, epilogue="bias+relu"), Conv2dProblem(**POINTWISE)
    three = Conv2dProblem(**{**POINTWISE, "r": 3, "s": 3, "pad_h": 1, "pad_w": 1}, epilogue="bias+relu")
    assert relu.op == "gemm:bias+relu" and serves(relu, fused_layer) is None and serves_op(relu, fused_layer)
    assert serves(relu, three) == "not a GEMM: needs a 1x1, stride-1, unpadded convolution"
    assert serves(relu, plain_layer) == "a gemm:bias+relu kernel, not for conv2d_fprop"
    assert serves(plain, fused_layer) == "a gemm kernel, not for conv2d_fprop with epilogue=bias+relu"
    assert serves(fusion.fused(plain, "bias+silu"), fused_layer).startswith("a gemm:bias+silu kernel")


@pytest.mark.parametrize("epilogue, without_c, with_c", [
    ("bias+relu", True, True), ("bias", True, True), ("relu", True, True),
    ("bias+add+relu", False, True), ("bias+add", False, True), ("add", False, True),
    ("bias+gelu", False, False), ("bias+silu", False, False), ("bias+add+hardswish", False, False),
    ("bias+sigmoid", False, False),
    ("bias+relu+add", False, False),  # an add after the activation: no fused kernel computes it
    ("", False, False),  # a layer of no epilogue: the plain kernels'
])
def test_a_kernel_of_epilogue_optional_relu_serves_the_epilogues_of_bias_add_and_relu_that_its_c_allows(
        epilogue, without_c, with_c):
    plain = first(GemmSm90, element="f16", source="void", scheduler="default", store_stages=None)
    layer = Conv2dProblem(**POINTWISE, epilogue=epilogue)
    assert (serves(fusion.fused(plain, "optional_relu"), layer) is None) == without_c
    assert (serves(fusion.fused(replace(plain, source=None), "optional_relu"), layer) is None) == with_c
    assert (serves(fusion.fused(plain, "bias+relu"), layer) is None) == (epilogue == "bias+relu")


def test_every_fused_kernel_a_profile_would_run_on_a_layer_computes_that_layers_epilogue():
    """What a profile runs a kernel on (``ops.serves``: the manifest's op against the layer's kernel
    ops) never asks a fused kernel for an epilogue it does not compute: its own, or of an optional_relu
    kernel one of bias, add and ReLU whose residual it reads if the layer adds one. Over every fusible
    kernel of the catalog, with and without C, fused for each epilogue, against layers of each."""
    from kernelgen.ops.common import OPTIONAL_RELU, optional_relu_computes

    plain = [k for k in CATALOG if fusion.fusible(k)]
    plain += [replace(k, source="void" if fusion.reads_c(k) else None) for k in plain if hasattr(k, "source")]
    epilogues = ("bias", "relu", "bias+relu", "add", "bias+add", "bias+add+relu", "bias+gelu", "bias+silu",
                 "bias+relu+add", OPTIONAL_RELU)
    kernels = [fusion.fused(k, e) for k in plain for e in epilogues if fusion.refuses(e) is None]
    run = 0
    for epilogue in epilogues[:-1]:
        for layer in (Conv2dProblem(**POINTWISE, epilogue=epilogue), GemmProblem(m=64, n=256, k=128, epilogue=epilogue)):
            for k in kernels:
                if not serves_op(k, layer):
                    continue
                run += 1
                computes = k.fusion == epilogue or (k.fusion == OPTIONAL_RELU and optional_relu_computes(epilogue)
                                                    and (fusion.reads_c(k) or not fusion.adds(epilogue)))
                assert computes, (k.name, layer.name)
    assert run > 1000


def test_a_kernel_of_epilogue_optional_relu_takes_its_relu_at_launch_and_keeps_its_source_operand():
    plain = first(GemmSm90, element="f16", source="void", scheduler="default", store_stages=None)
    optional, with_c = fusion.fused(plain, "optional_relu"), fusion.fused(replace(plain, source=None), "optional_relu")
    assert optional.name == plain.name + "_eoptional_relu" and optional.op == "gemm:optional_relu:without_c"
    assert with_c.op == "gemm:optional_relu"
    assert optional.source == "void", "no residual: no C, its shared memory the main loop's"
    assert with_c.name == plain.name.replace("_void_", "_f16_") + "_eoptional_relu" and with_c.source is None
    assert optional.adapter == "kernelgen::FusedOptionalReluGemmOperation3x" and "optional_relu_adapter_3x.h" in optional.includes
    streamed = fusion.fused(first(GemmSm90, element="f16", scheduler="stream_k", store_stages=None), "optional_relu")
    assert streamed.adapter == "kernelgen::FusedOptionalReluGemmStreamKOperation3x"
    conv = fusion.fused(first(Conv2dFpropSm90, element="f16"), "optional_relu")
    assert conv.adapter == "kernelgen::FusedOptionalReluConv2dOperation3x"
    assert fusion.fusion_cpp("optional_relu", "cutlass::half_t", "float", "cutlass::half_t").startswith(
        "cutlass::epilogue::fusion::LinCombPerColBiasEltAct<kernelgen::OptionalRelu, ")
    text = render.kernel_source(TEMPLATES, optional)
    assert "kernelgen::OptionalRelu," in text and "FusedOptionalReluGemmOperation3x<" in text
    assert fusion.launcher_epilogue_cpp(optional) == "{true, false, Activation::kNone}"
    assert fusion.launcher_epilogue_cpp(with_c) == "{true, true, Activation::kNone}"
    assert fusion.launcher_epilogue_cpp(fusion.fused(plain, "bias+relu")) == "{true, false, Activation::kRelu}"


def test_a_fused_kernel_is_the_plain_kernel_with_the_epilogues_fusion():
    plain = first(GemmSm90, element="f16", source="void", scheduler="default", store_stages=None)
    added = fusion.fused(plain, "bias+add+relu")
    assert added.source is None, "a residual is read as C, typed as the output"
    text, plain_text = (render.kernel_source(TEMPLATES, k) for k in (added, plain))
    assert "LinCombPerColBiasEltAct<cutlass::epilogue::thread::ReLu, cutlass::half_t, float, cutlass::half_t, " \
           "cutlass::half_t, float>" in text
    assert "kernelgen::FusedGemmOperation3x<" in text and '#include "fused_adapter_3x.h"' in text
    assert "LinCombPerColBiasEltAct" not in plain_text and "Fused" not in plain_text
    silu = fusion.fused(plain, "bias+silu")
    silu_text = render.kernel_source(TEMPLATES, silu)
    assert silu.source == "void" and "kernelgen::SiluTanh, cutlass::half_t, float, cutlass::half_t, void, float>" in \
        silu_text and '#include "tanh_activation.h"' in silu_text
    conv = fusion.fused(first(Conv2dFpropSm90, element="f16"), "bias+hardswish")
    conv_text = render.kernel_source(TEMPLATES, conv)
    assert conv.name.endswith("_ebias_hardswish") and "kernelgen::FusedConv2dOperation3x<" in conv_text
    assert "thread::HardSwish" in conv_text
    for epilogue, functor in (("bias", "thread::Identity"), ("bias+add", "thread::Identity"),
                              ("bias+gelu", "kernelgen::GeluF16x2"), ("bias+sigmoid", "kernelgen::SigmoidTanh")):
        assert f"{functor}," in fusion.fusion_cpp(epilogue, "cutlass::half_t", "float", "void")
    assert "kernelgen::Gelu," in fusion.fusion_cpp("bias+gelu", "cutlass::bfloat16_t", "float", "void"), \
        "GELU in fp16 arithmetic for fp16 outputs only: a bf16 output keeps its range"
    gelu = render.kernel_source(TEMPLATES, fusion.fused(plain, "bias+gelu"))
    assert '#include "fused_activation.h"' in gelu and "kernelgen::GeluF16x2, cutlass::half_t" in gelu
    assert "fused_activation.h" not in silu_text + text and "tanh_activation.h" not in gelu + text, "only where it " \
        "is used: a header is part of a kernel's hash, and the committed rows of the other epilogues would no longer count"


# The fused activations on the host (profiler/fused_activation.h, profiler/tanh_activation.h, where
# cutlass::fast_tanh is tanhf for the device's tanh.approx), one program for both tests: each
# activation's largest error over a range, a fragment's against an element's, and its value at 1.
ACTIVATION_ERRORS = r"""
#include <cmath>
#include <cstdio>
#include "fused_activation.h"
#include "tanh_activation.h"
int main() {
  kernelgen::Gelu<float> gelu;
  kernelgen::Gelu<cutlass::Array<float, 4>> gelus;
  double worst = 0, at = 0, fragment = 0;
  for (int i = -100000; i <= 100000; ++i) {
    float const x = i * 1e-4f;
    double const d = std::fabs(gelu(x) - 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    if (d > worst) worst = d, at = x;
    cutlass::Array<float, 4> v;
    v.fill(x);
    fragment = std::fmax(fragment, std::fabs(gelus(v)[3] - gelu(x)));
  }
  std::printf("%.3e %.4f %.3e %.6f\n", worst, at, fragment, gelu(1.0f));
  kernelgen::SiluTanh<float> silu;
  kernelgen::SigmoidTanh<float> sigmoid;
  kernelgen::SiluTanh<cutlass::Array<float, 4>> silus;
  double worst_silu = 0, worst_sigmoid = 0;
  fragment = 0;
  for (int i = -100000; i <= 100000; ++i) {
    float const x = i * 2e-4f;
    double const s = 1.0 / (1.0 + std::exp(-double(x)));
    worst_sigmoid = std::fmax(worst_sigmoid, std::fabs(sigmoid(x) - s));
    worst_silu = std::fmax(worst_silu, std::fabs(silu(x) - x * s) / std::fmax(1.0, std::fabs(x)));
    cutlass::Array<float, 4> v;
    v.fill(x);
    fragment = std::fmax(fragment, std::fabs(silus(v)[3] - silu(x)));
  }
  std::printf("%.3e %.3e %.3e %.6f\n", worst_sigmoid, worst_silu, fragment, silu(1.0f));
}
"""


@pytest.fixture(scope="module")
def activation_errors(tmp_path_factory):
    """ACTIVATION_ERRORS's two lines of figures, GELU's then SiLU's and sigmoid's."""
    from kernelgen.variables import default_cutlass_root
    folder = tmp_path_factory.mktemp("activations")
    (folder / "activations.cu").write_text(ACTIVATION_ERRORS)
    build = subprocess.run(["nvcc", "-std=c++17", f"-I{ROOT / 'profiler'}", f"-I{default_cutlass_root()}/include",
                            "-o", str(folder / "activations"), str(folder / "activations.cu")], capture_output=True,
                           text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(folder / "activations")], capture_output=True, text=True, check=True).stdout
    return [list(map(float, line.split())) for line in out.splitlines()]


@requires_nvcc
def test_the_fused_gelu_is_the_erf_form_to_half_an_fp16_unit_at_one(activation_errors):
    """profiler/fused_activation.h's GELU on the host (tanhf for the device's tanh.approx): at most
    4.8e-4 from torch.nn.GELU()'s erf form, largest near |x| = 2.7; a fragment's as an element's."""
    worst, at, fragment, one = activation_errors[0]
    assert 4.0e-4 < worst <= 4.8e-4 and 2.6 < abs(at) < 2.8, (worst, at)
    assert fragment == 0.0 and one == pytest.approx(0.8411920, abs=2e-4)


# GELU of the fp16-output kernels on the device (kernelgen::GeluF16x2: fp16x2 arithmetic and
# tanh.approx.f16x2) and the fp32 form's (kernelgen::Gelu: tanh.approx.f32) against the erf form, on
# fragments of 8 values: each one's largest error over [-10, 10] relative to max(1, |y|); then the
# fp16 form's results at -1e5 (saturated to -65504: 0, not inf - inf), -7e4, -300, 0, 300, 1e5, -0, 1.
DEVICE_GELU = r"""
#include <cmath>
#include <cstdio>
#include "fused_activation.h"
__global__ void apply(float const *x, float *half2, float *fp32, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (i + 8 > n) return;
  cutlass::Array<float, 8> v;
  for (int j = 0; j < 8; ++j) v[j] = x[i + j];
  cutlass::Array<float, 8> a = kernelgen::GeluF16x2<cutlass::Array<float, 8>>()(v);
  cutlass::Array<float, 8> b = kernelgen::Gelu<cutlass::Array<float, 8>>()(v);
  for (int j = 0; j < 8; ++j) half2[i + j] = a[j], fp32[i + j] = b[j];
}
int main() {
  int const n = 200008;
  float *x, *a, *b;
  cudaMallocManaged(&x, n * 4), cudaMallocManaged(&a, n * 4), cudaMallocManaged(&b, n * 4);
  for (int i = 0; i < n - 8; ++i) x[i] = (i - 100000) * 1e-4f;
  float const edges[8] = {-1e5f, -70000.f, -300.f, 0.f, 300.f, 1e5f, -0.f, 1.f};
  for (int j = 0; j < 8; ++j) x[n - 8 + j] = edges[j];
  apply<<<(n / 8 + 127) / 128, 128>>>(x, a, b, n);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  double worst = 0, worst_fp32 = 0;
  for (int i = 0; i < n - 8; ++i) {
    double const y = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    worst = std::fmax(worst, std::fabs(a[i] - y) / std::fmax(1.0, std::fabs(y)));
    worst_fp32 = std::fmax(worst_fp32, std::fabs(b[i] - y) / std::fmax(1.0, std::fabs(y)));
  }
  std::printf("%.3e %.3e", worst, worst_fp32);
  for (int j = 0; j < 8; ++j) std::printf(" %g", a[n - 8 + j]);
  std::printf("\n");
}
"""


@requires_gpu
@requires_nvcc
def test_the_fp16_gelu_on_the_device_is_the_erf_form_to_about_an_fp16_unit(tmp_path):
    """kernelgen::GeluF16x2, which the fused kernels of fp16 output run (fusion.FP16_FUNCTORS), on
    the GPU: within 1.6e-3 of the erf form relative to max(1, |y|) over [-10, 10] (measured 1.47e-3:
    largest where x/2 (1 + tanh) cancels, for x near -3, tanh's fp16 rounding times |x|/2), where the
    fp32 form (tanh.approx.f32) is within 5e-4; finite and exact at the edges (x/2 (1 + tanh) of
    -1e5 is 0, not inf - inf)."""
    from kernelgen.variables import default_cutlass_root
    (tmp_path / "gelu.cu").write_text(DEVICE_GELU)
    build = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}",
                            f"-I{default_cutlass_root()}/include", "-o", str(tmp_path / "gelu"),
                            str(tmp_path / "gelu.cu")], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "gelu")], capture_output=True, text=True, check=True).stdout.split()
    worst, worst_fp32, edges = float(out[0]), float(out[1]), [float(v) for v in out[2:]]
    assert 5e-4 < worst <= 1.6e-3 and worst_fp32 <= 5e-4, (worst, worst_fp32)
    assert edges[:4] == [0.0, 0.0, 0.0, 0.0] and edges[4] == 300.0 and edges[5] == 65504.0, edges
    assert edges[6] == 0.0 and edges[7] == pytest.approx(0.8411920, abs=1e-3), edges


@requires_nvcc
def test_the_fused_silu_and_sigmoid_are_their_exponential_forms_through_tanh(activation_errors):
    """profiler/tanh_activation.h on the host, where cutlass::fast_tanh is tanhf: sigmoid(x) =
    1/2 + tanh(x/2)/2 is the exponential form to float rounding (the device's tanh.approx adds at
    most 2.5e-4), SiLU is x times it; a fragment's as an element's."""
    sigmoid, silu, fragment, one = activation_errors[1]
    assert sigmoid < 1e-6 and silu < 1e-6, (sigmoid, silu)
    assert fragment == 0.0 and one == pytest.approx(0.7310586, abs=1e-6)


def test_the_profilers_job_line_ends_with_the_epilogue():
    conv = Conv2dProblem(**POINTWISE, epilogue="bias+add+relu")
    assert conv2d_fprop.job_line(conv).endswith(" 8 14 14 64 128 1 1 0 0 1 1 1 1 bias+add+relu")
    assert conv2d_fprop.job_line(Conv2dProblem(**POINTWISE)).endswith(" 1 1 1 1")
    assert gemm.job_line(GemmProblem(m=64, n=256, k=128, epilogue="bias+gelu")).endswith(" f16 64 256 128 bias+gelu")


FUSED_SET = ("conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 epilogue=bias+add+relu\n"
             "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 epilogue=bias+relu\n"
             "gemm m=64 n=256 k=128 epilogue=bias+gelu\n"
             "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 epilogue=bias\n")


@pytest.fixture(scope="module")
def fused_set(tmp_path_factory):
    """FUSED_SET profiled (fake nvcc and profiler) and its header built: (project, BUILD)."""
    tmp_path = tmp_path_factory.mktemp("fused-set")
    project, tools = make_fake_build(tmp_path)
    tools.behave({"*_eoptional_relu": 0.5})  # where measured, the 3x3 layers choose it
    # the default TOP, where with the committed model the 3x3 layers of bias and of bias+relu share
    # a tile among their proposals (an optional_relu kernel stands in for both); at TOP=2 they
    # stopped sharing one when the model was refitted: a refit may move this too
    (project / "kernel_specs" / "workloads" / "fz.txt").write_text(FUSED_SET)
    common = ["WORKLOADS=fz", "TOP=4", "SPECS=kernel_specs/families", f"NVCC={tools.nvcc}", f"BUILD={tmp_path / 'build'}"]
    run(project, "profile", *common)
    run(project, "best_kernels.h", *common)
    return project, tmp_path / "build"


def test_a_search_build_profiles_fused_candidates_and_the_header_keys_them_by_their_epilogue(fused_set):
    import pandas as pd

    from kernelgen import results

    project, build = fused_set
    folder = project / "profile_results" / "fz" / "nvidia_h200"
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    suffixes = {"conv2d_fprop_f16_n8_h14_w14_c64_k128_r1_s1_pad0x0_str1x1_dil1x1_ebias_add_relu": "_ebias_add_relu",
                "conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1_ebias_relu": "_ebias_relu",
                "gemm_f16_m64_n256_k128_ebias_gelu": "_ebias_gelu",
                "conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1_ebias": "_ebias"}
    assert set(frame["workload"]) == set(suffixes) and (frame["status"] == "ok").all()
    assert all(k.endswith((suffixes[w], "optional_relu")) for w, k in zip(frame["workload"], frame["kernel"])), \
        "each layer measured with kernels fused for its epilogue, or for any"
    header = (build / "sets" / "fz" / "best_kernels.h").read_text()
    assert "{8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1, 1, {true, true, Activation::kRelu}}" in header
    assert "{8, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, {true, false, Activation::kRelu}}" in header
    assert "{64, 256, 128, {true, false, Activation::kGelu}}" in header
    launcher = (build / "sets" / "fz" / "best_kernels_launcher.cu").read_text()
    table = launcher[launcher.index("constexpr Epilogue kEpilogueOf[] = {"):]
    assert "{}" not in table[:table.index("};")], "every kernel of a fused set computes an epilogue"
    cutlass = (build / "sets" / "fz" / "best_kernels_cutlass.h").read_text()
    assert "struct Conv2dFprop<8," not in cutlass and "LinCombPerColBiasEltAct" in cutlass, \
        "fused kernels' types, looked up at run time only"


# The fused set's launcher with every kernel a fused operation that never touches the GPU: what
# each launch returns, one line a case (LAUNCHES), for conv 0 (bias+add+relu), conv 1 (bias+relu).
LAUNCH_PROGRAM = """\
#include "best_kernels_launcher.cu"

#include <cstdio>

namespace kernelgen {
class Stub final : public FusedOperation {
 public:
  std::string can_implement(const Conv2dProblem&) override { return {}; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  void set_epilogue(const std::vector<EpilogueOperands>&) override {}
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override { return {}; }
  bool run(size_t, cudaStream_t) override { return true; }
};
int last_activation = -1;  // what the last StubAtLaunch was given
class StubAtLaunch final : public FusedOperation, public ActivationAtLaunch {  // epilogue "optional_relu"
 public:
  std::string can_implement(const Conv2dProblem&) override { return {}; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  void set_epilogue(const std::vector<EpilogueOperands>&) override {}
  void set_activation(int kind) override { last_activation = kind; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override { return {}; }
  bool run(size_t, cudaStream_t) override { return true; }
};
%s
}  // namespace kernelgen

int main() {
  using namespace best_kernels;
  auto* x = reinterpret_cast<Element*>(0x10000);
  auto* w = reinterpret_cast<Element*>(0x20000);
  auto* y = reinterpret_cast<Element*>(0x30000);
  auto* bias = reinterpret_cast<const Element*>(0x40000);
  auto* residual = reinterpret_cast<const Element*>(0x50000);
  auto* off = reinterpret_cast<const Element*>(0x40002);
  const Conv2dFpropProblem add = kConv2dFprop[0].problem, relu = kConv2dFprop[1].problem;
  Conv2dFpropProblem plain = add;
  plain.epilogue = {};
  const Status statuses[] = {
      conv2d_fprop(add, x, w, y, bias, residual, nullptr, 0, nullptr),
      conv2d_fprop(add, x, w, y, nullptr, residual, nullptr, 0, nullptr),
      conv2d_fprop(add, x, w, y, bias, nullptr, nullptr, 0, nullptr),
      conv2d_fprop(relu, x, w, y, bias, residual, nullptr, 0, nullptr),
      conv2d_fprop(relu, x, w, y, bias, nullptr, nullptr, 0, nullptr),
      conv2d_fprop(add, x, w, y, off, residual, nullptr, 0, nullptr),
      conv2d_fprop(add, x, w, y, bias, off, nullptr, 0, nullptr),
      conv2d_fprop(plain, x, w, y, nullptr, nullptr, nullptr, 0, nullptr),
      conv2d_fprop(plain, x, w, y, nullptr, nullptr, nullptr, 0, nullptr),
  };
  for (Status status : statuses) std::printf("%%s\\n", status_string(status));
  std::printf("%%s\\n", kernel_for(plain) ? kernel_for(plain) : "none");
  std::printf("%%d\\n", kernelgen::last_activation);
}
"""
LAUNCHES = [  # (case, what the launch returns)
    ("bias and residual given", "Success"),
    ("bias missing", "Error Invalid Problem"),
    ("residual missing", "Error Invalid Problem"),
    ("a residual the epilogue does not read", "Error Invalid Problem"),
    ("bias+relu with its bias", "Success"),
    ("bias 2 bytes off 16-byte alignment", "Error Misaligned Operand"),
    ("residual 2 bytes off 16-byte alignment", "Error Misaligned Operand"),
    ("the same sizes without the epilogue: no fused kernel runs it", "Error Not Supported"),
    ("asked again", "Error Not Supported"),
    ("kernel_for the plain problem", "none"),
    ("the activation the _eoptional_relu kernel was given last (bias+relu's: best_kernels::Activation::kRelu)", "1"),
]


@requires_nvcc
def test_the_launcher_runs_a_fused_problem_with_exactly_its_epilogues_operands(fused_set, tmp_path):
    import re

    sets = fused_set[1] / "sets" / "fz"
    launcher = (sets / "best_kernels_launcher.cu").read_text()
    names = re.findall(r"^std::unique_ptr<Operation> make_(\w+)\(\);$", launcher, re.MULTILINE)
    assert any(n.endswith("_eoptional_relu") for n in names), "the 3x3 layers share a tile: an optional_relu kernel"
    stubs = "".join(f"std::unique_ptr<Operation> make_{n}() {{ return std::make_unique<"
                    f"{'StubAtLaunch' if n.endswith('_eoptional_relu') else 'Stub'}>(); }}\n" for n in names)
    (tmp_path / "launches.cu").write_text(LAUNCH_PROGRAM % stubs)
    build = subprocess.run(["nvcc", "-std=c++17", f"-I{sets}", f"-I{ROOT / 'profiler'}", str(tmp_path / "launches.cu"),
                            "-o", str(tmp_path / "launches")], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "launches")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert list(zip([case for case, _ in LAUNCHES], out.stdout.splitlines())) == LAUNCHES


def test_the_library_baseline_runs_the_epilogue_pytorchs_way(monkeypatch):
    torch = pytest.importorskip("torch", reason="needs PyTorch (pip install torch): the library baselines are PyTorch calls")
    from kernelgen.ops import common

    monkeypatch.setattr(common, "DEVICE", "cpu")
    problem = Conv2dProblem(n=2, h=6, w=6, c=8, k=16, r=3, s=3, pad_h=1, pad_w=1, dtype="f32", epilogue="bias+add+relu")
    torch.manual_seed(0)
    call, sets = conv2d_fprop.baseline_call(torch, problem, 1 << 10)
    torch.manual_seed(0)  # the same operands again, to compute what the call should give
    F, operands, args = conv2d_fprop._baseline_operands(torch, problem, 1 << 10)
    x, w, bias, residual = operands[0]
    expected = torch.relu(F.conv2d(x, w, **args) + bias.view(1, -1, 1, 1) + residual)
    assert sets == len(operands) >= 1 and torch.allclose(call(0), expected, atol=1e-5)
    assert [library for library, _, _ in conv2d_fprop.fused_baselines(torch, problem, 1 << 10)] == ["cudnn fused"]
    assert conv2d_fprop.fused_baselines(torch, Conv2dProblem(**POINTWISE, epilogue="bias+silu"), 1 << 10) == []
    steps = common.apply_epilogue(torch, ["bias", "add", "sigmoid"], torch.zeros(1, 2, 1, 1),
                                  torch.tensor([1.0, -1.0]), torch.ones(1, 2, 1, 1), 1)
    assert torch.allclose(steps.flatten(), torch.sigmoid(torch.tensor([2.0, 0.0])))
    linear, _ = gemm.baseline_call(torch, GemmProblem(m=4, n=8, k=16, dtype="f32", epilogue="bias+gelu"), 1 << 10)
    assert linear(0).shape == (4, 8)
    assert [lib for lib, _, _ in gemm.fused_baselines(torch, GemmProblem(m=4, n=8, k=16, dtype="f32",
                                                                         epilogue="bias+gelu"), 1 << 10)] == \
        ["cublaslt epilogue"]


MANIFEST = """#include "operation.h"
namespace kernelgen {
const std::vector<Registration>& registry() { static std::vector<Registration> none; return none; }
}
"""


@pytest.fixture(scope="module")
def bare_profiler(tmp_path_factory):
    """The profiler with no kernel linked: its job file and options are read before any GPU is asked."""
    from kernelgen.variables import default_cutlass_root

    folder = tmp_path_factory.mktemp("bare-profiler")
    (folder / "manifest.cu").write_text(MANIFEST)
    profiler = ROOT / "profiler"
    out = subprocess.run(["nvcc", "-std=c++17", f"-I{profiler}", f"-I{default_cutlass_root()}/include",
                          "-gencode=arch=compute_90a,code=sm_90a", str(profiler / "main.cu"),
                          str(profiler / "reference.cu"), str(folder / "manifest.cu"), "-o", str(folder / "profiler"),
                          "-ldl"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return folder


@requires_nvcc
@pytest.mark.parametrize("job, options, message", [
    ("workload a conv2d_fprop f16 1 8 8 8 8 1 1 0 0 1 1 1 1 bias+foo", [], "jobs.txt:1: unknown epilogue bias+foo"),
    ("workload a conv2d_fprop f16 1 8 8 8 8 1 1 0 0 1 1 1 1 bias+add+relu+silu+gelu", [],
     "jobs.txt:1: unknown epilogue bias+add+relu+silu+gelu"),  # more steps than an epilogue holds
    ("workload a conv2d_fprop_grouped f16 1 8 8 8 8 1 1 0 0 1 1 1 1 2 relu", [],
     "jobs.txt:1: more than 14 integers after conv2d_fprop_grouped"),
    ("workload a gemm f16 8 8 8 relu extra", [], "jobs.txt:1: more than one epilogue"),
    ("workload a gemm f16 8 8 8 9", [], "jobs.txt:1: more than 3 integers after gemm"),
    ("workload a gemm f16 8 8 8 bias", ["--hold-ms", "-1"], "--hold-ms and --rest-ms must be 0 to 60000"),
    ("workload a gemm f16 8 8 8 bias", ["--rest-ms", "60001"], "--hold-ms and --rest-ms must be 0 to 60000"),
])
def test_the_profiler_refuses_a_bad_epilogue_or_hold_in_one_line_before_asking_the_gpu(bare_profiler, job, options,
                                                                                        message):
    (bare_profiler / "jobs.txt").write_text(job + "\n")
    out = subprocess.run([str(bare_profiler / "profiler"), "--jobs", "jobs.txt", *options], cwd=bare_profiler,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (2, f"fatal\t{message}\n")


EPILOGUES = ("bias+relu", "bias+add+relu", "bias+add", "bias+silu", "bias+gelu", "bias+hardswish", "bias+sigmoid")


def profile_epilogues(tmp_path, epilogues, *options, gemm=True) -> tuple:
    """(lines, the rows) of `scons profile` with ``options`` on a GPU, of a 1x1 and a 3x3 layer and
    (``gemm``) a GEMM for each of ``epilogues``."""
    import pandas as pd

    from kernelgen import results
    from kernelgen.profile import query_gpu

    lines = []
    for epilogue in epilogues:
        lines += [f"conv2d_fprop n=4 h=14 w=14 c=64 k=128 r=1 s=1 epilogue={epilogue}",
                  f"conv2d_fprop n=4 h=15 w=15 c=32 k=64 r=3 s=3 pad=1 stride=2 epilogue={epilogue}"]
        lines += [f"gemm m=200 n=256 k=64 epilogue={epilogue}"] if gemm else []
    workloads = tmp_path / "fused.txt"
    workloads.write_text("\n".join(lines) + "\n")
    build = build_folder(tmp_path)
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", "profile", f"WORKLOADS={workloads}", *options,
                          f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    folder = results.gpu_dir(tmp_path / "results", "fused", query_gpu()[0])
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    assert len(set(frame["workload"])) == len(lines)
    return lines, frame


@requires_gpu
def test_on_the_gpu_every_fused_kernel_computes_its_epilogue(tmp_path):
    """Each epilogue on a 1x1 and a 3x3 layer, and a GEMM, over the model's two best fused candidates
    of each: every pair ok and verified against the reference convolution through the same epilogue."""
    _, frame = profile_epilogues(tmp_path, EPILOGUES, "TOP=2")
    bad = frame[(frame["status"] != "ok") & (frame["status"] != "unsupported")]
    assert bad.empty, bad[["workload", "kernel", "status", "message"]].to_string()
    ok = frame[frame["status"] == "ok"]
    assert set(ok["workload"]) == set(frame["workload"]), "every layer has a fused kernel that ran it"
    assert (ok["rel_l2_error"] <= 1e-3).all() and (ok["rel_max_error"] <= 1e-3).all()


def test_a_transposed_kernels_fused_variant_adds_its_bias_one_value_a_row():
    """A transposed kernel computes D^T, its output channels the GEMM's M: its fused variants take
    CUTLASS's per-row bias (the others' per-column one), through the persistent kernels' fused
    adapters, named as the plain kernel and the epilogue."""
    plain = first(Conv2dFpropSm90Transposed)
    assert fusion.fusible(plain)
    for epilogue in ("bias+relu", "bias+add+relu", fusion.OPTIONAL_RELU):
        kernel = fusion.fused(plain, epilogue)
        source = render.type_definition(TEMPLATES, kernel)
        assert "LinCombPerRowBiasEltAct<" in source and "LinCombPerColBiasEltAct" not in source
        assert kernel.name == plain.name + fusion.epilogue_suffix(epilogue) and kernel.name.endswith(
            "_transposed" + fusion.epilogue_suffix(epilogue))
        assert kernel.adapter.startswith(("kernelgen::FusedConv2dPersistentOperation3x",
                                          "kernelgen::FusedOptionalReluConv2dPersistentOperation3x"))
    assert "LinCombPerColBiasEltAct<" in render.type_definition(TEMPLATES, fusion.fused(first(GemmSm90), "bias+relu"))


@requires_nvcc
def test_a_fused_transposed_kernel_compiles_for_sm90a_through_the_rendering(tmp_path):
    plain = first(Conv2dFpropSm90Transposed)
    assert_kernels_compile(tmp_path, [fusion.fused(plain, "bias+add+relu"), fusion.fused(plain, fusion.OPTIONAL_RELU)])


# Fused transposed kernels of each epilogue on a 1x1 and a 3x3 layer (they compute convolutions
# only): their bias is a row's. Named, not globbed: with TOP=all a glob takes the space's hundreds.
TRANSPOSED_KERNELS = tuple("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_" + rest for rest in (
    "void_f16nhwc_64x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_pdl_transposed_ebias_relu",
    "void_f16nhwc_64x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_pdl_transposed_ebias_gelu",
    "f16_f16nhwc_128x128x64_2x1x1_0_align8_warpspecialized_pingpong_epi_tma_transposed_ebias_add_relu",
    "void_f16nhwc_128x192x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_64x96_pdl_transposed_eoptional_relu"))


def test_the_fused_transposed_kernels_the_gpu_check_names_are_variants_of_the_spaces_kernels():
    from kernelgen.space import load_space, merged

    plain = [k for k in merged(CATALOG, load_space(ROOT / "kernel_specs" / "spaces")) if isinstance(k, Conv2dFpropSm90Transposed)]
    named = {fusion.fused(k, epilogue).name for k in plain
             for epilogue in ("bias+relu", "bias+gelu", "bias+add+relu", fusion.OPTIONAL_RELU)}
    assert set(TRANSPOSED_KERNELS) <= named


def test_a_profile_gives_an_optional_relu_kernel_without_c_only_the_layers_that_add_no_residual(tmp_path):
    """Named with TOP=all, the kernel of no source operand C is measured on the layer of bias+relu and
    not on the one of bias+add+relu (its output there would be the layer's without the residual)."""
    import pandas as pd

    from kernelgen import results

    project, tools = make_fake_build(tmp_path)
    without_c = TRANSPOSED_KERNELS[3]
    with_c = without_c.replace("_void_", "_f16_").replace("_eoptional_relu", "_ebias_add_relu")
    (project / "kernel_specs" / "workloads" / "two.txt").write_text(
        "conv2d_fprop n=4 h=14 w=14 c=64 k=128 r=1 s=1 epilogue=bias+add+relu\n"
        "conv2d_fprop n=4 h=14 w=14 c=64 k=128 r=1 s=1 epilogue=bias+relu\n")
    run(project, "profile", "WORKLOADS=two", "TOP=all", f"KERNELS={without_c},{with_c}", "SPECS=kernel_specs/families",
        f"NVCC={tools.nvcc}", f"BUILD={tmp_path / 'build'}")
    folder = project / "profile_results" / "two" / "nvidia_h200"
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    measured = {(w.split("_e")[-1], k) for w, k in zip(frame["workload"], frame["kernel"])}
    assert measured == {("bias_add_relu", with_c), ("bias_relu", without_c)}


@requires_gpu
def test_on_the_gpu_every_fused_transposed_kernel_computes_its_epilogue(tmp_path):
    _, frame = profile_epilogues(tmp_path, ("bias+relu", "bias+add+relu", "bias+gelu"), "TOP=all",
                                 f"KERNELS={','.join(TRANSPOSED_KERNELS)}", gemm=False)
    bad = frame[(frame["status"] != "ok") & (frame["status"] != "unsupported")]
    assert bad.empty, bad[["workload", "kernel", "status", "message"]].to_string()
    ok = frame[frame["status"] == "ok"]
    assert set(ok["kernel"]) == set(TRANSPOSED_KERNELS) and set(ok["workload"]) == set(frame["workload"])
    assert (ok["rel_l2_error"] <= 1e-3).all() and (ok["rel_max_error"] <= 1e-3).all()


# Kernels of epilogue optional_relu without and with C: a GEMM, a persistent conv and a stream-K conv
# (its workspace zeroed each launch) of each.
OPTIONAL_RELU_KERNELS = tuple(
    f"cutlass3x_sm90_tensorop_{kind}_128x128x64_1x1x1_0{rest}" for kind, rest in [
        ("gemm_f16_f16_f32_void_f16", "_tnt_align8_warpspecialized_pingpong_epi_tma_64x128_eoptional_relu"),
        ("gemm_f16_f16_f32_f16_f16", "_tnt_align8_warpspecialized_pingpong_epi_tma_64x128_eoptional_relu"),
        ("fprop_f16nhwc_f16nhwc_f32_void_f16nhwc", "_align8_warpspecialized_pingpong_epi_tma_64x128_eoptional_relu"),
        ("fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc", "_align8_warpspecialized_pingpong_epi_tma_64x128_eoptional_relu"),
        ("fprop_f16nhwc_f16nhwc_f32_void_f16nhwc", "_align8_splitk2_warpspecialized_cooperative_epi_tma_eoptional_relu"),
        ("fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc", "_align8_splitk2_warpspecialized_cooperative_epi_tma_eoptional_relu")])


@requires_gpu
def test_on_the_gpu_a_kernel_of_epilogue_optional_relu_computes_each_layers_epilogue(tmp_path):
    """The kernels of epilogue optional_relu without and with C on the layers of each epilogue of
    bias, add and relu they compute: each run verified against the reference through the layer's
    own epilogue, so each launch applied the ReLU or not as it was told; the GEMM kernels refuse
    the 3x3 layers."""
    lines, frame = profile_epilogues(tmp_path, ("bias+relu", "bias+add+relu", "bias+add", "bias", "relu", "add"),
                                     "TOP=all", f"KERNELS={','.join(OPTIONAL_RELU_KERNELS)}")
    assert set(frame["kernel"]) == set(OPTIONAL_RELU_KERNELS)
    refused = frame["status"] == "unsupported"
    assert frame[refused]["kernel"].str.contains("_gemm_").all() and frame[refused]["workload"].str.contains("_r3_s3_").all()
    bad = frame[~refused & (frame["status"] != "ok")]
    assert bad.empty, bad[["workload", "kernel", "status", "message"]].to_string()
    ok = frame[frame["status"] == "ok"]
    assert (ok.groupby("workload")["kernel"].nunique() >= 2).all() and len(set(ok["workload"])) == len(lines)
    assert not ok[ok["workload"].str.contains("_eadd|_ebias_add")]["kernel"].str.contains("_void_").any()
    assert (ok["rel_l2_error"] <= 1e-3).all() and (ok["rel_max_error"] <= 1e-3).all()
