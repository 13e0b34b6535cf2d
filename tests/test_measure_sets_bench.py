"""bench/measure_sets.sh refuses a list it cannot run in one line, before it builds, measures or
writes anything."""

import contextlib
import io
import re
import subprocess
import sys

import pytest
from pathlib import Path

from conftest import ROOT
from kernelgen import report
from kernelgen.workloads import parse_workloads

sys.path.insert(0, str(ROOT / "bench"))
import merge_sets  # noqa: E402

ME = "bench/measure_sets.sh"


@pytest.mark.parametrize("lines, env, message", [
    (None, {}, f"usage: {ME} LIST [scons arguments]"),
    ("resnet50_b1\n", {"LIMIT": "10m"}, f"{ME}: LIMIT must be a number of seconds, not '10m'"),
    ("resnet50_b1 *gemm* *conv*\n", {}, f"{ME}: {{list}} line 1: expected '<set> [<KERNELS= globs>]', "
                                        "not 'resnet50_b1 *gemm* *conv*'"),
    ("# a comment\nresnet50_b1\nno_such_set *gemm*\n", {}, f"{ME}: {{list}} line 3: no workload set 'no_such_set' "
                                                           "(kernel_specs/workloads/no_such_set.txt)"),
    ("../workloads/resnet50_b1\n", {}, f"{ME}: {{list}} line 1: '../workloads/resnet50_b1' is not a set's name "
                                       "(letters, digits, '_')"),
    ("$(touch x)\n", {}, f"{ME}: {{list}} line 1: '$(touch' is not a set's name (letters, digits, '_')"),
    ("# nothing but comments\n\n", {}, f"{ME}: {{list}} names no set"),
], ids=["no-list", "limit-word", "extra-field", "unknown-set", "path-as-set", "command-as-set", "empty"])
def test_bad_lists_are_refused_in_one_line(tmp_path, lines, env, message):
    """SCONS names a program that would leave a file if it ran: none runs, no folder is made."""
    work = tmp_path / "work"
    work.mkdir()
    args = []
    if lines is not None:
        (tmp_path / "sets.txt").write_text(lines)
        args = [str(tmp_path / "sets.txt")]
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), *args], cwd=work, capture_output=True,
                         text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "TMPDIR": str(work), "SCONS": f"touch {work}/ran", **env})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == message.format(list=tmp_path / "sets.txt") + "\n"
    assert list(work.iterdir()) == [], "no log folder, nothing run"


def test_a_list_that_is_no_file_is_refused(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), "sets.txt"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 2 and out.stderr == f"{ME}: LIST '{tmp_path / 'sets.txt'}' is not a file\n"


def fake_scons(tmp_path):
    """A stand-in for scons that records its arguments, a call a line: (its path, the record)."""
    calls = tmp_path / "calls"
    fake = tmp_path / "fake_scons"
    fake.write_text(f'#!/bin/bash\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    fake.chmod(0o755)
    return fake, calls


def apart(tmp_path) -> dict:
    """PYTHON= and PYTHONPATH= of a Python that finds its packages (SCons, pandas) only through
    PYTHONPATH, as where they are installed apart (`pip --target`): the script must keep that path
    beside site_scons."""
    import SCons
    python = tmp_path / "python_apart"
    python.write_text(f'#!/bin/bash\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    return {"PYTHON": str(python), "PYTHONPATH": str(Path(SCons.__file__).resolve().parent.parent)}


def chosen(set_name: str) -> str:
    """The set's chosen kernels as `python -m kernelgen.report <set> --kernels` prints them."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report.main([set_name, "--kernels", "--gpu", "nvidia_h200"]) == 0
    return out.getvalue().strip()


def test_each_set_runs_profile_then_compare_with_its_globs_as_one_argument(tmp_path):
    """A narrowed set is profiled with TOP=all and its globs as one KERNELS= argument, then compared
    on its chosen kernels alone; a set without globs runs `profile compare`; the extra arguments
    reach every run; LIMIT=0 starts the first set only."""
    fake, calls = fake_scons(tmp_path)
    (tmp_path / "sets.txt").write_text("resnet50_b1 *dwconv*9x9*,*gemm_thin*\nresnet50_b1 # whole\n")
    env = {"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "3", "LOGS": str(tmp_path / "logs"),
           "GPU_NAME": "NVIDIA H200", **apart(tmp_path)}
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt"), "GPU=x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.startswith("== resnet50_b1 (KERNELS=*dwconv*9x9*,*gemm_thin*)"), out.stdout + out.stderr
    kernels = chosen("resnet50_b1")
    assert kernels.count(",") >= 1 and " " not in kernels
    assert calls.read_text().splitlines() == [
        "profile|WORKLOADS=resnet50_b1|TOP=all|KERNELS=*dwconv*9x9*,*gemm_thin*|-j3|GPU=x|",
        f"compare|WORKLOADS=resnet50_b1|KERNELS={kernels}|-j3|GPU=x|",
        "profile|compare|WORKLOADS=resnet50_b1|-j3|GPU=x|"]
    calls.unlink()
    subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt")],
                   cwd=ROOT, capture_output=True, text=True, timeout=120, env={**env, "LIMIT": "0"})
    assert len(calls.read_text().splitlines()) == 2, "LIMIT=0: the first set runs, the second is not started"


def test_a_set_whose_choices_cannot_be_read_is_compared_whole(tmp_path):
    fake, calls = fake_scons(tmp_path)
    (tmp_path / "sets.txt").write_text("resnet50_b1 *gemm_thin*\n")
    env = {"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "3", "LOGS": str(tmp_path / "logs"),
           "PYTHON": sys.executable, "GPU_NAME": "NVIDIA A100"}  # no results of that GPU
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert calls.read_text().splitlines()[1] == "compare|WORKLOADS=resnet50_b1|-j3|", out.stdout + out.stderr
    assert "A100" in (tmp_path / "logs" / "resnet50_b1.log").read_text()


def test_a_results_root_among_the_arguments_is_where_the_choices_are_read(tmp_path):
    """RESULTS=<root> (a scratch copy the runs write): the set's choices are read there, not from
    profile_results (an empty root holds none: the set is compared whole)."""
    fake, calls = fake_scons(tmp_path)
    (tmp_path / "sets.txt").write_text("resnet50_b1 *gemm_thin*\n")
    (tmp_path / "scratch").mkdir()
    env = {"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "3", "LOGS": str(tmp_path / "logs"),
           "PYTHON": sys.executable, "GPU_NAME": "NVIDIA H200"}
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt"),
                          f"RESULTS={tmp_path / 'scratch'}"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert calls.read_text().splitlines()[1] == f"compare|WORKLOADS=resnet50_b1|-j3|RESULTS={tmp_path / 'scratch'}|", \
        out.stdout + out.stderr
    assert str(tmp_path / "scratch") in (tmp_path / "logs" / "resnet50_b1.log").read_text()


def test_lines_of_several_narrowed_sets_are_built_together_first(tmp_path):
    """Two narrowed lines: one `scons profiler` over both sets' lines (each problem once) with every
    line's globs, before the first set's profile; a single narrowed line builds nothing first."""
    fake, calls = fake_scons(tmp_path)
    (tmp_path / "sets.txt").write_text("resnet50_b1 *gemm_thin*\nresnet50_b256 *conv*\nresnet50_b1 *gemv*\n"
                                       "resnet50_b256\n")
    env = {"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "3", "LOGS": str(tmp_path / "logs"),
           "PYTHON": sys.executable, "GPU_NAME": "NVIDIA H200"}
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt")],
                         cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
    lines = tmp_path / "logs" / "lines.txt"
    made = calls.read_text().splitlines()
    assert made[:2] == [f"profiler|WORKLOADS={lines}|TOP=all|KERNELS=*gemm_thin*,*gemv*,*conv*|-j3|",
                        "profile|WORKLOADS=resnet50_b1|TOP=all|KERNELS=*gemm_thin*,*gemv*|-j3|"], out.stdout + out.stderr
    # resnet50_b1's two lines one profile and one compare; resnet50_b256 narrowed, then whole
    assert [c.split("|")[:2] for c in made[1:]] == [
        ["profile", "WORKLOADS=resnet50_b1"], ["compare", "WORKLOADS=resnet50_b1"],
        ["profile", "WORKLOADS=resnet50_b256"], ["compare", "WORKLOADS=resnet50_b256"],
        ["profile", "compare"]], out.stdout + out.stderr
    written = lines.read_text().splitlines()
    problems = {str(p.name) for s in ("resnet50_b1", "resnet50_b256")
                for p in parse_workloads((ROOT / "kernel_specs" / "workloads" / f"{s}.txt").read_text())}
    assert len(written) == len(set(written)) == len(problems)
    assert {p.name for p in parse_workloads(lines.read_text())} == problems

    calls.unlink()
    (tmp_path / "one.txt").write_text("resnet50_b1 *gemm_thin*\nresnet50_b256\n")
    subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "one.txt")],
                   cwd=ROOT, capture_output=True, text=True, timeout=120, env={**env, "LOGS": str(tmp_path / "l2")})
    assert calls.read_text().splitlines()[0].startswith("profile|WORKLOADS=resnet50_b1|")


def test_the_reports_kernels_are_its_tables_kernels_each_once_in_the_sets_order():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report.main(["mobilenet_v3_large_b32", "--gpu", "nvidia_h200"]) == 0
    table = re.findall(r"^\| \d+ \| [^|]+ \| `([^`]+)`", out.getvalue(), re.MULTILINE)
    assert len(table) > len(set(table))  # a kernel chosen for several layers
    assert chosen("mobilenet_v3_large_b32").split(",") == list(dict.fromkeys(table))


def test_merged_sets_hold_a_problem_written_two_ways_once_without_its_count():
    first = "# a set\nconv2d_fprop n=1 h=224 w=224 c=3 k=64 r=3 s=3 pad=1 stride=1 count=2  # stem\n"
    second = ("conv2d_fprop n=1   h=224 w=224 c=3 k=64  r=3  s=3  pad=1 stride=1 dtype=f16 count=5\n"
              "gemm m=32 n=1000 k=2048 count=1\n")
    assert merge_sets.merged([first, second]) == (
        "conv2d_fprop n=1 h=224 w=224 c=3 k=64 r=3 s=3 pad=1 stride=1\ngemm m=32 n=1000 k=2048\n")


def test_merging_an_unknown_set_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert merge_sets.main([str(tmp_path / "out.txt"), "resnet50_b1", "no_such_set"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_set.txt" in err and not (tmp_path / "out.txt").exists()
