"""bench/kept_back.sh refuses what it cannot run in one line, before it writes or builds anything."""

import subprocess

import pytest

from conftest import ROOT


@pytest.mark.parametrize("args, message", [
    ([], "usage: bench/kept_back.sh MODEL BATCH [scons arguments]"),
    (["timm.models:mixnet_m"], "usage: bench/kept_back.sh MODEL BATCH [scons arguments]"),
    (["timm.models:mixnet_m", "3a"], "bench/kept_back.sh: BATCH must be a positive integer, not '3a'"),
    (["timm.models:mixnet_m", ""], "bench/kept_back.sh: BATCH must be a positive integer, not ''"),
    (["timm.models:mixnet_m", "$(touch x)"], "bench/kept_back.sh: BATCH must be a positive integer, not '$(touch x)'"),
], ids=["no-arguments", "no-batch", "batch-word", "batch-empty", "batch-command"])
def test_bad_arguments_are_refused_in_one_line(tmp_path, args, message):
    before = sorted(p.name for p in (ROOT / "kernel_specs" / "workloads").iterdir())
    out = subprocess.run(["bash", str(ROOT / "bench" / "kept_back.sh"), *args], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert out.returncode == 2 and out.stderr == message + "\n" and out.stdout == ""
    assert sorted(p.name for p in (ROOT / "kernel_specs" / "workloads").iterdir()) == before
    assert list(tmp_path.iterdir()) == [], "no build folder, no file of the command's"
