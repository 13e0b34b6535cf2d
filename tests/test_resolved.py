"""The set resolved once (BUILD/workloads.json): what SConstruct writes, what the profile driver,
compare and the header builder read back, and resolved files that cannot be trusted."""

import json

import pytest

from conftest import ROOT, invocations, write_manifest
from kernelgen import resolved
from kernelgen.errors import WorkloadError
from kernelgen.profile import main as profile_main
from kernelgen.profile import profile
from kernelgen.workloads import load_workloads, parse_workloads

SETS = sorted((ROOT / "kernel_specs" / "workloads").glob("*.txt"))


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_every_committed_set_reads_back_as_it_was_parsed(tmp_path, path):
    name, _, problems = load_workloads(str(path), path.parent)
    text = resolved.as_json(name, "kernel_specs/workloads/x.txt", problems)
    assert text == resolved.as_json(name, "kernel_specs/workloads/x.txt", problems), "the same bytes each time"
    (tmp_path / "workloads.json").write_text(text)
    set_name, workload_file, back = resolved.load(tmp_path / "workloads.json")
    assert (set_name, workload_file) == (name, "kernel_specs/workloads/x.txt")
    assert back == problems
    assert [(p.op, p.dtype, p.count, p.line) for p in back] == [(p.op, p.dtype, p.count, p.line) for p in problems]


GOOD = json.loads(resolved.as_json("mine", "mine.txt", parse_workloads(
    "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 stride=1 count=3\ngemm m=8 n=16 k=32\n")))


def changed(**edits):
    data = json.loads(json.dumps(GOOD))
    for key, value in edits.items():
        if key == "first":
            data["workloads"][0].update(value)
        elif key == "values":
            data["workloads"][1]["values"].update(value)
        else:
            data[key] = value
    return json.dumps(data)


@pytest.mark.parametrize("text, message", [
    (b"{", "not valid JSON"),
    (b"\xff\xfe{}", "cannot read"),
    (b"[]", "not a resolved workload set (no 'set')"),
    (changed(set="../elsewhere").encode(), "the set name '../elsewhere' is not a plain name"),
    (changed(workloads=[]).encode(), "no workloads"),
    (changed(first={"op": "depthwise"}).encode(), "workloads[0]: not a resolved workload (KeyError: 'depthwise')"),
    (changed(values={"q": 1}).encode(), "workloads[1]: not a resolved workload (TypeError"),
    (changed(values={"k": 64}).encode(), "workloads[1]: names 'gemm_f16_m8_n16_k32' but holds gemm_f16_m8_n16_k64"),
], ids=["not JSON", "not UTF-8", "a list", "set name a path", "no workloads", "unknown op", "unknown field",
        "name and values disagree"])
def test_a_resolved_file_that_cannot_be_trusted_is_refused_naming_it(tmp_path, text, message):
    path = tmp_path / "workloads.json"
    path.write_bytes(text)
    with pytest.raises(WorkloadError) as error:
        resolved.load(path)
    assert str(error.value).startswith(f"{path}") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_profile_driver_reads_the_resolved_set_not_the_file(tmp_path, fake_gpu):
    profiler, log = fake_gpu
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps(GOOD))
    logs = []
    profile(write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"}), profiler, None, None,
            tmp_path / "results", log=logs.append, resolved_file=path)  # mine.txt exists nowhere
    assert invocations(log) == [["kernel_a", "kernel_a"]]
    written = sorted(p.name for p in (tmp_path / "results" / "mine" / "nvidia_h200").iterdir())
    assert written == ["conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1.csv",
                       "gemm_f16_m8_n16_k32.csv"]


@pytest.mark.parametrize("args", [[], ["--workloads", "resnet50"], ["--resolved", "w.json", "--workloads", "x",
                                                                      "--sets-dir", "d"]],
                         ids=["neither", "a set without its folder", "both"])
def test_the_profile_driver_takes_a_resolved_set_or_a_workload_set(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        profile_main(["--manifest", "m", "--profiler", "p", "--results", "r", *args])
    assert exit_.value.code == 2
    assert "give either --resolved, or --workloads and --sets-dir" in capsys.readouterr().err


def test_the_report_reads_a_resolved_set_as_it_reads_the_set(tmp_path, capsys):
    from kernelgen import report

    assert report.main(["resnet50_fc"]) == 0
    table = capsys.readouterr().out
    name, _, problems = load_workloads("resnet50_fc", ROOT / "kernel_specs" / "workloads")
    (tmp_path / "workloads.json").write_text(resolved.as_json(name, "x.txt", problems))
    assert report.main(["--resolved", str(tmp_path / "workloads.json")]) == 0
    assert capsys.readouterr().out == table and "gemm m=256 n=1000 k=2048" in table
    with pytest.raises(SystemExit):
        report.main([])
    assert "give a set name or workload file, or --resolved" in capsys.readouterr().err
