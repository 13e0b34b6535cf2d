"""The depthwise family on tensor cores (profiler/depthwise_mma.h,
site_scons/kernelgen/families/depthwise_mma.py): its spec checks refuse entries the kernel cannot
build, naming file, entry and key; which layers it serves; each committed kernel's warps, on a CPU
model with the kernel's own index functions and mma.sync as the PTX ISA defines it, compute small odd
layers exactly; on a GPU every kernel computes them (verified) or refuses them with the reason."""

import subprocess

import pytest

from conftest import ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen.cost_model import serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_mma.toml"
FIRST = "{ filter = 7, rows = 14, columns = 16, channel_vectors = 4, threads = 128 }"
FAMILY = f"""\
kind = "depthwise_mma"
description = "test"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""


@pytest.mark.parametrize("entry, key, message", [
    ("{ filter = 7, rows = 7, columns = 16, channel_vectors = 4 }", "rows", "rows 7: a tile is pairs of output rows"),
    ("{ filter = 7, rows = 8, columns = 12, channel_vectors = 4 }", "columns",
     "columns 12: a tile is blocks of 8 output columns"),
    ("{ filter = 7, rows = 8, columns = 16, channel_vectors = 8, threads = 128 }", "channel_vectors",
     "4 warps do not divide among 8 channel vectors"),
    ("{ filter = 7, rows = 8, columns = 56, channel_vectors = 8, stages = 2 }", "stages",
     "2 stages of the tile's window and taps need 236672 bytes of shared memory, more than 232448"),
    ("{ filter = 3, rows = 8, columns = 136, channel_vectors = 2 }", "columns", "136 is outside [8, 128]"),
    ("{ filter = 9, rows = 8, columns = 16, channel_vectors = 4 }", "filter", "9 is not one of 3, 5, 7"),
    ("{ filter = 3, rows = 8, columns = 16, channel_vectors = 1 }", "channel_vectors", "1 is not one of 2, 4, 8"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, entry))
    assert_family_refused(path, "kernels[0]", key, message)


def test_a_kernel_serves_depthwise_layers_of_its_filter_at_stride_1():
    kernel = next(k for k in load_family(SPEC) if k.filter == 7)
    assert kernel.name.startswith("kernelgen_sm90_tensorop_dwconv_f16nhwc") and kernel.arch == 90
    def layer(c=384, k=384, r=7, stride=1, dilation=1):
        return Conv2dProblem(32, 14, 14, c, k, r, r, r // 2, r // 2, stride, stride, dilation, dilation, groups=c)

    assert serves(kernel, layer()) is None
    assert serves(kernel, layer(stride=2)) == "built for stride 1"
    assert serves(kernel, layer(dilation=2)) == "built for dilation 1"
    assert serves(kernel, layer(r=5)) == "built for 7x7 filters"
    assert serves(kernel, layer(c=36, k=36)) == "C must be a multiple of 8"
    assert serves(kernel, layer(k=768)) == "a depthwise kernel: needs groups = C = K"


# Small odd layers: partial tiles along rows, columns and channels (C not a multiple of a block),
# padding other than the filter's half, one image row, an image narrower than a unit.
LAYERS = [
    "n=2 h=15 w=13 c=40 k=40 r=7 s=7 pad=3 stride=1 groups=40",
    "n=1 h=9 w=31 c=96 k=96 r=7 s=7 pad=3 stride=1 groups=96",
    "n=2 h=7 w=7 c=24 k=24 r=7 s=7 pad=3 stride=1 groups=24",
    "n=1 h=12 w=10 c=72 k=72 r=5 s=5 pad=2 stride=1 groups=72",
    "n=1 h=10 w=9 c=56 k=56 r=5 s=5 pad=1 stride=1 groups=56",
    "n=2 h=17 w=19 c=48 k=48 r=3 s=3 pad=1 stride=1 groups=48",
    "n=1 h=1 w=20 c=32 k=32 r=3 s=3 pad=1 stride=1 groups=32",
    "n=1 h=6 w=5 c=136 k=136 r=3 s=3 pad=0 stride=1 groups=136",
]


@requires_nvcc
def test_every_kernel_computes_odd_layers_exactly_on_a_cpu_model_of_its_warps(tmp_path):
    """tests/depthwise_mma_model.cu: each committed kernel's tiles, warps, mma tiles and filter rows on
    the CPU, through the kernel's own index functions: every output exact (small integers)."""
    from kernelgen.workloads import parse_workloads

    kernels = load_family(SPEC)
    shapes = sorted({(k.filter, k.filter, k.rows, k.columns, k.channel_vectors, k.threads // 32)
                     for k in kernels})
    (tmp_path / "shapes.h").write_text("#define SHAPES(X) " + " ".join(f"X{s}" for s in shapes) + "\n")
    build = subprocess.run(["nvcc", "-std=c++17", "-O1", f"-I{ROOT / 'profiler'}", f"-I{tmp_path}", "-o",
                            str(tmp_path / "model"), str(ROOT / "tests" / "depthwise_mma_model.cu")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-5000:]
    for problem in parse_workloads("".join(f"conv2d_fprop {line}\n" for line in LAYERS)):
        out = subprocess.run([str(tmp_path / "model"), *map(str, (problem.n, problem.h, problem.w, problem.c,
                                                                  problem.r, problem.pad_h))],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        lines = [line.split() for line in out.stdout.splitlines()]
        assert sorted(tuple(map(int, shape)) for *shape, _ in lines) == [s for s in shapes if s[0] == problem.r]
        for *shape, worst in lines:
            assert float(worst) == 0, (problem.name, shape, worst)


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm90_tensorop_dwconv_f16*"):
        assert_served_rows_verify(problem, frame, kernels)
