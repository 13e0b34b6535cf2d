"""Depthwise convolution kernels of this project (profiler/depthwise.h): groups = C = K, NHWC
activations, K x R x S filters, fp16 or bf16 in and out, fp32 accumulation. A persistent grid walks
the layer's tiles; each CTA copies its next tile's input and taps into shared memory (cp.async, two
stages) while it computes the current one, in 16-byte vectors along C.

A spec lists entries of ``filter`` (R = S: 1, 3, 5, 7, 9 or 11), ``stride`` (1 or 2), ``rows`` (TP, output
rows a CTA's tile spans), ``thread_rows`` and ``columns`` (TPT x TQ, the outputs a thread computes
for two channels), ``channel_vectors`` (CB: 8-channel vectors a CTA spans along C) and ``stages``
(tiles a CTA has in shared memory at once, default 3); the tile's columns are TQ * (threads / 4 /
CB) / (TP / TPT). The stages must fit 227 KiB of shared memory. ``loader = "tma"`` builds the
kernel of profiler/depthwise_tma.h instead: the same arithmetic, each tile's window brought by one
tensor copy and the taps kept in registers from tile to tile (a CTA takes a run of tiles of one
channel block), so its stages hold no taps; it needs SM90 (its name begins ``kernelgen_sm90`` and
ends in ``_tma``), and ``threads = 128`` makes its CTAs of 128 threads (default 256), three a SM
at up to 168 registers a thread (``_cta128``). Other shapes, C not a multiple of 8, a channel
multiplier (K = m*C, m > 1) and dilation other than 1 are ``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import MAX_REGISTERS_PER_THREAD, SHARED_MEMORY, GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise"
TEMPLATE = "depthwise.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
FILTERS = (3, 5, 7, 9, 11)  # R = S: MixNet's 9x9 and 11x11 layers beside the common sizes; ``filter``
# takes 1 besides (the per-channel scale branches of networks not re-parameterized: RepViT, FastViT)
BASE_REGISTERS = 40  # pointers, indices
TMA_BASE_REGISTERS = 12

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((1, *FILTERS))),
    S.Key("stride", S.one_of((1, 2))),
    S.Key("rows", S.one_of((1, 2, 4, 8, 16, 32))),
    S.Key("thread_rows", S.one_of((1, 2, 4, 8)), default=1),
    S.Key("columns", S.integer(1, 8)),
    S.Key("channel_vectors", S.one_of((1, 2, 4, 8, 16, 32))),
    S.Key("stages", S.integer(2, 6), default=3),
    S.Key("loader", S.choice({"cp.async": None, "tma": None}), default="cp.async"),
    S.Key("threads", S.one_of((128, 256)), default=256),
))


@dataclass(frozen=True)
class Depthwise(GroupedKernel):
    family: str
    filter: int
    stride: int
    rows: int
    thread_rows: int
    columns: int
    channel_vectors: int
    stages: int
    loader: str = "cp.async"  # "tma": profiler/depthwise_tma.h
    threads: int = 256  # a CTA's; 128 for a tensor-copy kernel only
    element: str = "f16"

    template = TEMPLATE

    @property
    def includes(self) -> tuple:
        return ("depthwise_tma.h",) if self.loader == "tma" else ("depthwise.h",)

    @property
    def arch(self) -> int:
        """80, or 90 for a kernel of tensor copies (SM90's bulk tensor copy)."""
        return 90 if self.loader == "tma" else 80

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm{self.arch}_simt_dwconv_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}"
                f"_stride{self.stride}_tile{self.rows}x{self.tile_columns()}_t{self.thread_rows}x{self.columns}_c{8 * self.channel_vectors}"
                f"_s{self.stages}" + ("_tma" if self.loader == "tma" else "")
                + ("" if self.threads == 256 else f"_cta{self.threads}"))

    @property
    def filter_shape(self) -> tuple:
        """(R, S): ``filter`` by ``filter`` (a band family's, depthwise_band.py, is R x S)."""
        return self.filter, self.filter

    def refuses_channels(self, c: int):
        """Why a layer of ``c`` channels is not this kernel's (16-byte vectors along C), or None."""
        return None if c % 8 == 0 else "C must be a multiple of 8"

    def refuses_window(self, conv):
        """Why ``conv`` (its groups checked already) is not this kernel's by its filter, stride,
        dilation or channels, or None."""
        r, s = self.filter_shape
        if (conv.r, conv.s, conv.stride_h, conv.stride_w) != (r, s, self.stride, self.stride):
            return f"built for {r}x{s} filters, stride {self.stride}"
        if conv.dilation_h != 1 or conv.dilation_w != 1:
            return "built for dilation 1"
        return self.refuses_channels(conv.c)

    def thread_grid(self) -> tuple:
        """A CTA's threads along the tile's rows and columns (Tile::kPR, Tile::kPC); 0 columns where
        the rows do not divide them."""
        positions = self.threads // 4 // self.channel_vectors  # two channels a thread
        rows = self.rows // self.thread_rows
        return rows, (positions // rows if rows and positions % rows == 0 else 0)

    def tile_columns(self) -> int:
        """Output columns a CTA's tile spans (profiler/depthwise.h: Tile::kQ)."""
        return self.thread_grid()[1] * self.columns

    def shared_bytes(self) -> int:
        """The stages, each the tile's input pixels and (but for a tensor-copy kernel, whose taps stay
        in registers) its taps, 16 bytes a channel vector (Tile::kBytes); a tensor-copy kernel's stages
        are 128-byte aligned (TmaTile::kBytes)."""
        (r, s), (rows_in, columns_in) = self.filter_shape, self.window()
        if self.loader == "tma":  # and the block's taps, once
            return (self.stages * -(-rows_in * columns_in * self.channel_vectors * 16 // 128) * 128
                    + r * s * self.channel_vectors * 16)
        return self.stages * (rows_in * columns_in + r * s) * self.channel_vectors * 16

    def window(self) -> tuple:
        """The input rows and columns of a tile's window (Tile::kInP, kInQ)."""
        r, s = self.filter_shape
        return (self.rows - 1) * self.stride + r, (self.tile_columns() - 1) * self.stride + s

    def registers(self) -> int:
        """A thread's registers, about: TPT x TQ x 2 sums, 2 x R x S taps and a row's window of two
        floats a column, and pointers and indices (fewer in a tensor-copy kernel, whose threads
        compute no copy's address: ptxas gave its 7x7 kernels of 2x4 and 4x4 outputs a thread 146
        and 159)."""
        r, s = self.filter_shape
        window = (self.columns - 1) * self.stride + s
        base = TMA_BASE_REGISTERS if self.loader == "tma" else BASE_REGISTERS
        return 2 * self.thread_rows * self.columns + 2 * r * s + 2 * window + base

    def max_registers(self) -> int:
        """What a thread may keep: 255, or 168 in a CTA of 128 threads (three a SM:
        TmaTile::kMinCtas)."""
        return MAX_REGISTERS_PER_THREAD if self.threads == 256 else 168

    def values(self) -> dict:
        return {"element": self.cuda_element(), "filter": self.filter, "stride": self.stride, "rows": self.rows,
                "thread_rows": self.thread_rows, "columns": self.columns,
                "channel_vectors": self.channel_vectors, "stages": self.stages, "tma": self.loader == "tma",
                "threads": self.threads}




def check(path, entry, kernel) -> None:
    if kernel.threads != 256 and kernel.loader != "tma":
        raise SpecError(path, f"CTAs of {kernel.threads} threads are a tensor-copy kernel's (loader = \"tma\")",
                        entry, "threads")
    positions = kernel.threads // 4 // kernel.channel_vectors
    if kernel.rows % kernel.thread_rows or positions % (kernel.rows // kernel.thread_rows):
        raise SpecError(path, f"rows {kernel.rows} in thread rows of {kernel.thread_rows} do not divide the "
                        f"{positions} threads a CTA of {kernel.channel_vectors} channel vectors has along the pixels",
                        entry, "rows")
    need = kernel.registers()
    if need > kernel.max_registers():
        r, s = kernel.filter_shape
        raise SpecError(path, f"columns {kernel.columns} of a {r}x{s} stride-{kernel.stride} "
                        f"filter need about {need} registers a thread, more than {kernel.max_registers()}",
                        entry, "columns")
    if kernel.shared_bytes() > SHARED_MEMORY:
        raise SpecError(path, f"{kernel.stages} stages of the tile's input and taps need {kernel.shared_bytes()} bytes "
                        f"of shared memory, more than {SHARED_MEMORY}", entry, "stages")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Depthwise, FAMILY, ENTRY, path, raw, TYPES, check)
