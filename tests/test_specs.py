"""Kernel family specs: the catalog they define, and bad specs refused before anything is
generated, naming the file, the entry and the key."""

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, sm80_family, sm90_conv_family
from kernelgen.arch import parse_arch
from kernelgen.errors import KernelgenError, SpecError
from kernelgen.specs import load_catalog, load_family, select

FAMILIES = ROOT / "kernel_specs" / "families"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_catalog_holds_each_family():
    kernels = load_catalog(FAMILIES)
    sm80 = [k for k in kernels if k.family == "conv2d_fprop_sm80"]
    sm90 = [k for k in kernels if k.family == "conv2d_fprop_sm90"]
    narrow = [k for k in kernels if k.family == "conv2d_fprop_sm75_few_channels"]
    assert len(sm80) == 10 * 3, "10 SM80 16816 tiles x alignments 8, 4, 2"
    small = [k for k in kernels if k.family == "conv2d_fprop_sm80_small"]
    assert len(small) == 3 and {k.alignment for k in small} == {8}
    squeeze = [k for k in kernels if k.family == "conv2d_fprop_sm80_squeeze"]
    assert len(squeeze) == 2 * 3 and {(k.threadblock[0], k.alignment) for k in squeeze} == {(32, a) for a in (8, 4, 2)}
    assert len(sm90) == 2 * 2, "2 SM90 tiles x clusters 1x1, 1x2"
    assert len(narrow) == 4 * 3 and {k.alignment for k in narrow} == {1, 2, 4}
    gemm = [k for k in kernels if k.family == "gemm_sm90"]
    assert len(gemm) == 19 and {k.schedule for k in gemm} == {"cooperative", "pingpong"}
    persistent = [k for k in kernels if k.family == "conv2d_fprop_sm90_persistent"]
    assert len(persistent) == 35 and {k.schedule for k in persistent} == {"cooperative", "pingpong"}
    assert {k.epilogue_tile for k in persistent} == {None, (64, 64), (64, 128), (128, 64), (128, 128)}
    transposed = [k for k in kernels if k.family == "conv2d_fprop_sm90_transposed"]
    assert len(transposed) == 21 and all(k.name.endswith("_transposed") and k.tile[0] in (64, 128, 256) for k in transposed)
    void = [k for k in kernels if k.family.endswith("_void")]
    assert len(void) == 28 and all(k.source == "void" and "_f32_void_f16" in k.name for k in void)
    stores = [k for k in kernels if k.family.endswith("_stores")]
    assert len(stores) == 11 and all(k.source == "void" and k.store_stages in (4, 6, 8) for k in stores)
    assert all("epilogue_sm90.h" in k.includes and f"_stores{k.store_stages}" in k.name for k in stores)
    assert not any("epilogue_sm90.h" in k.includes for k in kernels if k not in stores)
    pdl = [k for k in kernels if getattr(k, "launch", "stream") == "pdl"]
    own = [k for k in pdl if k.family in ("depthwise_half", "grouped_mma", "depthwise_strip", "grouped_strip",
                                          "conv2d_fprop_packed", "depthwise_strip_half", "depthwise_multiplier",
                                          "depthwise_band", "depthwise_columns")]  # profiler/dependent_kernel.h
    searched = [k for k in kernels if getattr(k, "searched", False)]
    first = [k for k in kernels if getattr(k, "taps", "staged") == "first"]  # beside the same kernel of staged taps, but one
    each = [k for k in kernels if getattr(k, "taps", "staged") == "each"]  # likewise
    assert len(pdl) == 134 + 6 + 16 + 4 + 5 + 1 and len(own) == 120 + 16 + 4 + 5 + 1 and all(
        "_pdl" in k.name and k.defines == ("CUTLASS_ENABLE_GDC_FOR_SM90",) and "dependent_launch.h" in k.includes
        for k in pdl if k not in own)
    by_name = {k.name: k for k in kernels}
    listed = [k for k in pdl if getattr(k, "loads", "indexed") == "listed"]  # beside the same kernel of indexed copies
    assert len(listed) == 10 and all(dataclasses.replace(k, loads="indexed") == by_name[k.name[:-len("_listed")]]
                                    for k in listed)
    # the 5x5 tile of 14x14 of 7x7 outputs a thread is built only so (two CTAs a SM: 255 registers a thread)
    alone = [k for k in first if k.name.replace("_tapsfirst", "") not in by_name]
    assert [(k.filter, k.rows, k.thread_rows, k.columns, k.channel_vectors, k.max_registers()) for k in alone] == [
        (5, 14, 7, 7, 8, 255)]
    assert len(first) == 23 + 1 and all(k.includes == ("depthwise_half_first.h",) for k in first) and all(
        by_name[k.name.replace("_tapsfirst", "")] == dataclasses.replace(k, taps="staged")
        and k.includes != by_name[k.name.replace("_tapsfirst", "")].includes
        for k in first if k not in alone)
    assert len(each) == 5 and all(
        by_name[k.name.replace("_tapseach", "")] == dataclasses.replace(k, taps="staged")
        and k.includes == ("depthwise_half_each.h",) for k in each)
    dw_columns = [k for k in kernels if k.family == "depthwise_columns"]  # dependent launches only
    for k in (k for k in pdl if k not in listed and k not in searched and k not in first and k not in each and k not in dw_columns):  # each beside the same kernel launched plainly
        twin = by_name[k.name.replace("_pdl", "").replace("kernelgen_sm90_tensorop_gconv_", "kernelgen_sm80_tensorop_gconv_")
                       .replace("kernelgen_sm90_simt_dwconv_strip_", "kernelgen_sm80_simt_dwconv_strip_")
                       .replace("kernelgen_sm90_simt_gconv_strip_", "kernelgen_sm80_simt_gconv_strip_")
                       .replace("kernelgen_sm90_tensorop_fprop_", "kernelgen_sm80_tensorop_fprop_")]
        assert twin.launch == "stream"
        if k in own:
            assert twin.includes == k.includes and dataclasses.replace(k, launch="stream") == twin
        else:
            assert twin.defines == () and "dependent_launch.h" not in twin.includes

    halo = [k for k in kernels if k.family == "conv2d_fprop_sm90_halo"]
    assert [(k.width, k.rows, k.pixels) for k in halo] == [(56, 4, 232)]
    pointwise = [k for k in kernels if k.family == "conv2d_fprop_sm90_pointwise"]
    assert [(k.channels, k.stages) for k in pointwise] == [(128, 2), (64, 4)]
    assert all(k.element == k.output == "f16" for k in halo + pointwise)
    few = [k for k in kernels if k.family == "conv2d_fprop_few_channels"]
    assert len(few) == 11
    packed = [k for k in kernels if k.family == "conv2d_fprop_packed"]
    assert len(packed) == 19 and all("_packed_" in k.name for k in packed)
    assert sorted(k.includes for k in packed) == [("conv_packed.h",)] * 5 + [("conv_packed_pipelined.h",)] * 14
    rows_packed = [k for k in kernels if k.family == "conv2d_fprop_rows_packed"]
    assert len(rows_packed) == 3 and all(k.includes == ("conv_rows_packed.h",) and k.mode == "rows" for k in rows_packed)
    split = [k for k in kernels if k.family.endswith("split_k")]
    assert len(split) == 5 and all(k.scheduler == "stream_k" and k.schedule == "cooperative" for k in split)
    assert {k.splits for k in split} == {None, 2}
    assert all(k.adapter_header == "stream_k_adapter.h" for k in split)
    assert not any(k.adapter_header == "stream_k_adapter.h" for k in kernels if k not in split)
    depthwise = [k for k in kernels if k.family in ("depthwise", "depthwise_bf16")]
    assert len(depthwise) == 70 and {k.op for k in depthwise} == {"conv2d_fprop_grouped"}
    assert sum(k.loader == "tma" for k in depthwise) == 28 and all(k.arch == 90 for k in depthwise if k.loader == "tma")
    grouped = [k for k in kernels if k.family.startswith("conv2d_fprop_sm80_grouped")]
    assert len(grouped) == 19 and {k.op for k in grouped} == {"conv2d_fprop_grouped"}
    assert sum("_warps" in k.name for k in grouped) == 6  # two warps along M, one a 32 columns: unnamed
    assert {(k.group_mode, k.iterator) for k in grouped} == {("single", "optimized"), ("multiple", "analytic")}
    assert {(k.filter, k.stride) for k in depthwise} == {(f, s) for f in (3, 5, 7) for s in (1, 2)}
    cutlass_depthwise = [k for k in kernels if k.family == "depthwise_cutlass"]
    assert len(cutlass_depthwise) == 6 and {k.op for k in cutlass_depthwise} == {"conv2d_fprop_grouped"}
    assert {k.iterator for k in cutlass_depthwise} == {"fixed", "optimized"}
    dw_narrow = [k for k in kernels if k.family == "depthwise_narrow"]
    assert len(dw_narrow) == 9 and {(k.filter, k.vector) for k in dw_narrow} == {(f, v) for f in (3, 5, 7, "any") for v in (1, 2)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "direct_conv.h" for k in dw_narrow)
    dw_rows = [k for k in kernels if k.family == "depthwise_rows"]
    assert len(dw_rows) == 12 and {k.rows for k in dw_rows} == {1, 2, 4} and {(k.filter, k.stride) for k in dw_rows} == {(f, s) for f in (3, 5) for s in (1, 2)} | {(7, 1)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "depthwise_rows.h" for k in dw_rows)
    dw_flat = [k for k in kernels if k.family == "depthwise_flat"]
    assert len(dw_flat) == 8 and {(k.filter, k.stride, k.rows) for k in dw_flat} == \
        {(3, 1, 1), (3, 1, 2), (3, 1, 4), (5, 1, 2), (7, 1, 2), (3, 2, 1), (3, 2, 2), (5, 2, 1)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "depthwise_flat.h" for k in dw_flat)
    dw_pairs = [k for k in kernels if k.family == "depthwise_pairs"]
    assert len(dw_pairs) == 21 and {k.access for k in dw_pairs} == {4, 8} and {(k.filter, k.stride) for k in dw_pairs} == {(f, s) for f in (3, 5, 7) for s in (1, 2)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "depthwise_adapter.h" and k.includes == ("depthwise_pairs.h",) for k in dw_pairs)
    dw_pairs_half = [k for k in kernels if k.family == "depthwise_pairs_half"]
    assert len(dw_pairs_half) == 28 and {(k.access, k.accumulator, k.filter) for k in dw_pairs_half} == {(a, "f16", f) for a in (4, 8) for f in (3, 5, 7, 9)}
    dw_strip = [k for k in kernels if k.family == "depthwise_strip"]
    assert len(dw_strip) == 38 and {k.vector for k in dw_strip} == {2, 4} and {(k.filter, k.stride) for k in dw_strip} == {(f, s) for f in (3, 5) for s in (1, 2)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "strip_conv.h" for k in dw_strip)
    assert {(k.arch, k.launch) for k in dw_strip} == {(80, "stream"), (90, "pdl")}
    g_strip = [k for k in kernels if k.family == "grouped_strip"]
    assert len(g_strip) == 8 and {(k.channels, k.filter) for k in g_strip} == {(8, 3)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "strip_conv.h" for k in g_strip)
    direct = [k for k in kernels if k.family == "grouped_direct"]
    assert len(direct) == 5 and {(k.filter, k.vector) for k in direct} == {(3, 1), (3, 2), (3, 4), (1, 4), ("any", 1)}
    assert all(k.op == "conv2d_fprop_grouped" and k.adapter_header == "direct_conv.h" for k in direct)
    dw_mma = [k for k in kernels if k.family == "depthwise_mma"]
    assert len(dw_mma) == 11 and {(k.op, k.arch) for k in dw_mma} == {("conv2d_fprop_grouped", 90)}
    dw_multiplier = [k for k in kernels if k.family == "depthwise_multiplier"]
    assert len(dw_multiplier) == 8 and {(k.op, k.arch, k.accumulator, k.multiplier) for k in dw_multiplier} == {
        ("conv2d_fprop_grouped", 90, "f16", 2)} and all("_dwconv_m2_half2_" in k.name for k in dw_multiplier)
    assert len(dw_columns) == 4 and {(k.op, k.arch, k.accumulator, k.launch, k.includes) for k in dw_columns} == {
        ("conv2d_fprop_grouped", 90, "f16", "pdl", ("depthwise_columns.h",))} and all(
        "_dwconv_cols_half2_" in k.name for k in dw_columns)
    dw_band = [k for k in kernels if k.family in ("depthwise_band", "depthwise_pairs_band")]
    assert len(dw_band) == 16 and {k.filter for k in dw_band} == {(1, 5), (5, 1), (1, 11), (11, 1)}
    dw_half = [k for k in kernels if k.family == "depthwise_half"]
    assert len(dw_half) == 46 + 23 + 5 + 1 and {(k.op, k.arch, k.accumulator, k.loader) for k in dw_half} == {
        ("conv2d_fprop_grouped", 90, "f16", "tma")}
    dw_strip_half = [k for k in kernels if k.family == "depthwise_strip_half"]
    assert len(dw_strip_half) == 20 and {k.filter for k in dw_strip_half} == {3, 5, 7}
    assert all(k.adapter_header == "strip_conv.h" and "_dwconv_strip_half2_" in k.name for k in dw_strip_half)
    assert all(k.accumulator == "f32" for k in kernels if k not in dw_half + dw_strip_half + dw_pairs_half + dw_multiplier + dw_band + dw_columns), \
        "fp16 sums: the half2 kernels alone"
    assert {k.accumulator for k in dw_half + dw_strip_half + dw_pairs_half + dw_multiplier + dw_band + dw_columns} == {"f16"}
    tensor_grouped = [k for k in kernels if k.family == "grouped_mma"]
    assert len(tensor_grouped) == 254 and {k.op for k in tensor_grouped} == {"conv2d_fprop_grouped"}
    assert [sum(k.max_channels is not None and k.schedule == s for k in tensor_grouped) for s in ("tile", "pipelined")] \
        == [20, 22]
    sixteen = {(16, u) for u in (1, 2, 3, 4, 5, 7)}
    eight = {(8, u) for u in (1, 2, 5)}
    for schedule, count, wide in (("spread", 44, {(48, 6), (56, 7)} | eight),
                                  ("spread_pipelined", 112, eight | {(8, 3), (8, 7)})):
        spread = [k for k in tensor_grouped if k.schedule == schedule]
        assert len(spread) == count and {(k.channels_per_group, k.units) for k in spread} == sixteen | wide
    assert {(k.channels_per_group, k.stride) for k in tensor_grouped} == {
        (cg, stride) for cg in (4, 8, 16, 24, 32, 48, 56, 64) for stride in (1, 2)}
    groupwise = [k for k in kernels if k.family == "conv2d_fprop_sm90_grouped"]
    assert len(groupwise) == 16 and {(k.op, k.adapter_header) for k in groupwise} == {
        ("conv2d_fprop_grouped", "grouped_adapter_3x.h")}
    patch = [k for k in kernels if k.family == "conv2d_fprop_sm90_patch"]
    assert len(patch) == 10 and {(k.op, k.adapter_header, k.fusible) for k in patch} == {
        ("conv2d_fprop", "patch_adapter_3x.h", True)}
    bf16 = [k for k in kernels if k.element == "bf16" and k not in depthwise]
    assert len(bf16) == 22 and {k.family for k in bf16} == {
        "conv2d_fprop_sm90_persistent_bf16", "conv2d_fprop_sm90_transposed_bf16", "gemm_sm90_bf16",
        "conv2d_fprop_sm90_halo_bf16", "conv2d_fprop_sm90_pointwise_bf16", "conv2d_fprop_sm80_few_channels_bf16",
        "grouped_direct_bf16"}
    assert all(k.output == "bf16" and "bf16" in k.name and "f16_" not in k.name.replace("bf16", "") for k in bf16)
    gemv = [k for k in kernels if k.family == "gemv"]
    assert len(gemv) == 50 and {k.max_m for k in gemv} == {1, 2, 4, 8, 16, 32} and {k.op for k in gemv} == {"gemm"}
    assert sorted(k.vector for k in gemv) == [2] * 21 + [8] * 29
    assert [k.max_m for k in gemv if k.lanes == "m"] == [32] * 20
    mma = [k for k in gemv if k.lanes == "mma"]
    assert len(mma) == 12 and all(k.max_m % 16 == 0 and k.rows % 8 == 0 and k.a == "global" for k in mma)
    assert all(k.name.startswith("kernelgen_sm80_tensorop_gemv_") and k.name.endswith("_mma") for k in mma)
    assert sum(k.a == "shared" for k in gemv) == 8 and all(k.lanes == "m" for k in gemv if k.a == "shared")
    patch_padded = [k for k in kernels if k.family == "conv2d_fprop_sm90_patch_padded"]
    assert len(patch_padded) == 4 and all(k.name.endswith("_patchpad") and k.op == "conv2d_fprop" and not k.fusible
                                          for k in patch_padded)
    thin = [k for k in kernels if k.family == "gemm_thin"]
    assert len(thin) == 3 and {(k.op, k.arch) for k in thin} == {("gemm", 80)} and all("_gemm_thin_" in k.name for k in thin)
    odd_k = [k for k in kernels if k.family == "conv2d_fprop_sm80_narrow_output"]
    assert len(odd_k) == 5 * 3 and {(k.alignment, k.k_alignment) for k in odd_k} == {(8, 1), (8, 2), (8, 4)}
    odd_split = [k for k in kernels if k.family == "conv2d_fprop_sm80_narrow_output_split"]
    assert len(odd_split) == 3 * 3 * 2 and {k.split_k_slices for k in odd_split} == {2, 4}
    assert all(k.name.endswith(f"_out{k.output_alignment}_splitk{k.split_k_slices}") for k in odd_split)
    access = [k for k in kernels if k.family == "conv2d_fprop_sm80_narrow_access"]
    assert len(access) == 3 * 2 and {k.alignment for k in access} == {2, 4}
    assert {(k.threadblock, k.stages) for k in access} == {((128, 64, 64), 3), ((64, 128, 64), 4), ((256, 128, 32), 3)}
    odd_c = [k for k in kernels if k.family == "conv2d_fprop_sm75_narrow"]
    assert len(odd_c) == 4 and {(k.arch, k.iterator, k.alignment, k.k_alignment) for k in odd_c} == {
        (75, "optimized", 1, 1)}
    nosmem = [k for k in kernels if k.family == "conv2d_fprop_sm90_persistent_narrow_output"]
    assert len(nosmem) == 9 and all(k.store == "nosmem" and k.k_alignment == 1 and not k.fusible for k in nosmem)
    assert all(k.name.endswith("_epi_nosmem") and k.values()["output_alignment"] == 1 for k in nosmem)
    padded = [k for k in kernels if k.family == "conv2d_fprop_sm90_persistent_padded"]
    assert len(padded) == 6 and all(k.pad_channels and k.name.endswith("_padc") and k.c_alignment == 1 for k in padded)
    padded_nosmem = [k for k in kernels if k.family == "conv2d_fprop_sm90_persistent_padded_nosmem"]
    assert len(padded_nosmem) == 4 and all(k.pad_channels and k.store == "nosmem" and k.c_alignment == k.k_alignment == 1
                                           and k.name.endswith("_epi_nosmem_padc") for k in padded_nosmem)
    assert all(getattr(k, "store", "tma") == "tma" for k in kernels if k not in nosmem + padded_nosmem)
    assert not any(getattr(k, "pad_channels", False) for k in kernels if k not in padded + padded_nosmem)
    assert all(getattr(k, "source", None) is None for k in kernels if k not in void + stores + split + bf16 + searched + patch_padded)
    gemm_2x = [k for k in kernels if "_gemm_transposed" in k.family]
    assert len(gemm_2x) == 15 and all("gemm_transposed" in k.name and k.adapter_header == "gemm_adapter_2x.h"
                                      for k in gemm_2x)
    assert len(searched) == 5 + 4 and {k.family for k in searched} == {"gemm_searched", "conv2d_fprop_sm90_persistent_searched"}
    assert all(k.name.endswith("_searched") and k.adapter_header == "searched_adapter_3x.h"
               and k.adapter.startswith("kernelgen::Searched") and k.splits is None and k.fusible and not k.optional_relu
               for k in searched)
    assert sum(k.scheduler == "stream_k" for k in searched) == 3 and all(k.source == "void" for k in searched)
    assert {(k.scheduler, k.launch) for k in searched} == {("stream_k", "stream"), ("default", "pdl")}
    for k in searched:  # the kernel of its fixed twin (a type of its own), its adapter the twin's searching its settings
        twin = dataclasses.replace(k, searched=False)
        assert k.name == twin.name + "_searched" and k.adapter == twin.adapter.replace("kernelgen::", "kernelgen::Searched")
        assert k.values() == {**twin.values(), "searched": True} and k.includes == twin.includes
    dense_narrow = [k for k in kernels if k.family == "conv2d_fprop_narrow"]
    assert len(dense_narrow) == 27 and all(k.op == "conv2d_fprop" and k.fusible and "_narrow3x3_" in k.name
                                           and k.adapter_header == "narrow_adapter.h" for k in dense_narrow)
    assert sum(k.stride == 2 and "_narrow3x3_s2_c" in k.name for k in dense_narrow) == 5
    assert len(kernels) == (len(dense_narrow) + len(sm80) + len(small) + len(squeeze) + len(sm90) + len(narrow) + len(odd_k) + len(odd_split) + len(access) + len(odd_c) + len(gemm) + len(persistent) + len(transposed) + len(nosmem) + len(padded) + len(padded_nosmem)
                            + len(void) + len(stores) + len(halo) + len(pointwise) + len(few) + len(packed) + len(rows_packed) + len(split)
                            + len(gemv) + len(thin) + len(patch_padded) + len(bf16) + len(depthwise) + len(cutlass_depthwise) + len(dw_narrow) + len(dw_rows) + len(dw_flat) + len(dw_pairs) + len(dw_pairs_half) + len(dw_strip) + len(dw_strip_half) + len(g_strip) + len(dw_mma) + len(dw_half) + len(dw_multiplier) + len(dw_band) + len(dw_columns) + len(direct) + len(grouped)
                            + len(tensor_grouped) + len(groupwise) + len(patch) + len(gemm_2x) + len(searched))
    names = [k.name for k in kernels]
    assert names == sorted(set(names)), "sorted, unique"
    assert all(IDENTIFIER.match(n) for n in names), "every name is a C++ identifier"


def test_names_follow_cutlass_procedural_style():
    names = {k.name for k in load_catalog(FAMILIES)}
    assert "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8" in names
    assert "cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_32x10_nhwc_align2" in names
    assert "cutlass_tensorop_f16_s1688fprop_few_channels_f16_128x64_32x2_nhwc_align1" in names
    assert ("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x256x64_2x1x1_0_tnt_align8"
            "_warpspecialized_cooperative_epi_tma") in names
    assert ("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x2x1_0_align8"
            "_warpspecialized_epi_tma") in names
    assert ("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8"
            "_warpspecialized_pingpong_epi_tma_64x128") in names


def test_a_fused_variant_is_named_as_its_own_fields_name_it():
    """fusion.fused gives a variant of a kernel whose name is its twin's and the epilogue's suffix
    without computing it (a fused catalog has tens of thousands): for every fusible kernel of the
    listed families and the space, and every epilogue the committed sets use, that name is the one
    the variant's fields make."""
    import inspect

    from kernelgen.fusion import fused, fusible
    from kernelgen.space import load_space, merged

    kernels = [k for k in merged(load_catalog(FAMILIES), load_space(ROOT / "kernel_specs" / "spaces")) if fusible(k)]
    assert len(kernels) > 5000
    shortcut = 0
    for epilogue in ("bias", "bias+relu", "bias+add", "bias+add+relu", "bias+gelu", "bias+silu", "bias+sigmoid"):
        for kernel in kernels:
            variant = fused(kernel, epilogue)
            shortcut += "name" in variant.__dict__
            assert variant.name == inspect.getattr_static(type(variant), "name").func(variant), (kernel.name, epilogue)
    assert shortcut > 5000, "the variants' names are given, not computed"


def test_select_filters_by_glob_and_architecture():
    kernels = load_catalog(FAMILIES)
    assert len(select(kernels, "*", parse_arch("90a"))) == 1040
    assert len(select(kernels, "*", parse_arch("90"))) == 841, "wgmma kernels need sm_90a"
    assert len(select(kernels, "*", parse_arch("80"))) == 607
    assert len(select(kernels, "*", parse_arch("75"))) == 18
    picked = select(kernels, "*_128x128_32x3_*align8, cutlass3x_sm90_tensorop_fprop*_256x64x64_1x1x1_*_warpspecialized_epi_tma",
                    parse_arch("90a"))
    assert [k.name[:20] for k in picked] == ["cutlass3x_sm90_tenso", "cutlass_tensorop_f16"]


def test_kernels_can_be_listed_in_a_file(tmp_path):
    listing = tmp_path / "chosen.txt"
    listing.write_text("# chosen\ncutlass3x_sm90_tensorop_fprop*_256x64x64_1x1x1_*_warpspecialized_epi_tma  # one SM90 kernel\n\n")
    picked = select(load_catalog(FAMILIES), f"*_128x128_32x3_*align8,@{listing}", parse_arch("90a"))
    assert len(picked) == 2
    with pytest.raises(SpecError, match="cannot read the kernel list"):
        select(load_catalog(FAMILIES), f"@{tmp_path / 'none.txt'}", parse_arch("90a"))


@pytest.mark.parametrize("bad", ["sm90", "9", "90b", "", "90a;rm"])
def test_bad_arch_is_refused(bad):
    with pytest.raises(KernelgenError, match="ARCH="):
        parse_arch(bad)


SM80 = sm80_family("threadblock = [128, 128, 32], warps = [2, 2, 1], stages = 3",
                   "threadblock = [64, 64, 32], warps = [2, 2, 1], stages = 6")
SM90 = sm90_conv_family(clusters="[[1, 1, 1], [2, 1, 1]]")


def family(tmp_path, text, name="fam.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


GEMM = """\
kind = "gemm_sm90"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  { tile = [128, 256, 64], schedule = "cooperative", clusters = [[1, 1, 1], [2, 1, 1]] },
  { tile = [64, 128, 64], schedule = "pingpong", clusters = [[1, 1, 1]] },
]
"""


PERSISTENT = GEMM.replace('"gemm_sm90"', '"conv2d_fprop_sm90_persistent"').replace(
    "[[1, 1, 1]] }", "[[1, 1, 1]], epilogue_tiles = [[64, 64], [64, 128]] }")


# D stored from registers (any K): the persistent conv kernels of PERSISTENT's tiles without epilogue subtiles
NOSMEM = GEMM.replace('"gemm_sm90"', '"conv2d_fprop_sm90_persistent"').replace('output = "f16"', 'output = "f16"\nstore = "nosmem"')


HALO = """\
kind = "conv2d_fprop_sm90_halo"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  { width = 56, rows = 4 },
  { width = 28, rows = 8 },
]
"""
POINTWISE = HALO.replace("sm90_halo", "sm90_pointwise").replace("{ width = 56, rows = 4 }", "{ channels = 64, stages = 4 }").replace(
    "{ width = 28, rows = 8 }", "{ channels = 128, stages = 2 }")
TRANSPOSED = PERSISTENT.replace('"conv2d_fprop_sm90_persistent"', '"conv2d_fprop_sm90_transposed"').replace(
    '{ tile = [128, 256, 64], schedule = "cooperative", clusters = [[1, 1, 1], [2, 1, 1]] },\n', "")


GEMV = """\
kind = "gemv"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  { max_m = 1, rows = 4, threads = 128, unroll = 4 },
  { max_m = 8, rows = 2, threads = 256, unroll = 2 },
]
"""


def test_a_halo_family_builds_one_kernel_per_width_and_rows(tmp_path):
    halo = load_family(family(tmp_path, HALO))
    assert [(k.pixels, k.name) for k in halo] == [
        (232, "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x232_w56_rows4_halo"),
        (240, "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x240_w28_rows8_halo")]
    assert halo[1].values()["mma"].startswith("cute::SM90::GMMA::MMA_64x240x16_F32F16F16_SS<")
    assert halo[0].arch_specific and halo[0].accumulator == "f32"
    pointwise = load_family(family(tmp_path, POINTWISE))
    assert [(k.values()["channel_blocks"], k.name) for k in pointwise] == [
        (1, "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_1x1_64x256_c64_stages4_pointwise"),
        (2, "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_1x1_64x256_c128_stages2_pointwise")]
    assert pointwise[1].values()["mma"].startswith("cute::SM90::GMMA::MMA_64x256x16_F32F16F16_SS<")


def test_a_valid_family_expands_tiles_by_alignments_and_clusters(tmp_path):
    assert len(load_family(family(tmp_path, GEMM))) == 3
    persistent = load_family(family(tmp_path, PERSISTENT))
    assert [(k.cluster[0], k.epilogue_tile) for k in persistent] == [(1, None), (2, None), (1, (64, 64)), (1, (64, 128))]
    assert persistent[3].name.endswith("_64x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_64x128")
    assert persistent[3].op == "conv2d_fprop" and persistent[0].name.startswith("cutlass3x_sm90_tensorop_fprop_")
    transposed = load_family(family(tmp_path, TRANSPOSED))
    assert [k.name for k in transposed] == [k.name + "_transposed" for k in persistent[2:]]
    assert transposed[0].template == "conv2d_fprop_sm90_transposed.mako"
    wide = load_family(family(tmp_path, PERSISTENT.replace('"conv2d_fprop_sm90_persistent"',
                                                           '"conv2d_fprop_sm90_transposed"')))
    assert [(k.schedule, k.cluster) for k in wide[:2]] == [("cooperative", (1, 1, 1)), ("cooperative", (2, 1, 1))]
    assert wide[1].name.endswith("_128x256x64_2x1x1_0_align8_warpspecialized_cooperative_epi_tma_transposed")
    assert len(load_family(family(tmp_path, SM80.replace("[8]", "[8, 4]")))) == 4
    narrow = load_family(family(tmp_path, SM80.replace("alignments = [8]", "alignments = [8]\noutput_alignments = [1, 4]")))
    assert [(k.alignment, k.k_alignment, k.name.rsplit("_nhwc_", 1)[1]) for k in narrow[:2]] == [
        (8, 1, "align8_out1"), (8, 4, "align8_out4")]
    assert len(narrow) == 4 and narrow[0].values()["epilogue_vector"] == 1 and narrow[1].values()["epilogue_vector"] == 4
    split = load_family(family(tmp_path, SM80.replace("alignments = [8]", "alignments = [8]\nsplits = [1, 4]")))
    assert [(k.split_k_slices, k.name.rsplit("_nhwc_", 1)[1]) for k in split[:2]] == [(1, "align8"), (4, "align8_splitk4")]
    assert len(split) == 4 and [k.values()["split_k_slices"] for k in split[:2]] == [1, 4]
    assert all(k.split_k_slices == 1 for k in load_family(family(tmp_path, SM80)))
    kernels = load_family(family(tmp_path, SM90))
    assert [k.cluster for k in kernels] == [(1, 1, 1), (2, 1, 1)]
    nosmem = load_family(family(tmp_path, NOSMEM))
    assert [k.name for k in nosmem] == [k.name.replace("_epi_tma", "_epi_nosmem") for k in load_family(
        family(tmp_path, NOSMEM.replace('store = "nosmem"', "")))]
    assert [(k.k_alignment, k.fusible, k.values()["epilogue"]) for k in nosmem[:1]] == [
        (1, False, "cutlass::epilogue::NoSmemWarpSpecialized")]


@pytest.mark.parametrize("text, entry, key, message", [
    (SM80.replace('iterator = "optimized"', 'iterator = "optimized"\ncolour = "red"'), None, "colour", "unknown key"),
    (SM80.replace('iterator = "optimized"\n', ""), None, "iterator", "missing required key"),
    (SM80.replace('"optimized"', '"fast"'), None, "iterator", "'fast' is not one of analytic, few_channels, optimized"),
    (SM80.replace("stages = 6", 'stages = "6"'), "tiles[1]", "stages", "expected an integer"),
    (SM80.replace("stages = 6", "stages = 11"), "tiles[1]", "stages", "outside"),
    (SM80.replace("stages = 6", "stages = 1"), "tiles[1]", "stages", "outside"),
    (SM80.replace("[8]", "[1]"), "tiles[0]", "stages", r"2-byte accesses; SM80 multistage mainloops copy 4, 8, 16 "
                                                         r"bytes \(use 2 stages, or arch = 75\)"),
    (SM80.replace('iterator =', 'arch = 75\niterator ='), "tiles[0]", "stages", "SM75 mainloops take 2 to 2"),
    (SM80.replace('iterator =', 'arch = 86\niterator ='), None, "arch", "86 is not one of 75, 80"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1], stages = 6", "[256, 128, 64], warps = [4, 2, 1], stages = 5"),
     "tiles[1]", "stages", "shared memory"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1]", "[64, 64, 32], warps = [3, 2, 1]"),
     "tiles[1]", "warps", "3 warps along M do not divide"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1]", "[64, 48, 32], warps = [1, 4, 1]"),
     "tiles[1]", "warps", "warp tile 12 along N is not a multiple"),
    (SM80.replace("[64, 64, 32]", "[64, 64]"), "tiles[1]", "threadblock", "list of 3 integers"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1]", "[64, 32, 32], warps = [4, 2, 1]"), "tiles[1]", "threadblock",
     "the filter tile of 32x32 is 128 accesses of 8 elements, fewer than the 256 threads"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1]", "[64, 16, 32], warps = [4, 1, 1]"), "tiles[1]", "threadblock",
     r"a threadblock 16 wide along N \(the output channels\): CUTLASS 2.x tensor-op tiles take at least 32"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1]", "[64, 64, 48], warps = [2, 2, 1]"), "tiles[1]", "threadblock",
     "the tile's K 48 is 3 of the instruction's K 16 a warp; the mainloop takes an even number, at least 2"),
    (SM80.replace("[64, 64, 32], warps = [2, 2, 1], stages = 6", "[32, 32, 128], warps = [1, 1, 1], stages = 2"),
     "tiles[1]", "threadblock", "the tile's K 128 is 256 bytes of f16; CUTLASS 2.x tensor-op tiles take at most one "
                                "128-byte line of K"),
    (SM80.replace("[8]", "[8, 3]"), None, "alignments", "power of two"),
    (SM80.replace("alignments = [8]", "alignments = [8, 4]\noutput_alignments = [8]"), None, "output_alignments",
     "output alignment 8 must be a power of two of at most the alignments' 4"),
    (SM80.replace("alignments = [8]", "alignments = [8]\noutput_alignments = [3]"), None, "output_alignments",
     "output alignment 3 must be a power of two"),
    (SM80.replace("alignments = [8]", "alignments = [8]\noutput_alignments = 2"), None, "output_alignments",
     "expected a list"),
    (SM80.replace("[8]", "[16]"), None, "alignments", "at most 128 bits"),
    (SM80.replace("alignments = [8]", "alignments = [8]\nsplits = [0]"), None, "splits", "outside"),
    (SM80.replace("alignments = [8]", "alignments = [8]\nsplits = [4, 4]"), None, "splits", "duplicate"),
    (SM80.replace("alignments = [8]", "alignments = [8]\nsplits = 4"), None, "splits", "expected a list"),
    (SM80.replace('element = "f16"', 'element = "f16>; int x; using y = <f16"'), None, "element", "is not one of"),
    (SM80.replace('"conv2d_fprop_2x"', '"conv2d_fprop_sm70"'), None, "kind", "unknown kind"),
    (SM90.replace("[2, 1, 1]]", "[2, 1, 2]]"), "clusters[1]", None, "cluster K must be 1"),
    (SM90.replace("[2, 1, 1]]", "[3, 1, 1]]"), "clusters[1]", None, "not a power of two"),
    (SM90.replace("[2, 1, 1]]", "[4, 4, 1]]"), "clusters[1]", None, "at most 8"),
    (SM90.replace("[[128, 128, 64]]", "[[96, 128, 64]]"), "tiles[0]", None, "multiple of 64"),
    (SM90.replace("[[128, 128, 64]]", "[[128, 100, 64]]"), "tiles[0]", None, "multiple of 8"),
    (SM90.replace("[[128, 128, 64]]", "[[128, 128, 24]]"), "tiles[0]", None, "multiple of 16"),
    (SM90.replace('schedule = "warpspecialized"', 'schedule = "cooperative"'), None, "schedule", "not one of"),
    (SM90.replace("tiles = ", "stages = 7\ntiles = ").replace("[[128, 128, 64]]", "[[256, 256, 64]]"),
     None, "stages", "shared memory"),
    (SM90 + "extra = 1\n", None, "extra", "unknown key"),
    (GEMM.replace('[64, 128, 64], schedule = "pingpong"', '[64, 128, 64], schedule = "cooperative"'),
     "kernels[1]", "tile", "cooperative tile's M must be a multiple of 128"),
    (GEMM.replace('schedule = "pingpong",', 'schedule = "pingpong", scheduler = "stream_k",'),
     "kernels[1]", "scheduler", "needs the cooperative schedule"),
    (GEMM.replace("[64, 128, 64], schedule", "[64, 264, 64], schedule"), "kernels[1]", "tile", "outside"),
    (GEMM.replace("[[1, 1, 1], [2, 1, 1]] }", "[[1, 1, 1]], splits = [4] }"), "kernels[0]", "splits",
     'splits needs the stream-K tile scheduler'),
    (GEMM.replace("[[1, 1, 1], [2, 1, 1]] }", '[[1, 1, 1]], scheduler = "stream_k", splits = [1] }'), "kernels[0]",
     "splits", r"1 is outside \[2, 64\]"),
    (PERSISTENT.replace("[[1, 1, 1], [2, 1, 1]] }", "[[1, 1, 1]], splits = [2] }"), "kernels[0]", "splits",
     'splits needs the stream-K tile scheduler'),
    (GEMM.replace("[[1, 1, 1]] }", '[[1, 1, 1]], launches = ["pdl", "graph"] }'), "kernels[1]", "launches",
     "'graph' is not one of pdl, stream"),
    (GEMM.replace("[[1, 1, 1]] }", '[[1, 1, 1]], launches = ["pdl", "pdl"] }'), "kernels[1]", "launches",
     r"duplicate items in \['pdl', 'pdl'\]"),
    (GEMM.replace("[[1, 1, 1], [2, 1, 1]] }", '[[1, 1, 1]], scheduler = "stream_k", launches = ["pdl"] }'),
     "kernels[0]", "launches", "a stream-K kernel zeroes its workspace before each launch"),
    (NOSMEM.replace('store = "nosmem"', 'store = "registers"'), None, "store", "'registers' is not one of nosmem, tma"),
    (NOSMEM.replace('store = "nosmem"', 'store = "nosmem"\nsource = "void"'), None, "source",
     'store = "nosmem" takes C typed as the output'),
    (NOSMEM.replace("[[1, 1, 1], [2, 1, 1]] }", '[[1, 1, 1]], scheduler = "stream_k" }'), "kernels[0]", "scheduler",
     'store = "nosmem" needs the default tile scheduler'),
    (NOSMEM.replace("[[1, 1, 1]] }", "[[1, 1, 1]], epilogue_tiles = [[64, 64]] }"), "kernels[1]", "epilogue_tiles",
     'store = "nosmem" stores from registers: no epilogue_tiles nor store_stages'),
    (NOSMEM.replace('"conv2d_fprop_sm90_persistent"', '"conv2d_fprop_sm90_transposed"'), None, "store",
     'store = "nosmem" is not built for this family'),
    (PERSISTENT.replace('output = "f16"', 'output = "f16"\npad_channels = "yes"'), None, "pad_channels",
     "expected true or false, got 'yes'"),
    (TRANSPOSED.replace('output = "f16"', 'output = "f16"\npad_channels = true'), None, "pad_channels",
     "pad_channels is not built for this family"),
    (GEMM.replace('output = "f16"', 'output = "f16"\npad_channels = true'), None, "pad_channels",
     "pad_channels is not built for this family"),
    (PERSISTENT.replace('output = "f16"', 'output = "f16"\npad_channels = true').replace(
        "[[1, 1, 1], [2, 1, 1]] }", '[[1, 1, 1]], scheduler = "stream_k" }'), "kernels[0]", "scheduler",
     "pad_channels launches its padding first: the default tile scheduler and plain launches only"),
    (PERSISTENT.replace('output = "f16"', 'output = "f16"\npad_channels = true').replace(
        "[[1, 1, 1], [2, 1, 1]] }", '[[1, 1, 1]], launches = ["pdl"] }'), "kernels[0]", "launches",
     "pad_channels launches its padding first"),
    (GEMV.replace("unroll = 4", "unroll = 16"), "kernels[0]", "unroll",
     "max_m 1 x rows 4 sums and unroll 16 x rows 4 chunks in flight need about 300 registers"),
    (GEMV.replace("threads = 128", "threads = 96"), "kernels[0]", "threads", "96 is not one of"),
    (GEMV.replace("unroll = 4 }", "unroll = 4, vector = 4 }"), "kernels[0]", "vector", "4 is not one of"),
    (GEMV.replace("unroll = 4 }", 'unroll = 4, lanes = "m" }'), "kernels[0]", "max_m",
     "a lane a row of A takes 32 rows: max_m must be 32, not 1"),
    (GEMV.replace("unroll = 4 }", 'unroll = 4, lanes = "n" }'), "kernels[0]", "lanes", "'n' is not one of k, m, mma"),
    (GEMV.replace("unroll = 4 }", 'unroll = 4, lanes = "mma" }'), "kernels[0]", "max_m",
     "tensor-core tiles of 16 rows: max_m must be 16, 32, 48 or 64, not 1"),
    (GEMV.replace("max_m = 1", "max_m = 16").replace("unroll = 4 }", 'unroll = 4, lanes = "mma" }'), "kernels[0]",
     "rows", "tensor-core tiles of 8 columns: rows must be 8, 16, 24 or 32, not 4"),
    (GEMV.replace("max_m = 1, rows = 4", "max_m = 16, rows = 8").replace("unroll = 4 }", 'unroll = 1, vector = 2, lanes = "mma" }'),
     "kernels[0]", "unroll", "unroll 1 blocks of vector 2 make no whole mma step"),
    (GEMV.replace("max_m = 1, rows = 4, threads = 128", "max_m = 64, rows = 32, threads = 256").replace(
        "unroll = 4 }", 'unroll = 1, lanes = "mma" }'), "kernels[0]", "threads",
     "the warps' sums take 65536 bytes of shared memory, more than 49152"),
    (GEMV.replace("unroll = 4 }", 'unroll = 4, a = "shared" }'), "kernels[0]", "a",
     'A in shared memory is read a lane a row: it needs lanes = "m"'),
    (GEMV.replace("unroll = 4 }", 'unroll = 4, a = "local" }'), "kernels[0]", "a", "'local' is not one of global, shared"),
    (GEMV.replace('accumulator = "f32"', 'accumulator = "f16"'), None, "accumulator",
     "written for accumulator f32, not f16"),
    (GEMM.replace('[[1, 1, 1]] }', '[[1, 1, 3]] }'), "kernels[1].clusters[0]", None, "cluster K must be 1"),
    (GEMM.replace('schedule = "pingpong"', 'schedule = "pingpong", swizzle = 4'), "kernels[1]", "swizzle",
     "unknown key"),
    (PERSISTENT.replace("[64, 128]]", "[48, 128]]"), "kernels[1].epilogue_tiles[1]", None,
     "epilogue tile 48x128 does not divide the tile 64x128"),
    (PERSISTENT.replace("[64, 128]]", "[64, 128, 1]]"), "kernels[1]", "epilogue_tiles", "list of 2 integers"),
    (PERSISTENT.replace("[64, 128]]", "[128, 128]]").replace("[64, 128, 64], schedule", "[128, 128, 64], schedule"),
     "kernels[1].epilogue_tiles[1]", None, "a pingpong epilogue tile is 64 x a multiple of 16, not 128x128"),
    (PERSISTENT.replace("[64, 128]]", "[64, 8]]"), "kernels[1].epilogue_tiles[1]", None,
     "a pingpong epilogue tile is 64 x a multiple of 16, not 64x8"),
    (PERSISTENT.replace("[1, 1, 1], [2, 1, 1]] }", "[1, 1, 1]], epilogue_tiles = [[64, 128]] }", 1),
     "kernels[0].epilogue_tiles[0]", None, "a cooperative epilogue tile is 128 x a multiple of 16, not 64x128"),
    (PERSISTENT.replace('[64, 128, 64], schedule = "pingpong"', '[64, 128, 64], schedule = "cooperative"'),
     "kernels[1]", "tile", "cooperative tile's M must be a multiple of 128"),
    (GEMM.replace('output = "f16"', 'output = "f16"\nsource = "f32"'), None, "source", "'f32' is not one of void"),
    (PERSISTENT.replace("[64, 128]] }", "[64, 128]], store_stages = 4 }"), "kernels[1]", "store_stages",
     "4 stores in flight, but a 64x128 tile has only 2 subtiles of 64x64"),
    (GEMM.replace("[[1, 1, 1]] }", "[[1, 1, 1]], store_stages = 2 }"), "kernels[1]", "store_stages",
     "store_stages needs explicit epilogue_tiles"),
    (PERSISTENT.replace("[64, 128]] }", "[64, 128]], store_stages = 1 }"), "kernels[1]", "store_stages",
     r"1 is outside \[2, 16\]"),
    (TRANSPOSED.replace("[[1, 1, 1]], epi", "[[1, 1, 1], [2, 2, 1]], epi"), "kernels[0].clusters[1]", None,
     "cluster spans one dimension, not 2x2x1"),
    (TRANSPOSED.replace('schedule = "pingpong"', 'schedule = "cooperative", scheduler = "stream_k"')
     .replace("[64, 128, 64]", "[128, 128, 64]").replace(", epilogue_tiles = [[64, 64], [64, 128]]", ""),
     "kernels[0]", "scheduler", "transposed kernels use the default tile scheduler"),
    (HALO.replace("rows = 8", "rows = 3"), "kernels[1]", "rows",
     r"rows \* \(width \+ 2\) = 90 must be a multiple of 8 of at most 256"),
    (HALO.replace("rows = 8", "rows = 9"), "kernels[1]", "rows", "= 270 must be a multiple of 8 of at most 256"),
    (HALO.replace("width = 28, rows = 8", "width = 254, rows = 1"), "kernels[1]", "rows",
     "width 254 x rows 1 needs 341048 bytes of shared memory, more than SM90's 232448"),
    (HALO.replace('accumulator = "f32"', 'accumulator = "f16"'), None, "accumulator",
     "written for accumulator f32, not f16"),
    (HALO.replace('element = "f16"', 'element = "f32"'), None, "element", "written for element f16 or bf16, not f32"),
    (POINTWISE.replace('element = "f16"', 'element = "bf16"'), None, "output",
     r"written for output bf16, not f16 \(with element bf16\)"),
    (HALO.replace("rows = 4 }", "rows = 4, channels = 128 }"), "kernels[0]", "channels", "unknown key"),
    (POINTWISE.replace("stages = 2", "stages = 3"), "kernels[1]", "stages", "3 stages: needs an even number"),
    (POINTWISE.replace("channels = 128", "channels = 96"), "kernels[1]", "channels", "not a multiple of 64"),
    (POINTWISE.replace("channels = 128", "channels = 192"), "kernels[1]", "channels", r"outside \[64, 128\]"),
    (POINTWISE.replace("stages = 2", "stages = 4"), "kernels[1]", "stages",
     "128 channels x 4 stages needs 345176 bytes of shared memory"),
])
def test_bad_specs_name_file_entry_and_key(tmp_path, text, entry, key, message):
    path = family(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_family(path)
    error = info.value
    assert str(path) in str(error)
    assert error.entry == entry
    assert error.key == key
    assert re.search(message, str(error)), str(error)


@pytest.mark.parametrize("text, key", [(SM80[:SM80.index("tiles = [")] + "tiles = []\n", "tiles"),
                                       (GEMM[:GEMM.index("kernels = [")] + "kernels = 3\n", "kernels")])
def test_entry_lists_must_hold_tables(tmp_path, text, key):
    with pytest.raises(SpecError, match="expected a non-empty list of tables") as info:
        load_family(family(tmp_path, text))
    assert info.value.key == key


def test_malformed_toml_names_the_file(tmp_path):
    path = family(tmp_path, 'kind = "conv2d_fprop_2x"\ntiles = [\n')
    with pytest.raises(SpecError, match=f"{path}: not valid TOML"):
        load_family(path)


def test_a_family_file_name_that_is_no_identifier_is_refused(tmp_path):
    path = family(tmp_path, SM80, "evil*; int x; *.toml")
    with pytest.raises(SpecError, match="plain identifier"):
        load_family(path)


def test_two_families_defining_one_kernel_are_refused(tmp_path):
    family(tmp_path, SM80, "a.toml")
    family(tmp_path, SM80, "b.toml")
    with pytest.raises(SpecError, match="also defined by family a"):
        load_catalog(tmp_path)


def test_an_empty_spec_directory_is_an_error(tmp_path):
    with pytest.raises(SpecError, match="no kernel family specs"):
        load_catalog(tmp_path)


def test_every_family_module_is_found_by_its_kind_and_nothing_else_is():
    from kernelgen import families

    modules = sorted(p.stem for p in Path(families.__file__).parent.glob("*.py")
                     if re.search(r"^KIND = ", p.read_text(), re.MULTILINE))
    assert sorted(m.__name__.rsplit(".", 1)[1] for m in families.FAMILIES.values()) == modules
    assert all(kind == module.KIND for kind, module in families.FAMILIES.items())
    assert {"common", "resident"}.isdisjoint(m.__name__.rsplit(".", 1)[1] for m in families.FAMILIES.values())
    assert len(families.FAMILIES) == 37


def test_two_modules_declaring_one_kind_are_refused_naming_both(tmp_path, monkeypatch):
    from kernelgen.discovery import by_attribute

    package = tmp_path / "twin_families"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text('KIND = "conv"\n')
    (package / "b.py").write_text('KIND = "conv"\n')
    (package / "c.py").write_text("HELPER = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"twin_families\.a and twin_families\.b both have KIND 'conv'"):
        by_attribute("twin_families", [str(package)], "KIND")
    (package / "b.py").write_text('KIND = "gemm"\n')
    import importlib
    importlib.invalidate_caches()
    import sys
    sys.modules.pop("twin_families.b", None)
    assert [m.__name__ for m in by_attribute("twin_families", [str(package)], "KIND").values()] == [
        "twin_families.a", "twin_families.b"], "in module-name order; c declares nothing"


def test_the_catalog_made_once_a_process_is_made_again_when_a_spec_changes(tmp_path):
    """catalog.kernel_catalog keeps a build's catalog for its second use in the process (the
    header's build), never past a change of the specs it was made from."""
    from kernelgen.catalog import kernel_catalog

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "fam.toml").write_text(sm80_family("threadblock = [128, 128, 32], warps = [2, 2, 1], stages = 3"))
    first = kernel_catalog(specs, None, [])
    assert [k.name for k in first] == [k.name for k in kernel_catalog(specs, None, [])] and len(first) == 1
    (specs / "fam.toml").write_text(sm80_family("threadblock = [128, 128, 32], warps = [2, 2, 1], stages = 3",
                                                "threadblock = [64, 64, 32], warps = [2, 2, 1], stages = 4"))
    assert len(kernel_catalog(specs, None, [])) == 2
    (specs / "fam.toml").unlink()
    with pytest.raises(SpecError, match="no kernel family specs"):
        kernel_catalog(specs, None, [])
