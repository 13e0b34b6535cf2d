"""Patch convolutions by CUTLASS 3.x SM90 conv kernels on the layer's tensors folded to S*C channels
a pixel (site_scons/kernelgen/families/conv2d_sm90_patch.py, profiler/patch_adapter_3x.h): the
spec's checks name file, entry and key; a kernel serves the layers whose filter is as wide as
their stride along W (unpadded, undilated there) and whose folded rows are 16-byte copies, and the
model counts the folded layer's K iterations; on a GPU every kernel computes the odd layers it
serves (verified against the reference) and refuses the others."""

import math
import re

import pytest

from conftest import (ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu,
                      sm90_conv_family)
from kernelgen.cost_model import FEATURES, features, serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_sm90_patch.toml"
FAMILY = sm90_conv_family("conv2d_fprop_sm90_patch")


@pytest.mark.parametrize("old, new, entry, key, message", [
    ("[[128, 128, 64]]", "[[128, 100, 64]]", "tiles[0]", None, "tile N 100 is not a multiple of 8"),
    ('element = "f16"', 'element = "f32"', None, "element", "16-bit"),
    ("[[1, 1, 1]]", "[[3, 1, 1]]", "clusters[0]", None, "3"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, old, new, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(old, new))
    assert_family_refused(path, entry, key, message)


def kernels():
    return load_family(SPEC)


FOLDS = "a patch kernel: needs stride along W equal to the filter's width S > 1, no padding nor dilation along W"
COPIES = "S*C, W*C and K must be multiples of 8 (16-byte tensor copies of a filter row and of an image row)"
STRIDE = ("a stride along H over 8 needs the filter's rows to fold too "
          "(stride R, no padding nor dilation along H, H a multiple of R)")


@pytest.mark.parametrize("layer, why", [
    (dict(n=32, h=224, w=224, c=3, k=768, r=16, s=16, stride_h=16, stride_w=16), None),  # ViT-B/16
    (dict(n=32, h=56, w=56, c=96, k=192, r=2, s=2, stride_h=2, stride_w=2), None),  # ConvNeXt's downsampling
    (dict(n=1, h=32, w=40, c=3, k=40, r=16, s=16, stride_h=16, stride_w=16), None),  # W not a multiple of S
    (dict(n=1, h=40, w=32, c=3, k=40, r=16, s=16, stride_h=16, stride_w=16), STRIDE),  # nor H of R
    (dict(n=1, h=40, w=32, c=8, k=40, r=3, s=2, stride_h=9, stride_w=2), STRIDE),
    (dict(n=1, h=36, w=32, c=8, k=40, r=3, s=2, stride_h=8, stride_w=2), None),
    (dict(n=2, h=9, w=12, c=8, k=64, r=3, s=2, pad_h=1, stride_h=1, stride_w=2), None),  # padding, stride along H
    (dict(n=2, h=11, w=8, c=4, k=24, r=3, s=4, stride_h=2, stride_w=4, dilation_h=2), None),
    (dict(n=32, h=224, w=224, c=3, k=96, r=4, s=4, stride_h=4, stride_w=4), COPIES),  # 12 channels folded
    (dict(n=1, h=32, w=36, c=4, k=16, r=2, s=2, stride_h=2, stride_w=2), None),
    (dict(n=1, h=32, w=33, c=4, k=16, r=2, s=2, stride_h=2, stride_w=2), COPIES),  # rows of 132 elements
    (dict(n=1, h=32, w=32, c=3, k=20, r=16, s=16, stride_h=16, stride_w=16), COPIES),
    (dict(n=1, h=8, w=8, c=8, k=16, r=3, s=3, pad_h=1, pad_w=1), FOLDS),
    (dict(n=1, h=8, w=8, c=8, k=16, r=2, s=2, stride_h=2, stride_w=2, pad_w=1), FOLDS),
    (dict(n=1, h=8, w=8, c=8, k=16, r=2, s=2, stride_h=2, stride_w=1), FOLDS),
    (dict(n=1, h=8, w=8, c=8, k=16, r=2, s=2, stride_h=2, stride_w=2, dilation_w=2), FOLDS),
    (dict(n=1, h=8, w=8, c=8, k=16, r=1, s=1), FOLDS),
])
def test_a_kernel_serves_the_layers_it_can_fold(layer, why):
    kernel = kernels()[0]
    assert serves(kernel, Conv2dProblem(**layer)) == why


def test_grouped_layers_are_not_its_and_a_fused_layer_is_its_fused_variants():
    from dataclasses import replace

    from kernelgen.fusion import fused

    kernel = kernels()[0]
    grouped = Conv2dProblem(1, 8, 8, 16, 16, 2, 2, stride_h=2, stride_w=2, groups=2)
    assert "not for conv2d_fprop with groups=2" in serves(kernel, grouped)
    layer = Conv2dProblem(32, 56, 56, 96, 192, 2, 2, stride_h=2, stride_w=2, epilogue="bias")
    assert "with epilogue=bias" in serves(kernel, layer)
    variant = fused(kernel, "bias")
    assert serves(variant, layer) is None
    assert variant.name == kernel.name + "_ebias" == replace(kernel, fusion="bias").name
    assert variant.adapter == "kernelgen::FusedPatchConv2dOperation3x" and not variant.fusible
    assert all(k.op == "conv2d_fprop" and k.fusible and k.name.endswith("_patch") for k in kernels())


def test_the_adapter_refuses_with_the_families_words():
    """profiler/patch_adapter_3x.h's patch_unsupported and the family's refusals say the same."""
    header = (ROOT / "profiler" / "patch_adapter_3x.h").read_text()
    said = re.findall(r'return "([^"]+)";', header)
    assert said == [FOLDS, COPIES, STRIDE]


def test_the_model_counts_the_folded_layers_k_iterations():
    """ViT-B/16's patch embedding under a 128x128x64 tile: 16 filter rows of 48 channels, one K
    iteration each (unfolded, 256 taps of 3 channels would be 256), 49 x 6 tiles in 3 waves."""
    vit = Conv2dProblem(32, 224, 224, 3, 768, 16, 16, stride_h=16, stride_w=16)
    by_tile = {(k.tile, k.cluster): k for k in kernels()}
    f = dict(zip(FEATURES, features(by_tile[((128, 128, 64), (1, 1, 1))], vit, 132)))
    waves = math.ceil(49 * 6 / 132)
    assert f["tiles"] == waves
    assert f["iterations"] == waves * 16
    convnext = Conv2dProblem(32, 56, 56, 96, 192, 2, 2, stride_h=2, stride_w=2)  # 2 rows of 192 channels
    f = dict(zip(FEATURES, features(by_tile[((128, 128, 64), (1, 1, 1))], convnext, 132)))
    assert f["iterations"] == math.ceil(32 * 28 * 28 / 128 * 2 / 132) * 2 * 3


def test_a_layer_folds_to_the_convolution_its_kernel_runs():
    from kernelgen.families.conv2d_sm90_patch import folded

    vit = Conv2dProblem(32, 224, 224, 3, 768, 16, 16, stride_h=16, stride_w=16)  # rows fold: 448 images of 16 rows
    assert folded(vit) == Conv2dProblem(32 * 14, 16, 14, 48, 768, 16, 1)
    strided = Conv2dProblem(2, 36, 64, 3, 136, 8, 8, stride_h=8, stride_w=8)  # 36 rows: 4 windows and 4 rows over
    assert folded(strided) == Conv2dProblem(2, 36, 8, 24, 136, 8, 1, stride_h=8)
    for layer in (vit, strided, Conv2dProblem(2, 9, 13, 8, 64, 3, 2, pad_h=1, stride_h=1, stride_w=2)):
        assert folded(layer).gemm_mnk == layer.as_conv().gemm_mnk
        assert (folded(layer).n * folded(layer).p, folded(layer).q) == (layer.n * layer.p, layer.q)


# Odd layers: ViT's patches on a small image (the rows folded), W not a multiple of S, H not a
# multiple of R (a stride of 8 walked), padding, stride and dilation along H, K not a multiple of the tile's N, ConvNeXt's downsampling, fused epilogues (the fused
# variants); the refused: a stride of 16 on H not a multiple of R, 12 channels folded, K of 20, a
# 3x3 padded filter.
LAYERS = [
    "n=2 h=48 w=48 c=3 k=96 r=16 s=16 stride=16",
    "n=1 h=32 w=40 c=3 k=40 r=16 s=16 stride=16",
    "n=1 h=35 w=40 c=3 k=40 r=16 s=16 stride=16",
    "n=2 h=9 w=12 c=8 k=64 r=3 s=2 pad_h=1 stride_h=1 stride_w=2",
    "n=1 h=14 w=14 c=96 k=192 r=2 s=2 stride=2",
    "n=2 h=11 w=8 c=4 k=24 r=3 s=4 stride_h=2 stride_w=4 dilation_h=2",
    "n=3 h=36 w=64 c=3 k=136 r=8 s=8 stride=8",
    "n=1 h=16 w=16 c=3 k=64 r=4 s=4 stride=4",
    "n=2 h=16 w=16 c=64 k=128 r=2 s=2 stride=2 epilogue=bias+add+gelu",
    "n=1 h=32 w=48 c=3 k=64 r=16 s=16 stride=16 epilogue=bias",
    "n=1 h=32 w=32 c=3 k=20 r=16 s=16 stride=16",
    "n=1 h=8 w=8 c=8 k=16 r=3 s=3 pad=1",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_refuses_the_others(tmp_path):
    """Each layer's CSV holds a row of every kernel of its epilogue (the plain ones, or their fused
    variants): verified ok where the family says it serves the layer, unsupported elsewhere."""
    from kernelgen.fusion import fused

    by_name = {k.name: k for k in kernels()}
    for epilogue in ("bias+add+gelu", "bias"):
        by_name.update({fused(k, epilogue).name: fused(k, epilogue) for k in kernels()})
    served = 0
    for problem, frame in profile_layers(tmp_path, LAYERS, "*_patch*"):
        ours = {name: k for name, k in by_name.items() if k.op in problem.kernel_ops}
        assert_served_rows_verify(problem, frame, ours)
        served += sum(serves(k, problem) is None for k in ours.values())
    assert served == 10 * 8  # the 8 layers the family serves, each by its 10 kernels
