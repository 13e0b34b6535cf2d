#!/usr/bin/env python3
"""Benchmark: the issues' targets, read from the sets' last compares (RESULTS/<set>/<gpu>/compare.csv).

    python bench/targets.py [SET ...] [--gpu nvidia_h200] [--results profile_results]

Prints per set (every set with a compare of the GPU where none is named): the network total of the
chosen kernels against the library's (each layer's count times its GPU time), the layers over
1.10 times the library (1.25 where the library takes under 5 us), and for the depthwise layers
(groups = C = K) and the grouped ones (1 < groups < C) their number, the geometric mean of kernel
against library and, for depthwise, their summed time against their summed floor; then the same
over all the sets printed. A set's figures are as old as its compare (the column measured_at).
"""

import argparse
import csv
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OVER, OVER_SMALL, SMALL_MS = 1.10, 1.25, 0.005


def layer_kind(layer: str) -> str:
    """"depthwise", "grouped" or "dense" from a compare row's layer (n,h,w,c,k,r,s,pad,stride[,gG][,epilogue])."""
    fields = layer.split(",")
    groups = next((int(f[1:]) for f in fields[9:] if f[:1] == "g" and f[1:].isdigit()), 1)
    if groups == 1 or len(fields) < 5:
        return "dense"
    return "depthwise" if groups == int(fields[3]) == int(fields[4]) else "grouped"


def rows_of(path: Path) -> list:
    with path.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("kernel_ms") and r.get("library_ms")]


def geomean(values: list) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def over_limit(row: dict) -> bool:
    """Whether a compare row's kernel takes over 1.10 times the library's time (1.25 where the
    library takes under 5 us)."""
    library = float(row["library_ms"])
    return float(row["kernel_ms"]) / library > (OVER_SMALL if library < SMALL_MS else OVER)


def summary(rows: list) -> dict:
    """The targets' figures of ``rows`` (compare rows of one set or of several)."""
    count = lambda r: int(r["count"])  # noqa: E731
    ratio = lambda r: float(r["kernel_ms"]) / float(r["library_ms"])  # noqa: E731
    kernel, library = (sum(count(r) * float(r[c]) for r in rows) for c in ("kernel_ms", "library_ms"))
    over = [r for r in rows if over_limit(r)]
    kinds = {k: [r for r in rows if layer_kind(r["layer"]) == k] for k in ("depthwise", "grouped")}
    dw = kinds["depthwise"]
    floor = sum(count(r) * float(r["floor_ms"]) for r in dw)
    return {"layers": len(rows), "network": kernel / library if library else float("nan"), "over": len(over),
            "depthwise": len(dw), "depthwise_geomean": geomean([ratio(r) for r in dw]),
            "depthwise_floor": sum(count(r) * float(r["kernel_ms"]) for r in dw) / floor if floor else float("nan"),
            "grouped": len(kinds["grouped"]), "grouped_geomean": geomean([ratio(r) for r in kinds["grouped"]])}


def line(name: str, s: dict, when: str = "") -> str:
    text = f"{name}: {s['layers']} layers, network {s['network']:.2f} of the library, {s['over']} over 1.10"
    if s["depthwise"]:
        text += (f"; depthwise {s['depthwise']}: geometric mean {s['depthwise_geomean']:.2f}, "
                 f"summed {s['depthwise_floor']:.2f}x their floor")
    if s["grouped"]:
        text += f"; grouped {s['grouped']}: geometric mean {s['grouped_geomean']:.2f}"
    return text + (f" (compared {when})" if when else "")


def print_list_entry(name: str, comment: str, kernels: list) -> None:
    """A set's entry in a LIST for bench/measure_sets.sh: `# <set>: <comment>`, then, where it names
    kernels, the line `<set> <kernel>,<kernel>,...`."""
    print(f"# {name}: {comment}")
    if kernels:
        print(f"{name} {','.join(kernels)}")


def sets_parser(doc: str, sets_help: str) -> argparse.ArgumentParser:
    """The arguments of the benchmarks that read committed sets' results: SET ..., --gpu, --results."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", help=sets_help)
    parser.add_argument("--gpu", default="nvidia_h200")
    parser.add_argument("--results", type=Path, default=ROOT / "profile_results")
    return parser


def main(argv=None) -> int:
    parser = sets_parser(__doc__, "set names (default: every set with a compare of the GPU)")
    args = parser.parse_args(argv)
    names = args.sets or sorted(p.parent.parent.name for p in args.results.glob(f"*/{args.gpu}/compare.csv"))
    if not names:
        parser.exit(1, f"{args.results}: no compare of GPU {args.gpu}\n")
    every = []
    for name in names:
        path = args.results / name / args.gpu / "compare.csv"
        if not path.is_file():
            parser.exit(1, f"{path}: no such file (scons compare WORKLOADS={name} writes it)\n")
        rows = rows_of(path)
        if not rows:
            parser.exit(1, f"{path}: no compared layer\n")
        every += rows
        print(line(name, summary(rows), max(r.get("measured_at", "") for r in rows)[:10]))
    if len(names) > 1:
        print(line(f"all {len(names)} sets", summary(every)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
