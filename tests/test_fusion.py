"""Fused epilogues (site_scons/kernelgen/fusion.py, profiler/fused.h, fused_adapter_3x.h): a set's
epilogues give the fusible SM90 kernels fused variants, which serve the layers of their epilogue
only and render as the plain kernel with CUTLASS's bias/residual/activation fusion; the profiler's
job line carries the epilogue; a search build profiles the fused candidates, and the header keys
them by their epilogue (best_kernels::Epilogue) and its launcher takes their bias and residual; the library baselines run the epilogue PyTorch's way;
on a GPU every fused kernel is checked against the reference convolution through the same
epilogue."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, requires_gpu
from kernelgen import fusion, render
from kernelgen.cost_model import serves
from kernelgen.families.conv2d_sm90 import Conv2dFpropSm90
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
    return next(k for k in CATALOG if type(k) is cls and all(getattr(k, f) == v for f, v in fields.items()))


def test_a_sets_epilogues_give_the_fusible_kernels_fused_variants_and_no_others():
    problems = [Conv2dProblem(**POINTWISE, epilogue="bias+add+relu"), Conv2dProblem(**POINTWISE),
                GemmProblem(m=64, n=256, k=128, epilogue="bias+gelu"),
                GemmProblem(m=64, n=256, k=128, epilogue="bias+relu+add")]  # an add after the activation
    assert fusion.with_fused(CATALOG, problems[1:2]) is CATALOG, "a set without epilogues: the kernels as they are"
    everything = fusion.with_fused(CATALOG, problems)
    fused = [k for k in everything if ":" in k.op]
    fusible = [k for k in CATALOG if fusion.fusible(k)]
    assert fusible and len(fused) <= 2 * len(fusible) and {k.op.split(":")[1] for k in fused} == {"bias+add+relu", "bias+gelu"}
    assert all(k.name.endswith(("_ebias_add_relu", "_ebias_gelu")) for k in fused)
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
    assert silu.source == "void" and "thread::SiLu, cutlass::half_t, float, cutlass::half_t, void, float>" in \
        render.kernel_source(TEMPLATES, silu)
    conv = fusion.fused(first(Conv2dFpropSm90, element="f16"), "bias+hardswish")
    conv_text = render.kernel_source(TEMPLATES, conv)
    assert conv.name.endswith("_ebias_hardswish") and "kernelgen::FusedConv2dOperation3x<" in conv_text
    assert "thread::HardSwish" in conv_text
    for epilogue, functor in (("bias", "Identity"), ("bias+add", "Identity"), ("bias+gelu", "GELU"),
                              ("bias+sigmoid", "Sigmoid")):
        assert f"thread::{functor}," in fusion.fusion_cpp(epilogue, "cutlass::half_t", "float", "void")


def test_the_profilers_job_line_ends_with_the_epilogue():
    conv = Conv2dProblem(**POINTWISE, epilogue="bias+add+relu")
    assert conv2d_fprop.job_line(conv).endswith(" 8 14 14 64 128 1 1 0 0 1 1 1 1 bias+add+relu")
    assert conv2d_fprop.job_line(Conv2dProblem(**POINTWISE)).endswith(" 1 1 1 1")
    assert gemm.job_line(GemmProblem(m=64, n=256, k=128, epilogue="bias+gelu")).endswith(" f16 64 256 128 bias+gelu")


FUSED_SET = ("conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 epilogue=bias+add+relu\n"
             "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 epilogue=bias+relu\n"
             "gemm m=64 n=256 k=128 epilogue=bias+gelu\n")


def test_a_search_build_profiles_fused_candidates_and_the_header_keys_them_by_their_epilogue(tmp_path):
    import pandas as pd

    from kernelgen import results

    project, tools = make_fake_build(tmp_path)
    (project / "kernel_specs" / "workloads" / "fz.txt").write_text(FUSED_SET)
    common = ["WORKLOADS=fz", "TOP=2", "SPECS=kernel_specs/families", f"NVCC={tools.nvcc}", f"BUILD={tmp_path / 'build'}"]
    run(project, "profile", *common)
    folder = project / "profile_results" / "fz" / "nvidia_h200"
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    suffixes = {"conv2d_fprop_f16_n8_h14_w14_c64_k128_r1_s1_pad0x0_str1x1_dil1x1_ebias_add_relu": "_ebias_add_relu",
                "conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1_ebias_relu": "_ebias_relu",
                "gemm_f16_m64_n256_k128_ebias_gelu": "_ebias_gelu"}
    assert set(frame["workload"]) == set(suffixes) and (frame["status"] == "ok").all()
    assert all(k.endswith(suffixes[w]) for w, k in zip(frame["workload"], frame["kernel"])), \
        "each layer measured with kernels fused for its epilogue"
    run(project, "best_kernels.h", *common)
    header = (tmp_path / "build" / "sets" / "fz" / "best_kernels.h").read_text()
    assert "{8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1, 1, {true, true, Activation::kRelu}}" in header
    assert "{8, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, {true, false, Activation::kRelu}}" in header
    assert "{64, 256, 128, {true, false, Activation::kGelu}}" in header
    launcher = (tmp_path / "build" / "sets" / "fz" / "best_kernels_launcher.cu").read_text()
    table = launcher[launcher.index("constexpr Epilogue kEpilogueOf[] = {"):]
    assert "{}" not in table[:table.index("};")], "every kernel of a fused set computes an epilogue"
    cutlass = (tmp_path / "build" / "sets" / "fz" / "best_kernels_cutlass.h").read_text()
    assert "struct Conv2dFprop<8," not in cutlass and "LinCombPerColBiasEltAct" in cutlass, \
        "fused kernels' types, looked up at run time only"


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


EPILOGUES = ("bias+relu", "bias+add+relu", "bias+add", "bias+silu", "bias+gelu", "bias+hardswish", "bias+sigmoid")


@requires_gpu
def test_on_the_gpu_every_fused_kernel_computes_its_epilogue(tmp_path):
    """Each epilogue on a 1x1 and a 3x3 layer, and a GEMM, over the model's two best fused candidates
    of each: every pair ok and verified against the reference convolution through the same epilogue."""
    import pandas as pd

    from kernelgen import results
    from kernelgen.profile import query_gpu

    lines = []
    for epilogue in EPILOGUES:
        lines += [f"conv2d_fprop n=4 h=14 w=14 c=64 k=128 r=1 s=1 epilogue={epilogue}",
                  f"conv2d_fprop n=4 h=15 w=15 c=32 k=64 r=3 s=3 pad=1 stride=2 epilogue={epilogue}",
                  f"gemm m=200 n=256 k=64 epilogue={epilogue}"]
    workloads = tmp_path / "fused.txt"
    workloads.write_text("\n".join(lines) + "\n")
    build = os.environ.get("KERNELGEN_TEST_BUILD", str(tmp_path / "build"))
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", "profile", f"WORKLOADS={workloads}", "TOP=2",
                          f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    folder = results.gpu_dir(tmp_path / "results", "fused", query_gpu()[0])
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    assert len(set(frame["workload"])) == len(lines)
    bad = frame[(frame["status"] != "ok") & (frame["status"] != "unsupported")]
    assert bad.empty, bad[["workload", "kernel", "status", "message"]].to_string()
    ok = frame[frame["status"] == "ok"]
    assert set(ok["workload"]) == set(frame["workload"]), "every layer has a fused kernel that ran it"
    assert (ok["rel_l2_error"] <= 1e-3).all() and (ok["rel_max_error"] <= 1e-3).all()
