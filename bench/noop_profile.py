#!/usr/bin/env python3
"""Benchmark: `scons profile` on a fully measured set, nothing to do (issue target: <= 2 s), on
this machine, no GPU needed: a copy of the project with the fake nvcc, profiler and nvidia-smi of
tests/ (compiling is instant, the fake profiler writes rows), the committed kernel specs and the
set's committed workload file. A first run measures every pair the build proposes; then the same
command runs again RUNS times and the wall time of each is printed.

    python bench/noop_profile.py [SET] [RUNS]        (default: resnet50_b256, 5)
"""

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "site_scons")]

from test_hostile_build import FAKE_PATH, Toolchain  # noqa: E402


def main() -> None:
    set_name = sys.argv[1] if len(sys.argv) > 1 else "resnet50_b256"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        project = tmp / "project"
        project.mkdir()
        for name in ("SConstruct", "site_scons", "profiler", "kernel_specs"):
            source = ROOT / name
            (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
        toolchain = Toolchain(tmp / "toolchain")
        command = [sys.executable, shutil.which("scons"), "-j2", "profile", f"WORKLOADS={set_name}",
                   f"NVCC={toolchain.nvcc}", f"RESULTS={tmp / 'results'}", f"BUILD={tmp / 'build'}"]
        env = {"PATH": FAKE_PATH, "HOME": str(tmp)}
        start = time.monotonic()
        first = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        if first.returncode != 0:
            sys.exit(f"the first run failed:\n{first.stdout[-3000:]}\n{first.stderr[-3000:]}")
        print(f"first run (fake compile and profile of every proposed pair): {time.monotonic() - start:.1f} s")
        times = []
        for _ in range(runs):
            start = time.monotonic()
            out = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
            times.append(time.monotonic() - start)
            if out.returncode != 0 or "already measured for every kernel" not in out.stdout:
                sys.exit(f"a rerun did something or failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        print(f"no-op `scons profile WORKLOADS={set_name}` ({runs} runs): median {statistics.median(times):.2f} s, "
              f"min {min(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
