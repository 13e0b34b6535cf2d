"""Narrow 3x3 conv2d fprop on tensor cores, kernels of this project (profiler/narrow_conv.h): dense
(groups = 1) 3x3 layers at stride 1 or 2 and dilation 1, any padding, of few channels in and out (C
and K multiples of 8 up to 64), where the implicit GEMMs read each input pixel once a filter tap and
fill a tile of 64 or more output channels with a fraction of them (EfficientNetV2's 24 -> 24 at
112x112, Inception-v3's 32 -> 32 and 32 -> 64 at 147-149 px, DLA-34's 16 -> 32 at stride 2). fp16
NHWC in and out, fp32 accumulation, SM80's ldmatrix, cp.async and mma.sync (which SM90 runs too:
arch 80).

A CTA computes ``tile`` = [rows, columns] output pixels of one image for all K channels from its
input window and the whole filter in shared memory, its ``warps`` warps each a share of the tile's
16-pixel mma tiles; ``schedule`` "tile" launches a CTA a tile, "persistent" as many CTAs as stay on
the GPU, each copying the filter once and the next tile's window while it computes one. A spec
lists entries of ``channels`` [C, K], ``tile``, ``warps``, ``schedule`` and ``stride`` (1 or 2,
default 1). A kernel is built for its C, K and stride: other channels, filters, strides and
dilations are ``unsupported``.

The kernels are fusible (kernelgen.fusion): a fused variant computes its layer's epilogue, a bias,
a residual add before the activation, and the activation in fp32 (GELU by erf), compiled in; it
runs through profiler/narrow_adapter.h's FusedNarrowOperation. Kernels are named
``kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_narrow3x3_c<C>k<K>_tile<rows>x<columns>_warps<n>``
(``narrow3x3_s2_c<C>...`` at stride 2), ``_persistent`` for that schedule, then the epilogue's suffix.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..fusion import ACTIVATION_ENUMERATORS, activation, adds
from ..ops.common import epilogue_steps, epilogue_suffix, fused_op
from .common import SHARED_MEMORY, expand_fixed_type_entries, fixed_type_family

KIND = "conv2d_fprop_narrow"
TEMPLATE = "conv2d_fprop_narrow.mako"
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what narrow_conv.h is written for
CHANNELS = tuple(range(8, 65, 8))  # C and K a kernel may be built for
MOST_ACCUMULATORS = 128  # fp32 accumulators a thread may hold: its warp's tiles x K / 2

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("channels", S.int_tuple(2, 8, 64)),
    S.Key("tile", S.int_tuple(2, 1, 64)),
    S.Key("warps", S.one_of((1, 2, 4, 8))),
    S.Key("schedule", S.choice({"tile": None, "persistent": None}), default="tile"),
    S.Key("stride", S.one_of((1, 2)), default=1),
))


def row_words(words: int) -> int:
    """narrow::row_words: a shared-memory row of ``words`` 32-bit words padded to 4 more than a
    multiple of 8."""
    return words if words % 8 == 4 else words + (12 - words % 8) % 8


def window_pixels(rows: int, columns: int, stride: int) -> int:
    """The input pixels of a tile's window (narrow::Tiling::kWP x kWQ): what its rows x columns
    output pixels read at ``stride`` through a 3x3 filter."""
    return ((rows - 1) * stride + 3) * ((columns - 1) * stride + 3)


def shared_bytes(c: int, k: int, rows: int, columns: int, buffers: int, stride: int = 1) -> int:
    """Shared memory a CTA asks for (narrow::Tiling::kSmemBytes): ``buffers`` input windows
    (``window_pixels``), C channels a pixel's row, the K x 9 x C filter and a zero line of 16 bytes,
    rows padded by ``row_words``."""
    window = window_pixels(rows, columns, stride) * row_words(c // 2)
    return 4 * (buffers * window + k * row_words(9 * c // 2) + 4)


@dataclass(frozen=True)
class Conv2dFpropNarrow:
    family: str
    channels: tuple
    tile: tuple
    warps: int
    schedule: str = "tile"
    stride: int = 1
    fusion: str = ""  # the epilogue it computes (kernelgen.fusion); "" for none

    element = TYPES["element"]
    accumulator = TYPES["accumulator"]
    output = TYPES["output"]
    kernel_op = "conv2d_fprop"
    arch = 80
    arch_specific = False  # ldmatrix, cp.async and mma.sync: SM80 and later
    template = TEMPLATE
    includes = ("narrow_conv.h",)
    adapter_header = "narrow_adapter.h"
    name_ends_with_fusion = True  # its name is its unfused twin's and epilogue_suffix(fusion): fusion.fused
    optional_relu = False  # its activation is compiled in: no kernel of ReLU or none at launch
    measure_unfitted = True  # seconds to compile: measured in full while the cost model has no rows of it

    @property
    def fusible(self) -> bool:
        """Whether a fused variant can be made of it (kernelgen.fusion): any not yet fused."""
        return not self.fusion

    @property
    def op(self) -> str:
        """``kernel_op``, and a fused kernel's epilogue: ``<op>:<epilogue>`` (ops.common.fused_op)."""
        return fused_op(self.kernel_op, self.fusion, True)

    @property
    def adapter(self) -> str:
        return "kernelgen::FusedNarrowOperation" if self.fusion else "kernelgen::NarrowOperation"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def buffers(self) -> int:
        """The input windows a CTA holds: the one it computes and, persistent, the next."""
        return 2 if self.schedule == "persistent" else 1

    @property
    def shared_bytes(self) -> int:
        return shared_bytes(*self.channels, *self.tile, self.buffers, self.stride)

    @property
    def accumulators(self) -> int:
        """A thread's fp32 accumulators: its warp's 16-pixel tiles by K channels, 4 an m16n8 tile."""
        return self.tiles_per_warp * self.channels[1] // 2

    @property
    def tiles_per_warp(self) -> int:
        """The 16-pixel mma tiles each warp computes of a CTA's tile."""
        return self.tile[0] * self.tile[1] // 16 // self.warps

    @property
    def k_steps(self) -> int:
        """mma.sync k-steps of 16 a tile walks: the 9 taps x C / 8 (tap, chunk) pairs, two a step."""
        return (9 * self.channels[0] // 8 + 1) // 2

    def registers(self) -> int:
        """A thread's registers, about (within 21 of ptxas's counts of the family's kernels, CUDA 13.0,
        sm_90a; fitted to them): 0.9 an accumulator, 0.7 an output channel (a k-step's B fragments
        and their rows' addresses), 6 a 16-pixel tile of its warp (an A fragment and its row's
        address), 22 more persistent (the next window's copies), 18 fewer at stride 2, and one."""
        persistent = 22 if self.schedule == "persistent" else 0
        strided = 18 if self.stride == 2 else 0
        return min(255, round(0.9 * self.accumulators + 0.7 * self.channels[1] + 6 * self.tiles_per_warp + persistent
                              - strided + 1))

    @cached_property
    def name(self) -> str:
        c, k = self.channels
        return (f"kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_narrow3x3_"
                + ("" if self.stride == 1 else f"s{self.stride}_") + f"c{c}k{k}"
                f"_tile{self.tile[0]}x{self.tile[1]}_warps{self.warps}"
                + ("_persistent" if self.schedule == "persistent" else "") + epilogue_suffix(self.fusion))

    def refuses(self, conv) -> str | None:
        """Why the kernel cannot compute ``conv`` (NarrowFprop::unsupported), or None."""
        c, k = self.channels
        if conv.groups != 1:
            return "a dense convolution's kernel (groups = 1)"
        if (conv.r, conv.s) != (3, 3):
            return "built for 3x3 filters"
        if (conv.stride_h, conv.stride_w, conv.dilation_h, conv.dilation_w) != (self.stride, self.stride, 1, 1):
            return f"built for stride {self.stride}, dilation 1"
        if (conv.c, conv.k) != (c, k):
            return f"built for {c} -> {k} channels"
        if conv.p < 1 or conv.q < 1:
            return "the padded image is smaller than the filter"
        if conv.n * -(-conv.p // self.tile[0]) * -(-conv.q // self.tile[1]) > (1 << 31) - 1:
            return "more blocks than the kernel's index arithmetic holds"
        return None

    def values(self) -> dict:
        act = activation(self.fusion)
        return {"c": self.channels[0], "k": self.channels[1], "rows": self.tile[0], "columns": self.tile[1],
                "warps": self.warps, "persistent": self.schedule == "persistent", "stride": self.stride,
                "bias": "bias" in epilogue_steps(self.fusion), "add": adds(self.fusion),
                "activation": "kActivation" + ACTIVATION_ENUMERATORS[act][1:],
                "threads": self.threads, "shared_bytes": self.shared_bytes}


def check(path, entry, kernel) -> None:
    """Refuse a kernel that cannot be built, naming the key at fault."""
    c, k = kernel.channels
    for value, what in ((c, "C"), (k, "K")):
        if value not in CHANNELS:
            raise SpecError(path, f"{what} = {value}: the kernels are built for channels that are multiples of 8 "
                            "from 8 to 64", entry, "channels")
    rows, columns = kernel.tile
    if rows * columns % (16 * kernel.warps):
        raise SpecError(path, f"a tile of {rows}x{columns} pixels is not whole 16-pixel mma tiles for each of "
                        f"{kernel.warps} warps", entry, "tile")
    if kernel.accumulators > MOST_ACCUMULATORS:
        raise SpecError(path, f"a thread would hold {kernel.accumulators} fp32 accumulators ({rows}x{columns} "
                        f"pixels by {k} channels on {kernel.warps} warps), more than {MOST_ACCUMULATORS}",
                        entry, "warps")
    if kernel.shared_bytes > SHARED_MEMORY:
        raise SpecError(path, f"the filter and {kernel.buffers} input window(s) of a {rows}x{columns} tile need "
                        f"{kernel.shared_bytes} bytes of shared memory, more than {SHARED_MEMORY}", entry, "tile")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Conv2dFpropNarrow, FAMILY, ENTRY, path, raw, TYPES, check)
