"""Pointwise conv2d fprop on SM90 for 1x1, stride-1, unpadded layers with 64 or 128 input
channels and any multiple of 64 output channels (profiler/conv_sm90_resident.h,
PointwiseTiling): each persistent CTA keeps a 64-output-channel slice of the filter in shared
memory and streams 256-pixel tiles through ``stages`` TMA buffers, for layers that move many
bytes per multiply-add.

A spec lists entries of ``channels`` (the input channels the kernel is built for) and
``stages`` (even: each of the two consumer warpgroups owns every other stage).
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import fixed_type_family
from .resident import BLOCK, CHANNELS, LINE, ResidentKernel, expand_entries, shared_bytes

KIND = "conv2d_fprop_sm90_pointwise"
TEMPLATE = "conv2d_fprop_sm90_pointwise.mako"
PIXELS = 256  # per tile: wgmma's N

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("channels", S.integer(64, 128)),
    S.Key("stages", S.integer(2, 8)),
))


@dataclass(frozen=True)
class Conv2dFpropSm90Pointwise(ResidentKernel):
    family: str
    channels: int
    stages: int
    element: str = "f16"

    template = TEMPLATE
    fits_key = "stages"  # the key a shared-memory overflow is reported against

    @property
    def summary(self) -> str:
        return f"{self.channels} channels x {self.stages} stages"

    @cached_property
    def name(self) -> str:
        return (f"kernelgen_sm90_tensorop_fprop_{self.types}_1x1_{CHANNELS}x{PIXELS}"
                f"_c{self.channels}_stages{self.stages}_pointwise")

    @property
    def shared_bytes(self) -> int:
        blocks = self.channels // CHANNELS
        return shared_bytes(blocks * BLOCK, self.stages, blocks * PIXELS * LINE, PIXELS)

    def values(self) -> dict:
        return {"channel_blocks": self.channels // CHANNELS, "stages": self.stages, **self.typed_values(PIXELS),
                "shared_bytes": self.shared_bytes}


def _check(path, entry, kernel) -> None:
    if kernel.channels % CHANNELS:
        raise SpecError(path, f"channels {kernel.channels} is not a multiple of {CHANNELS}", entry, "channels")
    if kernel.stages % 2:
        raise SpecError(path, f"{kernel.stages} stages: needs an even number (each consumer warpgroup owns "
                        "every other stage)", entry, "stages")


def expand(path, raw: dict) -> list:
    return expand_entries(Conv2dFpropSm90Pointwise, FAMILY, ENTRY, path, raw, _check)
