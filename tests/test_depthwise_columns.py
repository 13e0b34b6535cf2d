"""The depthwise family of a tensor copy an input column (profiler/depthwise_columns.h,
site_scons/kernelgen/families/depthwise_columns.py): its spec checks refuse entries the kernel cannot
build, naming file, entry and key; a kernel serves the depthwise layers of its filter and stride whose
C is even but no multiple of 8 and whose image rows are 16-byte multiples, and says why it refuses the
others; the model has no rows of it, so a build measures each kernel on the layers it serves; a kernel
compiles as the profiler builds it; on a GPU every kernel computes small odd layers (within fp16
accumulation's error) or refuses them as the Python side says."""

import pytest

from conftest import (ROOT, assert_entry_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves, theta_group
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_columns.toml"
FIRST = "{ filter = 3, stride = 2, rows = 4, thread_rows = 2, columns = 2, channel_vectors = 8, threads = 128 }"
# C of 2, 4 and 6 past a multiple of 8, a block of channels partly outside the layer (C = 58 of 64 a
# block; 366 of 64), padding on both sides of the image at stride 1 and 2 (a column left of the
# image whose copy reads the row before it), images smaller than a tile and than the filter, odd
# heights and widths; then layers each kernel refuses: C a multiple of 8, C odd, W * C no multiple
# of 8, dilation 2, K = 2C, a 5x5 filter
LAYERS = [
    "n=2 h=13 w=12 c=58 k=58 r=3 s=3 pad=1 stride=2 groups=58",
    "n=3 h=9 w=4 c=366 k=366 r=3 s=3 pad=1 stride=2 groups=366",
    "n=2 h=11 w=4 c=58 k=58 r=3 s=3 pad=1 stride=1 groups=58",
    "n=1 h=18 w=20 c=114 k=114 r=3 s=3 pad=1 stride=1 groups=114",
    "n=2 h=3 w=4 c=30 k=30 r=3 s=3 pad=1 stride=1 groups=30",
    "n=2 h=15 w=12 c=36 k=36 r=3 s=3 pad=1 stride=2 groups=36",
    "n=1 h=7 w=4 c=74 k=74 r=3 s=3 pad=1 stride=2 groups=74",
    "n=2 h=8 w=8 c=48 k=48 r=3 s=3 pad=1 stride=1 groups=48",
    "n=2 h=8 w=8 c=45 k=45 r=3 s=3 pad=1 stride=1 groups=45",
    "n=2 h=8 w=7 c=58 k=58 r=3 s=3 pad=1 stride=2 groups=58",
    "n=2 h=8 w=12 c=58 k=58 r=3 s=3 pad=2 stride=1 dilation=2 groups=58",
    "n=2 h=8 w=12 c=58 k=116 r=3 s=3 pad=1 stride=1 groups=58",
    "n=2 h=9 w=8 c=42 k=42 r=5 s=5 pad=2 stride=1 groups=42",
]


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace(" }", ', sums = "rows" }'), "sums", "unknown key"),
    (FIRST.replace(" }", ', taps = "first" }'), "taps", "unknown key"),
    (FIRST.replace(" }", ', loader = "tma" }'), "loader", "unknown key"),
    (FIRST.replace(" }", ', launch = "graph" }'), "launch", "'graph'"),
    (FIRST.replace("filter = 3", "filter = 4"), "filter", "4 is not one of 1, 3, 5, 7, 9, 11"),
    (FIRST.replace("rows = 4, thread_rows = 2", "rows = 8, thread_rows = 1"), "rows",
     "rows 8 in thread rows of 1 do not divide the 4 threads"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    assert_entry_refused(tmp_path, "depthwise_columns", entry, key, message, "f16")


def test_the_name_says_a_copy_a_column_and_the_stages_hold_aligned_columns():
    from kernelgen import render
    from kernelgen.vocab import VERIFY_TOLERANCE, verify_tolerance

    kernel = next(k for k in load_family(SPEC) if (k.stride, k.columns) == (2, 7))
    assert kernel.name == ("kernelgen_sm90_simt_dwconv_cols_half2_f16nhwc_f16nhwc_f16_f16nhwc_3x3_stride2_tile4x14_t2x7"
                           "_c64_s2_tma_cta128_pdl")
    assert (kernel.arch, kernel.includes, kernel.accumulator) == (90, ("depthwise_columns.h",), "f16")
    assert verify_tolerance(kernel) == VERIFY_TOLERANCE["f16"]
    # two stages of 29 columns, each 9 rows of 64 channels and 8 more (1,296 bytes, 1,408 aligned),
    # and the block's 9 taps of 64 channels once
    assert kernel.shared_bytes() == 2 * 29 * 1408 + 9 * 8 * 16
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, kernel).rstrip().endswith(
        "kernelgen::DepthwiseColumns<3, 3, 2, 4, 2, 7, 8, 2, 128, true>;")


def layer(c=366, h=28, w=28, r=3, stride=2, dilation=1, k=None, groups=None):
    return Conv2dProblem(32, h, w, c, c if k is None else k, r, r, r // 2, r // 2, stride, stride, dilation, dilation,
                         groups=c if groups is None else groups)


@pytest.mark.parametrize("problem, why", [
    (layer(), None),
    (layer(c=58, h=56, w=56), None),
    (layer(c=30, w=4), None),
    (layer(c=96), "C is a multiple of 8: served by the kernels of one tensor copy a tile"),
    (layer(c=45), "C must be even (a thread's two channels)"),
    (layer(c=58, w=7), "W * C must be a multiple of 8 (an image row 16-byte aligned)"),
    (layer(stride=1), "built for 3x3 filters, stride 2"),
    (layer(r=5), "built for 3x3 filters, stride 2"),
    (layer(dilation=2), "built for dilation 1"),
    (layer(k=732), "a depthwise kernel: needs groups = C = K"),
    (layer(groups=183), "a depthwise kernel: needs groups = C = K"),
])
def test_a_kernel_serves_depthwise_layers_of_channels_no_multiple_of_8_and_aligned_rows(problem, why):
    kernel = next(k for k in load_family(SPEC) if (k.stride, k.columns) == (2, 7))
    assert serves(kernel, problem) == why


def test_the_kernels_of_one_copy_a_tile_refuse_what_these_serve():
    half = next(k for k in load_family(ROOT / "kernel_specs" / "families" / "depthwise_half.toml")
                if (k.filter, k.stride) == (3, 2))
    assert serves(half, layer()) == "C must be a multiple of 8"
    assert serves(half, layer(c=96)) is None


def test_a_build_measures_each_kernel_on_the_layers_it_serves_until_fitted():
    """A group of its own: while the model has no rows of it, every kernel of the family that serves
    ReXNet's 366-channel stride-2 layer is proposed (unranked) beside the model's top 3, none on a
    layer of 368 channels; once fitted on rows of it (the committed model, since ReXNet-1.0's and
    ShuffleNetV2's on the H200), only those the model ranks in its top 3 are."""
    from dataclasses import replace

    from kernelgen import candidates
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    fitted = load_model("nvidia_h200")
    unfitted = replace(fitted, theta={g: t for g, t in fitted.theta.items() if g != "DepthwiseColumns"})
    family, catalog = load_family(SPEC), load_catalog(SPEC.parent)
    assert theta_group(family[0]) == "DepthwiseColumns"
    assert candidates.unfitted(unfitted, family[0]) and not candidates.unfitted(fitted, family[0])
    first, second = candidates.propose([layer(), layer(c=368)], catalog, unfitted, 3)
    served = {k.name for k in family if (k.filter, k.stride) == (3, 2)}
    assert len(served) == 2 and served <= first.unranked
    assert not {k.name for k in family} & ({k.name for _, k in second.ranked} | second.unranked)
    ranked, = candidates.propose([layer()], catalog, fitted, 3)
    assert not ranked.unranked & served and len(ranked.ranked) == 3 + len(ranked.unranked)


@requires_nvcc
def test_a_kernel_of_each_stride_compiles_as_the_profiler_builds_it(tmp_path):
    family = load_family(SPEC)
    assert_kernels_compile(tmp_path, [next(k for k in family if k.stride == stride) for stride in (1, 2)])


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    """Within 5e-3 (fp16 sums of 9 products of operands in [-1, 1)), where the profiler's own check
    allows fp16 accumulation's 2e-2."""
    kernels = {k.name: k for k in load_family(SPEC)}
    frames = profile_layers(tmp_path, LAYERS, "kernelgen_sm90_simt_dwconv_cols_*")
    for problem, frame in frames:
        assert_served_rows_verify(problem, frame, kernels, limit=5e-3)
    assert sum((frame["status"] == "ok").sum() for _, frame in frames) == 2 * 4 + 2 * 3
