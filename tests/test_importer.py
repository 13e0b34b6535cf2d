"""scons workloads: recorded layers -> workload file (plain Python, no PyTorch), count= in
workload files, bad input refused in one line with nothing written, and, where PyTorch and
torchvision are installed, real models recorded on the meta device."""

import collections
import dataclasses
import os
import subprocess
import sys
import textwrap
import types

import pytest

import scons_runs
from conftest import ROOT, requires_gpu
from kernelgen import importer
from kernelgen.errors import WorkloadError
from kernelgen.importer import Call, ModelError, parse_request, plan_workloads, workload_text
from kernelgen.workloads import Conv2dProblem, load_workloads, parse_workloads

SETS = ROOT / "kernel_specs" / "workloads"


def conv(n, c, h, w, k, r, s=None, stride=1, padding=None, dilation=1, groups=1, op="conv2d", dtype="float32"):
    s = r if s is None else s
    padding = (r // 2, s // 2) if padding is None else padding
    return Call(op, (n, c, h, w), (k, c // groups, r, s), stride=(stride, stride),
                padding=padding if isinstance(padding, str) else tuple(padding), dilation=(dilation, dilation),
                groups=groups, dtype=dtype)


def linear(shape, out_features, dtype="float32"):
    return Call("linear", tuple(shape), (out_features, shape[-1]), dtype=dtype)


# A small network's calls as the recorder would see them: a stem, a block run three times,
# a depthwise, a grouped, a 1-D, a 3-D and a transposed convolution, a classifier.
NETWORK = [
    conv(8, 3, 32, 32, 16, 7, stride=2),
    *[c for _ in range(3) for c in (conv(8, 16, 16, 16, 16, 1), conv(8, 16, 16, 16, 16, 3))],
    conv(8, 16, 16, 16, 16, 3, groups=16),
    conv(8, 16, 16, 16, 32, 3, groups=4),
    conv(8, 16, 16, 16, 16, 3, groups=16),
    Call("conv1d", (8, 16, 64), (16, 16, 3), stride=(1,), padding=(1,), dilation=(1,)),
    Call("conv3d", (8, 16, 4, 16, 16), (16, 16, 3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), dilation=(1, 1, 1)),
    Call("conv_transpose2d", (8, 16, 16, 16), (16, 16, 2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1)),
    linear((8, 16), 10),
]


def request(**kw):
    args = dict(model="tinynet", batch=8, input="3x32x32")
    args.update(kw)
    return parse_request(**args)


# ---- count= in workload files ------------------------------------------------------------------

def test_count_is_metadata_not_part_of_the_problem_or_its_name():
    once, thrice, gemm = parse_workloads("conv2d_fprop n=2 h=8 w=8 c=8 k=8 r=3 s=3 pad=1\n"
                                         "conv2d_fprop n=4 h=8 w=8 c=8 k=8 r=3 s=3 pad=1 count=3 dtype=bf16\n"
                                         "gemm m=4 n=8 k=16 count=2\n")
    assert (once.count, thrice.count, gemm.count) == (1, 3, 2)
    assert thrice.name == "conv2d_fprop_bf16_n4_h8_w8_c8_k8_r3_s3_pad1x1_str1x1_dil1x1"
    assert len(thrice.args()) == 13 and thrice.args() == Conv2dProblem(4, 8, 8, 8, 8, 3, 3, 1, 1).args()
    assert gemm.name == "gemm_f16_m4_n8_k16" and gemm.as_conv().count == 2
    assert thrice == Conv2dProblem(4, 8, 8, 8, 8, 3, 3, 1, 1, dtype="bf16")


def test_a_count_does_not_make_a_duplicate_distinct():
    with pytest.raises(WorkloadError, match="x.txt:2: duplicate of the workload on line 1"):
        parse_workloads("gemm m=4 n=8 k=16 count=2\ngemm m=4 n=8 k=16 count=3\n", "x.txt")


@pytest.mark.parametrize("item, message", [
    ("count=0", "'count' must be at least 1, got 0"),
    ("count=-2", "'count' must be at least 1, got -2"),
    ("count=two", "'count=two' is not an integer"),
    ("count=1.5", "'count=1.5' is not an integer"),
    ("count=", "expected key=value, got 'count='"),
    ("count=1 count=2", "'count' is given twice"),
])
@pytest.mark.parametrize("op", ["conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1", "gemm m=1 n=8 k=8"])
def test_a_bad_count_names_file_and_line(op, item, message):
    with pytest.raises(WorkloadError, match=message) as info:
        parse_workloads(f"# header\n{op} {item}\n", "net.txt")
    assert str(info.value).startswith("net.txt:2: ")


# ---- the request ----------------------------------------------------------------------------

def test_a_request_names_its_set_and_the_command_that_makes_it():
    r = parse_request("resnet50", "256")
    assert (r.name, r.batch, r.input, r.dtype, r.factory) == ("resnet50_b256", 256, (3, 224, 224), "f16", None)
    assert r.command() == "scons workloads MODEL=resnet50 BATCH=256"
    mine = parse_request("nets.zoo:make_net", "1", "1x64x48", "bf16", "")
    assert (mine.name, mine.factory, mine.input) == ("make_net_b1", ("nets.zoo", "make_net"), (1, 64, 48))
    assert mine.command() == "scons workloads MODEL=nets.zoo:make_net BATCH=1 INPUT=1x64x48 DTYPE=bf16"
    assert parse_request("vgg16", 1, name="vgg").command() == "scons workloads MODEL=vgg16 BATCH=1 NAME=vgg"


BAD_REQUESTS = [
    (dict(model=""), "MODEL is not set: name a torchvision model (e.g. MODEL=resnet50) or your own as "
                     "MODEL=package.module:factory"),
    (dict(model="my net"), "MODEL='my net': not a model name; name a torchvision model"),
    (dict(model="nets.zoo:"), "MODEL='nets.zoo:': not a model name"),
    (dict(model="nets/zoo.py:make"), "MODEL='nets/zoo.py:make': not a model name"),
    (dict(batch="0"), "BATCH='0': expected a positive integer"),
    (dict(batch="-4"), "BATCH='-4': expected a positive integer"),
    (dict(batch="two"), "BATCH='two': expected a positive integer"),
    (dict(batch="2.5"), "BATCH='2.5': expected a positive integer"),
    (dict(batch=""), "BATCH='': expected a positive integer"),
    (dict(input="224"), "INPUT='224': expected CxHxW, three positive integers (e.g. INPUT=3x224x224; CxTxHxW for a "
                        "video model, CxL for a sequence)"),
    (dict(input="3x0x224"), "INPUT='3x0x224': expected CxHxW"),
    (dict(input="3x8x224x224x1"), "INPUT='3x8x224x224x1': expected CxHxW"),
    (dict(input="3x0x224x224"), "INPUT='3x0x224x224': expected CxHxW"),
    (dict(input="cxhxw"), "INPUT='cxhxw': expected CxHxW"),
    (dict(input="3 224 224"), "INPUT='3 224 224': expected CxHxW"),
    (dict(dtype="f32"), "DTYPE='f32': expected one of f16, bf16"),
    (dict(dtype="fp16"), "DTYPE='fp16': expected one of f16, bf16"),
    (dict(name="my-net"), "NAME='my-net': a workload set's name must be a plain identifier"),
    (dict(name="1net"), "NAME='1net': a workload set's name must be a plain identifier"),
    (dict(name="../evil"), "NAME='../evil': a workload set's name must be a plain identifier"),
    (dict(epilogues="yes"), "EPILOGUES='yes': expected 1 (write each layer's epilogue= into its line) or 0"),
    (dict(pad="on"), "PAD='on': expected 1 (pad channel counts no multiple of 8 between two convolutions) or 0"),
]


@pytest.mark.parametrize("change, message", BAD_REQUESTS)
def test_bad_variables_are_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, change, message):
    args = dict(model="resnet50", batch="1", input="3x224x224", dtype="f16", name="")
    args.update(change)
    with pytest.raises(ModelError) as info:
        parse_request(**args)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    argv = [f"--{k}={v}" for k, v in args.items()] + ["--sets-dir", str(tmp_path)]
    assert importer.main(argv) == 1
    err = capsys.readouterr().err
    assert err == f"scons workloads: {info.value}\n" and list(tmp_path.iterdir()) == []


# ---- recorded calls -> workloads -----------------------------------------------------------

@pytest.mark.parametrize("padding, kernel, dilation, expected", [
    ("same", (3, 3), (1, 1), ((1, 1), (1, 1))),
    ("same", (4, 2), (1, 1), ((1, 2), (0, 1))),
    ("same", (3, 5), (2, 1), ((2, 2), (2, 2))),
    ("valid", (3, 3), (1, 1), ((0, 0), (0, 0))),
    ((2, 0), (5, 1), (1, 1), ((2, 2), (0, 0))),
])
def test_padding_is_resolved_to_numbers(padding, kernel, dilation, expected):
    assert importer.resolve_padding(padding, kernel, dilation) == expected


@pytest.mark.parametrize("r, s, dilation", [(3, 3, 1), (4, 4, 1), (2, 5, 1), (3, 3, 2), (4, 1, 3)])
def test_same_padding_keeps_the_image_size_even_when_uneven(r, s, dilation):
    problem = importer.to_problem(conv(2, 8, 13, 10, 8, r, s, padding="same", dilation=dilation), "f16")
    assert (problem.p, problem.q) == (13, 10)
    assert problem.pad_h == dilation * (r - 1) // 2 and problem.pad_w == dilation * (s - 1) // 2


def test_distinct_workloads_in_order_of_first_use_with_counts():
    plan = plan_workloads(NETWORK)
    assert [(p.op, p.count) for p in plan.problems] == [("conv2d_fprop", 1), ("conv2d_fprop", 3),
                                                        ("conv2d_fprop", 3), ("conv2d_fprop", 2),
                                                        ("conv2d_fprop", 1), ("gemm", 1)]
    stem, pointwise, three, depthwise, grouped = plan.problems[:5]
    assert (stem.h, stem.c, stem.k, stem.r, stem.pad_h, stem.stride_h, stem.p) == (32, 3, 16, 7, 3, 2, 16)
    assert (pointwise.r, three.r, three.pad_w) == (1, 3, 1)
    assert (depthwise.groups, depthwise.c, depthwise.k, grouped.groups, grouped.k) == (16, 16, 16, 4, 32)
    assert depthwise.flops == 2 * 8 * 16 * 16 * 16 * 9, "a depthwise layer's products: one channel a filter"
    gemm = plan.problems[5]
    assert (gemm.m, gemm.n, gemm.k) == (8, 10, 16)
    assert (plan.conv_calls, plan.linear_calls, plan.dtypes) == (13, 1, ["float32"])
    reasons = [(reason, n) for reason, _, n in plan.skipped]
    assert reasons == [("1-D convolution", 1), ("3-D convolution", 1), ("transposed convolution", 1)]
    assert plan.skipped_flops[1] == 2 * 8 * (4 * 16 * 16) * (16 * 16 * 27), "the 3-D convolution's FLOPs"
    assert 0.25 < importer.coverage(plan) < 0.35, "the 3-D convolution's FLOPs, most of the network's, are not covered"


def test_a_linear_layer_is_a_gemm_over_the_product_of_its_leading_dimensions():
    plan = plan_workloads([conv(1, 8, 8, 8, 8, 1), linear((4, 197, 768), 3072), linear((768,), 10)])
    assert [(p.m, p.n, p.k) for p in plan.problems[1:]] == [(4 * 197, 3072, 768), (1, 10, 768)]


def test_a_conv2d_on_an_unbatched_input_is_listed_not_profiled():
    call = Call("conv2d", (8, 16, 16), (8, 8, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    plan = plan_workloads([call, conv(1, 8, 8, 8, 8, 1)])
    assert plan.skipped[0][0] == "conv2d on a 3-D input (the tool profiles NCHW batches)"


def test_only_a_factorized_3d_convolution_becomes_a_2d_one():
    video = dict(input=(2, 16, 8, 56, 56), dilation=(1, 1, 1))
    spatial = Call("conv3d", weight=(32, 16, 1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), **video)
    temporal = Call("conv3d", weight=(32, 16, 3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0), **video)
    assert importer.as_conv2d(spatial) == dataclasses.replace(spatial, op="conv2d", input=(16, 16, 56, 56),
                                                              weight=(32, 16, 3, 3), stride=(2, 2), padding=(1, 1),
                                                              dilation=(1, 1))
    assert importer.as_conv2d(temporal) == dataclasses.replace(temporal, op="conv2d", input=(2, 16, 8, 3136),
                                                               weight=(32, 16, 3, 1), stride=(2, 1), padding=(1, 0),
                                                               dilation=(1, 1))
    for other in (dataclasses.replace(spatial, weight=(32, 16, 3, 3, 3), padding=(1, 1, 1)),  # a full 3-D filter
                  dataclasses.replace(spatial, stride=(2, 2, 2)),  # frames skipped: no view of the memory
                  dataclasses.replace(temporal, padding=(1, 1, 0)),  # padded along H
                  dataclasses.replace(spatial, padding="same"),
                  conv(8, 16, 16, 16, 16, 3)):
        assert importer.as_conv2d(other) is None
    plan = plan_workloads([spatial, temporal, dataclasses.replace(spatial, weight=(32, 16, 3, 3, 3), padding=(1, 1, 1))])
    assert plan.as_2d == 2 and [p.n for p in plan.problems] == [16, 2] and plan.skipped[0][0] == "3-D convolution"


def test_asymmetric_and_dilated_layers_keep_both_dimensions():
    call = Call("conv2d", (2, 8, 20, 30), (16, 8, 1, 7), stride=(1, 2), padding=(0, 3), dilation=(1, 2))
    line = importer.workload_line(dataclasses.replace(importer.to_problem(call, "f16"), count=2))
    assert line == ("conv2d_fprop n=2 h=20 w=30 c=8 k=16 r=1 s=7 pad_h=0 pad_w=3 stride_h=1 stride_w=2 "
                    "dilation_h=1 dilation_w=2 count=2 dtype=f16")
    problem, = parse_workloads(line + "\n")
    assert problem == importer.to_problem(call, "f16") and problem.count == 2


def test_the_file_lists_every_workload_with_its_count_and_everything_left_out():
    text = workload_text(plan_workloads(NETWORK), request(), "PyTorch 2.11.0, torchvision 0.26.0")
    lines = text.splitlines()
    assert lines[0].startswith("# tinynet_b8: the convolutions and linear layers of torchvision's tinynet")
    assert "batch 8, input 3x32x32" in lines[0]
    assert "# Written by `scons workloads MODEL=tinynet BATCH=8 INPUT=3x32x32` (PyTorch 2.11.0" in text
    assert "so a float32 model is profiled as f16." in text
    assert ("13 convolution calls: 10 in 5 distinct conv2d_fprop lines below, 3 the tool cannot profile "
            "(listed at the end); and 1 linear call in 1 distinct gemm line.") in text
    assert f"# The lines cover {importer.coverage(plan_workloads(NETWORK)):.1%} of the FLOPs" in text
    body = [l for l in lines if not l.startswith("#")]
    assert body == ["conv2d_fprop n=8 h=32 w=32 c=3 k=16 r=7 s=7 pad=3 stride=2 count=1 dtype=f16",
                    "conv2d_fprop n=8 h=16 w=16 c=16 k=16 r=1 s=1 pad=0 stride=1 count=3 dtype=f16",
                    "conv2d_fprop n=8 h=16 w=16 c=16 k=16 r=3 s=3 pad=1 stride=1 count=3 dtype=f16",
                    "conv2d_fprop n=8 h=16 w=16 c=16 k=16 r=3 s=3 pad=1 stride=1 groups=16 count=2 dtype=f16",
                    "conv2d_fprop n=8 h=16 w=16 c=16 k=32 r=3 s=3 pad=1 stride=1 groups=4 count=1 dtype=f16",
                    "gemm m=8 n=10 k=16 count=1 dtype=f16"]
    assert ("# transposed convolution: conv_transpose2d input 8x16x16x16 weight 16x16x2x2 stride 2x2 padding 0x0 "
            "dilation 1x1 groups 1 float32 count=1") in lines
    assert sum(l.startswith("# ") and l.endswith(("count=1", "count=2")) for l in lines) == 3
    problems = parse_workloads(text)
    assert sum(p.count for p in problems if p.op == "conv2d_fprop") == 10
    assert text == workload_text(plan_workloads(NETWORK), request(), "PyTorch 2.11.0, torchvision 0.26.0")


def test_a_half_precision_model_and_bf16_profiling_say_so():
    half = [conv(1, 8, 8, 8, 8, 3, dtype="float16")]
    text = workload_text(plan_workloads(half), request(), "v")
    assert "The model runs in float16; its layers are profiled in f16 (dtype=f16), NHWC." in text
    text = workload_text(plan_workloads(NETWORK, "bf16"), request(dtype="bf16"), "v")
    assert "profiled in bf16 (dtype=bf16)" in text and "DTYPE=bf16" in text
    assert {p.dtype for p in parse_workloads(text)} == {"bf16"}


@pytest.mark.parametrize("calls, message", [
    ([], "MODEL=tinynet: the forward pass runs no convolution and no linear layer, so there is nothing to profile"),
    ([Call("conv1d", (8, 16, 64), (16, 16, 3), stride=(1,), padding=(1,), dilation=(1,)),
      Call("conv3d", (1, 1, 4, 4, 4), (1, 1, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1))],
     "MODEL=tinynet: none of its 2 convolution call(s) can be profiled (1-D convolution; 3-D convolution), and it "
     "runs no linear layer"),
])
def test_a_model_without_a_convolution_or_linear_layer_to_profile_is_refused(calls, message):
    with pytest.raises(ModelError) as info:
        workload_text(plan_workloads(calls), request(), "v")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def fake_record(calls=None, error=None):
    def record(request, log=print):
        if error is not None:
            raise error
        return calls
    return record


@pytest.mark.parametrize("record, message", [
    (fake_record(calls=[]), "runs no convolution and no linear layer"),
    (fake_record(error=ModelError("MODEL=tinynet: the factory raised RuntimeError: boom")), "the factory raised"),
])
def test_an_existing_set_is_replaced_only_by_a_complete_one(tmp_path, monkeypatch, capsys, record, message):
    path = tmp_path / "tinynet_b8.txt"
    path.write_text("gemm m=1 n=2 k=3\n")
    monkeypatch.setattr(importer, "torch_versions", lambda: "PyTorch 2.11.0")
    monkeypatch.setattr(importer, "record_model", record)
    argv = ["--model", "tinynet", "--batch", "8", "--input", "3x32x32", "--sets-dir", str(tmp_path), "--replace"]
    assert importer.main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert path.read_text() == "gemm m=1 n=2 k=3\n" and [p.name for p in tmp_path.iterdir()] == [path.name]
    monkeypatch.setattr(importer, "record_model", fake_record(calls=NETWORK))
    assert importer.main(argv) == 0
    name, _, problems = load_workloads("tinynet_b8", tmp_path)
    assert [p.count for p in problems] == [1, 3, 3, 2, 1, 1] and [p.name for p in tmp_path.iterdir()] == [path.name]
    assert "3 call(s) the tool cannot profile" in capsys.readouterr().out


@pytest.mark.parametrize("model, modules, message", [
    ("resnet50", {"torch": None}, "scons workloads needs PyTorch and torchvision (pip install torch torchvision)"),
    ("resnet50", {"torch": types.ModuleType("torch"), "torchvision": None},
     "scons workloads needs PyTorch and torchvision (pip install torch torchvision); torchvision is not installed"),
    ("nets.zoo:make", {"torch": None}, "scons workloads needs PyTorch (pip install torch)"),
])
def test_without_pytorch_the_target_says_what_it_needs(tmp_path, monkeypatch, capsys, model, modules, message):
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    assert importer.main(["--model", model, "--sets-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scons workloads: {message}") and "needed for this target only" in err
    assert err.count("\n") == 1 and list(tmp_path.iterdir()) == []


# ---- scons workloads ---------------------------------------------------------------------------

def scons(*args):
    """`scons -Q *args` in the project (a process of its own, forked from the worker's helper:
    tests/scons_runs.py)."""
    return scons_runs.run(["-Q", *args], cwd=ROOT, env=dict(os.environ), timeout=600)


@pytest.mark.parametrize("args, message", [
    (["BATCH=0", "MODEL=resnet50"], "scons: BATCH='0': expected a positive integer\n"),
    (["INPUT=224", "MODEL=resnet50"], "scons: INPUT='224': expected CxHxW"),
    (["BATCH=1"], "scons: MODEL is not set"),
    (["MODEL=resnet50", "EPILOGUES=2"], "scons: EPILOGUES='2': expected 1 (write each layer's epilogue= into its line)"),
    (["MODEL=resnet50", "PAD=-1"], "scons: PAD='-1': expected 1 (pad channel counts no multiple of 8 between two"),
    (["MODEL=resnet50", "profile"], "scons: scons workloads runs alone (also asked for: profile)"),
])
def test_scons_workloads_checks_its_variables_before_anything_else(args, message):
    before = sorted(p.name for p in SETS.iterdir())
    out = scons("workloads", "CUTLASS=/nonexistent", "NVCC=/nonexistent/nvcc", *args)
    assert out.returncode == 2 and out.stderr.startswith(message) and out.stderr.count("\n") == 1, out.stderr
    assert sorted(p.name for p in SETS.iterdir()) == before


def test_scons_help_documents_the_workloads_target_and_its_variables():
    out = scons("--help", "workloads", "CUTLASS=/nonexistent")  # needs no CUTLASS
    assert "  workloads        record MODEL's convolutions and linear layers" in out.stdout
    for variable in ("MODEL", "BATCH", "INPUT", "DTYPE", "NAME"):
        assert f"\n{variable}: scons workloads: " in out.stdout


# ---- with PyTorch: real models --------------------------------------------------------------

NETS = '''
import torch
import torch.nn.functional as F
from torch import nn


class Functional(nn.Module):
    """Convolutions called functionally, a "same" padding, and layers the tool cannot profile."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(16, 3, 4, 4))
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = F.conv2d(x, self.w, padding="same")
        x = self.dw(self.dw(x))
        x = self.up(x)
        return self.head(x.mean((2, 3)))


class DataDependent(nn.Conv2d):
    """Runs only where values exist (the meta device has none): recorded on the CPU."""

    def forward(self, x):
        if x.sum().item() >= 0:
            x = super().forward(x)
        return x


def functional():
    return Functional()


def data_dependent():
    return DataDependent(3, 8, 3, padding=1)


def linear_only():
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))


def nothing():
    return nn.Sequential(nn.Flatten())


def video():
    """A (2+1)-D video block: a spatial and a temporal 3-D convolution, a strided 1x1x1 one, then a classifier."""
    return nn.Sequential(nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1)), nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0)),
                         nn.Conv3d(8, 16, 1, stride=2), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(16, 10))


def raises():
    raise RuntimeError("no such checkpoint")


def four_channels():
    return nn.Conv2d(4, 8, 3)


class Products(nn.Module):
    """A window attention written with the products themselves, as Swin and timm's ViTs have it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 4, stride=4)
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        x = self.conv(x).flatten(2).transpose(1, 2)  # 2 x 4 x 16
        q, k, v = self.qkv(x).reshape(2, 4, 3, 2, 8).permute(2, 0, 3, 1, 4)  # each 2 x 2 heads x 4 x 8
        a = q @ k.transpose(-2, -1)
        y = a.matmul(v) + torch.bmm(a.flatten(0, 1), v.flatten(0, 1)).view(2, 2, 4, 8)
        y = y + F.scaled_dot_product_attention(q, k, v)
        return torch.einsum("bhij,bhjd->bhid", a, y)


def products():
    return Products()


class OpaqueAttention(nn.Module):
    """An attention the recorder cannot see into: its scores by elementwise products (as a fused or
    compiled kernel would hide them)."""

    def forward(self, x):  # 2 x 4 x 16
        scores = (x[:, :, None, :] * x[:, None, :, :]).sum(-1).softmax(-1)
        return (scores[..., None] * x[:, None, :, :]).sum(2)


class AttentionBlock(nn.Module):
    """An opaque attention inside a block named as one: reported once, as the inner module."""

    def __init__(self):
        super().__init__()
        self.inner = OpaqueAttention()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return self.proj(self.inner(x))


class SdpaAttention(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(x, x, x)


class GateAttn(nn.Module):
    """Named as an attention, as ResNeSt's SplitAttn: a gate of sigmoids over a 1x1 convolution of
    the pooled input; no product of two activations, its convolution recorded."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        return x * self.fc(x.mean((2, 3), keepdim=True)).sigmoid()


class Hidden(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = GateAttn()
        self.conv = nn.Conv2d(3, 16, 4, stride=4)
        self.blocks = nn.ModuleList([AttentionBlock(), AttentionBlock(), SdpaAttention()])

    def forward(self, x):
        x = self.conv(self.gate(x)).flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        return x


def hidden():
    return Hidden()


def not_a_module():
    return "resnet"


not_callable = 3
'''


@pytest.fixture(scope="module")
def torch_nets(tmp_path_factory):
    torch = pytest.importorskip("torch", reason="recording a model needs PyTorch (not installed here)")
    pytest.importorskip("torchvision", reason="recording a torchvision model needs torchvision")
    folder = tmp_path_factory.mktemp("nets")
    (folder / "kernelgen_test_nets.py").write_text(textwrap.dedent(NETS))
    (folder / "kernelgen_broken_nets.py").write_text("import no_such_package_here\n")
    sys.path.insert(0, str(folder))
    yield torch
    sys.path.remove(str(folder))


def test_resnet50_at_batch_256_on_the_meta_device(torch_nets, tmp_path):
    path = importer.import_workloads(parse_request("resnet50", 256), tmp_path, log=lambda m: None)
    assert path == tmp_path / "resnet50_b256.txt"
    problems = parse_workloads(path.read_text())
    convs = [p for p in problems if p.op == "conv2d_fprop"]
    # torchvision's ResNet-50 is v1.5 (stride 2 on the 3x3 layers): 23 distinct layers, 53 calls.
    assert len(convs) == 23 and sum(p.count for p in convs) == 53
    assert (convs[0].c, convs[0].k, convs[0].r, convs[0].stride_h, convs[0].h) == (3, 64, 7, 2, 224)
    assert [(p.m, p.n, p.k, p.count) for p in problems if p.op == "gemm"] == [(256, 1000, 2048, 1)]
    assert all(p.n == 256 and p.dtype == "f16" for p in convs)


def test_vgg16_at_batch_1(torch_nets, tmp_path):
    path = importer.import_workloads(parse_request("vgg16", 1), tmp_path, log=lambda m: None)
    problems = parse_workloads(path.read_text())
    convs = [p for p in problems if p.op == "conv2d_fprop"]
    assert len(convs) == 9 and sum(p.count for p in convs) == 13
    assert [(p.m, p.n, p.k) for p in problems if p.op == "gemm"] == [(1, 4096, 25088), (1, 4096, 4096), (1, 1000, 4096)]


def test_functional_calls_same_padding_and_unprofilable_layers_are_recorded(torch_nets, tmp_path):
    logged = []
    path = importer.import_workloads(parse_request("kernelgen_test_nets:functional", 2, "3x9x9"), tmp_path,
                                     log=logged.append)
    text = path.read_text()
    conv, depthwise, gemm = parse_workloads(text)
    assert (conv.h, conv.w, conv.r, conv.pad_h, conv.p, conv.q) == (10, 10, 4, 1, 9, 9)  # "same" with a 4x4 filter
    assert (depthwise.groups, depthwise.c, depthwise.k, depthwise.r, depthwise.count) == (16, 16, 16, 3, 2)
    assert (gemm.m, gemm.n, gemm.k) == (2, 5, 8)
    assert "# transposed convolution: conv_transpose2d input 2x16x9x9 weight 16x8x2x2" in text
    assert any("1 call(s) the tool cannot profile" in m for m in logged)


def test_a_network_of_linear_layers_or_of_3d_convolutions_and_a_classifier_is_written(torch_nets, tmp_path):
    """Linear layers alone make a set (a transformer of tokens); a video model, given INPUT=CxTxHxW,
    has its (2+1)-D convolutions profiled as the 2-D ones of the same memory, the others listed
    with their reason, and its classifier profiled."""
    path = importer.import_workloads(parse_request("kernelgen_test_nets:linear_only", 2, "3x8x8"), tmp_path,
                                     log=lambda m: None)
    assert [(p.op, p.m, p.n, p.k) for p in parse_workloads(path.read_text())] == [("gemm", 2, 10, 192)]
    path = importer.import_workloads(parse_request("kernelgen_test_nets:video", 2, "3x4x8x8"), tmp_path,
                                     log=lambda m: None)
    text = path.read_text()
    assert "batch 2, input 3x4x8x8 (CxTxHxW)" in text.splitlines()[0] and "INPUT=3x4x8x8" in text
    assert "3 convolution calls: 2 in 2 distinct conv2d_fprop lines below, 1 the tool cannot profile" in text
    assert "# 2 of the convolution calls are 3-D ones of 1xRxS or Rx1x1 filters, run as the 2-D ones" in text
    assert "# 3-D convolution: conv3d input 2x8x4x8x8 weight 16x8x1x1x1 stride 2x2x2" in text
    assert [importer.workload_line(p) for p in parse_workloads(text) if p.op == "conv2d_fprop"] == [
        "conv2d_fprop n=8 h=8 w=8 c=3 k=8 r=3 s=3 pad=1 stride=1 count=1 dtype=f16 conv3d=frames:4",
        "conv2d_fprop n=2 h=4 w=64 c=8 k=8 r=3 s=1 pad_h=1 pad_w=0 stride=1 count=1 dtype=f16 conv3d=time:8"]
    assert [(p.op, p.m, p.n, p.k) for p in parse_workloads(text) if p.op == "gemm"] == [("gemm", 2, 10, 16)]
    path = importer.import_workloads(parse_request("kernelgen_test_nets:video", 2, "3x4x8x8", name="video_fused",
                                                   epilogues="1"), tmp_path, log=lambda m: None)
    assert [p.epilogue for p in parse_workloads(path.read_text())] == ["", "bias", ""], \
        "the 2-D line of the temporal convolution carries its bias, as a 2-D convolution's does (the spatial " \
        "one's 3 input channels and the classifier's 10 outputs are no multiple of 8: left unfused)"


@pytest.mark.parametrize("kernel, stride, padding, dilation, groups", [
    ((1, 3, 3), (1, 2, 2), (0, 1, 1), (1, 1, 1), 1),  # spatial, strided
    ((1, 5, 3), (1, 1, 2), (0, 2, 1), (3, 2, 1), 2),  # spatial, a dilation along T that a 1-tap filter ignores, grouped
    ((3, 1, 1), (2, 1, 1), (1, 0, 0), (1, 1, 1), 1),  # temporal, strided
    ((5, 1, 1), (1, 1, 1), (4, 0, 0), (2, 1, 1), 4),  # temporal, dilated, grouped
    ((1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),  # pointwise
])
def test_a_factorized_3d_convolution_is_the_2d_one_of_the_same_memory(torch_nets, kernel, stride, padding, dilation,
                                                                     groups):
    """as_conv2d's call, run by PyTorch on the input's NDHWC memory read as its 2-D shape (NHWC),
    gives the 3-D convolution's output's NDHWC memory (in float64, to its rounding)."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(2, 8, 6, 7, 5, dtype=torch.float64)
    w = torch.randn(12, 8 // groups, *kernel, dtype=torch.float64)
    call = Call("conv3d", tuple(x.shape), tuple(w.shape), stride, padding, dilation, groups)
    flat = importer.as_conv2d(call)
    assert flat is not None and flat.op == "conv2d"
    expected = F.conv3d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    n, c, h, w2 = flat.input
    x2 = x.permute(0, 2, 3, 4, 1).reshape(n, h, w2, c).permute(0, 3, 1, 2)  # NDHWC memory read as NHWC
    got = F.conv2d(x2, w.reshape(flat.weight), stride=flat.stride, padding=flat.padding, dilation=flat.dilation,
                   groups=groups)
    got, expected = got.permute(0, 2, 3, 1).reshape(-1), expected.permute(0, 2, 3, 4, 1).reshape(-1)
    assert got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-12, atol=1e-12)
    # the line's conv3d= gives compare the network's own call back (Conv2dProblem.view_3d)
    problem = dataclasses.replace(importer.to_problem(flat, "f16"), conv3d=importer.conv3d_key(call))
    shape, weight, *arguments = problem.view_3d()
    assert shape == tuple(x.shape) and weight == tuple(w.shape)
    again = F.conv3d(x, w, stride=arguments[0], padding=arguments[1], dilation=arguments[2], groups=groups)
    assert torch.allclose(again.permute(0, 2, 3, 4, 1).reshape(-1), expected, rtol=1e-12, atol=1e-12)


def test_matrix_products_outside_linear_layers_are_listed_with_their_flops(torch_nets, tmp_path):
    path = importer.import_workloads(parse_request("kernelgen_test_nets:products", 2, "3x8x8"), tmp_path,
                                     log=lambda m: None)
    text = path.read_text()
    assert "# matrix products outside a linear layer (matmul, @, bmm, einsum): 4 product(s) of 4x8 by 8x4 float32 count=1" in text
    assert "# matrix products outside a linear layer (matmul, @, bmm, einsum): 4 product(s) of 4x4 by 4x8 float32 count=3" in text
    assert "# attention's batched matrix products (Q K^T and its product with V): attention of 4 batch x head pairs, " \
           "L 4, S 4, head dim 8 float32 count=1" in text
    assert "; 4 matrix products outside linear layers (listed at the end, not profiled)." in text


def test_an_attention_module_that_runs_no_product_the_recorder_sees_is_named_in_the_file(torch_nets, tmp_path):
    path = importer.import_workloads(parse_request("kernelgen_test_nets:hidden", 2, "3x8x8"), tmp_path,
                                     log=lambda m: None)
    text = path.read_text()
    assert "# attention modules that ran no matrix product the recorder sees (if they compute one, a fused or " \
           "compiled kernel does, and its FLOPs are not in this file): OpaqueAttention count=2" in text
    assert "AttentionBlock" not in text and "SdpaAttention" not in text  # the block holds the one reported
    assert "compiled kernel does, and its FLOPs are not in this file): GateAttn (its convolutions and linear " \
           "layers are in the lines above) count=1" in text  # its 1x1 convolution is a line
    assert "; 3 calls of attention modules whose products it cannot see (listed at the end)." in text
    assert "2 in 2 distinct conv2d_fprop lines below, 0 the tool cannot profile" in text


def test_a_timm_model_is_imported_through_its_factory_its_fused_attention_listed(torch_nets, tmp_path):
    pytest.importorskip("timm", reason="a timm model needs timm (not installed here)")
    path = importer.import_workloads(parse_request("timm.models:vit_small_patch16_224", 2), tmp_path,
                                     log=lambda m: None)
    assert path == tmp_path / "vit_small_patch16_224_b2.txt"
    text = path.read_text()
    patch, *gemms = parse_workloads(text)
    assert (patch.c, patch.k, patch.r, patch.stride_h) == (3, 384, 16, 16)
    assert [(g.m, g.n, g.k, g.count) for g in gemms] == [
        (394, 1152, 384, 12), (394, 384, 384, 12), (394, 1536, 384, 12), (394, 384, 1536, 12), (2, 1000, 384, 1)]
    # its attention runs F.scaled_dot_product_attention: listed, as nn.MultiheadAttention's products are
    assert "attention of 12 batch x head pairs, L 197, S 197, head dim 64 float32 count=12" in text
    assert "attention modules that ran no matrix product" not in text


def test_a_model_that_cannot_run_on_meta_is_recorded_on_the_cpu(torch_nets, tmp_path):
    logged = []
    path = importer.import_workloads(parse_request("kernelgen_test_nets:data_dependent", 1, "3x8x8"), tmp_path,
                                     log=logged.append)
    conv, = parse_workloads(path.read_text())
    assert (conv.c, conv.k, conv.h) == (3, 8, 8)
    assert any("does not run on the meta device" in m for m in logged)
    if not torch_nets.cuda.is_available():
        assert any(m.endswith("running it on the CPU, which computes the whole forward pass") for m in logged)


def test_a_model_that_cannot_run_on_meta_nor_on_the_gpu_is_recorded_on_the_cpu(torch_nets, tmp_path, monkeypatch):
    if torch_nets.cuda.is_available():
        pytest.skip("PyTorch sees a GPU here: the model runs there (the GPU test below)")
    monkeypatch.setattr(torch_nets.cuda, "is_available", lambda: True)  # a GPU PyTorch cannot run the model on
    logged = []
    path = importer.import_workloads(parse_request("kernelgen_test_nets:data_dependent", 1, "3x8x8"), tmp_path,
                                     log=logged.append)
    conv, = parse_workloads(path.read_text())
    assert (conv.c, conv.k, conv.h) == (3, 8, 8)
    assert any("does not run on the meta device" in m and "running it on the GPU" in m for m in logged)
    assert any(m.startswith("the model does not run on the GPU (") and m.endswith("running it on the CPU")
               for m in logged)


@requires_gpu
def test_a_model_that_cannot_run_on_meta_is_recorded_on_the_gpu(torch_nets, tmp_path):
    if not torch_nets.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device here")
    logged = []
    path = importer.import_workloads(parse_request("kernelgen_test_nets:data_dependent", 2, "3x8x8"), tmp_path,
                                     log=logged.append)
    conv, = parse_workloads(path.read_text())
    assert (conv.n, conv.c, conv.k, conv.h) == (2, 3, 8, 8)
    assert any("does not run on the meta device" in m and "running it on the GPU" in m for m in logged)
    assert not any("on the CPU" in m for m in logged)


@pytest.mark.parametrize("model, message", [
    ("resnet5", "MODEL=resnet5: torchvision has no such model; did you mean resnet50"),
    ("not_a_model_at_all", "MODEL=not_a_model_at_all: torchvision has no such model; name a torchvision model"),
    ("kernelgen_broken_nets:make", "MODEL=kernelgen_broken_nets:make: module 'kernelgen_broken_nets' does not "
                                   "import: ModuleNotFoundError: No module named 'no_such_package_here'"),
    ("kernelgen_no_such_module:make", "module 'kernelgen_no_such_module' does not import"),
    ("kernelgen_test_nets:missing", "module 'kernelgen_test_nets' has no attribute 'missing'"),
    ("kernelgen_test_nets:not_callable", "module 'kernelgen_test_nets' has a non-callable 'not_callable'"),
    ("kernelgen_test_nets:raises", "the factory raised RuntimeError: no such checkpoint"),
    ("kernelgen_test_nets:not_a_module", "the factory returned str, not a torch.nn.Module"),
    ("kernelgen_test_nets:nothing", "the forward pass runs no convolution and no linear layer, so there is nothing"),
    ("kernelgen_test_nets:four_channels", "MODEL=kernelgen_test_nets:four_channels: the forward pass on a 2x3x8x8 "
                                          "input (BATCH x INPUT=) failed: RuntimeError: Given groups=1, weight of size [8, 4, 3, 3]"),
])
def test_bad_models_are_refused_in_one_line_and_nothing_is_written(torch_nets, tmp_path, capsys, model, message):
    assert importer.main(["--model", model, "--batch", "2", "--input", "3x8x8", "--sets-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert message in err and err.startswith("scons workloads: ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, model, batch, convs, calls, gemms", [
    ("resnet50_b256", "resnet50", 256, 23, 53, [(256, 1000, 2048)]),
    ("resnet50_b1", "resnet50", 1, 23, 53, [(1, 1000, 2048)]),
    ("vgg16_b256", "vgg16", 256, 9, 13, [(256, 4096, 25088), (256, 4096, 4096), (256, 1000, 4096)]),
    ("vgg16_b1", "vgg16", 1, 9, 13, [(1, 4096, 25088), (1, 4096, 4096), (1, 1000, 4096)]),
])
def test_the_committed_network_sets_are_the_importers(name, model, batch, convs, calls, gemms):
    _, path, problems = load_workloads(name, SETS)
    assert f"# Written by `scons workloads MODEL={model} BATCH={batch}` (" in path.read_text()
    conv2d = [p for p in problems if p.op == "conv2d_fprop"]
    assert len(conv2d) == convs and sum(p.count for p in conv2d) == calls
    assert all(p.n == batch and p.dtype == "f16" for p in conv2d)
    assert [(p.m, p.n, p.k) for p in problems if p.op == "gemm"] == gemms


class FakeTensor:
    """What attention_calls reads of a tensor: its shape and dtype (and its identity)."""

    def __init__(self, *shape, dtype="torch.float32"):
        self.shape, self.dtype = shape, dtype


def test_an_attentions_projections_are_recorded_as_linear_calls_and_its_products_listed():
    x = FakeTensor(197, 32, 768)  # L x N x E, as nn.MultiheadAttention gives multi_head_attention_forward
    packed, out = FakeTensor(2304, 768), FakeTensor(768, 768)
    self_attention = importer.attention_calls((x, x, x, 768, 12, packed, None, None, None, False, 0.0, out, None), {})
    assert [(c.op, c.input, c.weight) for c in self_attention] == [
        ("linear", (6304, 768), (2304, 768)), ("attention", (384, 197, 64), (197, 64)), ("linear", (6304, 768), (768, 768))]
    memory = FakeTensor(50, 32, 768)  # cross-attention: key and value one tensor of another length
    cross = importer.attention_calls((x, memory, memory, 768, 12, packed, None, None, None, False, 0.0, out, None), {})
    assert [(c.input, c.weight) for c in cross if c.op == "linear"] == [
        ((6304, 768), (768, 768)), ((1600, 768), (1536, 768)), ((6304, 768), (768, 768))]
    native = importer.attention_calls((FakeTensor(32, 197, 768),) * 3 + (768, 12, packed, None, out), {}, native=True)
    assert [(c.op, c.input) for c in native] == [(c.op, c.input) for c in self_attention], "the fast path alike"
    assert [c.epilogue for c in self_attention + native] == [""] * 6, "no biases given"
    bias, out_bias = FakeTensor(2304), FakeTensor(768)
    biased = importer.attention_calls((x, x, x, 768, 12, packed, bias, None, None, False, 0.0, out, out_bias), {})
    native = importer.attention_calls((FakeTensor(32, 197, 768),) * 3 + (768, 12, packed, bias, out, None), {},
                                      native=True)
    assert [c.epilogue for c in biased] == ["bias", "", "bias"] and [c.epilogue for c in native] == ["bias", "", ""]
    plan = plan_workloads([conv(32, 3, 224, 224, 768, 16, stride=16), *self_attention])
    assert [(p.m, p.n, p.k) for p in plan.problems[1:]] == [(6304, 2304, 768), (6304, 768, 768)]
    assert (plan.conv_calls, plan.linear_calls) == (1, 2) and plan.skipped[0][0].startswith("attention's")
    assert plan.skipped_flops == [4.0 * 384 * 197 * 64 * 197]
    text = workload_text(plan, request(), "v")
    assert "; 1 attention (their batched matrix products: listed at the end, not profiled)." in text


@pytest.mark.parametrize("how, args, kwargs, expected", [
    ("ab", (FakeTensor(2, 12, 197, 64), FakeTensor(2, 12, 64, 197)), {}, ("matmul", (24, 197, 64), (64, 197))),
    ("ab", (FakeTensor(32, 49, 96), FakeTensor(96, 288)), {}, ("matmul", (32, 49, 96), (96, 288))),  # a weight
    ("ab", (FakeTensor(1, 12, 5, 8), FakeTensor(3, 1, 8, 7)), {}, ("matmul", (36, 5, 8), (8, 7))),  # broadcast
    ("ab", (FakeTensor(8), FakeTensor(4, 8, 3)), {}, ("matmul", (4, 1, 8), (8, 3))),  # a vector: one row
    ("ab", (FakeTensor(4, 5, 8), FakeTensor(8)), {}, ("matmul", (4, 5, 8), (8, 1))),  # or one column
    ("ba", (FakeTensor(8, 3), FakeTensor(6, 8)), {}, ("matmul", (1, 6, 8), (8, 3))),  # x @ self
    ("_ab", (FakeTensor(6, 3), FakeTensor(6, 8), FakeTensor(8, 3)), {}, ("matmul", (1, 6, 8), (8, 3))),  # addmm
    ("einsum", ("bhid,bhjd->bhij", FakeTensor(2, 3, 5, 8), FakeTensor(2, 3, 7, 8)), {},
     ("matmul", (6, 5, 8), (8, 7))),
    ("einsum", ("ij,jk->ik", [FakeTensor(5, 8), FakeTensor(8, 7)]), {}, ("matmul", (1, 5, 8), (8, 7))),
    ("sdpa", (), {"query": FakeTensor(2, 4, 50, 64), "key": FakeTensor(2, 4, 60, 64), "value": FakeTensor(2, 4, 60, 64)},
     ("attention", (8, 50, 64), (60, 64))),
])
def test_a_matrix_product_is_the_call_of_its_factors_shapes(how, args, kwargs, expected):
    call = importer.product_call(how, args, kwargs)
    assert (call.op, call.input, call.weight) == expected


@pytest.mark.parametrize("args", [
    ("ij->ji", FakeTensor(5, 8)),  # one operand
    ("...ij,...jk->...ik", FakeTensor(2, 5, 8), FakeTensor(2, 8, 7)),  # an ellipsis
    ("ij,jk,kl->il", FakeTensor(5, 8), FakeTensor(8, 7), FakeTensor(7, 2)),  # three
    ("ijk,jk->ik", FakeTensor(5, 8), FakeTensor(8, 7)),  # a term of other rank than its operand
])
def test_an_einsum_that_is_no_product_of_two_is_not_one(args):
    assert importer.product_call("einsum", args, {}) is None


def test_matrix_products_are_listed_with_their_flops_and_counted_apart():
    product = importer.product_call("ab", (FakeTensor(384, 49, 32), FakeTensor(384, 32, 49)), {})
    plan = plan_workloads([conv(32, 3, 224, 224, 96, 4, stride=4), product, product])
    assert plan.skipped == [("matrix products outside a linear layer (matmul, @, bmm, einsum)",
                             "384 product(s) of 49x32 by 32x49 float32", 2)]
    assert plan.skipped_flops == [2.0 * 384 * 49 * 49 * 32] * 2
    text = workload_text(plan, request(), "v")
    assert "1 in 1 distinct conv2d_fprop line below, 0 the tool cannot profile" in text
    assert "; 2 matrix products outside linear layers (listed at the end, not profiled)." in text
    assert f"# The lines cover {importer.coverage(plan):.1%} of the FLOPs of the recorded convolution and linear calls and " \
           "matrix products." in text
    assert 0 < importer.coverage(plan) < 1


def test_an_unseen_attention_is_listed_by_its_module_and_counts_no_flops():
    unseen = Call(importer.UNSEEN, (), (), module="FlashSelfAttention")
    plan = plan_workloads([conv(32, 3, 224, 224, 96, 4, stride=4), unseen, unseen])
    assert [(text, n) for _, text, n in plan.skipped] == [("FlashSelfAttention", 2)]
    assert plan.skipped_flops == [0.0, 0.0] and importer.coverage(plan) == 1.0
    text = workload_text(plan, request(), "v")
    assert "0 the tool cannot profile; and 0 linear calls in 0 distinct gemm lines; 2 calls of attention modules " \
           "whose products it cannot see (listed at the end)." in text


def test_a_model_with_a_backbone_is_built_without_its_backbones_weights():
    """torchvision's segmentation and detection builders default to ImageNet backbone weights, a
    download: the importer passes weights_backbone=None to a builder that takes it."""
    from types import SimpleNamespace

    def deeplab(*, weights=None, progress=True, num_classes=None, weights_backbone="IMAGENET1K_V1"):
        return None

    def resnet(*, weights=None, progress=True):
        return None

    builders = {"deeplab": deeplab, "resnet": resnet}
    torchvision = SimpleNamespace(models=SimpleNamespace(get_model_builder=builders.__getitem__))
    assert importer.no_weights(torchvision, "deeplab") == {"weights": None, "weights_backbone": None}
    assert importer.no_weights(torchvision, "resnet") == {"weights": None}


def test_resnet50s_epilogues_are_recorded_and_written_only_when_asked(torch_nets, tmp_path):
    """conv -> batch norm (eval) -> relu is bias+relu; a bottleneck's last conv -> batch norm -> add of
    the identity -> relu is bias+add+relu; a downsample's conv -> batch norm, read by that add, is
    bias; the classifier's own bias is bias."""
    plain = importer.import_workloads(parse_request("resnet50", 2), tmp_path, log=lambda m: None).read_text()
    assert ("# What the forward pass runs on the outputs of these layers, that a kernel could fuse (EPILOGUES=1 "
            "writes them into the lines; a batch norm in eval mode is a bias): bias+relu 33, bias+add+relu 16, "
            "bias 5 call(s).") in plain
    assert all(not p.epilogue for p in parse_workloads(plain))
    fused = importer.import_workloads(parse_request("resnet50", 2, name="r50", epilogues="1"), tmp_path,
                                      log=lambda m: None).read_text()
    assert "EPILOGUES=1` (" in fused
    problems = parse_workloads(fused)
    counts = collections.Counter()
    for p in problems:
        counts[p.epilogue] += p.count
    assert counts == {"bias+relu": 32, "bias+add+relu": 16, "bias": 5, "": 1}, \
        "the 3-channel first layer's bias+relu is left unfused: no fused kernel takes 3 channels"
    assert "channels no multiple of 8 (the fused kernels move 16-byte rows): bias+relu 1 call(s)." in fused
    downsample = [p for p in problems if p.op == "conv2d_fprop" and (p.h, p.c, p.k, p.r) == (56, 64, 256, 1)]
    assert sorted((p.epilogue, p.count) for p in downsample) == [("bias", 1), ("bias+add+relu", 3)], \
        "the same shape is two workloads: the bottleneck's end and the downsample"


FUSING = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(8, 8, 3, padding=1, bias=True)
        self.b = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.c = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 4)
        self.mlp = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 4), nn.Dropout(0.1))

    def forward(self, x):
        y = F.silu(self.a(x))            # conv's own bias, then silu: bias+silu
        z = self.bn(self.b(y))           # conv, batch norm: bias ...
        w = torch.relu(z) + z            # ... but z is read twice: the relu is not fused
        v = self.c(w)
        v = v * 2.0                      # not an epilogue step: stops the chain at bias
        u = self.fc(v.mean((2, 3)))      # linear with bias, read twice: bias
        return u + self.mlp(u)           # linear, GELU: bias+gelu; linear, dropout (eval), add: bias+add


def fusing():
    return Net()
'''


def recorded(tmp_path, module: str, source: str, builder: str) -> list:
    """The calls record_model records of ``module``'s ``builder`` (written from ``source``), batch 2, 8x6x6."""
    (tmp_path / f"{module}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        return importer.record_model(parse_request(f"{module}:{builder}", 2, "8x6x6"), log=lambda m: None)
    finally:
        sys.path.remove(str(tmp_path))


def test_a_step_is_fused_only_where_the_value_before_it_has_no_other_use(torch_nets, tmp_path):
    calls = recorded(tmp_path, "kernelgen_fusing_nets", FUSING, "fusing")
    assert [(c.op, c.epilogue) for c in calls] == [("conv2d", "bias+silu"), ("conv2d", "bias"), ("conv2d", "bias"),
                                                 ("linear", "bias"), ("linear", "bias+gelu"), ("linear", "bias+add")]


SCALED = '''
import torch
from torch import nn


class Net(nn.Module):
    """ConvNeXt's block end: linear, to channels first, layer scale, add; and scales that do not fold."""

    def __init__(self):
        super().__init__()
        self.fc, self.rows, self.other = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.ones(8, 1, 1))
        self.row_scale = nn.Parameter(torch.ones(1, 6, 1))

    def forward(self, x):                # x: N x 8 x 6 x 6
        y = x + self.scale * self.fc(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)     # bias+add
        z = y + self.row_scale * self.rows(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # along rows: bias
        t = self.other(z.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return z + t * z.mean()          # by a computed value, no parameter: bias


def scaled():
    return Net()
'''


def test_a_layer_scale_after_a_linear_layers_permutation_folds_and_the_add_after_it_joins_the_chain(torch_nets,
                                                                                                    tmp_path):
    calls = recorded(tmp_path, "kernelgen_scaled_nets", SCALED, "scaled")
    assert [(c.op, c.epilogue) for c in calls] == [("linear", "bias+add"), ("linear", "bias"), ("linear", "bias")]
    convnext = importer.record_model(parse_request("convnext_tiny", 1), log=lambda m: None)
    linears = collections.Counter(c.epilogue for c in convnext if c.op == "linear")
    assert linears == {"bias+gelu": 18, "bias+add": 18, "bias": 1}, "ConvNeXt's blocks end in a layer scale and add"
    vit = importer.record_model(parse_request("vit_b_16", 1), log=lambda m: None)
    linears = collections.Counter(c.epilogue for c in vit if c.op == "linear")
    assert linears == {"bias+gelu": 12, "bias+add": 24, "bias": 13}, \
        "the attention's projections with their biases, the output projection's residual add after its transpose"


def test_the_plan_groups_by_epilogue_only_when_the_lines_say_it():
    conv = importer.Call("conv2d", (2, 8, 6, 6), (8, 8, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    calls = [dataclasses.replace(conv, epilogue=e) for e in ("bias+relu", "bias+relu", "bias")]
    merged = importer.plan_workloads(calls)
    assert [(p.epilogue, p.count) for p in merged.problems] == [("", 3)]
    assert merged.epilogues == {"bias+relu": 2, "bias": 1} and not merged.written
    split = importer.plan_workloads(calls, epilogues=True)
    assert [(p.epilogue, p.count) for p in split.problems] == [("bias+relu", 2), ("bias", 1)] and split.written
    assert importer.workload_line(split.problems[0]).endswith(" epilogue=bias+relu count=2 dtype=f16")


def test_the_lines_say_only_what_a_fused_kernel_computes_and_the_file_names_the_rest():
    conv = importer.Call("conv2d", (2, 8, 6, 6), (8, 8, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    calls = [dataclasses.replace(conv, epilogue="bias+relu+add"),  # an add after the activation
             dataclasses.replace(conv, weight=(8, 1, 3, 3), groups=8, epilogue="bias+silu"),  # depthwise
             dataclasses.replace(conv, input=(2, 3, 6, 6), weight=(8, 3, 3, 3), epilogue="bias+relu"),  # 3 channels
             dataclasses.replace(conv, epilogue="bias+add+relu")]
    plan = importer.plan_workloads(calls, epilogues=True)
    assert [p.epilogue for p in plan.problems] == ["bias+relu", "", "", "bias+add+relu"]
    assert plan.unfused == {("bias+relu+add", "a residual add after the activation"): 1,
                            ("bias+silu", "a grouped convolution's (no fused kernel is grouped)"): 1,
                            ("bias+relu", "channels no multiple of 8 (the fused kernels move 16-byte rows)"): 1}
    text = importer.workload_text(plan, parse_request("resnet50", 2, name="r", epilogues="1"), "torch x")
    left = next(line for line in text.splitlines() if line.startswith("# Left unfused"))
    assert left == ("# Left unfused (PyTorch runs these steps after the kernel, and the lines leave them out): "
                    "a grouped convolution's (no fused kernel is grouped): bias+silu 1; a residual add after the "
                    "activation: bias+relu+add 1; channels no multiple of 8 (the fused kernels move 16-byte rows): "
                    "bias+relu 1 call(s).")


@pytest.mark.parametrize("args, kwargs, rank, dims", [
    (([0, 2, 3, 1],), {}, 4, [0, 2, 3, 1]),      # torch.permute(t, dims), t.permute(dims)
    ((0, 2, 1), {}, 3, [0, 2, 1]),               # t.permute(*dims)
    ((), {"dims": (1, 0)}, 2, [1, 0]),           # dims= by keyword
    (([0, 1, 1],), {}, 3, None),                 # not a permutation
    (([0, 2],), {}, 3, None),                    # of another rank
    (([0, -1, 1],), {}, 3, None),                # a negative dimension
    (([0, True],), {}, 2, None),                 # not whole numbers
    ((["0", "1"],), {}, 2, None),
    ((), {}, 2, None),
])
def test_a_permutation_folds_only_when_it_is_one_of_the_values_dimensions(args, kwargs, rank, dims):
    from kernelgen.folds import permutation
    assert permutation(args, kwargs, rank) == dims


@pytest.mark.parametrize("shape, sizes, axis, folds", [
    ((2, 7, 7, 96), (96,), 3, True),             # ConvNeXt's layer scale after the permute back
    ((2, 96, 7, 7), (96, 1, 1), 1, True),
    ((2, 96, 7, 7), (1,), 1, True),              # one value for all channels
    ((2, 96, 7, 7), (96,), 1, False),            # broadcast along W, not the channels
    ((2, 7, 7, 96), (7, 1), 3, False),
    ((2, 7, 7, 96), (48,), 3, False),
    ((7, 96), (1, 7, 96), 1, False),             # more dimensions than the value
])
def test_a_scale_folds_only_when_it_varies_along_the_channels(shape, sizes, axis, folds):
    from kernelgen.folds import per_channel
    assert per_channel(shape, sizes, axis) is folds


def test_an_attention_module_that_takes_no_hooks_is_not_watched():
    """A module that refuses hooks (as a scripted one does) is left unwatched; the record goes on."""

    class Refusing:
        def register_forward_pre_hook(self, hook):
            raise RuntimeError("no hooks here")

    class TakesOne:
        removed = 0

        def register_forward_pre_hook(self, hook):
            return self

        def register_forward_hook(self, hook):
            raise RuntimeError("no forward hooks")

        def remove(self):
            TakesOne.removed += 1

    Refusing.__name__, TakesOne.__name__ = "ScriptedAttention", "HalfAttention"
    model = types.SimpleNamespace(named_modules=lambda: [("a", Refusing()), ("b", TakesOne())])
    assert importer._watch_attention_modules(model, []) == []
    assert TakesOne.removed == 1, "the hook it took is removed"


def test_the_recorder_keeps_no_layers_output_alive(torch_nets):
    """A forward pass on the CPU (a model that cannot run on meta) would otherwise hold every
    layer's output to its end: a detection model at batch 8, 11 GB where 2 GB do."""
    import weakref

    torch = torch_nets

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            y = self.a(x)
            first = weakref.ref(y)
            y = self.b(torch.relu(y))
            self.freed = first() is None
            return y + 1

    net = Net()
    calls = importer.record_calls(torch, net, torch.zeros(1, 3, 8, 8))
    assert net.freed, "the first layer's output was held after its last use"
    assert [(c.op, c.epilogue) for c in calls] == [("conv2d", "bias+relu"), ("conv2d", "bias")]


def test_pad_channels_pads_a_channel_count_between_a_convolution_and_the_one_that_alone_reads_it():
    """importer.pad_channels (PAD=1): 45 channels between a 1x7x7 and a 3x1x1 convolution (R(2+1)D's
    stem) become 48, the first's filters and the second's input; not where the chain adds a residual,
    a convolution is grouped, the count is a multiple of 8, or no convolution alone reads it; the
    file says what was padded."""
    first = Call("conv3d", (2, 3, 4, 16, 16), (45, 3, 1, 7, 7), (1, 2, 2), (0, 3, 3), (1, 1, 1), epilogue="bias+relu")
    second = Call("conv3d", (2, 45, 4, 8, 8), (64, 45, 3, 1, 1), (1, 1, 1), (1, 0, 0), (1, 1, 1), fed_by=0,
                  epilogue="bias+relu")
    padded = importer.pad_channels([first, second])
    assert (padded[0].weight, padded[0].padded_out) == ((48, 3, 1, 7, 7), 45)
    assert (padded[1].input, padded[1].weight, padded[1].padded_in) == ((2, 48, 4, 8, 8), (64, 48, 3, 1, 1), 45)
    for calls in ([dataclasses.replace(first, epilogue="bias+add+relu"), second],
                  [dataclasses.replace(first, weight=(48, 3, 1, 7, 7)), dataclasses.replace(second, input=(2, 48, 4, 8, 8))],
                  [first, dataclasses.replace(second, fed_by=-1)],
                  [dataclasses.replace(first, groups=3, weight=(45, 1, 1, 7, 7)), second],
                  [first, dataclasses.replace(second, op="conv3d", weight=(64, 45, 3, 3, 3), padding=(1, 1, 1))]):
        assert importer.pad_channels(calls) == calls
    plan = plan_workloads(padded, epilogues=True)
    assert plan.padded == {(45, 48): 1} and [p.k for p in plan.problems][:1] == [48]
    assert [p.epilogue for p in plan.problems] == ["", "bias+relu"], "the first's 3 input channels stay unfused"
    text = workload_text(plan, parse_request("r2plus1d_18", 2, "3x4x16x16", pad="1"), "PyTorch 0")
    assert "# Channels padded (PAD=1) between a convolution and the next, which alone reads its output: 45 -> 48 " \
           "(1 pair);" in text and "PAD=1`" in text


def test_r2plus1d_18s_odd_channel_counts_are_padded_with_pad_1(torch_nets, tmp_path):
    """R(2+1)D-18 (torchvision, on the meta device): each (2+1)-D block's mid channels (45, 230, 460,
    921) lie between a spatial convolution and the temporal one that alone reads them, through a
    batch norm and a ReLU: recorded as such (fed_by) and, with PAD=1, padded, their chains fused."""
    path = importer.import_workloads(parse_request("r2plus1d_18", 1, "3x4x32x32", name="r2p", epilogues="1", pad="1"),
                                     tmp_path, log=lambda m: None)
    text = path.read_text()
    assert "45 -> 48 (1 pair), 230 -> 232 (2 pairs), 460 -> 464 (2 pairs), 921 -> 928 (2 pairs);" in text
    assert "k=921" not in text and "c=921" not in text and "k=928" in text and "c=928" in text
    assert "Left unfused (PyTorch runs these steps after the kernel, and the lines leave them out): channels no " \
           "multiple of 8 (the fused kernels move 16-byte rows): bias+relu 1 call(s)." in text, "the stem's 3 channels in"


def test_a_convolution_whose_weight_another_call_uses_too_is_not_marked_for_padding(torch_nets):
    """record_calls' fed_by: a convolution reading another's chain alone is marked, unless its module
    (its weight) runs a second call too, whose input padding would not reach (swap.py likewise)."""
    torch = torch_nets

    class Odd(torch.nn.Module):
        def __init__(self, shared: bool):
            super().__init__()
            self.first, self.bn = torch.nn.Conv2d(8, 5, 3, padding=1), torch.nn.BatchNorm2d(5)
            self.second, self.shared = torch.nn.Conv2d(5, 16, 1), shared

        def forward(self, x):
            y = self.second(torch.relu(self.bn(self.first(x))))
            return y + self.second(x[:, :5]) if self.shared else y

    for shared, fed in ((False, [-1, 0]), (True, [-1, -1, -1])):
        calls = importer.record_calls(torch, Odd(shared).eval(), torch.zeros(1, 8, 6, 6))
        assert [c.fed_by for c in calls] == fed
    assert importer.pad_channels(importer.record_calls(torch, Odd(False).eval(), torch.zeros(1, 8, 6, 6)))[1].input[1] == 8


def test_without_input_a_request_takes_the_models_own_size_or_the_default(monkeypatch):
    """INPUT= empty (scons workloads' default) leaves the input to the model: a model that names its
    input size (timm's ``pretrained_cfg``) is recorded at it, the command that wrote the file says so;
    one that names none (or a torchvision name) at 3x224x224; a given INPUT= is kept."""
    from types import SimpleNamespace
    assert parse_request("resnet50", 1, "").input is None and parse_request("resnet50", 1, " ").input is None
    assert importer.with_model_input(parse_request("resnet50", 1, ""), log=None).input == (3, 224, 224)
    models = {"sized": SimpleNamespace(pretrained_cfg={"input_size": (3, 256, 192)}),
              "old": SimpleNamespace(pretrained_cfg=None, default_cfg={"input_size": [3, 288, 288]}),
              "odd": SimpleNamespace(pretrained_cfg={"input_size": (3, 0, 224)}), "plain": SimpleNamespace()}
    torch = SimpleNamespace(device=lambda name: __import__("contextlib").nullcontext())
    monkeypatch.setattr(importer, "import_torch", lambda request: (torch, None))
    monkeypatch.setattr(importer, "model_builder", lambda request, torch, tv: lambda: models[request.factory[1]])
    said = []
    sized = importer.with_model_input(parse_request("zoo.nets:sized", 2, ""), log=said.append)
    assert sized.input == (3, 256, 192) and sized.command() == "scons workloads MODEL=zoo.nets:sized BATCH=2 INPUT=3x256x192"
    assert said == ["INPUT=3x256x192: the model's own input size (its pretrained_cfg)"]
    assert importer.with_model_input(parse_request("zoo.nets:old", 1, ""), log=said.append).input == (3, 288, 288)
    for name in ("odd", "plain"):
        assert importer.with_model_input(parse_request(f"zoo.nets:{name}", 1, ""), log=said.append).input == (3, 224, 224)
    given = parse_request("zoo.nets:sized", 1, "3x64x64")
    assert importer.with_model_input(given, log=said.append) is given


def test_without_input_a_torchvision_video_model_takes_a_clip_at_its_weights_crop_size(monkeypatch):
    """A torchvision video model (its weights' transforms a VideoClassification) is recorded on a
    clip of 16 frames (more where its weights' min_temporal_size asks) at its weights' crop size,
    where 3x224x224 fails its 3-D convolutions; an image model, a name without weights, a crop size
    of another form and a missing PyTorch keep 3x224x224."""
    import functools
    from types import SimpleNamespace

    def VideoClassification(**kw):  # noqa: N802 (torchvision's name is what is read)
        return kw

    def ImageClassification(**kw):  # noqa: N802
        return kw

    def weights(transform, meta=None, **kw):
        return [SimpleNamespace(transforms=functools.partial(transform, **kw), meta=meta or {})]
    zoo = {"r3d_18": weights(VideoClassification, {"min_size": (1, 1)}, crop_size=(112, 112)),
           "long_clip": weights(VideoClassification, {"min_temporal_size": 32}, crop_size=(224, 224)),
           "odd_crop": weights(VideoClassification, crop_size=224),
           "resnet50": weights(ImageClassification, crop_size=224)}

    def get_model_weights(name):
        return zoo[name]  # KeyError for a name without weights, as torchvision raises
    torchvision = SimpleNamespace(models=SimpleNamespace(get_model_weights=get_model_weights))
    monkeypatch.setattr(importer, "import_torch", lambda request: (None, torchvision))
    said = []
    clip = importer.with_model_input(parse_request("r3d_18", 8, ""), log=said.append)
    assert clip.input == (3, 16, 112, 112) and clip.command() == "scons workloads MODEL=r3d_18 BATCH=8 INPUT=3x16x112x112"
    assert said == ["INPUT=3x16x112x112: a torchvision video model's clip: frames x its weights' crop size"]
    assert importer.with_model_input(parse_request("long_clip", 1, ""), log=said.append).input == (3, 32, 224, 224)
    for name in ("odd_crop", "resnet50", "no_such_model"):
        assert importer.with_model_input(parse_request(name, 1, ""), log=said.append).input == (3, 224, 224)
    assert len(said) == 2

    def no_torch(request):
        raise importer.NoTorchError("scons workloads needs PyTorch")
    monkeypatch.setattr(importer, "import_torch", no_torch)
    assert importer.with_model_input(parse_request("r3d_18", 1, ""), log=said.append).input == (3, 224, 224)
