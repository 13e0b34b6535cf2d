"""Grouped convolution kernels of any number of channels a group, on the CUDA cores (profiler/
grouped_direct.h): 1 < groups dividing C and K, NHWC, KRS(C/groups) filters, fp16 or bf16 in and
out, fp32 accumulation, any padding, stride and dilation: the layers no tensor-core grouped kernel
serves (RegNet's 48, 56, 112, 120, 168 or 232 channels a group, a depthwise layer's channel
multiplier K = m*C).

No shared memory: a thread computes ``columns`` consecutive output columns of one output row for
``vector`` output channels of one group (K/groups a multiple of it), summing the group's input
channels of each tap; a grid-stride loop of CTAs of 256 threads walks the layer's items, output
channels innermost. A spec lists entries of ``filter`` (R = S: 1, 3, 5 or 7), ``vector`` (1, 2 or
4) and ``columns`` (1 to 8). Other filters and K/groups not a multiple of ``vector`` are
``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from .common import GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "grouped_direct"
TEMPLATE = "grouped_direct.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((1, 3, 5, 7))),
    S.Key("vector", S.one_of((1, 2, 4))),
    S.Key("columns", S.integer(1, 8)),
))


@dataclass(frozen=True)
class GroupedDirect(GroupedKernel):
    family: str
    filter: int
    vector: int
    columns: int
    element: str = "f16"

    template = TEMPLATE
    includes = ("grouped_direct.h",)
    adapter = "kernelgen::GroupedDirectOperation"
    adapter_header = "grouped_direct.h"

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm80_simt_gconv_direct_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}"
                f"_v{self.vector}_q{self.columns}")

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if conv.groups < 2 or conv.c % conv.groups or conv.k % conv.groups:
            return "needs groups (at least 2) dividing C and K"
        if (conv.r, conv.s) != (self.filter, self.filter):
            return f"built for {self.filter}x{self.filter} filters"
        if (conv.k // conv.groups) % self.vector:
            return f"K / groups must be a multiple of {self.vector}"
        return None

    def values(self) -> dict:
        return {"element": self.cuda_element(), "filter": self.filter, "vector": self.vector,
                "columns": self.columns}


def check(path, entry, kernel) -> None:
    """Every entry the schema takes builds."""


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GroupedDirect, FAMILY, ENTRY, path, raw, TYPES, check)
