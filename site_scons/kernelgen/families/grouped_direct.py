"""Grouped convolution kernels of any number of channels a group, on the CUDA cores (profiler/
direct_conv.h: GroupedDirect): 1 < groups dividing C and K, NHWC, KRS(C/groups) filters, fp16 or
bf16 in and out, fp32 accumulation, any padding, stride and dilation: the layers no tensor-core
grouped kernel serves (RegNet's 48, 56, 112, 120, 168 or 232 channels a group, a depthwise layer's
channel multiplier K = m*C).

No shared memory: a thread computes ``columns`` consecutive output columns of one output row for
``vector`` output channels of one group (K/groups a multiple of it), summing the group's input
channels of each tap; a grid-stride loop of CTAs of 256 threads walks the layer's items, output
channels innermost. A spec lists entries of ``filter`` (R = S: 1, 3, 5 or 7), ``vector`` (1, 2 or
4) and ``columns`` (1 to 8). Other filters and K/groups not a multiple of ``vector`` are
``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import DirectKernel, direct_filter, every_entry_builds, expand_fixed_type_entries, fixed_type_family

KIND = "grouped_direct"
TEMPLATE = DirectKernel.template
TYPES = DirectKernel.types

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", direct_filter((1, 3, 5, 7))),
    S.Key("vector", S.one_of((1, 2, 4))),
    S.Key("columns", S.integer(1, 8)),
))


@dataclass(frozen=True)
class GroupedDirect(DirectKernel):
    kernel_type = "GroupedDirect"
    name_stem = "gconv_direct"

    def item_refuses(self, conv) -> str | None:
        return f"K / groups must be a multiple of {self.vector}" if (conv.k // conv.groups) % self.vector else None


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GroupedDirect, FAMILY, ENTRY, path, raw, TYPES, every_entry_builds)
