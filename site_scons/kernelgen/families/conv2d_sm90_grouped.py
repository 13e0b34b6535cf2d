"""Grouped convolutions (1 < groups) by CUTLASS 3.x ``ConvUniversal`` SM90 kernels, one dense
convolution a group (profiler/grouped_adapter_3x.h): group g's activations, filters and output are
views into the layer's (channel offsets, the layer's pixel strides), its launches spread over
several streams. For the wide groups of RegNet and ResNeXt's last stages (24 to 64 channels a
group and more), where a dense tile of 64 channels wastes little.

The spec is conv2d_sm90's (types, schedule, epilogue, stages, tiles x clusters); a kernel serves a
grouped layer whose C/groups and K/groups are multiples of 8 (16-byte tensor copies of a group's
channels from a 16-byte aligned start).
"""

from dataclasses import dataclass
from functools import cached_property

from .conv2d_sm90 import Conv2dFpropSm90, expand as expand_sm90, family_table

KIND = "conv2d_fprop_sm90_grouped"
FAMILY = family_table(KIND)
STREAMS = 8  # GroupedConv2dOperation3x::kStreams: groups launched at once, at most


@dataclass(frozen=True)
class Conv2dFpropSm90Grouped(Conv2dFpropSm90):
    kernel_op = "conv2d_fprop_grouped"
    adapter = "kernelgen::GroupedConv2dOperation3x"
    adapter_header = "grouped_adapter_3x.h"

    @property
    def fusible(self) -> bool:
        return False  # a grouped layer's kernels compute no epilogue

    @cached_property
    def name(self) -> str:
        return super().name + "_groupwise"

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv`` (a grouped layer), or None."""
        if conv.groups < 2:
            return "a grouped-convolution kernel: needs groups > 1"
        if (conv.c // conv.groups) % 8 or (conv.k // conv.groups) % 8:
            return "C/groups and K/groups must be multiples of 8"
        return None


def expand(path, raw: dict) -> list:
    return expand_sm90(path, raw, FAMILY, Conv2dFpropSm90Grouped)
