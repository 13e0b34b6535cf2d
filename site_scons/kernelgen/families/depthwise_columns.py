"""Depthwise convolution kernels for channels no multiple of 8 (profiler/depthwise_columns.h:
DepthwiseColumns): depthwise_half.py's tensor-copy kernels (a CTA's run of tiles of one channel
block, the block's taps in registers, fp16 sums by HFMA2) whose window arrives as one bulk tensor
copy an input column, from a tensor map of the image rows ({W * C, H, N}; each copy 8 channels
wider than the block, starting on 16 bytes), where theirs is one copy a tile from a map of the
pixels, which C no multiple of 8 cannot make (a map's strides are 16-byte multiples). ReXNet's
depthwise layers (162 to 1044 channels), ShuffleNetV2's (58, 116) and GhostNet's (12 to 100) had
only the kernels of 4- and 8-byte copies by each thread (depthwise_pairs.py) and narrow ones.

An entry takes depthwise_half.py's keys but ``sums`` (always fp16) and ``taps`` (always staged).
A layer serves where groups = C = K, the filter, stride and dilation are the kernel's, C is even but
no multiple of 8 (the kernels of one copy a tile serve those) and W * C is a multiple of 8 (an image
row 16-byte aligned); the others are ``unsupported``, saying which. Names read
``kernelgen_sm90_simt_dwconv_cols_half2_f16nhwc_..._tma``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import check
from .depthwise_half import ENTRY as HALF_ENTRY, DepthwiseHalf

KIND = "depthwise_columns"
TEMPLATE = "depthwise_columns.mako"
TYPES = {"element": "f16", "accumulator": "f16", "output": "f16"}

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table(tuple(k for k in HALF_ENTRY.keys if k.name not in ("sums", "taps")))


@dataclass(frozen=True)
class DepthwiseColumns(DepthwiseHalf):
    template = TEMPLATE
    includes = ("depthwise_columns.h",)
    name_stem = "dwconv_cols_half2"

    def refuses_channels(self, c: int):
        if c % 2:
            return "C must be even (a thread's two channels)"
        if c % 8 == 0:
            return "C is a multiple of 8: served by the kernels of one tensor copy a tile"
        return None

    def refuses_window(self, conv):
        why = super().refuses_window(conv)
        if why is None and conv.w * conv.c % 8:
            return "W * C must be a multiple of 8 (an image row 16-byte aligned)"
        return why

    def shared_bytes(self) -> int:
        """ColumnsTile::kBytes: the stages, each the window's columns, a column ``rows_in`` rows of the
        block's channels and 8 more (a copy starts on 16 bytes) 128-byte aligned, and the block's
        taps, once."""
        (r, s), (rows_in, columns_in) = self.filter_shape, self.window()
        column = -(-rows_in * (self.channel_vectors + 1) * 16 // 128) * 128
        return self.stages * columns_in * column + r * s * self.channel_vectors * 16


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseColumns, FAMILY, ENTRY, path, raw, TYPES, check)
