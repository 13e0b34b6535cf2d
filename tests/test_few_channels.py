"""The few-channels conv2d fprop family (first layers, C <= 4): its spec, the checks that refuse a
kernel before anything is generated, its generated source, and on a GPU the kernels verified on
small odd layers."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, assert_family_refused, build_folder, requires_gpu, requires_nvcc
from kernelgen import render, results
from kernelgen.profile import query_gpu
from kernelgen.families import conv2d_few_channels as fc
from kernelgen.variables import default_cutlass_root
from kernelgen.specs import load_catalog, load_family
from kernelgen.targets import TARGETS
from kernelgen.workloads import load_workloads, parse_workloads

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_few_channels.toml"
TEMPLATES = ROOT / "kernel_specs" / "templates"
GOLDEN = Path(__file__).parent / "golden"
PREFIX = "kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_few_channels_"
GOLDEN_KERNEL = PREFIX + "128x64_k256_warps4x2_blocks3"
GOLDEN_ROWS_KERNEL = PREFIX + "rows_256x64_k224_staged3072_warps8x1_blocks2"

FAMILY = """\
kind = "conv2d_fprop_few_channels"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  { tile = [128, 64], warps = [4, 2], reduction = 256, blocks = 3 },
  { tile = [64, 32], warps = [2, 2], reduction = 768, blocks = 2 },
  { mode = "rows", tile = [256, 64], warps = [8, 1], reduction = 224, staged = 3072, blocks = 2 },
]
"""
FIRST = "{ tile = [128, 64], warps = [4, 2], reduction = 256, blocks = 3 }"
ROWS = '{ mode = "rows", tile = [256, 64], warps = [8, 1], reduction = 224, staged = 3072, blocks = 2 }'


def write(tmp_path, text):
    path = tmp_path / "few.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_committed_spec_builds_a_handful_of_tiles_with_procedural_names():
    kernels = load_family(SPEC)
    assert [(k.mode, k.tile, k.warps, k.reduction, k.staged, k.blocks) for k in kernels] == [
        ("im2col", (128, 64), (4, 2), 256, None, 3), ("im2col", (128, 64), (2, 2), 256, None, 4),
        ("im2col", (64, 64), (2, 2), 256, None, 4), ("im2col", (128, 32), (4, 1), 256, None, 4),
        ("im2col", (128, 128), (2, 4), 256, None, 2), ("im2col", (64, 32), (2, 2), 768, None, 2),
        ("rows", (256, 64), (8, 1), 224, 3072, 2), ("rows", (256, 64), (4, 2), 224, 3072, 2),
        ("rows", (128, 32), (4, 1), 224, 2560, 4), ("rows", (128, 16), (4, 1), 224, 2560, 4),
        ("rows", (256, 16), (8, 1), 224, 3072, 2)]
    assert kernels[0].name == GOLDEN_KERNEL and kernels[6].name == GOLDEN_ROWS_KERNEL
    assert [k.name.startswith(PREFIX + "rows_") for k in kernels] == [k.mode == "rows" for k in kernels]
    assert all(k.name.startswith(PREFIX) for k in kernels)
    assert all(k.arch == 80 and not k.arch_specific for k in kernels), "mma.sync: SM80 and later, sm_90a included"
    assert all(k.shared_bytes <= TARGETS[80].shared_memory for k in kernels)
    catalog = {k.name for k in load_catalog(SPEC.parent)}
    assert {k.name for k in kernels} <= catalog


@pytest.mark.parametrize("bm, bn, reduction, expected", [
    # 2 * (bn * (reduction + 8) + bm * (max(reduction, bn) + 8)) + 16 * bm
    (128, 64, 256, 2 * (64 * 264 + 128 * 264) + 2048),
    (64, 32, 768, 2 * (32 * 776 + 64 * 776) + 1024),
    (128, 128, 48, 2 * (128 * 56 + 128 * 136) + 2048),  # the staging rows outgrow a short reduction
])
def test_shared_memory_counts_the_filter_slice_im2col_tile_staging_and_pixel_table(bm, bn, reduction, expected):
    assert fc.shared_bytes(bm, bn, reduction) == expected


@pytest.mark.parametrize("bm, bn, reduction, staged, expected", [
    # 2 * bn * (reduction + 8) + 8 * staged + 2 * bm * (bn + 8)
    (128, 64, 224, 2560, 2 * 64 * 232 + 8 * 2560 + 2 * 128 * 72),  # ResNet-50's 7x7/2: 11 rows of 230 pixels
    (64, 32, 48, 912, 2 * 32 * 56 + 8 * 912 + 2 * 64 * 40),
])
def test_rows_shared_memory_counts_the_filter_slice_staged_pixels_and_staging(bm, bn, reduction, staged, expected):
    assert fc.rows_shared_bytes(bm, bn, reduction, staged) == expected


def test_a_family_expands_its_entries_with_values_for_the_template(tmp_path):
    kernels = load_family(write(tmp_path, FAMILY))
    assert [k.name for k in kernels] == [PREFIX + "128x64_k256_warps4x2_blocks3", PREFIX + "64x32_k768_warps2x2_blocks2",
                                         GOLDEN_ROWS_KERNEL]
    assert kernels[1].values() == {"mode": "im2col", "type": "FewChannelsFprop", "bm": 64, "bn": 32, "wm": 2, "wn": 2,
                                   "reduction": 768, "staged": None, "blocks": 2, "threads": 128,
                                   "shared_bytes": 150016}
    assert kernels[2].values() == {"mode": "rows", "type": "FewChannelsRowsFprop", "bm": 256, "bn": 64, "wm": 8,
                                   "wn": 1, "reduction": 224, "staged": 3072, "blocks": 2, "threads": 256,
                                   "shared_bytes": 91136}


@pytest.mark.parametrize("text, entry, key, message", [
    (FAMILY.replace(FIRST, "{ tile = [100, 64], warps = [4, 2], reduction = 256, blocks = 3 }"),
     "kernels[0]", "tile", "does not split into 4x2 warp tiles"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 3], reduction = 256, blocks = 1 }"),
     "kernels[0]", "tile", "does not split into 4x3 warp tiles"),
    (FAMILY.replace(FIRST, "{ tile = [512, 512], warps = [8, 8], reduction = 256, blocks = 1 }"),
     "kernels[0]", "warps", "2048 threads, more than a CTA's 1024"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], reduction = 200, blocks = 3 }"),
     "kernels[0]", "reduction", "not a multiple of 16"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], reduction = 256, blocks = 9 }"),
     "kernels[0]", "blocks", "more than an SM's 2048 threads"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], reduction = 256, blocks = 4 }"),
     "kernels[0]", "blocks", "needs about 80 registers; 4 CTAs of 256 threads per SM leave it 64"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], reduction = 512, blocks = 3 }"),
     "kernels[0]", "reduction", "needs 201728 bytes of shared memory, more than SM80's 166912"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], reduction = 256, blocks = 3, stages = 2 }"),
     "kernels[0]", "stages", "unknown key"),
    (FAMILY.replace(FIRST, "{ tile = [128, 64], warps = [4, 2], blocks = 3 }"),
     "kernels[0]", "reduction", "missing required key"),
    (FAMILY.replace(FIRST, '{ tile = "big", warps = [4, 2], reduction = 256, blocks = 3 }'),
     "kernels[0]", "tile", "expected a list of 2 integers"),
    (FAMILY.replace(FIRST, "{ tile = [128, 8], warps = [4, 2], reduction = 256, blocks = 3 }"),
     "kernels[0]", "tile", "outside [16, 512]"),
    (FAMILY.replace('element = "f16"', 'element = "bf16"'), None, "element", "written for element f16, not bf16"),
    (FAMILY.replace('accumulator = "f32"', 'accumulator = "f16"'), None, "accumulator", "written for accumulator f32"),
    (FAMILY[:FAMILY.index("kernels = [")] + "kernels = []\n", None, "kernels", "non-empty list of tables"),
    (FAMILY.replace(ROWS, ROWS.replace("3072", "16384")), "kernels[2]", "staged",
     "tile 256x64 with reduction 224 and 16384 staged pixels needs 197632 bytes of shared memory, more than SM80's"),
    (FAMILY.replace(ROWS, ROWS.replace("reduction = 224", "reduction = 1024")), "kernels[2]", "staged",
     "needs 193536 bytes of shared memory"),
    (FAMILY.replace(ROWS, ROWS.replace(", staged = 3072", "")), "kernels[2]", "staged", "a rows kernel needs staged"),
    (FAMILY.replace(ROWS, ROWS.replace("3072", "3073")), "kernels[2]", "staged", "staged 3073 is odd"),
    (FAMILY.replace(ROWS, ROWS.replace("3072", "1")), "kernels[2]", "staged", "1 is outside [2, 65536]"),
    (FAMILY.replace(FIRST, FIRST.replace("blocks = 3", "staged = 2560, blocks = 3")), "kernels[0]", "staged",
     "only a rows kernel stages input rows"),
    (FAMILY.replace(ROWS, ROWS.replace('"rows"', '"columns"')), "kernels[2]", "mode",
     "'columns' is not one of im2col, rows"),
    (FAMILY.replace(ROWS, ROWS.replace('"rows"', "2")), "kernels[2]", "mode", "expected a string"),
    (FAMILY.replace(ROWS, ROWS.replace("blocks = 2", "blocks = 3")), "kernels[2]", "blocks",
     "needs about 120 registers; 3 CTAs of 256 threads per SM leave it 80"),
    (FAMILY.replace(ROWS, ROWS.replace("reduction = 224", "reduction = 200")), "kernels[2]", "reduction",
     "not a multiple of 16"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, text, entry, key, message):
    path = write(tmp_path, text)
    assert_family_refused(path, entry, key, message)


@pytest.mark.parametrize("name", [GOLDEN_KERNEL, GOLDEN_ROWS_KERNEL])
def test_kernel_source_matches_golden(name):
    kernel = next(k for k in load_family(SPEC) if k.name == name)
    text = render.kernel_source(render.lookup(TEMPLATES), kernel)
    assert text == (GOLDEN / f"{name}.cu").read_text()


def test_the_first_layers_set_holds_the_targets_of_issue_11_each_with_few_channels():
    _, _, problems = load_workloads("first_layers", ROOT / "kernel_specs" / "workloads")
    assert all(p.c <= 4 and p.k % 8 == 0 for p in problems)
    resnet = {(p.n, p.r, p.stride_h) for p in problems if (p.h, p.w, p.c, p.k) == (224, 224, 3, 64)}
    assert {(256, 7, 2), (1, 7, 2), (256, 3, 1), (1, 3, 1)} <= resnet


@requires_nvcc
def test_every_committed_kernel_type_compiles_with_the_spec_counts(tmp_path):
    """The kernels' static_asserts: the spec's shared memory and thread counts are the kernel's."""
    templates = render.lookup(TEMPLATES)
    source = tmp_path / "types.cu"
    source.write_text('#include "conv_few_channels.h"\n\n'
                      + "".join(render.type_definition(templates, k) for k in load_family(SPEC)))
    out = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}",
                          "-c", "-o", str(tmp_path / "types.o"), str(source)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]


# Small odd layers, each computed by every kernel of the family (ok, verified against the
# reference) or refused (unsupported, with a word of the reason): C = 1 to 4, partial pixel tiles
# (tiles of a rows kernel end at each image's last pixel), partial channel slices (K = 8, 40, 96),
# padding wider than the filter's reach (odd pad_w: pixels stored 8 bytes at a time), stride 1 to 4
# (odd: A fragments by 32-bit loads; even: by ldmatrix), dilation along H, a non-square image and
# filter. Rows kernels refuse dilation along W, filters whose reduction they cannot hold and images
# too wide for their staged rows.
ALL = "*"
LAYERS = {
    "n=3 h=13 w=17 c=3 k=8 r=3 s=3 pad=1 stride=1": {},
    "n=2 h=15 w=11 c=4 k=96 r=7 s=7 pad=3 stride=2": {},
    "n=2 h=20 w=23 c=3 k=64 r=5 s=5 pad=4 stride=1 dilation=2": {"rows": "dilation_w"},
    "n=1 h=32 w=36 c=3 k=32 r=4 s=4 pad=0 stride=4": {},
    "n=2 h=9 w=10 c=1 k=16 r=3 s=2 pad_h=0 pad_w=1 stride_h=2 stride_w=1": {},
    "n=1 h=48 w=32 c=3 k=40 r=16 s=16 pad=0 stride=16": {"k256": "too large", "rows": "too large"},
    "n=2 h=8 w=8 c=8 k=64 r=3 s=3 pad=1 stride=1": {ALL: "1 to 4 input channels"},
    "n=2 h=8 w=8 c=3 k=12 r=3 s=3 pad=1 stride=1": {ALL: "multiple of 8 output channels"},
    "n=2 h=12 w=14 c=2 k=40 r=5 s=5 pad=2 stride=1": {},
    "n=3 h=21 w=19 c=3 k=64 r=7 s=7 pad=3 stride=2": {},
    "n=2 h=17 w=13 c=1 k=24 r=3 s=3 pad=1 stride=3 dilation_h=2 dilation_w=1": {},
    "n=1 h=6 w=1200 c=3 k=8 r=7 s=7 pad=3 stride=1": {"rows": "too wide"},
}


def expected_refusal(layer, kernel):
    """The word the kernel's refusal of ``layer`` must hold, or None if it must compute it."""
    for part, word in LAYERS[layer].items():
        if part == ALL or f"_{part}_" in kernel:
            return word
    return None


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_and_refuses_others(tmp_path):
    kernels = sorted(k.name for k in load_family(SPEC))
    text = "".join(f"conv2d_fprop {layer}\n" for layer in LAYERS)
    workloads = tmp_path / "odd.txt"
    workloads.write_text(text)
    build = build_folder(tmp_path)
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", "profile", f"WORKLOADS={workloads}",
                          "TOP=listed", f"KERNELS={PREFIX}*", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    for layer, problem in zip(LAYERS, parse_workloads(text)):
        frame = results.read_csv(results.gpu_dir(tmp_path / "results", "odd", query_gpu()[0]) / f"{problem.name}.csv")
        assert sorted(frame["kernel"]) == kernels
        for row in frame.itertuples():
            word = expected_refusal(layer, row.kernel)
            if word is None:
                assert row.status == "ok", (layer, row.kernel, row.message)
                assert 0 < row.rel_l2_error < 1e-3 and row.rel_max_error < 1e-3, (layer, row.kernel)
            else:
                assert row.status == "unsupported" and word in row.message, (layer, row.kernel, row.message)
