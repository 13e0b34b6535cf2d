"""The 2-D forward convolution: NHWC activations, KRSC filters, NPQK output.

Workload line: ``conv2d_fprop n= h= w= c= k= r= s= [pad= stride= dilation= | pad_h= ...]
[groups=] [epilogue=] [dtype=] [count=] [conv3d=frames:T | conv3d=time:H]``. The profiler runs it as
it is; cuDNN (``torch.nn.functional.conv2d``, channels_last) is its baseline; ``conv3d`` says the
line is a 3-D convolution's 2-D view of the same NDHWC memory (``importer.as_conv2d``), and the
network's own call, ``torch.nn.functional.conv3d`` (channels_last_3d), is a baseline beside those
(``view_baselines``; the library's figure is the fastest): ``frames:T``, a 1xRxS filter over the n/T
clips of T frames of h x w pixels; ``time:H``, an Rx1x1 filter over the n clips of h frames of
H x (w/H) pixels. ``groups`` (default 1) splits C and K into that many groups, each
group's K/groups filters of R x S x C/groups reading its C/groups channels (KRS(C/groups) filters);
groups = C = K is a depthwise convolution. A grouped problem is served by the kernels of
``GROUPED_KERNEL_OPS`` only, and runs as the profiler's ``conv2d_fprop_grouped`` job. ``epilogue``
(``ops.common.parse_epilogue``: a bias, an activation, a residual add) is what the output goes
through after the product; a problem of one is served by the fused kernels of its kernel ops
(``ops.common.fused_ops``) only.
"""

import functools
import re
from dataclasses import dataclass, field, fields, replace

from ..errors import WorkloadError, shorten
from ..vocab import DATA_TYPES
from . import common
from .common import (apply_epilogue, check_products, check_sizes, epilogue_bytes, epilogue_suffix, epilogue_tensors,
                     fused_ops, operand_sets, read_values, steps_after_bias, torch_dtype)

OP = "conv2d_fprop"
KERNEL_OPS = ("conv2d_fprop", "gemm")  # GEMM kernels run the 1x1 stride-1 unpadded layers (unsupported on others)
GROUPED_KERNEL_OPS = ("conv2d_fprop_grouped",)  # the kernels of a problem of groups > 1
HEADER_SECTION = "conv_entries"  # best_kernels.h.mako's list of this op's entries
BASELINE = "cudnn"
TABLE_HEADING = "n,h,w,c,k,r,s,pad,stride"


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
    groups: int = 1
    dtype: str = "f16"
    epilogue: str = ""  # ops.common.parse_epilogue's canonical text; "" for none
    count: int = field(default=1, compare=False)  # times the network runs it; not in the name
    line: int = field(default=0, compare=False, repr=False)  # its line in the workload file (0: none)
    conv3d: str = field(default="", compare=False)  # "frames:T" / "time:H": the 3-D call it is a view of

    op = OP

    @property
    def p(self) -> int:
        return (self.h + 2 * self.pad_h - self.dilation_h * (self.r - 1) - 1) // self.stride_h + 1

    @property
    def q(self) -> int:
        return (self.w + 2 * self.pad_w - self.dilation_w * (self.s - 1) - 1) // self.stride_w + 1

    @property
    def name(self) -> str:
        """The procedural workload name: CSV file name, CSV key and header key (``_g<groups>``
        for a grouped one, ``_e<steps>`` for one of an epilogue)."""
        return (
            f"conv2d_fprop_{self.dtype}_n{self.n}_h{self.h}_w{self.w}_c{self.c}_k{self.k}"
            f"_r{self.r}_s{self.s}_pad{self.pad_h}x{self.pad_w}"
            f"_str{self.stride_h}x{self.stride_w}_dil{self.dilation_h}x{self.dilation_w}"
            + (f"_g{self.groups}" if self.groups > 1 else "") + epilogue_suffix(self.epilogue)
        )

    @property
    def kernel_ops(self) -> tuple:
        """The ops of the kernels that may run it."""
        return fused_ops(GROUPED_KERNEL_OPS if self.groups > 1 else KERNEL_OPS, self.epilogue)

    @property
    def gemm_mnk(self) -> tuple[int, int, int]:
        """The implicit GEMM's extents, a group's K summed over the groups: M = N*P*Q, N = K,
        K = C/groups*R*S."""
        return self.n * self.p * self.q, self.k, self.c // self.groups * self.r * self.s

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
        filters = self.k * self.r * self.s * (self.c // self.groups)
        outputs = self.n * self.p * self.q * self.k
        return size * (activations + filters + outputs) + epilogue_bytes(self.epilogue, self.k, outputs, size)

    def args(self) -> list[int]:
        """Integer fields in declaration order, as the profiler reads them."""
        return [getattr(self, f.name) for f in fields(self)
                if f.name not in ("dtype", "count", "line", "groups", "epilogue", "conv3d")]

    def as_conv(self) -> "Conv2dProblem":
        return self

    def view_3d(self):
        """The 3-D convolution of which this is the 2-D view (``conv3d``), as the shapes and
        arguments of torch.nn.functional.conv3d: (input NCTHW, weight, stride, padding, dilation);
        None for a 2-D one."""
        if not self.conv3d:
            return None
        kind, extent = self.conv3d.split(":")
        extent, per_group = int(extent), self.c // self.groups
        if kind == "frames":
            return ((self.n // extent, self.c, extent, self.h, self.w), (self.k, per_group, 1, self.r, self.s),
                    (1, self.stride_h, self.stride_w), (0, self.pad_h, self.pad_w),
                    (1, self.dilation_h, self.dilation_w))
        return ((self.n, self.c, self.h, extent, self.w // extent), (self.k, per_group, self.r, 1, 1),
                (self.stride_h, 1, 1), (self.pad_h, 0, 0), (self.dilation_h, 1, 1))


@functools.lru_cache(maxsize=4096)  # a pure function of integers, asked again for every kernel a layer is ranked for
def _touched(extent, out, taps, pad, stride, dilation) -> int:
    """How many of ``extent`` input positions some output position reads."""
    return len({o * stride - pad + t * dilation for o in range(out) for t in range(taps)}
               & set(range(extent)))


_KEYS = {"n", "h", "w", "c", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w",
         "dilation_h", "dilation_w", "groups", "epilogue", "dtype", "count"}
_SHORTHANDS = {"pad": ("pad_h", "pad_w"), "stride": ("stride_h", "stride_w"),
               "dilation": ("dilation_h", "dilation_w")}
_REQUIRED = ("n", "h", "w", "c", "k", "r", "s")


def parse(path, lineno, pairs: dict) -> Conv2dProblem:
    """The problem of a workload line's ``key=value`` pairs (WorkloadError naming the line)."""
    pairs = dict(pairs)
    view = pairs.pop("conv3d", "")
    values = read_values(path, lineno, pairs, _KEYS, _SHORTHANDS)
    check_sizes(path, lineno, values, _REQUIRED)
    problem = Conv2dProblem(**values, line=lineno)
    if view:
        problem = replace(problem, conv3d=_check_view(path, lineno, problem, view))
    if problem.c % problem.groups or problem.k % problem.groups:
        raise WorkloadError(path, f"groups={problem.groups} must divide both c={problem.c} and k={problem.k} "
                            "(each group takes C/groups channels to K/groups)", lineno)
    if problem.p < 1 or problem.q < 1:
        raise WorkloadError(
            path, f"the filter, padding and stride leave no output ({problem.p}x{problem.q})", lineno)
    check_products(path, lineno, _int_sizes(problem))
    return problem


_VIEW = re.compile(r"(frames|time):([1-9][0-9]{0,9})")


def _check_view(path, lineno, p: Conv2dProblem, text: str) -> str:
    """``conv3d=``'s value, checked against the line's extents (WorkloadError naming the line)."""
    match = _VIEW.fullmatch(text)
    if not match:
        raise WorkloadError(path, f"conv3d={shorten(text)!r}: expected frames:T (a 1xRxS filter over clips of T frames) or "
                            "time:H (an Rx1x1 filter over frames of H rows)", lineno)
    kind, extent = match.group(1), int(match.group(2))
    if kind == "frames" and p.n % extent:
        raise WorkloadError(path, f"conv3d={text}: n={p.n} is not a whole number of clips of {extent} frames", lineno)
    if kind == "time":
        if p.w % extent:
            raise WorkloadError(path, f"conv3d={text}: w={p.w} is not a whole number of rows of a frame of "
                                f"{extent} rows", lineno)
        if (p.s, p.stride_w, p.pad_w, p.dilation_w) != (1, 1, 0, 1):
            raise WorkloadError(path, f"conv3d={text}: the view along time has s=1 and no stride, padding or "
                                "dilation along w", lineno)
    return text


def _int_sizes(p: Conv2dProblem) -> dict:
    """The sizes the profiler's adapters, CUTLASS and the kernels compute in int, by name: those
    the header's launcher refuses a problem on (``check`` in best_kernels.h.mako), so that every
    problem of a header's tables is one its launcher runs. The padded extents bound P's and Q's
    numerators and the dilated filter, the padded input the offsets of padding pixels; the
    distance between the rows two filter rows read is computed for a 1-row filter too."""
    return {"h+2*pad_h": p.h + 2 * p.pad_h, "w+2*pad_w": p.w + 2 * p.pad_w,
            "n*h*w*c (the input's elements)": p.n * p.h * p.w * p.c,
            "k*r*s*c (the filter's elements)": p.k * p.r * p.s * p.c,  # as the dense layout's, for any groups
            "n*p*q*k (the output's elements)": p.n * p.p * p.q * p.k,
            "n*(h+2*pad_h)*(w+2*pad_w)*c (the padded input's elements)":
                p.n * (p.h + 2 * p.pad_h) * (p.w + 2 * p.pad_w) * p.c,
            "dilation_h*w*c (the input elements between the rows two filter rows read)": p.dilation_h * p.w * p.c}


def job_line(problem) -> str:
    """The profiler's ``workload`` job line: the name, the op, the dtype, the convolution's extents
    (a grouped one: ``conv2d_fprop_grouped`` and the groups last), then its epilogue, if any."""
    if problem.groups > 1:
        return " ".join(["workload", problem.name, "conv2d_fprop_grouped", problem.dtype,
                         *map(str, problem.args()), str(problem.groups)])
    return " ".join(["workload", problem.name, OP, problem.dtype, *map(str, problem.args()),
                     *([problem.epilogue] if problem.epilogue else [])])


def table_label(problem) -> str:
    return (f"{problem.n},{problem.h},{problem.w},{problem.c},{problem.k},{problem.r},{problem.s},"
            f"{problem.pad_h},{problem.stride_h}" + (f",g{problem.groups}" if problem.groups > 1 else "")
            + (f",{problem.epilogue}" if problem.epilogue else ""))


def baseline_call(torch, problem, l2_bytes: int):
    """(call(i), operand sets) of torch.nn.functional.conv2d, channels_last, cuDNN benchmark mode;
    of an epilogue's problem, the convolution with its bias, then PyTorch's ops for the rest
    (``apply_epilogue``), as an unfused network runs it."""
    return _unfused_call(torch, problem, l2_bytes, three_d=False)


def view_baselines(torch, problem, l2_bytes: int) -> list:
    """[(library, call(i), operand sets)]: of a 3-D convolution's view (``conv3d``), the network's
    own call, torch.nn.functional.conv3d on channels_last_3d operands, then PyTorch's ops for the
    rest of the epilogue; none for a 2-D one."""
    if not problem.conv3d:
        return []
    label = "cudnn conv3d" + (" + torch" if problem.epilogue else "")
    return [(label, *_unfused_call(torch, problem, l2_bytes, three_d=True))]


def _unfused_call(torch, problem, l2_bytes: int, three_d: bool) -> tuple:
    F, operands, args = _baseline_operands(torch, problem, l2_bytes, three_d)
    rest = steps_after_bias(problem.epilogue)
    conv = F.conv3d if three_d else F.conv2d

    def call(i):
        x, w, bias, residual = operands[i]
        y = conv(x, w, bias, **args)
        return apply_epilogue(torch, rest, y, bias, residual, 1) if rest else y
    return call, len(operands)


def fused_baselines(torch, problem, l2_bytes: int) -> list:
    """[(library, call(i), operand sets)]: cuDNN's fused convolutions PyTorch exposes for the
    problem's epilogue (convolution + bias + ReLU, + bias + residual + ReLU), none for others."""
    if problem.epilogue not in ("bias+relu", "bias+add+relu"):
        return []
    _, operands, args = _baseline_operands(torch, problem, l2_bytes)
    shape = (args["stride"], args["padding"], args["dilation"], args["groups"])
    if problem.epilogue == "bias+relu":
        return [("cudnn fused", lambda i: torch.cudnn_convolution_relu(operands[i][0], operands[i][1], operands[i][2],
                                                                       *shape), len(operands))]
    return [("cudnn fused", lambda i: torch.cudnn_convolution_add_relu(
        operands[i][0], operands[i][1], operands[i][3], 1.0, operands[i][2], *shape), len(operands))]


def _baseline_operands(torch, problem, l2_bytes: int, three_d: bool = False) -> tuple:
    """(torch.nn.functional, [(x, w, bias, residual)] one a set, conv2d's keyword arguments; with
    ``three_d``, of the 3-D convolution the problem is a view of, conv3d's operands
    (channels_last_3d) and arguments."""
    torch.backends.cudnn.benchmark = True
    F = torch.nn.functional
    per_group = problem.c // problem.groups
    outputs = problem.n * problem.p * problem.q * problem.k
    sets = operand_sets(2 * (problem.n * problem.h * problem.w * problem.c + problem.k * problem.r * problem.s
                             * per_group + outputs) + epilogue_bytes(problem.epilogue, problem.k, outputs, 2), l2_bytes)
    fmt, dtype = torch.channels_last, torch_dtype(torch, problem.dtype)
    x_shape, w_shape, y_shape = ((problem.n, problem.c, problem.h, problem.w), (problem.k, per_group, problem.r, problem.s),
                                 (problem.n, problem.k, problem.p, problem.q))
    args = dict(stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w),
                dilation=(problem.dilation_h, problem.dilation_w), groups=problem.groups)
    view = problem.view_3d() if three_d else None
    if view is not None:
        x_shape, w_shape, stride, padding, dilation = view
        fmt, args = torch.channels_last_3d, dict(stride=stride, padding=padding, dilation=dilation, groups=problem.groups)
        # the output's frames: the view's output rows (time) or its images' frames (frames)
        y_shape = ((x_shape[0], problem.k, problem.p, x_shape[3], x_shape[4]) if problem.conv3d.startswith("time")
                   else (x_shape[0], problem.k, x_shape[2], problem.p, problem.q))
    operands = []
    for _ in range(sets):
        x = torch.empty(x_shape, device=common.DEVICE, dtype=dtype, memory_format=fmt).uniform_(-1, 1)
        w = torch.empty(w_shape, device=common.DEVICE, dtype=dtype, memory_format=fmt).uniform_(-1, 1)
        y = torch.empty(y_shape, device=common.DEVICE, dtype=dtype, memory_format=fmt)
        operands.append((x, w, *epilogue_tensors(torch, problem.epilogue, problem.k, y, dtype)))
    return F, operands, args


PROBLEM = Conv2dProblem
