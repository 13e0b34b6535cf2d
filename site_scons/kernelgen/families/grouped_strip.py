"""Grouped convolution kernels of 4 or 8 channels a group that walk rows (profiler/strip_conv.h:
GroupedStrip): 1 < groups, C / groups = ``channels`` and K = C (RegNet's groups of 8: RegNetY-400MF's
55 groups of 440 channels on 14x14 and 7x7 images, where the tensor-core kernels' tiles of 16
channels a group compute half empty), NHWC, K x R x S x (C / groups) filters, fp16 or bf16 in and
out, fp32 accumulation, stride ``stride`` (1 or 2), any padding, dilation 1.

A CTA walks the output rows of a segment of one image for a strip of ``columns`` x ``lanes`` output
columns, each input row's run of the strip copied once to a ring of shared-memory slots (as
depthwise_strip.py's kernels); a thread computes one output channel of ``columns`` output columns,
its group's R x R x ``channels`` taps in registers, reading the group's channels of each window
column as one 8- or 16-byte word. A spec lists entries of ``filter`` (3, or 5 with 4 channels),
``channels`` (4 or 8), ``stride``, ``columns`` (1 to 8), ``lanes`` (1 to 8) and ``launch``
(``"stream"`` or ``"pdl"``). Other group widths, K other than C, other strides and dilations,
more output channels x lanes than 512 threads, a ring larger than a CTA's shared memory and layers
of 2^31 elements or more are ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from ..errors import SpecError
from .common import expand_fixed_type_entries, fixed_type_family, one_stride_refuses
from .depthwise_strip import MOST_ELEMENTS, Strip

KIND = "grouped_strip"
TEMPLATE = "grouped_strip.mako"
TYPES = Strip.types

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", S.one_of((3, 5))), S.Key("channels", S.one_of((4, 8))), S.Key("stride", S.one_of((1, 2))),
                 S.Key("columns", S.integer(1, 8)), S.Key("lanes", S.integer(1, 8)),
                 S.Key("launch", S.choice({"stream": None, "pdl": None}), default="stream")))


@dataclass(frozen=True)
class GroupedStrip(Strip):
    vector: int = 1  # one output channel a thread
    channels: int = 8  # channels a group
    kernel_type = "GroupedStrip"
    name_stem = "gconv_strip"
    template = TEMPLATE

    @property
    def name(self) -> str:
        return self.name_of(f"g{self.channels}_{self.filter}x{self.filter}") + ("_pdl" if self.launch == "pdl" else "")

    def most_threads(self) -> int:
        """strip_conv.h's GroupedItem::kMostThreads: 128 registers a thread for its taps."""
        return 512

    def item_refuses(self, conv) -> str | None:
        if conv.c // conv.groups != self.channels:
            return f"built for {self.channels} channels a group"
        if conv.k != conv.c:
            return "needs K = C (as many output channels a group as input channels)"
        why = one_stride_refuses(conv, self.stride, MOST_ELEMENTS)
        if why is not None:
            return why
        return self.fit_refuses(conv, conv.k, "output channels")

    def values(self) -> dict:
        return {**super().values(), "channels": self.channels}


def check(path, entry, kernel) -> None:
    """Refuse what strip_conv.h's GroupedItem cannot build: 5x5 taps of 8 channels a thread."""
    if kernel.filter == 5 and kernel.channels == 8:
        raise SpecError(path, "5x5 taps of 8 channels (200) do not fit a thread's registers", entry, "channels")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GroupedStrip, FAMILY, ENTRY, path, raw, TYPES, check)
