"""CUTLASS 2.x GEMMs running 1x1 convolutions transposed (site_scons/kernelgen/families/conv2d_gemm_2x.py,
profiler/gemm_adapter_2x.h): spec errors name file, entry and key; the name gives the tile in the
GEMM's terms (output channels by pixels) while the descriptor keeps it as the conv kernels do
(pixels by output channels); a kernel serves 1x1 stride-1 unpadded layers whose C and K its
alignment divides, and is explored (measured in full) on the layers of its accesses' width until the
model has rows of it; the kernels compile as the profiler builds them; on a GPU each verifies on
the small odd layers it serves and refuses the others."""

from dataclasses import replace

import pytest

from conftest import ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates
from kernelgen.cost_model import group, load_model, serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family

FAMILIES = ROOT / "kernel_specs" / "families"
SPECS = [FAMILIES / "conv2d_fprop_sm80_gemm_transposed.toml", FAMILIES / "conv2d_fprop_sm75_gemm_transposed.toml",
         FAMILIES / "conv2d_fprop_sm80_gemm_transposed_narrow.toml"]
FAMILY = """\
kind = "conv2d_fprop_gemm_2x"
arch = 80
element = "f16"
accumulator = "f32"
output = "f16"
instruction = [16, 8, 16]
alignments = [2]
tiles = [
  { threadblock = [64, 256, 32], warps = [1, 4, 1], stages = 4 },
]
"""


@pytest.mark.parametrize("old, new, entry, key, message", [
    ("alignments = [2]", "alignments = [3]", None, "alignments", "alignment 3 must be a power of two"),
    ("alignments = [2]", "alignments = [1]", "tiles[0]", "stages",
     "alignment 1 makes 2-byte accesses; SM80 multistage mainloops copy 4, 8, 16 bytes"),
    ("arch = 80", "arch = 90", None, "arch", "90 is not one of"),
    ("warps = [1, 4, 1]", "warps = [1, 3, 1]", "tiles[0]", "warps", "3 warps along N do not divide the threadblock's 256"),
    ("threadblock = [64, 256, 32]", "threadblock = [16, 256, 32]", "tiles[0]", "threadblock",
     "a threadblock 16 wide along M (the output channels): CUTLASS 2.x tensor-op tiles take at least 32"),
    # checked as CUTLASS runs the tile (pixels as its M): a warp's 40 pixels are no multiple of the mma's M
    ("threadblock = [64, 256, 32], warps = [1, 4, 1]", "threadblock = [64, 40, 32], warps = [1, 1, 1]", "tiles[0]", "warps",
     "warp tile 40 along N is not a multiple of the instruction's 16"),
    ("stages = 4", "stages = 11", "tiles[0]", "stages", "11 is outside [2, 10]"),
    ('output = "f16"', 'output = "f16"\niterator = "optimized"', None, "iterator", "unknown key"),
])
def test_bad_specs_are_refused_naming_file_entry_and_key(tmp_path, old, new, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(old, new))
    assert_family_refused(path, entry, key, message)


def test_the_name_is_the_gemm_tile_and_the_descriptor_keeps_the_conv_tile(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY)
    kernel, = load_family(path)
    assert kernel.name == "cutlass_tensorop_f16_s16816gemm_transposed_f16_64x256_32x4_nhwc_align2"
    assert kernel.threadblock == (256, 64, 32) and kernel.warps == (4, 1, 1) and kernel.gemm_tile == (64, 256, 32)
    values = kernel.values()
    # as CUTLASS runs it: device::Gemm keeps the shape when it runs the column-major D transposed
    assert values["threadblock"] == (256, 64, 32) and values["warp"] == (64, 64, 32) and values["epilogue_vector"] == 2
    assert kernel.adapter == "kernelgen::TransposedGemmOperation2x" and kernel.adapter_header == "gemm_adapter_2x.h"
    assert group(kernel) == "Conv2dFprop2x"  # weighed as the 2.x conv kernels until rows of its own


LAYERS = [  # (problem, served by an alignment-2 kernel)
    (Conv2dProblem(32, 56, 56, 162, 38, 1, 1, 0, 0), None),  # ReXNet-1.0's
    (Conv2dProblem(32, 14, 14, 95, 570, 1, 1, 0, 0), "channels not a multiple of the alignment 2"),
    (Conv2dProblem(32, 28, 28, 64, 64, 3, 3, 1, 1), "a GEMM: needs a 1x1 filter at stride 1 without padding"),
    (Conv2dProblem(32, 28, 28, 64, 64, 1, 1, 0, 0, 2, 2), "a GEMM: needs a 1x1 filter at stride 1 without padding"),
    (Conv2dProblem(32, 28, 28, 64, 64, 1, 1, 1, 1), "a GEMM: needs a 1x1 filter at stride 1 without padding"),
    (Conv2dProblem(8, 14, 14, 64, 64, 1, 1, 0, 0, groups=4), "a conv2d_fprop kernel, not for conv2d_fprop with groups=4"),
]


@pytest.mark.parametrize("problem, why", LAYERS)
def test_a_kernel_serves_1x1_stride_1_layers_its_alignment_divides(tmp_path, problem, why):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY)
    kernel, = load_family(path)
    assert serves(kernel, problem) == why


def test_the_family_is_explored_on_the_layers_of_its_accesses_width():
    """Until the model has rows of a family, each of its kernels serving a layer whose C and K take
    no wider access than its own is measured there beside the model's top k: the kernels of
    2-element accesses on 162 -> 38, those of 1 on 95 -> 570; none on 64 -> 64; those of 16-byte
    accesses on layers of at most their tile's output channels (48 -> 16 and 48 -> 32, not 48 -> 40).
    The model without rows of them is the committed one with the families taken out of its list."""
    catalog = load_catalog(FAMILIES)
    gemm = [k for k in catalog if "_gemm_transposed" in k.family]
    assert len(gemm) == 15 and {k.alignment for k in gemm} == {1, 2, 4, 8}
    fitted = load_model("nvidia_h200")  # rows of the three families since the H200 run of 2026-12-07
    model = replace(fitted, families=[f for f in fitted.families if "_gemm_transposed" not in f])
    assert {k.family for k in gemm} <= set(fitted.families)
    for problem, alignment in ((Conv2dProblem(32, 56, 56, 162, 38, 1, 1, 0, 0), 2),
                               (Conv2dProblem(32, 14, 14, 95, 570, 1, 1, 0, 0), 1)):
        proposal, = candidates.propose([problem], catalog, model, 3)
        assert {k.name for k in gemm if k.alignment == alignment} <= proposal.unranked
        assert not {k.name for k in gemm if k.alignment != alignment} & proposal.unranked
    proposal, = candidates.propose([Conv2dProblem(32, 56, 56, 64, 64, 1, 1, 0, 0)], catalog, model, 3)
    assert not proposal.unranked and not any("_gemm_transposed" in k.family for _, k in proposal.ranked)
    # 16-byte kernels: on the layers of at most their tile's output channels alone
    for k_out, tiles in ((16, {32}), (32, {32}), (40, set())):
        proposal, = candidates.propose([Conv2dProblem(32, 56, 56, 48, k_out, 1, 1, 0, 0)], catalog, model, 3)
        assert {k.gemm_tile[0] for k in gemm if k.name in proposal.unranked} == tiles
        assert all(k.alignment == 8 for k in gemm if k.name in proposal.unranked)


@requires_nvcc
def test_the_kernels_compile_as_the_profiler_builds_them(tmp_path):
    from conftest import assert_kernels_compile

    assert_kernels_compile(tmp_path, [next(k for k in load_family(spec)) for spec in SPECS])


# Small layers of C or K no multiple of 8 (and one of both), 1x1 at stride 1, a partial tile of
# pixels; a 3x3 layer and a strided one (refused).
ODD = [
    "n=2 h=7 w=9 c=38 k=18 r=1 s=1 pad=0 stride=1",
    "n=1 h=13 w=11 c=95 k=57 r=1 s=1 pad=0 stride=1",
    "n=3 h=5 w=17 c=36 k=12 r=1 s=1 pad=0 stride=1",
    "n=2 h=9 w=9 c=64 k=40 r=1 s=1 pad=0 stride=1",
    "n=1 h=9 w=9 c=38 k=18 r=3 s=3 pad=1 stride=1",
    "n=1 h=9 w=9 c=38 k=18 r=1 s=1 pad=0 stride=2",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_refuses_the_others(tmp_path):
    kernels = {k.name: k for spec in SPECS for k in load_family(spec)}
    for problem, frame in profile_layers(tmp_path, ODD, "*gemm_transposed*"):
        assert_served_rows_verify(problem, frame, kernels)
