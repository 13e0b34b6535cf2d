"""Halo conv2d fprop on SM90 for 3x3, stride-1, pad-1 layers with 64 input and 64 output
channels (profiler/conv_sm90_halo.h): each tile loads its input rows once, with a one-pixel
halo, and runs the nine filter taps as wgmma over shifted views of them, where CUTLASS's
im2col mainloop loads every pixel once per tap. The whole filter stays in shared memory.

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
INCLUDES = ("conv_sm90_halo.h",)
CHANNELS = 64  # C and K: one 128-byte line per pixel and filter row
LINE = 128
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what the kernel is written for

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


def shared_bytes(width: int, rows: int) -> int:
    """Shared memory the kernel asks for (profiler/conv_sm90_halo.h, halo::Geometry)."""
    virtual = width + 2
    pixels = rows * virtual
    halo_stage = _round((pixels + 2 * virtual + 2) * LINE, 1024)
    staging = _round((rows * width + 8) * LINE, 1024)
    return 9 * CHANNELS * LINE + 2 * halo_stage + 2 * staging + 8 * 8 + 1024


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
    adapter = "kernelgen::HaloOperation"
    adapter_header = "halo_adapter.h"

    @property
    def pixels(self) -> int:
        """wgmma's N: the tile's virtual pixels."""
        return self.rows * (self.width + 2)

    @property
    def name(self) -> str:
        return (f"kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_{CHANNELS}x{self.pixels}"
                f"_w{self.width}_rows{self.rows}_halo")

    def values(self) -> dict:
        major = "cute::SM90::GMMA::Major::K"
        return {
            "width": self.width,
            "rows": self.rows,
            "mma": f"cute::SM90::GMMA::MMA_64x{self.pixels}x16_F32F16F16_SS<{major}, {major}>",
            "shared_bytes": shared_bytes(self.width, self.rows),
        }


def expand(path, raw: dict) -> list:
    fam = FAMILY.read(path, raw)
    for key, value in TYPES.items():
        if fam[key] != value:
            raise SpecError(path, f"this family is written for {key} {value}, not {fam[key]}", None, key)
    kernels = []
    for entry, spec in S.read_entries(path, fam["kernels"], "kernels", ENTRY):
        kernel = Conv2dFpropSm90Halo(family=path.stem, width=spec["width"], rows=spec["rows"])
        if kernel.pixels % 8 or kernel.pixels > 256:
            raise SpecError(path, f"rows * (width + 2) = {kernel.pixels} must be a multiple of 8 of at most 256 "
                            "(wgmma's N)", entry, "rows")
        if shared_bytes(kernel.width, kernel.rows) > SMEM_LIMIT_BYTES:
            raise SpecError(path, f"width {kernel.width} x rows {kernel.rows} needs "
                            f"{shared_bytes(kernel.width, kernel.rows)} bytes of shared memory, more than SM90's "
                            f"{SMEM_LIMIT_BYTES}", entry, "rows")
        kernels.append(kernel)
    return kernels
