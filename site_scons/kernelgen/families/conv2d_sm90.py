"""CUTLASS 3.x ``ConvUniversal`` conv2d fprop for SM90 (TMA im2col, wgmma).

A spec gives the element types, the mainloop and epilogue schedules, a list of
CTA tile shapes and a list of cluster shapes. Each tile x cluster is one kernel.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..fusion import fused_adapter, fusion_cpp, includes as fused_includes, reads_c
from ..ops.common import epilogue_suffix, fused_op
from ..targets import TARGETS
from ..vocab import DATA_TYPES
from .common import family_keys

SM90_CONV_SCHEDULES = TARGETS[90].schedules["conv"]
SM90_EPILOGUE_SCHEDULES = TARGETS[90].schedules["epilogue"]

KIND = "conv2d_fprop_sm90"
TEMPLATE = "conv2d_fprop_sm90.mako"
INCLUDES = (  # in this order: convnd_problem_shape.hpp needs cute, the builders need both
    "cutlass/cutlass.h",
    "cute/tensor.hpp",
    "cutlass/kernel_hardware_info.hpp",
    "cutlass/conv/convolution.h",
    "cutlass/conv/convnd_problem_shape.hpp",
    "cutlass/conv/dispatch_policy.hpp",
    "cutlass/conv/collective/collective_builder.hpp",
    "cutlass/epilogue/collective/collective_builder.hpp",
    "cutlass/conv/device/conv_universal_adapter.hpp",
    "cutlass/conv/kernel/conv_universal.hpp",
)



def family_table(kind: str) -> S.Table:
    """The spec of a family of ConvUniversal kernels of ``kind``: types, schedules, tiles x clusters."""
    return S.Table((
        *family_keys(kind),
        S.Key("schedule", S.choice(SM90_CONV_SCHEDULES)),
        S.Key("epilogue", S.choice(SM90_EPILOGUE_SCHEDULES)),
        S.Key("stages", S.integer(0, 8), 0),  # 0: as many as fit in shared memory
        S.Key("tiles", S.list_of(S.int_tuple(3, 8, 256))),
        S.Key("clusters", S.list_of(S.int_tuple(3, 1, 8))),
    ))


FAMILY = family_table(KIND)


@dataclass(frozen=True)
class Conv2dFpropSm90:
    family: str
    element: str
    accumulator: str
    output: str
    schedule: str
    epilogue: str
    stages: int
    tile: tuple
    cluster: tuple
    fusion: str = ""  # the epilogue it computes (kernelgen.fusion); "" for none

    kernel_op = "conv2d_fprop"
    arch = 90
    arch_specific = True  # needs sm_{arch}a, not a later architecture
    template = TEMPLATE
    name_ends_with_fusion = True  # its name is its unfused twin's and epilogue_suffix(fusion): fusion.fused

    @property
    def fusible(self) -> bool:
        """Whether a fused variant can be made of it (kernelgen.fusion): any not yet fused."""
        return not self.fusion

    @property
    def op(self) -> str:
        """``kernel_op``, and a fused kernel's epilogue: ``<op>:<epilogue>`` (ops.common.fused_op)."""
        return fused_op(self.kernel_op, self.fusion, reads_c(self))

    @property
    def includes(self) -> tuple:
        return INCLUDES + fused_includes(self.fusion)

    @property
    def adapter(self) -> str:
        """The profiler's adapter template."""
        return fused_adapter(self.fusion, "kernelgen::FusedConv2dOperation3x") if self.fusion else \
            "kernelgen::Conv2dOperation3x"

    @property
    def adapter_header(self) -> str:
        return "fused_adapter_3x.h" if self.fusion else "conv2d_adapter_3x.h"

    @property
    def alignment(self) -> int:
        """TMA moves 16-byte aligned rows: channels must be a multiple of this."""
        return 128 // DATA_TYPES[self.element].bits

    @cached_property
    def name(self) -> str:
        e, o = self.element, self.output
        tile = "x".join(map(str, self.tile))
        cluster = "x".join(map(str, self.cluster))
        return (f"cutlass3x_sm90_tensorop_fprop_{e}nhwc_{e}nhwc_{self.accumulator}_{o}_{o}nhwc"
                f"_{tile}_{cluster}_{self.stages}_align{self.alignment}"
                f"_{SM90_CONV_SCHEDULES[self.schedule][1]}_{SM90_EPILOGUE_SCHEDULES[self.epilogue][1]}"
                f"{epilogue_suffix(self.fusion)}")

    def values(self) -> dict:
        return {
            "element": DATA_TYPES[self.element].cpp,
            "accumulator": DATA_TYPES[self.accumulator].cpp,
            "output": DATA_TYPES[self.output].cpp,
            "schedule": SM90_CONV_SCHEDULES[self.schedule][0],
            "epilogue": SM90_EPILOGUE_SCHEDULES[self.epilogue][0],
            "stages": self.stages,
            "tile": self.tile,
            "cluster": self.cluster,
            # the epilogue's fusion operation (kernelgen.fusion); None: CUTLASS's default
            "fusion": fusion_cpp(self.fusion, DATA_TYPES[self.output].cpp, DATA_TYPES[self.accumulator].cpp,
                                 DATA_TYPES[self.output].cpp) if self.fusion else None,
        }


def _check_tile(path, entry, fam, tile):
    m, n, k = tile
    if m % 64:
        raise SpecError(path, f"tile M {m} is not a multiple of 64 (one warpgroup's wgmma)", entry)
    if n % 8:
        raise SpecError(path, f"tile N {n} is not a multiple of 8 (wgmma's N step)", entry)
    TARGETS[90].check_tile_k(path, entry, fam["element"], k)
    if fam["stages"]:
        smem = fam["stages"] * (m + n) * k * DATA_TYPES[fam["element"]].bits // 8
        if smem > TARGETS[90].shared_memory:
            raise SpecError(path, f"{fam['stages']} stages of a {m}x{n}x{k} tile need {smem} bytes "
                            f"of shared memory, more than SM90's {TARGETS[90].shared_memory}", None, "stages")


def expand(path, raw: dict, family: S.Table = FAMILY, cls=Conv2dFpropSm90) -> list:
    """The kernels of a spec: one ``cls`` a tile x cluster."""
    fam = family.read(path, raw)
    if DATA_TYPES[fam["element"]].bits != 16:
        raise SpecError(path, "this family is written for 16-bit inputs", None, "element")
    for i, tile in enumerate(fam["tiles"]):
        _check_tile(path, f"tiles[{i}]", fam, tile)
    for i, cluster in enumerate(fam["clusters"]):
        TARGETS[90].check_cluster(path, f"clusters[{i}]", cluster)
    return [
        cls(
            family=path.stem, element=fam["element"], accumulator=fam["accumulator"],
            output=fam["output"], schedule=fam["schedule"], epilogue=fam["epilogue"],
            stages=fam["stages"], tile=tile, cluster=cluster)
        for tile in fam["tiles"] for cluster in fam["clusters"]
    ]
