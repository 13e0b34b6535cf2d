"""Depthwise convolution kernels for even channel counts, above all those no multiple of 8, at one
stride (profiler/depthwise_flat.h: DepthwiseFlat): groups = C = K with C even (ReXNet's 162, 228,
300, ...; ShuffleNetV2's 58 and 116), NHWC, K x R x S filters, fp16 or bf16 in and out, fp32
accumulation, stride ``stride`` (1 or 2), any padding, dilation 1.

A CTA computes a band of ``rows`` output rows of one image: the input rows they read are one
contiguous run of memory whatever C is, copied to shared memory in 16-byte pieces with the filter
(tap-major) beside it; its threads then compute pairs of channels of the band's columns, each
reading its input pairs and taps from shared memory once. A spec lists entries of ``filter`` (R =
S: 3, 5 or 7), ``stride`` and ``rows`` (1 to 8). Other strides and dilations, odd C, a channel
multiplier (K = m*C), a band whose input is more than a CTA's shared memory and layers of 2^31
elements or more are ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import (SHARED_MEMORY, DirectKernel, every_entry_builds, expand_fixed_type_entries, fixed_type_family,
                     one_stride_depthwise_refuses)

KIND = "depthwise_flat"
TEMPLATE = "depthwise_flat.mako"
TYPES = DirectKernel.types

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", S.one_of((3, 5, 7))), S.Key("stride", S.one_of((1, 2))), S.Key("rows", S.integer(1, 8))))
MOST_ELEMENTS = 1 << 31  # depthwise_flat.h's kMostElements: 32-bit indices


@dataclass(frozen=True)
class DepthwiseFlat(DirectKernel):
    vector: int = 2  # two channels a thread, one 4-byte access
    columns: int = 1  # one output column a thread (of ``rows`` rows)
    element: str = "f16"
    rows: int = 1  # output rows a CTA's band
    stride: int = 1
    kernel_type = "DepthwiseFlat"
    name_stem = "dwconv_flat"
    template = TEMPLATE
    includes = ("depthwise_flat.h",)
    adapter_header = "depthwise_flat.h"

    @property
    def name(self) -> str:
        t = self.element
        return f"kernelgen_sm80_simt_{self.name_stem}_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}_stride{self.stride}_p{self.rows}"

    def shared_bytes(self, conv) -> int:
        """depthwise_flat.h's FlatItem::shared_bytes: the band's input rows in whole 16-byte pieces, then the taps."""
        staged = (self.input_rows() * conv.w * conv.c + 14) // 8 * 8
        return (staged + self.filter ** 2 * conv.c) * 2

    def input_rows(self) -> int:
        """The input rows a band of ``rows`` output rows reads."""
        return (self.rows - 1) * self.stride + self.filter

    def item_refuses(self, conv) -> str | None:
        why = one_stride_depthwise_refuses(conv, self.stride, 2, MOST_ELEMENTS)
        if why is not None:
            return why
        if self.shared_bytes(conv) > SHARED_MEMORY:
            return f"a band of {self.input_rows()} input rows is more than a CTA's shared memory"
        return None

    def values(self) -> dict:
        return {"type": self.kernel_type, "element": self.cuda_element(), "filter": self.filter, "rows": self.rows,
                "stride": self.stride}


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseFlat, FAMILY, ENTRY, path, raw, TYPES, every_entry_builds)
