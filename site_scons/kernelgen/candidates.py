"""Each layer's candidates: the kernels of the listed families and the generated space, ranked by
the cost model, the first ``top`` of each layer kept. Their union is what a set needs compiled.

  python -m kernelgen.candidates --workloads resnet50_b256 --top 5 --out generated/candidates.csv

writes ``candidates.csv`` (workload, kernel, rank, predicted_ms) and beside it
``candidates.txt``, the union as a kernel list (``KERNELS=@generated/candidates.txt``).
"""

import argparse
import csv
import io
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .cost_model import load_model, serves
from .errors import KernelgenError, WorkloadError
from .families.gemm_sm90 import GemmSm90
from .render import write_generated
from .space import load_space, merged
from .specs import load_catalog

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOP = 5  # leave-one-set-out on the committed sets: regret 0-4% of a set's total at 5 (docs/search.md)


@dataclass
class Proposal:
    problem: object
    ranked: list  # [(predicted ms, kernel)], fastest first, at most ``top``


def variant_of(kernel) -> tuple:
    """What a kernel is apart from its launch and its epilogue's source operand: kernels alike
    but for those differ by a microsecond at most, so a layer's candidates hold one of them."""
    if isinstance(kernel, GemmSm90):
        return (type(kernel).__name__, kernel.tile, kernel.cluster, kernel.schedule, kernel.scheduler, kernel.splits,
                kernel.epilogue_tile, kernel.store_stages)
    return (kernel.name,)


def distinct(ranked: list, top: int) -> list:
    """The first ``top`` of ``ranked`` that are not a variant of one before them."""
    seen, out = set(), []
    for ms, kernel in ranked:
        key = variant_of(kernel)
        if key not in seen:
            seen.add(key)
            out.append((ms, kernel))
            if len(out) == top:
                break
    return out


def propose(problems, kernels, model, top: int, workload_file="") -> list:
    """Each problem's ``top`` best-ranked distinct kernels (``distinct``); a problem no kernel
    serves is an error naming it and why each kernel refused it."""
    proposals = []
    for problem in problems:
        ranked = model.rank(kernels, problem)
        if not ranked:
            reasons = Counter(serves(k, problem) for k in kernels)
            why = "; ".join(f"{n} {reason}" for reason, n in reasons.most_common(4))
            raise WorkloadError(workload_file or problem.name, f"no kernel of the space serves {problem.name} "
                                f"({len(kernels)} refused it: {why})", problem.line or None)
        proposals.append(Proposal(problem, distinct(ranked, top)))
    return proposals


def union(proposals: list) -> list:
    """The kernels some layer proposes, by name."""
    return sorted({k.name for p in proposals for _, k in p.ranked})


def to_csv_text(proposals: list) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["workload", "kernel", "rank", "predicted_ms"])
    for p in proposals:
        for rank, (ms, kernel) in enumerate(p.ranked, 1):
            writer.writerow([p.problem.name, kernel.name, rank, f"{ms:.6g}"])
    return out.getvalue()


def positive_top(text: str) -> int:
    """TOP=: a positive integer of a few digits."""
    if not (text.isascii() and text.isdigit() and len(text) <= 6 and int(text) > 0):
        raise KernelgenError(f"TOP={text!r}: expected a positive integer (candidates per layer)")
    return int(text)


def main(argv=None) -> int:
    from .workloads import load_workloads

    parser = argparse.ArgumentParser(prog="python -m kernelgen.candidates", description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", required=True, help="a set name or a workload file")
    parser.add_argument("--top", default=str(DEFAULT_TOP))
    parser.add_argument("--gpu", default="nvidia_h200", help="the GPU whose fitted model ranks the kernels")
    parser.add_argument("--specs", default=str(ROOT / "kernel_specs" / "families"))
    parser.add_argument("--spaces", default=str(ROOT / "kernel_specs" / "spaces"))
    parser.add_argument("--sets-dir", default=str(ROOT / "kernel_specs" / "workloads"))
    parser.add_argument("--out", default=str(ROOT / "generated" / "candidates.csv"))
    args = parser.parse_args(argv)
    try:
        top = positive_top(args.top)
        set_name, workload_file, problems = load_workloads(args.workloads, args.sets_dir)
        model = load_model(args.gpu)
        space = load_space(args.spaces)
        listed = load_catalog(args.specs)
        kernels = merged(listed, space)
        proposals = propose(problems, kernels, model, top, workload_file)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_generated(out, to_csv_text(proposals))
        names = union(proposals)
        write_generated(out.with_suffix(".txt"), "".join(f"{n}\n" for n in names))
    except KernelgenError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"{len(space.kernels)} descriptors in the space ({len(kernels)} with the listed kernels), "
          f"{len(names)} kernels for {set_name} (top {top} of each of its {len(problems)} layers): {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
