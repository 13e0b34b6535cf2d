"""The rows-mode few-channels family that stores its tiles packed (first layers whose K is no
multiple of 8: R(2+1)D-18's 3 -> 45 stem): its spec, the layers it serves and refuses (the
profiler's `unsupported`, mirrored for the cost model), its packed store run on the CPU against
where each output element belongs, the kernels compiled through the rendering, and on a GPU the
kernels verified on small odd layers."""

import subprocess

import pytest

from conftest import ROOT, assert_family_refused, assert_family_verifies, assert_kernels_compile, requires_gpu, requires_nvcc
from kernelgen import cost_model
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family
from test_packed import FAMILY as PACKED_FAMILY

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_rows_packed.toml"
PREFIX = "kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_few_channels_rows_packed_"
FAMILY = PACKED_FAMILY.replace('"conv2d_fprop_packed"', '"conv2d_fprop_rows_packed"')


def test_the_committed_spec_builds_rows_kernels_named_by_tile_reduction_staged_warps_and_blocks():
    kernels = load_family(SPEC)
    assert {k.name for k in kernels} == {PREFIX + "128x48_k224_staged2560_warps4x1_blocks3",
                                         PREFIX + "128x64_k224_staged2560_warps4x1_blocks2",
                                         PREFIX + "256x48_k224_staged3072_warps8x1_blocks2"}
    assert all(k.mode == "rows" and k.includes == ("conv_rows_packed.h",) and k.adapter_header == "few_channels_adapter.h"
               for k in kernels)
    assert {k.values()["type"] for k in kernels} == {"FewChannelsRowsPackedFprop"}


@pytest.mark.parametrize("entry, key, message", [
    ("{ tile = [128, 40], warps = [4, 1], reduction = 224, staged = 2560, blocks = 3 }", "tile", "16 x 16 blocks"),
    ("{ tile = [128, 48], warps = [4, 1], reduction = 224, blocks = 3 }", "staged", "needs staged"),
    ("{ tile = [128, 48], warps = [4, 1], reduction = 224, staged = 2561, blocks = 3 }", "staged", "odd"),
    ("{ tile = [128, 48], warps = [4, 1], reduction = 224, staged = 60000, blocks = 1 }", "staged", "shared memory"),
    ('{ mode = "im2col", tile = [128, 48], warps = [4, 1], reduction = 224, staged = 2560, blocks = 3 }', "mode",
     "unknown key"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "conv2d_fprop_rows_packed.toml"
    path.write_text(FAMILY.format(entry=entry))
    assert_family_refused(path, "kernels[0]", key, message)


# (layer, the kernel, the refusal's words or None where it computes the layer)
SERVED = [
    (Conv2dProblem(128, 112, 112, 3, 45, 7, 7, 3, 3, 2, 2), "128x48", None),  # R(2+1)D-18's stem
    (Conv2dProblem(128, 112, 112, 3, 45, 7, 7, 3, 3, 2, 2), "256x48", None),
    (Conv2dProblem(8, 32, 32, 4, 13, 3, 3, 1, 1), "128x64", None),
    (Conv2dProblem(8, 32, 32, 3, 50, 7, 7, 3, 3, 2, 2), "128x48", "at most 48 output channels"),
    (Conv2dProblem(8, 32, 32, 3, 50, 7, 7, 3, 3, 2, 2), "128x64", None),
    (Conv2dProblem(8, 32, 32, 3, 48, 7, 7, 3, 3, 2, 2), "128x64", "multiple of 8"),
    (Conv2dProblem(8, 32, 32, 8, 45, 3, 3, 1, 1), "128x48", "1 to 4 input channels"),
    (Conv2dProblem(8, 32, 32, 3, 45, 9, 9, 4, 4), "128x48", "exceeds the kernel's 224"),
    (Conv2dProblem(1, 8, 2000, 3, 45, 7, 7, 3, 3, 2, 2), "128x48", "stages at most 2560"),
]


@pytest.mark.parametrize("layer, kernel, words", SERVED)
def test_the_cost_model_serves_the_layers_the_kernel_takes(layer, kernel, words):
    (k,) = [k for k in load_family(SPEC) if f"_rows_packed_{kernel}_" in k.name]
    why = cost_model.serves(k, layer)
    assert why is None if words is None else words in why, why


# The packed store on the CPU, each thread's share in turn: every element of the run is its pixel's
# channel, each written once, and nothing around the run touched; runs starting and ending anywhere
# in the 16-byte grid, of one pixel and of a whole tile, K of 1 to 47.
STORE_CHECK = r"""
#include <cstdio>
#include <vector>

#include "conv_rows_packed.h"

int check(int k, int count, long long pixel0, int stride, int threads) {
  std::vector<__half> staging(size_t(count) * stride);
  for (size_t i = 0; i < staging.size(); ++i) staging[i] = __float2half(float(i % 2039));
  const long long base = pixel0 * k, size = base + (long long)count * k + 64;
  std::vector<__half> y(size, __float2half(-1.0f));
  for (int t = 0; t < threads; ++t) kernelgen::rows_packed::store_packed(staging.data(), stride, k, count, base, y.data(), t, threads);
  int bad = 0;
  for (long long at = 0; at < size; ++at) {
    float want = -1.0f;
    if (at >= base && at < base + (long long)count * k) {
      const long long m = (at - base) / k, j = (at - base) % k;
      want = float((m * stride + j) % 2039);
    }
    bad += __half2float(y[at]) != want;
  }
  std::printf("%d %d %lld %d\n", k, count, pixel0, bad);
  return bad != 0;
}

int main() {
  int bad = 0;
  const int ks[] = {1, 3, 7, 13, 45, 47};
  const int counts[] = {1, 5, 128};
  const long long pixels[] = {0, 1, 3, 7, 128, 1000};
  for (int k : ks)
    for (int count : counts)
      for (long long pixel0 : pixels) bad += check(k, count, pixel0, 56, 128);
  return bad;
}
"""


@requires_nvcc
def test_the_packed_store_writes_each_element_of_the_run_once_and_nothing_around_it(tmp_path):
    source = tmp_path / "store_check.cu"
    source.write_text(STORE_CHECK)
    binary = tmp_path / "store_check"
    out = subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'profiler'}", "-o", str(binary), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 6 * 3 * 6, run.stdout[-3000:]


@requires_nvcc
def test_the_committed_kernels_compile_for_sm90a_through_the_rendering(tmp_path):
    """The device code of each kernel, and the static_asserts that the spec's shared memory and
    threads are the kernel's."""
    assert_kernels_compile(tmp_path, load_family(SPEC))


# Small layers of C = 1 to 4 and K no multiple of 8, each computed by every kernel that the cost
# model says serves it (ok, verified against the reference) and refused by the others: partial
# pixel tiles, odd K of one slice, a 7x7 stride-2 stem, padding, and K a multiple of 8 (refused).
LAYERS = ["n=2 h=23 w=19 c=3 k=45 r=7 s=7 pad=3 stride=2", "n=3 h=9 w=13 c=1 k=13 r=3 s=3 pad=1",
          "n=2 h=16 w=16 c=4 k=47 r=5 s=5 pad=2", "n=1 h=7 w=7 c=2 k=3 r=1 s=1",
          "n=2 h=17 w=9 c=3 k=50 r=3 s=3 stride=2", "n=2 h=8 w=8 c=3 k=48 r=3 s=3 pad=1"]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    assert_family_verifies(tmp_path, SPEC, LAYERS, 10)
