"""bench/stale_compares.py: the layers whose chosen kernel (the reducer over a set's measured rows of
current code) is not the kernel its set's last compare timed, with both kernels' times, and the set's
network total at the compare and as estimated now."""

import csv
import shutil
import sys
from types import SimpleNamespace

import pandas as pd

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import stale_compares  # noqa: E402


def row(workload, kernel, kernel_ms, library_ms, count=1):
    return {"workload": workload, "layer": workload, "count": str(count), "kernel": kernel,
            "kernel_ms": str(kernel_ms), "library_ms": str(library_ms)}


def test_a_layer_is_stale_where_its_choice_is_another_kernel():
    compared = {"a": row("a", "k1", 0.010, 0.020), "b": row("b", "k2", 0.030, 0.020, count=2)}
    problems = [SimpleNamespace(name="a"), SimpleNamespace(name="b"), SimpleNamespace(name="c")]
    best = pd.DataFrame({"kernel": ["k1", "k3", "k4"], "runtime_ms": [0.011, 0.015, 0.001]})
    stale = stale_compares.stale_layers(compared, problems, best)
    assert [(p.name, timed["kernel"], kernel, ms) for p, timed, kernel, ms in stale] == [("b", "k2", "k3", 0.015)]
    assert stale_compares.network(compared, {}) == (0.010 + 2 * 0.030, 0.020 + 2 * 0.020)
    assert stale_compares.network(compared, {"b": 0.015}) == (0.010 + 2 * 0.015, 0.020 + 2 * 0.020)


def test_a_set_whose_compare_timed_an_older_choice_is_named_with_its_layer(tmp_path, capsys):
    """resnet50_fc's results with its compare's kernel renamed: its one layer is chosen anew, and
    the estimate takes the chosen kernel's profiled time; with the compare as committed, nothing is."""
    folder = tmp_path / "resnet50_fc" / "nvidia_h200"
    shutil.copytree(ROOT / "profile_results" / "resnet50_fc" / "nvidia_h200", folder)
    assert stale_compares.main(["resnet50_fc", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "resnet50_fc: the compare timed every choice\n"
    path = folder / "compare.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    chosen, library = rows[0]["kernel"], float(rows[0]["library_ms"])
    rows[0]["kernel"] = "an_older_kernel"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert stale_compares.main(["resnet50_fc", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("resnet50_fc: 1 of 1 layers chosen anew; network ")
    assert out[1].startswith(f"  {rows[0]['layer']}: an_older_kernel ") and f" -> {chosen} " in out[1]
    measured = pd.read_csv(next(f for f in folder.glob("gemm_*.csv")))
    ms = measured[measured["kernel"] == chosen]["runtime_ms"].iloc[0]
    assert out[0].endswith(f"about {ms / library:.2f} now")


def test_a_set_without_a_compare_is_an_error(tmp_path, capsys):
    assert stale_compares.main(["resnet50_fc", "--results", str(tmp_path)]) == 1
    assert "resnet50_fc: no compare of nvidia_h200 in" in capsys.readouterr().err
