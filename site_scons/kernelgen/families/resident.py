"""What the filter-resident SM90 kernel families (halo, pointwise) share: the kernels' typings
(f16 or bf16, fp32 accumulation) and line geometry, their shared-memory count (as
profiler/conv_sm90_resident.h lays it out), their wgmma type and spec checks."""

from .. import spec_schema as S
from ..errors import SpecError
from ..targets import TARGETS
from ..vocab import DATA_TYPES
from .common import expand_fixed_type_entries

INCLUDES = ("conv_sm90_resident.h",)
CHANNELS = 64  # channels per 128-byte line (a pixel, a filter row), output channels per CTA
LINE = 128
BLOCK = CHANNELS * LINE  # a 64 x 64 filter block
# what the kernels are written for: 16-bit inputs and output of one type, fp32 accumulation
MMA_TYPES = {"f16": "F32F16F16", "bf16": "F32BF16BF16"}  # element -> wgmma's D, A, B types
TYPES = tuple({"element": e, "accumulator": "f32", "output": e} for e in MMA_TYPES)


def round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def shared_bytes(filter_bytes: int, stages: int, stage_bytes: int, staging_lines: int) -> int:
    """Shared memory a resident kernel asks for (profiler/conv_sm90_resident.h, resident::Layout):
    the filter, the pixel stages, two staging buffers, the barriers, alignment slack."""
    return (round_up(filter_bytes, 1024) + stages * stage_bytes + 2 * round_up(staging_lines * LINE, 1024)
            + (1 + 2 * stages + 2) * 8 + 1024)


def mma_type(pixels: int, element: str) -> str:
    """SM90's 64 x pixels x 16 f32 += element * element wgmma, both operands K-major from shared
    memory."""
    major = "cute::SM90::GMMA::Major::K"
    return f"cute::SM90::GMMA::MMA_64x{pixels}x16_{MMA_TYPES[element]}_SS<{major}, {major}>"


class ResidentKernel:
    """What every resident kernel descriptor has besides its own fields (``element`` among them),
    name and values."""

    accumulator = "f32"
    op = "conv2d_fprop"
    arch = 90
    arch_specific = True  # wgmma: sm_90a
    includes = INCLUDES
    adapter = "kernelgen::ResidentOperation"
    adapter_header = "resident_adapter.h"

    @property
    def output(self) -> str:
        return self.element

    @property
    def types(self) -> str:
        """The name's type part: activations, filters, accumulator, output."""
        e = self.element
        return f"{e}nhwc_{e}nhwc_f32_{e}nhwc"

    def typed_values(self, pixels: int) -> dict:
        """The template values every resident kernel has: its wgmma type and element type."""
        return {"mma": mma_type(pixels, self.element), "element": DATA_TYPES[self.element].cpp}


def expand_entries(cls, family: S.Table, entry: S.Table, path, raw: dict, check) -> list:
    """The kernels of a resident family's spec: one ``cls(family=..., **entry)`` per entry, refused
    by ``check(path, entry name, kernel)`` if the family cannot build it, or if it needs more
    shared memory than SM90 has (``kernel.shared_bytes``; the error names ``kernel.fits_key``
    and ``kernel.summary``)."""
    def fits(path, name, kernel):
        check(path, name, kernel)
        if kernel.shared_bytes > TARGETS[90].shared_memory:
            raise SpecError(path, f"{kernel.summary} needs {kernel.shared_bytes} bytes of shared memory, more than "
                            f"SM90's {TARGETS[90].shared_memory}", name, kernel.fits_key)
    return expand_fixed_type_entries(cls, family, entry, path, raw, TYPES, fits)
