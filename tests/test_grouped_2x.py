"""The CUTLASS 2.x grouped-convolution families (site_scons/kernelgen/families/conv2d_grouped_2x.py,
profiler/grouped_adapter_2x.h): their spec checks name file, entry and key; which layers each
kernel serves (one group a CTA: K/groups a multiple of the tile's N, C/groups of its K; whole groups a CTA: the
tile's N a multiple of K/groups; C/groups a multiple of the alignment), and on a GPU every kernel
computes exactly the small odd grouped layers it says it serves (verified against the reference)
and CUTLASS refuses the others."""

import pytest

from conftest import ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu
from kernelgen.cost_model import serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPECS = [ROOT / "kernel_specs" / "families" / f"conv2d_fprop_sm80_grouped{s}.toml" for s in ("", "_narrow")]
FIRST = '{ threadblock = [64, 32, 32], warps = [2, 1, 1], stages = 4, group_mode = "multiple", iterator = "analytic" }'
FAMILY = f"""\
kind = "conv2d_fprop_grouped_2x"
element = "f16"
accumulator = "f32"
output = "f16"
instruction = [16, 8, 16]
alignments = [8]
tiles = [
  {FIRST},
]
"""


@pytest.mark.parametrize("old, new, entry, key, message", [
    ('iterator = "analytic"', 'iterator = "optimized"', "tiles[0]", "iterator",
     "whole groups a CTA (group_mode multiple) take the analytic iterator only"),
    ('group_mode = "multiple"', 'group_mode = "some"', "tiles[0]", "group_mode", "'some' is not one of"),
    ("alignments = [8]", "alignments = [16]", None, "alignments", "alignment 16 makes 32-byte accesses"),
    ("stages = 4", "stages = 1", "tiles[0]", "stages", "outside [2, 10]"),
    ("[64, 32, 32]", "[64, 48, 32]", "tiles[0]", "threadblock", "the tile's N 48 is not a power of two"),
    ("warps = [2, 1, 1]", "warps = [3, 1, 1]", "tiles[0]", "warps", "3 warps along M do not divide"),
    ("[64, 32, 32], warps = [2, 1, 1]", "[128, 32, 32], warps = [4, 2, 1]", "tiles[0]", "threadblock",
     "the filter tile of 32x32 is 128 accesses of 8 elements, fewer than the 256 threads"),
    ("[64, 32, 32], warps = [2, 1, 1]", "[64, 32, 16], warps = [1, 1, 1]", "tiles[0]", "threadblock",
     "the tile's K 16 is 1 of the instruction's K 16 a warp; the mainloop takes an even number, at least 2"),
    ("[64, 32, 32], warps = [2, 1, 1]", "[128, 16, 32], warps = [4, 1, 1]", "tiles[0]", "threadblock",
     "a threadblock 16 wide along N"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, old, new, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(old, new))
    assert_family_refused(path, entry, key, message)


def kernel(mode, n, alignment=8):
    kernels = [k for spec in SPECS for k in load_family(spec)]
    return next(k for k in kernels if k.group_mode == mode and k.threadblock[1] == n and k.alignment == alignment)


def test_each_mode_serves_the_groups_its_tiles_hold():
    resnext = Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32)  # 8 channels a group
    wide = Conv2dProblem(32, 7, 7, 1024, 1024, 3, 3, 1, 1, groups=32)  # 32
    regnet = Conv2dProblem(32, 14, 14, 336, 336, 3, 3, 1, 1, groups=14)  # 24: no tile holds whole groups
    narrow = Conv2dProblem(32, 56, 56, 128, 128, 3, 3, 1, 1, groups=32)  # 4
    assert serves(kernel("multiple", 64), resnext) is None
    assert serves(kernel("multiple", 64), regnet) == \
        "whole groups a CTA: the tile's N 64 is not a multiple of K/groups = 24"
    assert serves(kernel("single", 32), regnet) == "one group a CTA: K/groups = 24 is not a multiple of the tile's N 32"
    assert serves(kernel("single", 32), wide) is None
    assert serves(kernel("single", 32), resnext) == \
        "one group a CTA: K/groups = 8 is not a multiple of the tile's N 32"
    assert serves(kernel("multiple", 32), narrow) == "C/groups = 4 is not a multiple of the alignment 8"
    assert serves(kernel("multiple", 32, 4), narrow) is None
    dense = Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1)
    depthwise = Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=256)
    assert "not for conv2d_fprop" in serves(kernel("single", 32), dense)
    assert serves(kernel("multiple", 32, 4), depthwise) == "C/groups = 1 is not a multiple of the alignment 4"
    # one group a CTA computes wrong results where a group's input channels are no multiple of the
    # tile's K (CUTLASS accepts the layer): 32 input and 64 output channels a group
    tiles = {tuple(k.threadblock): k for spec in SPECS for k in load_family(spec) if k.group_mode == "single"}
    doubling = Conv2dProblem(32, 14, 14, 64, 128, 3, 3, 1, 1, groups=2)
    assert serves(tiles[(64, 64, 64)], doubling) == "one group a CTA: C/groups = 32 is not a multiple of the tile's K 64"
    assert serves(tiles[(128, 64, 32)], doubling) is None


# Small odd grouped layers: groups of 4, 8, 16, 24, 32, 48, 56, 64 and 120 channels (those of 48, 56
# and 120 no tile serves: CUTLASS refuses them), partial tiles, stride 2, a non-square image,
# K/groups other than C/groups.
LAYERS = [
    "n=2 h=9 w=11 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=16",
    "n=2 h=10 w=10 c=64 k=64 r=3 s=3 pad=1 stride=2 groups=8",
    "n=1 h=7 w=13 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=8",
    "n=2 h=8 w=8 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=4",
    "n=1 h=6 w=7 c=128 k=128 r=3 s=3 pad=1 stride=2 groups=4",
    "n=2 h=5 w=9 c=256 k=128 r=1 s=1 groups=8",
    "n=1 h=9 w=9 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=2",
    "n=2 h=7 w=9 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=9 w=10 c=240 k=240 r=3 s=3 pad=1 stride=2 groups=2",
    "n=1 h=6 w=6 c=112 k=112 r=3 s=3 pad=1 stride=1 groups=2",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_cutlass_refuses_the_others(tmp_path):
    kernels = {k.name: k for spec in SPECS for k in load_family(spec)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "*_group"):
        assert_served_rows_verify(problem, frame, kernels)
