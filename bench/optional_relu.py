#!/usr/bin/env python3
"""Benchmark: kernels of epilogue optional_relu (docs/kernels.md, "Fused epilogues") against the
fused kernels they stand in for, on the layers of committed sets.

    python bench/optional_relu.py kernels SET [SET ...] --workloads <folder> > list.txt
    scons -j16 profile WORKLOADS=<folder>/<SET>.txt TOP=all KERNELS=@list.txt RESULTS=<scratch>   # each SET
    python bench/optional_relu.py report <scratch> SET [SET ...]

``kernels`` prints, for each SET, the fused kernels its committed rows choose (each layer's fastest
ok row; ``--pairs N``: the first N by name) of an epilogue of bias, add and relu, and each one's
kernel of epilogue optional_relu that stands in for it (``candidates.merged``), and writes the
lines of those layers to <folder>/<SET>.txt: the KERNELS= list of a profile that measures both on
the same layers in one run. ``report`` prints, per set, each layer's time with its chosen kernel
and with that kernel's optional_relu variant (from the same results), their ratio, and the
geometric mean.
"""

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import results  # noqa: E402
from kernelgen.fusion import with_fused  # noqa: E402
from kernelgen.candidates import unfused_key, stand_in_of  # noqa: E402
from kernelgen.ops.common import OPTIONAL_RELU  # noqa: E402
from kernelgen.space import load_space, merged  # noqa: E402
from kernelgen.specs import load_catalog  # noqa: E402
from kernelgen.workloads import parse_workloads  # noqa: E402


def chosen_pairs(set_name: str, results_root: Path, gpu: str) -> list:
    """[(workload, count, chosen fused kernel, its optional_relu variant, line)] of ``set_name``'s
    layers of an epilogue of bias, add and relu."""
    problems = parse_workloads((ROOT / "kernel_specs" / "workloads" / f"{set_name}.txt").read_text())
    listed = merged(load_catalog(ROOT / "kernel_specs" / "families"), load_space(ROOT / "kernel_specs" / "spaces"))
    by_name = {k.name: k for k in with_fused(listed, problems)}
    out = []
    for problem in problems:
        path = results_root / set_name / gpu / f"{problem.name}.csv"
        if not getattr(problem, "epilogue", "") or not path.is_file():
            continue
        frame = results.read_csv(path)
        ok = frame[frame["status"] == "ok"]
        if ok.empty:
            continue
        kernel = by_name.get(ok.loc[ok["runtime_ms"].idxmin(), "kernel"])
        key = unfused_key(kernel) if kernel is not None else None
        if key is None:
            continue
        twin = stand_in_of(kernel, key[-1], {k.name: k for k in by_name.values() if getattr(k, "fusion", "") == OPTIONAL_RELU})
        if twin is not None:
            out.append((problem.name, problem.count, kernel.name, twin.name, problem.line))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["kernels", "report"])
    parser.add_argument("args", nargs="+", help="kernels: SET ...; report: RESULTS SET ...")
    parser.add_argument("--gpu", default="nvidia_h200")
    parser.add_argument("--pairs", type=int, default=0, help="kernels: each set's first N pairs only (0: all)")
    parser.add_argument("--workloads", help="kernels: the folder to write each set's measured lines to")
    args = parser.parse_args()
    committed = ROOT / "profile_results"
    if args.command == "kernels":
        names = set()
        for set_name in args.args:
            found = chosen_pairs(set_name, committed, args.gpu)
            pairs = sorted({(a, b) for _, _, a, b, _ in found})[:args.pairs or None]
            names.update(n for pair in pairs for n in pair)
            if args.workloads:
                lines = (ROOT / "kernel_specs" / "workloads" / f"{set_name}.txt").read_text().splitlines()
                kept = [lines[line - 1] for _, _, a, b, line in found if (a, b) in pairs]
                Path(args.workloads).mkdir(parents=True, exist_ok=True)
                (Path(args.workloads) / f"{set_name}.txt").write_text("\n".join(kept) + "\n")
        print("\n".join(sorted(names)))
        return 0
    scratch, sets = Path(args.args[0]), args.args[1:]
    print("| set | layers | chosen kernels ms | optional_relu kernels ms | ratio | geometric mean | worst |")
    print("|---|---|---|---|---|---|---|")
    for set_name in sets:
        ratios, chosen_ms, twin_ms = [], 0.0, 0.0
        for workload, count, kernel, twin, _ in chosen_pairs(set_name, committed, args.gpu):
            path = scratch / set_name / args.gpu / f"{workload}.csv"
            if not path.is_file():
                continue
            frame = results.read_csv(path)
            ok = frame[frame["status"] == "ok"].set_index("kernel")["runtime_ms"]
            if kernel in ok and twin in ok:
                ratios.append(ok[twin] / ok[kernel])
                chosen_ms += count * ok[kernel]
                twin_ms += count * ok[twin]
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"| `{set_name}` | {len(ratios)} | {chosen_ms:.3f} | {twin_ms:.3f} | {twin_ms / chosen_ms:.3f} | "
                  f"{mean:.3f} | {max(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
