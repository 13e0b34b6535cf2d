"""CUTLASS 2.x ``ImplicitGemmConvolution`` conv2d fprop on tensor cores.

A spec gives the architecture (80: multistage mainloops with cp.async; 75: the
two-stage mainloop, which also takes 2-byte accesses), the element types, the
iterator, the mma.sync instruction shape, the alignments and swizzles to try,
and a list of tiles (threadblock, warps, stages). Each tile x alignment x
swizzle is one kernel; with ``output_alignments``, one for each of those too:
the output's accesses narrower than the inputs' (a layer of K no multiple of
the inputs' alignment, whose C is one: the activations and filters are read
along C, the output written along K); with ``splits``, one for each of those
too: each output tile's K iterations (filter taps x channels) split that many
ways over as many CTAs, which add their partial sums into the output in turn
(CUTLASS's serial split-K: a semaphore a tile, in the workspace), for layers of
too few output tiles to fill the GPU (a detection head on a small feature map).
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..targets import TARGETS
from ..vocab import DATA_TYPES, DEFAULT_SWIZZLE, ITERATORS, SWIZZLES
from .common import family_keys

KIND = "conv2d_fprop_2x"
TEMPLATE = "conv2d_fprop_2x.mako"
INCLUDES = (
    "cutlass/cutlass.h",
    "cutlass/conv/kernel/default_conv2d_fprop.h",
    "cutlass/conv/device/implicit_gemm_convolution.h",
)
# SM75: the two-stage pipelined mainloop; SM80: that one too (2 stages: through registers, accesses
# of any size: the bf16 kernels of 2-byte accesses), or the cp.async multistage mainloops (3 to 10)
STAGES = {75: (2, 2), 80: (2, 10)}
PIPELINED = 2  # stages of the two-stage pipelined mainloop (CUTLASS's DefaultConv2dFprop<..., 2, ...>)
CP_ASYNC_BYTES = (4, 8, 16)  # the access sizes cp.async (SM80 multistage) can copy

FAMILY = S.Table((
    *family_keys(KIND),
    S.Key("arch", S.one_of(STAGES), 80),
    S.Key("iterator", S.choice(ITERATORS)),
    S.Key("instruction", S.int_tuple(3, 1, 64)),
    S.Key("alignments", S.list_of(S.integer(1, 16))),
    S.Key("output_alignments", S.list_of(S.integer(1, 16)), ()),  # default: each kernel's alignment
    S.Key("swizzles", S.list_of(S.choice(SWIZZLES)), (DEFAULT_SWIZZLE,)),
    S.Key("splits", S.list_of(S.integer(1, 64)), (1,)),  # 1: no split
    S.Key("tiles", lambda v: v),  # read entry by entry below
))
TILE = S.Table((
    S.Key("threadblock", S.int_tuple(3, 1, 512)),
    S.Key("warps", S.int_tuple(3, 1, 8)),
    S.Key("stages", S.integer(2, 10)),
))


@dataclass(frozen=True)
class Conv2dFprop2x:
    family: str
    arch: int
    element: str
    accumulator: str
    output: str
    iterator: str
    instruction: tuple
    threadblock: tuple
    warps: tuple
    stages: int
    alignment: int
    swizzle: str
    output_alignment: int = 0  # elements of the output's accesses along K; 0: the alignment
    split_k_slices: int = 1  # the CTAs that share an output tile's K iterations (serial split-K)

    op = "conv2d_fprop"
    arch_specific = False  # needs sm_{arch}a, not a later architecture
    template = TEMPLATE
    includes = INCLUDES
    # a family of no measured row is measured in full on the layers of its accesses' width
    # (candidates.unfitted, ``explores``): its tiles share their group's weights, fitted on other
    # tiles' rows, which may rank them low on the layers they were added for (ReXNet-1.0's
    # odd-channel 1x1 layers: 22nd to 49th)
    measure_new_family = True

    def explores(self, problem) -> bool:
        """Whether ``problem`` is of the layers a kernel of a new family is measured on in full: those
        whose C and K take no wider access than its ``alignment`` (a 2-element kernel on 228 -> 50
        channels, not on 64 -> 64, which 16-byte kernels take)."""
        conv = problem.as_conv()
        widest = 8
        while widest > 1 and (conv.c % widest or conv.k % widest):
            widest //= 2
        return self.alignment >= widest

    @property
    def adapter(self) -> str:
        """The profiler's adapter template."""
        return "kernelgen::Conv2dOperation2xSplit" if self.split_k_slices > 1 else "kernelgen::Conv2dOperation2x"

    @property
    def adapter_header(self) -> str:
        return "conv2d_adapter_2x_split.h" if self.split_k_slices > 1 else "conv2d_adapter_2x.h"

    @cached_property
    def name(self) -> str:
        tb = self.threadblock
        inst = "".join(map(str, self.instruction))
        acc = DATA_TYPES[self.accumulator].short
        swizzle = "" if self.swizzle == DEFAULT_SWIZZLE else f"_swz{self.swizzle[len('identity'):]}"
        out = f"_out{self.output_alignment}" if self.output_alignment else ""
        split = f"_splitk{self.split_k_slices}" if self.split_k_slices > 1 else ""
        return (f"cutlass_tensorop_{self.output}_{acc}{inst}fprop_{self.iterator}_{self.element}"
                f"_{tb[0]}x{tb[1]}_{tb[2]}x{self.stages}_nhwc{swizzle}_align{self.alignment}{out}{split}")

    @property
    def k_alignment(self) -> int:
        """The output's alignment along K (C's is ``alignment``)."""
        return self.output_alignment or self.alignment

    def values(self) -> dict:
        warp = tuple(t // w for t, w in zip(self.threadblock, self.warps))
        out = DATA_TYPES[self.output]
        return {
            "arch": self.arch,
            "element": DATA_TYPES[self.element].cpp,
            "accumulator": DATA_TYPES[self.accumulator].cpp,
            "output": out.cpp,
            "iterator": ITERATORS[self.iterator],
            "swizzle": SWIZZLES[self.swizzle],
            "threadblock": self.threadblock,
            "warp": warp,
            "instruction": self.instruction,
            "stages": self.stages,
            "alignment": self.alignment,
            "epilogue_vector": min(self.k_alignment * out.bits, 128) // out.bits,
            "split_k_slices": self.split_k_slices,
        }


def _check_tile(path, entry, fam, tile, axes="MNK"):
    """``tile`` as CUTLASS runs it (pixels, output channels, reduction); ``axes``: the names the
    family's spec gives those three dimensions, which the errors use."""
    tb, warps, inst = tile["threadblock"], tile["warps"], fam["instruction"]
    low, high = STAGES[fam["arch"]]
    if not low <= tile["stages"] <= high:
        raise SpecError(path, f"SM{fam['arch']} mainloops take {low} to {high} stages, not {tile['stages']}",
                        entry, "stages")
    for dim, (t, w, i) in enumerate(zip(tb, warps, inst)):
        axis = axes[dim]
        if t % w:
            raise SpecError(path, f"{w} warps along {axis} do not divide the threadblock's {t}", entry, "warps")
        if (t // w) % i:
            raise SpecError(path, f"warp tile {t // w} along {axis} is not a multiple of the "
                            f"instruction's {i}", entry, "warps")
    if tb[1] < 32:
        # none of CUTLASS's own 2.x tensor-op tiles is narrower than 64 along N; 16-wide ones (of 128
        # and 256 pixels, mma 16x8x16, K 64) wrote non-finite outputs on an H100, 32-wide ones verify
        raise SpecError(path, f"a threadblock {tb[1]} wide along {axes[1]} (the output channels): CUTLASS 2.x "
                        "tensor-op tiles take at least 32", entry, "threadblock")
    steps = tb[2] // warps[2] // inst[2]
    if steps < 2 or steps % 2:
        # CUTLASS's multistage mainloop (gemm/threadblock/mma_base.h) alternates two warp-level steps
        raise SpecError(path, f"the tile's K {tb[2]} is {steps} of the instruction's K {inst[2]} a warp; "
                        "the mainloop takes an even number, at least 2", entry, "threadblock")
    bits = DATA_TYPES[fam["element"]].bits
    if tb[2] * bits > 1024:
        # its shared-memory layouts (layout/tensor_op_multiplicand_sm75.h) hold a K tile of one
        # 128-byte line at most: 64 elements of 16 bits
        raise SpecError(path, f"the tile's K {tb[2]} is {tb[2] * bits // 8} bytes of {fam['element']}; CUTLASS 2.x "
                        "tensor-op tiles take at most one 128-byte line of K", entry, "threadblock")
    threads = 32 * warps[0] * warps[1] * warps[2]
    if threads > 1024:
        raise SpecError(path, f"{threads} threads exceed 1024 per threadblock", entry, "warps")
    for alignment in fam["alignments"]:  # CUTLASS's thread maps give each thread at least one access
        for operand, rows in (("filter", tb[1]), ("activation", tb[0])):
            accesses = rows * tb[2] // alignment
            if accesses < threads:
                raise SpecError(path, f"the {operand} tile of {rows}x{tb[2]} is {accesses} accesses of {alignment} "
                                f"elements, fewer than the {threads} threads", entry, "threadblock")
    size = DATA_TYPES[fam["element"]].bits // 8
    smem = tile["stages"] * (tb[0] + tb[1]) * tb[2] * size
    arch = TARGETS[fam["arch"]]
    if smem > arch.shared_memory:
        raise SpecError(path, f"{tile['stages']} stages need {smem} bytes of shared memory, "
                        f"more than {arch.name}'s {arch.shared_memory}", entry, "stages")


def check_alignments(path, fam) -> None:
    """A family's alignments: powers of two of at most 128 bits of its element."""
    bits = DATA_TYPES[fam["element"]].bits
    for a in fam["alignments"]:
        if a & (a - 1) or a * bits > 128:
            raise SpecError(path, f"alignment {a} must be a power of two of at most 128 bits", None, "alignments")


def check_tile_accesses(path, entry, fam, tile, axes="MNK") -> None:
    """``_check_tile``, and each alignment's accesses a size the tile's mainloop copies: an SM80
    multistage one copies 4, 8 or 16 bytes."""
    _check_tile(path, entry, fam, tile, axes)
    bits = DATA_TYPES[fam["element"]].bits
    for a in fam["alignments"]:
        if fam["arch"] >= 80 and tile["stages"] > PIPELINED and a * bits // 8 not in CP_ASYNC_BYTES:
            raise SpecError(path, f"alignment {a} makes {a * bits // 8}-byte accesses; SM80 multistage "
                            f"mainloops copy {', '.join(map(str, CP_ASYNC_BYTES))} bytes (use {PIPELINED} "
                            "stages, or arch = 75)", entry, "stages")


def expand(path, raw: dict) -> list:
    family = path.stem
    fam = FAMILY.read(path, raw)
    check_alignments(path, fam)
    for a in fam["output_alignments"]:
        if a & (a - 1) or a > min(fam["alignments"]):
            raise SpecError(path, f"output alignment {a} must be a power of two of at most the alignments' "
                            f"{min(fam['alignments'])} (an output no narrower than the inputs is their alignment)",
                            None, "output_alignments")
    kernels = []
    for entry, tile in S.read_entries(path, fam["tiles"], "tiles", TILE):
        check_tile_accesses(path, entry, fam, tile)
        for alignment in fam["alignments"]:
            for output_alignment in [a for a in fam["output_alignments"] if a < alignment] or [0]:
                for swizzle in fam["swizzles"]:
                    kernels += [Conv2dFprop2x(
                        family=family, arch=fam["arch"], element=fam["element"], accumulator=fam["accumulator"],
                        output=fam["output"], iterator=fam["iterator"], instruction=fam["instruction"],
                        threadblock=tile["threadblock"], warps=tile["warps"], stages=tile["stages"],
                        alignment=alignment, swizzle=swizzle, output_alignment=output_alignment,
                        split_k_slices=splits) for splits in fam["splits"]]
    return kernels
