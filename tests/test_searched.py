"""Kernels whose tile scheduler's runtime parameters are searched at profile time
(kernel_specs/families/*_searched.toml, profiler/searched_adapter_3x.h, profiler/launch_settings.h):
spec errors name file, entry and key; a searched kernel is its fixed twin's type with another
adapter, proposed beside that twin until the model has rows of its family; the profiler's setting
reaches the row, a setting that is not one is refused naming the line, and the header launches
each kernel with the setting its row records (a kernel chosen with two settings is two launchers);
the kernels compile as the profiler builds them; on a GPU each verifies with the fastest of its
settings on the layers it serves, that setting recorded, and runs with it alone in a profiler that
links its fixed twin (a kernel type of its own: the same one compiled twice failed there)."""

import re
from dataclasses import replace

import pytest

from conftest import ROOT, assert_family_refused, assert_kernels_compile, build_folder, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates, render, results
from kernelgen.cost_model import load_model, serves
from kernelgen.errors import ResultsError
from kernelgen.ops import op_of
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.ops.gemm import GemmProblem
from kernelgen.specs import load_catalog, load_family
from kernelgen.workloads import parse_workloads
from test_hostile_build import make_fake_build, run

FAMILIES = ROOT / "kernel_specs" / "families"
SPECS = [FAMILIES / "gemm_searched.toml", FAMILIES / "conv2d_fprop_sm90_persistent_searched.toml"]
FAMILY = """\
kind = "gemm_sm90"
element = "f16"
accumulator = "f32"
output = "f16"
searched = true
kernels = [
  { tile = [128, 64, 64], schedule = "cooperative", scheduler = "stream_k", clusters = [[1, 1, 1]] },
]
"""


@pytest.mark.parametrize("old, new, entry, key, message", [
    ('clusters = [[1, 1, 1]] }', 'clusters = [[1, 1, 1]], splits = [2] }', "kernels[0]", "splits",
     "searched = true searches a stream-K kernel's splits at profile time: no splits"),
    ("searched = true", "searched = true\npad_channels = true", None, "searched",
     "searched = true with pad_channels: the padding adapter searches no setting"),
    ('kind = "gemm_sm90"', 'kind = "conv2d_fprop_sm90_transposed"', None, "searched",
     "searched = true is not built for this family"),
    ("searched = true", 'searched = "yes"', None, "searched", "expected true or false"),
])
def test_bad_specs_are_refused_naming_file_entry_and_key(tmp_path, old, new, entry, key, message):
    path = tmp_path / "family.toml"
    text = FAMILY.replace(old, new)
    if "transposed" in new:  # its scheduler is the default one
        text = text.replace(', scheduler = "stream_k"', "").replace('"cooperative"', '"pingpong"')
    path.write_text(text)
    assert_family_refused(path, entry, key, message)


def test_a_searched_kernel_is_its_fixed_twin_of_its_own_name_through_another_adapter():
    kernels = [k for spec in SPECS for k in load_family(spec)]
    assert len(kernels) == 9
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    for kernel in kernels:
        twin = replace(kernel, searched=False)
        text, twin_text = (render.kernel_source(templates, k) for k in (kernel, twin))
        assert kernel.name == twin.name + "_searched"
        assert f"{kernel.adapter}<::{kernel.name}>" in text and '#include "searched_adapter_3x.h"' in text
        # the type definition is the twin's, renamed, but for the kernel type of its own it runs (the
        # twin's GemmUniversal under another name): the same kernel, another symbol in a binary of both
        type_of = lambda source, name: source.split("\n// CUTLASS")[1].split("namespace kernelgen {")[0].replace(name, "X")
        own = "struct X_kernel : X_base {};\n"
        assert own in type_of(text, kernel.name) and "X_kernel" not in type_of(twin_text, twin.name)
        assert type_of(text, kernel.name).replace(own, "").replace("X_kernel", "X_base") == type_of(twin_text, twin.name)
    assert {k.adapter for k in kernels} == {"kernelgen::SearchedGemmOperation3x", "kernelgen::SearchedGemmStreamKOperation3x",
                                            "kernelgen::SearchedConv2dPersistentOperation3x",
                                            "kernelgen::SearchedConv2dPersistentStreamKOperation3x"}


def test_fused_variants_search_too_but_none_takes_its_activation_at_launch():
    from kernelgen.fusion import with_fused

    problems = [Conv2dProblem(n=8, h=14, w=14, c=64, k=64, r=3, s=3, pad_h=1, pad_w=1, epilogue="bias+relu"),
                Conv2dProblem(n=8, h=14, w=14, c=64, k=64, r=3, s=3, pad_h=1, pad_w=1, epilogue="bias")]
    made = [k for k in with_fused(load_catalog(FAMILIES), problems) if getattr(k, "searched", False) and k.fusion]
    assert {k.fusion for k in made} == {"bias+relu", "bias"}, "no optional_relu variant of a searched kernel"
    assert {k.adapter for k in made} >= {"kernelgen::SearchedFusedGemmOperation3x",
                                         "kernelgen::SearchedFusedConv2dPersistentStreamKOperation3x"}


def test_a_searched_family_of_no_rows_is_proposed_beside_its_fixed_twins():
    """The model ranks a searched kernel as its twin (no feature reads a setting): while it has no
    rows of the family, each is proposed beside its twin wherever the twin is among a layer's
    candidates, at the twin's predicted time, unranked; a model that has rows of it ranks it."""
    model = load_model("nvidia_h200")
    kernels = load_catalog(FAMILIES)
    by_name = {k.name: k for k in kernels}
    problems = [GemmProblem(m=6304, n=768, k=3072), Conv2dProblem(n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad_h=1, pad_w=1),
                GemmProblem(m=32, n=1000, k=2048)]
    beside = 0
    for proposal in candidates.propose(problems, kernels, model, top=8):
        chosen = {k.name for _, k in proposal.ranked}
        for ms, kernel in proposal.ranked:
            if getattr(kernel, "searched", False):
                assert kernel.name in proposal.unranked and serves(kernel, proposal.problem) is None
                twins = [(m, k) for m, k in proposal.ranked if not getattr(k, "searched", False)
                         and candidates.variant_of(k) == candidates.variant_of(replace(kernel, searched=False))]
                assert twins and all(m == ms for m, _ in twins), kernel.name
                beside += 1
        for name in chosen - proposal.unranked:
            twin = by_name.get(name + "_searched")
            assert twin is None or serves(twin, proposal.problem) is not None or twin.name in chosen, name
    assert beside > 0
    fitted = replace(model, families=list(model.families) + ["gemm_searched", "conv2d_fprop_sm90_persistent_searched"])
    assert not any("_searched" in name for p in candidates.propose(problems, kernels, fitted, top=8) for name in p.unranked)


def test_the_profilers_setting_reaches_the_row_and_a_bad_one_is_refused(tmp_path):
    row = {c: "" for c in results.COLUMNS}
    row.update(workload="w", kernel="k_searched", status="ok", runtime_ms=0.5, min_ms=0.4, max_ms=0.6, kernel_hash="h",
               gpu="NVIDIA H200", driver="1", cuda="13.0", cutlass="4.2.0", timing="graph", setting="raster=n swizzle=2")
    path = tmp_path / "w.csv"
    results.write_csv(path, [row])
    assert list(results.read_csv(path)["setting"]) == ["raster=n swizzle=2"]
    for bad in ("raster=n,swizzle=2", "raster=n  swizzle=2", "decomposition=split_k splits=2;", "a=1 b=2 c=3 d=4 e=5"):
        results.write_csv(path, [dict(row, setting=bad)])
        with pytest.raises(ResultsError, match=r"line 2: setting .* is not name=value words"):
            results.read_csv(path)


SEARCHED_SET = ("gemm m=6304 n=768 k=3072\n"
                "gemm m=512 n=768 k=768\n"
                "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1\n")


def test_the_header_launches_each_kernel_with_the_setting_its_row_records(tmp_path):
    """A fake profile (searched kernels fastest, each recording "raster=n swizzle=2" but on the
    second layer "raster=m swizzle=4") and the header: each choice names its setting, the
    launcher's kSetting the same, a launcher for each (kernel, setting) chosen; the library links
    each kernel once."""
    project, tools = make_fake_build(tmp_path)
    second = parse_workloads(SEARCHED_SET)[1].name
    tools.behave({"*_searched": 0.5}, {second: "raster=m swizzle=4"})
    (project / "kernel_specs" / "workloads" / "sk.txt").write_text(SEARCHED_SET)
    common = ["WORKLOADS=sk", "SPECS=kernel_specs/families", f"NVCC={tools.nvcc}", f"BUILD={tmp_path / 'build'}"]
    run(project, "profile", *common)
    run(project, "best_kernels.h", *common)
    header = (tmp_path / "build" / "sets" / "sk" / "best_kernels.h").read_text()
    chosen = re.findall(r'"(\w+_searched)",\s+"([^"]*)", 0\.5,', header)
    # (the convolution's table first, then the GEMMs')
    assert [s for _, s in chosen] == ["raster=n swizzle=2", "raster=n swizzle=2", "raster=m swizzle=4"], header
    launcher = (tmp_path / "build" / "sets" / "sk" / "best_kernels_launcher.cu").read_text()
    settings = re.search(r"constexpr const char\* kSetting\[\] = \{([^}]*)\};", launcher).group(1)
    order = re.findall(r"&kernelgen::make_(\w+),", launcher)
    assert sorted(zip(order, settings.split(", "))) == sorted({(k, f'"{s}"') for k, s in chosen})
    assert len(set(order)) < len(order), "one kernel chosen with two settings: two launchers"
    cutlass = (tmp_path / "build" / "sets" / "sk" / "best_kernels_cutlass.h").read_text()
    assert cutlass.count('static constexpr const char* setting = "raster=') == 3, \
        "a build instantiating the kernels itself sees the settings too"
    out = run(project, "library", *common)
    assert "choices changed" not in out.stderr and (tmp_path / "build" / "sets" / "sk" / "libbest_kernels.a").is_file()
    # the row's setting edited to one the kernel does not record: refused, naming the file and the layer
    csv = next((project / "profile_results" / "sk" / "nvidia_h200").glob("gemm_f16_m6304*.csv"))
    csv.write_text(csv.read_text().replace(",raster=n swizzle=2\n", ",\n"))
    out = run(project, "best_kernels.h", *common, check=False)
    assert out.returncode != 0 and "searches its launch settings, but its row records none: run scons profile" in out.stderr


@requires_nvcc
def test_the_kernels_compile_as_the_profiler_builds_them(tmp_path):
    """A stream-K kernel (its decompositions) and a fused persistent conv (raster and swizzle)."""
    from kernelgen.fusion import fused

    kernels = [k for spec in SPECS for k in load_family(spec)]
    stream_k = next(k for k in kernels if k.scheduler == "stream_k" and k.kernel_op == "gemm")
    conv = next(k for k in kernels if k.scheduler == "default" and k.kernel_op == "conv2d_fprop")
    assert_kernels_compile(tmp_path, [stream_k, fused(conv, "bias+add+relu")])


NO_KERNELS = """#include "operation.h"
namespace kernelgen {
const std::vector<Registration>& registry() { static std::vector<Registration> none; return none; }
}
"""


@pytest.fixture(scope="module")
def bare_profiler(tmp_path_factory):
    """The profiler's driver (profiler/main.cu, reference.cu) linked with no kernel: it reads its job
    file, and refuses one naming the line, before it asks for a GPU."""
    import subprocess

    from header_builds import MEASURED_FLAGS, nvcc_command

    folder = tmp_path_factory.mktemp("bare-profiler")
    (folder / "none.cu").write_text(NO_KERNELS)
    command = nvcc_command(folder, "none.cu", [*MEASURED_FLAGS, f"-I{ROOT / 'profiler'}"], output="profiler",
                           more_sources=[ROOT / "profiler" / "main.cu", ROOT / "profiler" / "reference.cu"])
    out = subprocess.run([*command, "-ldl"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return folder / "profiler"


@requires_nvcc
@pytest.mark.parametrize("line, refused", [
    ("kernel k 0.001", False),
    ("kernel k 0.001 raster=n,swizzle=2", False),
    ("kernel k 0.001 raster=n,swizzle=2 again", True),
    ("kernel k raster=n,swizzle=2", True),
])
def test_a_job_line_takes_one_setting_at_most(bare_profiler, tmp_path, line, refused):
    import subprocess

    workload = parse_workloads("conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 pad=0 stride=1\n")[0]
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(f"{op_of(workload).job_line(workload)}\n{line}\n")
    out = subprocess.run([str(bare_profiler), "--jobs", str(jobs)], capture_output=True, text=True, timeout=60)
    said = f"fatal\t{jobs}:2: expected: kernel NAME TOLERANCE [SETTING]\n"
    assert (out.stdout == said and out.returncode == 2) if refused else said not in out.stdout, out.stdout + out.stderr


# GEMMs of few output tiles and of several waves, a 3x3 convolution, a strided one and a partial
# tile; a GEMM of 78 output tiles of 128x128 and a deep K (ConvNeXt-T's 3072 -> 768 at batch 32)
LAYERS = [
    "n=1 h=7 w=7 c=2048 k=512 r=1 s=1 pad=0 stride=1",
    "n=32 h=28 w=28 c=256 k=512 r=1 s=1 pad=0 stride=1",
    "n=8 h=14 w=14 c=256 k=256 r=3 s=3 pad=1 stride=1",
    "n=4 h=15 w=15 c=64 k=192 r=3 s=3 pad=1 stride=2",
    "gemm m=1568 n=768 k=3072",
]


def launched_alone(profiler, problem, kernel, setting: str, folder) -> tuple:
    """(status, message) of the profiler's run of ``kernel`` on ``problem`` with ``setting`` alone, in
    a process of its own: the setting is the kernel's first launch there, as where `scons compare`
    times a chosen kernel again and where the header launches it."""
    import subprocess

    from kernelgen.vocab import verify_tolerance

    jobs = folder / "alone.txt"
    jobs.write_text(f"{op_of(problem).job_line(problem)}\nkernel {kernel.name} {verify_tolerance(kernel)} "
                    f"{setting.replace(' ', ',')}\n")
    out = subprocess.run([str(profiler), "--jobs", str(jobs), "--repeats", "1", "--warmup", "1"],
                         capture_output=True, text=True, timeout=120)
    result = next((line.split("\t") for line in out.stdout.splitlines() if line.startswith("result\t")), None)
    return (result[3], result[10]) if result else ("no result", out.stdout[-2000:] + out.stderr[-2000:])


@requires_gpu
def test_each_kernel_verifies_with_its_fastest_setting_recorded(tmp_path):
    """... and runs with that setting alone, as `scons compare` and the header launch it, in a
    profiler that links its fixed twin too (the listed ones: the stream-K kernels), launched first."""
    from pathlib import Path

    from kernelgen.ops import serves as serves_op

    kernels = {k.name: k for spec in SPECS for k in load_family(spec)}
    listed = {k.name for k in load_catalog(FAMILIES)}
    twins = {t.name: t for t in (replace(k, searched=False) for k in kernels.values()) if t.name in listed}
    assert len(twins) == 2
    profiler = Path(build_folder(tmp_path)) / "profiler"
    for problem, frame in profile_layers(tmp_path, LAYERS, ",".join(["*_searched", *twins])):
        assert sorted(frame["kernel"]) == sorted(name for name, k in {**kernels, **twins}.items()
                                                 if serves_op(k, problem))
        for row in frame.itertuples():
            kernel = kernels.get(row.kernel)
            if kernel is None:  # a twin, measured to be in the build
                assert row.status in ("ok", "unsupported"), (problem.name, row.kernel, row.message)
            elif serves(kernel, problem) is None:
                assert row.status == "ok", (problem.name, row.kernel, row.message)
                assert 0 < row.rel_l2_error < 1e-3 and row.rel_max_error < 1e-3, (problem.name, row.kernel)
                form = r"decomposition=\w+( splits=[234])?" if kernel.scheduler == "stream_k" else r"raster=[mn] swizzle=[124]"
                assert re.fullmatch(form, row.setting), (problem.name, row.kernel, row.setting)
                alone = launched_alone(profiler, problem, kernel, row.setting, tmp_path)
                assert alone[0] == "ok", (problem.name, row.kernel, row.setting, alone)
            else:
                assert row.status == "unsupported", (problem.name, row.kernel, row.status, row.message)


def test_the_report_names_a_choices_setting():
    import pandas as pd

    from kernelgen.report import choices_table

    problems = parse_workloads(SEARCHED_SET)
    best = pd.DataFrame({"kernel": ["k_searched", "k", "k_searched"], "runtime_ms": [0.5, 0.25, 0.125],
                         "setting": ["raster=n swizzle=2", "", "decomposition=split_k splits=3"]})
    frame = pd.DataFrame({"workload": [p.name for p in problems], "status": ["ok"] * 3})
    lines = choices_table(frame, problems, best).splitlines()[2:5]
    assert [re.search(r"\| `(\w+)`( \(([^)]*)\))? \|", line).group(1, 3) for line in lines] == [
        ("k_searched", "raster=n swizzle=2"), ("k", None), ("k_searched", "decomposition=split_k splits=3")]
