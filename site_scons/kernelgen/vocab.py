"""The closed vocabulary of kernel specs and their C++ spellings.

Every value a spec may name is a key of one of these maps or of an architecture's
schedules (``targets.py``); every string that reaches a template comes from a map
value or is an integer. A spec therefore cannot paste arbitrary text into the
generated C++.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class DataType:
    key: str  # spelling in specs, workload files and kernel names ("f16")
    cpp: str  # C++ type
    bits: int
    short: str  # CUTLASS's one-letter accumulator prefix in 2.x names
    cuda: str = ""  # the CUDA toolkit's type of the same bits (what best_kernels.h's launcher takes)
    cuda_header: str = ""  # the toolkit header that declares it


DATA_TYPES = {
    t.key: t
    for t in (
        DataType("f16", "cutlass::half_t", 16, "h", "__half", "cuda_fp16.h"),
        DataType("bf16", "cutlass::bfloat16_t", 16, "bf16", "__nv_bfloat16", "cuda_bf16.h"),
        DataType("f32", "float", 32, "s"),
    )
}

# CUTLASS 2.x implicit-GEMM iterator algorithms.
ITERATORS = {
    "analytic": "cutlass::conv::IteratorAlgorithm::kAnalytic",
    "optimized": "cutlass::conv::IteratorAlgorithm::kOptimized",
    # channels (C) that are few and need not be multiples of 8, e.g. an RGB input layer
    "few_channels": "cutlass::conv::IteratorAlgorithm::kFewChannels",
}

# CUTLASS 2.x threadblock swizzles. CUTLASS's generator uses identity4 for conv2d.
SWIZZLES = {
    "identity1": "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1>",
    "identity2": "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<2>",
    "identity4": "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>",
    "identity8": "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>",
}
DEFAULT_SWIZZLE = "identity4"


# Verification tolerance: the largest relative L2 error, and the largest element error relative
# to the largest reference element, that a kernel's output may show. With fp32 accumulation the
# output's rounding dominates: half an ulp is 2^-11 for fp16, 2^-8 for bf16 (8 bits of precision).
# Accumulating in 16 bits loses more.
VERIFY_TOLERANCE = {"f32": 1e-3, "f16": 2e-2, "bf16": 2e-2}  # by accumulator, for fp16 output
OUTPUT_TOLERANCE = {"bf16": 8e-3}  # the least tolerance for an output type of fewer mantissa bits


def verify_tolerance(kernel) -> float:
    """The tolerance of ``kernel`` (its ``accumulator`` and ``output``)."""
    return max(VERIFY_TOLERANCE[kernel.accumulator], OUTPUT_TOLERANCE.get(kernel.output, 0.0))

