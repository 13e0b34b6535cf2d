#!/usr/bin/env python3
"""Benchmark: kernels of epilogue any (docs/kernels.md, "Fused epilogues") against the fused
kernels they stand in for, on the layers of committed sets.

    python bench/any_epilogue.py kernels SET [SET ...] > list.txt
    scons -j16 profile WORKLOADS=<SET> TOP=all KERNELS=@list.txt RESULTS=<scratch>   # each SET
    python bench/any_epilogue.py report <scratch> SET [SET ...]

``kernels`` prints, for each SET, the fused kernels its committed rows choose (each layer's fastest
ok row; ``--pairs N``: the first N by name) and each one's kernel of epilogue any: the KERNELS= list of a profile that measures both on
the same layers in one run. ``report`` prints, per set, each layer's time with its chosen kernel
and with that kernel's any variant (from the same results), their ratio, and the geometric mean.
"""

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import results  # noqa: E402
from kernelgen.fusion import fused, with_fused  # noqa: E402
from kernelgen.ops.common import ANY_EPILOGUE  # noqa: E402
from kernelgen.space import load_space, merged  # noqa: E402
from kernelgen.specs import load_catalog  # noqa: E402
from kernelgen.workloads import parse_workloads  # noqa: E402


def chosen_pairs(set_name: str, results_root: Path, gpu: str) -> list:
    """[(workload, count, chosen fused kernel, its any variant)] of ``set_name``'s fused layers."""
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
        if kernel is None or not getattr(kernel, "fusion", "") or kernel.fusion == ANY_EPILOGUE:
            continue
        twin = fused(replace(kernel, fusion=""), ANY_EPILOGUE)
        if twin.name in by_name:
            out.append((problem.name, problem.count, kernel.name, twin.name))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["kernels", "report"])
    parser.add_argument("args", nargs="+", help="kernels: SET ...; report: RESULTS SET ...")
    parser.add_argument("--gpu", default="nvidia_h200")
    parser.add_argument("--pairs", type=int, default=0, help="kernels: each set's first N pairs only (0: all)")
    args = parser.parse_args()
    committed = ROOT / "profile_results"
    if args.command == "kernels":
        names = set()
        for set_name in args.args:
            pairs = sorted({(a, b) for _, _, a, b in chosen_pairs(set_name, committed, args.gpu)})
            names.update(n for pair in pairs[:args.pairs or None] for n in pair)
        print("\n".join(sorted(names)))
        return 0
    scratch, sets = Path(args.args[0]), args.args[1:]
    print("| set | layers | chosen kernels ms | any kernels ms | any / chosen | geometric mean | worst |")
    print("|---|---|---|---|---|---|---|")
    for set_name in sets:
        ratios, chosen_ms, any_ms = [], 0.0, 0.0
        for workload, count, kernel, twin in chosen_pairs(set_name, committed, args.gpu):
            path = scratch / set_name / args.gpu / f"{workload}.csv"
            if not path.is_file():
                continue
            frame = results.read_csv(path)
            ok = frame[frame["status"] == "ok"].set_index("kernel")["runtime_ms"]
            if kernel in ok and twin in ok:
                ratios.append(ok[twin] / ok[kernel])
                chosen_ms += count * ok[kernel]
                any_ms += count * ok[twin]
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"| `{set_name}` | {len(ratios)} | {chosen_ms:.3f} | {any_ms:.3f} | {any_ms / chosen_ms:.3f} | "
                  f"{mean:.3f} | {max(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
