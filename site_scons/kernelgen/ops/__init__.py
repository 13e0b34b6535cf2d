"""Operations: one module per op, each owning its problem type, its workload-line parser
(``parse``), its profiler job line (``job_line``), the header section its entries go to
(``HEADER_SECTION``), its baseline library (``BASELINE``, ``baseline_call``) and its table label
(``table_label``). ``OPS`` maps an op's name (a workload line's first word, ``problem.op``) to
its module, in the order the header lists their entries.

Every module of this package with an ``OP`` is an op (found by name, in sorted order, which is
the order the header lists their entries); the others (``common``) hold what ops share. A new op
is a module here and its section of the header's template: nothing to register.

A kernel serves a workload when the kernel's op is one of the workload's kernel ops (the
problem's ``kernel_ops`` where it has them, e.g. a grouped convolution's, else its op's
``KERNEL_OPS``; a problem of an epilogue, ``<op>:<epilogue>``: a fused kernel's) and the kernel's
``element`` is the workload's ``dtype``.
"""

from ..discovery import by_attribute
from ..errors import WorkloadError

OPS = by_attribute(__name__, __path__, "OP")
conv2d_fprop, gemm = OPS["conv2d_fprop"], OPS["gemm"]  # the two ops other modules name directly


def op_of(problem):
    """The module of ``problem``'s op."""
    return OPS[problem.op]


def serves(kernel, problem) -> bool:
    """Whether ``kernel`` (a descriptor, or a manifest entry: ``op`` and ``element``) can be given
    ``problem``: its op is one the problem's op is run with, its input type the problem's dtype."""
    return _op(kernel) in kernel_ops(problem) and _element(kernel) == problem.dtype


def kernel_ops(problem) -> tuple:
    """The ops of the kernels that may run ``problem``."""
    return getattr(problem, "kernel_ops", None) or OPS[problem.op].KERNEL_OPS


def check_served(problems, kernels, path) -> None:
    """Refuse (WorkloadError naming ``path``, the workload's line and its dtype) a workload that no
    kernel of ``kernels`` (descriptors or manifest entries) serves: before anything is profiled or
    reduced, so that no workload is measured with, or given, a kernel of another element type."""
    kernels = list(kernels)
    offered = _offered(problems, kernels)
    for problem in problems:
        if any((op, problem.dtype) in offered for op in kernel_ops(problem)):
            continue
        ops = kernel_ops(problem)
        elements = sorted({_element(k) for k in kernels if _op(k) in ops})
        what = problem.op + (f" with groups={problem.groups}" if getattr(problem, "groups", 1) > 1 else "")
        what += f" with epilogue={problem.epilogue}" if getattr(problem, "epilogue", "") else ""
        raise WorkloadError(
            path, f"workload {problem.name}: dtype {problem.dtype}: no kernel of this build computes "
            f"{what} in {problem.dtype} (its kernels take {', '.join(elements) or 'no such op'})",
            problem.line or None)


def _offered(problems, kernels) -> set:
    """The (op, element) pairs of ``kernels`` (a kernel serves a problem by these two: ``serves``),
    the scan stopped once each problem has a pair it can be served by: a fused set's catalog is
    tens of thousands of descriptors, and its first hundreds hold most pairs (a problem of several
    kernel ops, a fused 1x1 convolution's, may never see some of them)."""
    wanted = {frozenset((op, problem.dtype) for op in kernel_ops(problem)) for problem in problems}
    offered = set()
    for kernel in kernels:
        pair = (_op(kernel), _element(kernel))
        if pair not in offered:
            offered.add(pair)
            wanted = {pairs for pairs in wanted if not pairs & offered}
            if not wanted:
                break
    return offered


def _op(kernel) -> str:
    return kernel["op"] if isinstance(kernel, dict) else kernel.op


def _element(kernel) -> str:
    return kernel["element"] if isinstance(kernel, dict) else kernel.element


def shared_type(kernel) -> tuple | None:
    """A descriptor's or manifest entry's (what names its CUTLASS kernel type, how that type is
    compiled) where kernels of other launches share the type (GemmSm90.shared_type), else None."""
    shared = kernel.get("shared_type") if isinstance(kernel, dict) else getattr(kernel, "shared_type", None)
    return None if shared is None else tuple(shared)


def check_header_keys(problems, path) -> None:
    """Refuse (WorkloadError naming ``path`` and both lines) a set of workloads of more than one
    dtype: the header's launcher takes one element type (``best_kernels::Element``), and its lookups
    (``find``, ``Conv2dFprop<N, H, ...>``) key a problem by its sizes, so two workloads that differ
    in dtype only would be one specialization defined twice, a header that does not compile."""
    for problem in problems:
        if problem.dtype != problems[0].dtype:
            raise WorkloadError(
                path, f"workload {problem.name} is {problem.dtype}, {problems[0].name} (line {problems[0].line}) "
                f"{problems[0].dtype}; a header is built for one element type: profile each dtype as a set of "
                "its own", problem.line or None)
