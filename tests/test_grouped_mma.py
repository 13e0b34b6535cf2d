"""The grouped tensor-core family (profiler/grouped_mma.h, site_scons/kernelgen/families/grouped_mma.py):
its spec checks name file, entry and key; which layers each kernel serves (4 to 64 channels a group
in and out, 3x3, its stride, the input window of all C channels within 227 KiB of shared memory), the
same answer from the C++ kernel's can_implement; and on a GPU every kernel computes exactly the small
odd grouped layers it says it serves (verified against the reference) and refuses the others."""

import subprocess

import pytest

from conftest import ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen.cost_model import serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "grouped_mma.toml"
FIRST = "{ channels_per_group = 8, stride = 1, rows = 4, columns = 16 }"
FAMILY = f"""\
kind = "grouped_mma"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""


@pytest.mark.parametrize("old, new, key, message", [
    ("channels_per_group = 8", "channels_per_group = 12", "channels_per_group", "12 is not one of"),
    ("columns = 16", "columns = 24", "columns", "24 is not one of"),
    ("stride = 1", "stride = 3", "stride", "3 is not one of"),
    ("rows = 4", "rows = 3", "rows", "3 is not one of"),
    ("columns = 16", 'columns = 16, window = "odd"', "window", "'odd' is not one of parity, plain"),
    ("columns = 16", 'columns = 16, window = "parity"', "window", "a window split by column parity serves stride 2 only"),
    ("rows = 4, columns = 16", "rows = 1, columns = 8", "rows", "1 rows is not a whole number of them"),
    ("columns = 16", "columns = 16, max_channels = 96", "max_channels", "96 is not one of"),
    ("channels_per_group = 8", "channels_per_group = 16, max_channels = 64", "max_channels",
     "a slice of 64 channels is not whole groups of 16 and a unit of 16 output channels for each of the 8 warps"),
    ("columns = 16", 'columns = 16, schedule = "pipelined"', "schedule", "a pipelined kernel computes a slice of max_channels"),
    ("stride = 1, rows = 4, columns = 16", 'stride = 2, rows = 4, columns = 16, max_channels = 256, schedule = "pipelined"',
     "schedule", "two windows of 256 channels need 313632 bytes of shared memory, more than 232448"),
    ("columns = 16", 'columns = 16, schedule = "spread"', "units", "it needs them"),
    ("columns = 16", "columns = 16, units = 2", "units", "units (the units of output channels a CTA computes) is the spread"),
    ("columns = 16", 'columns = 16, schedule = "spread", units = 9', "units", "9 is not one of"),
    ("columns = 16", 'columns = 16, schedule = "spread", units = 2, max_channels = 64', "max_channels",
     "a spread kernel's slice is its units"),
    ("channels_per_group = 8", 'channels_per_group = 24, schedule = "spread", units = 2', "units",
     "a slice of 2 units of 8 output channels is not whole groups of 24"),
    ("columns = 16", 'columns = 16, launch = "graph"', "launch", "'graph' is not one of"),
    ("columns = 16", 'columns = 16, launch = "pdl"', "launch",
     "a programmatic dependent launch is the spread_pipelined schedule's"),
    ("columns = 16", 'columns = 16, loads = "gathered"', "loads", "'gathered' is not one of indexed, listed"),
    ("columns = 16", 'columns = 16, schedule = "spread", units = 2, loads = "listed"', "loads",
     "listed window copies are the spread_pipelined schedule's"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, old, new, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(old, new))
    assert_family_refused(path, "kernels[0]", key, message)


def test_the_name_says_the_groups_the_stride_and_the_tile(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, "{ channels_per_group = 4, stride = 2, rows = 1, columns = 32 }"))
    kernel, = load_family(path)
    assert kernel.name == "kernelgen_sm80_tensorop_gconv_f16nhwc_f16nhwc_f32_f16nhwc_g4_3x3_stride2_tile1x32"
    assert kernel.window_bytes(256) == 3 * 65 * (2 * 256 + 16)
    path.write_text(FAMILY.replace(FIRST, '{ channels_per_group = 8, stride = 2, rows = 4, columns = 16, window = "parity" }'))
    kernel, = load_family(path)
    assert kernel.name.endswith("_g8_3x3_stride2_tile4x16_parity") and kernel.window == "parity"


def test_a_sliced_kernel_says_its_most_channels_and_serves_a_layer_whose_whole_window_is_too_large(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, "{ channels_per_group = 8, stride = 1, rows = 4, columns = 16, max_channels = 128 }"))
    kernel, = load_family(path)
    assert kernel.name.endswith("_g8_3x3_stride1_tile4x16_slice128") and kernel.includes == ("grouped_mma_sliced.h",)
    whole = _kernel(8, 1)
    wide = Conv2dProblem(2, 14, 14, 4096, 4096, 3, 3, 1, 1, groups=512)
    assert serves(whole, wide).startswith("the input window of 4096 channels")
    assert serves(kernel, wide) is None and kernel.slice(wide, 0) == 128
    resnext = Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32)  # many tiles: only the most cuts it
    assert (whole.slice(resnext, 132), kernel.slice(resnext, 132)) == (256, 128)


def test_a_pipelined_kernel_computes_exactly_its_slice_and_refuses_channels_it_does_not_divide(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, '{ channels_per_group = 8, stride = 1, rows = 4, columns = 16, max_channels = 128, '
                                          'schedule = "pipelined" }'))
    kernel, = load_family(path)
    assert kernel.name.endswith("_g8_3x3_stride1_tile4x16_slice128_pipelined")
    assert kernel.includes == ("grouped_mma_pipelined.h",) and kernel.buffers == 2
    assert kernel.slice(Conv2dProblem(1, 4, 4, 1024, 1024, 3, 3, 1, 1, groups=128), 132) == 128  # few tiles: still 128
    assert serves(kernel, Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32)) is None
    assert serves(kernel, Conv2dProblem(2, 9, 9, 192, 192, 3, 3, 1, 1, groups=24)) == \
        "C must be a multiple of the slice of 128 channels"


def test_a_spread_kernel_computes_exactly_its_units_and_refuses_channels_they_do_not_divide(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, '{ channels_per_group = 16, stride = 1, rows = 4, columns = 8, '
                                          'schedule = "spread", units = 7 }'))
    kernel, = load_family(path)
    assert kernel.name.endswith("_g16_3x3_stride1_tile4x8_units7")
    assert kernel.includes == ("grouped_mma_spread.h",) and kernel.buffers == 1
    regnet = Conv2dProblem(32, 7, 7, 784, 784, 3, 3, 1, 1, groups=49)  # RegNetY-800MF's last: 49 units
    assert serves(kernel, regnet) is None and kernel.slice(regnet, 132) == kernel.slice(regnet, 0) == 112
    assert all(k.slice(regnet, 132) == 784 for k in load_family(SPEC)
               if k.schedule == "tile" and k.channels_per_group == 16 and serves(k, regnet) is None)  # never cut
    assert serves(kernel, Conv2dProblem(32, 14, 14, 320, 320, 3, 3, 1, 1, groups=20)) == \
        "C must be a multiple of the slice of 112 channels"


def test_a_pipelined_spread_kernel_keeps_the_spread_slice_in_two_windows(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, '{ channels_per_group = 16, stride = 2, rows = 4, columns = 8, window = "parity", '
                                          'schedule = "spread_pipelined", units = 4 }'))
    kernel, = load_family(path)
    assert kernel.name.endswith("_g16_3x3_stride2_tile4x8_parity_units4_pipelined")
    assert kernel.includes == ("grouped_mma_spread_pipelined.h",) and kernel.buffers == 2
    regnet = Conv2dProblem(32, 112, 112, 64, 64, 3, 3, 1, 1, 2, 2, groups=4)  # RegNetY-800MF's first: 4 units
    assert serves(kernel, regnet) is None and kernel.slice(regnet, 132) == 64
    assert serves(kernel, Conv2dProblem(32, 56, 56, 144, 144, 3, 3, 1, 1, 2, 2, groups=9)) == \
        "C must be a multiple of the slice of 64 channels"


def test_a_dependent_launch_is_an_sm90_twin_of_a_pipelined_spread_kernel(tmp_path):
    from kernelgen import cost_model, render

    entry = '{ channels_per_group = 16, stride = 1, rows = 4, columns = 8, schedule = "spread_pipelined", units = 7 }'
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, f'{entry},\n  {entry[:-2]}, launch = "pdl" }}'))
    plain, dependent = load_family(path)
    assert dependent.name == plain.name.replace("kernelgen_sm80_", "kernelgen_sm90_") + "_pdl"
    assert (plain.arch, dependent.arch) == (80, 90) and dependent.includes == plain.includes
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, dependent).rstrip().endswith(", 7, true>;")
    assert render.type_definition(templates, plain).rstrip().endswith(", 7>;")
    layer = Conv2dProblem(32, 7, 7, 784, 784, 3, 3, 1, 1, groups=49)  # RegNetY-800MF's last
    assert serves(plain, layer) is None and serves(dependent, layer) is None
    assert set(cost_model._kernel_attributes_of(dependent)) ^ set(cost_model._kernel_attributes_of(plain)) == {
        "launch=pdl", "launch=stream", "GroupedMma:launch=pdl", "GroupedMma:launch=stream"}


def test_listed_copies_are_a_twin_of_a_pipelined_spread_kernel_in_their_own_header(tmp_path):
    """loads = "listed" (profiler/grouped_mma_listed.h): the same slices, schedule and launch as the
    pipelined spread kernel it twins, a name of its own, its own header (the twin's kernels, and
    their measured rows, unchanged), three more registers a copy a thread makes of a window."""
    from kernelgen import render

    entry = ('{ channels_per_group = 16, stride = 2, rows = 8, columns = 8, window = "parity", '
             'schedule = "spread_pipelined", units = 4, launch = "pdl" }')
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, f'{entry},\n  {entry[:-2]}, loads = "listed" }}'))
    indexed, listed = load_family(path)
    assert listed.name == indexed.name + "_listed" and listed.arch == indexed.arch == 90
    assert indexed.includes == ("grouped_mma_spread_pipelined.h",) and listed.includes == ("grouped_mma_listed.h",)
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert "kernelgen::GroupedMmaSpreadListed<__half, 16, 2, 8, 8, true, 4, true>;" in render.type_definition(templates, listed)
    assert "kernelgen::GroupedMmaSpreadPipelined<__half, 16, 2, 8, 8, true, 4, true>;" in render.type_definition(templates, indexed)
    # 17 x 17 pixels of 8 16-byte vectors: 10 copies a thread of 256
    assert listed.registers() == indexed.registers() + 3 * 10
    layer = Conv2dProblem(32, 112, 112, 64, 64, 3, 3, 1, 1, 2, 2, groups=4)  # RegNetX-800MF's first grouped layer
    assert serves(listed, layer) is None and listed.slice(layer, 132) == indexed.slice(layer, 132) == 64


@requires_nvcc
def test_a_dependent_pipelined_spread_kernel_compiles_as_the_profiler_builds_it(tmp_path):
    from conftest import assert_kernels_compile

    assert_kernels_compile(tmp_path, [next(k for k in load_family(SPEC) if k.launch == "pdl" and k.loads == "indexed"),
                                      next(k for k in load_family(SPEC) if k.loads == "listed")])


def _kernel(cg, stride, rows=None, columns=16):
    rows = rows or (4 if cg <= 16 else 1)
    return next(k for k in load_family(SPEC) if (k.channels_per_group, k.stride, k.rows, k.columns)
                == (cg, stride, rows, columns))


# (problem, channels a group and stride of the kernel asked, why it refuses or None)
CASES = [
    (Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32), 8, 1, None),  # ResNeXt-50, 8 a group
    (Conv2dProblem(32, 56, 56, 128, 128, 3, 3, 1, 1, groups=32), 4, 1, None),  # 4 a group
    (Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, 2, 2, groups=32), 8, 2, None),
    (Conv2dProblem(1, 9, 11, 64, 64, 3, 3, 2, 0, groups=8), 8, 1, None),  # pad 2 x 0
    (Conv2dProblem(32, 56, 56, 256, 256, 3, 3, 1, 1, groups=32), 4, 1,
     "built for 4 channels a group in and out (K = C = 4 x groups)"),
    (Conv2dProblem(32, 14, 14, 512, 512, 3, 3, 1, 1, groups=32), 8, 1,
     "built for 8 channels a group in and out (K = C = 8 x groups)"),  # 16 a group
    (Conv2dProblem(32, 14, 14, 512, 512, 3, 3, 1, 1, groups=32), 16, 1, None),
    (Conv2dProblem(32, 7, 7, 1024, 1024, 3, 3, 1, 1, groups=32), 16, 1,
     "built for 16 channels a group in and out (K = C = 16 x groups)"),  # 32 a group
    (Conv2dProblem(32, 7, 7, 1024, 1024, 3, 3, 1, 1, groups=32), 32, 1, None),
    (Conv2dProblem(32, 7, 7, 2048, 2048, 3, 3, 1, 1, groups=32), 64, 1, None),  # ResNeXt-101 32x8d's last
    (Conv2dProblem(32, 14, 14, 336, 336, 3, 3, 1, 1, groups=14), 24, 1, None),  # RegNetY-1.6GF's
    (Conv2dProblem(8, 14, 14, 256, 128, 3, 3, 1, 1, groups=32), 8, 1,
     "built for 8 channels a group in and out (K = C = 8 x groups)"),  # K = C / 2
    (Conv2dProblem(8, 14, 14, 256, 256, 5, 5, 2, 2, groups=32), 8, 1, "built for 3x3 filters"),
    (Conv2dProblem(8, 14, 14, 256, 256, 3, 3, 1, 1, 2, 2, groups=32), 8, 1, "built for stride 1"),
    (Conv2dProblem(8, 14, 14, 256, 256, 3, 3, 2, 2, 1, 1, 2, 2, groups=32), 8, 1, "built for dilation 1"),
    (Conv2dProblem(8, 14, 14, 12, 12, 3, 3, 1, 1, groups=3), 4, 1,
     "C must be a multiple of 8 (16-byte accesses along C)"),
    (Conv2dProblem(2, 14, 14, 4096, 4096, 3, 3, 1, 1, groups=512), 8, 1,
     "the input window of 4096 channels needs more than 232448 bytes of shared memory"),
]


@pytest.mark.parametrize("problem, cg, stride, why", CASES)
def test_a_kernel_serves_its_groups_filter_and_stride_only(problem, cg, stride, why):
    assert serves(_kernel(cg, stride), problem) == why


def test_a_dense_or_depthwise_layer_is_never_served():
    dense = Conv2dProblem(8, 14, 14, 256, 256, 3, 3, 1, 1)
    depthwise = Conv2dProblem(8, 14, 14, 256, 256, 3, 3, 1, 1, groups=256)
    assert "not for conv2d_fprop" in serves(_kernel(8, 1), dense)
    assert serves(_kernel(8, 1), depthwise).startswith("built for 8 channels a group")


@requires_nvcc
def test_the_kernels_can_implement_agrees_with_serves(tmp_path):
    """Each committed kernel type's can_implement (host code, no GPU) on every case, against the
    family's ``refuses``: both refuse, or neither; and where it serves, the channels a CTA computes
    on the 132 SMs of an H200 (its ``slice``, which the cost model counts tiles by) are the
    family's ``slice``."""
    from kernelgen import render

    kernels = load_family(SPEC)
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    problems = [p for p, *_ in CASES]
    def problem(p):
        return (f"kernelgen::Conv2dProblem{{{p.n}, {p.h}, {p.w}, {p.c}, {p.k}, {p.r}, {p.s}, {p.pad_h}, {p.pad_w}, "
                f"{p.stride_h}, {p.stride_w}, {p.dilation_h}, {p.dilation_w}}}")

    served = [(k, p) for k in kernels for p in problems if k.refuses(p) is None]
    calls = "".join(f'  std::printf("%d\\n", int({k.name}::can_implement({problem(p)}, {p.groups}).empty()));\n'
                    for k in kernels for p in problems)
    calls += "".join(f'  std::printf("%d\\n", {k.name}::slice({problem(p)}, 132));\n' for k, p in served)
    source = tmp_path / "can_implement.cu"
    source.write_text('#include <cstdio>\n#include "grouped_mma_sliced.h"\n#include "grouped_mma_pipelined.h"\n'
                      '#include "grouped_mma_listed.h"\n'
                      '#include "grouped_mma_spread.h"\n#include "grouped_mma_spread_pipelined.h"\n#include "grouped_mma_wide.h"\n\n'
                      + "".join(render.type_definition(templates, k) for k in kernels)
                      + "\nint main() {\n" + calls + "  return 0;\n}\n")
    build = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}",
                            "-o", str(tmp_path / "can_implement"), str(source)], capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, build.stderr[-5000:]
    out = subprocess.run([str(tmp_path / "can_implement")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = [str(int(k.refuses(p) is None)) for k in kernels for p in problems]
    slices = [str(k.slice(p, 132)) for k, p in served]
    assert out.stdout.split() == expected + slices
    assert "1" in expected and "0" in expected
    assert len({s for s, (_, p) in zip(slices, served) if s != str(p.c)}) > 1  # some layers are sliced


@requires_nvcc
def test_the_registers_the_cost_model_counts_are_those_ptxas_gives(tmp_path):
    """GroupedMma.registers (the cost model's CTAs an SM holds) against ptxas -v on sm_90a for a
    kernel of each number of channels a group: within 8 registers a thread."""
    import re

    kernels = {}
    for k in load_family(SPEC):
        kernels.setdefault(k.channels_per_group, k)
    source = tmp_path / "registers.cu"
    source.write_text('#include <cuda_fp16.h>\n#include "grouped_mma_wide.h"\nvoid* kernels_here[] = {\n' + "".join(
        f"  (void*)kernelgen::grouped_mma::grouped_mma_kernel<__half, {k.channels_per_group}, {k.stride}, {k.rows}, "
        f"{k.columns}, {'true' if k.window == 'parity' else 'false'}>,\n" for k in kernels.values()) + "};\n")
    out = subprocess.run(["nvcc", "-std=c++17", "-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a",
                          f"-I{ROOT / 'profiler'}", "-Xptxas", "-v", "-c", "-o", str(tmp_path / "registers.o"),
                          str(source)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    found = dict(re.findall(r"grouped_mma_kernelI6__halfLi(\d+)E.*?Used (\d+) registers", out.stderr, re.S))
    assert sorted(map(int, found)) == sorted(kernels)
    for cg, used in found.items():
        assert abs(int(used) - kernels[int(cg)].registers()) <= 8, (cg, used)


def _layer_args(problem) -> list:
    return [problem.n, problem.h, problem.w, problem.c, problem.k, problem.pad_h, problem.stride_h, problem.groups]


@requires_nvcc
def test_every_kernel_computes_the_layers_it_serves_on_a_cpu_model_of_its_warps(tmp_path):
    """tests/grouped_mma_model.cu: each committed kernel type's launch (its grid, channel slices,
    warps and k-steps, through the kernel's own index functions, with ldmatrix and mma.sync as the
    PTX ISA defines them) on the CPU, on the layers of the GPU test below and layers split into
    channel slices: exact where ``serves`` says the kernel serves the layer, refused where not."""
    from kernelgen import render
    from kernelgen.workloads import parse_workloads

    kernels = load_family(SPEC)
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    (tmp_path / "kernel_types.h").write_text(
        "#pragma once\n" + "".join(render.type_definition(templates, k) for k in kernels)
        + "#define KERNELS(X) " + " ".join(f"X({k.name})" for k in kernels) + "\n")
    # -O0: the model's run over every layer takes seconds; its optimised compile (the kernel types) takes 20
    build = subprocess.run(["nvcc", "-std=c++17", "-O0", f"-I{ROOT / 'profiler'}", f"-I{tmp_path}", "-o",
                            str(tmp_path / "model"), str(ROOT / "tests" / "grouped_mma_model.cu")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-5000:]
    split = ["n=1 h=3 w=20 c=512 k=512 r=3 s=3 pad=1 stride=1 groups=64",   # 8 a group: 8 slices of 64
             "n=1 h=4 w=4 c=1024 k=1024 r=3 s=3 pad=1 stride=2 groups=64"]  # 16 a group: 8 slices of 128
    served = 0
    for problem in parse_workloads("".join(f"conv2d_fprop {line}\n" for line in LAYERS + split)):
        out = subprocess.run([str(tmp_path / "model"), *map(str, _layer_args(problem)), "132"], capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        results = dict(line.split(" ", 1) for line in out.stdout.splitlines())
        assert sorted(results) == sorted(k.name for k in kernels)
        for k in kernels:
            expected = "0" if k.refuses(problem.as_conv()) is None else "refused"
            assert results[k.name] == expected, (problem.name, k.name, results[k.name])
            served += expected == "0"
    assert served > len(kernels)


# Small odd grouped layers: 4 to 64 channels a group, partial row and column tiles, stride 2, a
# non-square image, padding other than 1, one image row, a slice of the channels a CTA (few tiles,
# 128 or more channels of 8, 256 or more of 16 and 32, 1024 or more of 64, 768 of 24), an odd
# number of output rows for the tiles of 8 columns (two rows a 16-pixel tile); groups of 16 in 7, 9
# and 5 units (the spread kernels of 7, 1, 3 and 5 units a CTA); 48 and 56 channels a group (6 and 7
# units a group, the spread slice one group); 7 and 15 groups of 8 (spread slices of 1 and 7, and 1, 3
# and 5 groups); 12 channels a group (refused); and two layers of 16 channels a group whose inner
# tiles' windows lie inside the image (the listed kernels' copies without a check; 7 and 3 units).
LAYERS = [
    "n=2 h=9 w=11 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=8",
    "n=2 h=10 w=37 c=64 k=64 r=3 s=3 pad=1 stride=2 groups=8",
    "n=1 h=7 w=13 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=32",
    "n=3 h=8 w=20 c=40 k=40 r=3 s=3 pad=1 stride=2 groups=10",
    "n=1 h=1 w=33 c=16 k=16 r=3 s=3 pad=1 stride=1 groups=2",
    "n=2 h=6 w=5 c=32 k=32 r=3 s=3 pad=2 stride=1 groups=4",
    "n=1 h=9 w=9 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=8",
    "n=2 h=7 w=19 c=256 k=256 r=3 s=3 pad=1 stride=2 groups=16",
    "n=1 h=5 w=5 c=512 k=512 r=3 s=3 pad=1 stride=1 groups=32",
    "n=1 h=6 w=6 c=256 k=256 r=3 s=3 pad=1 stride=1 groups=32",
    "n=1 h=5 w=5 c=128 k=128 r=3 s=3 pad=1 stride=1 groups=4",
    "n=2 h=6 w=17 c=256 k=256 r=3 s=3 pad=1 stride=2 groups=4",
    "n=1 h=4 w=9 c=512 k=512 r=3 s=3 pad=1 stride=1 groups=8",
    "n=1 h=3 w=3 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=8",
    "n=2 h=7 w=9 c=48 k=48 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=6 w=13 c=120 k=120 r=3 s=3 pad=1 stride=2 groups=5",
    "n=1 h=4 w=4 c=768 k=768 r=3 s=3 pad=1 stride=1 groups=32",
    "n=2 h=13 w=15 c=64 k=64 r=3 s=3 pad=1 stride=2 groups=2",
    "n=2 h=7 w=7 c=112 k=112 r=3 s=3 pad=1 stride=1 groups=7",
    "n=1 h=9 w=9 c=144 k=144 r=3 s=3 pad=1 stride=2 groups=9",
    "n=1 h=6 w=10 c=80 k=80 r=3 s=3 pad=1 stride=1 groups=5",
    "n=2 h=9 w=13 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=7 w=19 c=192 k=192 r=3 s=3 pad=1 stride=2 groups=4",
    "n=2 h=7 w=7 c=112 k=112 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=9 w=11 c=168 k=168 r=3 s=3 pad=1 stride=2 groups=3",
    "n=2 h=7 w=7 c=56 k=56 r=3 s=3 pad=1 stride=1 groups=7",
    "n=1 h=11 w=14 c=120 k=120 r=3 s=3 pad=1 stride=2 groups=15",
    "n=1 h=40 w=36 c=112 k=112 r=3 s=3 pad=1 stride=2 groups=7",
    "n=1 h=12 w=40 c=48 k=48 r=3 s=3 pad=1 stride=1 groups=3",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_refuses_the_others(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, ",".join(kernels)):  # (other families' names hold _gconv_ too)
        assert_served_rows_verify(problem, frame, kernels)
