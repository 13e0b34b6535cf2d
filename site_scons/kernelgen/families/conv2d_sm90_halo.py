"""Halo conv2d fprop on SM90 for 3x3, stride-1, pad-1 layers with 64 input and 64 output
channels (profiler/conv_sm90_resident.h, HaloTiling): each tile loads its input rows once, with
a one-pixel halo, and runs the nine filter taps as wgmma over shifted views of them, where
CUTLASS's im2col mainloop loads every pixel once per tap. The whole filter stays in shared memory.

A kernel is built for one image width (wgmma's N is the tile's pixel count,
``rows * (width + 2)``, two columns per row computed and dropped), so a spec lists entries of
``width`` and ``rows`` (output rows per tile).
"""

from dataclasses import dataclass

from .. import spec_schema as S
from ..errors import SpecError
from .common import family_keys
from .conv2d_sm90 import SMEM_LIMIT_BYTES

KIND = "conv2d_fprop_sm90_halo"
TEMPLATE = "conv2d_fprop_sm90_halo.mako"
INCLUDES = ("conv_sm90_resident.h",)
CHANNELS = 64  # channels per 128-byte line (a pixel, a filter row), output channels per CTA
LINE = 128
BLOCK = CHANNELS * LINE  # a 64 x 64 filter block
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what the kernels are written for

FAMILY = S.Table((
    *family_keys(KIND),
    S.Key("kernels", lambda v: v),
))
ENTRY = S.Table((
    S.Key("width", S.integer(1, 254)),
    S.Key("rows", S.integer(1, 254)),
))


def _round(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def shared_bytes(filter_bytes: int, stages: int, stage_bytes: int, staging_lines: int) -> int:
    """Shared memory a resident kernel asks for (profiler/conv_sm90_resident.h, resident::Layout):
    the filter, the pixel stages, two staging buffers, the barriers, alignment slack."""
    return (_round(filter_bytes, 1024) + stages * stage_bytes + 2 * _round(staging_lines * LINE, 1024)
            + (1 + 2 * stages + 2) * 8 + 1024)


def check_types(path, fam: dict) -> None:
    for key, value in TYPES.items():
        if fam[key] != value:
            raise SpecError(path, f"this family is written for {key} {value}, not {fam[key]}", None, key)


def check_fits(path, entry, key, what: str, smem: int) -> None:
    if smem > SMEM_LIMIT_BYTES:
        raise SpecError(path, f"{what} needs {smem} bytes of shared memory, more than SM90's {SMEM_LIMIT_BYTES}",
                        entry, key)


def mma_type(pixels: int) -> str:
    """SM90's 64 x pixels x 16 f32 += f16 * f16 wgmma, both operands K-major from shared memory."""
    major = "cute::SM90::GMMA::Major::K"
    return f"cute::SM90::GMMA::MMA_64x{pixels}x16_F32F16F16_SS<{major}, {major}>"


@dataclass(frozen=True)
class Conv2dFpropSm90Halo:
    family: str
    width: int
    rows: int

    element = TYPES["element"]
    accumulator = TYPES["accumulator"]
    output = TYPES["output"]
    op = "conv2d_fprop"
    arch = 90
    arch_specific = True  # wgmma: sm_90a
    template = TEMPLATE
    includes = INCLUDES
    adapter = "kernelgen::ResidentOperation"
    adapter_header = "resident_adapter.h"

    @property
    def pixels(self) -> int:
        """wgmma's N: the tile's virtual pixels."""
        return self.rows * (self.width + 2)

    @property
    def name(self) -> str:
        return (f"kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_{CHANNELS}x{self.pixels}"
                f"_w{self.width}_rows{self.rows}_halo")

    @property
    def shared_bytes(self) -> int:
        virtual = self.width + 2
        return shared_bytes(9 * BLOCK, 2, _round((self.pixels + 2 * virtual + 2) * LINE, 1024),
                            self.rows * self.width + 8)

    def values(self) -> dict:
        return {"width": self.width, "rows": self.rows, "mma": mma_type(self.pixels),
                "shared_bytes": self.shared_bytes}


def expand(path, raw: dict) -> list:
    fam = FAMILY.read(path, raw)
    check_types(path, fam)
    kernels = []
    for entry, spec in S.read_entries(path, fam["kernels"], "kernels", ENTRY):
        kernel = Conv2dFpropSm90Halo(family=path.stem, width=spec["width"], rows=spec["rows"])
        if kernel.pixels % 8 or kernel.pixels > 256:
            raise SpecError(path, f"rows * (width + 2) = {kernel.pixels} must be a multiple of 8 of at most 256 "
                            "(wgmma's N)", entry, "rows")
        check_fits(path, entry, "rows", f"width {kernel.width} x rows {kernel.rows}", kernel.shared_bytes)
        kernels.append(kernel)
    return kernels
