"""Depthwise convolutions of a band filter, 1 x S or R x 1, of channel counts no multiple of 8
(InceptionNeXt-T's 1x11 and 11x1 of 12 channels), by the staged kernels of narrow copies in fp16
pairs of depthwise_pairs_half.py (profiler/depthwise_pairs.h: DepthwisePairs<T, R, S, ...>, written
for any R x S); the bands of C a multiple of 8 are depthwise_band.py's.

An entry takes depthwise_pairs_half.py's keys, ``filter`` a list [R, S] as depthwise_band.py's.
Names read ``kernelgen_sm80_simt_dwconv_pairs_half2_f16nhwc_..._1x11_stride1_..._a<access>``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import check
from .depthwise_band import BandFilter, band
from .depthwise_pairs import ENTRY as PAIRS_ENTRY
from .depthwise_pairs_half import TYPES, DepthwisePairsHalf

KIND = "depthwise_pairs_band"

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", band), *(k for k in PAIRS_ENTRY.keys if k.name != "filter")))


@dataclass(frozen=True)
class DepthwisePairsBand(BandFilter, DepthwisePairsHalf):
    filter: tuple  # (R, S)


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwisePairsBand, FAMILY, ENTRY, path, raw, TYPES, check)
