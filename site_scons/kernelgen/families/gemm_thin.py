"""GEMMs of few columns over a short reduction (profiler/gemm_thin.h: GemmThin): D (m x n) = A
(m x k) B^T with k <= ``k_max`` and n <= ``n_max`` of any value (no alignment), any m, fp16 in and
out, fp32 sums on the CUDA cores: ConViT's positional projection (m = 32 * 196 * 196, n = 4,
k = 3), which only tensor-core tiles served, C padded to 8 and N to 32, and the 1x1 layers of few
and odd channel counts of mobile networks (GEMM kernels run 1x1 stride-1 convolutions: MixNet's
36 -> 12, ShuffleNetV2's 58 -> 58). A CTA copies a block of ``threads`` x ``rows`` rows of A into
shared memory by 16-byte loads, its threads compute ``rows`` rows each, all of a row's sums (n_max
rounded to 4) in registers, and it stores the block of D by 16-byte stores: A read and D written
once.

A spec lists entries of ``k_max`` and ``n_max`` (1 to 64), ``rows`` and ``threads``; the blocks
must fit 48 KiB of shared memory. A GEMM of a longer reduction or more columns, and a convolution
that is no GEMM, are ``unsupported``. Names read
``kernelgen_sm80_simt_gemm_thin_f16_f16_f32_f16_k<k_max>_n<n_max>_rows<rows>_threads<threads>``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import expand_fixed_type_entries, fixed_type_family

KIND = "gemm_thin"
TEMPLATE = "gemm_thin.mako"
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what the kernel is written for
STATIC_SHARED = 48 * 1024
MAX_SUMS = 128  # a thread's fp32 sums, in registers
LIMIT = 64  # the largest reduction and columns (GemmThin's static_assert)

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("k_max", S.integer(1, LIMIT)),
    S.Key("n_max", S.integer(1, LIMIT)),
    S.Key("rows", S.integer(1, 16)),
    S.Key("threads", S.one_of((64, 128, 256, 512))),
))


@dataclass(frozen=True)
class GemmThin:
    family: str
    k_max: int
    n_max: int
    rows: int
    threads: int

    element = TYPES["element"]
    accumulator = TYPES["accumulator"]
    output = TYPES["output"]
    op = "gemm"
    arch = 80
    arch_specific = False  # plain CUDA
    template = TEMPLATE
    includes = ("gemm_thin.h",)
    adapter = "kernelgen::DirectOperation"
    adapter_header = "direct_adapter.h"
    measure_unfitted = True  # seconds to compile: measured in full while the cost model has no rows of it

    @cached_property
    def name(self) -> str:
        return (f"kernelgen_sm80_simt_gemm_thin_f16_f16_f32_f16_k{self.k_max}_n{self.n_max}_rows{self.rows}"
                f"_threads{self.threads}")

    def shared_bytes(self) -> int:
        """The block of A, then D's in its place (THREADS * ROWS rows at a stride of an odd number of
        4-byte words: gemm_thin::Shape::kRowsBytes), and B in fp32, k_max rounded to 2 by n_max to 4
        (Shape::kBytes)."""
        stride = max(odd_word_stride(self.k_max), odd_word_stride(self.n_max))
        return self.threads * self.rows * stride * 2 + -(-self.k_max // 2) * 2 * -(-self.n_max // 4) * 4 * 4

    def registers(self) -> int:
        """A thread's sums: rows x n_max rounded to 4 (``check`` keeps them under 128)."""
        return self.rows * -(-self.n_max // 4) * 4

    def refuses(self, n: int, k: int) -> str | None:
        """Why GemmThin::can_implement refuses a GEMM of n columns over a reduction of k (a GEMM
        already, of any m), or None."""
        if k > self.k_max:
            return f"a thin GEMM of a reduction of at most {self.k_max}, not {k}"
        if n > self.n_max:
            return f"a thin GEMM of at most {self.n_max} columns, not {n}"
        return None

    def values(self) -> dict:
        return {"k_max": self.k_max, "n_max": self.n_max, "rows": self.rows, "threads": self.threads}


def odd_word_stride(columns: int) -> int:
    """gemm_thin::odd_word_stride: at least ``columns`` halves, rounded to pairs, an odd number of
    4-byte words."""
    words = -(-columns // 2)
    return 2 * words if words % 2 else 2 * words + 2


def check(path, entry, kernel) -> None:
    if kernel.threads * kernel.rows % 8:
        raise SpecError(path, f"a block of {kernel.threads} x {kernel.rows} rows is no multiple of 8", entry, "rows")
    if kernel.registers() > MAX_SUMS:
        raise SpecError(path, f"{kernel.rows} rows of {kernel.n_max} columns are {kernel.registers()} sums a thread, "
                        f"more than {MAX_SUMS} registers", entry, "rows")
    if kernel.shared_bytes() > STATIC_SHARED:
        raise SpecError(path, f"blocks of {kernel.threads} x {kernel.rows} rows of A and D need {kernel.shared_bytes()} "
                        f"bytes of shared memory, more than {STATIC_SHARED}", entry, "rows")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GemmThin, FAMILY, ENTRY, path, raw, TYPES, check)
