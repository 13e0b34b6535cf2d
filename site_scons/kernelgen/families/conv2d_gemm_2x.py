"""CUTLASS 2.x GEMM (``cutlass::gemm::device::Gemm``) on tensor cores for 1x1 convolutions at
stride 1 without padding, computed transposed: the output channels are the GEMM's M and the pixels
its N, D^T = W X^T with W the K x C filter (row-major: a 1x1 KRSC filter), X^T the C x NPQ
activations (column-major: NHWC) and D^T the K x NPQ output (column-major: NHWC). That is the
orientation of cuBLAS's CUTLASS 2.x kernels on ReXNet-1.0's 1x1 layers of C or K no multiple of 8,
where the implicit-GEMM conv kernels of this project's space took 1.17-1.36 times their time
(H200, 2026-12-05: ``cutlass_80_tensorop_f16_s16816gemm_f16_64x256_32x4_tn_align2`` on 162 -> 38
and 50 -> 300, ``cutlass_75_tensorop_f16_s1688gemm_f16_128x128_tn_align1`` on 95 -> 570):
a layer's few output channels fill one tile of M, its pixels the long N.

A spec is a ``conv2d_fprop_2x`` spec without ``iterator``, ``output_alignments`` and ``splits``:
the architecture (80: cp.async multistage mainloops, accesses of 4 to 16 bytes; 75: the two-stage
mainloop, which also takes 2-byte accesses), element types, the mma.sync instruction, the
alignments, the swizzles and tiles (threadblock and warps in the GEMM's terms: M output channels,
N pixels). Each tile x alignment x swizzle is one kernel, named
``cutlass_tensorop_<out>_<acc><inst>gemm_transposed_<element>_<M>x<N>_<K>x<stages>_nhwc_align<a>``;
its alignment must divide C and K, and other layers are ``unsupported``. Until the model has rows of
a family, a build measures each of its kernels on the layers whose C and K take no wider access than
the kernel's, those of 16-byte accesses only where the layer has at most the tile's output channels. The descriptor keeps its
tile as the conv kernels have theirs (pixels, output channels, reduction), which the cost model
counts tiles by, and so does the rendered ``GemmShape``: ``device::Gemm`` runs a column-major D as
the row-major GEMM of its transpose (D = X W^T, M the pixels) with the threadblock and warp shapes
it was given unchanged (cutlass/gemm/device/gemm.h, the specialization for a column-major C), so
the shape CUTLASS is given is (pixels, output channels, reduction); given in the GEMM's terms, a
tile of 64 output channels by 256 pixels would run as 64 pixels by 256 channels.
"""

from dataclasses import dataclass, replace
from functools import cached_property

from .. import spec_schema as S
from ..vocab import DATA_TYPES, DEFAULT_SWIZZLE, SWIZZLES
from .common import family_keys
from .conv2d_2x import STAGES, TILE, Conv2dFprop2x, check_alignments, check_tile_accesses

KIND = "conv2d_fprop_gemm_2x"
TEMPLATE = "conv2d_fprop_gemm_2x.mako"
INCLUDES = ("cutlass/cutlass.h", "cutlass/gemm/device/gemm.h")
INT_MAX = 2**31 - 1

FAMILY = S.Table((
    *family_keys(KIND),
    S.Key("arch", S.one_of(STAGES), 80),
    S.Key("instruction", S.int_tuple(3, 1, 64)),
    S.Key("alignments", S.list_of(S.integer(1, 16))),
    S.Key("swizzles", S.list_of(S.choice(SWIZZLES)), (DEFAULT_SWIZZLE,)),
    S.Key("tiles", lambda v: v),  # read entry by entry below
))


@dataclass(frozen=True)
class Conv2dFpropGemm2x(Conv2dFprop2x):
    """``threadblock`` and ``warps`` as the conv kernels': (pixels, output channels, reduction)."""

    template = TEMPLATE
    includes = INCLUDES
    adapter = "kernelgen::TransposedGemmOperation2x"
    adapter_header = "gemm_adapter_2x.h"

    @property
    def gemm_tile(self) -> tuple:
        """The threadblock in the GEMM's terms: (output channels, pixels, reduction)."""
        m, n, k = self.threadblock
        return n, m, k

    @cached_property
    def name(self) -> str:
        m, n, k = self.gemm_tile
        inst = "".join(map(str, self.instruction))
        acc = DATA_TYPES[self.accumulator].short
        swizzle = "" if self.swizzle == DEFAULT_SWIZZLE else f"_swz{self.swizzle[len('identity'):]}"
        return (f"cutlass_tensorop_{self.output}_{acc}{inst}gemm_transposed_{self.element}"
                f"_{m}x{n}_{k}x{self.stages}_nhwc{swizzle}_align{self.alignment}")

    def explores(self, problem) -> bool:
        """The 2.x conv kernels' (the layers whose C and K take no wider access than its own); for a
        kernel of 16-byte accesses, of those only the layers of at most its tile's output channels,
        the layers of few output channels it is for (the other aligned 1x1 layers are the SM90
        kernels')."""
        return super().explores(problem) and (self.alignment < 8 or problem.as_conv().k <= self.gemm_tile[0])

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if (conv.r, conv.s, conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w) != (1, 1, 1, 1, 0, 0):
            return "a GEMM: needs a 1x1 filter at stride 1 without padding"
        if conv.c % self.alignment or conv.k % self.alignment:
            return f"channels not a multiple of the alignment {self.alignment}"
        if conv.n * conv.p * conv.q > INT_MAX:
            return "more pixels than the GEMM's extent holds"
        return None

    def values(self) -> dict:
        """The 2.x values of the tile as CUTLASS runs it (pixels, output channels, reduction: see
        the module's note; the template reads no iterator: the GEMM has none, and the one named
        here only makes the shared values whole)."""
        return Conv2dFprop2x.values(replace(self, iterator="optimized"))

def expand(path, raw: dict) -> list:
    family = path.stem
    fam = FAMILY.read(path, raw)
    check_alignments(path, fam)
    kernels = []
    for entry, tile in S.read_entries(path, fam["tiles"], "tiles", TILE):
        (m, n, k), (wm, wn, wk) = tile["threadblock"], tile["warps"]
        runs = {**tile, "threadblock": (n, m, k), "warps": (wn, wm, wk)}  # as CUTLASS runs it: pixels first
        check_tile_accesses(path, entry, fam, runs, "NMK")  # its errors in the spec's terms
        kernels += [Conv2dFpropGemm2x(
            family=family, arch=fam["arch"], element=fam["element"], accumulator=fam["accumulator"],
            output=fam["output"], iterator="gemm", instruction=fam["instruction"], threadblock=runs["threadblock"],
            warps=runs["warps"], stages=tile["stages"], alignment=alignment, swizzle=swizzle)
            for alignment in fam["alignments"] for swizzle in fam["swizzles"]]
    return kernels
