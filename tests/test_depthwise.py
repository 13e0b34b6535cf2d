"""The depthwise family (profiler/depthwise.h, site_scons/kernelgen/families/depthwise.py): its spec
checks refuse entries the kernel cannot build, naming file, entry and key; the spec's tile and shared
memory are the kernel's; on a GPU every kernel computes small odd depthwise layers (partial tiles,
partial channel blocks, padding wider than the filter's reach, one image row) or refuses them with
the reason."""

import subprocess

import pytest

from conftest import ROOT, assert_family_refused, profile_layers, requires_gpu, requires_nvcc
from kernelgen import render
from kernelgen.specs import load_family

SPECS = [ROOT / "kernel_specs" / "families" / name for name in ("depthwise.toml", "depthwise_bf16.toml")]
TEMPLATES = ROOT / "kernel_specs" / "templates"
FIRST = "{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4 }"
FAMILY = f"""\
kind = "depthwise"
description = "test"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""


@pytest.mark.parametrize("entry, key, message", [
    ("{ filter = 3, stride = 1, rows = 8, thread_rows = 3, columns = 4, channel_vectors = 4 }", "thread_rows",
     "3 is not one of 1, 2, 4, 8"),
    ("{ filter = 3, stride = 1, rows = 4, thread_rows = 8, columns = 4, channel_vectors = 4 }", "rows",
     "rows 4 in thread rows of 8 do not divide the 16 threads"),
    ("{ filter = 3, stride = 1, rows = 32, thread_rows = 1, columns = 4, channel_vectors = 4 }", "rows",
     "rows 32 in thread rows of 1 do not divide the 16 threads a CTA of 4 channel vectors has"),
    ("{ filter = 7, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 8, stages = 6 }",
     "stages", "6 stages of the tile's input and taps need 274176 bytes of shared memory, more than 232448"),
    ("{ filter = 7, stride = 2, rows = 8, thread_rows = 8, columns = 8, channel_vectors = 1 }", "columns",
     "columns 8 of a 7x7 stride-2 filter need about 308 registers a thread, more than 255"),
    ("{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, stages = 1 }",
     "stages", "1 is outside [2, 6]"),
    ("{ filter = 3, stride = 1, rows = 8, columns = 4, channel_vectors = 64 }", "channel_vectors",
     "64 is not one of"),
    ('{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, loader = "dma" }',
     "loader", "'dma'"),
    ("{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, threads = 128 }",
     "threads", "CTAs of 128 threads are a tensor-copy kernel's"),
    ('{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, loader = "tma", '
     "threads = 64 }", "threads", "64 is not one of 128, 256"),
    ('{ filter = 7, stride = 1, rows = 8, thread_rows = 4, columns = 8, channel_vectors = 4, loader = "tma", '
     "threads = 128 }", "columns", "need about 202 registers a thread, more than 168"),
    ('{ filter = 3, stride = 1, rows = 16, thread_rows = 1, columns = 4, channel_vectors = 4, loader = "tma", '
     "threads = 128 }", "rows", "rows 16 in thread rows of 1 do not divide the 8 threads"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, entry))
    assert_family_refused(path, "kernels[0]", key, message)


def test_the_defaults_and_the_name_say_the_tile(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, "{ filter = 5, stride = 2, rows = 8, columns = 2, channel_vectors = 8 }"))
    kernel, = load_family(path)
    assert (kernel.thread_rows, kernel.stages) == (1, 3)
    # 8 positions (64 / 8 channel vectors) in 8 thread rows: 1 thread column of 2 outputs
    assert kernel.thread_grid() == (8, 1) and kernel.tile_columns() == 2
    assert kernel.name.endswith("_5x5_stride2_tile8x2_t1x2_c64_s3")
    assert kernel.name.startswith("kernelgen_sm80_simt_dwconv_") and kernel.arch == 80


def test_a_tensor_copy_kernel_needs_sm90_and_its_name_says_its_loader_and_threads(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, '{ filter = 7, stride = 1, rows = 8, thread_rows = 4, columns = 4, '
                                          'channel_vectors = 4, loader = "tma", threads = 128 }'))
    kernel, = load_family(path)
    # 128 threads, 16 along C (4 vectors of 8 channels, two channels a thread): 8 along the pixels,
    # 2 rows of 4 outputs by 4 columns of 4
    assert kernel.thread_grid() == (2, 4) and kernel.tile_columns() == 16
    assert kernel.name == "kernelgen_sm90_simt_dwconv_f16nhwc_f16nhwc_f32_f16nhwc_7x7_stride1_tile8x16_t4x4_c32_s3_tma_cta128"
    assert kernel.arch == 90 and kernel.includes == ("depthwise_tma.h",)
    # three stages of a 14 x 22 pixel window of 4 vectors, and the block's taps once
    assert kernel.shared_bytes() == 3 * 14 * 22 * 4 * 16 + 49 * 4 * 16


def test_scons_list_names_both_architectures_the_family_needs(tmp_path):
    """`scons list` gives a family the architectures its kernels need: the committed depthwise
    family's tensor-copy kernels need SM90, its others SM80."""
    from kernelgen.listing import list_text
    from kernelgen.workloads import parse_workloads

    kernels = load_family(SPECS[0])
    problems = parse_workloads("conv2d_fprop n=2 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=64\n")
    line = next(l for l in list_text("odd", problems, kernels, False).splitlines() if l.startswith("depthwise "))
    assert line.split()[:3] == ["depthwise", str(len(kernels)), "80,90"], line


@requires_nvcc
def test_every_committed_kernel_type_has_the_spec_tile_and_shared_memory(tmp_path):
    """The spec's tile columns, shared memory and thread grid are the kernel's (static_asserts)."""
    templates = render.lookup(TEMPLATES)
    kernels = [k for spec in SPECS for k in load_family(spec)]
    checks = "".join(
        f"static_assert({k.name}::Shape::kQ == {k.tile_columns()} && {k.name}::Shape::kBytes == {k.shared_bytes()}"
        f" && {k.name}::Shape::kPR == {k.thread_grid()[0]} && {k.name}::Shape::kPC == {k.thread_grid()[1]},"
        f' "{k.name}");\n' for k in kernels)
    source = tmp_path / "types.cu"
    includes = sorted({header for k in kernels for header in k.includes})
    source.write_text("".join(f'#include "{header}"\n' for header in includes) + "\n"
                      + "".join(render.type_definition(templates, k) for k in kernels) + checks)
    out = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}",
                          "-c", "-o", str(tmp_path / "types.o"), str(source)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]


# Small odd depthwise layers: partial row and column tiles, C not a multiple of any tile's channels
# (24, 40, 200), one image row, padding wider than the filter's reach, a non-square image; and two
# of more tiles than a GPU runs CTAs at once, so that a tensor-copy kernel's CTA takes a run of tiles
# that spans two channel blocks (depthwise_tma.h: its taps loaded again mid-run).
LAYERS = [
    "n=3 h=13 w=17 c=24 k=24 r=3 s=3 pad=1 stride=1 groups=24",
    "n=2 h=9 w=30 c=40 k=40 r=3 s=3 pad=1 stride=2 groups=40",
    "n=2 h=11 w=6 c=200 k=200 r=5 s=5 pad=2 stride=1 groups=200",
    "n=1 h=15 w=15 c=72 k=72 r=5 s=5 pad=2 stride=2 groups=72",
    "n=2 h=7 w=9 c=136 k=136 r=7 s=7 pad=3 stride=1 groups=136",
    "n=1 h=1 w=33 c=16 k=16 r=3 s=3 pad=1 stride=1 groups=16",
    "n=2 h=6 w=5 c=8 k=8 r=3 s=3 pad=3 stride=1 groups=8",
    "n=16 h=30 w=31 c=104 k=104 r=3 s=3 pad=1 stride=1 groups=104",
    "n=8 h=29 w=27 c=136 k=136 r=7 s=7 pad=3 stride=1 groups=136",
]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for k in load_family(SPECS[0])}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm*_simt_dwconv_f16*"):
        assert sorted(frame["kernel"]) == sorted(kernels)
        for row in frame.itertuples():
            k = kernels[row.kernel]
            if (k.filter, k.stride) == (problem.r, problem.stride_h):
                assert row.status == "ok", (problem.name, row.kernel, row.message)
                assert 0 < row.rel_l2_error < 1e-3 and row.rel_max_error < 1e-3, (problem.name, row.kernel)
            else:
                assert row.status == "unsupported" and "built for" in row.message, (problem.name, row.kernel)
