"""Depthwise convolution kernels of this project (profiler/depthwise.h): groups = C = K, NHWC
activations, K x R x S filters, fp16 or bf16 in and out, fp32 accumulation. Memory-bound: each
thread reads the input columns its outputs need once per filter row, in 16-byte vectors along C,
the filter's taps from shared memory.

A spec lists entries of ``filter`` (R = S: 3, 5 or 7), ``stride`` (1 or 2), ``rows`` (TP, output
rows a CTA's tile spans), ``columns`` (TQ, output columns a thread computes) and
``channel_vectors`` (CB: 8-channel vectors a CTA spans along C); the tile's columns are TQ * 256 /
(CB * TP). The tile's input and taps must fit 48 KiB of shared memory. Other shapes, C not a
multiple of 8, a channel multiplier (K = m*C, m > 1) and dilation other than 1 are ``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import expand_fixed_type_entries, fixed_type_family

KIND = "depthwise"
TEMPLATE = "depthwise.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
MAX_REGISTERS_PER_THREAD = 255
BASE_REGISTERS = 40  # pointers, indices, a tap vector

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((3, 5, 7))),
    S.Key("stride", S.one_of((1, 2))),
    S.Key("rows", S.one_of((1, 2, 4, 8, 16))),
    S.Key("columns", S.integer(1, 8)),
    S.Key("channel_vectors", S.one_of((4, 8, 16, 32))),
))


@dataclass(frozen=True)
class Depthwise:
    family: str
    filter: int
    stride: int
    rows: int
    columns: int
    channel_vectors: int
    element: str = "f16"

    accumulator = "f32"
    op = "conv2d_fprop_grouped"
    arch = 80
    arch_specific = False  # plain CUDA
    template = TEMPLATE
    includes = ("depthwise.h",)
    adapter = "kernelgen::DepthwiseOperation"
    adapter_header = "depthwise_adapter.h"

    @property
    def output(self) -> str:
        return self.element

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm80_simt_dwconv_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.filter}x{self.filter}"
                f"_stride{self.stride}_tile{self.rows}x{self.tile_columns()}_q{self.columns}_c{8 * self.channel_vectors}")

    def tile_columns(self) -> int:
        """Output columns a CTA's tile spans (profiler/depthwise.h: Tile::kQ)."""
        return 256 // self.channel_vectors // self.rows * self.columns

    def shared_bytes(self) -> int:
        """The tile's input pixels and the taps, 16 bytes a channel vector (Tile::kBytes)."""
        rows_in = (self.rows - 1) * self.stride + self.filter
        columns_in = (self.tile_columns() - 1) * self.stride + self.filter
        return (rows_in * columns_in + self.filter ** 2) * self.channel_vectors * 16

    def registers(self) -> int:
        """A thread's registers, about: TQ x 8 sums, the row's input window of 8 floats a column."""
        window = (self.columns - 1) * self.stride + self.filter
        return 8 * self.columns + 8 * window + BASE_REGISTERS

    def values(self) -> dict:
        cpp = {"f16": "__half", "bf16": "__nv_bfloat16"}[self.element]
        return {"element": cpp, "filter": self.filter, "stride": self.stride, "rows": self.rows,
                "columns": self.columns, "channel_vectors": self.channel_vectors}


SHARED_MEMORY = 48 * 1024  # static shared memory a CTA may declare


def check(path, entry, kernel) -> None:
    slots = 256 // kernel.channel_vectors
    if slots % kernel.rows:
        raise SpecError(path, f"rows {kernel.rows} do not divide the {slots} thread slots of a CTA of "
                        f"{kernel.channel_vectors} channel vectors", entry, "rows")
    if kernel.shared_bytes() > SHARED_MEMORY:
        raise SpecError(path, f"the tile's input and taps need {kernel.shared_bytes()} bytes of shared memory, more "
                        f"than {SHARED_MEMORY}", entry, "rows")
    need = kernel.registers()
    if need > MAX_REGISTERS_PER_THREAD:
        raise SpecError(path, f"columns {kernel.columns} of a {kernel.filter}x{kernel.filter} stride-{kernel.stride} "
                        f"filter need about {need} registers a thread, more than {MAX_REGISTERS_PER_THREAD}",
                        entry, "columns")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Depthwise, FAMILY, ENTRY, path, raw, TYPES, check)
