"""Compile units (kernelgen.units): which object holds each kernel of a build, from the files in
BUILD. The scons runs that compile them are in tests/test_hostile_build.py."""

import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import scons_runs
from conftest import ROOT

from kernelgen import commands, units
from kernelgen.units import plan_units, unit_name, unit_source

HEAVY = [f"cutlass3x_sm90_k{i}" for i in range(8)]
LIGHT = [f"kernelgen_sm80_k{i}" for i in range(8)]


def sources(names) -> dict:
    return {n: f"// {n}\n" for n in names}


def build(tmp_path: Path, objects: dict, texts: dict) -> tuple:
    """BUILD/kernels and BUILD/obj holding ``texts`` (name -> source) and an object, written after
    the sources, for each of ``objects`` (a unit's name -> its kernels, or a kernel's own name -> None)."""
    kernels, obj = tmp_path / "kernels", tmp_path / "obj"
    kernels.mkdir(exist_ok=True)
    obj.mkdir(exist_ok=True)
    for name, text in texts.items():
        (kernels / f"{name}.cu").write_text(text)
    for name, members in objects.items():
        if members is not None:
            (kernels / f"{name}.cu").write_text(unit_source(members))
    later = time.time() + 10
    for name in objects:
        (obj / f"{name}.o").write_text("object\n")
        os.utime(obj / f"{name}.o", (later, later))
    return kernels, obj


def test_no_more_kernels_than_jobs_are_each_compiled_alone(tmp_path):
    plan = plan_units(sources(HEAVY[:2]), tmp_path / "kernels", tmp_path / "obj", jobs=2)
    assert plan.objects == {n: n for n in HEAVY[:2]} and plan.members == {} and plan.compiled == HEAVY[:2]


@pytest.mark.parametrize("names, jobs, sizes", [
    (HEAVY[:2], 1, [2]),  # one job: one unit
    (HEAVY[:5], 2, [3, 2]),
    (HEAVY[:4] + LIGHT[:4], 2, [3, 5]),  # weights 9 and 7: the sorted names cut at half the weight
    (HEAVY + [f"cutlass3x_sm90_x{i}" for i in range(16)], 1, [8, 8, 8]),  # 8 CUTLASS 3.x at most
    ([f"cutlass3x_sm90_x{i:02d}" for i in range(24)], 2, [6, 6, 6, 6]),  # two jobs: two units each
    (HEAVY[:3], 16, [1, 1, 1]),
])
def test_the_kernels_to_compile_are_cut_into_one_unit_a_job_of_about_equal_weight(tmp_path, names, jobs, sizes):
    names = sorted(names)
    plan = plan_units(sources(names), tmp_path / "kernels", tmp_path / "obj", jobs=jobs)
    runs = [plan.members.get(stem, [stem]) for stem in plan.compiled]
    assert [len(r) for r in runs] == sizes
    assert sorted(k for r in runs for k in r) == names and [k for r in runs for k in r] == names, "runs of the sorted names"
    assert all(plan.objects[k] == stem for stem, r in zip(plan.compiled, runs) for k in r)
    assert all(stem == unit_name(r) for stem, r in zip(plan.compiled, runs) if len(r) > 1)


def test_kernels_weigh_their_compile_so_that_light_ones_do_not_split_the_heavy():
    """A CUTLASS 3.x kernel adds about 28 s of one core to its unit, one of the project's own about
    1 (units.weight): with two jobs, four of the first and forty of the second are cut after the
    third CUTLASS 3.x kernel, not into runs of as many kernels' weight as if each own kernel took a
    third of a CUTLASS one; and no unit holds more than MOST_KERNELS kernels (the second run of 41
    goes to nvcc in two)."""
    light = [f"kernelgen_sm80_k{i:02d}" for i in range(40)]
    plan = plan_units(sources(HEAVY[:4] + light), Path("kernels"), Path("obj"), jobs=2)
    assert units.MOST_KERNELS == 24
    assert [len(plan.members.get(stem, [stem])) for stem in plan.compiled] == [3, 20, 21]
    assert [k for stem in plan.compiled for k in plan.members.get(stem, [stem])] == sorted(HEAVY[:4] + light)
    assert units.weight("cutlass3x_sm90_x") > 8 * units.weight("cutlass_tensorop_x") > 8 * units.weight("kernelgen_x")


def test_the_units_compiled_now_go_to_nvcc_the_heaviest_first(tmp_path):
    """SConstruct hands the profiler its objects in ``stems`` order and SCons starts them in it: three
    CUTLASS 3.x kernels' unit before those of thirty light kernels (two of 15, MOST_KERNELS; together
    they weighed more when a CUTLASS 3.x kernel counted three), a kernel up to date last;
    ``stems(names)`` keeps the objects of those names."""
    done = "kernelgen_sm80_done"
    kernels, obj = build(tmp_path, {done: None}, sources([done]))
    light = [f"kernelgen_sm80_k{i:02d}" for i in range(30)]
    plan = plan_units(sources(HEAVY[:3] + light + [done]), kernels, obj, jobs=2)
    heavy_unit, first, second = unit_name(HEAVY[:3]), unit_name(light[:15]), unit_name(light[15:])
    assert plan.members == {heavy_unit: HEAVY[:3], first: light[:15], second: light[15:]}
    assert plan.stems() == [heavy_unit, first, second, done]
    assert plan.stems([done, light[3]]) == [first, done]


def test_a_unit_is_named_by_its_kernels_and_includes_each_once():
    assert unit_name(["b", "a"]) == unit_name(["a", "b"]) != unit_name(["a", "c"])
    assert units.unit_members(unit_source(["b", "a"])) == ["a", "b"]


def test_an_up_to_date_unit_is_linked_again_and_nothing_compiles(tmp_path):
    texts = sources(HEAVY[:3])
    unit = unit_name(HEAVY[:3])
    kernels, obj = build(tmp_path, {unit: HEAVY[:3]}, texts)
    plan = plan_units(texts, kernels, obj, jobs=1)
    assert plan.compiled == [] and plan.members == {unit: HEAVY[:3]} and set(plan.objects.values()) == {unit}


def test_a_unit_serves_a_build_that_needs_part_of_it_and_its_other_kernels_are_linked_from_it(tmp_path):
    unit = unit_name(HEAVY[:3])
    kernels, obj = build(tmp_path, {unit: HEAVY[:3]}, sources(HEAVY[:3]))
    plan = plan_units(sources(HEAVY[:2] + LIGHT[:1]), kernels, obj, jobs=1)
    assert plan.members == {unit: HEAVY[:3]} and plan.compiled == [LIGHT[0]]
    assert plan.objects == {HEAVY[0]: unit, HEAVY[1]: unit, HEAVY[2]: unit, LIGHT[0]: LIGHT[0]}
    assert plan.stems() == [LIGHT[0], unit], "what is compiled now first"


@pytest.mark.parametrize("change", ["a kernel's text", "a kernel's source newer", "a kernel's source gone",
                                    "the object gone"])
def test_a_unit_out_of_date_is_not_linked_and_its_kernels_compile_again(tmp_path, change):
    texts = sources(HEAVY[:3])
    unit = unit_name(HEAVY[:3])
    kernels, obj = build(tmp_path, {unit: HEAVY[:3]}, texts)
    if change == "a kernel's text":
        texts = dict(texts, **{HEAVY[1]: "// changed\n"})
    elif change == "a kernel's source newer":
        later = time.time() + 20
        os.utime(kernels / f"{HEAVY[1]}.cu", (later, later))
    elif change == "a kernel's source gone":
        (kernels / f"{HEAVY[2]}.cu").unlink()
    else:
        (obj / f"{unit}.o").unlink()
    plan = plan_units(texts, kernels, obj, jobs=1)
    assert plan.compiled == [unit] and plan.members == {unit: HEAVY[:3]}, "the same kernels: the same unit, compiled"


def test_two_units_that_share_a_kernel_are_never_linked_together(tmp_path):
    first, second = unit_name(HEAVY[:3]), unit_name(HEAVY[2:5])
    kernels, obj = build(tmp_path, {first: HEAVY[:3], second: HEAVY[2:5]}, sources(HEAVY[:5]))
    plan = plan_units(sources(HEAVY[:5]), kernels, obj, jobs=1)
    reused = [stem for stem in plan.stems() if stem not in plan.compiled]
    assert len(reused) == 1 and reused[0] in (first, second)
    linked = [k for stem in plan.stems() for k in plan.members.get(stem, [stem])]
    assert sorted(linked) == sorted(set(linked)) == HEAVY[:5], "each kernel linked from one object"
    assert len(plan.compiled) == 1, "the two kernels left: one unit"


def test_a_kernels_own_object_inside_a_linked_unit_is_not_linked_beside_it(tmp_path):
    unit = unit_name(HEAVY[:2])
    kernels, obj = build(tmp_path, {unit: HEAVY[:2], HEAVY[0]: None}, sources(HEAVY[:2]))
    plan = plan_units(sources(HEAVY[:2]), kernels, obj, jobs=1)  # HEAVY[1] has no object of its own
    assert plan.stems() == [unit] and plan.compiled == []


def test_a_kernel_with_its_own_object_up_to_date_is_linked_from_it(tmp_path):
    kernels, obj = build(tmp_path, {HEAVY[0]: None}, sources(HEAVY[:1]))
    plan = plan_units(sources(HEAVY[:3]), kernels, obj, jobs=1)
    assert plan.objects[HEAVY[0]] == HEAVY[0] and plan.compiled == [unit_name(HEAVY[1:3])]


@pytest.mark.parametrize("jobs, gib, most", [
    (16, 125, 4),  # the H200 machine: 6.6 GiB a job, four CUTLASS 3.x kernels a unit (about 6 GiB)
    (8, 40, 2),
    (2, 24, 8),
    (64, 64, 1),  # less than one kernel's worth a job: each alone
    (1, 1024, 8),
])
def test_a_unit_holds_what_the_memory_of_one_job_allows(tmp_path, jobs, gib, most):
    assert units.max_weight(jobs, gib * 2**30) == most * units.HEAVY
    names = [f"cutlass3x_sm90_x{i:03d}" for i in range(jobs * 9)]
    plan = plan_units(sources(names), tmp_path / "kernels", tmp_path / "obj", jobs=jobs, memory=gib * 2**30)
    assert max(len(plan.members.get(stem, [stem])) for stem in plan.compiled) <= most
    assert len(plan.compiled) % jobs == 0, "a multiple of the jobs"


def test_kernels_whose_sources_open_with_other_directives_never_share_a_unit(tmp_path):
    pdl = {n: f"#define CUTLASS_ENABLE_GDC_FOR_SM90\n#include \"cutlass/cutlass.h\"\nusing {n} = int;\n" for n in HEAVY[:4]}
    plain = {n: f"// {n}\n#include \"cutlass/cutlass.h\"\n\nusing {n} = int;\n" for n in HEAVY[4:]}
    plan = plan_units({**pdl, **plain}, tmp_path / "kernels", tmp_path / "obj", jobs=2)
    runs = [set(plan.members.get(stem, [stem])) for stem in plan.compiled]
    assert all(run <= set(pdl) or run <= set(plain) for run in runs) and len(runs) == 2
    assert units.preamble(plain[HEAVY[4]]) == ('#include "cutlass/cutlass.h"',)


def multiple_of_the_jobs(texts: dict, jobs: int, most: int) -> list:
    """The runs of a multiple of the jobs, as every build was cut before ``units._runs`` chose
    their number by when they end: the baseline it must not be slower than."""
    by_preamble = {}
    for name in sorted(texts):
        by_preamble.setdefault(units.preamble(texts[name]), []).append(name)
    groups = sorted(by_preamble.values())
    shares = [sum(map(units.weight, g)) for g in groups]
    low = [max(1, -(-share // most)) for share in shares]
    count = jobs * -(-max(sum(shares) / most, sum(low)) // jobs)
    return [run for g, n in zip(groups, units._counts(int(count), shares, low, [len(g) for g in groups]))
            for run in units.partition(g, n)]


@pytest.mark.parametrize("groups, jobs, fewer, sooner", [
    # as soon as a multiple of the jobs: the fewer runs, each paying its own once
    ((9, 7, 1), 4, True, False), ((30, 2, 2, 1), 8, True, False), ((40,), 3, True, False),
    ((3, 3, 3), 16, False, False),  # no more kernels than jobs: each alone
    # a build of many preambles (dependent launch or not, each epilogue's headers): the runs of a
    # multiple of the jobs add a wave of smaller runs where fewer end sooner
    ((10, 17, 7, 14, 14, 2, 25, 1, 20, 1), 16, True, True),
])
def test_kernels_of_several_preambles_make_the_runs_that_end_soonest(tmp_path, groups, jobs, fewer, sooner):
    texts = {f"cutlass3x_g{g}_k{i:02d}": f"#include \"g{g}.h\"\n" for g, n in enumerate(groups) for i in range(n)}
    memory = 125 * 2**30 * jobs / 16
    plan = plan_units(texts, tmp_path / "kernels", tmp_path / "obj", jobs=jobs, memory=memory)
    runs = [plan.members.get(stem, [stem]) for stem in plan.compiled]
    assert all(len({units.preamble(texts[k]) for k in run}) == 1 for run in runs)
    most = units.max_weight(jobs, memory) // units.HEAVY
    assert max(len(r) for r in runs) <= most
    if len(texts) > jobs:
        before = multiple_of_the_jobs(texts, jobs, units.max_weight(jobs, memory))
        assert units.runs_span(runs, jobs) <= units.runs_span(before, jobs) and len(runs) <= len(before)
        assert (len(runs) < len(before)) == fewer, (len(runs), len(before))
        assert (units.runs_span(runs, jobs) < units.runs_span(before, jobs)) == sooner


STAGED = SimpleNamespace(gpus="", shard=None)


@pytest.mark.parametrize("count, jobs, targets, config, stages", [
    (16, 4, ["profile"], STAGED, 3),  # four waves of four units: the first three measured early
    (40, 4, ["compare"], STAGED, 3),  # ten waves: three stages of three waves
    (8, 4, ["profile"], STAGED, 1),
    (4, 4, ["profile"], STAGED, 0),  # one wave: nothing to overlap
    (16, 1, ["profile"], STAGED, 0),  # one job: nothing runs beside a compile
    (16, 4, ["profiler"], STAGED, 0),
    (16, 4, ["profile"], SimpleNamespace(gpus="all", shard=None), 0),
    (16, 4, ["profile"], SimpleNamespace(gpus="", shard=(1, 2)), 0),
])
def test_a_profile_measures_its_first_waves_kernels_while_the_last_compile(tmp_path, count, jobs, targets,
                                                                            config, stages):
    names = [f"cutlass3x_sm90_x{i:03d}" for i in range(count)]
    plan = plan_units(sources(names), tmp_path / "kernels", tmp_path / "obj", jobs=jobs, memory=2**30)
    assert len(plan.compiled) == count or jobs == 1, "a kernel a unit: no more memory than that"
    found = commands.early_stages(config, plan, names, jobs, targets)
    assert len(found) == stages
    if stages:
        order = plan.stems(names)  # as SCons starts them
        wave = lambda name: order.index(plan.objects[name]) // jobs  # noqa: E731
        early = count // jobs - 1  # every wave but the last
        assert [max(map(wave, stage)) for stage in found] == [early * (i + 1) // stages - 1 for i in range(stages)]
        assert [min(map(wave, stage)) for stage in found] == [early * i // stages for i in range(stages)]
        assert sorted(n for stage in found for n in stage) == sorted(n for n in names if wave(n) < early)


def test_a_profile_of_several_waves_plans_its_early_stages_in_the_order_they_compile(tmp_path):
    """`scons -n -j4 profile` of a committed set on an empty BUILD and RESULTS (the fake GPU):
    each early stage links its profiler after its wave's units start and before the next wave's,
    measures with --early, and the whole profile runs last."""
    env = dict(os.environ, PATH=f"{ROOT / 'tests' / 'fakes'}{os.pathsep}{os.environ['PATH']}")
    build = tmp_path / "build"
    out = scons_runs.run(["-n", "-j4", "profile", "WORKLOADS=resnet50_b1", f"BUILD={build}",
                          f"RESULTS={tmp_path / 'results'}"], cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert f"in {commands.MOST_STAGES} early stage(s) while the others compile" in out.stdout
    links = [i for i, line in enumerate(lines) if line.startswith(f"link {build}/stages/")]
    early = [i for i, line in enumerate(lines) if line.endswith(" --early")]
    units_started = [i for i, line in enumerate(lines) if re.match(r"\[\d+/\d+\] nvcc ", line)]
    assert len(links) == len(early) == commands.MOST_STAGES, out.stdout
    assert [lines[i] for i in links] == [f"link {build}/stages/{i}/profiler" for i in range(len(links))]
    for k, (link, run) in enumerate(zip(links, early)):
        assert link < run and f"--manifest {build}/stages/{k}/kernels.json" in lines[run]
        assert sum(i < link for i in units_started) >= 4 * (k + 1), "a wave of four units a stage at least"
    assert lines.index(f"link {build}/profiler") > max(early)
    assert f"--manifest {build}/kernels.json" in lines[-2] and lines[-1] == "scons: done building targets."
