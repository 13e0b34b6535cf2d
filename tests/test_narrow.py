"""The narrow 3x3 conv2d fprop family (dense 3x3 stride-1 layers of 8 to 64 channels in and out,
profiler/narrow_conv.h): its spec, the layers it serves and refuses (the profiler's `unsupported`,
mirrored for the cost model), its shared memory, its fused variants, the kernels compiled through
the rendering, and on a GPU the kernels verified, plain and fused, on small odd layers."""

import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, assert_family_refused, assert_kernels_compile, build_folder, requires_gpu, requires_nvcc
from kernelgen import cost_model, fusion, render, results
from kernelgen.families import conv2d_narrow as narrow
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_family

SPEC = ROOT / "kernel_specs" / "families" / "conv2d_fprop_narrow.toml"
PREFIX = "kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_narrow3x3_"
FAMILY = """\
kind = "conv2d_fprop_narrow"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {entry},
]
"""


def kernel(name: str):
    (k,) = [k for k in load_family(SPEC) if k.name == PREFIX + name]
    return k


def test_the_committed_spec_names_kernels_by_channels_tile_warps_and_schedule():
    kernels = load_family(SPEC)
    names = {k.name for k in kernels}
    assert PREFIX + "c24k24_tile8x16_warps4_persistent" in names and PREFIX + "c64k64_tile16x16_warps8" in names
    assert len(names) == len(kernels)
    assert all(k.op == "conv2d_fprop" and k.arch == 80 and not k.arch_specific and k.includes == ("narrow_conv.h",)
               and k.adapter == "kernelgen::NarrowOperation" and k.adapter_header == "narrow_adapter.h"
               for k in kernels)
    assert {k.channels for k in kernels} >= {(24, 24), (32, 32), (32, 64), (64, 64)}


@pytest.mark.parametrize("channels, tile, buffers, stride, expected", [
    # (rows + 2) x (columns + 2) window pixels of row_words(C / 2) words, K filter rows of
    # row_words(9 C / 2) words, 4 words of zeros; the figures bench/narrow_conv.cu printed on the GPU
    ((24, 24), (8, 16), 2, 1, 27664),
    ((32, 64), (16, 16), 1, 1, 63824),
    ((64, 64), (16, 16), 1, 1, 121424),
    ((48, 48), (8, 16), 2, 1, 82576),
    # at stride 2: (2 rows + 1) x (2 columns + 1) window pixels, the even columns of a row, then its odd
    ((16, 32), (8, 16), 2, 2, 2 * 17 * 33 * 48 + 32 * 304 + 16),
    ((64, 64), (8, 8), 2, 2, 2 * 17 * 17 * 144 + 64 * 1168 + 16),
])
def test_shared_memory_is_the_windows_the_filter_and_a_zero_line_at_conflict_free_strides(channels, tile, buffers,
                                                                                          stride, expected):
    assert narrow.shared_bytes(*channels, *tile, buffers, stride) == expected


def test_row_strides_are_four_words_more_than_a_multiple_of_eight():
    assert [narrow.row_words(w) for w in (4, 8, 12, 16, 36, 108, 144)] == [4, 12, 12, 20, 36, 108, 148]


@pytest.mark.parametrize("entry, key, message", [
    ("{ channels = [24, 20], tile = [8, 16], warps = 4 }", "channels", "K = 20"),
    ("{ channels = [72, 64], tile = [8, 16], warps = 4 }", "channels", "72 is outside [8, 64]"),
    ("{ channels = [24, 24], tile = [4, 6], warps = 4 }", "tile", "whole 16-pixel mma tiles"),
    ("{ channels = [24, 24], tile = [8, 16], warps = 3 }", "warps", "3"),
    ("{ channels = [64, 64], tile = [16, 32], warps = 4 }", "warps", "256 fp32 accumulators"),
    ('{ channels = [64, 64], tile = [32, 16], warps = 8, schedule = "persistent" }', "tile", "shared memory"),
    ('{ channels = [24, 24], tile = [8, 16], warps = 4, schedule = "resident" }', "schedule", "resident"),
    ("{ channels = [24, 24], tile = [8, 16], warps = 4, stride = 3 }", "stride", "3"),
    ("{ channels = [64, 64], tile = [16, 32], warps = 8, stride = 2 }", "tile", "shared memory"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = tmp_path / "conv2d_fprop_narrow.toml"
    path.write_text(FAMILY.format(entry=entry))
    assert_family_refused(path, "kernels[0]", key, message)


# (layer, the kernel, the refusal's words or None where it computes the layer)
SERVED = [
    (Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1), "c24k24_tile8x16_warps4_persistent", None),
    (Conv2dProblem(32, 149, 149, 32, 32, 3, 3, 0, 0), "c32k32_tile16x16_warps8", None),         # no padding
    (Conv2dProblem(1, 5, 7, 32, 64, 3, 3, 2, 2), "c32k64_tile16x16_warps8", None),               # padding 2
    (Conv2dProblem(32, 112, 112, 24, 32, 3, 3, 1, 1), "c24k24_tile8x16_warps4_persistent", "24 -> 24 channels"),
    (Conv2dProblem(32, 112, 112, 24, 24, 5, 5, 2, 2), "c24k24_tile8x16_warps4_persistent", "3x3 filters"),
    (Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1, 2, 2), "c24k24_tile8x16_warps4_persistent", "stride 1"),
    (Conv2dProblem(32, 224, 224, 16, 32, 3, 3, 1, 1, 2, 2), "s2_c16k32_tile8x16_warps4_persistent", None),  # DLA-34
    (Conv2dProblem(1, 5, 8, 64, 64, 3, 3, 0, 0, 2, 2), "s2_c64k64_tile8x8_warps4_persistent", None),      # 2 x 3 out
    (Conv2dProblem(32, 56, 56, 32, 32, 3, 3, 1, 1), "s2_c32k32_tile8x16_warps4_persistent", "stride 2"),
    (Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 2, 2, 1, 1, 2, 2), "c24k24_tile8x16_warps4_persistent", "dilation 1"),
    (Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1, groups=3), "c24k24_tile8x16_warps4_persistent", "a conv2d_fprop kernel"),
    (Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1, epilogue="bias+silu"), "c24k24_tile8x16_warps4_persistent",
     "not for conv2d_fprop"),  # the plain kernel serves the layers of no epilogue
]


@pytest.mark.parametrize("layer, name, words", SERVED)
def test_the_cost_model_serves_the_layers_the_kernel_takes(layer, name, words):
    why = cost_model.serves(kernel(name), layer)
    assert why is None if words is None else words in why


# The profiler's NarrowFprop::unsupported on the CPU for the layers of SERVED and a few more (a
# padded image smaller than the filter, padding 0 and 3), against the cost model's ``refuses``.
UNSUPPORTED_CHECK = r"""
#include <cstdio>
#include "narrow_conv.h"

int main() {
  const int layers[][13] = {%s};
  for (const auto& l : layers) {
    const char* why = %s::unsupported(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], l[11], l[12]);
    std::printf("%%d\n", why == nullptr);
  }
  return 0;
}
"""


@requires_nvcc
def test_the_cost_models_refusals_are_the_profilers(tmp_path):
    layers = [layer for layer, name, _ in SERVED if name.startswith("c24k24") and layer.groups == 1 and not layer.epilogue]
    layers += [Conv2dProblem(1, 1, 1, 24, 24, 3, 3, 0, 0), Conv2dProblem(1, 1, 1, 24, 24, 3, 3, 1, 1),
               Conv2dProblem(2, 9, 11, 24, 24, 3, 3, 3, 3), Conv2dProblem(2, 9, 11, 24, 24, 3, 3, 0, 1)]
    k = kernel("c24k24_tile8x16_warps4_persistent")
    rows = ", ".join("{" + ", ".join(str(v) for v in (c.n, c.h, c.w, c.c, c.k, c.r, c.s, c.pad_h, c.pad_w, c.stride_h,
                                                      c.stride_w, c.dilation_h, c.dilation_w)) + "}" for c in layers)
    kind = "kernelgen::NarrowFprop<24, 24, 8, 16, 4, true>"
    (tmp_path / "check.cu").write_text(UNSUPPORTED_CHECK % (rows, kind))
    built = subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}",
                            "-o", str(tmp_path / "check"), str(tmp_path / "check.cu")],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == [str(int(cost_model.serves(k, c) is None)) for c in layers]
    assert out.stdout.split().count("1") >= 2 and out.stdout.split().count("0") >= 3


def test_a_fused_variant_computes_its_layers_epilogue_compiled_in():
    plain = kernel("c24k24_tile8x16_warps4_persistent")
    layer = Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1, epilogue="bias+add+silu")
    (fused,) = [k for k in fusion.with_fused([plain], [layer]) if k.fusion]  # no optional_relu variant
    assert fused.name == plain.name + "_ebias_add_silu" and fused.op == "conv2d_fprop:bias+add+silu"
    assert fused.adapter == "kernelgen::FusedNarrowOperation" and cost_model.serves(fused, layer) is None
    assert cost_model.serves(plain, layer) is not None
    v = fused.values()
    assert (v["bias"], v["add"], v["activation"]) == (True, True, "kActivationSilu")
    assert plain.values()["activation"] == "kActivationNone" and not plain.values()["bias"]
    relu = fusion.fused(plain, "bias+relu").values()
    assert (relu["bias"], relu["add"], relu["activation"]) == (True, False, "kActivationRelu")


def test_the_rendered_type_is_the_kernel_of_its_channels_tile_and_epilogue():
    fused = fusion.fused(kernel("c32k64_tile4x32_warps4_persistent"), "bias+gelu")
    text = render.kernel_source(render.lookup(ROOT / "kernel_specs" / "templates"), fused)
    assert (f"using {fused.name} = kernelgen::NarrowFprop<32, 64, 4, 32, 4, true, true, false, "
            "kernelgen::kActivationGelu, 1>;") in text
    assert "kernelgen::FusedNarrowOperation<::" + fused.name in text and '#include "narrow_adapter.h"' in text
    strided = kernel("s2_c16k32_tile16x16_warps8")
    text = render.kernel_source(render.lookup(ROOT / "kernel_specs" / "templates"), strided)
    assert (f"using {strided.name} = kernelgen::NarrowFprop<16, 32, 16, 16, 8, false, false, false, "
            "kernelgen::kActivationNone, 2>;") in text and "16 -> 32 channels, stride 2, tiles" in text


@requires_nvcc
@pytest.mark.parametrize("name", ["c16k16_tile16x16_warps8", "c32k64_tile8x32_warps4_persistent",
                                  "c24k24_tile4x32_warps4_persistent", "s2_c64k64_tile8x8_warps4_persistent"])
def test_the_register_estimate_is_within_22_of_ptxas(tmp_path, name):
    """Conv2dFpropNarrow.registers, which the cost model counts the CTAs an SM holds by, against
    ptxas's count for the kernel compiled as the profiler compiles it (the fewest, the most, the one
    the estimate misses most of the committed kernels, and one of stride 2)."""
    import header_builds

    k = kernel(name)
    source = tmp_path / f"{k.name}.cu"
    source.write_text(render.kernel_source(render.lookup(ROOT / "kernel_specs" / "templates"), k))
    out = subprocess.run(["nvcc", *header_builds.MEASURED_FLAGS, "-c", f"-I{ROOT / 'profiler'}", "-Xptxas", "-v",
                          "-o", str(tmp_path / "k.o"), str(source)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    used = [int(n) for n in re.findall(r"Used (\d+) registers", out.stdout + out.stderr)]
    assert len(used) == 1 and abs(used[0] - k.registers()) <= 22, (used, k.registers())


@requires_nvcc
def test_kernels_plain_and_fused_compile_for_sm90a_through_the_rendering(tmp_path):
    """The device code of a plain, a persistent and fused kernels (one of stride 2), and the
    static_asserts that the spec's shared memory and threads are the kernel's."""
    kernels = [kernel("c24k24_tile16x16_warps8"), kernel("c64k64_tile4x32_warps4_persistent")]
    kernels += [fusion.fused(kernel("c32k64_tile4x32_warps4_persistent"), e) for e in ("bias+add+relu", "bias+gelu")]
    kernels += [fusion.fused(kernel("s2_c64k64_tile8x8_warps4_persistent"), "bias+add+relu")]
    assert_kernels_compile(tmp_path, kernels)


@requires_nvcc
def test_a_header_of_narrow_winners_launches_them_through_their_adapters_and_builds(tmp_path):
    """A set whose layers chose a fused and a plain narrow kernel: the header's launcher runs each
    behind the epilogue it computes (bias and SiLU; none), the header embeds narrow_conv.h, and the
    launcher links with the kernels' objects into a program that calls the library's entry point."""
    import header_builds
    from kernelgen.reduce import build_header
    from kernelgen.workloads import parse_workloads

    problems = parse_workloads("conv2d_fprop n=2 h=7 w=9 c=24 k=24 r=3 s=3 pad=1 epilogue=bias+silu\n"
                               "conv2d_fprop n=2 h=7 w=9 c=32 k=64 r=3 s=3 pad=0\n")
    chosen = [fusion.fused(kernel("c24k24_tile8x16_warps4_persistent"), "bias+silu"), kernel("c32k64_tile16x16_warps4")]
    for problem, k in zip(problems, chosen):
        row = {c: None for c in results.COLUMNS}
        row.update(workload=problem.name, kernel=k.name, status="ok", runtime_ms=0.01, rel_l2_error=2e-4,
                   rel_max_error=3e-4, kernel_hash="h", gpu="NVIDIA H200", driver="580.159.04", cuda="13.0",
                   cutlass="4.2.0")
        results.write_csv(tmp_path / f"{problem.name}.csv", [row])
    out = tmp_path / "out"
    templates = ROOT / "kernel_specs" / "templates"
    best = build_header(tmp_path, problems, {k.name: "h" for k in chosen}, {k.name: k for k in chosen}, templates, out,
                        ROOT / "profiler")
    assert list(best["kernel"]) == [k.name for k in chosen]
    launcher = (out / "best_kernels_launcher.cu").read_text()
    table = launcher[launcher.index("constexpr Epilogue kEpilogueOf[] = {"):]
    assert table[:table.index("};")].split("\n")[1:3] == [
        "    " + fusion.epilogue_cpp("bias+silu") + ",", "    {},"]
    assert "---- narrow_conv.h, from kernelgen, embedded" in (out / "best_kernels_cutlass.h").read_text()
    (out / "main.cu").write_text(
        '#include "best_kernels.h"\nint main() {\n  best_kernels::Conv2dFpropProblem p{2, 7, 9, 32, 64, 3, 3, 0, 0, 1, 1, 1, 1};\n'
        "  return best_kernels::kernel_for(p) == nullptr;\n}\n")
    sources = [out / "main.cu", out / "best_kernels_launcher.cu"]
    for k in chosen:
        sources.append(out / f"{k.name}.cu")
        sources[-1].write_text(render.kernel_source(render.lookup(templates), k))
    build = subprocess.run(["nvcc", *header_builds.MEASURED_FLAGS, f"-I{out}", f"-I{ROOT / 'profiler'}", "-o",
                            str(tmp_path / "main"), *map(str, sources)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-5000:]


# Small odd layers, plain and through each kind of epilogue, every kernel of the family on each:
# partial blocks along both image axes (7x9, 13x19), padding 0, 1 and 2, one image and several, at
# stride 1 and 2 (odd extents, and one of more blocks than the persistent CTAs), a layer of channels
# no kernel is built for (the build leaves it out) and one of stride 2 of channels no stride-2 kernel
# is built for (likewise).
LAYERS = ["n=2 h=7 w=9 c=24 k=24 r=3 s=3 pad=1", "n=1 h=13 w=19 c=32 k=32 r=3 s=3 pad=0",
          "n=3 h=9 w=10 c=32 k=64 r=3 s=3 pad=2", "n=2 h=17 w=21 c=16 k=32 r=3 s=3 pad=1",
          "n=2 h=11 w=12 c=48 k=48 r=3 s=3 pad=1", "n=1 h=30 w=33 c=64 k=64 r=3 s=3 pad=1",
          "n=2 h=7 w=9 c=24 k=24 r=3 s=3 pad=1 epilogue=bias+relu",
          "n=2 h=7 w=9 c=24 k=24 r=3 s=3 pad=1 epilogue=bias+add+silu",
          "n=1 h=13 w=19 c=32 k=32 r=3 s=3 pad=0 epilogue=bias+gelu",
          "n=3 h=9 w=10 c=32 k=64 r=3 s=3 pad=1 epilogue=bias+hardswish",
          "n=2 h=17 w=21 c=16 k=16 r=3 s=3 pad=1 epilogue=bias+sigmoid",
          "n=2 h=19 w=37 c=16 k=32 r=3 s=3 pad=1 stride=2", "n=1 h=20 w=17 c=32 k=64 r=3 s=3 pad=0 stride=2",
          "n=3 h=9 w=10 c=64 k=64 r=3 s=3 pad=2 stride=2", "n=8 h=224 w=224 c=16 k=32 r=3 s=3 pad=1 stride=2",
          "n=2 h=33 w=35 c=32 k=32 r=3 s=3 pad=1 stride=2 epilogue=bias+relu",
          "n=2 h=19 w=37 c=16 k=32 r=3 s=3 pad=1 stride=2 epilogue=bias+add+silu",
          "n=2 h=8 w=8 c=40 k=40 r=3 s=3 pad=1", "n=2 h=16 w=16 c=24 k=24 r=3 s=3 pad=1 stride=2"]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_plain_and_fused(tmp_path):
    """`scons profile TOP=all` of the family's kernels on LAYERS: every row of a layer a kernel is
    built for verified ok (fused kernels against the reference through the same epilogue), the
    others unsupported, and the two layers no kernel serves left out."""
    import pandas as pd

    from kernelgen import results
    from kernelgen.profile import query_gpu

    workloads = tmp_path / "narrow.txt"
    workloads.write_text("".join(f"conv2d_fprop {line}\n" for line in LAYERS))
    build = build_folder(tmp_path)
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", "profile", f"WORKLOADS={workloads}", "TOP=all",
                          "KERNELS=*_narrow3x3_*", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    folder = results.gpu_dir(tmp_path / "results", "narrow", query_gpu()[0])
    frame = pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])
    assert len(set(frame["workload"])) == len(LAYERS) - 2
    bad = frame[~frame["status"].isin(("ok", "unsupported"))]
    assert bad.empty, bad[["workload", "kernel", "status", "message"]].to_string()
    ok = frame[frame["status"] == "ok"]
    assert set(ok["workload"]) == set(frame["workload"]), "every layer has a kernel that ran it"
    assert (ok["rel_l2_error"] < 1e-3).all() and (ok["rel_max_error"] < 1e-3).all()
    assert ok["kernel"].str.contains("_persistent").any() and ok["kernel"].str.contains("_ebias_add_silu").any()
    strided = ok[ok["kernel"].str.contains("_narrow3x3_s2_")]
    assert set(strided["workload"]) == {w for w in frame["workload"] if "_str2x2_" in w} and len(strided) == 9


def test_the_cost_model_counts_a_narrow_kernels_tiles_so_that_its_tilings_rank_apart():
    """The features of the narrow kernels on one layer: its tiles of rows x columns pixels in waves
    of the CTAs an SM holds (shared memory, registers), each tile's window loaded (and, a CTA a
    tile, the filter), the busiest warp's k-steps; tilings of the same layer differ, and their
    attributes name tile, warps and schedule."""
    layer = Conv2dProblem(32, 112, 112, 24, 24, 3, 3, 1, 1)
    tiles, loads, mma = (cost_model.FEATURES.index(f) for f in ("tiles", "loads", "mma"))
    persistent, tile = kernel("c24k24_tile8x16_warps4_persistent"), kernel("c24k24_tile16x16_warps8")
    f_persistent, f_tile = (cost_model.features(k, layer, 132) for k in (persistent, tile))
    assert list(f_persistent) != list(f_tile)
    # 6 CTAs an SM, by registers (73 a thread, allocated 80, of 128; shared memory would hold 8, threads 16)
    per_sm = cost_model.REGISTERS_SM // (128 * 80)
    assert persistent.registers() == 73 and per_sm == 6 < cost_model.SHARED_MEMORY_SM // (persistent.shared_bytes + 1024)
    blocks = 32 * 14 * 7  # 8 x 16 tiles of 112 x 112
    waves = -(-blocks // (132 * per_sm))
    assert waves == 4
    assert f_persistent[tiles] == waves * per_sm
    assert f_persistent[loads] == pytest.approx(waves * 10 * 18 * 24 * 2 / 1e3 * per_sm)  # the window alone
    assert f_persistent[mma] == pytest.approx(waves * 4 * 2 * 16 * 24 * 14 * 16 * 2 / 1e6 * per_sm)
    assert persistent.k_steps == 14 and persistent.tiles_per_warp == 2
    assert {"Conv2dFpropNarrow:tile=8x16", "Conv2dFpropNarrow:schedule=persistent"} <= set(
        cost_model._kernel_attributes_of(persistent))
