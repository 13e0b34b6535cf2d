"""Depthwise convolution kernels of channel counts no multiple of 8 that multiply and add in fp16
pairs (profiler/depthwise_pairs.h: DepthwisePairs with HALF): depthwise_pairs.py's kernels, fp16 in
and out, whose threads compute their two channels as one ``__half2`` by HFMA2 from the stage as
shared memory holds it (depthwise_half.py's sums): half the multiply-add instructions and no
conversions.

An entry takes depthwise_pairs.py's keys. The family's accumulator is f16, and so is its tolerance
(vocab.VERIFY_TOLERANCE); ``ACCUMULATE=f32`` keeps it out of a build. Names read
``kernelgen_sm80_simt_dwconv_pairs_half2_f16nhwc_f16nhwc_f16_f16nhwc_..._a<access>``.
"""

from dataclasses import dataclass

from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import check
from .depthwise_half import half_registers
from .depthwise_pairs import ENTRY, DepthwisePairs

KIND = "depthwise_pairs_half"
TYPES = {"element": "f16", "accumulator": "f16", "output": "f16"}

FAMILY = fixed_type_family(KIND)


@dataclass(frozen=True)
class DepthwisePairsHalf(DepthwisePairs):
    accumulator = "f16"  # its name says pairs_half2 (DepthwisePairs.name)

    def registers(self) -> int:
        return half_registers(self)


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwisePairsHalf, FAMILY, ENTRY, path, raw, TYPES, check)
