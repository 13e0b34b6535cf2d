"""Depthwise convolution kernels for even channel counts, above all those no multiple of 8, at one
stride, that walk rows (profiler/strip_conv.h: DepthwiseStrip): groups = C = K with C even
(ReXNet's 162, 228, 300, ...; ShuffleNetV2's 58 and 116), NHWC, K x R x S filters, fp16 or bf16 in
and out, fp32 accumulation, stride ``stride`` (1 or 2), any padding, dilation 1.

A CTA walks the output rows of a segment of one image for a strip of ``columns`` x ``lanes``
output columns: each input row's run of the strip (contiguous whatever C is) is copied once to a
ring of shared-memory slots in 16-byte pieces, the next rows' copies in flight while a row is
computed; a thread computes ``vector`` channels (2, or 4 where C is a multiple of 4) of
``columns`` output columns, its taps in registers. A spec lists entries of ``filter`` (R = S: 3 or
5), ``stride``, ``columns`` (1 to 8), ``lanes`` (1 to 8), ``vector`` (default 2; names end ``_v4``
for 4) and ``launch`` (``"stream"``, or ``"pdl"``: a programmatic dependent launch,
profiler/dependent_kernel.h, sm_90). Other strides and dilations, C no multiple of the vector, a
channel multiplier (K = m*C), more vectors x lanes than a CTA's threads (1024 for 3x3 pairs, 384
for 5x5 quads, else 512), a ring larger than a CTA's shared memory and layers of 2^31 elements or
more are ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import (SHARED_MEMORY, DirectKernel, every_entry_builds, expand_fixed_type_entries, fixed_type_family,
                     one_stride_depthwise_refuses)

KIND = "depthwise_strip"
TEMPLATE = "depthwise_strip.mako"
TYPES = DirectKernel.types

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", S.one_of((3, 5))), S.Key("stride", S.one_of((1, 2))),
                 S.Key("columns", S.integer(1, 8)), S.Key("lanes", S.integer(1, 8)), S.Key("vector", S.one_of((2, 4)), 2),
                 S.Key("launch", S.choice({"stream": None, "pdl": None}), default="stream")))
MOST_ELEMENTS = 1 << 31  # strip_conv.h's kMostElements: 32-bit indices
AHEAD = 2  # strip_conv.h's kAhead: output rows whose input rows are copied ahead


@dataclass(frozen=True)
class Strip(DirectKernel):
    """What the kernels of strip_conv.h share (depthwise_strip.py's, grouped_strip.py's): a strip of
    ``columns`` x ``lanes`` output columns at one ``stride``, a ring of input rows, a launch."""

    columns: int = 1  # output columns a thread
    element: str = "f16"
    stride: int = 1
    lanes: int = 1  # threads across a strip of columns * lanes output columns
    launch: str = "stream"
    template = TEMPLATE
    includes = ("strip_conv.h",)
    adapter_header = "strip_conv.h"

    @property
    def arch(self) -> int:
        """80 (cp.async); 90 for a programmatic dependent launch (griddepcontrol)."""
        return 90 if self.launch == "pdl" else 80

    def name_of(self, shape: str) -> str:
        """The kernel's name, its code's ``shape`` (the filter, and what else) after the types."""
        t = self.element
        return (f"kernelgen_sm{self.arch}_simt_{self.name_stem}_{t}nhwc_{t}nhwc_{self.accumulator}_{t}nhwc_{shape}"
                f"_stride{self.stride}_q{self.columns}x{self.lanes}")

    def slots(self) -> int:
        """The ring's slots: the input rows of an output row and of the AHEAD rows after it."""
        return self.filter + self.stride * AHEAD

    def shared_bytes(self, conv) -> int:
        """strip_conv.h's Ring::shared_bytes: a slot a row, a strip's input run in whole 16-byte
        pieces from the boundary at or before its start."""
        run = ((self.columns * self.lanes - 1) * self.stride + self.filter) * conv.c
        return self.slots() * ((run + 14) // 8 * 8) * 2

    def fit_refuses(self, conv, units: int, what: str) -> str | None:
        """The item's checks after its layer's (Ring::fit_refused: its threads', then the ring's):
        ``units`` threads' work of ``what`` for each lane."""
        if units * self.lanes > self.most_threads():
            return f"{units} {what} x {self.lanes} lanes is more than {self.most_threads()} threads a CTA"
        if self.shared_bytes(conv) > SHARED_MEMORY:
            return f"{self.slots()} input rows of a strip are more than a CTA's shared memory"
        return None

    def values(self) -> dict:
        return {"type": self.kernel_type, "element": self.cuda_element(), "filter": self.filter, "stride": self.stride,
                "columns": self.columns, "lanes": self.lanes, "pdl": self.launch == "pdl"}


@dataclass(frozen=True)
class DepthwiseStrip(Strip):
    vector: int = 2  # channels a thread: two (a 4-byte access) or four (8 bytes)
    kernel_type = "DepthwiseStrip"
    name_stem = "dwconv_strip"

    @property
    def name(self) -> str:
        return (self.name_of(f"{self.filter}x{self.filter}") + ("_v4" if self.vector == 4 else "")
                + ("_pdl" if self.launch == "pdl" else ""))

    def most_threads(self) -> int:
        """strip_conv.h's DepthwiseItem::kMostThreads: a thread's taps, sums and window in its registers."""
        return 1024 if (self.filter, self.vector) == (3, 2) else 384 if (self.filter, self.vector) == (5, 4) else 512

    def item_refuses(self, conv) -> str | None:
        why = one_stride_depthwise_refuses(conv, self.stride, self.vector, MOST_ELEMENTS)
        if why is not None:
            return why
        return self.fit_refuses(conv, conv.c // self.vector, "channel pairs" if self.vector == 2 else "channel quads")

    def values(self) -> dict:
        return {**super().values(), "vector": self.vector}


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseStrip, FAMILY, ENTRY, path, raw, TYPES, every_entry_builds)
