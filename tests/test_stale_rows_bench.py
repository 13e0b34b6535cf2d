"""bench/stale_rows.py: the kernels whose rows a set holds were measured on other code than theirs
now, as a LIST that bench/measure_sets.sh runs."""

import csv
import shutil
import subprocess
import sys

import pandas as pd

from conftest import ROOT
from kernelgen.report import current_code

sys.path.insert(0, str(ROOT / "bench"))
import stale_rows  # noqa: E402

SET = "resnet50_fc"


def test_rows_of_another_hash_name_their_kernel_and_rows_of_no_kernel_are_counted_apart():
    frame = pd.DataFrame({"kernel": ["k1", "k1", "k2", "k3", "gone"],
                          "kernel_hash": ["aa", "old", "bb", "old", "cc"]})
    assert stale_rows.stale_kernels(frame, {"k1": "aa", "k2": "bb", "k3": "cc"}) == (["k1", "k3"], 2, 1)
    assert stale_rows.stale_kernels(frame, {"k2": "bb"}) == ([], 0, 4)


def current_copy(tmp_path, stale: set) -> list:
    """The set's results under tmp_path with every row of a kernel of the catalog given the hash of
    its code now, those of ``stale`` another; its kernels of current code, sorted."""
    folder = tmp_path / SET / "nvidia_h200"
    shutil.copytree(ROOT / "profile_results" / SET / "nvidia_h200", folder)
    hashes = current_code(SET, tmp_path, "nvidia_h200")[5]
    for path in folder.glob("*.csv"):
        if path.name == "compare.csv":
            continue
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = reader.fieldnames, list(reader)
        for row in rows:
            if row["kernel"] in hashes:
                row["kernel_hash"] = "0123456789abcdef" if row["kernel"] in stale else hashes[row["kernel"]]
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    return sorted(hashes)


def test_a_set_of_current_rows_is_a_comment_and_one_of_old_rows_a_line_measure_sets_runs(tmp_path, capsys):
    kernels = current_copy(tmp_path, set())
    assert stale_rows.main([SET, "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {SET}: ") and ", 0 of other code (0 kernels), " in out and out.count("\n") == 1

    stale = {kernels[0], kernels[-1]}
    current_copy(tmp_path / "again", stale)
    assert stale_rows.main([SET, "--results", str(tmp_path / "again")]) == 0
    comment, line = capsys.readouterr().out.splitlines()
    assert ", 2 of other code (2 kernels), " in comment
    assert line == f"{SET} {','.join(sorted(stale))}"

    # measure_sets.sh takes the line as it is: the set profiled with those kernels, then compared
    (tmp_path / "list.txt").write_text(comment + "\n" + line + "\n")
    calls, fake = tmp_path / "calls", tmp_path / "fake_scons"
    fake.write_text(f'#!/bin/bash\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    fake.chmod(0o755)
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "list.txt")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "2", "LOGS": str(tmp_path / "logs")})
    assert calls.read_text().splitlines()[0] == f"profile|WORKLOADS={SET}|TOP=all|KERNELS={','.join(sorted(stale))}|-j2|", (
        out.stdout + out.stderr)


def test_a_set_or_gpu_without_results_is_refused_in_one_line(tmp_path, capsys):
    assert stale_rows.main(["no_such_set"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_set" in err and "unknown workload set" in err
    assert stale_rows.main([SET, "--gpu", "nvidia_a100"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--gpu nvidia_a100" in err and "has no results here" in err
    assert stale_rows.main(["--results", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"no set has results of nvidia_h200 in {tmp_path}\n"
