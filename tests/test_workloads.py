"""Workload files: the resnet50 set, and bad input refused naming the file and line."""

import pytest

from conftest import ROOT
from kernelgen.errors import WorkloadError
from kernelgen.workloads import Conv2dProblem, load_workloads, parse_workloads

SETS = ROOT / "kernel_specs" / "workloads"


def test_resnet50_is_the_seed_table():
    name, path, problems = load_workloads("resnet50", SETS)
    assert name == "resnet50" and path == SETS / "resnet50.txt"
    assert len(problems) == 19
    first = problems[0]
    assert (first.n, first.h, first.w, first.c, first.k, first.r, first.s) == (256, 56, 56, 64, 256, 1, 1)
    assert first.name == "conv2d_fprop_f16_n256_h56_w56_c64_k256_r1_s1_pad0x0_str1x1_dil1x1"
    strided = problems[4]
    assert (strided.p, strided.q, strided.stride_h) == (28, 28, 2)
    assert sum(p.r == 1 for p in problems) == 15


def test_a_workload_file_path_works_like_a_set(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=3 s=3 pad=1 stride=1  # tiny\n")
    name, _, problems = load_workloads(str(path), SETS)
    assert name == "mine" and problems[0].p == 8


def test_floor_counts_only_the_input_a_strided_1x1_layer_touches():
    full = Conv2dProblem(256, 56, 56, 256, 512, 1, 1, stride_h=1, stride_w=1)
    strided = Conv2dProblem(256, 56, 56, 256, 512, 1, 1, stride_h=2, stride_w=2)
    assert strided.min_bytes() == 2 * (256 * 28 * 28 * 256 + 512 * 256 + 256 * 28 * 28 * 512)
    assert full.min_bytes() == 2 * (256 * 56 * 56 * 256 + 512 * 256 + 256 * 56 * 56 * 512)
    assert strided.flops == 2 * 256 * 28 * 28 * 512 * 256


def test_a_gemm_is_profiled_as_the_1x1_convolution_it_is():
    gemm, = parse_workloads("gemm m=256 n=1000 k=2048\n")
    assert gemm.name == "gemm_f16_m256_n1000_k2048" and gemm.op == "gemm"
    conv = gemm.as_conv()
    assert (conv.n, conv.h, conv.w, conv.c, conv.k, conv.r, conv.s, conv.p, conv.q) == (256, 1, 1, 2048, 1000, 1, 1, 1, 1)
    assert gemm.flops == conv.flops == 2 * 256 * 1000 * 2048
    assert gemm.min_bytes() == conv.min_bytes() == 2 * (256 * 2048 + 1000 * 2048 + 256 * 1000)
    with pytest.raises(WorkloadError, match="g.txt:1: missing k"):
        parse_workloads("gemm m=1 n=2\n", "g.txt")
    with pytest.raises(WorkloadError, match="unknown key 'c'"):
        parse_workloads("gemm m=1 n=2 k=3 c=4\n", "g.txt")


def test_long_and_short_spellings_agree():
    a, = parse_workloads("conv2d_fprop n=2 h=9 w=7 c=8 k=16 r=3 s=3 pad=1 stride=2 dilation=1\n")
    b, = parse_workloads("conv2d_fprop n=2 h=9 w=7 c=8 k=16 r=3 s=3 pad_h=1 pad_w=1 stride_h=2 stride_w=2\n")
    assert a == b and (a.p, a.q) == (5, 4)


@pytest.mark.parametrize("line, message", [
    ("conv2d_fprop n=0 h=8 w=8 c=8 k=8 r=1 s=1", "'n' must be at least 1"),
    ("conv2d_fprop n=1 h=8 w=8 c=-8 k=8 r=1 s=1", "'c' must be at least 1"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 pad=-1", "'pad_h' must be at least 0"),
    ("conv2d_fprop n=1 h=2 w=2 c=8 k=8 r=5 s=5 pad=0", "leave no output"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1", "missing s"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 colour=3", "unknown key 'colour'"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=one", "'s=one' is not an integer"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 pad=1 pad_h=1", "'pad_h' is given twice"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 stride", "expected key=value"),
    ("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 dtype=f64", "dtype 'f64'"),
    ("conv3d_fprop n=1", "unknown operation 'conv3d_fprop'"),
    ("conv2d_fprop n=8 h=8 w=8 c=8 k=8 r=3 s=3 conv3d=frames", r"conv3d='frames': expected frames:T .* or time:H"),
    ("conv2d_fprop n=8 h=8 w=8 c=8 k=8 r=3 s=3 conv3d=space:2", r"conv3d='space:2': expected frames:T"),
    ("conv2d_fprop n=8 h=8 w=8 c=8 k=8 r=3 s=3 conv3d=frames:0", r"conv3d='frames:0': expected"),
    ("conv2d_fprop n=8 h=8 w=8 c=8 k=8 r=3 s=3 conv3d=frames:3", "n=8 is not a whole number of clips of 3 frames"),
    ("conv2d_fprop n=2 h=4 w=64 c=8 k=8 r=3 s=1 conv3d=time:5", "w=64 is not a whole number of rows of a frame of 5"),
    ("conv2d_fprop n=2 h=4 w=64 c=8 k=8 r=3 s=3 conv3d=time:8", "the view along time has s=1 and no stride"),
    ("conv2d_fprop n=2 h=4 w=64 c=8 k=8 r=3 s=1 pad=1 conv3d=time:8", "the view along time has s=1"),
    ("conv2d_fprop n=8 h=8 w=8 c=8 k=8 r=3 s=3 conv3d=frames:" + "9" * 300, r"conv3d='frames:9999.*\.\.\..*': expected"),
])
def test_bad_workloads_name_file_and_line(line, message):
    text = "# header\nconv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1\n" + line + "\n"
    with pytest.raises(WorkloadError, match=message) as info:
        parse_workloads(text, "layers.txt")
    assert str(info.value).startswith("layers.txt:3: ")


def test_a_3d_convolutions_view_keeps_its_2d_name_and_gives_the_3d_call_back():
    """conv3d= is not part of the workload's name (the kernels run the 2-D problem); it gives compare
    the network's conv3d: a 1xRxS filter over n/T clips of T frames, an Rx1x1 one over frames of H rows."""
    frames, time = parse_workloads("conv2d_fprop n=8 h=6 w=5 c=8 k=16 r=3 s=3 pad=1 stride=2 conv3d=frames:4\n"
                                   "conv2d_fprop n=2 h=4 w=30 c=8 k=8 r=3 s=1 pad_h=1 pad_w=0 stride_h=2 stride_w=1 "
                                   "conv3d=time:6\n", "video.txt")
    assert frames.name == parse_workloads("conv2d_fprop n=8 h=6 w=5 c=8 k=16 r=3 s=3 pad=1 stride=2\n")[0].name
    assert frames.view_3d() == ((2, 8, 4, 6, 5), (16, 8, 1, 3, 3), (1, 2, 2), (0, 1, 1), (1, 1, 1))
    assert time.view_3d() == ((2, 8, 4, 6, 5), (8, 8, 3, 1, 1), (2, 1, 1), (1, 0, 0), (1, 1, 1))
    assert parse_workloads("conv2d_fprop n=8 h=6 w=5 c=8 k=16 r=3 s=3\n")[0].view_3d() is None


def test_duplicate_workloads_are_refused():
    with pytest.raises(WorkloadError, match="layers.txt:2: duplicate of the workload on line 1"):
        parse_workloads("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1\n"
                        "conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 pad=0\n", "layers.txt")


def test_unknown_set_lists_the_known_ones():
    with pytest.raises(WorkloadError, match="resnet5: unknown workload set.*resnet50"):
        load_workloads("resnet5", SETS)


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(WorkloadError, match="no such workload file"):
        load_workloads(str(tmp_path / "none.txt"), SETS)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(WorkloadError, match="no workloads"):
        load_workloads(str(empty), SETS)
