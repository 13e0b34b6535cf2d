"""GEMMs of few columns over a short reduction (profiler/gemm_thin.h: GemmThin): D (m x n) = A
(m x k) B^T with k <= ``k_max`` and n <= ``n_max`` of any value (no alignment), any m, fp16 in and
out, fp32 sums on the CUDA cores: ConViT's positional projection (m = 32 * 196 * 196, n = 4,
k = 3), which only tensor-core tiles served, C padded to 8 and N to 32. A CTA copies a block of
``threads`` x ``rows`` rows of A into shared memory by 16-byte loads, its threads compute ``rows``
rows each, and it stores the block of D by 16-byte stores: A read and D written once.

A spec lists entries of ``k_max`` and ``n_max`` (1 to 16), ``rows`` and ``threads``; the blocks
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

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("k_max", S.integer(1, 16)),
    S.Key("n_max", S.integer(1, 16)),
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
        """The blocks of A and D (THREADS * ROWS rows of k_max and n_max halves) and B in fp32."""
        return self.threads * self.rows * (self.k_max + self.n_max) * 2 + self.n_max * self.k_max * 4

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


def check(path, entry, kernel) -> None:
    if kernel.threads * kernel.rows % 8:
        raise SpecError(path, f"a block of {kernel.threads} x {kernel.rows} rows is no multiple of 8", entry, "rows")
    if kernel.shared_bytes() > STATIC_SHARED:
        raise SpecError(path, f"blocks of {kernel.threads} x {kernel.rows} rows of A and D need {kernel.shared_bytes()} "
                        f"bytes of shared memory, more than {STATIC_SHARED}", entry, "rows")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GemmThin, FAMILY, ENTRY, path, raw, TYPES, check)
