"""What `scons list` prints: the kernel space without a GPU. Per family: where it is declared, its
kernels, and how many layers of the set each can serve (``cost_model.serves``, the static form of
the kernels' ``can_implement``, and ``ops.serves``, op and dtype); with KERNELS= narrowed, each
kernel and the layers it serves."""

from collections import defaultdict

from . import cost_model
from .ops import serves as serves_op


def served(kernel, problems) -> list:
    """The problems of ``problems`` that ``kernel`` can run."""
    return [p for p in problems if serves_op(kernel, p) and cost_model.serves(kernel, p) is None]


def list_text(set_name: str, problems, kernels: list, each: bool) -> str:
    """The listing of ``kernels`` (descriptors) for the set's ``problems``: one line per family, and
    with ``each`` one per kernel too."""
    families = defaultdict(list)
    for kernel in kernels:
        families[kernel.family].append(kernel)
    serving = {k.name: served(k, problems) for k in kernels}
    width = max(len(f) for f in families)
    lines = [f"{len(kernels)} kernels in {len(families)} families; the set {set_name} has {len(problems)} layers",
             f"{'family':<{width}}  kernels  arch  op            layers served (by the family's kernels)"]
    for family, members in sorted(families.items()):
        first = members[0]
        covered = {p.name for k in members for p in serving[k.name]}
        # the architectures its kernels need: a family may hold several (the depthwise family's
        # tensor-copy kernels need SM90, its others SM80)
        arch = ",".join(sorted({f"{k.arch}{'a' if k.arch_specific else ''}" for k in members}))
        lines.append(f"{family:<{width}}  {len(members):7d}  {arch:<4}  {first.op:<12}  {len(covered)} of {len(problems)}")
    uncovered = [p.name for p in problems if not any(p in serving[k.name] for k in kernels)]
    if uncovered:
        lines.append(f"no kernel listed serves {len(uncovered)} layer(s): {', '.join(uncovered)}")
    if each:
        lines.append("")
        for kernel in kernels:
            names = [p.name for p in serving[kernel.name]]
            lines.append(f"{kernel.name}  ({kernel.family}): {len(names)} layer(s)" + (f": {', '.join(names)}" if names else ""))
    return "\n".join(lines) + "\n"
