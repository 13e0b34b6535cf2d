"""Depthwise convolution kernels for the channel counts the 16-byte kernels (depthwise.py) cannot
take (profiler/depthwise_narrow.h): groups = C = K with C a multiple of ``vector`` (2: two channels
a thread in 4-byte accesses, ShuffleNetV2's 58 and 116; 1: any C), NHWC, K x R x S filters, fp16 or
bf16 in and out, fp32 accumulation, any padding, stride and dilation.

No shared memory: a thread computes ``columns`` consecutive output columns of one output row for
``vector`` channels, reading its window and taps through the read-only cache; a grid-stride loop of
CTAs of 256 threads walks the layer's items, channels innermost. A spec lists entries of ``filter``
(R = S: 3, 5 or 7), ``vector`` and ``columns`` (1 to 8). Other filters, C not a multiple of
``vector`` and a channel multiplier (K = m*C) are ``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from .common import GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise_narrow"
TEMPLATE = "depthwise_narrow.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((3, 5, 7))),
    S.Key("vector", S.one_of((1, 2))),
    S.Key("columns", S.integer(1, 8)),
))


@dataclass(frozen=True)
class DepthwiseNarrow(GroupedKernel):
    family: str
    filter: int
    vector: int
    columns: int
    element: str = "f16"

    template = TEMPLATE
    includes = ("depthwise_narrow.h",)

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm80_simt_dwconv_narrow_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}"
                f"_v{self.vector}_q{self.columns}")

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if not conv.groups == conv.c == conv.k:
            return "a depthwise kernel: needs groups = C = K"
        if (conv.r, conv.s) != (self.filter, self.filter):
            return f"built for {self.filter}x{self.filter} filters"
        if conv.c % self.vector:
            return f"C must be a multiple of {self.vector}"
        return None

    def values(self) -> dict:
        return {"element": self.cuda_element(), "filter": self.filter, "vector": self.vector,
                "columns": self.columns}


def check(path, entry, kernel) -> None:
    """Every entry the schema takes builds (at most 7x7 x 2 channels x 8 columns: about 160 registers)."""


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseNarrow, FAMILY, ENTRY, path, raw, TYPES, check)
