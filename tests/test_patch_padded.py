"""Patch convolutions of filter rows padded to 8 (profiler/patch_padded_adapter.h,
site_scons/kernelgen/families/conv2d_sm90_patch_padded.py): the 14x14 stride-14 patch embeddings of
3 channels (ViT-L/14, ViT-H/14, DINOv2), whose rows of 42 values the patch kernels cannot fold. A
kernel serves the whole-window patch layers of such rows and says why it refuses the others (the
folding patch kernels take rows of a multiple of 8 without a copy); the convolution it runs on the
copies is the layer's (the same outputs, GEMM and reduction but the padding); the model weighs it
on that convolution and its copies, and ranks it first on ViT-H/14's layer; the family builds no
fused variant nor dependent launch; a kernel compiles as the profiler builds it; on a GPU each
computes patch layers of odd sizes or refuses them as the Python side says."""

import pytest

from conftest import (ROOT, assert_entry_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves
from kernelgen.families.conv2d_sm90_patch_padded import folded
from kernelgen.specs import load_family
from kernelgen.workloads import parse_workloads

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_sm90_patch_padded.toml"
VIT_H = "conv2d_fprop n=32 h=224 w=224 c=3 k=1280 r=14 s=14 stride=14"
FIRST = '{ tile = [128, 128, 64], schedule = "pingpong", clusters = [[1, 1, 1]] }'


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace(" }", ', launches = ["pdl"] }'), "launches", "the default tile scheduler and plain launches only"),
    (FIRST.replace('"pingpong"', '"cooperative"').replace(" }", ', scheduler = "stream_k" }'), "scheduler",
     "the default tile scheduler and plain launches only"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    assert_entry_refused(tmp_path, "conv2d_fprop_sm90_patch_padded", entry, key, message, extra='source = "void"\n')


def test_the_name_and_adapter_say_the_padded_copies_and_no_fused_variant_is_made():
    kernel = load_family(SPEC)[0]
    assert kernel.name == ("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_void_f16nhwc_128x128x64_1x1x1_0_align8"
                           "_warpspecialized_pingpong_epi_tma_patchpad")
    assert (kernel.adapter, kernel.adapter_header) == ("kernelgen::PatchPaddedConv2dPersistentOperation3x",
                                                       "patch_padded_adapter.h")
    assert not kernel.fusible and not kernel.optional_relu and kernel.c_alignment == 1


@pytest.mark.parametrize("line, why", [
    (VIT_H, None),
    ("conv2d_fprop n=1 h=518 w=518 c=3 k=384 r=14 s=14 stride=14", None),  # DINOv2 at its own size
    ("conv2d_fprop n=2 h=28 w=21 c=5 k=64 r=7 s=7 stride=7", None),
    ("conv2d_fprop n=32 h=224 w=224 c=3 k=768 r=16 s=16 stride=16",
     "S*C is a multiple of 8: the patch kernels fold it without a copy"),
    ("conv2d_fprop n=32 h=224 w=224 c=3 k=1280 r=14 s=14 stride=7", "needs stride along W equal to the filter's width"),
    ("conv2d_fprop n=32 h=230 w=224 c=3 k=1280 r=14 s=14 stride=14", "H a multiple of R"),
    ("conv2d_fprop n=32 h=224 w=230 c=3 k=1280 r=14 s=14 stride=14", "W a multiple of S"),
    ("conv2d_fprop n=32 h=224 w=224 c=3 k=1280 r=14 s=14 stride=14 pad=1", "no padding nor dilation along W"),
    ("conv2d_fprop n=32 h=224 w=224 c=3 k=1276 r=14 s=14 stride=14", "K must be a multiple of 8"),
])
def test_a_kernel_serves_whole_window_patch_layers_of_rows_no_multiple_of_8(line, why):
    kernel = load_family(SPEC)[0]
    refusal = serves(kernel, parse_workloads(line)[0])
    assert refusal == why if why is None else why in refusal


def test_the_convolution_on_the_copies_is_the_layers():
    """N*P images of R rows of W/S pixels of 48 channels (42 padded), R x 1 filters at stride 1: one
    row of Q outputs an image, N*P*Q outputs of K channels, the reduction R * 48 (R * 42 the layer's)."""
    conv = parse_workloads(VIT_H)[0].as_conv()
    q = folded(conv)
    assert (q.n, q.h, q.w, q.c, q.k, q.r, q.s, q.stride_h, q.stride_w) == (32 * 16, 14, 16, 48, 1280, 14, 1, 1, 1)
    assert (q.p, q.q) == (1, 16) and q.n * q.p * q.q == conv.n * conv.p * conv.q
    assert q.r * q.s * q.c == 14 * 48 and conv.r * conv.s * conv.c == 14 * 42


def test_the_model_ranks_it_first_on_a_patch_14_layer_and_behind_the_folding_kernels_on_patch_16():
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    model, catalog = load_model("nvidia_h200"), load_catalog(SPEC.parent)
    ranked = model.rank(catalog, parse_workloads(VIT_H)[0])
    assert ranked[0][1].name.endswith("_patchpad")
    few = next(ms for ms, k in ranked if "_few_channels_" in k.name)
    assert ranked[0][0] < few / 3, "its copies and GEMM against an im2col tile built for each tile"
    sixteen = model.rank(catalog, parse_workloads("conv2d_fprop n=32 h=224 w=224 c=3 k=768 r=16 s=16 stride=16")[0])
    assert not any(k.name.endswith("_patchpad") for _, k in sixteen)


@requires_nvcc
def test_a_kernel_compiles_as_the_profiler_builds_it(tmp_path):
    assert_kernels_compile(tmp_path, load_family(SPEC)[:1])


# 14x14 and 7x7 windows of 3 and 5 channels, images of a few windows, K of one and several tiles;
# then a patch-16 layer (folded without a copy: refused) and a strided layer that is no patch
LAYERS = [
    "n=2 h=56 w=42 c=3 k=64 r=14 s=14 pad=0 stride=14",
    "n=3 h=28 w=28 c=3 k=136 r=14 s=14 pad=0 stride=14",
    "n=2 h=21 w=35 c=5 k=256 r=7 s=7 pad=0 stride=7",
    "n=1 h=224 w=224 c=3 k=384 r=14 s=14 pad=0 stride=14",
    "n=2 h=32 w=32 c=3 k=64 r=16 s=16 pad=0 stride=16",
    "n=2 h=28 w=28 c=3 k=64 r=14 s=14 pad=0 stride=7",
]


@requires_gpu
def test_each_kernel_verifies_on_patch_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "*_patchpad"):
        assert_served_rows_verify(problem, frame, kernels)
