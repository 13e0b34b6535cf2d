"""CUTLASS's depthwise direct convolution as a family (site_scons/kernelgen/families/depthwise_cutlass.py,
profiler/depthwise_cutlass_adapter.h): its spec checks refuse what CUTLASS cannot build, naming file,
entry and key; its names say every parameter that changes the code; ``serves`` refuses what the
adapter and CUTLASS's can_implement refuse (groups != C, C % 8, the compiled filter, stride and
dilation, a window past the shared memory); the cost model ranks it with no rows of it; one kernel
compiles through the project's rendering with the thread tile the spec computes; and on a GPU every
kernel verifies on the small odd depthwise layers it says it serves and reports the others
unsupported."""

import itertools
import math
import subprocess

import pytest

from conftest import ROOT, assert_family_refused, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import render
from kernelgen.candidates import unfitted
from kernelgen.cost_model import load_model, serves, theta_group
from kernelgen.errors import SpecError
from kernelgen.families.depthwise_cutlass import STRIDE1_WRONG, DepthwiseCutlass
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family
from test_depthwise import LAYERS as DEPTHWISE_LAYERS

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_cutlass.toml"
TEMPLATES = ROOT / "kernel_specs" / "templates"
FIRST = '{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }'
FAMILY = f"""\
kind = "depthwise_cutlass"
description = "test"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""


def family(tmp_path, *entries, text=FAMILY):
    path = tmp_path / "family.toml"
    path.write_text(text.replace(f"  {FIRST},\n", "".join(f"  {e},\n" for e in entries)))
    return path


@pytest.mark.parametrize("entry, key, message", [
    ('{ filter = 3, iterator = "fixed", tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }', "stride",
     'a fixed-stride kernel (iterator "fixed") needs its stride'),
    ('{ filter = 3, iterator = "optimized", stride = 2, tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }',
     "stride", "an optimized kernel takes the layer's stride at run time: give no stride"),
    ('{ filter = 3, iterator = "analytic", stride = 1, tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }',
     "iterator", "'analytic' is not one of fixed, optimized"),
    ('{ filter = 4, iterator = "fixed", stride = 1, tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }',
     "filter", "4 is not one of 3, 5, 7"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 48, warp_m = 16, stages = 3 }',
     "groups", "48 is not one of 16, 32, 64, 128"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [5, 5], groups = 64, warp_m = 16, stages = 3 }',
     "warp_m", "warps of 16 pixels do not divide the tile's 5x5"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [16, 16], groups = 64, warp_m = 4, stages = 3 }',
     "warp_m", "2048 threads exceed 1024 a CTA"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 6], groups = 64, warp_m = 16, stages = 3 }',
     "tile", "threads of 4x4 pixels do not tile the tile's 8x6"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 128, warp_m = 32, stages = 3 }',
     "warp_m", "a thread would keep 128 fp32 sums, more than 64"),
    ('{ filter = 7, iterator = "fixed", stride = 2, tile = [8, 8], groups = 128, warp_m = 16, stages = 2 }',
     "stages", "2 stages of the tile's window and its taps need 243712 bytes of shared memory, more than 232448"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 64, warp_m = 16, stages = 1 }',
     "stages", "1 is outside [2, 6]"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 64, warp_m = 16, stages = 3, '
     "tiles_per_cta = 3 }", "tiles_per_cta", "3 is not one of 1, 2, 4, 8"),
    ('{ filter = 3, iterator = "fixed", stride = 2, tile = [8, 8], groups = 64, warp_m = 16, stages = 3, '
     "swizzle = 2 }", "swizzle", "unknown key"),
    ('{ filter = 3, iterator = "fixed", stride = 1, tile = [8, 8], groups = 64, warp_m = 16, stages = 3 }',
     "stride", "a kernel that would serve no layer (3x3 at stride 1: wrong outputs on the H200"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = family(tmp_path, entry)
    assert_family_refused(path, "kernels[0]", key, message)


@pytest.mark.parametrize("old, new, key, message", [
    ('element = "f16"', 'element = "bf16"', "element", "this family is written for element f16, not bf16"),
    ('accumulator = "f32"', 'accumulator = "f16"', "accumulator", "this family is written for accumulator f32, not f16"),
])
def test_other_types_are_refused_naming_the_key(tmp_path, old, new, key, message):
    path = family(tmp_path, FIRST, text=FAMILY.replace(old, new))
    with pytest.raises(SpecError) as caught:
        load_family(path)
    assert (caught.value.key, caught.value.entry) == (key, None) and message in str(caught.value)


def test_names_are_unique_and_say_every_parameter_that_changes_the_code(tmp_path):
    """Every valid combination of a grid of entries: kernels of one name render one type, and kernels
    of different values have different names."""
    entries = []
    for filter_, (iterator, stride), tile, groups, warp_m, stages, tpc in itertools.product(
            (3, 5), (("fixed", 1), ("fixed", 2), ("optimized", None)), ((8, 8), (4, 8)), (32, 64, 128), (8, 16),
            (2, 3), (1, 4)):
        entries.append(f'{{ filter = {filter_}, iterator = "{iterator}", '
                       + ("" if stride is None else f"stride = {stride}, ")
                       + f"tile = [{tile[0]}, {tile[1]}], groups = {groups}, warp_m = {warp_m}, stages = {stages}, "
                       f"tiles_per_cta = {tpc} }}")
    kernels = []
    for i, entry in enumerate(entries):  # one file an entry: some combinations are refused
        folder = tmp_path / str(i)
        folder.mkdir()
        try:
            kernels += load_family(family(folder, entry))
        except SpecError:
            pass
    assert len(kernels) > 100
    templates = render.lookup(TEMPLATES)
    by_name = {}
    for k in kernels:
        by_name.setdefault(k.name, set()).add(render.type_definition(templates, k).replace(k.name, "NAME"))
    assert len(by_name) == len(kernels), "two kernels of one name"
    assert all(len(types) == 1 for types in by_name.values())
    assert len({next(iter(t)) for t in by_name.values()}) == len(kernels), "two names of one type"
    k = next(k for k in kernels if (k.filter, k.iterator, k.stride, k.tile, k.groups, k.warp_m, k.stages,
                                    k.tiles_per_cta) == (5, "fixed", 2, (4, 8), 32, 8, 3, 4))
    assert k.name == "cutlass_simt_f16_sdwfprop_fixed_f16_5x5_stride2_4x8x32_8x3_tpc4_nhwc_align8"
    o = next(k for k in kernels if k.iterator == "optimized")
    assert "_sdwfprop_optimized_f16_" in o.name and "_strided_" in o.name


def test_the_committed_spec_has_both_iterators_and_every_filter_and_stride():
    kernels = load_family(SPEC)
    assert len({k.name for k in kernels}) == len(kernels) >= 6
    assert {k.iterator for k in kernels} == {"fixed", "optimized"}
    assert {(k.filter, k.stride) for k in kernels if k.iterator == "fixed"} >= {(3, 2), (5, 1), (5, 2), (7, 1)}
    assert all(k.op == "conv2d_fprop_grouped" and k.accumulator == "f32" and k.element == k.output == "f16"
               for k in kernels)
    assert all(k.adapter_header == "depthwise_cutlass_adapter.h" for k in kernels)


def kernel(**fields):
    base = dict(family="t", filter=3, iterator="fixed", stride=2, tile=(8, 8), groups=64, warp_m=16, stages=3)
    return DepthwiseCutlass(**{**base, **fields})


def conv(c=144, r=3, stride=2, dilation=1, groups=None, n=2, h=14, k=None):
    return Conv2dProblem(n, h, h, c, c if k is None else k, r, r, r // 2, r // 2, stride, stride, dilation, dilation,
                         groups=c if groups is None else groups)


def test_serves_says_what_the_adapter_and_cutlass_refuse():
    fixed, strided = kernel(), kernel(iterator="optimized", stride=None)
    assert serves(fixed, conv()) is None and serves(strided, conv()) is None
    # the fixed kernel's stride, dilation and filter are compiled in; the optimized one's stride and dilation not
    assert serves(fixed, conv(stride=3)) == "built for stride 2"
    assert serves(strided, conv(stride=3)) is None
    # wrong on the H200 at 3x3 stride 1, either iterator: refused (a 5x5 kernel serves stride 1)
    assert serves(fixed, conv(stride=1)) == serves(strided, conv(stride=1)) == STRIDE1_WRONG
    assert serves(kernel(iterator="optimized", stride=None, filter=5), conv(stride=1, r=5)) is None
    assert serves(fixed, conv(dilation=2)) == "built for dilation 1"
    assert serves(strided, conv(dilation=2)) is None
    assert serves(fixed, conv(r=5)) == serves(strided, conv(r=5)) == "built for 3x3 filters"
    # 16-byte accesses along C (the activation and filter iterators' can_implement)
    assert serves(fixed, conv(c=36)) == "C must be a multiple of 8"
    # DirectConvolution::can_implement: a depthwise kernel only
    assert serves(fixed, conv(groups=4)) == "a depthwise kernel: needs groups = C = K"
    assert "not for conv2d_fprop" in serves(fixed, conv(groups=1))
    assert serves(fixed, conv(k=288)) == "a depthwise kernel: needs groups = C = K"
    # the optimized kernel's window is the layer's: a wide one needs more shared memory than a CTA has
    wide = kernel(iterator="optimized", stride=None, filter=5, groups=64, stages=3)
    assert serves(wide, conv(r=5)) is None
    assert serves(wide, conv(r=5, stride=2, dilation=3)) == \
        f"needs {wide.shared_bytes((2, 2), (3, 3))} bytes of shared memory, more than 232448"
    assert wide.shared_bytes((2, 2), (3, 3)) > 232448 >= wide.shared_bytes((1, 1), (1, 1))


def test_the_window_and_the_ctas_along_the_tiles():
    k = kernel(filter=5, stride=2, tiles_per_cta=2)
    # (8 - 1) * 2 + 5 = 19 rows and columns of 8 vectors, in rounds of 128 threads of 16 bytes
    assert k.threads() == 128 and k.window((2, 2)) == (19, 19)
    assert k.shared_bytes() == 3 * math.ceil(19 * 19 * 8 / 128) * 128 * 16 + math.ceil(25 * 8 / 128) * 128 * 16
    layer = conv(n=32, h=112, r=5, stride=2)  # 56 x 56 outputs: 7 x 7 tiles an image
    assert k.slices(layer) == 32 * 49 // 2
    assert kernel(tile=(1, 4), warp_m=4, groups=16).slices(conv(n=256, h=112, c=16)) == 65535  # grid.z at most


def test_the_model_ranks_the_family_and_builds_do_not_measure_it_everywhere():
    """The family's counts are weighed as this project's depthwise kernels' (a fitted group), its
    corrections fitted to its own rows, and a build does not compile every one of its kernels for
    every depthwise layer (``unfitted``: CUTLASS kernels are slow to compile)."""
    model = load_model("nvidia_h200")
    kernels = load_family(SPEC)
    small, large = conv(n=1, h=14, c=64), conv(n=32, h=112, c=64)
    for k in kernels:
        assert theta_group(k) == "Depthwise" and theta_group(k) in model.theta
        assert not unfitted(model, k)
        if serves(k, small) is None:
            assert 0 < model.predict(k, small) < model.predict(k, large) < 10
    fixed = next(k for k in kernels if (k.iterator, k.filter, k.stride) == ("fixed", 3, 2))
    # a tile of more channels than the layer has computes the padding too: no cheaper than half as many
    assert model.base(fixed, conv(n=32, h=56, c=64)) <= model.base(fixed, conv(n=32, h=56, c=72))


@requires_nvcc
def test_one_kernel_compiles_through_the_rendering_with_the_spec_thread_tile(tmp_path):
    """The profiler's translation unit of one kernel (kernel.cu.mako: the type, the adapter, the
    factory) compiles for sm_90a, and the kernel's warps and thread tile are the spec's."""
    from header_builds import MEASURED_FLAGS
    from kernelgen.variables import default_cutlass_root

    k = next(k for k in load_family(SPEC) if (k.iterator, k.filter, k.stride) == ("fixed", 3, 2))
    kp, kq = k.thread_tile()
    checks = (f"static_assert({k.name}::kWarpCount * 32 == {k.threads()}, \"threads\");\n"
              f"using {k.name}_thread = {k.name}::WarpMmaOperator::ThreadOutputShape;\n"
              f"static_assert({k.name}_thread::kH == {kp} && {k.name}_thread::kW == {kq} && "
              f"{k.name}_thread::kC == {k.lane_channels()}, \"thread tile\");\n"
              f"static_assert(std::is_same<{k.name}::ElementAccumulator, float>::value, \"f32 sums\");\n")
    source = tmp_path / "kernel.cu"
    source.write_text(render.kernel_source(render.lookup(TEMPLATES), k) + "#include <type_traits>\n" + checks)
    cutlass = default_cutlass_root()
    # through nvcc's front ends (-cuda: the host code as the host compiler gets it;
    # -fdevice-syntax-only: the device code checked, static_asserts included, not generated)
    out = subprocess.run(["nvcc", *MEASURED_FLAGS, "-fdevice-syntax-only", "-cuda", f"-I{ROOT / 'profiler'}",
                          "-isystem", f"{cutlass}/include", "-o", str(tmp_path / "kernel.cu.ii"), str(source)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-5000:]


# The small odd depthwise layers this project's depthwise kernels are checked on (C not a multiple
# of a CTA's channels, partial output tiles, stride 2, one image row, padding wider than the filter's
# reach, C not a multiple of 8: refused by all, more tiles than 8 a CTA), and dilation 2 (the
# optimized kernels only; 3x3 at stride 1 refused, at stride 2 and 5x5 at stride 1 served) and 36 channels.
LAYERS = [
    *DEPTHWISE_LAYERS,
    "n=2 h=12 w=12 c=64 k=64 r=3 s=3 pad=2 stride=1 dilation=2 groups=64",
    "n=2 h=15 w=13 c=64 k=64 r=3 s=3 pad=2 stride=2 dilation=2 groups=64",
    "n=1 h=16 w=16 c=40 k=40 r=5 s=5 pad=4 stride=1 dilation=2 groups=40",
    "n=1 h=8 w=8 c=36 k=36 r=3 s=3 pad=1 stride=1 groups=36",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_refuses_the_others(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "cutlass_simt_*_sdwfprop_*"):
        assert_served_rows_verify(problem, frame, kernels)
