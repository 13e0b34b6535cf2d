"""`scons profile` in search mode, end to end with a fake nvcc and profiler: the cost model's
candidates are what is compiled and measured, a candidate that did not pass on a layer is
replaced by the next-ranked one on the next run, and the header chooses among what was
measured."""

import json
import os
from pathlib import Path

import pandas as pd

from kernelgen import results, units
from test_hostile_build import LAYERS, fake_build, run  # noqa: F401 (fake_build is a fixture)

SEARCH = ["WORKLOADS=pair", "TOP=2", "SPECS=kernel_specs/families"]


def compiled(tools) -> set:
    """The kernels the fake nvcc compiled, alone or in a unit (the kernels its source includes)."""
    found = set()
    for argv in tools.argvs():
        if "-c" in argv and "/kernels/" in argv[-1]:
            name = os.path.basename(argv[-1])[:-len(".cu")]
            found.update(units.unit_members(Path(argv[-1]).read_text()) if name.startswith(units.PREFIX) else [name])
    return found


def measured(project) -> pd.DataFrame:
    folder = project / "profile_results" / "pair" / "nvidia_h200"
    return pd.concat([results.read_csv(p) for p in sorted(folder.glob("*.csv"))])


def ranked(rows: pd.DataFrame) -> pd.DataFrame:
    """A candidates.csv's rows less the transposed GEMMs of 16-byte accesses and the thin GEMMs,
    families of no measured row measured in full beside the top k on these layers of 8 output
    channels and 8 or 16 input channels (tests/test_gemm_2x.py, tests/test_gemm_thin.py), and
    less the transposed conv tile of K 32 the model ranks first there, a depth its group has no
    rows of, proposed beside the top k (candidates.chosen_for), ranked again among the rest."""
    rest = rows[~rows["kernel"].str.contains(r"gemm_transposed|_gemm_thin_|_64x\d+x32_\w*_transposed")]
    return rest.assign(rank=rest.groupby("workload").cumcount() + 1)


def test_search_compiles_the_candidates_and_the_next_round_replaces_what_did_not_pass(fake_build, tmp_path):
    project, tools = fake_build
    build = tmp_path / "build"
    common = [*SEARCH, f"NVCC={tools.nvcc}", f"BUILD={build}"]
    shown = run(project, "candidates", *common)
    assert "kernels in the space and the listed families" in shown.stdout
    candidates = set((build / "candidates.txt").read_text().split())
    rows = pd.read_csv(build / "candidates.csv")
    assert set(rows["kernel"]) == candidates
    assert all(n == 1 for n in rows[rows["kernel"].str.contains("gemm_transposed")].groupby("workload").size())
    assert all(n == 1 for n in rows[rows["kernel"].str.contains(r"_64x\d+x32_\w*_transposed")].groupby("workload").size())
    rows = ranked(rows)
    assert all(n == 2 for n in rows.groupby("workload").size()), "each layer's top 2"

    first = rows[rows["rank"] == 1]["kernel"].iloc[0]
    tools.behave({first: "unsupported"})
    run(project, "profile", *common)
    assert compiled(tools) == candidates, "the build compiles the candidates and nothing else"
    frame = measured(project)
    assert set(frame["kernel"]) == candidates and (frame[frame["kernel"] == first]["status"] == "unsupported").all()
    pairs = json.loads((build / "kernels.json").read_text())["pairs"]  # what the profile measures on each layer
    assert set(pairs) == set(rows["workload"]) == set(frame["workload"])
    assert all(set(rows[rows["workload"] == w]["kernel"]) <= set(pairs[w]) for w in pairs), "its own candidates"
    assert all(set(frame[frame["workload"] == w]["kernel"]) <= set(pairs[w]) for w in pairs)

    run(project, "candidates", *common)
    next_rows = ranked(pd.read_csv(build / "candidates.csv"))
    again = set(next_rows["kernel"])
    assert first not in again, "what did not pass is no candidate again"
    layer = rows[rows["kernel"] == first]["workload"].iloc[0]
    before, after = (set(r[(r["workload"] == layer) & (r["rank"] <= 2)]["kernel"]) for r in (rows, next_rows))
    assert len(after) == len(before) == 2 and after - before, "the next-ranked kernel takes its place in the top 2"

    header = run(project, "best_kernels.h", *common)
    chosen = [line.split()[-1] for line in header.stdout.splitlines() if " ms  " in line]
    assert len(chosen) == len(LAYERS) and first not in chosen and set(chosen) <= candidates


def test_a_profile_narrowed_by_kernels_measures_the_layers_they_serve_and_leaves_the_others_as_they_were(
        fake_build, tmp_path, monkeypatch):
    """`scons profile KERNELS=<a family's new kernels>` on a set of layers of several kinds: the
    layers those kernels serve are measured with them, the others are named as left out and their
    CSVs are not rewritten; a comparison of such a build is refused, naming a layer left out."""
    project, tools = fake_build
    depthwise = "conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=3 s=3 pad=1 stride=1 groups=8"
    (project / "kernel_specs" / "workloads" / "pair.txt").write_text("\n".join(LAYERS + [depthwise]) + "\n")
    common = [*SEARCH, f"NVCC={tools.nvcc}", f"BUILD={tmp_path / 'build'}"]
    first = run(project, "profile", *common, "KERNELS=cutlass_tensorop_*")  # the dense layers' kernels
    assert "serves 2 of the 3 layers of pair: the other 1 are left out" in first.stdout
    folder = project / "profile_results" / "pair" / "nvidia_h200"
    before = {p.name: p.read_bytes() for p in folder.glob("*.csv")}
    assert len(before) == 2
    out = run(project, "profile", *common, "KERNELS=*dwconv_half2*3x3*")
    assert "KERNELS='*dwconv_half2*3x3*' serves 1 of the 3 layers of pair: the other 2 are left out of this build" \
        in out.stdout
    after = {p.name: p.read_bytes() for p in folder.glob("*.csv")}
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {"conv2d_fprop_f16_n1_h8_w8_c8_k8_r3_s3_pad1x1_str1x1_dil1x1_g8.csv"}
    frame = results.read_csv(folder / next(iter(changed)))
    assert len(frame) and frame["kernel"].str.contains(r"_dwconv_half2_.*_3x3_").all()
    refused = run(project, "profile", *common, "KERNELS=*dwconv_half2*11x11*", check=False)
    assert refused.returncode == 2 and "none of the" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    # a comparison times every layer's chosen kernel: refused before anything is compiled or measured
    # (a package named torch on the path for scons's check that PyTorch is installed; nothing imports it)
    (tmp_path / "torch_path" / "torch").mkdir(parents=True)
    (tmp_path / "torch_path" / "torch" / "__init__.py").write_text("raise ImportError('a stand-in')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "torch_path"),
                                                                 os.environ.get("PYTHONPATH")])))
    compared = run(project, "profile", "compare", *common, "KERNELS=*dwconv_half2*3x3*", check=False)
    assert compared.returncode == 2 and len(compared.stderr.strip().splitlines()) == 1, compared.stdout + compared.stderr
    assert compared.stderr.startswith("scons: compare: KERNELS='*dwconv_half2*3x3*' serves none of 2 of the 3 layers of "
                                      "pair (e.g. ") and "leave KERNELS= out" in compared.stderr
    assert {p.name: p.read_bytes() for p in folder.glob("*.csv")} == after


def test_a_profile_of_several_compile_waves_measures_each_pair_once_the_first_waves_early(fake_build, tmp_path):
    """`scons -j2 profile` of 185 SM90 kernels (27 units on 2 jobs): the kernels of the first waves
    are measured by profilers of their own once their units have compiled (early stages, `--early`),
    while the others compile, and the whole profile measures the rest; every pair measured once."""
    project, tools = fake_build
    build = tmp_path / "build"
    kernels = "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_void_f16nhwc_64x*_1x1x1_*"
    out = run(project, "profile", "WORKLOADS=pair", "TOP=all", f"KERNELS={kernels}", "SPECS=kernel_specs/families",
              f"NVCC={tools.nvcc}", f"BUILD={build}")
    stages = sorted((build / "stages").iterdir())
    lines = out.stdout.splitlines()
    started = [i for i, line in enumerate(lines) if "] nvcc unit-" in line]
    assert len(stages) == 3 and lines.index(f"link {stages[0]}/profiler") < started[-1], \
        "the first stage's profile starts with units still to compile"
    profilers = [Path(argv[0]).parent for argv in tools.argvs() if "--jobs" in argv]
    assert profilers == stages + [build], "one profiler run a stage, in order, then the whole profile's"
    asked = [json.loads(line) for line in (tools.log.parent / "jobs.log").read_text().splitlines()]
    held = [set(json.loads((folder / "kernels.json").read_text())["kernels"]) for folder in stages]
    everything = set(json.loads((build / "kernels.json").read_text())["kernels"])
    for kernels_asked, kernels_held in zip(asked, held):
        assert set(kernels_asked) == kernels_held and len(kernels_asked) == len(LAYERS) * len(kernels_held)
    assert set(asked[-1]) == everything - set().union(*held), "the whole profile: what the stages left"
    frame = measured(project)
    assert len(frame.drop_duplicates(["workload", "kernel"])) == len(frame) == len(LAYERS) * len(everything)
