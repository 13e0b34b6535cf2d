"""The depthwise family in fp16 pairs (profiler/depthwise_half.h,
site_scons/kernelgen/families/depthwise_half.py): its spec checks refuse entries the kernel cannot
build, naming file, entry and key; its kernels accumulate in fp16 and say so (name, tolerance) and
serve the layers the fp32 tensor-copy kernels serve; two of them compile as the profiler builds them;
on a GPU every kernel computes small odd layers (within fp16 accumulation's error) or refuses them."""

import pytest

from conftest import (ROOT, assert_family_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family
from kernelgen.vocab import VERIFY_TOLERANCE, verify_tolerance
from test_depthwise import LAYERS

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_half.toml"
# 9x9 and 11x11 (MixNet's), stride 1 and 2, images smaller than a tile and than the filter
LARGE = [
    "n=2 h=15 w=13 c=120 k=120 r=9 s=9 pad=4 stride=1 groups=120",
    "n=3 h=14 w=14 c=144 k=144 r=9 s=9 pad=4 stride=2 groups=144",
    "n=2 h=21 w=19 c=48 k=48 r=9 s=9 pad=4 stride=2 groups=48",
    "n=2 h=14 w=14 c=144 k=144 r=11 s=11 pad=5 stride=2 groups=144",
    "n=1 h=9 w=17 c=40 k=40 r=11 s=11 pad=5 stride=1 groups=40",
    # and 1x1 (a per-channel scale), stride 1 and 2
    "n=2 h=13 w=17 c=64 k=64 r=1 s=1 pad=0 stride=1 groups=64",
    "n=2 h=15 w=14 c=48 k=48 r=1 s=1 pad=0 stride=2 groups=48",
]
FIRST = "{ filter = 7, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, threads = 128 }"
ROWS = FIRST.replace(" }", ', sums = "rows" }')
FAMILY = f"""\
kind = "depthwise_half"
description = "test"
element = "f16"
accumulator = "f16"
output = "f16"
kernels = [
  {FIRST},
]
"""


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace(" }", ', sums = "f32" }'), "sums", "'f32'"),
    (FIRST.replace(" }", ', loader = "tma" }'), "loader", "unknown key"),
    (FIRST.replace(" }", ', launch = "graph" }'), "launch", "'graph'"),
    (FIRST.replace(" }", ', taps = "later" }'), "taps", "'later'"),
    (FIRST.replace("columns = 4", "columns = 8").replace("thread_rows = 4", "thread_rows = 8"), "columns",
     "need about 171 registers a thread, more than 168"),
    (FIRST.replace("rows = 8, thread_rows = 4", "rows = 16, thread_rows = 1"), "rows",
     "rows 16 in thread rows of 1 do not divide the 8 threads"),
    (FIRST.replace("channel_vectors = 4, threads = 128", "channel_vectors = 8, threads = 256, stages = 6"), "stages",
     "6 stages of the tile's input and taps need 242816 bytes of shared memory, more than 232448"),
    (FIRST.replace("rows = 8", "rows = 12"), "rows", "12 is not one of 1, 2, 4, 7, 8, 14, 16, 32"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, entry))
    assert_family_refused(path, "kernels[0]", key, message)


@pytest.mark.parametrize("key, value, message", [
    ("accumulator", '"f32"', "this family is written for accumulator f16, not f32"),
    ("element", '"bf16"', "this family is written for element f16, not bf16"),
])
def test_a_family_of_other_types_is_refused(tmp_path, key, value, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(f'{key} = "{"f16"}"', f"{key} = {value}", 1))
    assert_family_refused(path, None, key, message)


def test_taps_first_kernels_whose_stages_leave_room_for_two_ctas_keep_255_registers(tmp_path):
    # depthwise_half_first.h builds for the CTAs a SM its shared memory admits (resident_ctas), the
    # other orders for three of 128 threads
    tile14 = ("{ filter = 7, stride = 1, rows = 14, thread_rows = 7, columns = 7, channel_vectors = 8, threads = 128, "
              "stages = 2 }")
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, ",\n  ".join(
        [tile14, tile14.replace(" }", ', taps = "first" }'), tile14.replace(" }", ', taps = "each" }'),
         FIRST.replace(" }", ', taps = "first" }')])))
    staged, first, each, small = load_family(path)
    assert staged.shared_bytes() == 108672 and staged.name.endswith("_tile14x14_t7x7_c64_s2_tma_cta128")
    assert (staged.max_registers(), first.max_registers(), each.max_registers(), small.max_registers()) == (
        168, 255, 168, 168)


def test_the_name_says_fp16_sums_and_the_tolerance_is_fp16_accumulations(tmp_path):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, f"{FIRST},\n  {ROWS},\n  {ROWS[:-2]}, launch = \"pdl\" }}"))
    half, rows, dependent = load_family(path)
    assert half.name == ("kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_7x7_stride1_tile8x16_t4x4_c32"
                         "_s3_tma_cta128")
    assert rows.name == half.name + "_rows" and dependent.name == rows.name + "_pdl"
    assert (half.accumulator, half.arch, half.includes) == ("f16", 90, ("depthwise_half.h",))
    assert verify_tolerance(half) == verify_tolerance(rows) == VERIFY_TOLERANCE["f16"] > VERIFY_TOLERANCE["f32"]
    # the fp32 sums of each row take two registers an output pair more
    assert rows.registers() == half.registers() + 2 * 4 * 4
    # the tile and the stages are the fp32 tensor-copy kernel's: 3 stages of a 14 x 22 window, the taps once
    assert half.tile_columns() == 16 and half.shared_bytes() == 3 * 14 * 22 * 4 * 16 + 49 * 4 * 16


def test_a_kernel_serves_the_depthwise_layers_of_its_filter_and_stride():
    kernel = next(k for k in load_family(SPEC) if (k.filter, k.stride) == (5, 2))

    def layer(c=144, k=144, r=5, stride=2, dilation=1):
        return Conv2dProblem(32, 56, 56, c, k, r, r, r // 2, r // 2, stride, stride, dilation, dilation, groups=c)

    assert serves(kernel, layer()) is None
    assert serves(kernel, layer(stride=1)) == "built for 5x5 filters, stride 2"
    assert serves(kernel, layer(r=3)) == "built for 5x5 filters, stride 2"
    assert serves(kernel, layer(dilation=2)) == "built for dilation 1"
    assert serves(kernel, layer(c=36, k=36)) == "C must be a multiple of 8"
    assert serves(kernel, layer(k=288)) == "a depthwise kernel: needs groups = C = K"


@pytest.mark.parametrize("line", LARGE[:2] + LARGE[3:5] + [
    "n=32 h=14 w=14 c=90 k=90 r=9 s=9 pad=4 stride=1 groups=90",
    "n=32 h=14 w=14 c=180 k=180 r=9 s=9 pad=4 stride=2 groups=180",
])
def test_the_model_ranks_a_kernel_built_for_a_large_filter_above_those_of_any_filter(line):
    """A 9x9 or 11x11 depthwise layer (MixNet's) was served by the kernels of any filter alone
    (direct_conv_any.h, each tap read again for each output column: 4 to 30 times the floor); the
    kernels built for its filter (this family's, depthwise_pairs_half's where C is no multiple of 8)
    serve it, and the committed model ranks one of them first, so that a build proposes them."""
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog
    from kernelgen.workloads import parse_workloads

    problem = parse_workloads(f"conv2d_fprop {line}")[0]
    ranked = load_model("nvidia_h200").rank(load_catalog(SPEC.parent), problem)
    built = [k for _, k in ranked if getattr(k, "filter", None) == problem.r]
    assert built and ranked[0][1] is built[0], [k.name for _, k in ranked[:3]]
    assert any(getattr(k, "filter", None) == "any" for _, k in ranked), "the kernels of any filter serve it too"


def test_accumulate_f32_keeps_the_fp16_sums_out_of_the_build_and_the_header(tmp_path):
    """`scons candidates` of a 7x7 depthwise layer proposes kernels of this family (measured on such
    layers, the model ranks them among its first); with ACCUMULATE=f32 none, and the fp32 depthwise kernels still."""
    import shutil
    import subprocess
    import sys

    workloads = tmp_path / "dw.txt"
    workloads.write_text("conv2d_fprop n=32 h=56 w=56 c=96 k=96 r=7 s=7 pad=3 stride=1 groups=96\n")
    proposed = {}
    for accumulate in ("", "f32"):
        build = tmp_path / f"build{accumulate}"
        out = subprocess.run([sys.executable, shutil.which("scons"), "-Q", "candidates", f"WORKLOADS={workloads}",
                              f"BUILD={build}", f"ACCUMULATE={accumulate}"], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        proposed[accumulate] = set((build / "candidates.txt").read_text().split())
    half = {k.name for k in load_family(SPEC) if (k.filter, k.stride) == (7, 1)}
    assert half & proposed[""] and not half & proposed["f32"]
    assert any("_dwconv_f16nhwc_" in name for name in proposed["f32"]), "the fp32 depthwise kernels"


@requires_nvcc
def test_a_kernel_of_each_sums_and_launch_compiles_as_the_profiler_builds_it(tmp_path):
    kernels = load_family(SPEC)
    assert_kernels_compile(tmp_path, [next(k for k in kernels if (k.sums, k.launch, k.taps) == (s, launch, taps))
                                      for s, launch, taps in (("f16", "stream", "staged"), ("rows", "pdl", "staged"),
                                                              ("f16", "pdl", "first"), ("f16", "pdl", "each"))])


def test_a_dependent_launch_renders_its_kernel_type_with_pdl_and_the_cost_model_tells_it_apart():
    from kernelgen import cost_model, render

    kernels = load_family(SPEC)
    plain = kernels[0]
    dependent = next(k for k in kernels if k.launch == "pdl" and k.values() == {**plain.values(), "launch": "pdl"})
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, dependent).rstrip().endswith("kernelgen::depthwise::Sums::kHalf, true>;")
    assert render.type_definition(templates, plain).rstrip().endswith("kernelgen::depthwise::Sums::kHalf, false>;")
    attributes = set(cost_model._kernel_attributes_of(dependent)) ^ set(cost_model._kernel_attributes_of(plain))
    assert attributes == {"launch=pdl", "launch=stream", "DepthwiseHalf:launch=pdl", "DepthwiseHalf:launch=stream"}


@pytest.mark.parametrize("taps, header, suffix, type_name, filter", [
    ("first", "depthwise_half_first.h", "_tapsfirst", "DepthwiseHalfFirst", 7),
    ("each", "depthwise_half_each.h", "_tapseach", "DepthwiseHalfEach", 3),
])
def test_each_order_of_the_taps_is_a_kernel_of_its_own_header_name_and_type_that_the_cost_model_tells_apart(
        taps, header, suffix, type_name, filter):
    """A kernel of ``taps = "first"`` or ``"each"`` is its staged twin's but for the header it includes
    (profiler/depthwise_half_first.h, depthwise_half_each.h: code of their own, so the twin's rows
    stay current), its name and its C++ type; the cost model gives it an attribute of its own, and
    the twin none it lacked."""
    from kernelgen import cost_model, render

    kernels = load_family(SPEC)
    by_name = {k.name: k for k in kernels}
    kernel = next(k for k in kernels if k.taps == taps and k.launch == "pdl" and k.filter == filter)
    staged = by_name[kernel.name.replace(suffix, "")]
    assert staged.taps == "staged" and kernel.name.endswith(f"{suffix}_pdl")
    assert (kernel.includes, staged.includes) == ((header,), ("depthwise_half.h",))
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert f"using {kernel.name} = kernelgen::{type_name}<" in render.type_definition(templates, kernel)
    assert f"using {staged.name} = kernelgen::DepthwiseHalf<" in render.type_definition(templates, staged)
    attributes = set(cost_model._kernel_attributes_of(kernel)) ^ set(cost_model._kernel_attributes_of(staged))
    assert attributes == {f"DepthwiseHalf:taps={taps}"}


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    """Within 5e-3 (fp16 sums of 1 to 121 products of operands in [-1, 1): about 1e-3 relative L2
    error), where the profiler's own check allows fp16 accumulation's 2e-2."""
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS + LARGE, ",".join(kernels)):  # no band's (1xS, Rx1)
        assert_served_rows_verify(problem, frame, kernels, limit=5e-3)
