"""The profiler a build links holds the kernels it still measures: where the GPU and software stack
a profile would measure with can be known before the profiler runs (nvidia-smi, nvcc's version,
CUTLASS's, no PROFILE_ARGS=), the kernels whose every pair is measured on that stack and the
current code are not compiled for it; `scons compare` adds the set's chosen kernels, which it times
again (commands.profiler_plan). On a copy of the project with the fake nvcc of
tests/test_hostile_build.py, whose version names CUDA 13.0 here, and the fake GPU."""

import json
import os
import re
from types import SimpleNamespace

import pytest

import scons_runs
from conftest import ROOT
from kernelgen import commands, results
from test_hostile_build import FAKE_PATH, KERNELS, make_fake_build, run, scons_args
from test_hostile_input import no_traceback

SECOND = "conv2d_fprop_f16_n1_h8_w8_c16_k8_r1_s1_pad0x0_str1x1_dil1x1"  # the second layer of `pair`
VERSION = 'print("Cuda compilation tools, release 13.0, V13.0.88 (fake)")'


def stacked_build(folder):
    """A fake build whose nvcc says which CUDA it is (the last line of a real nvcc's --version) and
    whose profiler rests 50 ms before timing, as the real one does unless told: the stack a profile
    measures with is then known when SConstruct is read."""
    project, toolchain = make_fake_build(folder)
    text = toolchain.nvcc.read_text()
    assert VERSION in text
    toolchain.nvcc.write_text(text.replace(VERSION, VERSION + '; print("Build cuda_13.0.r13.0/compiler.00000000_0")'))
    wrapper = toolchain.log.parent / "profiler-wrapper"
    wrapper.write_text(wrapper.read_text().replace("*sys.argv[1:]]", '*sys.argv[1:], "--rest-ms", "50"]'))
    return project, toolchain


def jobs(toolchain) -> list:
    """The kernels each fake profiler `--jobs` run was asked for."""
    path = toolchain.log.parent / "jobs.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def drop_rows(project, workload: str, kernel: str) -> None:
    """The rows of ``kernel`` taken out of ``workload``'s CSV: a pair not measured yet."""
    path = project / "profile_results" / "pair" / "nvidia_h200" / f"{workload}.csv"
    frame = results.read_csv(path)
    results.write_csv(path, frame[frame["kernel"] != kernel].to_dict("records"))


def dry_run(project, toolchain, build, *targets, **env):
    out = scons_runs.run(scons_args("-n", *targets, "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={build}"),
                         cwd=project, env=dict(os.environ, PATH=FAKE_PATH, **env), timeout=120)
    no_traceback(out)
    assert out.returncode == 0, out.stdout + out.stderr
    return re.search(r"would compile .*", out.stdout)[0]


@pytest.fixture
def measured(tmp_path):
    """(project, toolchain, BUILD) of `pair` profiled once (both kernels on both layers, 1.0 ms
    each: the first by name is chosen), then the second kernel's row of the second layer dropped."""
    project, toolchain = stacked_build(tmp_path)
    build = tmp_path / "build"
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={build}")
    assert sorted(sum(jobs(toolchain), [])) == sorted(KERNELS * 2), "a cold profile measures every pair"
    drop_rows(project, SECOND, KERNELS[1])
    return project, toolchain, build


def test_a_profile_links_only_the_kernels_with_a_pair_still_to_measure(measured):
    project, toolchain, build = measured
    assert dry_run(project, toolchain, build, "profile") == (
        "would compile 0 of the 1 kernels the profiler links (of the build's 2: those with a pair to measure, and "
        "for compare the set's choices) and measure 1 (workload, kernel) pair(s) of 2 workload(s) not yet in "
        "profile_results/pair/nvidia_h200 on the current code")
    before = len(jobs(toolchain))
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={build}")
    assert jobs(toolchain)[before:] == [[KERNELS[1]]], "the missing pair alone"
    manifest = json.loads((build / "kernels.json").read_text())
    assert sorted(manifest["kernels"]) == [KERNELS[1]] and manifest["part"] is True
    first = results.read_csv(project / "profile_results" / "pair" / "nvidia_h200" / f"{SECOND}.csv")
    assert sorted(first["kernel"]) == sorted(KERNELS), "the other kernel's row is kept"
    assert dry_run(project, toolchain, build, "profile").startswith(
        "would compile 0 of the 1 kernels the profiler links"), "nothing to measure: the chosen kernel alone"


def test_compare_adds_the_chosen_kernels_and_another_stack_measures_every_kernel_again(measured):
    project, toolchain, build = measured
    assert dry_run(project, toolchain, build, "profile", "compare").startswith(
        "would compile 0 of the build's 2 kernels"), "the chosen kernel (the first) and the one to measure"
    assert dry_run(project, toolchain, build, "profile", FAKE_DRIVER="590.10").startswith(
        "would compile 0 of the build's 2 kernels"), "rows of another driver are measured again: every kernel"
    assert dry_run(project, toolchain, build, "profile", "PROFILE_ARGS=--rest-ms 20").startswith(
        "would compile 0 of the build's 2 kernels"), "another timing: every kernel"


def test_a_changed_kernel_is_linked_to_be_measured_again(measured):
    project, toolchain, build = measured
    folder = project / "profile_results" / "pair" / "nvidia_h200"
    for path in folder.glob("*.csv"):  # the first kernel's rows of older code
        frame = results.read_csv(path)
        frame.loc[frame["kernel"] == KERNELS[0], "kernel_hash"] = "0123456789abcdef"
        results.write_csv(path, frame.to_dict("records"))
    assert dry_run(project, toolchain, build, "profile").startswith("would compile 0 of the build's 2 kernels")


def stack_config(**values):
    return SimpleNamespace(**{"toolchain_version": "Build cuda_13.0.r13.0/compiler.36424714_0; CUTLASS 4.2.0",
                              "profile_args": [], "cutlass_includes": [ROOT / "no-cutlass"], **values})


@pytest.mark.parametrize("values, path", [
    ({}, ""),  # no nvidia-smi: no GPU
    ({"profile_args": ["--launches"]}, "fakes"),
    ({"toolchain_version": "nvcc not found; CUTLASS 4.2.0"}, "fakes"),
    ({}, "fakes"),  # CUTLASS's version cannot be read
], ids=["no GPU", "PROFILE_ARGS", "no nvcc", "no CUTLASS"])
def test_a_stack_not_known_before_the_profiler_runs_is_none(monkeypatch, values, path):
    monkeypatch.setenv("PATH", str(ROOT / "tests" / "fakes") if path else "/nonexistent")
    assert commands.measuring_stack(stack_config(**values)) is None


def test_the_stack_of_the_fake_gpu(monkeypatch):
    import cutlass_library
    from pathlib import Path
    monkeypatch.setenv("PATH", str(ROOT / "tests" / "fakes"))
    include = Path(cutlass_library.__file__).parent / "source" / "include"
    assert commands.measuring_stack(stack_config(cutlass_includes=[include])) == (
        "NVIDIA H200", "580.159.04", "13.0", "4.2.0", "graph-rest50")


def test_the_profilers_own_timing_is_its_default_rest():
    rest = re.search(r"double rest_ms = ([0-9]+);", (ROOT / "profiler" / "main.cu").read_text())
    assert results.PROFILER_TIMING == f"graph-rest{rest[1]}"
