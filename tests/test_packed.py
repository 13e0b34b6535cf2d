"""The packed 1x1 conv2d fprop family (layers whose C or K is no multiple of 8): its spec, the
layers it serves and refuses (the profiler's `unsupported`, mirrored for the cost model), its
shared memory, the kernels compiled through the rendering, and on a GPU the kernels verified on
small odd layers."""

import pytest

from conftest import ROOT, assert_family_refused, assert_family_verifies, assert_kernels_compile, requires_gpu, requires_nvcc
from kernelgen import cost_model
from kernelgen.families import conv2d_packed as packed
from kernelgen.specs import load_family
from kernelgen.ops.conv2d_fprop import Conv2dProblem

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_packed.toml"
PREFIX = "kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_packed_"
FAMILY = """\
kind = "conv2d_fprop_packed"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {entry},
]
"""


def test_the_committed_spec_builds_kernels_named_by_tile_reduction_warps_and_blocks():
    kernels = load_family(SPEC)
    assert {k.name for k in kernels} == {PREFIX + "64x64_k320_warps2x2_blocks4", PREFIX + "128x64_k128_warps4x1_blocks4",
                                         PREFIX + "128x128_k256_warps4x2_blocks2",
                                         PREFIX + "64x192_k128_warps2x4_blocks2", PREFIX + "64x256_k128_warps2x4_blocks2"}
    assert all(k.includes == ("conv_packed.h",) and k.adapter_header == "few_channels_adapter.h" and k.arch == 80
               for k in kernels)
    assert {k.values()["type"] for k in kernels} == {"PackedPointwiseFprop"}


@pytest.mark.parametrize("bm, bn, reduction, expected", [
    (64, 64, 320, 2 * (64 * 328 + 64 * 328)),     # the A tile holds the reduction
    (64, 256, 128, 2 * (256 * 136 + 64 * 264)),  # the staging buffer [64 x (256 + 8)] is wider
])
def test_shared_memory_counts_the_filter_slice_and_the_tile_that_stages_the_output(bm, bn, reduction, expected):
    assert packed.shared_bytes(bm, bn, reduction) == expected


@pytest.mark.parametrize("entry, key, message", [
    ("{ tile = [64, 48], warps = [2, 2], reduction = 128, blocks = 2 }", "tile", "16 x 16 blocks"),
    ("{ tile = [64, 64], warps = [2, 2], reduction = 120, blocks = 2 }", "reduction", "multiple of 16"),
    ("{ tile = [128, 256], warps = [2, 4], reduction = 128, blocks = 2 }", "blocks", "registers"),
    ("{ tile = [128, 128], warps = [4, 2], reduction = 512, blocks = 1 }", "reduction", "shared memory"),
    ('{ mode = "rows", tile = [64, 64], warps = [2, 2], reduction = 128, blocks = 2 }', "mode", "unknown key"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "conv2d_fprop_packed.toml"
    path.write_text(FAMILY.format(entry=entry))
    assert_family_refused(path, "kernels[0]", key, message)


# (layer, the kernel, the refusal's words or None where it computes the layer)
SERVED = [
    (Conv2dProblem(32, 56, 56, 27, 162, 1, 1), "64x192_k128", None),
    (Conv2dProblem(32, 56, 56, 162, 38, 1, 1), "64x64_k320", None),
    (Conv2dProblem(32, 56, 56, 162, 38, 1, 1), "64x192_k128", "more than the kernel's 128"),
    (Conv2dProblem(32, 28, 28, 24, 58, 1, 1), "64x64_k320", None),
    (Conv2dProblem(32, 28, 28, 64, 58, 1, 1), "64x64_k320", None),    # K odd alone
    (Conv2dProblem(32, 28, 28, 58, 64, 1, 1), "64x64_k320", None),    # C odd alone
    (Conv2dProblem(32, 112, 112, 16, 16, 1, 1), "128x64_k128", None),  # C and K multiples of 8 too
    (Conv2dProblem(32, 28, 28, 27, 162, 3, 3, 1, 1), "64x192_k128", "1x1 filters"),
    (Conv2dProblem(32, 28, 28, 27, 162, 1, 1, 0, 0, 2, 2), "64x192_k128", "stride 1"),
    (Conv2dProblem(32, 28, 28, 27, 162, 1, 1, 1, 1), "64x192_k128", "without padding"),
    (Conv2dProblem(40000, 240, 240, 27, 162, 1, 1), "64x192_k128", "too large"),
]


@pytest.mark.parametrize("layer, kernel, words", SERVED)
def test_the_cost_model_serves_the_layers_the_kernel_takes(layer, kernel, words):
    (k,) = [k for k in load_family(SPEC) if f"_packed_{kernel}_" in k.name]
    why = cost_model.serves(k, layer)
    assert why is None if words is None else words in why


def test_a_packed_kernel_is_counted_over_the_layers_reduction_not_the_most_it_holds():
    (k,) = [k for k in load_family(SPEC) if "_packed_64x192_" in k.name]
    mma, tiles = (cost_model.FEATURES.index(f) for f in ("mma", "tiles"))
    narrow, wide = (cost_model.features(k, Conv2dProblem(32, 56, 56, c, 162, 1, 1), 132) for c in (27, 95))
    assert narrow[tiles] == wide[tiles]
    assert wide[mma] == pytest.approx(narrow[mma] * 96 / 32), "27 -> 32 columns, 95 -> 96"


@requires_nvcc
def test_the_committed_kernels_compile_for_sm90a_through_the_rendering(tmp_path):
    """The device code of each kernel, and the static_asserts that the spec's shared memory and
    threads are the kernel's."""
    assert_kernels_compile(tmp_path, load_family(SPEC))


# Small odd layers, each computed by every kernel that the cost model says serves it (ok, verified
# against the reference) and refused by the others (`unsupported`): partial pixel tiles, odd C and
# odd K, K over a slice (the 64-channel slices of 162, 228 and 263: 4-byte and 2-byte stores), K
# within one (the tile's contiguous run, its last piece partial), C of one chunk and of several,
# channels multiples of 8, and a layer no kernel takes (a 3x3 filter).
LAYERS = ["n=2 h=7 w=9 c=27 k=162 r=1 s=1", "n=3 h=5 w=11 c=38 k=228 r=1 s=1", "n=1 h=9 w=9 c=13 k=37 r=1 s=1",
          "n=2 h=6 w=7 c=5 k=263 r=1 s=1", "n=2 h=8 w=8 c=162 k=38 r=1 s=1", "n=1 h=3 w=5 c=300 k=61 r=1 s=1",
          "n=2 h=4 w=4 c=8 k=12 r=1 s=1", "n=2 h=4 w=4 c=64 k=64 r=1 s=1", "n=2 h=6 w=6 c=27 k=30 r=3 s=3 pad=1"]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    assert_family_verifies(tmp_path, SPEC, LAYERS, 20)
