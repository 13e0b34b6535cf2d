"""The generated kernel space: axes expanded into descriptors under the families' checks and the
space's constraints, with bad axes refused naming the file, the entry and the key."""

import time

import pytest

from conftest import ROOT
from kernelgen import space
from kernelgen.errors import SpecError
from kernelgen.specs import load_catalog

SPACES = ROOT / "kernel_specs" / "spaces"
FAMILIES = ROOT / "kernel_specs" / "families"
TILED = ("GemmSm90", "Conv2dFpropSm90Persistent", "Conv2dFpropSm90Transposed")


@pytest.fixture(scope="module")
def committed():
    return space.load_space(SPACES)


def test_the_space_holds_thousands_of_fp16_sm90_descriptors_enumerated_in_seconds():
    start = time.perf_counter()
    loaded = space.load_space(SPACES)
    elapsed = time.perf_counter() - start
    f16 = [k for k in loaded.kernels if k.element == "f16" and k.arch == 90]
    assert len(f16) >= 3000
    assert {type(k).__name__ for k in f16} == set(TILED), "GEMM, persistent and transposed conv kernels"
    assert elapsed < 5.0, f"{elapsed:.1f} s"


def test_every_listed_sm90_tiled_kernel_is_a_point_of_the_space(committed):
    names = {k.name for k in committed.kernels}
    # (but those of searched launch settings: the space declares no such axis)
    listed = [k for k in load_catalog(FAMILIES) if type(k).__name__ in TILED and k.element == "f16" and not k.searched]
    assert listed and [k.name for k in listed if k.name not in names] == []


def test_the_space_has_what_the_unserved_layers_need(committed):
    """Narrow N tiles, 192-wide tiles, 2-D clusters and stream-K descriptors."""
    tiles = {(type(k).__name__, k.tile[:2]) for k in committed.kernels}
    for n in (16, 32, 48):
        assert ("GemmSm90", (64, n)) in tiles and ("Conv2dFpropSm90Persistent", (64, n)) in tiles
    for m in (64, 128, 256):
        assert ("GemmSm90", (m, 192)) in tiles
    assert any(k.cluster == (2, 2, 1) for k in committed.kernels)
    assert any(k.scheduler == "stream_k" and k.splits == 2 for k in committed.kernels)


def test_the_constraints_exclude_what_cannot_build(committed):
    for k in committed.kernels:
        m, n, tk = k.tile
        per_thread = m * n // 128 // (2 if k.schedule == "cooperative" else 1)
        assert per_thread <= space.ACCUMULATOR_REGISTERS, k.name
        assert k.schedule != "cooperative" or m % 128 == 0, k.name
        assert n % 8 == 0 and n <= 256, k.name
    assert committed.excluded["accumulator registers"] > 0 and committed.excluded["shared memory"] > 0


def test_a_listed_kernel_keeps_its_family_in_the_merged_catalog(committed):
    listed = load_catalog(FAMILIES)
    merged = {k.name: k for k in space.merged(listed, committed)}
    for k in listed:
        assert merged[k.name].family == k.family
    assert len(merged) > len(listed)
    assert {k.family for k in merged.values()} >= {"gemm_sm90_space", "conv2d_fprop_sm90_transposed_space"}


HEAD = 'kind = "gemm_sm90"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\n'
AXES = ('[[axes]]\nschedule = ["pingpong"]\ntile_m = [64]\ntile_n = [64]\ntile_k = [64]\n'
        'clusters = [[1, 1, 1]]\n')
BAD_SPACES = [
    ("unknown kind", 'kind = "gemm_sm80"\n', r"key 'kind': unknown kind 'gemm_sm80'"),
    ("schedule outside the vocabulary", HEAD + AXES.replace('"pingpong"', '"fastest"'),
     r"entry axes\[0\], key 'schedule': 'fastest' is not one of cooperative, pingpong"),
    ("tile outside its range", HEAD + AXES.replace("tile_m = [64]", "tile_m = [512]"),
     r"entry axes\[0\], key 'tile_m': 512 is outside \[64, 256\]"),
    ("range running down", HEAD + AXES.replace("tile_n = [64]", "tile_n = { from = 128, to = 64 }"),
     r"key 'tile_n': the range runs from 128 down to 64"),
    ("range with an unknown key", HEAD + AXES.replace("tile_n = [64]", "tile_n = { from = 16, upto = 64 }"),
     r"key 'tile_n': a range is \{ from = A, to = B, step = C \}"),
    ("unknown axis", HEAD + AXES + "swizzle = [1]\n", r"entry axes\[0\], key 'swizzle': unknown key"),
    ("missing axis", HEAD + AXES.replace("clusters = [[1, 1, 1]]\n", ""), r"key 'clusters': missing required key"),
    ("launch outside the vocabulary", HEAD + AXES + 'launches = ["graph"]\n',
     r"key 'launches': 'graph' is not one of pdl, stream"),
    ("source outside the vocabulary", HEAD + AXES + 'source = ["d"]\n', r"key 'source': 'd' is not one of c, void"),
    ("store outside the vocabulary", HEAD + AXES + 'store = ["smem"]\n', r"key 'store': 'smem' is not one of nosmem, tma"),
    ("no axes", HEAD + "axes = []\n", r"key 'axes': expected a non-empty list of tables"),
    ("an 8-bit element", HEAD.replace('element = "f16"', 'element = "f32"') + AXES,
     "this family is written for 16-bit inputs"),
    ("not TOML", "kind = \n", "not valid TOML"),
    ("a 5000-digit tile", HEAD + AXES.replace("tile_m = [64]", "tile_m = [" + "9" * 5000 + "]"), "not valid TOML"),
    ("too many combinations", HEAD + AXES.replace("tile_n = [64]", "tile_n = { from = 8, to = 256, step = 1 }")
     .replace("tile_k = [64]", "tile_k = { from = 16, to = 256, step = 1 }")
     .replace("tile_m = [64]", "tile_m = { from = 64, to = 256, step = 1 }"),
     r"entry axes\[0\]: 11581737 combinations of its axes, more than the 200000"),
]


@pytest.mark.parametrize("text, match", [c[1:] for c in BAD_SPACES], ids=[c[0] for c in BAD_SPACES])
def test_bad_axes_are_refused_naming_the_file_entry_and_key(tmp_path, text, match):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=match) as info:
        space.expand_file(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_points_storing_from_registers_take_c_and_the_default_scheduler(tmp_path):
    """An epilogue that stores D from registers (any K) has no void source nor stream-K: such points
    are excluded and counted, the others kept, named _epi_nosmem."""
    path = tmp_path / "mine.toml"
    path.write_text(HEAD + AXES.replace('"pingpong"', '"cooperative"').replace("tile_m = [64]", "tile_m = [128]")
                    + 'source = ["c", "void"]\nscheduler = ["default", "stream_k"]\nstore = ["tma", "nosmem"]\n')
    loaded = space.expand_file(path)
    stores = sorted((k.store, k.source or "", k.scheduler) for k in loaded.kernels)
    assert stores == [("nosmem", "", "default"), ("tma", "", "default"), ("tma", "", "stream_k"),
                      ("tma", "void", "default"), ("tma", "void", "stream_k")]
    assert [k.name.endswith("_epi_nosmem") for k in loaded.kernels].count(True) == 1
    assert sum(n for reason, n in loaded.excluded.items() if reason.startswith('store = "nosmem"')) == 3


def test_an_axes_table_whose_every_point_fails_a_check_is_empty_and_says_why(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(HEAD + AXES.replace('"pingpong"', '"cooperative"'))  # cooperative needs M % 128
    loaded = space.expand_file(path)
    assert loaded.kernels == [] and loaded.candidates == 1
    assert list(loaded.excluded) == ["a cooperative tile's M must be a multiple of N, not N"]
