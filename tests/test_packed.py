"""The packed 1x1 conv2d fprop family (layers whose C or K is no multiple of 8), its kernels that
build the A tile from global memory and the pipelined ones (`stages`): its spec, the layers it
serves and refuses (the profiler's `unsupported`, mirrored for the cost model), its shared memory,
the kernels compiled through the rendering, and on a GPU the kernels verified on small odd layers
and on layers of more tiles than a CTA's ring of staging buffers."""

import subprocess

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


def test_the_committed_spec_builds_kernels_named_by_tile_reduction_warps_blocks_and_stages():
    kernels = load_family(SPEC)
    plain = [k for k in kernels if k.stages == 1]
    assert {k.name for k in plain} == {PREFIX + "64x64_k320_warps2x2_blocks4", PREFIX + "128x64_k128_warps4x1_blocks4",
                                       PREFIX + "128x128_k256_warps4x2_blocks2",
                                       PREFIX + "64x192_k128_warps2x4_blocks2", PREFIX + "64x256_k128_warps2x4_blocks2"}
    assert all(k.includes == ("conv_packed.h",) and k.values()["type"] == "PackedPointwiseFprop" and "stages" not in k.values()
               for k in plain)
    pipelined = [k for k in kernels if k.stages > 1]
    shapes = ("64x64_k320_warps2x2_blocks2_stages2", "64x64_k192_warps2x2_blocks4_stages3",
              "128x64_k128_warps4x1_blocks2_stages3", "32x96_k384_warps2x2_blocks2_stages2",
              "64x192_k128_warps2x4_blocks2_stages2", "64x256_k128_warps2x4_blocks2_stages2",
              "128x16_k128_warps4x1_blocks4_stages3")
    assert {k.name for k in pipelined} == {PREFIX + s for s in shapes} | {
        PREFIX.replace("_sm80_", "_sm90_") + s + "_pdl" for s in shapes}  # each of both launches
    assert all(k.includes == ("conv_packed_pipelined.h",) and k.values()["type"] == "PackedPipelinedFprop"
               and k.values()["stages"] == k.stages and k.values()["pdl"] == (k.launch == "pdl") for k in pipelined)
    assert all(k.adapter_header == "few_channels_adapter.h" and k.arch == (90 if k.launch == "pdl" else 80)
               for k in kernels)


@pytest.mark.parametrize("bm, bn, reduction, expected", [
    (64, 64, 320, 2 * (64 * 328 + 64 * 328)),     # the A tile holds the reduction
    (64, 256, 128, 2 * (256 * 136 + 64 * 264)),  # the staging buffer [64 x (256 + 8)] is wider
])
def test_shared_memory_counts_the_filter_slice_and_the_tile_that_stages_the_output(bm, bn, reduction, expected):
    assert packed.shared_bytes(bm, bn, reduction) == expected


def test_a_pipelined_kernel_adds_its_staging_buffers_of_a_tiles_run_and_one_piece():
    (k,) = [k for k in load_family(SPEC) if k.name.endswith("_packed_64x64_k192_warps2x2_blocks4_stages3_pdl")]
    assert k.shared_bytes == packed.shared_bytes(64, 64, 192) + 3 * 2 * (64 * 192 + 8)
    assert packed.staged_halves(64, 162) == 64 * 162 + 8 and packed.staged_halves(32, 27) == 32 * 27 + 8

@pytest.mark.parametrize("entry, key, message", [
    ("{ tile = [64, 48], warps = [2, 2], reduction = 128, blocks = 2 }", "tile", "16 x 16 blocks"),
    ("{ tile = [64, 64], warps = [2, 2], reduction = 120, blocks = 2 }", "reduction", "multiple of 16"),
    ("{ tile = [128, 256], warps = [2, 4], reduction = 128, blocks = 2 }", "blocks", "registers"),
    ("{ tile = [128, 128], warps = [4, 2], reduction = 512, blocks = 1 }", "reduction", "shared memory"),
    ('{ mode = "rows", tile = [64, 64], warps = [2, 2], reduction = 128, blocks = 2 }', "mode", "unknown key"),
    ("{ tile = [64, 64], warps = [2, 2], reduction = 128, blocks = 2, stages = 5 }", "stages", "5 is outside [1, 4]"),
    ("{ tile = [64, 64], warps = [2, 2], reduction = 128, blocks = 2, stages = 0 }", "stages", "0 is outside [1, 4]"),
    # the staging buffers count: 64x64 k320 takes 83,968 bytes alone, 248,864 with three buffers
    ("{ tile = [64, 64], warps = [2, 2], reduction = 320, blocks = 2, stages = 3 }", "reduction", "shared memory"),
    ('{ tile = [64, 64], warps = [2, 2], reduction = 320, blocks = 4, launch = "pdl" }', "launch", "pipelined kernels'"),
    ('{ tile = [64, 64], warps = [2, 2], reduction = 192, blocks = 4, stages = 2, launch = "graph" }', "launch", "graph"),
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
    (Conv2dProblem(32, 14, 14, 366, 72, 1, 1), "32x96_k384", None),  # pipelined: the same refusals
    (Conv2dProblem(32, 14, 14, 386, 72, 1, 1), "32x96_k384", "more than the kernel's 384"),
    (Conv2dProblem(32, 56, 56, 162, 38, 1, 1), "64x64_k192_warps2x2_blocks4_stages3", None),
    (Conv2dProblem(32, 56, 56, 162, 38, 3, 3, 1, 1), "64x64_k192_warps2x2_blocks4_stages3", "1x1 filters"),
]


@pytest.mark.parametrize("layer, kernel, words", SERVED)
def test_the_cost_model_serves_the_layers_the_kernel_takes(layer, kernel, words):
    (k,) = [k for k in load_family(SPEC) if f"_packed_{kernel}_" in k.name + "_" and (k.stages > 1) == (
        "stages" in kernel or kernel.startswith("32x96")) and k.launch == "stream"]
    why = cost_model.serves(k, layer)
    assert why is None if words is None else words in why


def test_a_packed_kernel_is_counted_over_the_layers_reduction_not_the_most_it_holds():
    (k,) = [k for k in load_family(SPEC) if "_packed_64x192_" in k.name and k.stages == 1]
    mma, tiles = (cost_model.FEATURES.index(f) for f in ("mma", "tiles"))
    narrow, wide = (cost_model.features(k, Conv2dProblem(32, 56, 56, c, 162, 1, 1), 132) for c in (27, 95))
    assert narrow[tiles] == wide[tiles]
    assert wide[mma] == pytest.approx(narrow[mma] * 96 / 32), "27 -> 32 columns, 95 -> 96"


# The pipelined kernels' A rows, built on the CPU from a staged run as a CTA builds them
# (packed_pipelined::build_rows, its threads' pieces in turn): each row is its pixel's C inputs,
# then zeros to the reduction; rows past the tile's pixels are zero. C of every place a row starts
# in the 16-byte grid (odd C: 8 rows walk all 8), partial tiles, C of one piece and of many.
BUILD_ROWS_CHECK = r"""
#include <cstdio>
#include <vector>

#include "conv_packed_pipelined.h"

int check(int bm, int rows, int c, int reduction, int step) {
  const int fstride = reduction + 8, staged = kernelgen::packed_pipelined::staged_halves(bm, c);
  std::vector<uint4> run_storage(staged / 8), tile_storage(bm * fstride / 8);
  __half* run = reinterpret_cast<__half*>(run_storage.data());
  __half* tile = reinterpret_cast<__half*>(tile_storage.data());
  for (int e = 0; e < staged; ++e) run[e] = __float2half(float(e % 2039 + 1));  // never 0
  for (int e = 0; e < bm * fstride; ++e) tile[e] = __float2half(-1.0f);
  for (int i = 0; i < step; ++i) kernelgen::packed_pipelined::build_rows(run, rows, bm, c, reduction, tile, fstride, i, step);
  int bad = 0;
  for (int m = 0; m < bm; ++m)
    for (int h = 0; h < reduction; ++h) {
      const float want = m < rows && h < c ? __half2float(run[m * c + h]) : 0.0f;
      bad += __half2float(tile[m * fstride + h]) != want;
    }
  std::printf("%d %d %d %d %d\n", bm, rows, c, reduction, bad);
  return bad != 0;
}

int main() {
  int bad = 0;
  const int cases[][4] = {{64, 64, 162, 176}, {64, 37, 162, 176}, {64, 64, 27, 32}, {32, 32, 366, 384},
                          {32, 5, 367, 384}, {64, 64, 300, 304}, {128, 100, 5, 16}, {64, 64, 8, 16},
                          {64, 1, 13, 16}, {64, 64, 95, 96}, {64, 64, 61, 64}, {16, 16, 1, 16}};
  for (const auto& k : cases) bad += check(k[0], k[1], k[2], k[3], 128) + check(k[0], k[1], k[2], k[3], 1);
  return bad;
}
"""


@requires_nvcc
def test_a_pipelined_ctas_a_rows_are_its_pixels_inputs_padded_with_zeros_on_the_cpu(tmp_path):
    source, binary = tmp_path / "build_rows.cu", tmp_path / "build_rows"
    source.write_text(BUILD_ROWS_CHECK)
    out = subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'profiler'}", "-o", str(binary), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 24, run.stdout


@requires_nvcc
def test_the_committed_kernels_compile_for_sm90a_through_the_rendering(tmp_path):
    """The device code of each kernel, and the static_asserts that the spec's shared memory and
    threads are the kernel's."""
    assert_kernels_compile(tmp_path, load_family(SPEC))


# Small odd layers, each computed by every kernel that the cost model says serves it (ok, verified
# against the reference) and refused by the others (`unsupported`): partial pixel tiles, odd C and
# odd K, K over a slice (the 64-channel slices of 162, 228 and 263: 4-byte and 2-byte stores), K
# within one (the tile's contiguous run, its last piece partial), C of one chunk and of several,
# channels multiples of 8, and a layer no kernel takes (a 3x3 filter); and layers of more tiles
# than the CTAs (a pipelined CTA's ring of staging buffers reused in turn; the tensor's last piece
# partial: 1,568 tiles of 64 pixels of 162 channels, odd K in slices).
LAYERS = ["n=2 h=7 w=9 c=27 k=162 r=1 s=1", "n=3 h=5 w=11 c=38 k=228 r=1 s=1", "n=1 h=9 w=9 c=13 k=37 r=1 s=1",
          "n=2 h=6 w=7 c=5 k=263 r=1 s=1", "n=2 h=8 w=8 c=162 k=38 r=1 s=1", "n=1 h=3 w=5 c=300 k=61 r=1 s=1",
          "n=2 h=4 w=4 c=8 k=12 r=1 s=1", "n=2 h=4 w=4 c=64 k=64 r=1 s=1", "n=2 h=6 w=6 c=27 k=30 r=3 s=3 pad=1",
          "n=32 h=56 w=56 c=162 k=38 r=1 s=1", "n=16 h=28 w=29 c=61 k=367 r=1 s=1", "n=9 h=14 w=15 c=366 k=73 r=1 s=1"]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    assert_family_verifies(tmp_path, SPEC, LAYERS, 20)
