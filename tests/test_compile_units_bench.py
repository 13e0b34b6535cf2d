"""bench/compile_units.py: the seconds of a build's nvcc runs fitted by kind of kernel, and its
compile replayed in other orders; its refusal of a folder no build compiled in."""

import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import compile_units  # noqa: E402
from kernelgen import units  # noqa: E402
from kernelgen.units import unit_name, unit_source  # noqa: E402

SECONDS = {"cutlass3x": 28.0, "cutlass2x": 2.5, "own": 1.0}


def seconds(members) -> float:
    kinds = {units.kind(m) for m in members}
    base = 40.0 if "cutlass3x" in kinds else 20.0 if "cutlass2x" in kinds else 0.0
    return base + sum(SECONDS[units.kind(m)] for m in members)


def write_build(folder, runs):
    """A BUILD whose compile_times.csv holds ``runs`` (members, start), each lasting ``seconds``."""
    (folder / "kernels").mkdir(parents=True)
    lines = ["object,kernels,start_s,end_s"]
    for members, start in runs:
        stem = members[0] if len(members) == 1 else unit_name(members)
        if len(members) > 1:
            (folder / "kernels" / f"{stem}.cu").write_text(unit_source(members))
        lines.append(f"{stem}.o,{len(members)},{start:.1f},{start + seconds(members):.1f}")
    (folder / "compile_times.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_the_fit_recovers_each_kinds_seconds_and_the_heaviest_first_replay_is_shorter(tmp_path, capsys):
    heavy = [[f"cutlass3x_sm90_g{i}_{j}" for j in range(k)] for i, k in enumerate((3, 3, 2, 2, 1))]
    cutlass2 = [[f"cutlass_tensorop_{i}_{j}" for j in range(k)] for i, k in enumerate((8, 4))]
    own = [[f"kernelgen_sm80_simt_{i}_{j}" for j in range(k)] for i, k in enumerate((9, 5, 1))]
    # started lightest first on two jobs, as a build that gives nvcc its objects by name can
    runs = [(m, 0.0) for m in own + cutlass2 + heavy]
    build = write_build(tmp_path / "build", runs)
    theta = compile_units.fit(compile_units.runs_of(build))
    assert theta == pytest.approx([40.0, 20.0, 28.0, 2.5, 1.0], abs=1e-6)
    assert compile_units.main([str(build), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert ("a run of CUTLASS 3.x kernels 40.0 s, of CUTLASS 2.x 20.0 s, then a CUTLASS 3.x kernel 28.0 s, a CUTLASS "
            "2.x one 2.5 s, an own one 1.0 s; median error 0%") in out
    light_first = units.span([seconds(m) for m, _ in runs], 2)
    heaviest_first = units.span(sorted((seconds(m) for m, _ in runs), reverse=True), 2)
    assert heaviest_first < light_first
    assert f"as started {light_first:.0f} s" in out and f"the heaviest first {heaviest_first:.0f} s" in out


def test_a_folder_without_compile_times_is_refused_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "compile_units.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.strip() == f"{tmp_path / 'compile_times.csv'}: no such file (a build that compiled writes it)"
