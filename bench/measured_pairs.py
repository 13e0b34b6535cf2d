#!/usr/bin/env python3
"""Benchmark: which (layer, kernel) pairs a profile needs to measure, from sets measured on every pair.

    python bench/measured_pairs.py SET MODEL [SET MODEL ...] [--gpu nvidia_h200] [--top K]

SET is a committed set whose profile measured every kernel of its build on every layer the kernel
serves; MODEL the cost model (kernel_specs/models/<gpu>.json as it was) that proposed its kernels,
e.g. `git show <commit before the set>:kernel_specs/models/nvidia_h200.json > /tmp/m/nvidia_h200.json`
(MODEL names the folder). For each layer it takes the kernels that model proposes (TOP=K, default
5, at most the TOP the set was profiled with; a smaller K's build is the union of those) and the
build's kernels it ranks in its top k for the layer (``candidates.measured_pairs``), and compares
the fastest ok row among those with the fastest ok row of all: prints, per policy, the network
time lost (summed over the set's calls) and the pairs it measures.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import candidates, cost_model, results  # noqa: E402
from kernelgen.specs import load_catalog  # noqa: E402
from kernelgen.space import load_space, merged  # noqa: E402
from kernelgen.fusion import with_fused  # noqa: E402
from kernelgen.workloads import parse_workloads  # noqa: E402

TOPS = (0, 5, 10, 15, 20)  # 0: each layer's own proposals only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", help="SET MODEL_FOLDER ...")
    parser.add_argument("--gpu", default="nvidia_h200")
    parser.add_argument("--top", type=int, default=5, help="the model's proposals a layer (TOP=)")
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give a model folder after each set")
    listed = merged(load_catalog(ROOT / "kernel_specs" / "families"), load_space(ROOT / "kernel_specs" / "spaces"))
    print("| set | layers | kernels | " + " | ".join(f"own + top {k}" if k else "own" for k in TOPS) + " | every pair |")
    print("|---|---|---|" + "---|" * (len(TOPS) + 1))
    for set_name, model_dir in zip(args.pairs[::2], args.pairs[1::2]):
        problems = parse_workloads((ROOT / "kernel_specs" / "workloads" / f"{set_name}.txt").read_text())
        everything = with_fused(listed, problems)
        model = cost_model.load_model(args.gpu, model_dir)
        proposals = candidates.propose(problems, everything, model, args.top)
        folder = ROOT / "profile_results" / set_name / args.gpu
        frames = {p.problem.name: results.read_csv(folder / f"{p.problem.name}.csv") for p in proposals}
        built = set(candidates.union(proposals))
        kernels = [k for k in everything if k.name in built]
        best, lost, pairs = 0.0, dict.fromkeys(TOPS, 0.0), dict.fromkeys(TOPS, 0)
        for top in TOPS:
            measured = candidates.measured_pairs(proposals, kernels, model, top)
            for p in proposals:
                frame = frames[p.problem.name]
                ok = frame[frame["status"] == "ok"]
                chosen = ok[ok["kernel"].isin(measured[p.problem.name])]["runtime_ms"].min()
                lost[top] += p.problem.count * (chosen - ok["runtime_ms"].min())
                pairs[top] += int(frame["kernel"].isin(measured[p.problem.name]).sum())
                if top == TOPS[0]:
                    best += p.problem.count * ok["runtime_ms"].min()
        total = sum(len(f) for f in frames.values())
        print(f"| `{set_name}` | {len(proposals)} | {len(kernels)} | "
              + " | ".join(f"{100 * lost[k] / best:.2f}%, {pairs[k]} pairs" for k in TOPS) + f" | {total} pairs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
