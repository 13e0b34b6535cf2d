"""Depthwise convolutions of a channel multiplier (profiler/depthwise_multiplier.h:
DepthwiseMultiplier): groups = C, K = ``multiplier`` * C (FastViT's 7x7 and 3x3 stride-2 patch
embeddings and its 3x3 expansion, K = 2C), fp16 in and out, fp16 sums. The tensor-copy kernels of
depthwise_half.py (a CTA's run of tiles of one block of 8 x ``channel_vectors`` output channels,
each tile's window brought by one bulk tensor copy, the block's taps in registers, HFMA2), whose
window holds the block's 8 x ``channel_vectors`` / ``multiplier`` input channels: a thread's two
output channels read one input channel.

An entry takes depthwise_half.py's keys but ``sums`` (always fp16), a ``filter`` of 1, 3, 5, 7, 9
or 11, and ``multiplier`` (2 or 4, default 2; ``channel_vectors`` a multiple of it, so that a
copy's row of input channels is 16-byte multiples). Names read
``kernelgen_sm90_simt_dwconv_m<multiplier>_half2_f16nhwc_..._tma``. A layer of another multiplier,
filter, stride or dilation, or of C no multiple of 8, is ``unsupported``.
"""

from dataclasses import dataclass

from .. import spec_schema as S
from ..errors import SpecError
from .common import expand_fixed_type_entries, fixed_type_family
from .depthwise import check as depthwise_check
from .depthwise_half import ENTRY as HALF_ENTRY, DepthwiseHalf

KIND = "depthwise_multiplier"
TEMPLATE = "depthwise_multiplier.mako"
TYPES = {"element": "f16", "accumulator": "f16", "output": "f16"}
MULTIPLIERS = (2, 4)

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((*(k for k in HALF_ENTRY.keys if k.name not in ("sums", "taps")),
                 S.Key("multiplier", S.one_of(MULTIPLIERS), default=2)))


@dataclass(frozen=True)
class DepthwiseMultiplier(DepthwiseHalf):
    multiplier: int = 2

    template = TEMPLATE
    includes = ("depthwise_multiplier.h",)

    @property
    def name_stem(self) -> str:
        return f"dwconv_m{self.multiplier}_half2"

    def input_channels(self) -> int:
        """The input channels of a block of output channels (MultiplierTile::kInputChannels)."""
        return 8 * self.channel_vectors // self.multiplier

    def shared_bytes(self) -> int:
        """MultiplierTile::kBytes: the stages (each the window of the block's input channels,
        128-byte aligned) and the block's taps, once."""
        (r, s), (rows_in, columns_in) = self.filter_shape, self.window()
        return (self.stages * -(-rows_in * columns_in * self.input_channels() * 2 // 128) * 128
                + r * s * self.channel_vectors * 16)

    def refuses(self, conv) -> str | None:
        """Why DepthwiseMultiplier::can_implement refuses ``conv``, or None."""
        m = self.multiplier
        if not (conv.groups == conv.c and conv.k == m * conv.c):
            return f"a depthwise kernel of channel multiplier {m}: needs groups = C, K = {m} * C"
        return self.refuses_window(conv)

    def values(self) -> dict:
        return {**super().values(), "multiplier": self.multiplier}


def check(path, entry, kernel) -> None:
    if kernel.channel_vectors % kernel.multiplier:
        raise SpecError(path, f"channel_vectors {kernel.channel_vectors} is no multiple of the multiplier "
                        f"{kernel.multiplier}: a copy's row of {kernel.input_channels()} input channels is no "
                        "16-byte multiple", entry, "channel_vectors")
    depthwise_check(path, entry, kernel)


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseMultiplier, FAMILY, ENTRY, path, raw, TYPES, check)
