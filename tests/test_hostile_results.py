"""The results side of hostile input, each case a row: numbers out of their range and rows of
another GPU are refused when a CSV is read, naming the file, the line and the column; two
profile runs at once lose no row and never time kernels on one GPU together; the header, the
report and compare choose by one policy."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import scons_runs
from conftest import FAKES, ROOT, write_manifest
from kernelgen import profile, reduce, results
from kernelgen.errors import ResultsError
from kernelgen.workloads import parse_workloads
from test_hostile_input import KERNEL_HASHES, TEMPLATES, no_traceback, refused, report_choice
from test_reduce import CATALOG, HASHES, PROBLEMS, SM80, SM80_B, SM90, row

WORKLOAD = PROBLEMS[0].name
TIMED = {"min_ms": 0.39, "max_ms": 0.41, "iterations": 400, "gflops": 1000.0}


def three_rows(**second) -> list:
    """Three ok rows of one workload, fully timed; SM80_B's with ``second`` (line 4 of the CSV: rows go
    by kernel name, SM90's first)."""
    return [row(WORKLOAD, SM80, runtime=0.5, **{**TIMED, "min_ms": 0.49, "max_ms": 0.51}),
            row(WORKLOAD, SM80_B, runtime=0.4, **{**TIMED, **second}),
            row(WORKLOAD, SM90, runtime=0.3, **{**TIMED, "min_ms": 0.29, "max_ms": 0.31})]


def gpu_csv(tmp_path, rows) -> Path:
    """The rows as the CSV of WORKLOAD in an H200's folder."""
    path = tmp_path / "nvidia_h200" / f"{WORKLOAD}.csv"
    path.parent.mkdir(exist_ok=True)
    results.write_csv(path, rows)
    return path


# ---- numbers within their column's range, rows of the folder's GPU ----------------------------

REFUSED_ROWS = [
    # (case, SM80_B's values, error regex); the values are written into its cells as they are
    ("denormal runtime", {"runtime_ms": "1e-320", "min_ms": "1e-320"},
     r"line 4: runtime_ms '1e-320' is out of range \(1e-06 ms to 1e\+06 ms\)"),
    ("zero runtime", {"runtime_ms": "0", "min_ms": "0"}, r"line 4: runtime_ms '0' is out of range"),
    ("runtime of hours", {"runtime_ms": "2e7", "max_ms": "2e7"}, r"line 4: runtime_ms '2e7' is out of range"),
    ("runtime over a double", {"runtime_ms": "1e999"}, r"line 4: runtime_ms '1e999' is not finite"),
    ("negative min", {"min_ms": "-0.39"}, r"line 4: min_ms '-0.39' is out of range \(1e-06 ms to 1e\+06 ms\)"),
    ("min above max", {"min_ms": 0.41, "max_ms": 0.39}, r"line 4: min_ms 0.41 is above max_ms 0.39"),
    ("runtime below min", {"min_ms": 0.45, "max_ms": 0.5}, r"line 4: runtime_ms 0.4 is not within min_ms 0.45 \.\. max_ms 0.5"),
    ("runtime above max", {"min_ms": 0.3, "max_ms": 0.35}, r"line 4: runtime_ms 0.4 is not within min_ms 0.3 \.\. max_ms 0.35"),
    ("zero iterations", {"iterations": "0"}, r"line 4: iterations '0' is not a whole number from 1 to 2\^53"),
    ("fractional iterations", {"iterations": "2.5"}, r"line 4: iterations '2.5' is not a whole number"),
    ("negative iterations", {"iterations": "-400"}, r"line 4: iterations '-400' is not a whole number"),
    ("iterations of 5000 digits", {"iterations": "9" * 5000},
     r"line 4: iterations '9{40}'\.\.\. \(5000 characters\) is not finite$"),
    ("iterations over 2^53", {"iterations": "1" + "0" * 20}, r"line 4: iterations '1(0{20})' is not a whole number"),
    ("negative gflops", {"gflops": "-1"}, r"line 4: gflops '-1' is negative"),
    ("infinite gflops", {"gflops": "inf"}, r"line 4: gflops 'inf' is not finite"),
    ("negative error", {"rel_max_error": "-0.0004"}, r"line 4: rel_max_error '-0.0004' is negative"),
    ("overflowing error", {"rel_l2_error": "1e400"}, r"line 4: rel_l2_error '1e400' is not finite"),
    ("another GPU in the H200's folder", {"gpu": "NVIDIA H100 80GB HBM3"},
     r"line 4: measured on NVIDIA H100 80GB HBM3 \(nvidia_h100_80gb_hbm3\), but the file lies in the folder of "
     r"the GPU nvidia_h200"),
    ("a GPU name of no letters", {"gpu": "---"}, r"line 4: measured on --- \(no folder\), but the file lies in"),
]


@pytest.mark.parametrize("values, match", [c[1:] for c in REFUSED_ROWS], ids=[c[0] for c in REFUSED_ROWS])
def test_numbers_out_of_range_and_rows_of_another_gpu_are_refused_naming_file_line_and_column(tmp_path, values,
                                                                                              match):
    path = gpu_csv(tmp_path, three_rows(**values))
    message = refused(lambda: results.read_csv(path, "nvidia_h200"), ResultsError, match)
    assert message.startswith(f"{path}: ") and len(message) < 400


ACCEPTED_ROWS = [
    # (case, SM80_B's values)
    ("the range's bounds", {"runtime_ms": "1e-6", "min_ms": "1e-6", "max_ms": "1e6"}),
    ("runtime equal to min and max", {"runtime_ms": 0.4, "min_ms": 0.4, "max_ms": 0.4}),
    ("iterations written as a float", {"iterations": "400.0"}),
    ("min, max and iterations not recorded", {"min_ms": None, "max_ms": None, "iterations": None}),
    ("an incorrect row with large errors", {"status": "incorrect", "runtime_ms": None, "rel_l2_error": "3e30"}),
]


@pytest.mark.parametrize("values", [c[1] for c in ACCEPTED_ROWS], ids=[c[0] for c in ACCEPTED_ROWS])
def test_numbers_within_range_are_read(tmp_path, values):
    frame = results.read_csv(gpu_csv(tmp_path, three_rows(**values)), "nvidia_h200")
    assert len(frame) == 3 and frame["iterations"].dropna().eq(400).all()


def test_the_rows_read_without_pandas_are_the_frames_rows(tmp_path):
    """results.read_rows (the profile driver's, no pandas) gives what rows_of(read_csv) gives: every
    column, numbers as floats, NaN where empty; a file of a header alone gives no row; and it
    refuses what read_csv refuses."""
    path = gpu_csv(tmp_path, three_rows())
    rows, frame_rows = results.read_rows(path, "nvidia_h200"), results.rows_of(results.read_csv(path, "nvidia_h200"))
    assert len(rows) == 3 and [list(r) for r in rows] == [list(results.COLUMNS)] * 3
    same = lambda a, b: a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)  # noqa: E731
    assert all(type(r[c]) is type(f[c]) and same(r[c], f[c]) for r, f in zip(rows, frame_rows) for c in results.COLUMNS)
    assert any(r[c] != r[c] for r in rows for c in results.NUMERIC), "an empty number: NaN"
    header_only = tmp_path / "header.csv"
    header_only.write_text(path.read_text().splitlines()[0] + "\n")
    assert results.read_rows(header_only) == [] and len(results.read_csv(header_only)) == 0
    refused(lambda: results.read_rows(path, "nvidia_a100"), ResultsError, "lies in the folder of the GPU nvidia_a100")


def test_a_count_of_iterations_is_written_back_as_it_was_read(tmp_path):
    """The profile driver rewrites the rows it keeps: 1234567 iterations stay 1234567, not 1.23457e+06."""
    path = gpu_csv(tmp_path, three_rows(iterations=1234567, max_ms=0.41))
    again = tmp_path / "again.csv"
    results.write_csv(again, results.rows_of(results.read_csv(path)))
    assert ",1234567," in path.read_text() and ",1234567," in again.read_text()


def test_the_header_build_refuses_a_denormal_runtime_and_keeps_the_header(tmp_path):
    """The denormal would make the header's GFLOP/s inf, which does not compile."""
    folder = tmp_path / "nvidia_h200"
    folder.mkdir()
    for problem in PROBLEMS:
        results.write_csv(folder / f"{problem.name}.csv", [row(problem.name, k, runtime=0.1) for k in HASHES])
    out = tmp_path / "out"
    reduce.build_header(folder, PROBLEMS, HASHES, CATALOG, TEMPLATES, out, gpu="nvidia_h200")
    before = (out / "best_kernels.h").read_text()
    path = folder / f"{PROBLEMS[1].name}.csv"
    path.write_text(path.read_text().replace(",0.1,", ",1e-320,", 1))
    refused(lambda: reduce.build_header(folder, PROBLEMS, HASHES, CATALOG, TEMPLATES, out, gpu="nvidia_h200"),
            ResultsError, r"line 2: runtime_ms '1e-320' is out of range")
    assert (out / "best_kernels.h").read_text() == before


SCONS_REFUSALS = [
    # (case, what is done to the CSV's text, error regex); scons best_kernels.h on a copy of a committed set
    ("denormal runtime", lambda t: re.sub(r"(\n[^\n]*?,ok,)[0-9.e-]+,", r"\g<1>1e-320,", t, count=1),
     r"line \d+: runtime_ms '1e-320' is out of range"),
    ("min above max", lambda t: re.sub(r"(\n[^\n]*?,ok,[0-9.e-]+,)([0-9.e-]+),([0-9.e-]+),", r"\g<1>\3,\2,", t, count=1),
     r"line \d+: min_ms [0-9.e-]+ is above max_ms"),
    ("zero iterations", lambda t: re.sub(r"(\n[^\n]*?,ok,(?:[0-9.e-]+,){3})[0-9]+,", r"\g<1>0,", t, count=1),
     r"line \d+: iterations '0' is not a whole number"),
    ("another GPU's rows", lambda t: t.replace("NVIDIA H200", "NVIDIA B200"),
     r"line 2: measured on NVIDIA B200 \(nvidia_b200\), but the file lies in the folder of the GPU nvidia_h200"),
]


@pytest.mark.parametrize("corrupt, match", [c[1:] for c in SCONS_REFUSALS], ids=[c[0] for c in SCONS_REFUSALS])
def test_scons_refuses_to_build_a_header_from_a_row_out_of_range(tmp_path, corrupt, match):
    folder = tmp_path / "res" / "resnet50_fc" / "nvidia_h200"
    shutil.copytree(ROOT / "profile_results" / "resnet50_fc" / "nvidia_h200", folder)
    path = next(p for p in folder.glob("*.csv") if p.name != "compare.csv")
    path.write_text(corrupt(path.read_text()))
    out = no_traceback(scons_runs.run(["best_kernels.h", "WORKLOADS=resnet50_fc", f"RESULTS={tmp_path / 'res'}",
                                       "GPU=nvidia_h200", f"BUILD={tmp_path / 'build'}"], cwd=ROOT, timeout=600))
    assert out.returncode != 0
    assert re.search(rf"^scons best_kernels.h: {re.escape(str(path))}: {match}", out.stderr, re.MULTILINE), out.stderr
    assert not (tmp_path / "build" / "sets" / "resnet50_fc" / "best_kernels.h").exists()


def test_an_output_without_a_finite_error_is_recorded_as_a_readable_row(tmp_path):
    """A kernel whose output holds inf or NaN has no finite error: the row keeps the message."""
    runner = profile.Runner({"kernels": {"k": {"family": "f", "hash": "h"}}}, FAKES / "profiler", tmp_path, 1.0, [])
    runner.device = profile.Device("NVIDIA H200", "580.159.04", "13.0", "4.2.0")
    state = profile.WorkloadState(PROBLEMS[0], tmp_path / f"{WORKLOAD}.csv", [], ["k"])
    record = runner.result_row(state, ["result", WORKLOAD, "k", "incorrect", "nan", "nan", "nan", "0", "inf", "nan",
                                       "output differs: 12 non-finite elements"])
    results.write_csv(state.csv_path, [record])
    frame = results.read_csv(state.csv_path)
    assert frame["rel_l2_error"].isna().all() and "non-finite" in frame["message"].iloc[0]


# ---- two profile runs at once ---------------------------------------------------------------------

def csv_rows(results_dir, workload_file) -> dict:
    """workload -> {kernel: (status, kernel_hash)} of the H200's CSVs of the set."""
    folder = results_dir / workload_file.stem / "nvidia_h200"
    rows = {}
    for problem in parse_workloads(workload_file.read_text()):
        frame = results.read_csv(folder / f"{problem.name}.csv", "nvidia_h200")
        rows[problem.name] = {r["kernel"]: (r["status"], r["kernel_hash"]) for r in results.rows_of(frame)}
    return rows


def driver(tmp_path, workload_file, kernels: dict, tag: str, **env):
    """A profile driver process (the fake profiler and nvidia-smi), with its own manifest and log."""
    manifest = write_manifest(tmp_path / f"kernels_{tag}.json", kernels)
    environment = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "FAKE_BEHAVIOUR")}
    environment.update(PYTHONPATH=str(ROOT / "site_scons"), TMPDIR=str(tmp_path), FAKE_LOG=str(tmp_path / f"{tag}.log"),
                       **env)
    return subprocess.Popen([sys.executable, "-m", "kernelgen.profile", "--manifest", str(manifest), "--profiler",
                             str(FAKES / "profiler"), "--workloads", str(workload_file), "--sets-dir", str(tmp_path),
                             "--results", str(tmp_path / "results"), "--timeout", "1"], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_profile_runs_at_once_keep_every_row_and_take_turns_on_the_gpu(tmp_path, fake_gpu, workload_file):
    """The first run holds the GPU for over a second (a kernel that hangs until the timeout); the
    second, with another selection, waits for it, saying so, then measures its own kernel."""
    first_layer = parse_workloads(workload_file.read_text())[0].name
    first = driver(tmp_path, workload_file, {"kernel_a": "aaaa", "kernel_c": "cccc"}, "first",
                   FAKE_BEHAVIOUR=json.dumps({f"{first_layer}/kernel_a": "hang"}))
    deadline = time.monotonic() + 30
    while not (tmp_path / "first.log").exists() and time.monotonic() < deadline:  # its profiler runs: it holds the GPU
        time.sleep(0.05)
    second = driver(tmp_path, workload_file, {"kernel_b": "bbbb"}, "second")
    outputs = [first.communicate(timeout=60), second.communicate(timeout=60)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    assert f"waiting for the profile run (pid {first.pid}) on GPU 0 ..." in outputs[1][0]
    assert "waiting" not in outputs[0][0]
    rows = csv_rows(tmp_path / "results", workload_file)
    assert rows[first_layer] == {"kernel_a": ("timeout", "aaaa"), "kernel_b": ("ok", "bbbb"),
                                          "kernel_c": ("ok", "cccc")}
    assert all(set(r) == {"kernel_a", "kernel_b", "kernel_c"} for r in rows.values())
    assert not [p for p in (tmp_path / "results").rglob("*") if p.is_file() and p.suffix != ".csv"], "no lock file"


def test_a_write_merges_the_rows_another_gpu_of_the_model_wrote_meanwhile(tmp_path, fake_gpu, workload_file,
                                                                           monkeypatch):
    """Two H200s (CUDA_VISIBLE_DEVICES 0 and 1) profile the set into one folder at once: while
    the first is measuring, the second measures kernel_b and writes every CSV of the set."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    manifest = write_manifest(tmp_path / "first.json", {"kernel_a": "aaaa", "kernel_c": "cccc"})
    other = write_manifest(tmp_path / "other.json", {"kernel_b": "bbbb"})
    logs, meanwhile = [], []

    def log(line):
        logs.append(line)
        if line.lstrip().startswith("[1/") and not meanwhile:
            with monkeypatch.context() as m:
                m.setenv("CUDA_VISIBLE_DEVICES", "1")
                profile.profile(other, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results",
                                timeout=20.0, log=meanwhile.append)
    profile.profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results", timeout=20.0,
                    log=log)
    assert any(line.lstrip().startswith("[2/2,") for line in meanwhile), "the second run measured meanwhile"
    assert not [line for line in logs + meanwhile if "waiting" in line], "two GPUs: nobody waits"
    for kernels in csv_rows(tmp_path / "results", workload_file).values():
        assert kernels == {"kernel_a": ("ok", "aaaa"), "kernel_b": ("ok", "bbbb"), "kernel_c": ("ok", "cccc")}


def test_a_killed_run_leaves_the_gpu_free(tmp_path, fake_gpu, workload_file, monkeypatch):
    """flock's lock goes with its process: a run after a SIGKILLed one measures without waiting."""
    first_layer = parse_workloads(workload_file.read_text())[0].name
    killed = driver(tmp_path, workload_file, KERNEL_HASHES, "killed",
                    FAKE_BEHAVIOUR=json.dumps({f"{first_layer}/kernel_b": "hang"}))
    deadline = time.monotonic() + 30
    while not (tmp_path / "killed.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    killed.kill()
    killed.communicate(timeout=10)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    logs = []
    started = time.monotonic()
    profile.profile(write_manifest(tmp_path / "kernels.json", KERNEL_HASHES), FAKES / "profiler", str(workload_file),
                    tmp_path, tmp_path / "results", timeout=20.0, log=logs.append)
    assert time.monotonic() - started < 10 and not [line for line in logs if "waiting" in line]
    assert all(set(r) == set(KERNEL_HASHES) for r in csv_rows(tmp_path / "results", workload_file).values())


GPU_KEYS = [
    # (case, CUDA_VISIBLE_DEVICES or None, lock key)
    ("unset", None, "0"),
    ("an index", "1", "1"),
    ("several", "2,3", "2"),
    ("a UUID", "GPU-8a7f3c1e-55d2-4b1e-9c0a-1f2e3d4c5b6a", "GPU-8a7f3c1e-55d2-4b1e-9c0a-1f2e3d4c5b6a"),
    ("a path, as a file name", "../../etc/x", "______etc_x"),
]


@pytest.mark.parametrize("visible, key", [c[1:] for c in GPU_KEYS], ids=[c[0] for c in GPU_KEYS])
def test_the_gpu_lock_is_the_profilers_device(monkeypatch, visible, key):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert profile.gpu_key() == key


# ---- one selection policy -----------------------------------------------------------------------

def test_the_report_of_the_bf16_set_lists_every_layer():
    assert len(report_choice("resnet50_bf16")) == len(parse_workloads((ROOT / "kernel_specs" / "workloads" /
                                                                       "resnet50_bf16.txt").read_text()))


BF16 = parse_workloads("conv2d_fprop n=2 h=8 w=8 c=64 k=64 r=1 s=1 dtype=bf16\n")
BF16_KERNEL = SimpleNamespace(op="conv2d_fprop", element="bf16", accumulator="f32", output="bf16")
POLICY = [
    # (case, what describes the kernels, chosen); "fast" errs 5e-3: within bf16's 8e-3, over f16's 1e-3
    ("descriptors (the header, the report)", {"fast": BF16_KERNEL, "slow": BF16_KERNEL}, "fast"),
    ("manifest entries (compare)", {n: {"op": "conv2d_fprop", "element": "bf16", "tolerance": 8e-3}
                                    for n in ("fast", "slow")}, "fast"),
    ("a kernel not described has no tolerance", {"slow": BF16_KERNEL}, "slow"),
]


@pytest.mark.parametrize("kernels, chosen", [c[1:] for c in POLICY], ids=[c[0] for c in POLICY])
def test_each_kernel_is_held_to_its_own_tolerance_whoever_chooses(tmp_path, kernels, chosen):
    rows = [row(BF16[0].name, "fast", runtime=0.1, kernel_hash="f", rel_l2_error=3e-3, rel_max_error=5e-3),
            row(BF16[0].name, "slow", runtime=0.2, kernel_hash="s", rel_l2_error=3e-4, rel_max_error=5e-4)]
    results.write_csv(tmp_path / f"{BF16[0].name}.csv", rows)
    frame = reduce.load_set(tmp_path, BF16)
    assert list(reduce.choose(frame, BF16, {"fast": "f", "slow": "s"}, kernels)["kernel"]) == [chosen]
    assert list(reduce.select_best(frame, BF16, {"fast": "f", "slow": "s"})["kernel"]) == ["slow"], "the strictest"
