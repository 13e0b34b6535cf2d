"""bench/agreement.py: two measurements of the same pairs compared, pairs of other code left out."""

import subprocess
import sys

from conftest import ROOT
from kernelgen import results

ROW = {"status": "ok", "gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "cutlass": "4.2.0", "timing": "graph"}


def folder(path, rows):
    """A set's folder of one workload CSV: rows (kernel, runtime_ms, kernel_hash, measured_at)."""
    path.mkdir(parents=True)
    results.write_csv(path / "w.csv", [{**ROW, "workload": "w", "kernel": k, "runtime_ms": ms, "min_ms": ms,
                                        "max_ms": ms, "kernel_hash": h, "measured_at": at} for k, ms, h, at in rows])
    (path / "compare.csv").write_text("not,a,workload\n")  # beside the workloads' CSVs, never read as one
    return path


def agreement(first, second, *more):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "agreement.py"), str(first), str(second), *more],
                          capture_output=True, text=True, timeout=60)


def test_pairs_of_the_same_code_are_compared_and_counted_within_the_bound(tmp_path):
    first = folder(tmp_path / "a", [("k1", 1.0, "h1", "2026-12-02T01:00:00Z"), ("k2", 1.0, "h2", "2026-12-02T01:00:00Z"),
                                    ("k3", 1.0, "h3", "2026-12-02T01:00:00Z"), ("k4", 1.0, "h4", "2026-12-02T01:00:00Z")])
    second = folder(tmp_path / "b", [("k1", 1.01, "h1", "2026-12-02T03:00:00Z"), ("k2", 1.05, "h2", "2026-12-02T03:00:00Z"),
                                     ("k3", 2.0, "other", "2026-12-02T03:00:00Z")])
    out = agreement(first, second)
    assert out.returncode == 0, out.stderr
    assert "pairs ok in both, same code: 2 (1 more measured on other code, left out)" in out.stdout
    assert "within 2%: 1 of 2 (50.0%)" in out.stdout
    assert "hours apart: 2.00-2.00" in out.stdout
    assert "within 10%: 2 of 2" in agreement(first, second, "--within", "0.1").stdout


def test_folders_with_nothing_to_compare_are_named(tmp_path):
    first = folder(tmp_path / "a", [("k1", 1.0, "h1", "2026-12-02T01:00:00Z")])
    second = folder(tmp_path / "b", [("k1", 1.0, "changed", "2026-12-02T01:00:00Z")])
    out = agreement(first, second)
    assert (out.returncode, out.stderr.strip()) == (1, "agreement.py: no ok pair of the same code in both folders")
    (tmp_path / "empty").mkdir()
    out = agreement(first, tmp_path / "empty")
    assert out.returncode == 1 and f"{tmp_path / 'empty'}: no workload CSVs" in out.stderr
