"""bench/measure_sets.sh refuses a list it cannot run in one line, before it builds, measures or
writes anything."""

import subprocess

import pytest

from conftest import ROOT

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


def test_each_set_runs_profile_then_compare_with_its_globs_as_one_argument(tmp_path):
    """A stand-in for scons records its arguments: a narrowed set is profiled with TOP=all and its
    globs as one KERNELS= argument, then compared whole; a set without globs runs `profile compare`;
    the extra arguments reach every run; LIMIT=0 starts the first set only."""
    calls = tmp_path / "calls"
    fake = tmp_path / "fake_scons"
    fake.write_text(f'#!/bin/bash\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    fake.chmod(0o755)
    (tmp_path / "sets.txt").write_text("resnet50_b1 *dwconv*9x9*,*gemm_thin*\nresnet50_b1 # whole\n")
    env = {"PATH": "/usr/bin:/bin", "SCONS": str(fake), "JOBS": "3", "LOGS": str(tmp_path / "logs")}
    out = subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt"), "GPU=x"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.startswith("== resnet50_b1 (KERNELS=*dwconv*9x9*,*gemm_thin*)"), out.stdout + out.stderr
    assert calls.read_text().splitlines() == [
        "profile|WORKLOADS=resnet50_b1|TOP=all|KERNELS=*dwconv*9x9*,*gemm_thin*|-j3|GPU=x|",
        "compare|WORKLOADS=resnet50_b1|-j3|GPU=x|",
        "profile|compare|WORKLOADS=resnet50_b1|-j3|GPU=x|"]
    calls.unlink()
    subprocess.run(["bash", str(ROOT / "bench" / "measure_sets.sh"), str(tmp_path / "sets.txt")],
                   cwd=tmp_path, capture_output=True, text=True, timeout=60, env={**env, "LIMIT": "0"})
    assert len(calls.read_text().splitlines()) == 2, "LIMIT=0: the first set runs, the second is not started"
