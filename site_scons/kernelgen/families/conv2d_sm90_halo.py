"""Halo conv2d fprop on SM90 for 3x3, stride-1, pad-1 layers with 64 input channels and any
multiple of 64 output channels (profiler/conv_sm90_resident.h, HaloTiling): each tile loads its
input rows once, with a one-pixel halo, and runs the nine filter taps as wgmma over shifted views
of them, where CUTLASS's im2col mainloop loads every pixel once per tap. Each persistent CTA keeps
a 64-output-channel slice of the filter in shared memory.

A kernel is built for one image width (wgmma's N is the tile's pixel count,
``rows * (width + 2)``, two columns per row computed and dropped), so a spec lists entries of
``width`` and ``rows`` (output rows per tile).
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import fixed_type_family
from .resident import (BLOCK, CHANNELS, LINE, ResidentKernel, expand_entries, round_up,
                       shared_bytes)

KIND = "conv2d_fprop_sm90_halo"
TEMPLATE = "conv2d_fprop_sm90_halo.mako"

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("width", S.integer(1, 254)),
    S.Key("rows", S.integer(1, 254)),
))


@dataclass(frozen=True)
class Conv2dFpropSm90Halo(ResidentKernel):
    family: str
    width: int
    rows: int
    element: str = "f16"

    template = TEMPLATE
    fits_key = "rows"  # the key a shared-memory overflow is reported against

    @property
    def summary(self) -> str:
        return f"width {self.width} x rows {self.rows}"

    @property
    def pixels(self) -> int:
        """wgmma's N: the tile's virtual pixels."""
        return self.rows * (self.width + 2)

    @cached_property
    def name(self) -> str:
        return (f"kernelgen_sm90_tensorop_fprop_{self.types}_3x3_{CHANNELS}x{self.pixels}"
                f"_w{self.width}_rows{self.rows}_halo")

    @property
    def shared_bytes(self) -> int:
        virtual = self.width + 2
        return shared_bytes(9 * BLOCK, 2, round_up((self.pixels + 2 * virtual + 2) * LINE, 1024),
                            self.rows * self.width + 8)

    def values(self) -> dict:
        return {"width": self.width, "rows": self.rows, **self.typed_values(self.pixels),
                "shared_bytes": self.shared_bytes}


def _check(path, entry, kernel) -> None:
    if kernel.pixels % 8 or kernel.pixels > 256:
        raise SpecError(path, f"rows * (width + 2) = {kernel.pixels} must be a multiple of 8 of at most 256 "
                        "(wgmma's N)", entry, "rows")


def expand(path, raw: dict) -> list:
    return expand_entries(Conv2dFpropSm90Halo, FAMILY, ENTRY, path, raw, _check)
