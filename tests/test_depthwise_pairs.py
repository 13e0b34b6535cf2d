"""The depthwise families of narrow copies (profiler/depthwise_pairs.h,
site_scons/kernelgen/families/depthwise_pairs.py and its fp16 sums, depthwise_pairs_half.py): its spec checks refuse entries the kernel cannot
build, naming file, entry and key; a kernel serves the depthwise layers of its filter and stride whose
channels its copies divide and the 16-byte kernels cannot take, and says why it refuses the others;
the cost model weighs the family apart from the 16-byte kernels (so a build measures it in full until
its rows are fitted); a kernel of each access compiles as the profiler builds it; on a GPU every kernel
computes small odd layers or refuses them as the Python side says."""

import pytest

from conftest import (ROOT, assert_family_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves, theta_group
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_pairs.toml"
HALF = ROOT / "kernel_specs" / "families" / "depthwise_pairs_half.toml"
FIRST = "{ filter = 3, stride = 1, rows = 8, thread_rows = 4, columns = 4, channel_vectors = 4, access = 4 }"
FAMILY = f"""\
kind = "depthwise_pairs"
description = "test"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""
# odd channel counts (2 and 4 a copy), a multiple of 8 (refused), odd C (refused), paddings past the
# image, images smaller than a tile, the last channel block partly outside the layer
LAYERS = [
    "n=3 h=13 w=17 c=26 k=26 r=3 s=3 pad=1 stride=1 groups=26",
    "n=2 h=9 w=30 c=162 k=162 r=3 s=3 pad=1 stride=2 groups=162",
    "n=2 h=11 w=6 c=36 k=36 r=5 s=5 pad=2 stride=1 groups=36",
    "n=1 h=15 w=15 c=90 k=90 r=5 s=5 pad=2 stride=2 groups=90",
    "n=2 h=14 w=14 c=702 k=702 r=3 s=3 pad=1 stride=1 groups=702",
    "n=1 h=1 w=33 c=12 k=12 r=3 s=3 pad=1 stride=1 groups=12",
    "n=2 h=6 w=5 c=20 k=20 r=3 s=3 pad=3 stride=1 groups=20",
    "n=4 h=29 w=27 c=300 k=300 r=3 s=3 pad=1 stride=2 groups=300",
    "n=2 h=12 w=12 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=64",
    "n=2 h=12 w=12 c=27 k=27 r=3 s=3 pad=1 stride=1 groups=27",
    "n=2 h=10 w=9 c=90 k=90 r=7 s=7 pad=3 stride=1 groups=90",
    "n=1 h=13 w=19 c=36 k=36 r=7 s=7 pad=3 stride=2 groups=36",
    "n=2 h=7 w=7 c=300 k=300 r=5 s=5 pad=2 stride=1 groups=300",
    "n=1 h=9 w=9 c=20 k=20 r=7 s=7 pad=3 stride=2 groups=20",
    # 9x9 (MixNet's), of 2 and 4 channels a copy, stride 1 and 2, images smaller than the filter
    "n=2 h=14 w=13 c=90 k=90 r=9 s=9 pad=4 stride=1 groups=90",
    "n=3 h=7 w=7 c=300 k=300 r=9 s=9 pad=4 stride=1 groups=300",
    "n=2 h=15 w=14 c=180 k=180 r=9 s=9 pad=4 stride=2 groups=180",
    "n=1 h=11 w=9 c=26 k=26 r=9 s=9 pad=4 stride=2 groups=26",
]


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace("access = 4", "access = 16"), "access", "16"),
    (FIRST.replace("access = 4", "access = 2"), "access", "2"),
    (FIRST.replace(" }", ', loader = "tma" }'), "loader", "unknown key"),
    (FIRST.replace(" }", ", threads = 128 }"), "threads", "unknown key"),
    (FIRST.replace(", access = 4", ""), "access", "missing"),
    (FIRST.replace("rows = 8, thread_rows = 4", "rows = 32, thread_rows = 1"), "rows",
     "rows 32 in thread rows of 1 do not divide the 16 threads"),
    (FIRST.replace("columns = 4", "columns = 8").replace(" }", ", stages = 6 }"), "stages",
     "6 stages of the tile's input and taps need 256896 bytes of shared memory, more than 232448"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "family.toml"
    path.write_text(FAMILY.replace(FIRST, entry))
    assert_family_refused(path, "kernels[0]", key, message)


def test_the_name_says_its_copies_and_the_tile_is_the_16_byte_kernels():
    kernels = load_family(SPEC)
    first = kernels[0]
    assert first.name == ("kernelgen_sm80_simt_dwconv_pairs_f16nhwc_f16nhwc_f32_f16nhwc_3x3_stride1_tile8x32_t4x4_c32"
                          "_s3_a4")
    assert (first.arch, first.includes, first.accumulator) == (80, ("depthwise_pairs.h",), "f32")
    # three stages of a 10 x 34 window of 32 channels and its taps, 16 bytes a pixel's 8 channels
    assert first.shared_bytes() == 3 * (10 * 34 + 9) * 4 * 16
    assert {k.access for k in kernels} == {4, 8} and len({k.name for k in kernels}) == len(kernels)


def test_the_fp16_sums_say_so_in_name_type_and_tolerance():
    from kernelgen import render
    from kernelgen.vocab import VERIFY_TOLERANCE, verify_tolerance

    half = load_family(HALF)[0]
    twin = next(k for k in load_family(SPEC) if k.values() == {**half.values(), "half": False})
    assert half.name == twin.name.replace("_pairs_f16nhwc_f16nhwc_f32_", "_pairs_half2_f16nhwc_f16nhwc_f16_")
    assert verify_tolerance(half) == VERIFY_TOLERANCE["f16"] > verify_tolerance(twin) == VERIFY_TOLERANCE["f32"]
    assert half.shared_bytes() == twin.shared_bytes() and half.registers() < twin.registers()
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, half).rstrip().endswith(", 3, 4, true>;")
    assert render.type_definition(templates, twin).rstrip().endswith(", 3, 4>;")
    assert theta_group(half) == "DepthwisePairsHalf"


@pytest.mark.parametrize("c, access, why", [
    (162, 4, None),
    (702, 4, None),
    (300, 8, None),
    (300, 4, None),
    (162, 8, "C must be a multiple of 4 (8-byte copies along C)"),
    (27, 4, "C must be a multiple of 2 (4-byte copies along C)"),
    (96, 4, "C a multiple of 8: the 16-byte kernels (depthwise.toml) take it"),
    (96, 8, "C a multiple of 8: the 16-byte kernels (depthwise.toml) take it"),
])
def test_a_kernel_serves_the_channels_its_copies_divide_and_the_16_byte_kernels_cannot(c, access, why):
    kernel = next(k for k in load_family(SPEC) if (k.filter, k.stride, k.access) == (3, 1, access))
    layer = Conv2dProblem(32, 28, 28, c, c, 3, 3, 1, 1, 1, 1, 1, 1, groups=c)
    assert serves(kernel, layer) == why


def test_a_kernel_refuses_other_filters_strides_and_grouped_layers():
    kernel = next(k for k in load_family(SPEC) if (k.filter, k.stride) == (3, 2))

    def layer(c=162, k=162, r=3, stride=2, dilation=1, groups=None):
        return Conv2dProblem(32, 28, 28, c, k, r, r, r // 2, r // 2, stride, stride, dilation, dilation,
                             groups=c if groups is None else groups)

    assert serves(kernel, layer()) is None
    assert serves(kernel, layer(stride=1)) == "built for 3x3 filters, stride 2"
    assert serves(kernel, layer(r=5)) == "built for 3x3 filters, stride 2"
    assert serves(kernel, layer(dilation=2)) == "built for dilation 1"
    assert serves(kernel, layer(k=324)) == "a depthwise kernel: needs groups = C = K"


def test_the_cost_model_weighs_the_family_apart_from_the_16_byte_kernels():
    """A group of its own: until its rows are fitted, the build measures every kernel of it on the
    layers it serves (candidates.unfitted), rather than ranking it by the 16-byte kernels' weights."""
    from kernelgen import candidates
    from kernelgen.cost_model import load_model

    pairs = load_family(SPEC)[0]
    sixteen = load_family(ROOT / "kernel_specs" / "families" / "depthwise.toml")[0]
    assert theta_group(pairs) == "DepthwisePairs" != theta_group(sixteen)
    model = load_model("nvidia_h200")
    assert candidates.unfitted(model, pairs) is (theta_group(pairs) not in model.theta)


def test_a_build_proposes_every_kernel_of_both_families_on_the_odd_layers_they_serve_until_fitted():
    """ReXNet-1.0's 14x14 layer of 702 channels (C a multiple of 2) with a model of no rows of the
    two families (the committed one until they are measured on the H200; their groups taken out of
    it otherwise): every 3x3 stride-1 kernel of 4-byte copies, fp32 and fp16 sums, proposed besides
    the model's top 3 as unfitted; a layer of 96 channels gets none of them."""
    import dataclasses

    from kernelgen import candidates
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    catalog = load_catalog(ROOT / "kernel_specs" / "families")
    committed = load_model("nvidia_h200")
    model = dataclasses.replace(committed, theta={g: t for g, t in committed.theta.items()
                                                  if g not in ("DepthwisePairs", "DepthwisePairsHalf")})
    odd, even = (Conv2dProblem(32, 14, 14, c, c, 3, 3, 1, 1, 1, 1, 1, 1, groups=c) for c in (702, 96))
    first, second = candidates.propose([odd, even], catalog, model, 3)
    staged = {k.name for k in load_family(SPEC) + load_family(HALF) if (k.filter, k.stride, k.access) == (3, 1, 4)}
    assert len(staged) == 9 and staged <= first.unranked <= {k.name for _, k in first.ranked}
    assert len(first.ranked) >= len(first.unranked) + 3, "and the model's top 3 of the kernels it can rank"
    assert not any("_dwconv_pairs_" in k.name for _, k in second.ranked)


@requires_nvcc
def test_a_kernel_of_each_access_and_sums_compiles_as_the_profiler_builds_it(tmp_path):
    kernels = load_family(SPEC)
    assert_kernels_compile(tmp_path, [next(k for k in kernels if k.access == a) for a in (4, 8)] + load_family(HALF)[:1])


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    """fp32 sums within 1e-3, fp16 sums of 9 to 81 products within 5e-3 (the profiler's own check
    allows fp16 accumulation's 2e-2)."""
    kernels = {k.name: k for k in load_family(SPEC) + load_family(HALF)}
    for problem, frame in profile_layers(tmp_path, LAYERS, ",".join(kernels)):  # no band's (1xS, Rx1)
        assert_served_rows_verify(problem, frame, kernels, limit={"f32": 1e-3, "f16": 5e-3})
