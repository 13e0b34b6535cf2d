"""Depthwise convolution kernels of channel counts no multiple of 8 (profiler/depthwise_pairs.h:
DepthwisePairs): depthwise.py's cp.async kernels (a persistent grid, each CTA's tiles of ``rows``
output rows by 8 x ``channel_vectors`` channels copied with their taps into ``stages`` of shared
memory while it computes the oldest, ``thread_rows`` x ``columns`` outputs of two channels a thread),
whose copies are pieces of ``access`` bytes along C: 4 (C a multiple of 2: ReXNet's 162, 366, 570,
702; ShuffleNetV2's 58) or 8 (C a multiple of 4: ReXNet's 228, 300, 636; GhostNet's 12 and 20).

An entry takes depthwise.py's keys but ``loader`` and ``threads`` (always cp.async, 256), and
``access``. Names read ``kernelgen_sm80_simt_dwconv_pairs_<t>nhwc_..._a<access>``. A layer of C a
multiple of 8 is refused: depthwise.py's 16-byte kernels take it with a quarter or half the copies.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import ENTRY as DEPTHWISE_ENTRY, Depthwise, check

KIND = "depthwise_pairs"
TEMPLATE = "depthwise_pairs.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
ACCESSES = (4, 8)

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((*(k for k in DEPTHWISE_ENTRY.keys if k.name not in ("loader", "threads")),
                 S.Key("access", S.one_of(ACCESSES))))


@dataclass(frozen=True)
class DepthwisePairs(Depthwise):
    access: int = 4  # bytes a copy along C

    template = TEMPLATE
    includes = ("depthwise_pairs.h",)

    @cached_property
    def name(self) -> str:
        """``..._dwconv_pairs_<t>nhwc_<t>nhwc_<accumulator>_...``, ``pairs_half2`` for fp16 sums."""
        (t, sums), (r, s) = (self.element, "pairs_half2" if self.accumulator == "f16" else "pairs"), self.filter_shape
        return (f"kernelgen_sm80_simt_dwconv_{sums}_{t}nhwc_{t}nhwc_{self.accumulator}_{t}nhwc_{r}x{s}"
                f"_stride{self.stride}_tile{self.rows}x{self.tile_columns()}_t{self.thread_rows}x{self.columns}"
                f"_c{8 * self.channel_vectors}_s{self.stages}_a{self.access}")

    def channel_multiple(self) -> int:
        """What C must be a multiple of: a copy's elements."""
        return self.access // 2

    def refuses_channels(self, c: int):
        """Why a layer of ``c`` channels is not this kernel's, or None."""
        if c % 8 == 0:
            return "C a multiple of 8: the 16-byte kernels (depthwise.toml) take it"
        if c % self.channel_multiple():
            return f"C must be a multiple of {self.channel_multiple()} ({self.access}-byte copies along C)"
        return None

    def values(self) -> dict:
        return {**super().values(), "access": self.access, "half": self.accumulator == "f16"}


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwisePairs, FAMILY, ENTRY, path, raw, TYPES, check)
