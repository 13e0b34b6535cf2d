#!/usr/bin/env python3
"""Benchmark: what a build of each TOP compiles and what it measures on networks the model has not seen.

    python bench/top_policy.py [--tops 3,4,5,6] [--gpu nvidia_h200] [--results ...]

For each TOP, over the committed measurements: the layers whose fastest measured kernel a build of
that TOP measures, each set ranked by the model fitted without it (``record.record``'s column
"a build measures", ``candidates.build_measures``), and the largest regret of a set; and the kernels
such a build compiles (``candidates.pool`` over the whole space, the model fitted to every set,
as ``python -m kernelgen.cost_model fit`` commits it, each committed workload file as a new
network: no measured choices), summed over the files, with how many are CUTLASS 3.x SM90 kernels (30-50 s of a core each to compile; the others take seconds to
20 s). The default TOP is chosen from these figures (docs/search.md, "A cold build's time"). About
10 minutes on 2 cores, most of it fitting a model without each set.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import candidates, cost_model, record  # noqa: E402
from kernelgen.catalog import kernel_catalog  # noqa: E402
from kernelgen.workloads import load_workloads  # noqa: E402


def tops_of(text: str) -> list:
    try:
        tops = [int(t) for t in text.split(",")]
    except ValueError:
        tops = []
    if not tops or min(tops) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated positive integers, e.g. 3,4,5")
    return tops


def main() -> int:
    parser = cost_model.options(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    parser.add_argument("--tops", type=tops_of, default=[3, 4, 5, 6], help="the TOPs to compare (default 3,4,5,6)")
    args, samples, model = cost_model.committed_fit(parser)
    held_out = record.fit_held_out(samples, sorted({s[3] for s in samples}), args.gpu)
    specs, spaces, sets_dir = Path(args.specs), Path(args.spaces), Path(args.sets_dir)
    networks = [load_workloads(str(path), sets_dir)[2] for path in sorted(sets_dir.glob("*.txt"))]
    print(f"{len(samples)} measured rows of {len({s[3] for s in samples})} sets; kernels over {len(networks)} "
          "workload files\n")
    print("| TOP | a build measures the winner (held out) | largest regret of a set | kernels compiled (SM90) |")
    print("|---|---|---|---|")
    for top in args.tops:
        rows = record.record(held_out.__getitem__, samples, top)
        layers, won = sum(r[1] for r in rows), sum(r[-2][0] for r in rows)
        worst = max(rows, key=lambda r: r[-2][1])
        kernels = sm90 = 0
        for problems in networks:
            _, built = candidates.pool(problems, kernel_catalog(specs, spaces, problems), model, top)
            kernels += len(built)
            sm90 += sum(k.name.startswith("cutlass3x_sm90") for k in built)
        print(f"| {top} | {won:,} of {layers:,} ({100 * won / layers:.1f}%) | {worst[-2][1]:.1f}% (`{worst[0]}`) "
              f"| {kernels:,} ({sm90:,}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
