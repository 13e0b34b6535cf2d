"""The reducer: CSV validation, the total order of the choice, refusals that name the file,
and a header that stays as it was when a reduction fails."""

import dataclasses
import re

import pytest

from conftest import ROOT
from kernelgen import commands, reduce, render, results, units
from kernelgen.errors import ResultsError
from kernelgen.reduce import HEADER_FILES, build_header, load_set, select_best
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads

PROBLEMS = parse_workloads("conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 stride=1\n"
                           "conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 pad=0 stride=2\n")
CATALOG = {k.name: k for k in load_catalog(ROOT / "kernel_specs" / "families")}
SM80 = "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8"
SM80_B = "cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_32x10_nhwc_align8"
SM90 = "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_epi_tma"
HASHES = {SM80: "h80", SM80_B: "h80b", SM90: "h90"}


def row(workload, kernel, status="ok", runtime=None, **extra):
    r = {c: None for c in results.COLUMNS}
    r.update(workload=workload, kernel=kernel, status=status, runtime_ms=runtime, kernel_hash=HASHES.get(kernel, "x"),
             gpu="NVIDIA H200", driver="580.159.04", cuda="13.0", cutlass="4.2.0",
             rel_l2_error=2e-4 if status == "ok" else None, rel_max_error=4e-4 if status == "ok" else None)
    r.update(extra)
    return r


def write_set(tmp_path, times):
    """times: one dict per problem, kernel -> runtime (float) or a status string."""
    for problem, table in zip(PROBLEMS, times):
        rows = [row(problem.name, k, runtime=v) if isinstance(v, float) else row(problem.name, k, status=v)
                for k, v in table.items()]
        results.write_csv(tmp_path / f"{problem.name}.csv", rows)
    return tmp_path


def choose(tmp_path):
    return list(select_best(load_set(tmp_path, PROBLEMS), PROBLEMS, HASHES)["kernel"])


def test_fastest_ok_kernel_wins(tmp_path):
    write_set(tmp_path, [{SM80: 0.2, SM80_B: 0.1, SM90: "incorrect"}, {SM80: 0.05, SM80_B: 0.3, SM90: 0.06}])
    assert choose(tmp_path) == [SM80_B, SM80]


def test_ties_are_broken_by_kernel_name(tmp_path):
    write_set(tmp_path, [{SM80_B: 0.1, SM80: 0.1, SM90: 0.1}, {SM90: 0.1, SM80_B: 0.1, SM80: 0.1}])
    assert choose(tmp_path) == [min(SM80, SM80_B, SM90)] * 2


@pytest.mark.parametrize("status", ["unsupported", "incorrect", "failed", "crashed", "timeout"])
def test_only_ok_rows_compete(tmp_path, status):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: status, SM90: status}, {SM80: 0.5, SM80_B: 0.4, SM90: status}])
    assert choose(tmp_path) == [SM80, SM80_B]


def test_a_workload_without_an_ok_kernel_is_an_error_naming_it(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3},
                         {SM80: "unsupported", SM80_B: "incorrect", SM90: "crashed"}])
    with pytest.raises(ResultsError, match=PROBLEMS[1].name + r".*no kernel that ran correctly.*1 crashed"):
        choose(tmp_path)


def test_missing_csv_names_the_workload(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    with pytest.raises(ResultsError, match=f"{PROBLEMS[1].name}.csv: no results for workload"):
        choose(tmp_path)


def test_a_kernel_without_a_row_is_counted_as_not_measured(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM90: 0.3}, {SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    best = select_best(load_set(tmp_path, PROBLEMS), PROBLEMS, HASHES)
    assert list(best["kernel"]) == [SM90, SM90] and list(best["unmeasured"]) == [1, 0]
    write_set(tmp_path, [{SM80: 0.5}, {SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    with pytest.raises(ResultsError, match=r"no kernel that ran correctly on the current code \(1 measured on code "
                                           r"that has changed since \(e\.g\. \w+\), 2 not measured\): run scons profile"):
        select_best(load_set(tmp_path, PROBLEMS), PROBLEMS, {**HASHES, SM80: "new"})


def test_rows_measured_on_changed_code_never_compete(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3}, {SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    best = select_best(load_set(tmp_path, PROBLEMS), PROBLEMS, {**HASHES, SM90: "new"})
    assert list(best["kernel"]) == [SM80_B, SM80_B] and list(best["stale"]) == [1, 1]
    with pytest.raises(ResultsError, match=r"3 measured on code that has changed since .*run scons profile"):
        select_best(load_set(tmp_path, PROBLEMS), PROBLEMS, {k: "new" for k in HASHES})


def test_a_set_mixing_gpus_is_refused_naming_the_file(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3}, {SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    path = tmp_path / f"{PROBLEMS[1].name}.csv"
    path.write_text(path.read_text().replace("NVIDIA H200", "NVIDIA H100"))
    with pytest.raises(ResultsError, match=f"{PROBLEMS[1].name}.csv: measured with GPU NVIDIA H100"):
        choose(tmp_path)


def test_a_csv_mixing_software_versions_is_refused(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3}, {SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    path = tmp_path / f"{PROBLEMS[0].name}.csv"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace(",13.0,", ",12.8,")
    path.write_text("".join(lines))
    with pytest.raises(ResultsError, match="mixes measurements"):
        choose(tmp_path)


def valid_csv(tmp_path):
    write_set(tmp_path, [{SM80: 0.5, SM80_B: 0.4, SM90: 0.3}])
    return tmp_path / f"{PROBLEMS[0].name}.csv"


@pytest.mark.parametrize("corrupt, message", [
    (lambda t: t[: len(t) // 2], "truncated|not a well-formed"),
    (lambda t: "", "empty file"),
    (lambda t: t.replace("status,", "state,", 1), "missing required column.*status"),
    (lambda t: t.replace(",ok,", ",great,", 1), "line 2: status 'great'"),
    (lambda t: t.replace(",0.5,", ",fast,", 1), "runtime_ms 'fast' is not a number"),
    (lambda t: t.replace(",0.5,", ",,", 1), "ok row needs a positive"),
    (lambda t: t.replace(",0.5,", ",inf,", 1), "runtime_ms 'inf' is not finite"),
    (lambda t: t.replace(",0.5,", ",-1,", 1), r"runtime_ms '-1' is out of range \(1e-06 ms to 1e\+06 ms\)"),
    (lambda t: t + t.splitlines(keepends=True)[1], "duplicate rows"),
    (lambda t: t.replace(",unsupported,", ",unsupported,", 1).replace(",0.4,", ",0.4,", 1)
     .replace("\n", ",extra\n", 1), "not a well-formed|unknown column"),
])
def test_corrupt_csvs_are_refused_naming_the_file(tmp_path, corrupt, message):
    path = valid_csv(tmp_path)
    path.write_text(corrupt(path.read_text()))
    with pytest.raises(ResultsError, match=message) as info:
        results.read_csv(path)
    assert str(path) in str(info.value)


def test_runtime_must_be_empty_unless_ok(tmp_path):
    path = tmp_path / "x.csv"
    results.write_csv(path, [row("w", SM80, status="incorrect", runtime_ms=0.1)])
    with pytest.raises(ResultsError, match="runtime_ms must be empty unless status is ok"):
        results.read_csv(path)


def written(folder) -> dict:
    """The files a header build wrote into ``folder``, by name."""
    return {name: (folder / name).read_text() for name in HEADER_FILES}


def test_header_names_each_choice_and_is_unchanged_after_a_failed_reduction(tmp_path):
    write_set(tmp_path, [{SM80: 0.2, SM80_B: 0.1, SM90: 0.3}, {SM80: 0.05, SM80_B: 0.3, SM90: 0.01}])
    out = tmp_path / "out"
    templates = ROOT / "kernel_specs" / "templates"
    build_header(tmp_path, PROBLEMS, HASHES, CATALOG, templates, out)
    files = written(out)
    text, types = files["best_kernels.h"], files["best_kernels_cutlass.h"]
    assert text.count("#pragma once") == 1 and types.count("#pragma once") == 1
    assert re.findall(r"#include\s*[<\"]([^>\"]+)", text) == ["cstddef", "cuda_runtime_api.h", "cuda_fp16.h"], \
        "the header includes CUDA's headers only"
    assert "cutlass::" not in text
    assert f"using {SM80_B} = cutlass::conv::device::ImplicitGemmConvolution<{SM80_B}_base>;" in types
    assert f"using {SM90} = cutlass::conv::device::ConvUniversalAdapter<{SM90}_base>;" in types
    assert SM80 + " =" not in types, "only chosen kernels' types"
    assert f'{{"{PROBLEMS[1].name}",\n     {{8, 14, 14, 64, 128, 1, 1, 0, 0, 2, 2, 1, 1, 1}},\n     "{SM90}", "", 0.01,' in text
    assert "GPU NVIDIA H200, driver 580.159.04, CUDA 13.0, CUTLASS 4.2.0" in text
    # Deterministic: the same inputs give the same bytes.
    build_header(tmp_path, PROBLEMS, HASHES, CATALOG, templates, tmp_path / "again")
    assert written(tmp_path / "again") == files

    (tmp_path / f"{PROBLEMS[1].name}.csv").write_text("workload,kernel\n")
    with pytest.raises(ResultsError):
        build_header(tmp_path, PROBLEMS, HASHES, CATALOG, templates, out)
    assert written(out) == files
    assert sorted(p.name for p in out.iterdir()) == sorted(HEADER_FILES)


GEMM = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x256x64_1x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma"
MIXED = parse_workloads("conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 pad=0 stride=1\n"
                        "gemm m=256 n=1000 k=2048\n")


def mixed_set(tmp_path):
    hashes = {SM80: "h80", GEMM: "hg"}
    for problem in MIXED:
        rows = [row(problem.name, SM80, runtime=0.2, kernel_hash="h80"), row(problem.name, GEMM, runtime=0.1, kernel_hash="hg")]
        results.write_csv(tmp_path / f"{problem.name}.csv", rows)
    return hashes


def test_header_serves_gemm_workloads_and_gemm_kernels_for_convolutions(tmp_path):
    hashes = mixed_set(tmp_path)
    build_header(tmp_path, MIXED, hashes, CATALOG, ROOT / "kernel_specs" / "templates", tmp_path / "out")
    files = written(tmp_path / "out")
    text = files["best_kernels_cutlass.h"]
    assert f"using {GEMM} = cutlass::gemm::device::GemmUniversalAdapter<{GEMM}_base>;" in text
    assert "struct Conv2dFprop<8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1, 1> {\n  using Kernel = " + GEMM in text
    assert "struct Gemm<256, 1000, 2048> {\n  using Kernel = " + GEMM in text
    text = files["best_kernels.h"]
    assert text.count("inline constexpr Choice kConv2dFprop[]") == 1 and "inline constexpr GemmChoice kGemm[]" in text
    assert 'inline constexpr const char* kLaunchOrder[] = {\n    "' + GEMM + '",\n};' in text, "one kernel serves both"
    launcher = files["best_kernels_launcher.cu"]
    assert "constexpr int kConv2dFpropLauncher[] = {0};" in launcher and "constexpr int kGemmLauncher[] = {0};" in launcher


PDL = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_64x32x64_1x1x1_0_tnt_align8_warpspecialized_pingpong_epi_tma_pdl"


@pytest.mark.parametrize("winner, dependent", [(PDL, True), (GEMM, False)])
def test_a_dependent_launch_winner_turns_on_grid_dependency_control_before_cutlass(tmp_path, winner, dependent):
    hashes = {SM80: "h80", winner: "hw"}
    for problem in MIXED:
        rows = [row(problem.name, SM80, runtime=0.2, kernel_hash="h80"), row(problem.name, winner, runtime=0.1, kernel_hash="hw")]
        results.write_csv(tmp_path / f"{problem.name}.csv", rows)
    build_header(tmp_path, MIXED, hashes, CATALOG, ROOT / "kernel_specs" / "templates", tmp_path / "out", ROOT / "profiler")
    text = written(tmp_path / "out")["best_kernels_cutlass.h"]
    define = "#if !defined(CUTLASS_ENABLE_GDC_FOR_SM90)\n#define CUTLASS_ENABLE_GDC_FOR_SM90\n#endif\n"
    assert (define in text) == dependent
    assert ("---- dependent_launch.h, from kernelgen" in text) == dependent
    assert ("kernelgen::DependentLaunch<" in text) == dependent
    if dependent:
        assert text.index(define) < text.index('#include "cutlass/cutlass.h"') < text.index("---- dependent_launch.h")
        assert "programmatic dependent launch" in text


STREAM = PDL.replace("_pdl", "")  # one CUTLASS kernel type with PDL, compiled without grid-dependency control


def pdl_set(tmp_path, times):
    """times: for each of MIXED's problems, kernel -> runtime; the hashes of their kernels."""
    hashes = {k: "h" + k[-12:] for table in times for k in table}
    for problem, table in zip(MIXED, times):
        results.write_csv(tmp_path / f"{problem.name}.csv",
                          [row(problem.name, k, runtime=ms, kernel_hash=hashes[k]) for k, ms in table.items()])
    return hashes


@pytest.mark.parametrize("times, chosen", [
    # each way kept in turn, the other's problems choose again: PDL everywhere 0.1 + 0.11, STREAM 0.12 + 0.1
    ([{PDL: 0.1, STREAM: 0.12, SM80: 0.2}, {PDL: 0.11, STREAM: 0.1, SM80: 0.2}], [PDL, PDL]),
    ([{PDL: 0.1, STREAM: 0.12, SM80: 0.2}, {PDL: 0.13, STREAM: 0.1, SM80: 0.2}], [STREAM, STREAM]),
    # the GEMM has no PDL row: keeping PDL gives it SM80 (0.1 + 0.2), keeping STREAM 0.12 + 0.1
    ([{PDL: 0.1, STREAM: 0.12, SM80: 0.2}, {STREAM: 0.1, SM80: 0.2}], [STREAM, STREAM]),
    ([{PDL: 0.1, SM80: 0.15}, {STREAM: 0.1, SM80: 0.2}], [SM80, STREAM]),  # 0.15 + 0.1 against 0.1 + 0.2
    ([{PDL: 0.1, SM80: 0.25}, {STREAM: 0.1, SM80: 0.2}], [PDL, SM80]),
    # one way alone, or two kernel types: nothing to change
    ([{PDL: 0.1, STREAM: 0.12}, {PDL: 0.1, STREAM: 0.12}], [PDL, PDL]),
    ([{PDL: 0.1, SM80: 0.2}, {GEMM: 0.1, STREAM: 0.12}], [PDL, GEMM]),
])
def test_a_kernel_type_is_chosen_compiled_one_way(tmp_path, times, chosen):
    hashes = pdl_set(tmp_path, times)
    frame = load_set(tmp_path, MIXED)
    best = select_best(frame, MIXED, hashes, kernels_by_name=CATALOG)
    assert list(best["kernel"]) == chosen
    fastest = [min(t, key=t.get) for t in times]
    assert list(best["fastest"]) == ["" if f == c else f for f, c in zip(fastest, chosen)], "what each moved from"
    entries = {n: {"op": k.op, "element": k.element, "tolerance": 1e-2,
                   **({"shared_type": list(k.shared_type)} if k.shared_type else {})}
               for n, k in CATALOG.items() if n in hashes and hasattr(k, "shared_type")} | \
        {n: {"op": CATALOG[n].op, "element": "f16", "tolerance": 1e-2} for n in hashes if n == SM80}
    assert list(reduce.choose(frame, MIXED, hashes, entries)["kernel"]) == chosen, "as the manifest's entries say"
    assert list(select_best(frame, MIXED, hashes)["kernel"]) == [min(t, key=t.get) for t in times], "no descriptors"


def test_a_kernel_type_chosen_two_ways_without_another_kernel_is_refused_naming_both(tmp_path):
    hashes = pdl_set(tmp_path, [{PDL: 0.1}, {STREAM: 0.1}])
    with pytest.raises(ResultsError, match=f"kernels {STREAM} and {PDL} are one CUTLASS kernel compiled two ways, "
                       rf".* and workloads {MIXED[0].name}, {MIXED[1].name} ran no other kernel correctly") as e:
        select_best(load_set(tmp_path, MIXED), MIXED, hashes, kernels_by_name=CATALOG)
    assert str(e.value).startswith(str(tmp_path / f"{MIXED[0].name}.csv")) and "\n" not in str(e.value)


def test_a_searched_kernel_is_a_type_of_its_own():
    searched = next(k for k in CATALOG.values() if getattr(k, "searched", False))
    twin = dataclasses.replace(searched, searched=False)
    assert searched.shared_type is None
    assert twin.shared_type == (dataclasses.replace(twin, launch="stream").name, twin.launch) == (
        dataclasses.replace(twin, launch="stream").name, "pdl")
    split = next(k for k in CATALOG.values() if getattr(k, "splits", None))
    assert split.shared_type[0] == dataclasses.replace(split, splits=None).name != split.name, "a split of one type"


@pytest.mark.parametrize("units_of, lone", [
    # STREAM (not chosen) shares GEMM's unit while PDL is chosen: GEMM is compiled alone
    ({GEMM: "u1", STREAM: "u1", PDL: "u2", SM80: "u2"}, [GEMM]),
    ({GEMM: "u1", SM80: "u1", PDL: "u2", STREAM: "u2"}, [PDL]),
    ({GEMM: "u1", SM80: "u1", PDL: "u2", STREAM: "u3"}, []),  # STREAM's unit is not linked
    ({GEMM: GEMM, PDL: "u2", STREAM: "u2"}, [PDL]),  # a kernel's own object has no mates
])
def test_the_library_compiles_alone_a_chosen_kernel_whose_unit_holds_its_type_the_other_way(units_of, lone):
    members = {}
    for name, stem in units_of.items():
        if stem != name:
            members.setdefault(stem, []).append(name)
    linked = [GEMM, PDL] if PDL in units_of else [GEMM]
    kernels = [CATALOG[n] for n in units_of]
    assert commands.lone_kernels(linked, units.Units(units_of, members), kernels) == lone


def test_header_template_errors_name_the_template(tmp_path):
    (tmp_path / "best_kernels.h.mako").write_text("${undefined_name}\n")
    with pytest.raises(Exception, match="best_kernels.h.mako failed for best_kernels.h"):
        render.render(render.lookup(tmp_path), "best_kernels.h.mako", "best_kernels.h")


def test_a_pair_the_builds_profile_does_not_measure_is_not_counted_as_one_to_measure(tmp_path):
    write_set(tmp_path, [{SM80: 0.5}, {SM80: 0.5, SM80_B: 0.4}])
    frame = load_set(tmp_path, PROBLEMS)
    measured_with = {PROBLEMS[0].name: [SM90], PROBLEMS[1].name: []}  # SM80_B not measured on the first
    best = select_best(frame, PROBLEMS, HASHES, measured_with=measured_with)
    assert list(best["kernel"]) == [SM80, SM80_B]
    assert list(best["unmeasured"]) == [1, 0], "SM90 on the first (its pairs name it), none on the second"
    assert list(select_best(frame, PROBLEMS, HASHES)["unmeasured"]) == [2, 1]
