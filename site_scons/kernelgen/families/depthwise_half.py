"""Depthwise convolution kernels that multiply and add in fp16 pairs (profiler/depthwise_half.h:
DepthwiseHalf): the tensor-copy kernels of depthwise.py (``loader = "tma"``: a CTA's run of tiles of
one channel block, each tile's window brought by one bulk tensor copy, the taps kept in registers),
fp16 in and out, whose threads compute their two channels as one ``__half2`` by HFMA2 from the
window as shared memory holds it: half the multiply-add instructions of the fp32 kernels and no
conversions, for the 5x5 and 7x7 layers that fp32 multiply-adds bind.

An entry takes depthwise.py's keys but ``loader`` (always ``"tma"``), ``sums``: ``"f16"``
(every product added in fp16) or ``"rows"`` (each filter row's products in fp16, the rows in fp32),
``launch``: ``"stream"`` or ``"pdl"`` (a programmatic dependent launch,
profiler/dependent_kernel.h: its CTAs set up while the kernel before it finishes, and wait for it
before they touch global memory), and ``taps``: ``"staged"`` (a run's first block's taps loaded
after its first windows are asked for, profiler/depthwise_half.h) or ``"first"`` (before them,
profiler/depthwise_half_first.h), or ``"each"`` (every tile's read from global memory into
registers, the run taking a tile's channel blocks in turn, profiler/depthwise_half_each.h).
The family's accumulator is f16 either way, and so is its tolerance (vocab.VERIFY_TOLERANCE). Names
read ``kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_<filter>_..._tma``, ``_rows``
where the rows are summed in fp32, ``_tapsfirst`` where the taps are asked for first, ``_tapseach``
where they are read a tile, ``_pdl`` for a programmatic dependent launch. What
depthwise.py's kernels cannot serve, these cannot.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from .common import (CTA_RESERVED, MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM, SM_SHARED_MEMORY,
                     expand_fixed_type_entries, fixed_type_family)
from .depthwise import ENTRY as DEPTHWISE_ENTRY, Depthwise, check

KIND = "depthwise_half"
TEMPLATE = "depthwise_half.mako"
TYPES = {"element": "f16", "accumulator": "f16", "output": "f16"}
SUMS = ("f16", "rows")
LAUNCHES = ("stream", "pdl")
# each order's header, and what it adds to the name
TAPS = {"staged": "depthwise_half.h", "first": "depthwise_half_first.h", "each": "depthwise_half_each.h"}
TAPS_SUFFIX = {"staged": "", "first": "_tapsfirst", "each": "_tapseach"}
BASE_REGISTERS = 44  # pointers, indices, the run's bounds

FAMILY = fixed_type_family(KIND)
# depthwise.py's keys, whose rows and thread rows also take 14 and 7 (tiles of 14x14 images whole)
WIDER = {"rows": S.Key("rows", S.one_of((1, 2, 4, 7, 8, 14, 16, 32))),
         "thread_rows": S.Key("thread_rows", S.one_of((1, 2, 4, 7, 8)), default=1)}
ENTRY = S.Table((*(WIDER.get(k.name, k) for k in DEPTHWISE_ENTRY.keys if k.name != "loader"),
                 S.Key("sums", S.choice({s: None for s in SUMS}), default="f16"),
                 S.Key("launch", S.choice({s: None for s in LAUNCHES}), default="stream"),
                 S.Key("taps", S.choice({t: None for t in TAPS}), default="staged")))


def half_registers(kernel, row_sums: bool = False) -> int:
    """A thread's registers, about, in a kernel of fp16-pair sums: its TPT x TQ sums of two channels
    (one register each; and two more each for fp32 row sums), the R x S taps and a row's window, one
    register a channel pair, and pointers and indices (ptxas gave 7x7 kernels of 4x4 outputs a
    thread 111 and 141 registers, against the fp32 kernel's 160)."""
    r, s = kernel.filter_shape
    window = (kernel.columns - 1) * kernel.stride + s
    outputs = kernel.thread_rows * kernel.columns
    return outputs * (3 if row_sums else 1) + r * s + window + BASE_REGISTERS


@dataclass(frozen=True)
class DepthwiseHalf(Depthwise):
    sums: str = "f16"  # "rows": each filter row's products in fp16, the rows in fp32
    launch: str = "stream"  # "pdl": a programmatic dependent launch (profiler/dependent_kernel.h)
    taps: str = "staged"  # "first": a run's first block's taps asked for before its windows;
    # "each": a tile's channel blocks in turn, each tile's taps read into registers
    loader: str = "tma"
    accumulator = "f16"

    template = TEMPLATE

    @property
    def includes(self) -> tuple:
        return (TAPS[self.taps],)

    name_stem = "dwconv_half2"  # what a subclass's kernels are (depthwise_multiplier.py's: "dwconv_m2_half2")

    @cached_property
    def name(self) -> str:
        r, s = self.filter_shape
        return (f"kernelgen_sm90_simt_{self.name_stem}_f16nhwc_f16nhwc_f16_f16nhwc_{r}x{s}"
                f"_stride{self.stride}_tile{self.rows}x{self.tile_columns()}_t{self.thread_rows}x{self.columns}"
                f"_c{8 * self.channel_vectors}_s{self.stages}_tma" + ("" if self.threads == 256 else f"_cta{self.threads}")
                + ("_rows" if self.sums == "rows" else "") + TAPS_SUFFIX[self.taps]
                + ("_pdl" if self.launch == "pdl" else ""))

    def registers(self) -> int:
        return half_registers(self, row_sums=self.sums == "rows")

    def max_registers(self) -> int:
        """depthwise.py's, but that a kernel of taps asked for first is built for as many CTAs a SM as its
        shared memory also admits (profiler/depthwise_half_first.h: resident_ctas): 255 registers a
        thread for two CTAs of 128 threads."""
        if self.taps != "first":
            return super().max_registers()
        ctas = max(1, min(384 // self.threads, SM_SHARED_MEMORY // (self.shared_bytes() + CTA_RESERVED)))
        return min(MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM // (ctas * self.threads) // 8 * 8)

    def values(self) -> dict:
        return {**super().values(), "sums": self.sums, "launch": self.launch, "taps": self.taps}


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseHalf, FAMILY, ENTRY, path, raw, TYPES, check)
