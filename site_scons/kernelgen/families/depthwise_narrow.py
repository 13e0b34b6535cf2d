"""Depthwise convolution kernels for the channel counts the 16-byte kernels (depthwise.py) cannot
take (profiler/direct_conv.h: DepthwiseNarrow): groups = C = K with C a multiple of ``vector`` (2:
two channels a thread in 4-byte accesses, ShuffleNetV2's 58 and 116; 1: any C), NHWC, K x R x S
filters, fp16 or bf16 in and out, fp32 accumulation, any padding, stride and dilation.

No shared memory: a thread computes ``columns`` consecutive output columns of one output row for
``vector`` channels, their taps in registers, its window read through the read-only cache; a
grid-stride loop of CTAs of 256 threads walks the layer's items, channels innermost. A spec lists
entries of ``filter`` (R = S: 3, 5 or 7), ``vector`` and ``columns`` (1 to 8). Other filters, C not
a multiple of ``vector`` and a channel multiplier (K = m*C: grouped_direct.py) are ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import DirectKernel, direct_filter, every_entry_builds, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise_narrow"
TEMPLATE = DirectKernel.template
TYPES = DirectKernel.types

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", direct_filter((3, 5, 7))),
    S.Key("vector", S.one_of((1, 2))),
    S.Key("columns", S.integer(1, 8)),
))


@dataclass(frozen=True)
class DepthwiseNarrow(DirectKernel):
    kernel_type = "DepthwiseNarrow"
    name_stem = "dwconv_narrow"

    def item_refuses(self, conv) -> str | None:
        if not conv.groups == conv.c == conv.k:
            return "a depthwise kernel: needs groups = C = K"
        return f"C must be a multiple of {self.vector}" if conv.c % self.vector else None


def expand(path, raw: dict) -> list:
    # every entry the schema takes builds (at most 7x7 x 2 channels x 8 columns: about 160 registers)
    return expand_fixed_type_entries(DepthwiseNarrow, FAMILY, ENTRY, path, raw, TYPES, every_entry_builds)
