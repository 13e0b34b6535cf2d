"""How a time was taken is part of where it came from: the profiler times each batch replayed from
a CUDA graph (GPU time) unless told --launches, every row records which (``timing``), and rows of
one way are never compared with rows of the other. Files written before the column read as timed
by launches, which is how they were measured."""

import pytest

from conftest import FAKES, invocations
from kernelgen import reduce, results
from kernelgen.errors import KernelgenError, ResultsError
from test_hostile_input import KERNEL_HASHES, profile_run, refused, results_of
from test_reduce import PROBLEMS, SM80, SM90, row
from kernelgen.profile import profile
from conftest import write_manifest


def test_a_file_written_before_the_timing_column_reads_as_timed_by_launches(tmp_path):
    rows = [row(PROBLEMS[0].name, SM80, runtime=0.5), row(PROBLEMS[0].name, SM90, runtime=0.4)]
    text = results.to_csv_text(rows)
    header, *lines = text.splitlines()
    assert header.endswith(",timing,device,sm_clock_mhz,power_w,setting")
    old = "\n".join([header.removesuffix(",timing,device,sm_clock_mhz,power_w,setting")]
                    + [line.rsplit(",", 5)[0] for line in lines]) + "\n"
    path = tmp_path / f"{PROBLEMS[0].name}.csv"
    path.write_text(old)
    frame = results.read_csv(path)
    assert list(frame["timing"]) == ["launches", "launches"] and list(frame["device"]) == ["", ""]
    assert frame["sm_clock_mhz"].isna().all() and frame["power_w"].isna().all(), "no reading: empty"
    assert list(frame["setting"]) == ["", ""], "no launch setting: empty"
    first = lines[0].rsplit(",", 5)
    path.write_text(text.replace(f"\n{lines[0]}\n", f"\n{first[0]},wallclock,{','.join(first[2:])}\n", 1))
    refused(lambda: results.read_csv(path), ResultsError, "line 2: timing 'wallclock' is not one of graph, launches, then -rest<ms> and -hold<ms>")


def launches_run(tmp_path, workload_file, kernels=KERNEL_HASHES):
    manifest = write_manifest(tmp_path / "kernels.json", kernels)
    profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results", timeout=20.0,
            extra_args=["--launches"], log=lambda m: None)


def timings(tmp_path, workload_file):
    folder = tmp_path / "results" / workload_file.stem / "nvidia_h200"
    return {p.name: set(results.read_csv(p)["timing"]) for p in sorted(folder.glob("*.csv"))}


def test_rows_timed_by_launches_are_measured_again_on_gpu_time_and_replaced_once_complete(tmp_path, fake_gpu,
                                                                                          workload_file):
    _, log = fake_gpu
    launches_run(tmp_path, workload_file)
    assert set(map(frozenset, timings(tmp_path, workload_file).values())) == {frozenset({"launches"})}
    before = len(invocations(log))
    profile_run(tmp_path, workload_file)
    asked = invocations(log)[before:]
    assert sorted(sum(asked, [])) == sorted(list(KERNEL_HASHES) * 2), "every kernel again on both workloads"
    assert set(map(frozenset, timings(tmp_path, workload_file).values())) == {frozenset({"graph"})}
    again = len(invocations(log))
    profile_run(tmp_path, workload_file)
    assert invocations(log)[again:] == [], "rows of GPU time are up to date"


def test_a_selection_that_would_drop_rows_of_the_other_timing_is_refused_before_anything_is_lost(
        tmp_path, fake_gpu, workload_file):
    launches_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)
    refused(lambda: profile_run(tmp_path, workload_file, kernels={"kernel_a": "aaaa"}), KernelgenError,
            r"measured with GPU NVIDIA H200, driver 580\.159\.04, CUDA 13\.0, CUTLASS 4\.2\.0, timed by launches, "
            r"and 2 of their kernels are not in this build")
    assert results_of(tmp_path, workload_file) == before


@pytest.mark.parametrize("timings_", [("graph", "launches"), ("launches", "graph")])
def test_a_set_whose_files_were_timed_differently_is_refused(tmp_path, timings_):
    for problem, timing in zip(PROBLEMS, timings_):
        results.write_csv(tmp_path / f"{problem.name}.csv",
                          [row(problem.name, SM80, runtime=0.5, timing=timing)])
    message = refused(lambda: reduce.load_set(tmp_path, PROBLEMS), ResultsError,
                      "one set must come from one GPU and software stack")
    assert "timed by graph" in message and "timed by launches" in message


def test_rows_timed_without_the_rest_are_measured_again_with_it_and_the_header_says_how(tmp_path, fake_gpu,
                                                                                        workload_file):
    _, log = fake_gpu
    profile_run(tmp_path, workload_file)
    assert set(map(frozenset, timings(tmp_path, workload_file).values())) == {frozenset({"graph"})}
    manifest = write_manifest(tmp_path / "kernels.json", KERNEL_HASHES)

    def rested_run():
        before = len(invocations(log))
        profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results", timeout=20.0,
                extra_args=["--rest-ms", "50"], log=lambda m: None)
        return sum(invocations(log)[before:], [])

    assert sorted(rested_run()) == sorted(list(KERNEL_HASHES) * 2), "every pair again, rested"
    assert set(map(frozenset, timings(tmp_path, workload_file).values())) == {frozenset({"graph-rest50"})}
    assert rested_run() == [], "rested rows are up to date"
    assert results.timing_text("graph-rest50") == ("GPU time, each batch of launches replayed from a CUDA graph, "
                                                   "after a rest of 50 ms")


@pytest.mark.parametrize("timing, valid", [("graph-rest50", True), ("launches-rest12.5-hold20", True),
                                           ("graph-hold50", True), ("graph-rest", False), ("graph-hold5-rest5", False),
                                           ("graph-rest50-rest50", False), ("graph-rest1e-05", False)])
def test_a_rest_and_a_hold_are_part_of_the_timing(timing, valid):
    assert results.valid_timing(timing) is valid
