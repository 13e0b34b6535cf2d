"""The GEMM D (m x n) = A (m x k) B^T, B n x k, all row-major: the 1x1 convolution of m
pixels with k channels by n filters, which is how the profiler runs it.

Workload line: ``gemm m= n= k= [epilogue=] [dtype=] [count=]`` (``epilogue`` as a convolution's). cuBLAS (``torch.nn.functional.linear``)
is its baseline.
"""

from dataclasses import dataclass, field

from ..vocab import DATA_TYPES
from .common import (check_products, check_sizes, epilogue_bytes, epilogue_suffix, fused_ops, operand_sets,
                     read_values, torch_dtype)
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
    the 1x1 convolution it is)."""
    return f"workload {problem.name} {OP} {problem.dtype} {problem.m} {problem.n} {problem.k}"


def table_label(problem) -> str:
    return f"gemm m={problem.m} n={problem.n} k={problem.k}" + (f" {problem.epilogue}" if problem.epilogue else "")


def baseline_call(torch, problem, l2_bytes: int):
    """(call(i), operand sets) of torch.nn.functional.linear on ``problem``'s operands."""
    m, n, k = problem.m, problem.n, problem.k
    sets = operand_sets(2 * (m * k + n * k + m * n), l2_bytes)
    dtype = torch_dtype(torch, problem.dtype)
    a = [torch.empty(m, k, device="cuda", dtype=dtype).uniform_(-1, 1) for _ in range(sets)]
    b = [torch.empty(n, k, device="cuda", dtype=dtype).uniform_(-1, 1) for _ in range(sets)]
    return (lambda i: torch.nn.functional.linear(a[i], b[i])), sets


PROBLEM = GemmProblem
