#!/usr/bin/env python3
"""Benchmark: what a cold build's compile spent, unit by unit, and what the order of its units cost.

    python bench/compile_units.py BUILD [BUILD ...] [--jobs 16]

Reads each BUILD's compile_times.csv (each nvcc run's object, start and end, written by the last
build that compiled there) and, for each unit, its kernels from BUILD/kernels/unit-<digest>.cu.
Fits, over every run of the folders given, the seconds of a run as its base (a run of CUTLASS 3.x
kernels, one of CUTLASS 2.x and none of 3.x) plus seconds a kernel of each kind (CUTLASS 3.x,
CUTLASS 2.x, this project's own; non-negative least squares), then prints per folder: the compile's span, its runs' seconds spread evenly over
the jobs, and the span replayed with the fitted seconds (each run to the first free job) in the
order the runs started, in the order of their first kernel's name and the heaviest first by
``kernelgen.units.weight``.
"""

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import units  # noqa: E402
from kernelgen.cost_model import nonnegative_least_squares  # noqa: E402

KINDS = tuple(units.WEIGHTS)  # cutlass3x, cutlass2x, own (units.kind)


def runs_of(build: Path) -> list:
    """[(members, start_s, seconds)] of the nvcc runs of BUILD/compile_times.csv that ended."""
    times = build / "compile_times.csv"
    if not times.is_file():
        raise SystemExit(f"{times}: no such file (a build that compiled writes it)")
    runs = []
    with times.open(newline="") as f:
        for row in csv.DictReader(f):
            stem = row["object"].removesuffix(".o")
            if not row.get("end_s"):
                continue
            source = build / "kernels" / f"{stem}.cu"
            members = units.unit_members(source.read_text()) if stem.startswith(units.PREFIX) and source.is_file() \
                else [stem]
            runs.append((members, float(row["start_s"]), float(row["end_s"]) - float(row["start_s"])))
    if not runs:
        raise SystemExit(f"{times}: no nvcc run ended")
    return runs


def features(members: list) -> list:
    """[a run of CUTLASS 3.x kernels, a run of CUTLASS 2.x ones and none of 3.x, then the kernels
    of each kind]: a run parses the headers of the heaviest CUTLASS it holds once."""
    counts = [sum(1 for m in members if units.kind(m) == k) for k in KINDS]
    return [1.0 if counts[0] else 0.0, 1.0 if counts[1] and not counts[0] else 0.0] + [float(c) for c in counts]


def fit(runs: list) -> list:
    """[a run of CUTLASS 3.x, of CUTLASS 2.x, then seconds a CUTLASS 3.x, a CUTLASS 2.x, an own
    kernel] fitted to ``runs``."""
    import numpy as np
    a = np.array([features(m) for m, _, _ in runs])
    b = np.array([s for _, _, s in runs])
    return [float(x) for x in nonnegative_least_squares(a, b)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=16, help="the -j the builds ran with (default 16)")
    args = parser.parse_args(argv)
    by_build = {build: runs_of(build) for build in args.builds}
    every = [r for runs in by_build.values() for r in runs]
    theta = fit(every)
    predicted = lambda members: sum(x * t for x, t in zip(features(members), theta))  # noqa: E731
    import numpy as np
    errors = [abs(predicted(m) - s) / s for m, _, s in every if s > 0]
    print(f"{len(every)} nvcc runs of {len(by_build)} build(s): a run of CUTLASS 3.x kernels {theta[0]:.1f} s, "
          f"of CUTLASS 2.x {theta[1]:.1f} s, then a CUTLASS 3.x kernel {theta[2]:.1f} s, a CUTLASS 2.x one "
          f"{theta[3]:.1f} s, an own one {theta[4]:.1f} s; median error {np.median(errors):.0%}")
    for build, runs in by_build.items():
        measured = max(start + s for _, start, s in runs)
        even = sum(s for _, _, s in runs) / args.jobs
        started = [predicted(m) for m, _, _ in sorted(runs, key=lambda r: r[1])]
        named = [predicted(m) for m, _, _ in sorted(runs, key=lambda r: sorted(r[0])[0])]
        heaviest = [predicted(m) for m, _, _ in sorted(runs, key=lambda r: -sum(map(units.weight, r[0])))]
        print(f"{build}: {len(runs)} runs, {sum(len(m) for m, _, _ in runs)} kernels; compiled in {measured:.0f} s, "
              f"the runs' {sum(s for _, _, s in runs):.0f} s over {args.jobs} jobs {even:.0f} s; replayed with the "
              f"fitted seconds: as started {units.span(started, args.jobs):.0f} s, by name {units.span(named, args.jobs):.0f} s, "
              f"the heaviest first {units.span(heaviest, args.jobs):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
