#!/usr/bin/env python3
"""Benchmark helper: the workload lines of several committed sets in one file, each problem once,
for one build of kernels that serve layers of them all (bench/measure_sets.sh).

    python bench/merge_sets.py OUT SET [SET ...]

A problem two sets write differently (spacing, `dtype=f16` given or left to its default, another
`count=`) is one problem: the first set's line is kept, its `count=` dropped (a build's kernels do
not depend on it).
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))


def merged(texts: list) -> str:
    """The lines of ``texts`` (workload files' text), each problem once, without `count=`."""
    from kernelgen.workloads import parse_workloads
    out, names = [], set()
    for text in texts:
        for line in text.splitlines():
            line = re.sub(r"\s+count=\S+", "", line.split("#", 1)[0]).strip()
            if not line:
                continue
            name = parse_workloads(line).pop().name
            if name not in names:
                names.add(name)
                out.append(line)
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    from kernelgen.errors import KernelgenError
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python bench/merge_sets.py OUT SET [SET ...]", file=sys.stderr)
        return 2
    out, sets = Path(args[0]), args[1:]
    try:
        texts = [(ROOT / "kernel_specs" / "workloads" / f"{s}.txt").read_text() for s in dict.fromkeys(sets)]
        out.write_text(merged(texts))
    except (OSError, KernelgenError) as e:
        print(f"bench/merge_sets.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
