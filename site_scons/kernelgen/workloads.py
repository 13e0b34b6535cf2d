"""Workloads: the problems to find kernels for, read from workload files.

A workload file holds one problem per line, ``#`` starts a comment::

    conv2d_fprop n=256 h=56 w=56 c=64 k=256 r=1 s=1 pad=0 stride=1
    gemm m=256 n=1000 k=2048

``pad``, ``stride`` and ``dilation`` set both spatial dimensions; ``pad_h``,
``pad_w``, ... set one. A GEMM is D (m x n, row-major) = A (m x k, row-major) times
B^T with B (n x k, row-major), which is the 1x1 convolution of m pixels with k
channels by n filters; it is profiled as that convolution. ``dtype`` (default
``f16``) is the element type of the operands and the output. ``count`` (default 1) is how
many times the network runs the problem: metadata for network totals, not part of the
problem or its name. A named set ``NAME`` is the file
``kernel_specs/workloads/NAME.txt``; a set's name is a plain name (letters, digits, ``_``,
``-`` and ``.``, not first), as it names the set's results folder. Every size fits a C++ ``int``,
and so does every tensor's element count (the header's problem types and CUTLASS's extents are
``int``).
"""

import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from . import inputs
from .errors import InputError, WorkloadError
from .vocab import DATA_TYPES

INT_MAX = 2**31 - 1
_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # ASCII digits only: int() would also take "١٢" and "1_0"
_SET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


@dataclass(frozen=True)
class Conv2dProblem:
    """A 2-D forward convolution, NHWC activations, KRSC filters, NPQK output."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    dtype: str = "f16"
    count: int = field(default=1, compare=False)  # times the network runs it; not in the name

    op = "conv2d_fprop"

    @property
    def p(self) -> int:
        return (self.h + 2 * self.pad_h - self.dilation_h * (self.r - 1) - 1) // self.stride_h + 1

    @property
    def q(self) -> int:
        return (self.w + 2 * self.pad_w - self.dilation_w * (self.s - 1) - 1) // self.stride_w + 1

    @property
    def name(self) -> str:
        """The procedural workload name: CSV file name, CSV key and header key."""
        return (
            f"conv2d_fprop_{self.dtype}_n{self.n}_h{self.h}_w{self.w}_c{self.c}_k{self.k}"
            f"_r{self.r}_s{self.s}_pad{self.pad_h}x{self.pad_w}"
            f"_str{self.stride_h}x{self.stride_w}_dil{self.dilation_h}x{self.dilation_w}"
        )

    @property
    def gemm_mnk(self) -> tuple[int, int, int]:
        """The implicit GEMM's extents: M = N*P*Q, N = K, K = C*R*S."""
        return self.n * self.p * self.q, self.k, self.c * self.r * self.s

    @property
    def flops(self) -> int:
        m, n, k = self.gemm_mnk
        return 2 * m * n * k

    def min_bytes(self) -> int:
        """Bytes a convolution must move at least: the input pixels it touches, the
        filter and the output, each once (a 1x1 stride-2 layer touches a quarter of
        its input)."""
        size = DATA_TYPES[self.dtype].bits // 8
        rows = _touched(self.h, self.p, self.r, self.pad_h, self.stride_h, self.dilation_h)
        cols = _touched(self.w, self.q, self.s, self.pad_w, self.stride_w, self.dilation_w)
        activations = self.n * rows * cols * self.c
        filters = self.k * self.r * self.s * self.c
        outputs = self.n * self.p * self.q * self.k
        return size * (activations + filters + outputs)

    def args(self) -> list[int]:
        """Integer fields in declaration order, as the profiler reads them."""
        return [getattr(self, f.name) for f in fields(self) if f.name not in ("dtype", "count")]

    def as_conv(self) -> "Conv2dProblem":
        return self


@dataclass(frozen=True)
class GemmProblem:
    """D (m x n) = A (m x k) B^T, B n x k: the 1x1 convolution of m pixels, k channels, n filters."""

    m: int
    n: int
    k: int
    dtype: str = "f16"
    count: int = field(default=1, compare=False)  # times the network runs it; not in the name

    op = "gemm"

    @property
    def name(self) -> str:
        return f"gemm_{self.dtype}_m{self.m}_n{self.n}_k{self.k}"

    def as_conv(self) -> Conv2dProblem:
        return Conv2dProblem(n=self.m, h=1, w=1, c=self.k, k=self.n, r=1, s=1, dtype=self.dtype, count=self.count)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def min_bytes(self) -> int:
        return DATA_TYPES[self.dtype].bits // 8 * (self.m * self.k + self.n * self.k + self.m * self.n)

    def args(self) -> list[int]:
        return self.as_conv().args()


def _touched(extent, out, taps, pad, stride, dilation) -> int:
    """How many of ``extent`` input positions some output position reads."""
    return len({o * stride - pad + t * dilation for o in range(out) for t in range(taps)}
               & set(range(extent)))


_CONV_KEYS = {"n", "h", "w", "c", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w",
              "dilation_h", "dilation_w", "dtype", "count"}
_CONV_SHORTHANDS = {"pad": ("pad_h", "pad_w"), "stride": ("stride_h", "stride_w"),
                    "dilation": ("dilation_h", "dilation_w")}
_CONV_REQUIRED = ("n", "h", "w", "c", "k", "r", "s")


def _read_values(path, lineno, pairs: dict, keys: set, shorthands: dict) -> dict:
    values = {}
    for key, raw in pairs.items():
        targets = shorthands.get(key, (key,))
        if targets[0] not in keys:
            allowed = sorted(keys | set(shorthands))
            raise WorkloadError(path, f"unknown key '{key}' (allowed: {', '.join(allowed)})", lineno)
        if key == "dtype":
            if raw not in DATA_TYPES:
                raise WorkloadError(path, f"dtype '{raw}' is not one of {', '.join(sorted(DATA_TYPES))}", lineno)
            values["dtype"] = raw
            continue
        if not _INTEGER.match(raw):
            raise WorkloadError(path, f"'{key}={raw}' is not an integer", lineno)
        number = int(raw, 10)
        for t in targets:
            if t in values:
                raise WorkloadError(path, f"'{t}' is given twice", lineno)
            values[t] = number
    return values


def _check_sizes(path, lineno, values: dict, required) -> None:
    missing = [k for k in required if k not in values]
    if missing:
        raise WorkloadError(path, f"missing {', '.join(missing)}", lineno)
    for key, v in values.items():
        if key == "dtype":
            continue
        low = 0 if key.startswith("pad") else 1
        if v < low:
            raise WorkloadError(path, f"'{key}' must be at least {low}, got {v}", lineno)
        if v > INT_MAX:
            raise WorkloadError(path, f"'{key}' must be at most {INT_MAX} (a C++ int), got {v}", lineno)


def _check_products(path, lineno, products: dict) -> None:
    """Each product must fit a C++ int: {"n*h*w*c (the input's elements)": value, ...}."""
    for what, value in products.items():
        if value > INT_MAX:
            raise WorkloadError(path, f"{what} = {value} exceeds {INT_MAX}, the largest C++ int", lineno)


def _parse_conv2d(path, lineno, pairs: dict) -> Conv2dProblem:
    values = _read_values(path, lineno, pairs, _CONV_KEYS, _CONV_SHORTHANDS)
    _check_sizes(path, lineno, values, _CONV_REQUIRED)
    problem = Conv2dProblem(**values)
    if problem.p < 1 or problem.q < 1:
        raise WorkloadError(
            path, f"the filter, padding and stride leave no output ({problem.p}x{problem.q})", lineno)
    p = problem
    _check_products(path, lineno, {"h+2*pad_h": p.h + 2 * p.pad_h, "w+2*pad_w": p.w + 2 * p.pad_w,
                                   "n*h*w*c (the input's elements)": p.n * p.h * p.w * p.c,
                                   "k*r*s*c (the filter's elements)": p.k * p.r * p.s * p.c,
                                   "n*p*q*k (the output's elements)": p.n * p.p * p.q * p.k})
    return problem


def _parse_gemm(path, lineno, pairs: dict) -> GemmProblem:
    values = _read_values(path, lineno, pairs, {"m", "n", "k", "dtype", "count"}, {})
    _check_sizes(path, lineno, values, ("m", "n", "k"))
    m, n, k = values["m"], values["n"], values["k"]
    _check_products(path, lineno, {"m*k (A's elements)": m * k, "n*k (B's elements)": n * k,
                                   "m*n (D's elements)": m * n})
    return GemmProblem(**values)


PARSERS = {"conv2d_fprop": _parse_conv2d, "gemm": _parse_gemm}


def parse_workloads(text: str, path="<workloads>") -> list:
    problems, seen = [], {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        bad = _CONTROL.search(line.removesuffix("\r"))
        if bad:
            raise WorkloadError(path, f"control character {bad.group()!r} in the line", lineno)
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        op, *items = line.split()
        if op not in PARSERS:
            raise WorkloadError(path, f"unknown operation '{op}' (known: {', '.join(sorted(PARSERS))})", lineno)
        pairs = {}
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not key or not value:
                raise WorkloadError(path, f"expected key=value, got '{item}'", lineno)
            if key in pairs:
                raise WorkloadError(path, f"'{key}' is given twice", lineno)
            pairs[key] = value
        problem = PARSERS[op](path, lineno, pairs)
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
        raise WorkloadError(given, f"the set name {name!r} is not a plain name (letters, digits, '_', '-' "
                            "and '.', not first; at most 100): it names the set's results folder")


def load_workloads(spec: str, sets_dir: Path) -> tuple[str, Path, list]:
    set_name, path = resolve_workload_file(spec, sets_dir)
    try:
        text = inputs.read_text(path)
    except InputError as e:
        raise WorkloadError(path, f"cannot read: {e.reason}", e.line) from None
    return set_name, path, parse_workloads(text, path)
