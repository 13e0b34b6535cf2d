#!/usr/bin/env python3
"""Benchmark helper: the layers over their limit at a set's last compare (or its depthwise, grouped
or all layers), and which of the kernels the cost model proposes for them now the set holds no row
of, as a LIST for bench/measure_sets.sh.

    python bench/unmeasured_proposals.py [SET ...] [--layers over|depthwise|grouped|all] \
        [--gpu nvidia_h200] [--results profile_results] > list.txt
    bench/measure_sets.sh list.txt

A layer is over its limit where its chosen kernel took over 1.10 times the library's GPU time at
the compare (1.25 where the library took under 5 us; bench/targets.py); `--layers` takes instead
the depthwise layers (groups = C = K), the grouped ones (1 < groups < C) or every layer, the
classes of the issues' targets. Families added and the model fitted again since a set was
measured propose kernels no row of the set holds; `scons profile` measures them where it is run,
and this names them for the layers that need them most. For each set with a compare of the GPU
(every such set where none is named): a comment line with its layers taken (over the limit, by
default) and how many of them have proposals without rows; then, where some have,
the line `<set> <kernel>,<kernel>,...` (each layer's proposals in the model's order, the set's
layers in the compare's), on which measure_sets.sh measures those kernels on the layers they serve
and compares the set. The proposals are `scons candidates`' (the default TOP, the cost model of
the GPU), written to a scratch build folder, not to generated/.
"""

import csv
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))
sys.path.insert(0, str(ROOT / "bench"))
import targets  # noqa: E402  (bench/targets.py: the limit, the sets' arguments)


LAYERS = {"over": targets.over_limit, "all": lambda row: True,
          **{kind: (lambda row, kind=kind: targets.layer_kind(row["layer"]) == kind) for kind in ("depthwise", "grouped")}}
WHAT = {"over": "over the limit", "all": "in all", "depthwise": "depthwise", "grouped": "grouped"}


def missing(compared: list, proposals: dict, measured: dict, layers: str = "over") -> dict:
    """For each compare row of ``layers`` (``LAYERS``: over its limit, by default; in ``compared``'
    order): its workload -> the kernels of ``proposals[workload]`` (in their order) that
    ``measured[workload]`` (a set of kernel names) lacks."""
    return {row["workload"]: [k for k in proposals.get(row["workload"], []) if k not in measured.get(row["workload"], set())]
            for row in compared if LAYERS[layers](row)}


def read_csv(path: Path) -> list:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def proposals_of(name: str, gpu: str, build: Path) -> dict:
    """workload -> the kernels `scons candidates` proposes for it, best-ranked first."""
    run = subprocess.run([sys.executable, "-m", "SCons", "-Q", "candidates", f"WORKLOADS={name}", f"COST_MODEL={gpu}",
                          f"BUILD={build}"], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"scons candidates WORKLOADS={name}: {(run.stderr or run.stdout).strip().splitlines()[-1:]}")
    ranked = {}
    for row in sorted(read_csv(build / "candidates.csv"), key=lambda r: int(r["rank"])):
        ranked.setdefault(row["workload"], []).append(row["kernel"])
    return ranked


def main(argv=None) -> int:
    parser = targets.sets_parser(__doc__, "set names (default: every set with a compare of the GPU)")
    parser.add_argument("--layers", choices=list(LAYERS), default="over",
                        help="the layers whose proposals are listed (default: those over their limit)")
    args = parser.parse_args(argv)
    results = args.results
    sets = args.sets or sorted(p.parent.parent.name for p in results.glob(f"*/{args.gpu}/compare.csv"))
    if not sets:
        print(f"no set has a compare of {args.gpu} in {results}", file=sys.stderr)
        return 1
    for name in sets:
        folder = results / name / args.gpu
        if not (folder / "compare.csv").is_file():
            print(f"{name}: no compare of {args.gpu} in {results}", file=sys.stderr)
            return 1
        taken = [r for r in targets.rows_of(folder / "compare.csv") if LAYERS[args.layers](r)]
        measured = {r["workload"]: {row["kernel"] for row in read_csv(folder / f"{r['workload']}.csv")}
                    for r in taken if (folder / f"{r['workload']}.csv").is_file()}
        proposals = {}
        if taken:
            with tempfile.TemporaryDirectory() as build:
                try:
                    proposals = proposals_of(name, args.gpu, Path(build))
                except RuntimeError as e:
                    print(e, file=sys.stderr)
                    return 1
        lacking = missing(taken, proposals, measured, args.layers)
        kernels = list(dict.fromkeys(k for ks in lacking.values() for k in ks))
        targets.print_list_entry(name, f"{len(taken)} layer(s) {WHAT[args.layers]}, {sum(1 for ks in lacking.values() if ks)} "
                                       f"with proposals not measured ({len(kernels)} kernel(s))", kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
