#!/usr/bin/env python3
"""Benchmark: the layers whose chosen kernel is no longer the one their set's last compare timed.

    python bench/stale_compares.py [SET ...] [--gpu nvidia_h200] [--results profile_results]

For each set with a compare of the GPU (every such set where none is named): the layers whose
choice now (what `scons best_kernels.h` chooses among the set's measured rows of current code,
``kernelgen.report``) is another kernel than the one its compare timed, each with the kernel the
compare timed, its time there, the kernel chosen now, its profiled time and the library's time in
the compare; then the set's network total in the compare and as estimated now (the compare's
figures with the changed layers' profiled times). The estimate joins two runs on the same GPU: it
says which sets `scons compare` should time again, not what they measure.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))
sys.path.insert(0, str(ROOT / "bench"))
import targets  # noqa: E402  (bench/targets.py: a compare's timed rows, the sets' arguments)


def compare_rows(path: Path) -> dict:
    """A compare.csv's timed rows (``targets.rows_of``) by workload name."""
    return {r["workload"]: r for r in targets.rows_of(path)}


def stale_layers(compared: dict, problems, best) -> list:
    """[(problem, compare row, kernel now, its profiled ms)] of the problems whose choice in
    ``best`` (one row a problem, in order) is not the kernel their compare row timed."""
    stale = []
    for problem, row in zip(problems, best.itertuples(index=False)):
        timed = compared.get(problem.name)
        if timed is not None and timed["kernel"] != row.kernel:
            stale.append((problem, timed, row.kernel, float(row.runtime_ms)))
    return stale


def network(compared: dict, replaced: dict) -> tuple:
    """(kernels' total, library's total) over the compare's rows, each layer's count times its time,
    the kernel's taken from ``replaced`` (workload name -> ms) where it holds the layer."""
    kernel = sum(int(r["count"]) * replaced.get(name, float(r["kernel_ms"])) for name, r in compared.items())
    library = sum(int(r["count"]) * float(r["library_ms"]) for r in compared.values())
    return kernel, library


def main(argv=None) -> int:
    from kernelgen.errors import KernelgenError
    from kernelgen.report import current_choices

    args = targets.sets_parser(__doc__, "set names (default: every set with a compare of the GPU)").parse_args(argv)
    results = args.results
    sets = args.sets or sorted(p.parent.parent.name for p in results.glob(f"*/{args.gpu}/compare.csv"))
    for name in sets:
        path = results / name / args.gpu / "compare.csv"
        if not path.is_file():
            print(f"{name}: no compare of {args.gpu} in {results}", file=sys.stderr)
            return 1
        try:
            _, _, problems, _, best = current_choices(name, results, args.gpu)
        except KernelgenError as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 1
        compared = compare_rows(path)
        stale = stale_layers(compared, problems, best)
        if not stale:
            print(f"{name}: the compare timed every choice")
            continue
        before = network(compared, {})
        now = network(compared, {p.name: ms for p, _, _, ms in stale})
        print(f"{name}: {len(stale)} of {len(compared)} layers chosen anew; network {before[0] / before[1]:.2f} of "
              f"the library at its compare, about {now[0] / now[1]:.2f} now")
        for problem, timed, kernel, ms in stale:
            library = float(timed["library_ms"])
            print(f"  {timed['layer']}: {timed['kernel']} {float(timed['kernel_ms']):.4f} ms -> {kernel} {ms:.4f} ms "
                  f"(library {library:.4f}: {float(timed['kernel_ms']) / library:.2f} -> {ms / library:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
