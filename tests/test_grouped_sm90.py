"""Grouped convolutions by CUTLASS 3.x SM90 conv kernels, a dense convolution a group
(site_scons/kernelgen/families/conv2d_sm90_grouped.py, profiler/grouped_adapter_3x.h): the spec's
checks name file, entry and key; a kernel serves the grouped layers whose groups' channels are
multiples of 8; the cost model counts each group's tiles; on a GPU every kernel computes the odd
grouped layers it serves (verified against the reference) and refuses the others."""

import math

import pytest

from conftest import (ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu,
                      sm90_conv_family)
from kernelgen.cost_model import FEATURES, features, serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_sm90_grouped.toml"
FAMILY = sm90_conv_family("conv2d_fprop_sm90_grouped", tiles="[[128, 64, 64]]")


@pytest.mark.parametrize("old, new, entry, key, message", [
    ("[[128, 64, 64]]", "[[96, 64, 64]]", "tiles[0]", None, "tile M 96 is not a multiple of 64"),
    ('epilogue = "tma"', 'epilogue = "tma"\nstages = 9', None, "stages", "outside [0, 8]"),
    ("[[1, 1, 1]]", "[[3, 1, 1]]", "clusters[0]", None, "3"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, old, new, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(old, new))
    assert_family_refused(path, entry, key, message)


def kernels():
    return load_family(SPEC)


def test_a_kernel_serves_grouped_layers_of_groups_of_multiples_of_8_channels():
    kernel = kernels()[0]
    regnet = Conv2dProblem(32, 56, 56, 224, 224, 3, 3, 1, 1, groups=4)  # 56 channels a group
    resnext = Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32)  # 8
    doubling = Conv2dProblem(32, 14, 14, 64, 128, 3, 3, 1, 1, groups=2)  # 32 in, 64 out
    assert serves(kernel, regnet) is None and serves(kernel, resnext) is None and serves(kernel, doubling) is None
    narrow = Conv2dProblem(32, 56, 56, 128, 128, 3, 3, 1, 1, groups=32)  # 4
    assert serves(kernel, narrow) == "C/groups and K/groups must be multiples of 8"
    assert serves(kernel, Conv2dProblem(32, 14, 14, 96, 96, 3, 3, 1, 1, groups=96)) == \
        "C/groups and K/groups must be multiples of 8"
    assert "not for conv2d_fprop" in serves(kernel, Conv2dProblem(32, 56, 56, 224, 224, 3, 3, 1, 1))
    assert all(k.op == "conv2d_fprop_grouped" and not k.fusible and k.name.endswith("_groupwise") for k in kernels())


def test_the_model_counts_each_groups_tiles_and_the_rounds_of_launches():
    """36 groups of 56 channels under tiles of 64 output channels: 36 column tiles (the layer's
    2016 channels would be 32 tiles of 64), launched 8 at a time (5 rounds)."""
    layer = Conv2dProblem(32, 14, 14, 2016, 2016, 3, 3, 1, 1, stride_h=2, stride_w=2, groups=36)
    by_tile = {(k.tile, k.cluster): k for k in kernels()}
    f = dict(zip(FEATURES, features(by_tile[((128, 64, 64), (1, 1, 1))], layer, 132)))
    rows = math.ceil(32 * 7 * 7 / 128)
    assert f["tiles"] == math.ceil(rows * 36 / 132)  # waves of the groups' tiles together
    assert f["launch"] == 5
    f2 = dict(zip(FEATURES, features(by_tile[((128, 64, 64), (2, 1, 1))], layer, 132)))
    assert f2["tiles"] == math.ceil((rows + rows % 2) * 36 / 132)  # a cluster of 2 rounds the rows up


# Small odd grouped layers: groups of 8, 16, 24, 48, 56, 64 and 120 channels, partial tiles,
# stride 2, a non-square image, K/groups other than C/groups, a 1x1 grouped layer; groups of 4
# (refused).
LAYERS = [
    "n=2 h=9 w=11 c=112 k=112 r=3 s=3 pad=1 stride=1 groups=2",
    "n=2 h=10 w=10 c=224 k=224 r=3 s=3 pad=1 stride=2 groups=4",
    "n=1 h=7 w=13 c=144 k=144 r=3 s=3 pad=1 stride=1 groups=6",
    "n=2 h=8 w=8 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=6 w=7 c=128 k=128 r=3 s=3 pad=1 stride=2 groups=8",
    "n=2 h=5 w=9 c=256 k=128 r=1 s=1 groups=8",
    "n=1 h=9 w=9 c=128 k=256 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=9 w=10 c=240 k=240 r=3 s=3 pad=1 stride=2 groups=2",
    "n=3 h=15 w=15 c=1008 k=1008 r=3 s=3 pad=1 stride=2 groups=18",
    "n=2 h=8 w=8 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=32",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_refuses_the_others(tmp_path):
    by_name = {k.name: k for k in kernels()}
    for problem, frame in profile_layers(tmp_path, LAYERS, "*_groupwise"):
        assert_served_rows_verify(problem, frame, by_name)


def test_the_models_rounds_of_launches_are_the_adapters_streams():
    """The cost model counts a layer's launches in rounds of the adapter's streams (its
    kStreams, profiler/grouped_adapter_3x.h): the two numbers are one."""
    import re

    from kernelgen.families.conv2d_sm90_grouped import STREAMS

    header = (ROOT / "profiler" / "grouped_adapter_3x.h").read_text()
    assert re.findall(r"static constexpr int kStreams = (\d+);", header) == [str(STREAMS)]
