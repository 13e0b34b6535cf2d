#!/usr/bin/env python3
"""Benchmark: which rows the cost model is fitted to, and how well it then ranks what was measured.

    python bench/fit_rows.py [--gpu nvidia_h200]

Fits the model per set without that set (held out), once to the rows of the listed kernels only
and once to the rows of the listed kernels and of the space's descriptors (what
`python -m kernelgen.cost_model fit` takes), and ranks every measured row of the set, listed and
space alike, with each. Prints, per set, the layers whose measured winner is in the model's top 3
and the regret of its top 3 and top 5 (the best measured of the top k against the best measured,
summed over the set's calls), then the totals over all sets.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import cost_model, record  # noqa: E402
from kernelgen.specs import load_catalog  # noqa: E402

TOPS = (3, 5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="nvidia_h200")
    args = parser.parse_args()
    results, sets = ROOT / "profile_results", ROOT / "kernel_specs" / "workloads"
    families, spaces = ROOT / "kernel_specs" / "families", ROOT / "kernel_specs" / "spaces"
    listed = {k.name: k for k in load_catalog(families)}
    every = cost_model.measured_samples(results, sets, cost_model.measured_kernels(families, spaces), args.gpu)
    listed_rows = cost_model.measured_samples(results, sets, listed, args.gpu)
    stems = sorted({s[3] for s in every})
    fits = {"listed rows": record.fit_held_out(listed_rows, stems, args.gpu),
            "listed and space rows": record.fit_held_out(every, stems, args.gpu)}
    records = {name: {row[0]: row for row in record.record(models.__getitem__, every)} for name, models in fits.items()}
    print(f"{len(every)} measured rows ({len(listed_rows)} of listed kernels), {len(stems)} sets, each ranked by models "
          "fitted without it\n")
    top = record.RECORD_TOPS
    print("| set | layers | " + " | ".join(f"{name}: top 3 winner in, regret; top 5 regret" for name in fits) + " |")
    print("|---|---|" + "---|" * len(fits))
    for stem in stems:
        cells = []
        for name in fits:
            row = records[name][stem]
            three, five = row[2 + top.index(3)], row[2 + top.index(5)]
            cells.append(f"{three[0]}, {three[1]:.1f}%; {five[1]:.1f}%")
        print(f"| `{stem}` | {records[next(iter(fits))][stem][1]} | " + " | ".join(cells) + " |")
    for name in fits:
        rows = records[name].values()
        within = sum(r[2 + top.index(3)][0] for r in rows)
        over = [r[0] for r in rows if r[2 + top.index(3)][1] > 3.0]
        print(f"\n{name}: winner in the top 3 on {within} of {sum(r[1] for r in rows)} layers; top-3 regret over 3% "
              f"on {len(over)} of {len(stems)} sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
