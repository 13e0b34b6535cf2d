#!/usr/bin/env python3
"""Benchmark: which layers of a network the model proposes a kernel of any filter for first.

    python bench/first_candidates.py WORKLOADS_FILE... [--build DIR]

Runs `scons candidates` on each workload file (a set `scons workloads` wrote; no GPU needed) and
prints per set its layers, how many of them have as first candidate a kernel of any filter (the
direct kernels of profiler/direct_conv_any.h, names with `_rxs_`: the layers no kernel built for
their filter, channels or multiplier serves), each such layer with the model's prediction, then
the totals. A layer whose first candidate is of any filter is a class of layers the families do
not cover yet.
"""

import argparse
import csv
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANY_FILTER = "_rxs_"


def first_candidates(path: Path, build: Path) -> dict:
    """Workload name -> (its first candidate, predicted ms), from `scons candidates` on ``path``."""
    out = subprocess.run([sys.executable, shutil.which("scons"), "-Q", "candidates", f"WORKLOADS={path}",
                          f"BUILD={build}"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{path}: scons candidates failed: {(out.stdout + out.stderr).strip().splitlines()[-1]}")
    with (build / "candidates.csv").open(newline="") as f:
        return {r["workload"]: (r["kernel"], float(r["predicted_ms"])) for r in csv.DictReader(f) if r["rank"] == "1"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--build", type=Path, default=Path("/tmp/first_candidates"))
    args = parser.parse_args(argv)
    layers = hits = sets_hit = 0
    for path in args.files:
        first = first_candidates(path, args.build / path.stem)
        any_filter = {w: ms for w, (kernel, ms) in first.items() if ANY_FILTER in kernel}
        print(f"{path.stem}: {len(first)} layers, {len(any_filter)} of them first a kernel of any filter")
        for workload, ms in sorted(any_filter.items()):
            print(f"    {workload}  {1e3 * ms:.1f} us")
        layers, hits, sets_hit = layers + len(first), hits + len(any_filter), sets_hit + bool(any_filter)
    print(f"all {len(args.files)} sets: {layers} layers, {hits} first a kernel of any filter, in {sets_hit} sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
