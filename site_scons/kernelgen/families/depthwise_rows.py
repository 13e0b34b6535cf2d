"""Depthwise convolution kernels for the channel counts the 16-byte kernels (depthwise.py) cannot
take, at one stride (profiler/depthwise_rows.h: DepthwiseRows): groups = C = K with C a multiple of
``vector`` (2: two channels a thread in 4-byte accesses, ReXNet's 162, 228 or 300; 1: any C), NHWC,
K x R x S filters, fp16 or bf16 in and out, fp32 accumulation, any padding, stride ``stride`` (1 or
2), dilation 1.

No shared memory, as depthwise_narrow.py's kernels (which serve any stride and dilation): a thread
computes ``columns`` consecutive output columns of one output row for ``vector`` channels; here it
reads each input column of a filter row's window once into registers, keeps its channels' taps
for every item it computes (the walk's step is a whole number of channel rows) and indexes in 32
bits. A thread may compute ``rows`` output rows (1 to 8, default 1), each input row of their
window read once for all of them. A spec lists entries of ``filter`` (R = S: 3, 5 or 7),
``vector``, ``columns`` (1 to 8), ``stride`` and ``rows``. Other filters, strides and dilations,
C not a multiple of ``vector``, a channel multiplier (K = m*C) and layers of 2^30 items or more
are ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise_narrow import ENTRY as NARROW_ENTRY, DepthwiseNarrow

KIND = "depthwise_rows"
TEMPLATE = "depthwise_rows.mako"
TYPES = DepthwiseNarrow.types

FAMILY = fixed_type_family(KIND)
# the narrow kernels' keys, the stride and the output rows a thread computes
ENTRY = S.Table((*NARROW_ENTRY.keys, S.Key("stride", S.one_of((1, 2))), S.Key("rows", S.integer(1, 8), 1)))
MOST_ITEMS = 1 << 30  # depthwise_rows.h's kMostItems: 32-bit indices


@dataclass(frozen=True)
class DepthwiseRows(DepthwiseNarrow):  # the narrow kernels' layers, at one stride
    stride: int = 1
    rows: int = 1  # output rows a thread computes, each input row read once for all of them
    kernel_type = "DepthwiseRows"
    name_stem = "dwconv_rows"
    template = TEMPLATE
    includes = ("depthwise_rows.h",)
    adapter_header = "depthwise_rows.h"

    def name_shape(self) -> str:
        return f"{super().name_shape()}_stride{self.stride}" + (f"_p{self.rows}" if self.rows > 1 else "")

    def item_refuses(self, conv) -> str | None:
        narrow = super().item_refuses(conv)
        if narrow is not None:
            return narrow
        if (conv.stride_h, conv.stride_w) != (self.stride, self.stride):
            return f"built for stride {self.stride}"
        if (conv.dilation_h, conv.dilation_w) != (1, 1):
            return "built for dilation 1"
        items = conv.n * -(-conv.p // self.rows) * -(-conv.q // self.columns) * (conv.k // self.vector)
        return "2^30 work items or more (32-bit indices)" if items >= MOST_ITEMS else None

    def values(self) -> dict:
        return {**super().values(), "stride": self.stride, "rows": self.rows}


def check(path, entry, kernel) -> None:
    """Every entry the schema takes builds (7x7, 2 channels, 4 columns: 164 registers, no spills)."""


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseRows, FAMILY, ENTRY, path, raw, TYPES, check)
