"""Persistent CUTLASS 3.x conv2d fprop on SM90: CUTLASS's implicit-GEMM conv mainloop (TMA
im2col, wgmma) inside GemmUniversal's persistent kernels with two consumer warpgroups,
cooperative or ping-pong (profiler/conv_sm90_persistent.h). CUTLASS 4.2's conv builder
offers SM90 convolutions with one consumer warpgroup only (family ``conv2d_fprop_sm90``).

A spec lists entries as the ``gemm_sm90`` family does: a tile shape with a schedule, a tile
scheduler and the cluster shapes to build it with. Each entry x cluster is one kernel; each
serves every NHWC convolution whose channels are multiples of 16 bytes (strided, padded,
any filter size).
"""

from dataclasses import dataclass

from .. import spec_schema as S
from ..errors import SpecError
from ..vocab import DATA_TYPES, SM90_GEMM_SCHEDULES, SM90_TILE_SCHEDULERS
from .common import family_keys
from .gemm_sm90 import ENTRY, check_entry, epilogue_tile_cpp, epilogue_tile_suffix

KIND = "conv2d_fprop_sm90_persistent"
TEMPLATE = "conv2d_fprop_sm90_persistent.mako"
INCLUDES = (  # in this order: convnd_problem_shape.hpp needs cute, the builders need both
    "cutlass/cutlass.h",
    "cute/tensor.hpp",
    "cutlass/kernel_hardware_info.hpp",
    "cutlass/conv/convolution.h",
    "cutlass/conv/convnd_problem_shape.hpp",
    "cutlass/epilogue/collective/collective_builder.hpp",
    "cutlass/gemm/kernel/gemm_universal.hpp",
    "cutlass/gemm/kernel/tile_scheduler.hpp",
    "cutlass/gemm/device/gemm_universal_adapter.h",
    "conv_sm90_persistent.h",
)

FAMILY = S.Table((
    *family_keys(KIND),
    S.Key("kernels", lambda v: v),  # read entry by entry below
))


@dataclass(frozen=True)
class Conv2dFpropSm90Persistent:
    family: str
    element: str
    accumulator: str
    output: str
    tile: tuple
    cluster: tuple
    schedule: str
    scheduler: str
    epilogue_tile: tuple = None  # None: EpilogueTileAuto

    op = "conv2d_fprop"
    arch = 90
    arch_specific = True  # needs sm_{arch}a, not a later architecture
    template = TEMPLATE
    includes = INCLUDES
    adapter = "kernelgen::Conv2dPersistentOperation3x"
    adapter_header = "conv2d_adapter_3x.h"

    @property
    def alignment(self) -> int:
        """TMA moves 16-byte aligned rows: channels must be a multiple of this."""
        return 128 // DATA_TYPES[self.element].bits

    @property
    def name(self) -> str:
        e, o = self.element, self.output
        return (f"cutlass3x_sm90_tensorop_fprop_{e}nhwc_{e}nhwc_{self.accumulator}_{o}_{o}nhwc"
                f"_{'x'.join(map(str, self.tile))}_{'x'.join(map(str, self.cluster))}_0_align{self.alignment}"
                f"{SM90_TILE_SCHEDULERS[self.scheduler][1]}_{SM90_GEMM_SCHEDULES[self.schedule][1]}_epi_tma"
                f"{epilogue_tile_suffix(self.epilogue_tile)}")

    def supports(self, problem) -> bool:
        return (problem.op == self.op and problem.dtype == self.element == self.output
                and problem.c % self.alignment == 0 and problem.k % self.alignment == 0)

    def values(self) -> dict:
        kernel, _, epilogue, _ = SM90_GEMM_SCHEDULES[self.schedule]
        return {
            "element": DATA_TYPES[self.element].cpp,
            "accumulator": DATA_TYPES[self.accumulator].cpp,
            "output": DATA_TYPES[self.output].cpp,
            "tile": self.tile,
            "cluster": self.cluster,
            "schedule": kernel,
            "epilogue": epilogue,
            "scheduler": SM90_TILE_SCHEDULERS[self.scheduler][0],
            "epilogue_tile": epilogue_tile_cpp(self.epilogue_tile),
        }


def expand(path, raw: dict) -> list:
    fam = FAMILY.read(path, raw)
    if DATA_TYPES[fam["element"]].bits != 16:
        raise SpecError(path, "this family is written for 16-bit inputs", None, "element")
    kernels = []
    for entry, spec in S.read_entries(path, fam["kernels"], "kernels", ENTRY):
        check_entry(path, entry, fam, spec)
        kernels += [Conv2dFpropSm90Persistent(
                        family=path.stem, element=fam["element"], accumulator=fam["accumulator"],
                        output=fam["output"], tile=spec["tile"], cluster=cluster, schedule=spec["schedule"],
                        scheduler=spec["scheduler"], epilogue_tile=epi)
                    for cluster in spec["clusters"] for epi in spec["epilogue_tiles"]]
    return kernels
