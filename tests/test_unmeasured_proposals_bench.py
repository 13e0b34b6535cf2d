"""bench/unmeasured_proposals.py: the kernels the model proposes now for the layers over their limit
at a set's last compare that the set holds no row of, as a LIST that bench/measure_sets.sh runs."""

import csv
import shutil
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import unmeasured_proposals  # noqa: E402

SET = "resnet50_fc"


def row(workload, kernel_ms, library_ms):
    return {"workload": workload, "kernel_ms": str(kernel_ms), "library_ms": str(library_ms)}


def test_only_layers_over_their_limit_ask_and_only_for_proposals_without_rows_in_the_models_order():
    compared = [row("a", 0.0120, 0.0100),   # 1.20 of a library over 5 us: over 1.10
                row("b", 0.0060, 0.0040),   # 1.50 of one under 5 us: over 1.25
                row("c", 0.0048, 0.0040),   # 1.20 under 5 us: within 1.25
                row("d", 0.0105, 0.0100)]   # 1.05: within
    proposals = {w: ["k3", "k1", "k2"] for w in "abcd"}
    measured = {"a": {"k1"}, "b": {"k1", "k2", "k3"}}
    assert unmeasured_proposals.missing(compared, proposals, measured) == {"a": ["k3", "k2"], "b": []}


def test_layers_of_a_class_ask_whatever_their_time():
    compared = [{**row("dw", 0.0050, 0.0100), "layer": "32,56,56,72,72,3,3,1,1,g72"},
                {**row("grouped", 0.0050, 0.0100), "layer": "32,56,56,144,144,3,3,1,2,g9"},
                {**row("dense", 0.0200, 0.0100), "layer": "32,56,56,72,24,1,1,0,1"}]
    proposals = {w: ["k1", "k2"] for w in ("dw", "grouped", "dense")}
    measured = {"dw": {"k2"}}
    assert unmeasured_proposals.missing(compared, proposals, measured, "depthwise") == {"dw": ["k1"]}
    assert unmeasured_proposals.missing(compared, proposals, measured, "grouped") == {"grouped": ["k1", "k2"]}
    assert unmeasured_proposals.missing(compared, proposals, measured) == {"dense": ["k1", "k2"]}
    assert list(unmeasured_proposals.missing(compared, proposals, measured, "all")) == ["dw", "grouped", "dense"]


def copy_with(tmp_path, ratio: float):
    """The set's results under tmp_path, its one layer's compare row at ``ratio`` of the library and
    its rows of the layer all of one kernel no proposal names."""
    folder = tmp_path / SET / "nvidia_h200"
    shutil.copytree(ROOT / "profile_results" / SET / "nvidia_h200", folder)
    with (folder / "compare.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    rows[0]["kernel_ms"] = str(float(rows[0]["library_ms"]) * ratio)
    with (folder / "compare.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    layer = folder / f"{rows[0]['workload']}.csv"
    with layer.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, measured = reader.fieldnames, next(reader)
    measured["kernel"] = "no_proposal_names_this_kernel"
    with layer.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerow(measured)
    return rows[0]["workload"]


def test_a_layer_over_its_limit_lists_the_proposals_scons_candidates_makes_for_it(tmp_path, capsys):
    workload = copy_with(tmp_path / "within", 1.05)
    assert unmeasured_proposals.main([SET, "--results", str(tmp_path / "within")]) == 0
    assert capsys.readouterr().out == f"# {SET}: 0 layer(s) over the limit, 0 with proposals not measured (0 kernel(s))\n"

    assert unmeasured_proposals.main([SET, "--results", str(tmp_path / "within"), "--layers", "all"]) == 0
    comment, line = capsys.readouterr().out.splitlines()
    assert comment.startswith(f"# {SET}: 1 layer(s) in all, 1 with proposals not measured (") and line.startswith(SET)

    copy_with(tmp_path / "over", 1.5)
    ours = ROOT / "generated" / "candidates.csv"
    before = ours.stat().st_mtime_ns if ours.is_file() else None
    assert unmeasured_proposals.main([SET, "--results", str(tmp_path / "over")]) == 0
    assert (ours.stat().st_mtime_ns if ours.is_file() else None) == before  # a scratch build, not generated/
    comment, line = capsys.readouterr().out.splitlines()
    proposed = unmeasured_proposals.proposals_of(SET, "nvidia_h200", tmp_path / "build")[workload]
    assert comment == f"# {SET}: 1 layer(s) over the limit, 1 with proposals not measured ({len(proposed)} kernel(s))"
    assert proposed and line == f"{SET} {','.join(proposed)}"


def test_a_set_without_a_compare_is_refused_in_one_line(tmp_path, capsys):
    assert unmeasured_proposals.main(["no_such_set", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_set: no compare of nvidia_h200" in err
