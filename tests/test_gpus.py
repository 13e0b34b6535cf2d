"""GPUS=: one profiler process per GPU of one model, each measuring its share of the build's
kernels, their rows joining the same CSVs; the CSVs are those of a run on one GPU (the fake nvcc,
nvidia-smi and profiler of tests/test_hostile_build.py; FAKE_GPUS names the GPUs)."""

import json
import os
import re

import pandas as pd

from kernelgen import results
from kernelgen.profile import Progress, balance
from kernelgen.workloads import parse_workloads
import scons_runs
from conftest import FAKES
from test_hostile_build import FAKE_PATH, KERNELS, LAYERS, fake_build, scons_args  # noqa: F401  (fixture)
from test_hostile_input import no_traceback


def scons(project, tmp_path, *args, gpus="NVIDIA H200", driver="580.159.04"):
    """scons with a fake nvidia-smi that lists ``gpus`` (comma-separated names) of ``driver``."""
    folder = tmp_path / f"smi-{abs(hash((gpus, driver)))}"
    folder.mkdir(exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nFAKE_GPUS='{gpus}' FAKE_DRIVER='{driver}' exec {FAKES / 'nvidia-smi'} \"$@\"\n")
    smi.chmod(0o755)
    out = scons_runs.run(scons_args(*args), cwd=project, env=dict(os.environ, PATH=f"{folder}{os.pathsep}{FAKE_PATH}"),
                         timeout=300)
    no_traceback(out)
    return out


def rows(root) -> pd.DataFrame:
    frames = [results.read_csv(root / "pair" / "nvidia_h200" / f"{p.name}.csv")
              for p in parse_workloads("\n".join(LAYERS) + "\n")]
    frame = pd.concat(frames).sort_values(["workload", "kernel"]).reset_index(drop=True)
    return frame.drop(columns=["measured_at", "device"]), frame["device"]


def test_two_gpus_each_measure_their_share_and_give_the_csvs_of_one(fake_build, tmp_path):
    project, toolchain = fake_build
    common = ["profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'build'}"]
    one = scons(project, tmp_path, *common, f"RESULTS={tmp_path / 'one'}")
    assert one.returncode == 0, one.stdout + one.stderr
    devices = toolchain.log.parent / "jobs.log.devices"
    devices.unlink()
    two = scons(project, tmp_path, *common, f"RESULTS={tmp_path / 'two'}", "GPUS=0,1", gpus="NVIDIA H200,NVIDIA H200")
    assert two.returncode == 0, two.stdout + two.stderr
    asked = [json.loads(line) for line in devices.read_text().splitlines()]
    by_gpu = {gpu: sorted(set(sum((kernels for g, kernels in asked if g == gpu), []))) for gpu, _ in asked}
    shares = balance(KERNELS, {k: 2 for k in KERNELS}, 2)
    assert by_gpu == {"0": shares[0], "1": shares[1]}, "each GPU its own share, no pair twice"
    assert "GPU 0 (NVIDIA H200, GPU-fake-0): 1 of the 2 kernels, 2 pair(s) to measure" in two.stdout
    assert "[GPU 1] " in two.stdout
    counts = re.findall(r"\[GPU \d\]\s+\[(\d+)/(\d+) on 2 GPUs, ~\w+ left\]", two.stdout)
    assert len(counts) == 4 and {total for _, total in counts} == {"4"}, "one count over both GPUs' 4 pairs"
    assert sorted(int(done) for done, _ in counts)[-1] == 4
    (two_rows, two_devices), (one_rows, one_devices) = rows(tmp_path / "two"), rows(tmp_path / "one")
    pd.testing.assert_frame_equal(two_rows, one_rows)
    assert set(one_devices) == {"0 GPU-fake-0"}, "a row says which GPU of its machine measured it"
    share = dict(zip(shares[0] + shares[1], ["0 GPU-fake-0", "1 GPU-fake-1"]))
    assert list(two_devices) == [share[k] for k in two_rows["kernel"]]


def test_after_a_driver_change_old_rows_aside_moves_the_rows_a_narrower_build_would_lose(fake_build, tmp_path):
    """A build of one kernel after a driver change is refused (its rows of the other kernel would be
    lost); with OLD_ROWS=aside, on two GPUs, the old rows move to the GPU folder's aside/ and the
    CSVs hold the new driver's rows alone."""
    project, toolchain = fake_build
    common = ["profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'build'}",
              f"RESULTS={tmp_path / 'r'}"]
    first = scons(project, tmp_path, *common)
    assert first.returncode == 0, first.stdout + first.stderr
    folder = tmp_path / "r" / "pair" / "nvidia_h200"
    old = {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv"))}
    narrow = [*common, f"KERNELS={KERNELS[0]}"]
    refused = scons(project, tmp_path, *narrow, driver="590.10")
    assert refused.returncode != 0 and "or profile with OLD_ROWS=aside" in refused.stderr, refused.stderr
    assert {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv"))} == old
    moved = scons(project, tmp_path, *narrow, "OLD_ROWS=aside", "GPUS=0,1", gpus="NVIDIA H200,NVIDIA H200",
                  driver="590.10")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert moved.stdout.count("(OLD_ROWS=aside)") == len(old)
    aside = folder / "aside"
    assert sorted(p.name for p in aside.glob("*.csv")) == sorted(old)
    for name in old:
        was = results.read_csv(aside / name)
        assert len(was) == 2 and set(was["driver"]) == {"580.159.04"} and set(was["kernel"]) == set(KERNELS)
        now = results.read_csv(folder / name)
        assert list(now["kernel"]) == [KERNELS[0]] and set(now["driver"]) == {"590.10"}
    bad = scons(project, tmp_path, *common, "OLD_ROWS=keep")
    assert bad.returncode != 0 and "OLD_ROWS='keep': expected 'aside'" in bad.stderr


def test_gpus_of_two_models_or_a_gpu_not_there_are_refused_naming_them(fake_build, tmp_path):
    project, toolchain = fake_build
    common = ["profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'build'}",
              f"RESULTS={tmp_path / 'r'}"]
    mixed = scons(project, tmp_path, *common, "GPUS=all", gpus="NVIDIA H200,NVIDIA H100")
    assert mixed.returncode != 0
    assert "GPUS='all' mixes GPU models (NVIDIA H100, NVIDIA H200)" in mixed.stderr, mixed.stderr
    absent = scons(project, tmp_path, *common, "GPUS=0,7", gpus="NVIDIA H200,NVIDIA H200")
    assert absent.returncode != 0 and "GPUS='0,7': expected 'all' or distinct indices" in absent.stderr
    bad = scons(project, tmp_path, *common, "GPUS=first")
    assert bad.returncode != 0 and "GPUS='first': expected 'all' or comma-separated GPU indices" in bad.stderr
    assert not (tmp_path / "r").exists(), "nothing measured"


def test_kernels_are_shared_so_that_each_gpu_has_about_as_many_pairs():
    pairs = {"a": 9, "b": 5, "c": 4, "d": 3, "e": 3, "f": 0}
    shares = balance(list(pairs), pairs, 2)
    assert sorted(sum(pairs[k] for k in share) for share in shares) == [12, 12]
    assert sorted(sum(shares, [])) == sorted(pairs), "every kernel in one share"
    assert balance(list(pairs), pairs, 2) == shares, "the same on every run"
    assert balance(["x"], {"x": 1}, 3) == [["x"], [], []]


def test_the_progress_of_several_gpus_is_one_count_and_the_longest_time_left():
    progress = Progress(100.0, {"0": 10, "1": 30})
    assert progress.line("0", "conv2d_x: 3 kernel(s) to profile", 101.0) == "conv2d_x: 3 kernel(s) to profile"
    # GPU 0: 5 of 10 in 10 s (10 s left); GPU 1 has not reported: its 30 pairs count, its pace is unknown
    assert progress.line("0", "  [5/10, ~10s left]   0.0100 ms  k1", 110.0) == \
        "  [5/40 on 2 GPUs, ~10s left]   0.0100 ms  k1"
    # GPU 1: 3 of 30 in 20 s: 27 left at 3 per 20 s, 180 s, the longer
    assert progress.line("1", "  [3/30, ~3m00s left]     failed  k2", 120.0) == \
        "  [8/40 on 2 GPUs, ~3m00s left]     failed  k2"


def test_each_ok_row_records_the_sm_clock_and_power_seen_as_it_was_timed(fake_build, tmp_path):
    project, toolchain = fake_build
    out = scons(project, tmp_path, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b'}",
                f"RESULTS={tmp_path / 'r'}")
    assert out.returncode == 0, out.stdout + out.stderr
    for problem in parse_workloads("\n".join(LAYERS) + "\n"):
        frame = results.read_csv(tmp_path / "r" / "pair" / "nvidia_h200" / f"{problem.name}.csv")
        assert list(frame["sm_clock_mhz"]) == [1980.0] * len(KERNELS) and list(frame["power_w"]) == [455.5] * 2


def test_a_reading_nvml_did_not_give_is_left_empty():
    from kernelgen.profile import _reading
    assert [_reading(t) for t in ("1755", "512.3", "-1", "nan", "inf", "x")] == [1755.0, 512.3, None, None, None, None]
