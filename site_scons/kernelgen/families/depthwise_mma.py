"""Depthwise convolutions at stride 1 on tensor cores (profiler/depthwise_mma.h): groups = C = K,
NHWC activations, K x R x S filters (R = S = ``filter``: 3, 5 or 7), f16 or bf16 in and out, fp32
accumulation. Each filter row of a channel is a Toeplitz matrix of 16 input by 8 output columns, so
one mma.sync m16n8k16 gives 16 x 8 outputs of a channel for one filter row; a warp keeps the B
fragments of 8 channels in registers. Tiles by tensor copies (SM90), a persistent grid walking the
layer's tiles as the ``tma`` kernels of depthwise.py do.

A spec lists entries of ``filter``, ``rows`` (TP, output rows a CTA's tile spans: even),
``columns`` (TQ, output columns: a multiple of 8), ``channel_vectors`` (CB: 2, 4 or 8 vectors of 8
channels a tile; the window is swizzled at CB x 16 bytes), ``stages`` (windows in flight, default 3)
and ``threads`` (a CTA's, 128 or 256). Each channel vector of a tile takes the same number of
warps. The stages must fit 227 KiB. Stride 2, dilation, C not a multiple of 8 and channel multipliers are
``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import SHARED_MEMORY, GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise_mma"
TEMPLATE = "depthwise_mma.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((3, 5, 7))),
    S.Key("rows", S.integer(2, 64)),  # windows within a tensor copy's box (256 a dimension)
    S.Key("columns", S.integer(8, 128)),
    S.Key("channel_vectors", S.one_of((2, 4, 8))),
    S.Key("stages", S.integer(2, 6), default=3),
    S.Key("threads", S.one_of((128, 256)), default=256),
))


@dataclass(frozen=True)
class DepthwiseMma(GroupedKernel):
    family: str
    filter: int
    rows: int
    columns: int
    channel_vectors: int
    stages: int = 3
    threads: int = 256
    element: str = "f16"

    template = TEMPLATE
    arch = 90  # SM90's bulk tensor copy; mma.sync of SM80

    includes = ("depthwise_mma.h",)

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm90_tensorop_dwconv_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}_stride1"
                f"_tile{self.rows}x{self.columns}_c{8 * self.channel_vectors}_s{self.stages}_cta{self.threads}")

    def window(self) -> tuple:
        """Input rows and columns a tile's tensor copy brings (depthwise_mma::Shape::kInP, kInQ)."""
        return self.rows + self.filter - 1, self.columns + 8

    def shared_bytes(self) -> int:
        """Shape::kBytes: 1024 for alignment, the stages (each rounded up to 1024 bytes) and the block's taps."""
        rows, columns = self.window()
        stage = -(-rows * columns * self.channel_vectors * 16 // 1024) * 1024
        return 1024 + self.stages * stage + -(-self.channel_vectors * 8 * self.filter ** 2 * 2 // 16) * 16

    def registers(self) -> int:
        """About: the warp's channels' B fragments (2 a filter row), 4 sums a channel, two window
        rows' A registers (4 a channel) and four loads, and indices (ptxas: 255 for 7x7, a few bytes
        spilled)."""
        channels = 8  # a warp's
        return 2 * channels * self.filter + 4 * channels + 4 * channels + 2 * channels + 40

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if not conv.groups == conv.c == conv.k:
            return "a depthwise kernel: needs groups = C = K"
        if (conv.r, conv.s) != (self.filter, self.filter):
            return f"built for {self.filter}x{self.filter} filters"
        if (conv.stride_h, conv.stride_w) != (1, 1):
            return "built for stride 1"
        if (conv.dilation_h, conv.dilation_w) != (1, 1):
            return "built for dilation 1"
        return None if conv.c % 8 == 0 else "C must be a multiple of 8"

    def values(self) -> dict:
        return {"element": self.cuda_element(), "filter": self.filter, "rows": self.rows, "columns": self.columns,
                "channel_vectors": self.channel_vectors, "stages": self.stages, "threads": self.threads}


def check(path, entry, kernel) -> None:
    if kernel.rows % 2:
        raise SpecError(path, f"rows {kernel.rows}: a tile is pairs of output rows", entry, "rows")
    if kernel.columns % 8:
        raise SpecError(path, f"columns {kernel.columns}: a tile is blocks of 8 output columns", entry, "columns")
    if (kernel.threads // 32) % kernel.channel_vectors:
        raise SpecError(path, f"{kernel.threads // 32} warps do not divide among {kernel.channel_vectors} channel "
                        "vectors", entry, "channel_vectors")
    if kernel.shared_bytes() > SHARED_MEMORY:
        raise SpecError(path, f"{kernel.stages} stages of the tile's window and taps need {kernel.shared_bytes()} "
                        f"bytes of shared memory, more than {SHARED_MEMORY}", entry, "stages")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseMma, FAMILY, ENTRY, path, raw, TYPES, check)
