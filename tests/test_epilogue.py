"""epilogue= on conv2d_fprop and gemm lines: what a layer's output goes through after the product
(a bias, an activation, a residual add, as the network has them), part of the workload's name,
bytes and the ops of the kernels that may run it; bad chains refused naming the line; a fused
workload that no kernel of the build fuses refused naming it, as a grouped one is."""

import json

import pytest

from kernelgen import resolved
from kernelgen.errors import WorkloadError
from kernelgen.ops import check_served
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads
from conftest import ROOT

TEXT = """\
conv2d_fprop n=2 h=8 w=8 c=64 k=32 r=3 s=3 pad=1 epilogue=bias+add+relu
conv2d_fprop n=2 h=8 w=8 c=64 k=32 r=3 s=3 pad=1
gemm m=8 n=16 k=32 epilogue=bias+gelu
conv2d_fprop n=2 h=8 w=8 c=64 k=32 r=3 s=3 pad=1 epilogue=none count=2
"""


def test_an_epilogue_is_part_of_the_workload_its_name_bytes_and_kernel_ops():
    with pytest.raises(WorkloadError, match=r"w\.txt:4: duplicate of the workload on line 2"):
        parse_workloads(TEXT, "w.txt")  # epilogue=none is no epilogue
    fused, plain, gemm = parse_workloads(TEXT.rsplit("\n", 2)[0] + "\n", "w.txt")
    assert fused.name == plain.name + "_ebias_add_relu" and fused != plain
    assert fused.kernel_ops == ("conv2d_fprop:bias+add+relu", "gemm:bias+add+relu", "conv2d_fprop:optional_relu",
                                "gemm:optional_relu")
    assert plain.kernel_ops == ("conv2d_fprop", "gemm") and gemm.kernel_ops == ("conv2d_fprop:bias+gelu", "gemm:bias+gelu")
    outputs = 2 * 8 * 8 * 32
    assert fused.min_bytes() - plain.min_bytes() == 2 * (32 + outputs), "the bias and the residual, read once"
    assert gemm.name == "gemm_f16_m8_n16_k32_ebias_gelu" and gemm.as_conv().epilogue == "bias+gelu"
    assert fused.args() == plain.args() and fused.flops == plain.flops


@pytest.mark.parametrize("value, message", [
    ("bias+foo", "epilogue step 'foo' is not one of bias, add, relu, silu, gelu, hardswish, sigmoid"),
    ("relu+bias", "epilogue 'relu+bias': bias comes first"),
    ("bias+relu+silu", "one activation at most, not relu and silu"),
    ("bias+add+add", "'add' is given twice"),
    ("bias++relu", "epilogue step '' is not one of"),
])
def test_a_bad_epilogue_is_refused_naming_the_line(value, message):
    with pytest.raises(WorkloadError) as error:
        parse_workloads(f"gemm m=8 n=16 k=32\ngemm m=8 n=16 k=64 epilogue={value}\n", "w.txt")
    assert str(error.value).startswith("w.txt:2: ") and message in str(error.value) and "\n" not in str(error.value)


def test_either_order_of_activation_and_residual_is_its_own_workload():
    after, before = parse_workloads("gemm m=8 n=16 k=32 epilogue=bias+add+relu\n"
                                    "gemm m=8 n=16 k=32 epilogue=bias+relu+add\n")
    assert after.name != before.name and {after.epilogue, before.epilogue} == {"bias+add+relu", "bias+relu+add"}


def test_a_fused_workload_no_kernel_fuses_is_refused_naming_it():
    problems = parse_workloads(TEXT.rsplit("\n", 2)[0] + "\n", "w.txt")
    kernels = load_catalog(ROOT / "kernel_specs" / "families")
    check_served(problems[1:2], kernels, "w.txt")  # the plain one is served
    with pytest.raises(WorkloadError) as error:
        check_served(problems, kernels, "w.txt")
    assert str(error.value).startswith("w.txt:1: workload conv2d_fprop_f16_n2_h8_w8_c64_k32_r3_s3_pad1x1_str1x1_dil1x1"
                                       "_ebias_add_relu: dtype f16: no kernel of this build computes conv2d_fprop with "
                                       "epilogue=bias+add+relu in f16")


def test_a_resolved_set_keeps_the_epilogue_and_a_set_without_one_is_written_as_before(tmp_path):
    problems = parse_workloads(TEXT.rsplit("\n", 2)[0] + "\n", "w.txt")
    text = resolved.as_json("s", "w.txt", problems)
    assert [p.name for p in resolved.problems_of(json.loads(text), "workloads.json")] == [p.name for p in problems]
    plain = json.loads(resolved.as_json("s", "w.txt", problems[1:2]))
    assert "epilogue" not in plain["workloads"][0]["values"], "the file of a set without epilogues is unchanged"
