"""The depthwise families of band filters (site_scons/kernelgen/families/depthwise_band.py: the
fp16-pair tensor-copy kernel of profiler/depthwise_half.h at R x S = 1 x S or R x 1; and
depthwise_pairs_band.py: the staged kernels of narrow copies of profiler/depthwise_pairs.h, for
channel counts no multiple of 8): its spec
checks refuse a filter that is no band, naming file, entry and key; the kernels of the square
filters are what they were (a band is the family's own); a kernel serves the depthwise layers of its
band and stride and says why it refuses the others; the model has no rows of it, so a build measures
each of its kernels on the layers it serves; a kernel compiles as the profiler builds it; on a GPU
every kernel computes small odd layers (within fp16 accumulation's error) or refuses them."""

import pytest

from conftest import (ROOT, assert_entry_refused, assert_family_refused, assert_kernels_compile, assert_served_rows_verify,
                      profile_layers, requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves, theta_group
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_band.toml"
PAIRS = ROOT / "kernel_specs" / "families" / "depthwise_pairs_band.toml"
FIRST = "{ filter = [1, 5], stride = 1, rows = 8, thread_rows = 4, columns = 2, channel_vectors = 4, threads = 128 }"
# 1x5, 5x1, 1x11 and 11x1 at stride 1, paddings of the band's side only, images smaller than a
# tile and than the band, the last channel block partly outside the layer; then layers each kernel
# refuses: a square filter, C no multiple of 8, a channel multiplier
LAYERS = [
    "n=2 h=13 w=17 c=72 k=72 r=1 s=5 pad_h=0 pad_w=2 stride=1 groups=72",
    "n=2 h=13 w=17 c=72 k=72 r=5 s=1 pad_h=2 pad_w=0 stride=1 groups=72",
    "n=3 h=3 w=3 c=200 k=200 r=1 s=5 pad_h=0 pad_w=2 stride=1 groups=200",
    "n=3 h=3 w=3 c=200 k=200 r=5 s=1 pad_h=2 pad_w=0 stride=1 groups=200",
    "n=2 h=14 w=9 c=48 k=48 r=1 s=11 pad_h=0 pad_w=5 stride=1 groups=48",
    "n=2 h=9 w=14 c=48 k=48 r=11 s=1 pad_h=5 pad_w=0 stride=1 groups=48",
    "n=1 h=7 w=7 c=96 k=96 r=1 s=11 pad_h=0 pad_w=5 stride=1 groups=96",
    "n=1 h=7 w=7 c=96 k=96 r=11 s=1 pad_h=5 pad_w=0 stride=1 groups=96",
    "n=2 h=8 w=8 c=72 k=72 r=5 s=5 pad=2 stride=1 groups=72",
    "n=2 h=8 w=8 c=12 k=12 r=1 s=11 pad_h=0 pad_w=5 stride=1 groups=12",
    "n=2 h=8 w=8 c=48 k=96 r=1 s=5 pad_h=0 pad_w=2 stride=1 groups=48",
    # InceptionNeXt's first bands (12 channels: the pairs kernels) and of 2 channels a copy
    "n=2 h=19 w=23 c=12 k=12 r=1 s=11 pad_h=0 pad_w=5 stride=1 groups=12",
    "n=2 h=23 w=19 c=12 k=12 r=11 s=1 pad_h=5 pad_w=0 stride=1 groups=12",
    "n=1 h=9 w=13 c=26 k=26 r=1 s=11 pad_h=0 pad_w=5 stride=1 groups=26",
]


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace("[1, 5]", "[5, 5]"), "filter", "[5, 5] is no band: [1, S] or [R, 1], the other one of 3, 5, 7, 9, 11"),
    (FIRST.replace("[1, 5]", "[1, 4]"), "filter", "[1, 4] is no band"),
    (FIRST.replace("[1, 5]", "[1, 1]"), "filter", "[1, 1] is no band"),
    (FIRST.replace("[1, 5]", "[1, 5, 1]"), "filter", "expected a list of 2 integers"),
    (FIRST.replace("[1, 5]", "5"), "filter", "expected a list of 2 integers"),
    (FIRST.replace(" }", ', launch = "graph" }'), "launch", "'graph'"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    assert_entry_refused(tmp_path, "depthwise_band", entry, key, message, 'f16')


def test_the_name_and_type_say_the_band_and_the_window_is_r_by_s():
    from kernelgen import render

    rows, columns = (next(k for k in load_family(SPEC) if k.filter == f and k.rows == 8 and k.launch == "stream")
                     for f in ((1, 5), (5, 1)))
    assert rows.name == ("kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_1x5_stride1_tile8x8_t4x2_c32_s3"
                         "_tma_cta128")
    assert columns.name == rows.name.replace("_1x5_", "_5x1_")
    assert (rows.arch, rows.includes, rows.accumulator) == (90, ("depthwise_half.h",), "f16")
    # 8 output rows of one input row each by 8 columns of 12; the taps 5 a channel
    assert rows.window() == (8, 12) and columns.window() == (12, 8)
    assert rows.shared_bytes() == 3 * -(-8 * 12 * 4 * 16 // 128) * 128 + 5 * 4 * 16 == columns.shared_bytes()
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, rows).rstrip().endswith(
        "kernelgen::DepthwiseHalf<1, 5, 1, 8, 4, 2, 4, 3, 128, kernelgen::depthwise::Sums::kHalf, false>;")
    assert render.type_definition(templates, columns).rstrip().endswith(
        "kernelgen::DepthwiseHalf<5, 1, 1, 8, 4, 2, 4, 3, 128, kernelgen::depthwise::Sums::kHalf, false>;")


def test_a_square_filters_kernels_keep_their_names_and_types():
    """The square kernels' type definitions render R = S = filter, as before bands were added."""
    from kernelgen import render

    half = next(k for k in load_family(ROOT / "kernel_specs" / "families" / "depthwise_half.toml")
                if (k.filter, k.stride, k.tile_columns(), k.launch, k.sums) == (5, 2, 8, "stream", "f16"))
    assert half.filter_shape == (5, 5) and "_5x5_stride2_" in half.name
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert "kernelgen::DepthwiseHalf<5, 5, 2, 8, 4, 2, 4, 3, 128," in render.type_definition(templates, half)


def band_layer(r=1, s=5, c=72, k=None, stride=1, dilation=1):
    return Conv2dProblem(32, 28, 28, c, c if k is None else k, r, s, r // 2, s // 2, stride, stride, dilation, dilation,
                         groups=c)


@pytest.mark.parametrize("problem, why", [
    (band_layer(), None),
    (band_layer(c=960), None),
    (band_layer(r=5, s=1), "built for 1x5 filters, stride 1"),
    (band_layer(r=5, s=5), "built for 1x5 filters, stride 1"),
    (band_layer(s=11), "built for 1x5 filters, stride 1"),
    (band_layer(stride=2), "built for 1x5 filters, stride 1"),
    (band_layer(dilation=2), "built for dilation 1"),
    (band_layer(c=12), "C must be a multiple of 8"),
    (band_layer(k=144), "a depthwise kernel: needs groups = C = K"),
])
def test_a_kernel_serves_the_depthwise_layers_of_its_band(problem, why):
    kernel = next(k for k in load_family(SPEC) if k.filter == (1, 5) and k.rows == 8 and k.launch == "stream")
    assert serves(kernel, problem) == why


def test_a_build_measures_each_kernel_on_the_band_layers_it_serves_until_fitted():
    """A group of its own that the committed model has no rows of: every kernel of the family that
    serves GhostNetV2's 1x5 layer is proposed (unranked) beside the model's top 3, none on a 5x5 layer."""
    from kernelgen import candidates
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    model = load_model("nvidia_h200")
    family = load_family(SPEC)
    assert theta_group(family[0]) == "DepthwiseBand" and candidates.unfitted(model, family[0])
    first, second = candidates.propose([band_layer(), band_layer(r=5, s=5)], load_catalog(SPEC.parent), model, 3)
    served = {k.name for k in family if k.filter == (1, 5)}
    assert len(served) == 3 and served <= first.unranked
    assert not {k.name for k in family} & ({k.name for _, k in second.ranked} | second.unranked)


@pytest.mark.parametrize("c, access, why", [
    (12, 8, None), (12, 4, None), (26, 4, None),
    (26, 8, "C must be a multiple of 4 (8-byte copies along C)"),
    (48, 4, "C a multiple of 8: the 16-byte kernels (depthwise.toml) take it"),
])
def test_a_pairs_kernel_serves_the_bands_of_channels_its_copies_divide(c, access, why):
    kernel = next(k for k in load_family(PAIRS) if k.filter == (1, 11) and k.access == access)
    assert serves(kernel, band_layer(s=11, c=c)) == why
    assert serves(kernel, band_layer(r=11, s=1, c=c)) == "built for 1x11 filters, stride 1"


def test_a_pairs_kernel_is_named_and_typed_by_its_band_and_measured_in_full_until_fitted():
    from kernelgen import candidates, render
    from kernelgen.cost_model import load_model

    kernel = next(k for k in load_family(PAIRS) if k.filter == (11, 1) and k.access == 8)
    assert kernel.name == ("kernelgen_sm80_simt_dwconv_pairs_half2_f16nhwc_f16nhwc_f16_f16nhwc_11x1_stride1_tile8x32_t4x2"
                           "_c16_s3_a8")
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, kernel).rstrip().endswith(
        "kernelgen::DepthwisePairs<__half, 11, 1, 1, 8, 4, 2, 2, 3, 8, true>;")
    assert kernel.window() == (18, 32) and kernel.shared_bytes() == 3 * (18 * 32 + 11) * 2 * 16
    assert theta_group(kernel) == "DepthwisePairsBand" and candidates.unfitted(load_model("nvidia_h200"), kernel)


@pytest.mark.parametrize("path", [SPEC, PAIRS])
def test_a_pairs_or_tensor_copy_kernel_refuses_a_filter_that_is_no_band(tmp_path, path):
    text = path.read_text()
    first = next(line for line in text.splitlines() if line.strip().startswith("{ filter = [1, 11]"))
    family = tmp_path / "family.toml"
    family.write_text(text.replace(first, first.replace("[1, 11]", "[3, 11]"), 1))
    assert_family_refused(family, f"kernels[{text.splitlines().index(first) - text.splitlines().index('kernels = [') - 1}]",
                          "filter", "[3, 11] is no band")


@requires_nvcc
def test_a_kernel_of_each_orientation_compiles_as_the_profiler_builds_it(tmp_path):
    kernels = load_family(SPEC)
    assert_kernels_compile(tmp_path, [next(k for k in kernels if k.filter == f) for f in ((1, 11), (11, 1))]
                           + load_family(PAIRS)[:1])


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    """Within 5e-3 (fp16 sums of 5 to 11 products of operands in [-1, 1)), where the profiler's own
    check allows fp16 accumulation's 2e-2."""
    kernels = {k.name: k for k in load_family(SPEC) + load_family(PAIRS)}
    names = ",".join(kernels)
    for problem, frame in profile_layers(tmp_path, LAYERS, names):
        assert_served_rows_verify(problem, frame, kernels, limit=5e-3)
