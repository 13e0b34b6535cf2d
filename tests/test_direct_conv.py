"""The direct grouped kernels (profiler/direct_conv.h; site_scons/kernelgen/families/depthwise_narrow.py
for depthwise layers of C not a multiple of 8, depthwise_rows.py (profiler/depthwise_rows.h) for
those at one stride, depthwise_flat.py (profiler/depthwise_flat.h) for even C at one stride,
depthwise_strip.py (profiler/strip_conv.h) for even C at one stride, walking rows,
depthwise_strip_half.py (the same in fp16 pairs), grouped_strip.py (the same) for groups of 8
channels, grouped_direct.py for any channels a group): each
spec refuses what its family cannot build, naming file, entry and key; names say every parameter
that changes the code; ``serves`` refuses what can_implement refuses and takes any stride, padding
and dilation; the layers no other kernel serves (ShuffleNetV2's 58 channels, groups of 12 and 20
channels) get candidates of these families; one kernel of each compiles for sm_90a through
the rendering; every kernel's work items, run on the CPU, compute small odd layers; and on a GPU
every kernel verifies on those layers where it says it serves them and reports the others
unsupported."""

import subprocess
from dataclasses import replace

import pytest

from conftest import (ROOT, assert_family_refused, assert_kernels_compile, assert_served_rows_verify, profile_layers,
                      requires_gpu, requires_nvcc)
from kernelgen import candidates, render
from kernelgen.cost_model import load_model, serves
from kernelgen.families.depthwise_flat import DepthwiseFlat
from kernelgen.families.depthwise_narrow import DepthwiseNarrow
from kernelgen.families.depthwise_rows import DepthwiseRows
from kernelgen.families.depthwise_strip import DepthwiseStrip
from kernelgen.families.depthwise_strip_half import DepthwiseStripHalf
from kernelgen.families.grouped_direct import GroupedDirect
from kernelgen.families.grouped_strip import GroupedStrip
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family
from kernelgen.workloads import parse_workloads

FAMILIES = ROOT / "kernel_specs" / "families"
TEMPLATES = ROOT / "kernel_specs" / "templates"
SPECS = {"depthwise_narrow": FAMILIES / "depthwise_narrow.toml", "depthwise_rows": FAMILIES / "depthwise_rows.toml",
         "depthwise_flat": FAMILIES / "depthwise_flat.toml", "depthwise_strip": FAMILIES / "depthwise_strip.toml",
         "depthwise_strip_half": FAMILIES / "depthwise_strip_half.toml",
         "grouped_direct": FAMILIES / "grouped_direct.toml", "grouped_strip": FAMILIES / "grouped_strip.toml"}
CLASSES = {"depthwise_narrow": DepthwiseNarrow, "depthwise_rows": DepthwiseRows, "depthwise_flat": DepthwiseFlat,
           "depthwise_strip": DepthwiseStrip, "depthwise_strip_half": DepthwiseStripHalf, "grouped_direct": GroupedDirect,
           "grouped_strip": GroupedStrip}


def family(tmp_path, kind, entry, accumulator=None):
    """A one-entry spec of ``kind`` (fp32 sums but for the fp16-pair family, unless given)."""
    accumulator = accumulator or ("f16" if kind == "depthwise_strip_half" else "f32")
    path = tmp_path / "family.toml"
    path.write_text(f'kind = "{kind}"\ndescription = "test"\nelement = "f16"\naccumulator = "{accumulator}"\noutput = "f16"\n'
                    f"kernels = [\n  {entry},\n]\n")
    return path


@pytest.mark.parametrize("kind, entry, key, message", [
    ("depthwise_narrow", "{ filter = 4, vector = 2, columns = 2 }", "filter", '4 is not one of 3, 5, 7 or "any"'),
    ("depthwise_narrow", '{ filter = "all", vector = 2, columns = 2 }', "filter", "'all' is not one of 3, 5, 7 or \"any\""),
    ("depthwise_narrow", "{ filter = true, vector = 2, columns = 2 }", "filter", 'True is not one of 3, 5, 7 or "any"'),
    ("depthwise_narrow", "{ filter = 3, vector = 4, columns = 2 }", "vector", "4 is not one of 1, 2"),
    ("depthwise_narrow", "{ filter = 3, vector = 2, columns = 9 }", "columns", "9 is outside [1, 8]"),
    ("depthwise_narrow", "{ filter = 3, vector = 2 }", "columns", "missing"),
    ("depthwise_rows", "{ filter = 3, vector = 2, columns = 4, stride = 3 }", "stride", "3 is not one of 1, 2"),
    ("depthwise_rows", "{ filter = 3, vector = 2, columns = 4 }", "stride", "missing"),
    ("depthwise_rows", "{ filter = 3, vector = 4, columns = 4, stride = 1 }", "vector", "4 is not one of 1, 2"),
    ("depthwise_rows", "{ filter = 3, vector = 2, columns = 4, stride = 1, dilation = 2 }", "dilation", "unknown key"),
    ("depthwise_rows", "{ filter = 3, vector = 2, columns = 4, stride = 1, rows = 9 }", "rows", "9 is outside [1, 8]"),
    ("depthwise_flat", "{ filter = 4, stride = 1, rows = 2 }", "filter", "4 is not one of 3, 5, 7"),
    ("depthwise_flat", "{ filter = 3, stride = 1, rows = 0 }", "rows", "0 is outside [1, 8]"),
    ("depthwise_flat", "{ filter = 3, stride = 1 }", "rows", "missing"),
    ("depthwise_flat", "{ filter = 3, rows = 1 }", "stride", "missing"),
    ("depthwise_flat", "{ filter = 3, stride = 3, rows = 1 }", "stride", "3 is not one of 1, 2"),
    ("depthwise_flat", "{ filter = 3, stride = 1, rows = 2, vector = 2 }", "vector", "unknown key"),
    ("depthwise_strip", "{ filter = 7, stride = 1, columns = 4, lanes = 1 }", "filter", "7 is not one of 3, 5"),
    ("depthwise_strip", "{ filter = 3, stride = 3, columns = 4, lanes = 1 }", "stride", "3 is not one of 1, 2"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 9, lanes = 1 }", "columns", "9 is outside [1, 8]"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 4, lanes = 0 }", "lanes", "0 is outside [1, 8]"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 4 }", "lanes", "missing"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 4, lanes = 1, launch = \"graph\" }", "launch", "graph"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 4, lanes = 1, rows = 2 }", "rows", "unknown key"),
    ("depthwise_strip", "{ filter = 3, stride = 1, columns = 4, lanes = 1, vector = 8 }", "vector", "8 is not one of 2, 4"),
    ("depthwise_strip_half", "{ filter = 9, stride = 1, columns = 4, lanes = 1 }", "filter", "9 is not one of 3, 5, 7"),
    ("depthwise_strip_half", "{ filter = 7, stride = 1, columns = 4, lanes = 1, vector = 4 }", "vector", "unknown key"),
    ("depthwise_strip_half", "{ filter = 7, stride = 1, lanes = 1 }", "columns", "missing"),
    ("grouped_strip", "{ filter = 3, channels = 16, stride = 1, columns = 4, lanes = 1 }", "channels", "16 is not one of 4, 8"),
    ("grouped_strip", "{ filter = 5, channels = 8, stride = 1, columns = 4, lanes = 1 }", "channels", "do not fit"),
    ("grouped_strip", "{ filter = 3, stride = 1, columns = 4, lanes = 1 }", "channels", "missing"),
    ("grouped_strip", "{ filter = 3, channels = 8, stride = 1, columns = 4, lanes = 1, vector = 2 }", "vector", "unknown key"),
    ("grouped_direct", "{ filter = 4, vector = 2, columns = 2 }", "filter", '4 is not one of 1, 3, 5, 7 or "any"'),
    ("grouped_direct", "{ filter = 3, vector = 8, columns = 2 }", "vector", "8 is not one of 1, 2, 4"),
    ("grouped_direct", "{ filter = 3, vector = 2, columns = 0 }", "columns", "0 is outside [1, 8]"),
    ("grouped_direct", "{ filter = 3, vector = 2, columns = 2, rows = 2 }", "rows", "unknown key"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, kind, entry, key, message):
    path = family(tmp_path, kind, entry)
    assert_family_refused(path, "kernels[0]", key, message)


def test_the_fp16_pair_family_refuses_fp32_sums_naming_the_key(tmp_path):
    path = family(tmp_path, "depthwise_strip_half", "{ filter = 7, stride = 1, columns = 8, lanes = 1 }", "f32")
    assert_family_refused(path, None, "accumulator", "written for accumulator f16, not f32")


def test_names_are_unique_and_say_every_parameter():
    kernels = [cls("t", f, v, q, element=e) for cls in (DepthwiseNarrow, GroupedDirect) for f in (3, 5, 7, "any")
               for v in (1, 2) for q in (1, 2, 4, 8) for e in ("f16", "bf16")]
    kernels += [DepthwiseRows("t", f, v, q, element=e, stride=st, rows=tp) for f in (3, 5, 7) for v in (1, 2)
                for q in (1, 2, 4, 8) for e in ("f16", "bf16") for st in (1, 2) for tp in (1, 2, 4)]
    kernels += [DepthwiseFlat("t", f, element=e, rows=tp, stride=st) for f in (3, 5, 7) for e in ("f16", "bf16")
                for tp in (1, 2, 4, 8) for st in (1, 2)]
    kernels += [DepthwiseStrip("t", f, v, element=e, stride=st, columns=q, lanes=l, launch=launch) for f in (3, 5)
                for e in ("f16", "bf16") for st in (1, 2) for q in (1, 4, 7) for l in (1, 2, 8) for launch in ("stream", "pdl")
                for v in (2, 4)]
    kernels += [DepthwiseStripHalf("t", f, stride=st, columns=q, lanes=l, launch=launch) for f in (3, 5, 7)
                for st in (1, 2) for q in (1, 4, 7, 8) for l in (1, 2) for launch in ("stream", "pdl")]
    kernels += [GroupedStrip("t", f, element=e, stride=st, columns=q, lanes=l, launch=launch, channels=g)
                for f in (3, 5) for e in ("f16", "bf16") for st in (1, 2) for q in (1, 4, 7) for l in (1, 2)
                for launch in ("stream", "pdl") for g in (4, 8)]
    assert len({k.name for k in kernels}) == len(kernels)
    templates = render.lookup(TEMPLATES)
    types = {render.type_definition(templates, k).replace(k.name, "NAME") for k in kernels}
    assert len(types) == len(kernels), "two names of one type"
    assert DepthwiseNarrow("t", 5, 2, 4).name == "kernelgen_sm80_simt_dwconv_narrow_f16nhwc_f16nhwc_f32_f16nhwc_5x5_v2_q4"
    assert DepthwiseRows("t", 7, 2, 4, stride=2).name == \
        "kernelgen_sm80_simt_dwconv_rows_f16nhwc_f16nhwc_f32_f16nhwc_7x7_stride2_v2_q4"
    assert DepthwiseRows("t", 3, 2, 8, stride=1, rows=2).name == \
        "kernelgen_sm80_simt_dwconv_rows_f16nhwc_f16nhwc_f32_f16nhwc_3x3_stride1_p2_v2_q8"
    assert DepthwiseFlat("t", 5, rows=2).name == "kernelgen_sm80_simt_dwconv_flat_f16nhwc_f16nhwc_f32_f16nhwc_5x5_stride1_p2"
    assert DepthwiseFlat("t", 3, rows=1, stride=2).name == \
        "kernelgen_sm80_simt_dwconv_flat_f16nhwc_f16nhwc_f32_f16nhwc_3x3_stride2_p1"
    assert DepthwiseStrip("t", 3, columns=7, lanes=2).name == \
        "kernelgen_sm80_simt_dwconv_strip_f16nhwc_f16nhwc_f32_f16nhwc_3x3_stride1_q7x2"
    assert DepthwiseStrip("t", 5, stride=2, columns=4, lanes=1, launch="pdl").name == \
        "kernelgen_sm90_simt_dwconv_strip_f16nhwc_f16nhwc_f32_f16nhwc_5x5_stride2_q4x1_pdl"
    assert DepthwiseStrip("t", 3, 4, columns=7, lanes=1, launch="pdl").name == \
        "kernelgen_sm90_simt_dwconv_strip_f16nhwc_f16nhwc_f32_f16nhwc_3x3_stride1_q7x1_v4_pdl"
    assert DepthwiseStripHalf("t", 7, columns=8, lanes=2, launch="pdl").name == \
        "kernelgen_sm90_simt_dwconv_strip_half2_f16nhwc_f16nhwc_f16_f16nhwc_7x7_stride1_q8x2_pdl"
    assert GroupedStrip("t", 3, stride=2, columns=4, lanes=1, channels=8).name == \
        "kernelgen_sm80_simt_gconv_strip_f16nhwc_f16nhwc_f32_f16nhwc_g8_3x3_stride2_q4x1"
    assert GroupedDirect("t", 3, 4, 2).name == "kernelgen_sm80_simt_gconv_direct_f16nhwc_f16nhwc_f32_f16nhwc_3x3_v4_q2"
    assert DepthwiseNarrow("t", "any", 2, 2).name == "kernelgen_sm80_simt_dwconv_narrow_f16nhwc_f16nhwc_f32_f16nhwc_rxs_v2_q2"
    assert GroupedDirect("t", "any", 1, 2).name == "kernelgen_sm80_simt_gconv_direct_f16nhwc_f16nhwc_f32_f16nhwc_rxs_v1_q2"


def conv(c=58, r=3, stride=1, dilation=1, groups=None, k=None, pad=1):
    return Conv2dProblem(2, 14, 14, c, c if k is None else k, r, r, pad, pad, stride, stride, dilation, dilation,
                         groups=c if groups is None else groups)


def test_the_narrow_kernels_serve_depthwise_layers_of_any_even_or_odd_c():
    pair, single = DepthwiseNarrow("t", 3, 2, 2), DepthwiseNarrow("t", 3, 1, 4)
    assert serves(pair, conv()) is None and serves(single, conv()) is None
    assert serves(pair, conv(c=27)) == "C must be a multiple of 2" and serves(single, conv(c=27)) is None
    for layer in (conv(stride=2), conv(dilation=3, pad=3), conv(pad=0), conv(c=64)):
        assert serves(pair, layer) is None
    assert serves(pair, conv(r=5, pad=2)) == "built for 3x3 filters"
    assert serves(pair, conv(groups=29)) == serves(pair, conv(k=116)) == "a depthwise kernel: needs groups = C = K"
    assert "not for conv2d_fprop" in serves(pair, conv(groups=1))


def test_the_row_kernels_serve_depthwise_layers_of_their_stride_and_dilation_1():
    pair, single, strided = DepthwiseRows("t", 3, 2, 4, stride=1), DepthwiseRows("t", 3, 1, 4), DepthwiseRows("t", 3, 2, 4, stride=2)
    for layer in (conv(), conv(c=162), conv(pad=0), conv(pad=3), conv(c=64)):
        assert serves(pair, layer) is None and serves(single, layer) is None, layer
    assert serves(pair, conv(c=27)) == "C must be a multiple of 2" and serves(single, conv(c=27)) is None
    assert serves(pair, conv(stride=2)) == "built for stride 1" and serves(strided, conv(stride=2)) is None
    assert serves(strided, conv()) == "built for stride 2"
    assert serves(pair, conv(dilation=2, pad=2)) == "built for dilation 1"
    assert serves(pair, conv(r=5, pad=2)) == "built for 3x3 filters"
    assert serves(pair, conv(groups=29)) == serves(pair, conv(k=116)) == "a depthwise kernel: needs groups = C = K"
    huge = Conv2dProblem(2048, 512, 512, 16, 16, 3, 3, 1, 1, 1, 1, groups=16)  # 2^30 items of 4 columns, 2 channels
    assert serves(pair, replace(huge, n=2047)) is None
    assert serves(DepthwiseRows("t", 3, 2, 4, stride=1, rows=2), huge) is None  # half the items
    assert serves(pair, huge) == "2^30 work items or more (32-bit indices)"


def assert_even_c_at_one_stride_served(three, strided, other, filter):
    """What the flat and strip kernels (two channels an access, one stride) serve and refuse alike:
    ``three`` a 3x3 stride-1 kernel, ``strided`` a 3x3 stride-2 one, ``other`` one of ``filter``."""
    for layer in (conv(), conv(c=162), conv(c=64), conv(pad=0), conv(pad=3)):
        assert serves(three, layer) is None, layer
    assert serves(other, conv(c=18, r=filter, pad=filter // 2)) is None
    assert serves(three, conv(c=27)) == "C must be even (two channels a 4-byte access)"
    assert serves(three, conv(stride=2)) == "built for stride 1" and serves(strided, conv(stride=2)) is None
    assert serves(strided, conv()) == "built for stride 2"
    assert serves(three, conv(dilation=2, pad=2)) == "built for dilation 1"
    assert serves(three, conv(r=5, pad=2)) == "built for 3x3 filters"
    assert serves(three, conv(groups=29)) == serves(three, conv(k=116)) == "a depthwise kernel: needs groups = C = K"
    assert serves(three, Conv2dProblem(1024, 1024, 1024, 2, 2, 3, 3, 1, 1, 1, 1, groups=2)) == \
        "2^31 elements or more (32-bit indices)"


def test_the_flat_kernels_serve_depthwise_layers_of_even_c_at_their_stride():
    three, seven, strided = DepthwiseFlat("t", 3, rows=2), DepthwiseFlat("t", 7, rows=2), DepthwiseFlat("t", 3, rows=1, stride=2)
    assert_even_c_at_one_stride_served(three, strided, seven, 7)
    # a band's 4 input rows of 9000 x 2 channels take about 144 KB, of 15,000 x 2 (240 KB) more than 227 KiB
    assert serves(three, Conv2dProblem(1, 8, 9000, 2, 2, 3, 3, 1, 1, 1, 1, groups=2)) is None
    assert serves(three, Conv2dProblem(1, 8, 15000, 2, 2, 3, 3, 1, 1, 1, 1, groups=2)) == \
        "a band of 4 input rows is more than a CTA's shared memory"
    assert serves(DepthwiseFlat("t", 3, rows=1), Conv2dProblem(1, 8, 15000, 2, 2, 3, 3, 1, 1, 1, 1, groups=2)) is None
    assert serves(DepthwiseFlat("t", 3, rows=2, stride=2), Conv2dProblem(1, 8, 12000, 2, 2, 3, 3, 1, 1, 2, 2, groups=2)) == \
        "a band of 5 input rows is more than a CTA's shared memory"


def test_the_strip_kernels_serve_depthwise_layers_of_even_c_at_their_stride_within_a_ctas_threads():
    three, five, strided = (DepthwiseStrip("t", 3, columns=7, lanes=2), DepthwiseStrip("t", 5, columns=4, lanes=1),
                            DepthwiseStrip("t", 3, stride=2, columns=4, lanes=1))
    assert_even_c_at_one_stride_served(three, strided, five, 5)
    # a thread a channel pair of each lane: 512 pairs x 2 lanes fill 1024 threads, 514 x 2 do not;
    # a 5x5 kernel's CTA holds 512 threads
    assert serves(three, conv(c=1024)) is None
    assert serves(three, conv(c=1028)) == "514 channel pairs x 2 lanes is more than 1024 threads a CTA"
    assert serves(five, conv(c=1024, r=5, pad=2)) is None
    assert serves(five, conv(c=1028, r=5, pad=2)) == "514 channel pairs x 1 lanes is more than 512 threads a CTA"
    # 9 slots (5x5, stride 2) of 19 input columns x 1000 channels take about 342 KB, of 11 about 198 KB
    layer = Conv2dProblem(1, 16, 32, 1000, 1000, 5, 5, 2, 2, 2, 2, groups=1000)
    assert serves(DepthwiseStrip("t", 5, stride=2, columns=8, lanes=1), layer) == \
        "9 input rows of a strip are more than a CTA's shared memory"
    assert serves(DepthwiseStrip("t", 5, stride=2, columns=4, lanes=1), layer) is None
    assert serves(three, conv(c=1000)) is None
    # four channels a thread: C a multiple of 4, 512 threads (quads x lanes) at most
    quad = DepthwiseStrip("t", 3, 4, columns=7, lanes=1)
    assert serves(quad, conv(c=164)) is None and serves(quad, conv(c=2048)) is None
    assert serves(quad, conv(c=162)) == "C must be a multiple of 4 (four channels an 8-byte access)"
    assert serves(quad, conv(c=2052)) == "513 channel quads x 1 lanes is more than 512 threads a CTA"
    five_quads = DepthwiseStrip("t", 5, 4, columns=4, lanes=1)  # 168 registers a thread: 384 threads
    assert serves(five_quads, conv(c=1536, r=5, pad=2)) is None
    assert serves(five_quads, conv(c=1540, r=5, pad=2)) == "385 channel quads x 1 lanes is more than 384 threads a CTA"


def test_the_fp16_strip_kernels_serve_what_the_strip_kernels_do_and_7x7_filters():
    three, seven, strided = (DepthwiseStripHalf("t", 3, columns=7, lanes=1), DepthwiseStripHalf("t", 7, columns=8, lanes=1),
                             DepthwiseStripHalf("t", 3, stride=2, columns=4, lanes=1))
    assert_even_c_at_one_stride_served(three, strided, seven, 7)
    assert (seven.accumulator, seven.element, seven.output) == ("f16", "f16", "f16")
    # a 7x7 kernel's CTA holds 384 threads: ConvNeXt's 768 channels (384 pairs) at one lane
    assert serves(seven, conv(c=768, r=7, pad=3)) is None
    assert serves(DepthwiseStripHalf("t", 7, columns=7, lanes=2), conv(c=768, r=7, pad=3)) == \
        "384 channel pairs x 2 lanes is more than 384 threads a CTA"
    assert serves(three, conv(c=2048)) is None


def test_the_grouped_strip_kernels_serve_groups_of_their_channels_with_k_equal_to_c():
    eight, strided = GroupedStrip("t", 3, columns=4, lanes=1), GroupedStrip("t", 3, stride=2, columns=7, lanes=1)
    for layer in (conv(440, groups=55), conv(64, groups=8), conv(64, groups=8, pad=0), conv(104, groups=13, pad=2)):
        assert serves(eight, layer) is None, layer
    assert serves(strided, conv(440, groups=55, stride=2)) is None
    assert serves(eight, conv(448, groups=28)) == "built for 8 channels a group"  # 16 a group
    assert serves(eight, conv(64, groups=8, k=128)) == "needs K = C (as many output channels a group as input channels)"
    assert serves(eight, conv(64, groups=8, stride=2)) == "built for stride 1"
    assert serves(eight, conv(64, groups=8, dilation=2, pad=2)) == "built for dilation 1"
    assert serves(eight, conv(64, groups=8, r=5, pad=2)) == "built for 3x3 filters"
    # a thread an output channel: 512 channels a lane at most
    assert serves(eight, conv(512, groups=64)) is None
    assert serves(eight, conv(520, groups=65)) == "520 output channels x 1 lanes is more than 512 threads a CTA"
    assert "not for conv2d_fprop" in serves(eight, conv(64, groups=1))


def test_the_grouped_kernels_serve_any_channels_a_group():
    four, one = GroupedDirect("t", 3, 4, 2), GroupedDirect("t", 3, 1, 4)
    for layer in (conv(448, groups=8), conv(336, groups=7), conv(448, groups=8, stride=2),
                  conv(448, groups=8, dilation=2, pad=2), conv(448, groups=8, pad=0),
                  conv(96, groups=96, k=384)):  # a depthwise layer's channel multiplier 4
        assert serves(four, layer) is None and serves(one, layer) is None, layer
    assert serves(four, conv(54, groups=9)) == "K / groups must be a multiple of 4"  # 6 a group
    assert serves(one, conv(54, groups=9)) is None
    assert serves(four, conv(448, groups=8, r=5, pad=2)) == "built for 3x3 filters"
    assert serves(four, conv(448, groups=6)) == "needs groups (at least 2) dividing C and K"


def test_the_kernels_of_any_filter_serve_every_filter_and_are_proposed_behind_the_fixed_ones():
    """1x1 depthwise layers at stride 2, 9x9 ones, 1x5 and 11x1 bands: the kernels of any filter
    serve them, at any stride, padding and dilation; no other committed kernel serves one of no
    kernel built for its filter (a dilated 3x5), the kernels built for theirs serve the others
    (FastViT's 1x1 at stride 2, depthwise_half.toml; MixNet's 9x9, depthwise_pairs_half.toml;
    GhostNetV2's 1x5, depthwise_band.toml; InceptionNeXt's 11x1 of 12 channels,
    depthwise_pairs_band.toml); where a fixed-filter kernel serves a layer, the model ranks it first."""
    narrow, single, grouped = DepthwiseNarrow("t", "any", 2, 2), DepthwiseNarrow("t", "any", 1, 2), GroupedDirect("t", "any", 1, 2)
    layers = [Conv2dProblem(32, 112, 112, 48, 48, 1, 1, 0, 0, 2, 2, groups=48),  # FastViT, MobileOne
              Conv2dProblem(32, 14, 14, 90, 90, 9, 9, 4, 4, 1, 1, groups=90),  # MixNet
              Conv2dProblem(32, 28, 28, 72, 72, 1, 5, 0, 2, 1, 1, groups=72),  # GhostNetV2
              Conv2dProblem(32, 56, 56, 12, 12, 11, 1, 5, 0, 1, 1, groups=12),  # InceptionNeXt
              Conv2dProblem(2, 14, 14, 30, 30, 3, 5, 2, 4, 2, 1, 2, 2, groups=30)]
    catalog = load_catalog(FAMILIES)
    model = load_model("nvidia_h200")
    for layer in layers:
        assert serves(narrow, layer) is None and serves(single, layer) is None and serves(grouped, layer) is None
        served = {k.name for k in catalog if serves(k, layer) is None}
        any_filter = {k.name for k in catalog if getattr(k, "filter", None) == "any" and k.element == "f16"}
        built = {k.name for k in catalog if getattr(k, "filter_shape", None) == (layer.r, layer.s)} & served
        assert any_filter <= served and served == any_filter | built, layer
        if built:
            assert model.rank(catalog, layer)[0][1].name in built, layer
    assert [bool({k.name for k in catalog if getattr(k, "filter_shape", None) == (layer.r, layer.s)
                  and serves(k, layer) is None}) for layer in layers] == [True, True, True, True, False]
    assert serves(narrow, conv(c=27, r=9, pad=4)) == "C must be a multiple of 2"
    assert serves(single, conv(k=116, r=9, pad=4)) == "a depthwise kernel: needs groups = C = K"
    assert serves(grouped, conv(k=116, r=9, pad=4)) is None  # a channel multiplier of 2
    assert serves(grouped, conv(c=60, groups=7)) == "needs groups (at least 2) dividing C and K"
    fives = Conv2dProblem(32, 14, 14, 27, 27, 5, 5, 2, 2, 1, 1, groups=27)
    proposal, = candidates.propose([fives], catalog, model, 5)
    assert [k.filter for _, k in proposal.ranked][0] == 5, "the 5x5 kernel first"


@pytest.mark.parametrize("c, groups, kind, proposed", [(58, 58, "depthwise_rows", "depthwise_pairs_half"),
                                                       (116, 116, "depthwise_rows", "depthwise_columns"),
                                                       (36, 3, "grouped_direct", "grouped_direct"),
                                                       (240, 12, "grouped_direct", "grouped_direct")])
def test_the_layers_no_other_kernel_serves_get_candidates_of_these_families(c, groups, kind, proposed):
    """ShuffleNetV2's depthwise layers (58, 116 channels), groups of 12 and 20 channels (neither a
    tensor-core kernel's group nor a multiple of 8): no other kernel serves them; the committed specs'
    direct kernels do (a depthwise layer at stride 1: the narrow ones, the row ones and the grouped
    one of one output channel a thread; the staged ones of 4-byte copies, depthwise_pairs and
    depthwise_pairs_half; and those of a tensor copy an input column, depthwise_columns), and
    the committed model proposes kernels of these families for them (for the depthwise layers the
    staged kernels of fp16 sums, measured fastest on ShuffleNetV2's 58-channel layer on 28x28 at
    stride 1: 0.0056 ms, the fp32-sum ones 0.0062, the row kernels 0.0068, the strip kernels of fp16
    sums 0.0069; H200, 2026-12-05; for the 116-channel layer, since the model was fitted on the
    column-copy kernels' rows of ReXNet-1.0 and ShuffleNetV2's stride-2 layers, those first)."""
    layer = Conv2dProblem(32, 28, 28, c, c, 3, 3, 1, 1, 1, 1, groups=groups)
    catalog = load_catalog(FAMILIES)
    served = [k for k in catalog if serves(k, layer) is None]
    families = set(SPECS) | ({"depthwise_pairs", "depthwise_pairs_half", "depthwise_columns"} if groups == c else set())
    assert {k.family for k in served} <= families and any(k.family == kind for k in served)
    if groups == c:
        assert {k.family for k in served} == families - {"grouped_strip"}
    proposal, = candidates.propose([layer], catalog, load_model("nvidia_h200"), 3)
    assert {k.family for _, k in proposal.ranked} <= families and any(k.family == proposed for _, k in proposal.ranked)


@requires_nvcc
def test_a_kernel_of_each_family_compiles_for_sm90a_through_the_rendering(tmp_path):
    """The profiler's translation units of a kernel of each family, in one nvcc run."""
    kernels = [load_family(spec)[0] for spec in SPECS.values()]
    kernels += [k for spec in SPECS.values() for k in load_family(spec) if getattr(k, "filter", None) == "any"]
    assert len(kernels) == len(SPECS) + 3
    assert_kernels_compile(tmp_path, kernels)


# Small odd layers: depthwise of 58, 116, 232 (two channels a thread) and odd C (one), grouped of 48
# and 6 channels a group, odd channels a group, a depthwise channel multiplier, a 1x1 grouped layer;
# partial output columns, stride 2, dilation 2, no padding and padding wider than the filter's
# reach, one image row.
LAYERS = [
    "n=3 h=13 w=17 c=58 k=58 r=3 s=3 pad=1 stride=1 groups=58",
    "n=2 h=15 w=14 c=116 k=116 r=3 s=3 pad=1 stride=2 groups=116",
    "n=1 h=9 w=11 c=27 k=27 r=3 s=3 pad=2 stride=1 dilation=2 groups=27",
    "n=2 h=11 w=7 c=30 k=30 r=5 s=5 pad=2 stride=1 groups=30",
    "n=1 h=12 w=13 c=21 k=21 r=5 s=5 pad=0 stride=2 groups=21",
    "n=2 h=7 w=9 c=22 k=22 r=7 s=7 pad=3 stride=1 groups=22",
    "n=1 h=1 w=33 c=10 k=10 r=3 s=3 pad=1 stride=1 groups=10",
    "n=2 h=6 w=5 c=6 k=6 r=3 s=3 pad=3 stride=1 groups=6",
    "n=4 h=28 w=28 c=232 k=232 r=3 s=3 pad=1 stride=1 groups=232",
    "n=2 h=13 w=17 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=2",
    "n=1 h=9 w=11 c=54 k=54 r=3 s=3 pad=2 stride=1 dilation=2 groups=9",
    "n=1 h=7 w=9 c=15 k=15 r=3 s=3 pad=1 stride=1 groups=3",
    "n=2 h=6 w=5 c=24 k=48 r=3 s=3 pad=3 stride=1 groups=24",
    "n=1 h=12 w=13 c=40 k=40 r=3 s=3 pad=0 stride=2 groups=40",
    "n=1 h=1 w=33 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=4",
    "n=2 h=8 w=8 c=32 k=64 r=1 s=1 pad=0 stride=1 groups=4",
    "n=2 h=9 w=13 c=162 k=162 r=3 s=3 pad=1 stride=1 groups=162",
    "n=1 h=11 w=10 c=38 k=38 r=5 s=5 pad=2 stride=2 groups=38",
    "n=2 h=7 w=7 c=18 k=18 r=7 s=7 pad=3 stride=1 groups=18",
    "n=1 h=9 w=9 c=21 k=21 r=3 s=3 pad=0 stride=2 groups=21",
    "n=1 h=10 w=19 c=50 k=50 r=3 s=3 pad=1 stride=2 groups=50",
    "n=2 h=9 w=11 c=44 k=44 r=5 s=5 pad=2 stride=1 groups=44",
    "n=1 h=13 w=10 c=36 k=36 r=5 s=5 pad=2 stride=2 groups=36",
    "n=2 h=10 w=16 c=20 k=20 r=3 s=3 pad=1 stride=1 groups=20",
    "n=2 h=11 w=13 c=64 k=64 r=3 s=3 pad=1 stride=2 groups=8",
    "n=1 h=7 w=9 c=40 k=40 r=3 s=3 pad=1 stride=1 groups=5",
    "n=3 h=14 w=14 c=88 k=88 r=3 s=3 pad=1 stride=2 groups=11",
    # filters only the kernels of any filter serve: 1x1 at stride 2, 9x9, a 1x5 and an 11x1 band,
    # 3x5 at strides 2 and 1 with dilation 2, a channel multiplier of a 5x5 filter in odd groups
    "n=2 h=13 w=11 c=21 k=21 r=1 s=1 pad=0 stride=2 groups=21",
    "n=2 h=9 w=11 c=30 k=30 r=9 s=9 pad=4 stride=1 groups=30",
    "n=1 h=10 w=12 c=24 k=24 r=1 s=5 pad_h=0 pad_w=2 stride=1 groups=24",
    "n=1 h=13 w=7 c=12 k=12 r=11 s=1 pad_h=5 pad_w=0 stride=1 groups=12",
    "n=2 h=12 w=11 c=30 k=30 r=3 s=5 pad_h=2 pad_w=4 stride_h=2 stride_w=1 dilation=2 groups=30",
    "n=1 h=9 w=10 c=21 k=42 r=5 s=5 pad=2 stride=2 groups=7",
]


# The CPU check: each committed kernel's work item (the code the GPU kernel runs for each of its
# items, host and device code) run over every item of the layers above on the host, against a
# direct sum in double, from the same fp16 operands.
CPU_CHECK = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "depthwise_flat.h"
#include "depthwise_rows.h"
#include "strip_conv.h"
#include "direct_conv.h"
#include "direct_conv_any.h"

using kernelgen::Conv2dProblem;

// An item's tolerance: its kTolerance where it sums in fp16, else 2e-3 (fp32 sums, fp16 output).
template <class Item, class = void>
struct Tolerance {
  static constexpr double value = 2e-3;
};
template <class Item>
struct Tolerance<Item, std::void_t<decltype(Item::kTolerance)>> {
  static constexpr double value = Item::kTolerance;
};

template <typename Kernel, typename Item>
int check(const Conv2dProblem& p, int groups, const char* kernel) {
  if (!Kernel::can_implement(p, groups).empty()) return 0;  // not served
  const int R = p.r, S = p.s, P = p.p(), Q = p.q(), gc = p.c / groups, gk = p.k / groups;
  std::vector<__half> x(size_t(p.n) * p.h * p.w * p.c), w(size_t(p.k) * R * S * gc), y(size_t(p.n) * P * Q * p.k);
  unsigned state = 12345u + p.c;
  auto next = [&] { state = state * 1664525u + 1013904223u; return float(int(state >> 9) % 2001 - 1000) / 1000.0f; };
  for (auto& v : x) v = __float2half_rn(next());
  for (auto& v : w) v = __float2half_rn(next());
  for (auto& v : y) v = __float2half_rn(1e4f);  // every output must be written
  const kernelgen::direct::Shape shape{P, Q, groups};
  const long long items = Item::items(p, shape);
  for (long long i = 0; i < items; ++i) Item::run(p, shape, i, x.data(), w.data(), y.data());
  double worst = 0;
  for (int n = 0; n < p.n; ++n)
    for (int op = 0; op < P; ++op)
      for (int oq = 0; oq < Q; ++oq)
        for (int k = 0; k < p.k; ++k) {
          double sum = 0;
          const int c0 = (k / gk) * gc;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s)
              for (int ci = 0; ci < gc; ++ci) {
                const int h = op * p.stride_h - p.pad_h + r * p.dilation_h, col = oq * p.stride_w - p.pad_w + s * p.dilation_w;
                if (h < 0 || h >= p.h || col < 0 || col >= p.w) continue;
                sum += double(__half2float(x[((size_t(n) * p.h + h) * p.w + col) * p.c + c0 + ci])) *
                       __half2float(w[((size_t(k) * R + r) * S + s) * gc + ci]);
              }
          const double got = __half2float(y[((size_t(n) * P + op) * Q + oq) * p.k + k]);
          worst = std::fmax(worst, std::fabs(got - sum) / (1.0 + std::fabs(sum)));
        }
  std::printf("%s %d %d %d %d %d %d %g\n", kernel, p.n, p.h, p.w, p.c, p.k, groups, worst);
  return worst > Tolerance<Item>::value;
}
"""


@requires_nvcc
def test_each_kernels_work_items_compute_the_layers_on_the_cpu(tmp_path):
    """Every committed kernel's items, over every item of each small odd layer it serves, give each
    output within fp16 rounding of a direct sum: the groups' channels, the padding, stride and
    dilation, the partial column tiles and the channels a thread computes are right before any GPU
    runs them (and can_implement serves what ``serves`` says)."""
    kernels = [k for spec in SPECS.values() for k in load_family(spec)]
    problems = parse_workloads("".join(f"conv2d_fprop {line}\n" for line in LAYERS))
    calls = []
    for problem in problems:
        c = problem.as_conv()
        fields = (c.n, c.h, c.w, c.c, c.k, c.r, c.s, c.pad_h, c.pad_w, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w)
        for k in kernels:
            item = {"DepthwiseNarrow": "direct::NarrowItem", "GroupedDirect": "direct::GroupedItem",
                    "DepthwiseRows": "rows::RowsItem", "DepthwiseFlat": "flat::FlatItem",
                    "DepthwiseStrip": "strip::DepthwiseItem", "GroupedStrip": "strip::GroupedItem",
                    "DepthwiseStripHalf": "strip::HalfItem"}[k.kernel_type]
            if isinstance(k, DepthwiseFlat):
                item = f"kernelgen::{item}<__half, {k.filter}, {k.rows}, {k.stride}>"
            elif isinstance(k, DepthwiseStripHalf):  # (a DepthwiseStrip of fp16 sums: first)
                item = f"kernelgen::{item}<{k.filter}, {k.stride}, {k.columns}, {k.lanes}>"
            elif isinstance(k, DepthwiseStrip):
                item = f"kernelgen::{item}<__half, {k.filter}, {k.stride}, {k.columns}, {k.lanes}, {k.vector}>"
            elif isinstance(k, GroupedStrip):
                item = f"kernelgen::{item}<__half, {k.filter}, {k.stride}, {k.columns}, {k.lanes}, {k.channels}>"
            elif getattr(k, "filter", None) == "any":
                item = f"kernelgen::{item.replace('Item', 'AnyItem')}<__half, {k.vector}, {k.columns}>"
            else:
                item = f"kernelgen::{item}<__half, {k.filter}, {k.filter}, {k.vector}, {k.columns}" \
                       + (f", {k.stride}, {k.rows}>" if isinstance(k, DepthwiseRows) else ">")
            conv_type = "AnyFilterConv" if getattr(k, "filter", None) == "any" else "DirectConv"
            calls.append(f"  bad += check<kernelgen::{conv_type}<{item}>, {item}>("
                         f"Conv2dProblem{{{', '.join(map(str, fields))}}}, {c.groups}, \"{k.name}\");")
    source = tmp_path / "cpu_check.cu"
    source.write_text(CPU_CHECK + "int main() {\n  int bad = 0;\n" + "\n".join(calls) + "\n  return bad;\n}\n")
    binary = tmp_path / "cpu_check"
    out = subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'profiler'}", "-o", str(binary), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600)
    checked = {tuple(line.split()[:7]) for line in run.stdout.splitlines()}
    served = {(k.name, *map(str, (p.as_conv().n, p.as_conv().h, p.as_conv().w, p.as_conv().c, p.as_conv().k,
                                  p.as_conv().groups)))
              for p in problems for k in kernels if serves(k, p) is None}
    assert run.returncode == 0 and checked == served and len(served) >= 40, run.stdout[-5000:] + run.stderr[-2000:]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for spec in SPECS.values() for k in load_family(spec)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm80_simt_dwconv_narrow_*,"
                                                           "kernelgen_sm80_simt_dwconv_rows_*,"
                                                           "kernelgen_sm80_simt_dwconv_flat_*,"
                                                           "kernelgen_sm*_simt_dwconv_strip_*,"
                                                           "kernelgen_sm*_simt_gconv_strip_*,"
                                                           "kernelgen_sm80_simt_gconv_direct_*"):
        # fp16 sums (the half2 strip kernels) within test_depthwise_half's 5e-3
        assert_served_rows_verify(problem, frame, kernels, limit={"f32": 1e-3, "f16": 5e-3})
