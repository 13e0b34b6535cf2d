"""Every layer of a bf16 network is served: its first layer (3 input channels) and channel counts no
multiple of 8 by CUTLASS 2.x few-channels kernels on SM80's two-stage pipelined mainloop
(conv2d_fprop_sm80_few_channels_bf16.toml: accesses of one 2-byte element, which no cp.async
copies), every grouped and depthwise layer by the direct kernel of any filter in bf16
(grouped_direct_bf16.toml). Before them, `scons workloads DTYPE=bf16` of any torchvision
classifier wrote a set no build could take (its first line refused). The kernels compile for
sm_90a through the rendering."""

import pytest

from conftest import (ROOT, assert_kernels_compile, assert_served_rows_verify, profile_layers, requires_gpu,
                      requires_nvcc)
from kernelgen.cost_model import serves
from kernelgen.families.conv2d_2x import Conv2dFprop2x
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family
from kernelgen.vocab import verify_tolerance

FAMILIES = ROOT / "kernel_specs" / "families"
FEW = FAMILIES / "conv2d_fprop_sm80_few_channels_bf16.toml"
GROUPED = FAMILIES / "grouped_direct_bf16.toml"

# Layers of bf16 networks no other bf16 kernel serves: first layers (ResNet-50's 7x7, MobileNet's and
# EfficientNet's 3x3 stride 2, ConvNeXt's 4x4 and ViT's 16x16 patches), EfficientNet's
# squeeze-and-excitation 96 -> 4 and 4 -> 96, ShuffleNetV2's 24 -> 58, a 1x1 layer of 58 -> 58;
# ResNeXt's 32 groups of 4, RegNetY-400MF's 6 groups of 8 at stride 2, an odd depthwise layer, a 9x9 one.
DENSE = [Conv2dProblem(32, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2, dtype="bf16"),
         Conv2dProblem(32, 224, 224, 3, 32, 3, 3, 1, 1, 2, 2, dtype="bf16"),
         Conv2dProblem(32, 224, 224, 3, 96, 4, 4, 0, 0, 4, 4, dtype="bf16"),
         Conv2dProblem(32, 224, 224, 3, 768, 16, 16, 0, 0, 16, 16, dtype="bf16"),
         Conv2dProblem(32, 1, 1, 96, 4, 1, 1, 0, 0, 1, 1, dtype="bf16"),
         Conv2dProblem(32, 1, 1, 4, 96, 1, 1, 0, 0, 1, 1, dtype="bf16"),
         Conv2dProblem(32, 28, 28, 24, 58, 1, 1, 0, 0, 1, 1, dtype="bf16"),
         Conv2dProblem(32, 28, 28, 58, 58, 1, 1, 0, 0, 1, 1, dtype="bf16")]
GROUPED_LAYERS = [Conv2dProblem(32, 56, 56, 128, 128, 3, 3, 1, 1, 1, 1, groups=32, dtype="bf16"),
                  Conv2dProblem(32, 112, 112, 48, 48, 3, 3, 1, 1, 2, 2, groups=6, dtype="bf16"),
                  Conv2dProblem(32, 28, 28, 58, 58, 3, 3, 1, 1, 1, 1, groups=58, dtype="bf16"),
                  Conv2dProblem(32, 14, 14, 90, 90, 9, 9, 4, 4, 1, 1, groups=90, dtype="bf16")]


def test_every_layer_of_a_bf16_network_is_served_and_the_alignment_1_kernel_serves_any_channels():
    catalog = load_catalog(FAMILIES)
    few, grouped = load_family(FEW), load_family(GROUPED)
    for layer in DENSE + GROUPED_LAYERS:
        served = [k for k in catalog if serves(k, layer) is None]
        assert served and all(k.element == "bf16" for k in served), layer.name
    for layer in DENSE:
        assert [k.alignment for k in few if serves(k, layer) is None] == sorted(
            {a for a in (4, 2, 1) if layer.c % a == 0 and layer.k % a == 0}, reverse=True) * 2, layer.name
    for layer in GROUPED_LAYERS:
        assert serves(grouped[0], layer) is None, layer.name
    f16 = Conv2dProblem(32, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2)
    assert all(serves(k, f16) == "built for bf16, not f16" for k in few + grouped)
    assert all(isinstance(k, Conv2dFprop2x) and k.stages == 2 and k.arch == 80 for k in few)


@requires_nvcc
def test_the_bf16_kernels_compile_for_sm90a_through_the_rendering(tmp_path):
    few = load_family(FEW)
    assert_kernels_compile(tmp_path, [next(k for k in few if k.alignment == 1), load_family(GROUPED)[0]])


@pytest.mark.parametrize("alignment", [1, 2])
def test_a_multistage_sm80_tile_of_accesses_cp_async_cannot_copy_is_refused(tmp_path, alignment):
    from conftest import assert_family_refused
    text = FEW.read_text().replace("alignments = [4, 2, 1]", f"alignments = [{alignment}]").replace(
        "[ 64,  64, 32], warps = [2, 2, 1], stages = 2", "[ 64,  64, 32], warps = [2, 2, 1], stages = 3")
    path = tmp_path / "family.toml"
    path.write_text(text)
    if alignment == 2:  # 4-byte accesses: cp.async copies them
        assert {k.stages for k in load_family(path)} == {2, 3}
    else:
        assert_family_refused(path, "tiles[1]", "stages", "alignment 1 makes 2-byte accesses; SM80 multistage "
                                                          "mainloops copy 4, 8, 16 bytes (use 2 stages, or arch = 75)")


# Small odd bf16 layers for the GPU: a first layer of 3 channels at stride 2, 6 -> 20 (alignment 2),
# 12 -> 4 (4), a 1x1 58 -> 58, grouped of 3 channels a group, an odd depthwise one, a 1x5 band.
GPU_LAYERS = ["n=2 h=17 w=15 c=3 k=20 r=3 s=3 pad=1 stride=2 dtype=bf16",
              "n=2 h=9 w=11 c=6 k=20 r=3 s=3 pad=1 stride=1 dtype=bf16",
              "n=3 h=7 w=7 c=12 k=4 r=1 s=1 pad=0 stride=1 dtype=bf16",
              "n=2 h=6 w=9 c=58 k=58 r=1 s=1 pad=0 stride=1 dtype=bf16",
              "n=2 h=9 w=7 c=15 k=15 r=3 s=3 pad=1 stride=2 groups=5 dtype=bf16",
              "n=1 h=11 w=13 c=27 k=27 r=3 s=3 pad=1 stride=1 groups=27 dtype=bf16",
              "n=2 h=8 w=10 c=24 k=24 r=1 s=5 pad_h=0 pad_w=2 stride=1 groups=24 dtype=bf16"]


@requires_gpu
def test_the_bf16_kernels_verify_on_small_odd_layers_or_refuse_them(tmp_path):
    kernels = {k.name: k for k in load_family(FEW) + load_family(GROUPED)}
    tolerance = max(map(verify_tolerance, kernels.values()))
    assert tolerance > 1e-3, "bf16's tolerance"
    for problem, frame in profile_layers(tmp_path, GPU_LAYERS, ",".join(kernels)):
        assert_served_rows_verify(problem, frame, kernels, limit=tolerance)
