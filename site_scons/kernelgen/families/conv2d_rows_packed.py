"""Rows-mode few-channels conv2d fprop for first layers whose output channels are no multiple of 8
(profiler/conv_rows_packed.h: FewChannelsRowsPackedFprop): R(2+1)D-18's stem, 3 -> 45 channels
with a 7x7 filter at stride 2. The rows-mode kernels of conv2d_few_channels.py (each tile's input
rows staged once in shared memory, the MMA's A fragments read from them, the filter slice
resident), with one filter slice holding every output channel (K <= ``tile[1]``) and each tile's
results stored packed as the output lies, in 16-byte pieces whatever K is. A spec lists the rows
kernels' ``tile``, ``warps``, ``reduction``, ``staged`` and ``blocks``, refused alike. C over 4, K
over the tile's N and K a multiple of 8 (the rows kernels store it) are ``unsupported``. Kernels
are named ``..._few_channels_rows_packed_...``.
"""

from dataclasses import dataclass
from functools import cached_property, partial

from .. import spec_schema as S
from .common import expand_fixed_type_entries, fixed_type_family
from .conv2d_few_channels import ENTRY as FEW_CHANNELS_ENTRY, TYPES, Conv2dFpropFewChannels, check, layer_fits

KIND = "conv2d_fprop_rows_packed"
MODE = "rows"

FAMILY = fixed_type_family(KIND)
# the few-channels kernels' keys less the tiling mode (rows)
ENTRY = S.Table(tuple(key for key in FEW_CHANNELS_ENTRY.keys if key.name != "mode"))


@dataclass(frozen=True)
class Conv2dFpropRowsPacked(Conv2dFpropFewChannels):
    includes = ("conv_rows_packed.h",)

    @cached_property
    def name(self) -> str:
        return (f"kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_few_channels_rows_packed_{self.tile[0]}x"
                f"{self.tile[1]}_k{self.reduction}_staged{self.staged}_warps{self.warps[0]}x{self.warps[1]}"
                f"_blocks{self.blocks}")

    def values(self) -> dict:
        return {**super().values(), "type": "FewChannelsRowsPackedFprop"}

    def refuses(self, conv) -> str | None:
        """Why the kernel cannot compute ``conv`` (FewChannelsRowsPackedFprop::unsupported), or None."""
        if conv.c > 4:
            return "needs 1 to 4 input channels"
        if conv.k > self.tile[1]:
            return f"needs at most {self.tile[1]} output channels (one filter slice)"
        if conv.k % 8 == 0:
            return "K is a multiple of 8: the rows kernels store it in 16-byte pieces"
        return layer_fits(self, conv)


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(partial(Conv2dFpropRowsPacked, mode=MODE), FAMILY, ENTRY, path, raw, TYPES, check)
