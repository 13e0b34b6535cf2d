"""Depthwise convolution kernels that walk rows and multiply and add in fp16 pairs
(profiler/strip_conv.h: DepthwiseStripHalf): depthwise_strip.py's kernels (groups = C = K, C even,
one stride, dilation 1, a CTA walking a strip's rows over a ring of input rows) whose threads
compute their two channels as one ``__half2`` by HFMA2: fp16 in, out and sums (so the family's
accumulator is f16, and so is its tolerance, vocab.VERIFY_TOLERANCE), half the instructions of the
fp32 pairs, and a 7x7 filter's taps in 49 registers (ConvNeXt's 7x7 layers, which fp32 pairs
cannot hold). An entry takes ``filter`` (3, 5 or 7), ``stride``, ``columns``, ``lanes`` and
``launch``; names read ``kernelgen_sm80_simt_dwconv_strip_half2_f16nhwc_f16nhwc_f16_f16nhwc_...``.
A CTA holds at most 1024 threads (3x3), 512 (5x5) or 384 (7x7) pairs x lanes.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from .common import every_entry_builds, expand_fixed_type_entries, fixed_type_family
from .depthwise_strip import DepthwiseStrip

KIND = "depthwise_strip_half"
TEMPLATE = "depthwise_strip_half.mako"
TYPES = {"element": "f16", "accumulator": "f16", "output": "f16"}  # what HFMA2 computes

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((S.Key("filter", S.one_of((3, 5, 7))), S.Key("stride", S.one_of((1, 2))),
                 S.Key("columns", S.integer(1, 8)), S.Key("lanes", S.integer(1, 8)),
                 S.Key("launch", S.choice({"stream": None, "pdl": None}), default="stream")))


@dataclass(frozen=True)
class DepthwiseStripHalf(DepthwiseStrip):
    """DepthwiseStrip's kernels of a pair of channels a thread (its name, checks and values), summed
    in fp16 pairs: their accumulator, name stem, C++ type and threads a CTA are this family's."""

    accumulator = "f16"
    kernel_type = "DepthwiseStripHalf"
    name_stem = "dwconv_strip_half2"
    template = TEMPLATE

    def most_threads(self) -> int:
        """strip_conv.h's HalfItem::kMostThreads: a thread's taps, sums and window in its registers."""
        return {3: 1024, 5: 512, 7: 384}[self.filter]


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseStripHalf, FAMILY, ENTRY, path, raw, TYPES, every_entry_builds)
