"""Depthwise convolutions of a band filter, 1 x S or R x 1 (GhostNetV2's 1x5 and 5x1 attention
branches, InceptionNeXt's 1x11 and 11x1), by the fp16-pair tensor-copy kernels of depthwise_half.py
(profiler/depthwise_half.h: DepthwiseHalf<R, S, ...>, written for any R x S): a CTA's run of tiles of
one channel block, each tile's window of (rows - 1) * stride + R input rows by (columns - 1) *
stride + S columns brought by one bulk tensor copy, the R * S taps in registers, HFMA2 sums.

An entry takes depthwise_half.py's keys, ``filter`` a list [R, S] of which one is 1 and the other
3, 5, 7, 9 or 11. Names read ``kernelgen_sm90_simt_dwconv_half2_f16nhwc_..._1x5_stride1_..._tma``.
Before these only the kernels of any filter served such a layer (direct_conv_any.h). What
depthwise_half.py's kernels cannot serve (C no multiple of 8, dilation, a channel multiplier),
these cannot.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import FILTERS, check
from .depthwise_half import ENTRY as HALF_ENTRY, TYPES, DepthwiseHalf

KIND = "depthwise_band"


def band(v) -> tuple:
    """A ``filter`` of [1, S] or [R, 1], the other side one of FILTERS."""
    r, s = S.int_tuple(2)(v)
    if 1 not in (r, s) or max(r, s) not in FILTERS:
        raise ValueError(f"{S.shown(v)} is no band: [1, S] or [R, 1], the other one of {', '.join(map(str, FILTERS))}")
    return r, s


FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", band), *(k for k in HALF_ENTRY.keys if k.name != "filter")))


class BandFilter:
    """What a kernel of a band filter changes of its square family's (a mixin before it): ``filter``
    is (R, S), and its values name them (``filter_r``, ``filter_s``: the templates render R x S)."""

    @property
    def filter_shape(self) -> tuple:
        return self.filter

    def values(self) -> dict:
        r, s = self.filter
        return {**super().values(), "filter_r": r, "filter_s": s}


@dataclass(frozen=True)
class DepthwiseBand(BandFilter, DepthwiseHalf):
    filter: tuple  # (R, S)


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseBand, FAMILY, ENTRY, path, raw, TYPES, check)
