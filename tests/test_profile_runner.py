"""The profile driver around the profiler executable, with a fake profiler that speaks its
protocol: crash and hang isolation, resumption, re-measurement of changed kernels."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, invocations, write_manifest
from kernelgen import results
from kernelgen.profile import NoGpuError, profile, query_gpu
from kernelgen.workloads import parse_workloads

KERNELS = {"kernel_a": "aaaa", "kernel_b": "bbbb", "kernel_c": "cccc"}


def run(tmp_path, profiler, workload_file, kernels=KERNELS, timeout=20.0):
    manifest = write_manifest(tmp_path / "kernels.json", kernels)
    logs = []
    profile(manifest, profiler, str(workload_file), tmp_path, tmp_path / "results", timeout=timeout,
            log=logs.append)
    return logs


def csv_of(tmp_path, workload_file, index, gpu="nvidia_h200"):
    problem = parse_workloads(workload_file.read_text())[index]
    return results.read_csv(tmp_path / "results" / workload_file.stem / gpu / f"{problem.name}.csv")


def test_every_kernel_gets_a_row_per_workload(tmp_path, fake_gpu, workload_file):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    for index in (0, 1):
        frame = csv_of(tmp_path, workload_file, index)
        assert list(frame["kernel"]) == sorted(KERNELS)
        assert set(frame["status"]) == {"ok"}
        assert list(frame["kernel_hash"]) == [KERNELS[k] for k in sorted(KERNELS)]
        assert set(frame["gpu"]) == {"NVIDIA H200"} and set(frame["driver"]) == {"580.159.04"}
        assert (frame["gflops"] > 0).all()
    assert len(invocations(log)) == 1, "one profiler process for the whole set"


def test_a_crashing_kernel_is_recorded_and_the_rest_still_run(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, log = fake_gpu
    monkeypatch.setenv("FAKE_BEHAVIOUR", json.dumps({"kernel_b": "crash"}))
    run(tmp_path, profiler, workload_file)
    for index in (0, 1):
        frame = csv_of(tmp_path, workload_file, index).set_index("kernel")
        assert frame.loc["kernel_b", "status"] == "crashed"
        assert "illegal memory access" in frame.loc["kernel_b", "message"]
        assert frame.loc["kernel_a", "status"] == frame.loc["kernel_c", "status"] == "ok"
    runs = invocations(log)
    assert len(runs) == 3, "a fresh process after each crash"
    assert runs[1][0] == "kernel_c", "the new process starts after the crashed kernel"


def test_a_process_killed_by_a_signal_counts_as_a_crash(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, _ = fake_gpu
    monkeypatch.setenv("FAKE_BEHAVIOUR", json.dumps({"kernel_a": "die"}))
    run(tmp_path, profiler, workload_file)
    frame = csv_of(tmp_path, workload_file, 0).set_index("kernel")
    assert frame.loc["kernel_a", "status"] == "crashed"
    assert "SIGSEGV" in frame.loc["kernel_a", "message"]
    assert frame.loc["kernel_b", "status"] == "ok"


def test_a_hanging_kernel_times_out_and_the_rest_still_run(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, _ = fake_gpu
    problem = parse_workloads(workload_file.read_text())[1]
    monkeypatch.setenv("FAKE_BEHAVIOUR", json.dumps({f"{problem.name}/kernel_a": "hang"}))
    started = time.monotonic()
    run(tmp_path, profiler, workload_file, timeout=1.0)
    assert time.monotonic() - started < 15
    frame = csv_of(tmp_path, workload_file, 1).set_index("kernel")
    assert frame.loc["kernel_a", "status"] == "timeout"
    assert list(frame["status"][["kernel_b", "kernel_c"]]) == ["ok", "ok"]
    assert set(csv_of(tmp_path, workload_file, 0)["status"]) == {"ok"}


def test_a_second_run_measures_nothing_already_measured(tmp_path, fake_gpu, workload_file):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    before = csv_of(tmp_path, workload_file, 0)
    run(tmp_path, profiler, workload_file)
    assert len(invocations(log)) == 1, "nothing to profile: no profiler run"
    assert csv_of(tmp_path, workload_file, 0).equals(before)


def test_a_changed_kernel_is_measured_again(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    monkeypatch.setenv("FAKE_BEHAVIOUR", json.dumps({"kernel_b": 0.25}))
    run(tmp_path, profiler, workload_file, kernels={**KERNELS, "kernel_b": "b222"})
    assert invocations(log)[-1] == ["kernel_b", "kernel_b"], "only the changed kernel, once per workload"
    frame = csv_of(tmp_path, workload_file, 0).set_index("kernel")
    assert frame.loc["kernel_b", "kernel_hash"] == "b222"
    assert frame.loc["kernel_b", "runtime_ms"] == pytest.approx(0.25)
    assert len(frame) == 3


def test_new_kernels_are_added_without_losing_earlier_rows(tmp_path, fake_gpu, workload_file):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file, kernels={"kernel_a": "aaaa"})
    run(tmp_path, profiler, workload_file, kernels={"kernel_b": "bbbb"})
    assert invocations(log)[-1] == ["kernel_b", "kernel_b"]
    assert list(csv_of(tmp_path, workload_file, 0)["kernel"]) == ["kernel_a", "kernel_b"]


def test_rows_from_another_driver_are_measured_again(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    logs = run(tmp_path, profiler, workload_file)
    assert any("another GPU" in line for line in logs)
    assert set(csv_of(tmp_path, workload_file, 0)["driver"]) == {"590.10"}
    assert len(invocations(log)) == 2


def test_another_gpu_writes_its_own_folder_and_the_first_gpus_rows_stay(tmp_path, fake_gpu, workload_file,
                                                                         monkeypatch):
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    before = csv_of(tmp_path, workload_file, 0)
    monkeypatch.setenv("FAKE_GPU", "NVIDIA H100 80GB HBM3")
    run(tmp_path, profiler, workload_file)
    assert set(csv_of(tmp_path, workload_file, 0, "nvidia_h100_80gb_hbm3")["gpu"]) == {"NVIDIA H100 80GB HBM3"}
    assert csv_of(tmp_path, workload_file, 0).equals(before), "the H200's rows are untouched"
    assert len(invocations(log)) == 2


def test_no_gpu_is_said_plainly(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    with pytest.raises(NoGpuError, match="nvidia-smi not found"):
        query_gpu()


def test_sigterm_keeps_finished_workloads_and_a_rerun_resumes(tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, log = fake_gpu
    second = parse_workloads(workload_file.read_text())[1]
    first = parse_workloads(workload_file.read_text())[0]
    manifest = write_manifest(tmp_path / "kernels.json", KERNELS)
    command = [sys.executable, "-m", "kernelgen.profile", "--manifest", str(manifest), "--profiler",
               str(profiler), "--workloads", str(workload_file), "--sets-dir", str(tmp_path),
               "--results", str(tmp_path / "results")]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "site_scons"),
               FAKE_BEHAVIOUR=json.dumps({f"{second.name}/kernel_b": "hang"}))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results_dir = tmp_path / "results" / workload_file.stem / "nvidia_h200"
    deadline = time.monotonic() + 30
    while not (results_dir / f"{first.name}.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # now inside the hanging kernel of the second workload
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err
    assert not [p for p in results_dir.iterdir() if p.suffix != ".csv"], "no temporary files left behind"
    assert len(results.read_csv(results_dir / f"{first.name}.csv")) == 3
    partial = results.read_csv(results_dir / f"{second.name}.csv")
    assert list(partial["kernel"]) == ["kernel_a"], "what the interrupted workload finished is kept"

    run(tmp_path, profiler, workload_file)
    assert invocations(log)[-1] == ["kernel_b", "kernel_c"], "the rerun measures only what is missing"
    assert len(csv_of(tmp_path, workload_file, 1)) == 3


def test_the_manifests_pairs_are_what_is_measured_and_any_kernel_with_a_row_is_measured_again(
        tmp_path, fake_gpu, workload_file, monkeypatch):
    profiler, log = fake_gpu
    first, second = (p.name for p in parse_workloads(workload_file.read_text())[:2])
    manifest = write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"})
    profile(manifest, profiler, str(workload_file), tmp_path, tmp_path / "results", log=lambda m: None)
    manifest = write_manifest(tmp_path / "kernels.json", {**KERNELS, "kernel_a": "a222"})
    data = json.loads(manifest.read_text())
    data["pairs"] = {first: ["kernel_b"], second: ["kernel_b", "kernel_c"]}
    manifest.write_text(json.dumps(data))
    profile(manifest, profiler, str(workload_file), tmp_path, tmp_path / "results", log=lambda m: None)
    assert invocations(log)[-1] == ["kernel_a", "kernel_b", "kernel_a", "kernel_b", "kernel_c"], \
        "kernel_a, changed, again where it has rows; kernel_c only where the pairs name it"
    assert list(csv_of(tmp_path, workload_file, 0)["kernel"]) == ["kernel_a", "kernel_b"]
    assert list(csv_of(tmp_path, workload_file, 1)["kernel"]) == sorted(KERNELS)


def test_an_early_stage_measures_its_kernels_and_the_whole_profile_the_rest(tmp_path, fake_gpu, workload_file):
    """A build's early stage (--early: a part of its kernels, measured while the others compile)
    and then its whole profile: each pair measured once, every row kept."""
    profiler, log = fake_gpu
    part = write_manifest(tmp_path / "part.json", {"kernel_a": "aaaa"})
    manifest = json.loads(part.read_text())
    part.write_text(json.dumps({**manifest, "part": True}))
    profile(part, profiler, str(workload_file), tmp_path, tmp_path / "results", log=[].append, early=True)
    run(tmp_path, profiler, workload_file)
    assert invocations(log) == [["kernel_a", "kernel_a"], ["kernel_b", "kernel_c", "kernel_b", "kernel_c"]]
    assert list(csv_of(tmp_path, workload_file, 0)["kernel"]) == sorted(KERNELS)


def test_an_early_stage_leaves_a_file_of_another_stack_to_the_whole_profile(tmp_path, fake_gpu, workload_file,
                                                                            monkeypatch):
    """Rows of another driver for kernels the stage does not hold: where the whole profile would
    refuse or replace them, the stage measures nothing of that workload and writes nothing."""
    profiler, log = fake_gpu
    run(tmp_path, profiler, workload_file)
    before = csv_of(tmp_path, workload_file, 0)
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    part = write_manifest(tmp_path / "part.json", {"kernel_a": "aaaa"})
    profile(part, profiler, str(workload_file), tmp_path, tmp_path / "results", log=[].append, early=True)
    assert len(invocations(log)) == 1, "the stage ran no profiler"
    assert csv_of(tmp_path, workload_file, 0).equals(before)
    run(tmp_path, profiler, workload_file)
    assert set(csv_of(tmp_path, workload_file, 0)["driver"]) == {"590.10"}
