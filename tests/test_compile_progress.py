"""The compile progress line: its time-left estimate comes from finished compiles only."""

import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))
from kernelgen_builders import CompileProgress, compile_times, estimate_left  # noqa: E402


@pytest.mark.parametrize("elapsed, finished, total, expected", [
    (0.0, 0, 10, None),      # the first compile starts
    (40.0, 0, 10, None),     # with -j16, sixteen started and none finished: no guess
    (40.0, 1, 10, 360.0),    # one finished in 40 s: nine more at that rate
    (40.0, 4, 10, 60.0),     # four finished in 40 s (in parallel): six more at that rate
    (40.0, 10, 10, 0.0),
    (40.0, 12, 10, 0.0),     # more than the planned count (the plan counted fewer): never negative
])
def test_the_estimate_uses_finished_compiles_only(elapsed, finished, total, expected):
    assert estimate_left(elapsed, finished, total) == expected


class Node:
    def __init__(self, path):
        self.path = str(path)

    def get_abspath(self):
        return self.path

    def __str__(self):
        return self.path


def test_no_estimate_is_printed_until_an_object_is_written(tmp_path, capsys):
    progress = CompileProgress(3)
    objects = [tmp_path / f"k{i}.o" for i in range(3)]

    def start(i):
        progress(f"nvcc kernels/k{i}.cu", [Node(objects[i])], [Node(Path("kernels") / f"k{i}.cu")], {})
        return capsys.readouterr().out

    first, second = start(0), start(1)  # -j2: both start at once
    assert first.startswith("[1/3] nvcc k0.cu (") and "left" not in first + second
    objects[0].write_text("object")  # the first compile finishes
    line = start(2)
    assert line.startswith("[3/3] nvcc k2.cu (") and line.rstrip().endswith(" s left)")


def test_other_commands_are_printed_as_they_are(capsys):
    CompileProgress(3)("link generated/profiler", [Node("generated/profiler")], [], None)
    assert capsys.readouterr().out == "link generated/profiler\n"


def test_a_units_compile_says_how_many_kernels_it_holds(tmp_path, capsys):
    CompileProgress(2)("nvcc kernels/unit-1.cu", [Node(tmp_path / "unit-1.o")], [Node(Path("kernels") / "unit-1.cu")],
                       {"KERNELS_IN_UNIT": 7})
    assert capsys.readouterr().out.startswith("[1/2] nvcc unit-1.cu (7 kernels) (")


def test_the_link_after_the_compiles_says_how_long_they_took(tmp_path, capsys):
    """Each compile's start and end (its object's time) from the first start, and the whole against
    the runs' sum: what shows whether the jobs ended together."""
    import os

    progress = CompileProgress(2)
    (tmp_path / "obj").mkdir()
    objects = [tmp_path / "obj" / "unit-1.o", tmp_path / "obj" / "k.o"]
    progress("nvcc kernels/unit-1.cu", [Node(objects[0])], [Node(Path("kernels") / "unit-1.cu")], {"KERNELS_IN_UNIT": 3})
    progress("nvcc kernels/k.cu", [Node(objects[1])], [Node(Path("kernels") / "k.cu")], {})
    first = progress.started[0][1]
    for path, end in zip(objects, (30.0, 50.0)):
        path.write_text("object")
        os.utime(path, (first + end, first + end))
    progress.started[1] = (progress.started[1][0], first + 10.0, 1)
    capsys.readouterr()
    progress("link build/stages/0/profiler", [Node("build/stages/0/profiler")], [], {"PROFILER_STAGE": 1})
    assert capsys.readouterr().out == "link build/stages/0/profiler\n", "an early stage's link: others compile on"
    progress("link build/profiler", [Node("build/profiler")], [], None)
    out = capsys.readouterr().out.splitlines()
    assert out == ["compiled 2 objects (4 kernels) in 50 s, 70 s of nvcc runs; the last to end started 10 s in",
                   "link build/profiler"]
    text, _ = compile_times(progress.started)
    assert text.splitlines() == ["object,kernels,start_s,end_s", "unit-1.o,3,0.0,30.0", "k.o,1,10.0,50.0"]
    progress("link build/profiler", [Node("build/profiler")], [], None)
    assert capsys.readouterr().out == "link build/profiler\n", "said once"
