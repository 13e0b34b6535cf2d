"""A markdown table of a set's choices, from its CSVs (what the README shows).

    PYTHONPATH=site_scons python -m kernelgen.report resnet50 [--gpu nvidia_h200]
    PYTHONPATH=site_scons python -m kernelgen.report --resolved generated/workloads.json
    PYTHONPATH=site_scons python -m kernelgen.report resnet50 --kernels   # the chosen kernels, comma-joined

`--kernels` prints the distinct kernels chosen, in the set's order, as one `KERNELS=` value: a
build narrowed to them serves every layer of the set with what its header holds (what
bench/measure_sets.sh compares with).
"""

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from . import commands
from .config import resolve
from .errors import KernelgenError
from .ops import conv2d_fprop, op_of
from .profile import load_set_of
from .reduce import choose, load_set
from .results import choose_gpu
from .variables import variables

ROOT = Path(__file__).resolve().parents[2]


def defaults() -> dict:
    """The variables as `scons` with none given has them."""
    return {o.key: o.default for o in variables({}).options}


def layer(problem) -> str:
    """The problem as its op's module labels it in a table."""
    return op_of(problem).table_label(problem)


def choices_table(frame, problems, best) -> str:
    lines = [f"| # | {conv2d_fprop.TABLE_HEADING} | kernel | ms | TFLOP/s | ok / candidates |",
             "|---|---|---|---|---|---|"]
    # each workload's rows and ok rows, counted in one pass (not a mask of the frame per workload)
    workloads = frame["workload"].tolist()
    rows = Counter(workloads)
    ok = Counter(w for w, status in zip(workloads, frame["status"].tolist()) if status == "ok")
    for i, (problem, row) in enumerate(zip(problems, best.itertuples(index=False))):
        tflops = problem.flops / (row.runtime_ms * 1e9)
        setting = f" ({row.setting})" if row.setting else ""  # a kernel's launch setting, where it has one
        lines.append(f"| {i} | {layer(problem)} | `{row.kernel}`{setting} | {row.runtime_ms:.4f} | {tflops:.0f} | "
                     f"{ok[problem.name]} / {rows[problem.name]} |")
    total = best["runtime_ms"].sum()
    lines.append(f"| sum | | | {total:.3f} | | |")
    return "\n".join(lines)


def current_code(workloads, results, gpu: str | None = None, resolved=None) -> tuple:
    """(set name, GPU folder, problems, the set's measured rows, the catalog's kernels, the hash of
    the current code of each kernel its rows name that the catalog holds) of a set."""
    set_name, _, problems = load_set_of(workloads, ROOT / "kernel_specs" / "workloads", resolved)
    set_dir = Path(results) / set_name
    gpu = choose_gpu(set_dir, gpu, None, "--gpu ")
    frame = load_set(set_dir / gpu, problems, gpu)
    config = replace(resolve(dict(defaults(), RESULTS=str(results))), set_name=set_name, problems=problems,
                     results_dir=set_dir / gpu)
    everything = commands.catalog(config)
    hashes, _ = commands.header_kernels(config, everything, commands.empty_plan(), commands.measured_frames(config))
    return set_name, gpu, problems, frame, everything, hashes


def current_choices(workloads, results, gpu: str | None = None, resolved=None) -> tuple:
    """(set name, GPU folder, problems, the set's measured rows, each problem's choice) of a set:
    what `scons best_kernels.h` chooses among, every measured kernel of current code."""
    set_name, gpu, problems, frame, everything, hashes = current_code(workloads, results, gpu, resolved)
    best = choose(frame, problems, hashes, {k.name: k for k in everything if k.name in hashes})  # (all it asks of)
    return set_name, gpu, problems, frame, best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelgen.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="?", help="set name or workload file")
    parser.add_argument("--resolved", help="the set as SConstruct resolved it (BUILD/workloads.json) instead")
    parser.add_argument("--results", default=str(ROOT / "profile_results"))
    parser.add_argument("--gpu", help="the GPU's results (a name or folder name); default: the only GPU with results")
    parser.add_argument("--kernels", action="store_true",
                        help="print the distinct chosen kernels comma-joined (a KERNELS= value) instead of the table")
    args = parser.parse_args(argv)
    if (args.workloads is None) == (args.resolved is None):
        parser.error("give a set name or workload file, or --resolved")
    try:
        _, _, problems, frame, best = current_choices(args.workloads, args.results, args.gpu, args.resolved)
    except KernelgenError as e:
        print(e, file=sys.stderr)
        return 1
    print(",".join(dict.fromkeys(best["kernel"])) if args.kernels else choices_table(frame, problems, best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
