"""CUTLASS 2.x grouped convolution (``DefaultConv2dGroupFprop``, ``ImplicitGemmConvolution``) on
SM80 tensor cores: a layer of 1 < groups (C and K split into groups, each group's K/groups filters
reading its C/groups channels, as ResNeXt and RegNet have them).

A spec gives the element types, the mma.sync instruction shape, the alignments to try and a list
of tiles, each with its ``group_mode``: ``single`` (a CTA computes part of one group: K/groups a
multiple of the tile's N, C/groups a multiple of the tile's K, the tile's N at least its K; the
``optimized`` or the ``analytic`` iterator) or ``multiple`` (a CTA
computes several whole groups: the tile's N a multiple of K/groups; ``analytic`` only, as CUTLASS
has it). C/groups must be a multiple of the alignment, and the tile's N a power of two (with N =
48 the kernels compile and compute wrong results). Each tile x alignment is one kernel.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..vocab import DATA_TYPES, DEFAULT_SWIZZLE
from .common import family_keys
from .conv2d_2x import CP_ASYNC_BYTES, Conv2dFprop2x, _check_tile

KIND = "conv2d_fprop_grouped_2x"
TEMPLATE = "conv2d_fprop_grouped_2x.mako"
INCLUDES = (
    "cutlass/cutlass.h",
    "cutlass/conv/kernel/default_conv2d_group_fprop.h",
    "cutlass/conv/device/implicit_gemm_convolution.h",
)
GROUP_MODES = {"single": "cutlass::conv::GroupMode::kSingleGroup",
               "multiple": "cutlass::conv::GroupMode::kMultipleGroup"}
GROUP_ITERATORS = {"analytic": "cutlass::conv::IteratorAlgorithm::kAnalytic",
                   "optimized": "cutlass::conv::IteratorAlgorithm::kOptimized"}

FAMILY = S.Table((
    *family_keys(KIND),
    S.Key("arch", S.one_of((80,)), 80),
    S.Key("instruction", S.int_tuple(3, 1, 64)),
    S.Key("alignments", S.list_of(S.integer(1, 16))),
    S.Key("tiles", lambda v: v),  # read entry by entry below
))
TILE = S.Table((
    S.Key("threadblock", S.int_tuple(3, 1, 512)),
    S.Key("warps", S.int_tuple(3, 1, 8)),
    S.Key("stages", S.integer(2, 10)),
    S.Key("group_mode", S.choice(GROUP_MODES)),
    S.Key("iterator", S.choice(GROUP_ITERATORS)),
))


@dataclass(frozen=True)
class Conv2dFpropGrouped2x(Conv2dFprop2x):
    group_mode: str = "single"

    op = "conv2d_fprop_grouped"
    template = TEMPLATE
    includes = INCLUDES
    adapter = "kernelgen::GroupedConv2dOperation2x"
    adapter_header = "grouped_adapter_2x.h"

    @cached_property
    def name(self) -> str:
        tb = self.threadblock
        inst = "".join(map(str, self.instruction))
        acc = DATA_TYPES[self.accumulator].short
        # two warps along M and one a 32 columns of N are left unnamed (as the first tiles had them)
        warps = "" if self.warps == (2, max(1, tb[1] // 32), 1) else f"_warps{self.warps[0]}x{self.warps[1]}"
        return (f"cutlass_tensorop_{self.output}_{acc}{inst}fprop_{self.iterator}_{self.element}"
                f"_{tb[0]}x{tb[1]}_{tb[2]}x{self.stages}{warps}_nhwc_align{self.alignment}_{self.group_mode}_group")

    def values(self) -> dict:
        values = super().values()
        values.update(iterator=GROUP_ITERATORS[self.iterator], group_mode=GROUP_MODES[self.group_mode])
        return values

    def refuses(self, c: int, k: int, groups: int) -> str | None:
        """Why the kernel's can_implement refuses a layer of these channels and groups, or None."""
        per_group_c, per_group_k, tile_n = c // groups, k // groups, self.threadblock[1]
        if per_group_c % self.alignment:
            return f"C/groups = {per_group_c} is not a multiple of the alignment {self.alignment}"
        if k % min(self.alignment, 8):
            return f"K is not a multiple of {min(self.alignment, 8)}"
        if self.group_mode == "single" and per_group_k % tile_n:
            return f"one group a CTA: K/groups = {per_group_k} is not a multiple of the tile's N {tile_n}"
        if self.group_mode == "single" and per_group_c % self.threadblock[2]:
            # CUTLASS accepts the layer, and its results are wrong (measured: groups of 48 and 56
            # under tiles of K 32 and 64, every row incorrect)
            return f"one group a CTA: C/groups = {per_group_c} is not a multiple of the tile's K {self.threadblock[2]}"
        if self.group_mode == "multiple" and tile_n % per_group_k:
            return f"whole groups a CTA: the tile's N {tile_n} is not a multiple of K/groups = {per_group_k}"
        return None


def expand(path, raw: dict) -> list:
    family = path.stem
    fam = FAMILY.read(path, raw)
    bits = DATA_TYPES[fam["element"]].bits
    for a in fam["alignments"]:
        if a & (a - 1) or a * bits // 8 not in CP_ASYNC_BYTES:
            raise SpecError(path, f"alignment {a} makes {a * bits // 8}-byte accesses; SM80 multistage mainloops "
                            f"copy {', '.join(map(str, CP_ASYNC_BYTES))} bytes", None, "alignments")
    kernels = []
    for entry, tile in S.read_entries(path, fam["tiles"], "tiles", TILE):
        _check_tile(path, entry, fam, tile)
        n = tile["threadblock"][1]
        if n & (n - 1):
            raise SpecError(path, f"the tile's N {n} is not a power of two: CUTLASS's grouped kernels compute wrong "
                            "results with it", entry, "threadblock")
        if tile["group_mode"] == "multiple" and tile["iterator"] != "analytic":
            raise SpecError(path, "whole groups a CTA (group_mode multiple) take the analytic iterator only",
                            entry, "iterator")
        for alignment in fam["alignments"]:
            kernels.append(Conv2dFpropGrouped2x(
                family=family, arch=fam["arch"], element=fam["element"], accumulator=fam["accumulator"],
                output=fam["output"], iterator=tile["iterator"], instruction=fam["instruction"],
                threadblock=tile["threadblock"], warps=tile["warps"], stages=tile["stages"],
                alignment=alignment, swizzle=DEFAULT_SWIZZLE, group_mode=tile["group_mode"]))
    return kernels
