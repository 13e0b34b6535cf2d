#!/usr/bin/env python3
"""Benchmark helper: the kernels whose rows a set holds were measured on other code than the kernel's
code now (their `kernel_hash` is not its hash), as a LIST for bench/measure_sets.sh.

    python bench/stale_rows.py [SET ...] [--gpu nvidia_h200] [--results profile_results] > stale.txt
    bench/measure_sets.sh stale.txt

After a change to a kernel's code (a template, a profiler header it includes, the flags), the
header no longer counts the rows measured on the old code (docs/measuring.md); this says which
sets hold such rows and of which kernels. For each set with results of the GPU (every such set
where none is named): a comment line with its rows, how many are of other code and of how many
kernels, and how many name a kernel the catalog no longer holds (nothing measures those again);
then, where it has rows of other code, the line `<set> <kernel>,<kernel>,...`, on which
measure_sets.sh measures those kernels again on the layers they serve and compares the set.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))
sys.path.insert(0, str(ROOT / "bench"))
import targets  # noqa: E402  (bench/targets.py: the sets' arguments)


def stale_kernels(frame, hashes: dict) -> tuple:
    """(the kernels of rows of other code than their hash in ``hashes``, sorted; how many rows those
    are; how many rows name a kernel ``hashes`` does not hold)."""
    kernels, rows, gone = set(), 0, 0
    for kernel, measured in zip(frame["kernel"], frame["kernel_hash"]):
        if kernel not in hashes:
            gone += 1
        elif hashes[kernel] != str(measured):
            kernels.add(kernel)
            rows += 1
    return sorted(kernels), rows, gone


def main(argv=None) -> int:
    from kernelgen.errors import KernelgenError
    from kernelgen.report import current_code
    from kernelgen.results import gpu_slug

    args = targets.sets_parser(__doc__, "set names (default: every set with results of the GPU)").parse_args(argv)
    results, gpu = args.results, gpu_slug(args.gpu)
    sets = args.sets or sorted(p.parent.name for p in results.glob(f"*/{gpu}") if p.is_dir()
                               and (ROOT / "kernel_specs" / "workloads" / f"{p.parent.name}.txt").is_file())
    if not sets:
        print(f"no set has results of {args.gpu} in {results}", file=sys.stderr)
        return 1
    for name in sets:
        try:
            _, _, _, frame, _, hashes = current_code(name, results, args.gpu)
        except KernelgenError as e:  # it names the set or its folder
            print(e, file=sys.stderr)
            return 1
        kernels, rows, gone = stale_kernels(frame, hashes)
        plural = "" if len(kernels) == 1 else "s"
        targets.print_list_entry(name, f"{len(frame)} rows, {rows} of other code ({len(kernels)} kernel{plural}), "
                                       f"{gone} of kernels no longer in the catalog", kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
