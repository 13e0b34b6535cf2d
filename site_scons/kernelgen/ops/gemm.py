"""The GEMM D (m x n) = A (m x k) B^T, B n x k, all row-major: the 1x1 convolution of m
pixels with k channels by n filters, which is how the profiler runs it.

Workload line: ``gemm m= n= k= [epilogue=] [dtype=] [count=]`` (``epilogue`` as a convolution's). cuBLAS (``torch.nn.functional.linear``)
is its baseline.
"""

from dataclasses import dataclass, field

from ..vocab import DATA_TYPES
from . import common
from .common import (apply_epilogue, check_products, check_sizes, epilogue_bytes, epilogue_suffix, epilogue_tensors,
                     fused_ops, operand_sets, read_values, steps_after_bias, torch_dtype)
from .conv2d_fprop import Conv2dProblem

OP = "gemm"
KERNEL_OPS = ("conv2d_fprop", "gemm")  # run as a 1x1 convolution: conv kernels serve it, GEMM kernels too
HEADER_SECTION = "gemm_entries"  # best_kernels.h.mako's list of this op's entries
BASELINE = "cublas"


@dataclass(frozen=True)
class GemmProblem:
    """D (m x n) = A (m x k) B^T, B n x k: the 1x1 convolution of m pixels, k channels, n filters."""

    m: int
    n: int
    k: int
    dtype: str = "f16"
    epilogue: str = ""  # ops.common.parse_epilogue's canonical text; "" for none
    count: int = field(default=1, compare=False)  # times the network runs it; not in the name
    line: int = field(default=0, compare=False, repr=False)  # its line in the workload file (0: none)

    op = OP

    @property
    def name(self) -> str:
        return f"gemm_{self.dtype}_m{self.m}_n{self.n}_k{self.k}" + epilogue_suffix(self.epilogue)

    @property
    def kernel_ops(self) -> tuple:
        """The ops of the kernels that may run it."""
        return fused_ops(KERNEL_OPS, self.epilogue)

    def as_conv(self) -> Conv2dProblem:
        return Conv2dProblem(n=self.m, h=1, w=1, c=self.k, k=self.n, r=1, s=1, dtype=self.dtype,
                             epilogue=self.epilogue, count=self.count, line=self.line)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def min_bytes(self) -> int:
        size = DATA_TYPES[self.dtype].bits // 8
        return size * (self.m * self.k + self.n * self.k + self.m * self.n) + epilogue_bytes(
            self.epilogue, self.n, self.m * self.n, size)

    def args(self) -> list[int]:
        return self.as_conv().args()


def parse(path, lineno, pairs: dict) -> GemmProblem:
    """The problem of a workload line's ``key=value`` pairs (WorkloadError naming the line)."""
    values = read_values(path, lineno, pairs, {"m", "n", "k", "epilogue", "dtype", "count"}, {})
    check_sizes(path, lineno, values, ("m", "n", "k"))
    m, n, k = values["m"], values["n"], values["k"]
    check_products(path, lineno, {"m*k (A's elements)": m * k, "n*k (B's elements)": n * k,
                                  "m*n (D's elements)": m * n})
    return GemmProblem(**values, line=lineno)


def job_line(problem) -> str:
    """The profiler's ``workload`` job line: the GEMM's name and extents (the profiler runs it as
    the 1x1 convolution it is), and its epilogue's, if any."""
    return (f"workload {problem.name} {OP} {problem.dtype} {problem.m} {problem.n} {problem.k}"
            + (f" {problem.epilogue}" if problem.epilogue else ""))


def table_label(problem) -> str:
    return f"gemm m={problem.m} n={problem.n} k={problem.k}" + (f" {problem.epilogue}" if problem.epilogue else "")


def baseline_call(torch, problem, l2_bytes: int):
    """(call(i), operand sets) of torch.nn.functional.linear on ``problem``'s operands; of an
    epilogue's problem, the linear layer with its bias, then PyTorch's ops for the rest."""
    operands = _baseline_operands(torch, problem, l2_bytes)
    rest = steps_after_bias(problem.epilogue)

    def call(i):
        a, b, bias, residual = operands[i]
        y = torch.nn.functional.linear(a, b, bias)
        return apply_epilogue(torch, rest, y, bias, residual, 1) if rest else y
    return call, len(operands)


def fused_baselines(torch, problem, l2_bytes: int) -> list:
    """[(library, call(i), operand sets)]: cuBLASLt's epilogues PyTorch exposes for the problem's
    (``torch._addmm_activation``: bias + ReLU, bias + GELU), none for others."""
    if problem.epilogue not in ("bias+relu", "bias+gelu"):
        return []
    operands, gelu = _baseline_operands(torch, problem, l2_bytes), problem.epilogue == "bias+gelu"
    return [("cublaslt epilogue", lambda i: torch._addmm_activation(operands[i][2], operands[i][0], operands[i][1].t(),
                                                                    use_gelu=gelu), len(operands))]


def _baseline_operands(torch, problem, l2_bytes: int) -> list:
    """[(a, b, bias, residual)] one a set."""
    m, n, k = problem.m, problem.n, problem.k
    sets = operand_sets(2 * (m * k + n * k + m * n) + epilogue_bytes(problem.epilogue, n, m * n, 2), l2_bytes)
    dtype = torch_dtype(torch, problem.dtype)
    operands = []
    for _ in range(sets):
        a = torch.empty(m, k, device=common.DEVICE, dtype=dtype).uniform_(-1, 1)
        b = torch.empty(n, k, device=common.DEVICE, dtype=dtype).uniform_(-1, 1)
        y = torch.empty(m, n, device=common.DEVICE, dtype=dtype)
        operands.append((a, b, *epilogue_tensors(torch, problem.epilogue, n, y, dtype)))
    return operands


PROBLEM = GemmProblem
