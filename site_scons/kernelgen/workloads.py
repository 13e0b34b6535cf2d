"""Workloads: the problems to find kernels for, read from workload files.

A workload file holds one problem per line, ``#`` starts a comment::

    conv2d_fprop n=256 h=56 w=56 c=64 k=256 r=1 s=1 pad=0 stride=1
    gemm m=256 n=1000 k=2048

``pad``, ``stride`` and ``dilation`` set both spatial dimensions; ``pad_h``,
``pad_w``, ... set one. A GEMM is D (m x n, row-major) = A (m x k, row-major) times
B^T with B (n x k, row-major), which is the 1x1 convolution of m pixels with k
channels by n filters; it is profiled as that convolution. Each op's module in
``kernelgen.ops`` owns its problem type and the parser of its lines. ``dtype`` (default
``f16``) is the element type of the operands and the output. ``count`` (default 1) is how
many times the network runs the problem: metadata for network totals, not part of the
problem or its name. A named set ``NAME`` is the file
``kernel_specs/workloads/NAME.txt``; a set's name is a plain name (letters, digits, ``_``,
``-`` and ``.``, not first), as it names the set's results folder. Every size fits a C++ ``int``,
and so does every tensor's element count (the header's problem types and CUTLASS's extents are
``int``); a number of more digits than an ``int`` has is refused before it is read.
"""

import re
from pathlib import Path

from . import inputs
from .errors import InputError, WorkloadError, shorten
from .ops import OPS
from .ops.common import INT_MAX  # the largest size, as C++'s int
from .ops.conv2d_fprop import Conv2dProblem  # noqa: F401  (each op's module owns its problem type)
from .ops.gemm import GemmProblem  # noqa: F401

_SET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_INTEGER = re.compile(r"([+-]?)0*([0-9]+)")


def integer_text(path, lineno, key: str, value: str) -> str:
    """An integer's text without its leading zeros; one of more digits than a C++ ``int`` has is
    refused here (``int()`` refuses a text of more than 4300 digits, with a traceback). Any other
    text is left for the op's parser to refuse."""
    match = _INTEGER.fullmatch(value)
    if not match:
        return value
    sign, digits = match.groups()
    if len(digits) > len(str(INT_MAX)):
        bound = "must not be negative" if sign == "-" else f"must be at most {INT_MAX} (a C++ int)"
        raise WorkloadError(path, f"'{shorten(key)}' {bound}, got {shorten(value)}", lineno)
    return sign + digits


def parse_workloads(text: str, path="<workloads>") -> list:
    problems, seen = [], {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        bad = inputs.control_character(line.removesuffix("\r"))
        if bad:
            raise WorkloadError(path, f"control character {bad!r} in the line", lineno)
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        op, *items = line.split()
        if op not in OPS:
            raise WorkloadError(path, f"unknown operation '{shorten(op)}' (known: {', '.join(sorted(OPS))})",
                                lineno)
        pairs = {}
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not key or not value:
                raise WorkloadError(path, f"expected key=value, got '{shorten(item)}'", lineno)
            if key in pairs:
                raise WorkloadError(path, f"'{shorten(key)}' is given twice", lineno)
            pairs[key] = integer_text(path, lineno, key, value)
        problem = OPS[op].parse(path, lineno, pairs)
        if problem.name in seen:
            raise WorkloadError(path, f"duplicate of the workload on line {seen[problem.name]}", lineno)
        seen[problem.name] = lineno
        problems.append(problem)
    if not problems:
        raise WorkloadError(path, "no workloads")
    return problems


def resolve_workload_file(spec: str, sets_dir: Path) -> tuple[str, Path]:
    """Map ``WORKLOADS=`` (a set name or a file path) to (set name, file)."""
    candidate = Path(spec)
    if "," in spec and inputs.file_kind(candidate) == "missing":
        raise WorkloadError(spec, "no such set or workload file: WORKLOADS= takes one set or file a call, not a list "
                            "(run scons once for each set)")
    if candidate.suffix or "/" in spec:
        if inputs.file_kind(candidate) == "missing":
            raise WorkloadError(spec, "no such workload file")
        check_set_name(candidate.stem, spec)
        return candidate.stem, candidate
    check_set_name(spec, spec)
    path = Path(sets_dir) / f"{spec}.txt"
    if inputs.file_kind(path) == "missing":
        known = sorted(p.stem for p in Path(sets_dir).glob("*.txt"))
        raise WorkloadError(spec, f"unknown workload set (known sets: {', '.join(known)}; or give a file path)")
    return spec, path


def check_set_name(name: str, given) -> None:
    """A set's name names its results folder: a plain name, never ``..``, a path or ``$``."""
    if not _SET_NAME.match(name):
        raise WorkloadError(given, f"the set name {shorten(name)!r} is not a plain name (letters, digits, '_', "
                            "'-' and '.', not first; at most 100): it names the set's results folder")


def load_workloads(spec: str, sets_dir: Path) -> tuple[str, Path, list]:
    set_name, path = resolve_workload_file(spec, sets_dir)
    try:
        text = inputs.read_text(path)
    except InputError as e:
        raise WorkloadError(path, f"cannot read: {e.reason}", e.line) from None
    return set_name, path, parse_workloads(text, path)
