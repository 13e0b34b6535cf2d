"""Depthwise convolution kernels of this project (profiler/depthwise.h): groups = C = K, NHWC
activations, K x R x S filters, fp16 or bf16 in and out, fp32 accumulation. A persistent grid walks
the layer's tiles; each CTA copies its next tile's input and taps into shared memory (cp.async, two
stages) while it computes the current one, in 16-byte vectors along C.

A spec lists entries of ``filter`` (R = S: 3, 5 or 7), ``stride`` (1 or 2), ``rows`` (TP, output
rows a CTA's tile spans), ``thread_rows`` and ``columns`` (TPT x TQ, the outputs a thread computes
for two channels), ``channel_vectors`` (CB: 8-channel vectors a CTA spans along C) and ``stages``
(tiles a CTA has in shared memory at once, default 3); the tile's columns are TQ * (64 / CB) /
(TP / TPT). The stages must fit 227 KiB of shared memory. Other shapes, C not a multiple of 8, a
channel multiplier (K = m*C, m > 1) and dilation other than 1 are ``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise"
TEMPLATE = "depthwise.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
MAX_REGISTERS_PER_THREAD = 255
BASE_REGISTERS = 40  # pointers, indices

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((3, 5, 7))),
    S.Key("stride", S.one_of((1, 2))),
    S.Key("rows", S.one_of((1, 2, 4, 8, 16, 32))),
    S.Key("thread_rows", S.one_of((1, 2, 4, 8)), default=1),
    S.Key("columns", S.integer(1, 8)),
    S.Key("channel_vectors", S.one_of((1, 2, 4, 8, 16, 32))),
    S.Key("stages", S.integer(2, 6), default=3),
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
    element: str = "f16"

    template = TEMPLATE
    includes = ("depthwise.h",)

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm80_simt_dwconv_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}"
                f"_stride{self.stride}_tile{self.rows}x{self.tile_columns()}_t{self.thread_rows}x{self.columns}_c{8 * self.channel_vectors}"
                f"_s{self.stages}")

    def thread_grid(self) -> tuple:
        """A CTA's threads along the tile's rows and columns (Tile::kPR, Tile::kPC); 0 columns where
        the rows do not divide them."""
        positions = 64 // self.channel_vectors  # 256 threads, two channels each
        rows = self.rows // self.thread_rows
        return rows, (positions // rows if rows and positions % rows == 0 else 0)

    def tile_columns(self) -> int:
        """Output columns a CTA's tile spans (profiler/depthwise.h: Tile::kQ)."""
        return self.thread_grid()[1] * self.columns

    def shared_bytes(self) -> int:
        """The stages, each the tile's input pixels and taps, 16 bytes a channel vector (Tile::kBytes)."""
        rows_in = (self.rows - 1) * self.stride + self.filter
        columns_in = (self.tile_columns() - 1) * self.stride + self.filter
        return self.stages * (rows_in * columns_in + self.filter ** 2) * self.channel_vectors * 16

    def registers(self) -> int:
        """A thread's registers, about: TPT x TQ x 2 sums, 2 x R x S taps and a row's window of two
        floats a column."""
        window = (self.columns - 1) * self.stride + self.filter
        return 2 * self.thread_rows * self.columns + 2 * self.filter ** 2 + 2 * window + BASE_REGISTERS

    def values(self) -> dict:
        return {"element": self.cuda_element(), "filter": self.filter, "stride": self.stride, "rows": self.rows,
                "thread_rows": self.thread_rows, "columns": self.columns,
                "channel_vectors": self.channel_vectors, "stages": self.stages}


SHARED_MEMORY = 227 * 1024  # dynamic shared memory a CTA may have on SM90


def check(path, entry, kernel) -> None:
    positions = 64 // kernel.channel_vectors
    if kernel.rows % kernel.thread_rows or positions % (kernel.rows // kernel.thread_rows):
        raise SpecError(path, f"rows {kernel.rows} in thread rows of {kernel.thread_rows} do not divide the "
                        f"{positions} threads a CTA of {kernel.channel_vectors} channel vectors has along the pixels",
                        entry, "rows")
    need = kernel.registers()
    if need > MAX_REGISTERS_PER_THREAD:
        raise SpecError(path, f"columns {kernel.columns} of a {kernel.filter}x{kernel.filter} stride-{kernel.stride} "
                        f"filter need about {need} registers a thread, more than {MAX_REGISTERS_PER_THREAD}",
                        entry, "columns")
    if kernel.shared_bytes() > SHARED_MEMORY:
        raise SpecError(path, f"{kernel.stages} stages of the tile's input and taps need {kernel.shared_bytes()} bytes "
                        f"of shared memory, more than {SHARED_MEMORY}", entry, "stages")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Depthwise, FAMILY, ENTRY, path, raw, TYPES, check)
