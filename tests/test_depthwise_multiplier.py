"""The depthwise family of a channel multiplier (profiler/depthwise_multiplier.h,
site_scons/kernelgen/families/depthwise_multiplier.py): its spec checks refuse entries the kernel
cannot build, naming file, entry and key; a kernel serves the layers of groups = C, K = 2C of its
filter and stride and says why it refuses the others; the model has no rows of it, so a build
measures each of its kernels on the layers it serves (FastViT's, which only the direct kernels of
any channels a group served); a kernel compiles as the profiler builds it; on a GPU every kernel
computes small odd layers (within fp16 accumulation's error) or refuses them as the Python side says."""

import pytest

from conftest import (ROOT, assert_entry_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves, theta_group
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_multiplier.toml"
FIRST = "{ filter = 7, stride = 2, rows = 8, thread_rows = 4, columns = 2, channel_vectors = 4, threads = 128 }"
# K = 2C at stride 1 and 2, 1x1 to 7x7 filters, paddings past the image, images smaller than a tile
# and than the filter, the last block of output channels partly outside the layer (K = 80 of 32 a
# block); then layers each kernel refuses: K = C, K = 4C, C no multiple of 8, a grouped layer
LAYERS = [
    "n=2 h=13 w=17 c=40 k=80 r=7 s=7 pad=3 stride=2 groups=40",
    "n=3 h=9 w=9 c=64 k=128 r=7 s=7 pad=3 stride=2 groups=64",
    "n=2 h=15 w=11 c=24 k=48 r=3 s=3 pad=1 stride=2 groups=24",
    "n=2 h=8 w=8 c=48 k=96 r=3 s=3 pad=1 stride=1 groups=48",
    "n=1 h=5 w=7 c=32 k=64 r=3 s=3 pad=2 stride=1 groups=32",
    "n=2 h=8 w=9 c=40 k=80 r=1 s=1 pad=0 stride=1 groups=40",
    "n=2 h=13 w=17 c=40 k=40 r=7 s=7 pad=3 stride=2 groups=40",
    "n=2 h=13 w=17 c=16 k=64 r=7 s=7 pad=3 stride=2 groups=16",
    "n=2 h=8 w=8 c=12 k=24 r=3 s=3 pad=1 stride=1 groups=12",
    "n=2 h=8 w=8 c=48 k=96 r=3 s=3 pad=1 stride=1 groups=24",
]


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace(" }", ", multiplier = 3 }"), "multiplier", "3 is not one of 2, 4"),
    (FIRST.replace(" }", ', sums = "rows" }'), "sums", "unknown key"),
    (FIRST.replace(" }", ', taps = "first" }'), "taps", "unknown key"),  # depthwise_multiplier.h's order only
    (FIRST.replace("filter = 7", "filter = 2"), "filter", "2 is not one of 1, 3, 5, 7, 9, 11"),
    (FIRST.replace(" }", ", multiplier = 4 }").replace("channel_vectors = 4", "channel_vectors = 2").replace(
        "rows = 8, thread_rows = 4", "rows = 4, thread_rows = 4"), "channel_vectors",
     "channel_vectors 2 is no multiple of the multiplier 4: a copy's row of 4 input channels is no 16-byte multiple"),
    (FIRST.replace("rows = 8, thread_rows = 4", "rows = 16, thread_rows = 1"), "rows",
     "rows 16 in thread rows of 1 do not divide the 8 threads"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    assert_entry_refused(tmp_path, "depthwise_multiplier", entry, key, message, 'f16')


def test_the_name_says_its_multiplier_and_the_window_holds_the_blocks_input_channels():
    from kernelgen import render
    from kernelgen.vocab import VERIFY_TOLERANCE, verify_tolerance

    kernel = load_family(SPEC)[0]
    assert kernel.name == ("kernelgen_sm90_simt_dwconv_m2_half2_f16nhwc_f16nhwc_f16_f16nhwc_7x7_stride2_tile8x8_t4x2"
                           "_c32_s3_tma_cta128")
    assert (kernel.arch, kernel.includes, kernel.accumulator) == (90, ("depthwise_multiplier.h",), "f16")
    assert verify_tolerance(kernel) == VERIFY_TOLERANCE["f16"]
    # three stages of a 21 x 21 window of the block's 16 input channels (2 bytes each, 128-byte
    # aligned), the block's 32 output channels' 49 taps once
    assert kernel.input_channels() == 16
    assert kernel.shared_bytes() == 3 * -(-21 * 21 * 16 * 2 // 128) * 128 + 49 * 4 * 16
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, kernel).rstrip().endswith(
        "kernelgen::DepthwiseMultiplier<7, 7, 2, 8, 4, 2, 4, 3, 128, 2, false>;")


def layer(c=48, k=96, r=7, stride=2, dilation=1, groups=None):
    return Conv2dProblem(32, 64, 64, c, k, r, r, r // 2, r // 2, stride, stride, dilation, dilation,
                         groups=c if groups is None else groups)


@pytest.mark.parametrize("problem, why", [
    (layer(), None),
    (layer(c=192, k=384), None),
    (layer(k=48), "a depthwise kernel of channel multiplier 2: needs groups = C, K = 2 * C"),
    (layer(k=192), "a depthwise kernel of channel multiplier 2: needs groups = C, K = 2 * C"),
    (layer(groups=24), "a depthwise kernel of channel multiplier 2: needs groups = C, K = 2 * C"),
    (layer(stride=1), "built for 7x7 filters, stride 2"),
    (layer(r=3), "built for 7x7 filters, stride 2"),
    (layer(dilation=2), "built for dilation 1"),
    (layer(c=36, k=72), "C must be a multiple of 8"),
])
def test_a_kernel_serves_the_layers_of_its_multiplier_filter_and_stride(problem, why):
    kernel = next(k for k in load_family(SPEC) if (k.filter, k.stride, k.launch) == (7, 2, "stream"))
    assert serves(kernel, problem) == why


def test_the_depthwise_kernels_refuse_a_multiplier_and_these_refuse_depthwise_layers():
    half = next(k for k in load_family(ROOT / "kernel_specs" / "families" / "depthwise_half.toml")
                if (k.filter, k.stride) == (7, 2))
    assert serves(half, layer()) == "a depthwise kernel: needs groups = C = K"
    assert serves(half, layer(k=48)) is None


def test_a_build_measures_each_kernel_on_the_multiplier_layers_it_serves_until_fitted():
    """A group of its own that the committed model has no rows of: every kernel of the family that
    serves a FastViT layer is proposed (unranked) beside the model's top 3, none on a depthwise layer."""
    from kernelgen import candidates
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    model = load_model("nvidia_h200")
    family = load_family(SPEC)
    assert theta_group(family[0]) == "DepthwiseMultiplier" and candidates.unfitted(model, family[0])
    fastvit = Conv2dProblem(32, 64, 64, 48, 96, 7, 7, 3, 3, 2, 2, 1, 1, groups=48)
    depthwise = Conv2dProblem(32, 64, 64, 48, 48, 7, 7, 3, 3, 2, 2, 1, 1, groups=48)
    first, second = candidates.propose([fastvit, depthwise], load_catalog(SPEC.parent), model, 3)
    served = {k.name for k in family if (k.filter, k.stride) == (7, 2)}
    assert len(served) == 3 and served <= first.unranked
    assert not {k.name for k in family} & ({k.name for _, k in second.ranked} | second.unranked)


@requires_nvcc
def test_a_kernel_compiles_as_the_profiler_builds_it(tmp_path):
    assert_kernels_compile(tmp_path, [next(k for k in load_family(SPEC) if k.launch == "pdl")])


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    """Within 5e-3 (fp16 sums of 1 to 49 products of operands in [-1, 1)), where the profiler's
    own check allows fp16 accumulation's 2e-2."""
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm90_simt_dwconv_m2_*"):
        assert_served_rows_verify(problem, frame, kernels, limit=5e-3)
