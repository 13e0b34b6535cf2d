"""Few-channels conv2d fprop for first layers (profiler/conv_few_channels.h): C = 1 to 4 input
channels (an RGB or RGBA image), any filter size, stride, padding and dilation, any multiple of
8 output channels; fp16 NHWC in and out, fp32 accumulation, SM80's ldmatrix and mma.sync (which
SM90 runs too: arch 80).

Each persistent CTA keeps a ``tile[1]``-output-channel slice of the filter in shared memory and
walks ``tile[0]``-pixel tiles, building each tile's im2col block in shared memory from the NHWC
input. A spec lists entries of ``tile`` [pixels, output channels], ``warps`` [along pixels,
along channels], ``reduction`` (the most reduction columns the kernel holds: R times S*C rounded
up to 8, rounded up to 16; 7x7x3 takes 176) and ``blocks`` (CTAs per SM the kernel is built
for: its ``__launch_bounds__``). Tiles that cannot work are refused before anything is
generated: warps that do not divide the tile into 16 x 16 blocks, more threads than an SM
holds, more registers than ``blocks`` CTAs leave a thread, more shared memory than SM80 has.

``mode`` picks the tiling: ``"im2col"`` (the default) builds the im2col tile as above;
``"rows"`` builds none: each tile's input rows are staged in shared memory once, every pixel
widened to 4 halves, and the MMA's A fragments are read straight from them (reduction column
s*4 + c of filter row r; S*4 rounded up to 16 a row, 7x7 -> 224). A rows entry names
``staged``, the most input pixels (8 bytes each) a tile stages: a layer whose tile needs more
(a wide image) is ``unsupported``, as is dilation along W. Rows kernels are named ``..._rows_``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..targets import TARGETS
from .common import MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM, expand_fixed_type_entries, fixed_type_family

KIND = "conv2d_fprop_few_channels"
TEMPLATE = "conv2d_fprop_few_channels.mako"
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what the kernels are written for
PIECE = 8  # halves per 16-byte chunk: the padding of each shared-memory row
MAX_THREADS_PER_CTA = 1024
MAX_THREADS_PER_SM = 2048
# Registers a thread needs besides its accumulators and one k-step's operand fragments
# (addresses, indices, the im2col copy's 16-byte chunks), as ptxas allots them.
BASE_REGISTERS = 32

# The tiling modes and the C++ kernel template each one instantiates (profiler/conv_few_channels.h).
MODES = {"im2col": "FewChannelsFprop", "rows": "FewChannelsRowsFprop"}
ROWS_PIXEL_BYTES = 8  # a staged input pixel: C channels padded to 4 halves

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("mode", S.choice(MODES), "im2col"),
    S.Key("tile", S.int_tuple(2, 16, 512)),
    S.Key("warps", S.int_tuple(2, 1, 16)),
    S.Key("reduction", S.integer(16, 4096)),
    S.Key("staged", S.integer(2, 1 << 16), None),  # rows mode only
    S.Key("blocks", S.integer(1, 32)),
))


def shared_bytes(bm: int, bn: int, reduction: int) -> int:
    """Shared memory a CTA asks for at most (few_channels::shared_bytes): the filter slice and the
    im2col tile (which doubles as the epilogue's [bm x (bn + 8)] staging), each row padded by one
    16-byte chunk, and 16 bytes of pixel table per pixel."""
    return 2 * (bn * (reduction + PIECE) + bm * (max(reduction, bn) + PIECE)) + 16 * bm


def rows_shared_bytes(bm: int, bn: int, reduction: int, staged: int) -> int:
    """Shared memory a rows-mode CTA asks for at most (few_channels::rows_shared_bytes): the filter
    slice (rows padded by one 16-byte chunk), ``staged`` input pixels of 8 bytes and the epilogue's
    [bm x (bn + 8)] staging."""
    return 2 * bn * (reduction + PIECE) + ROWS_PIXEL_BYTES * staged + 2 * bm * (bn + PIECE)


def registers(bm: int, bn: int, wm: int, wn: int) -> int:
    """A thread's registers: fp32 accumulators of its warp's (bm / wm) x (bn / wn) tile, the
    m16 x k16 and k16 x n8 fragments of one k-step, and BASE_REGISTERS."""
    tm, tn = bm // wm, bn // wn
    return tm * tn // 32 + (tm // 16) * 4 + (tn // 8) * 2 + BASE_REGISTERS


@dataclass(frozen=True)
class Conv2dFpropFewChannels:
    family: str
    mode: str
    tile: tuple
    warps: tuple
    reduction: int
    staged: object  # int in rows mode, None in im2col mode
    blocks: int

    element = TYPES["element"]
    accumulator = TYPES["accumulator"]
    output = TYPES["output"]
    op = "conv2d_fprop"
    arch = 80
    arch_specific = False  # ldmatrix and mma.sync: SM80 and later
    template = TEMPLATE
    includes = ("conv_few_channels.h",)
    adapter = "kernelgen::FewChannelsOperation"
    adapter_header = "few_channels_adapter.h"

    @property
    def threads(self) -> int:
        return 32 * self.warps[0] * self.warps[1]

    @cached_property
    def name(self) -> str:
        mode = f"rows_{self.tile[0]}x{self.tile[1]}_k{self.reduction}_staged{self.staged}" if self.mode == "rows" \
            else f"{self.tile[0]}x{self.tile[1]}_k{self.reduction}"
        return (f"kernelgen_sm80_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_few_channels_{mode}"
                f"_warps{self.warps[0]}x{self.warps[1]}_blocks{self.blocks}")

    @property
    def shared_bytes(self) -> int:
        if self.mode == "rows":
            return rows_shared_bytes(*self.tile, self.reduction, self.staged)
        return shared_bytes(*self.tile, self.reduction)

    def values(self) -> dict:
        return {"mode": self.mode, "type": MODES[self.mode], "bm": self.tile[0], "bn": self.tile[1],
                "wm": self.warps[0], "wn": self.warps[1], "reduction": self.reduction, "staged": self.staged,
                "blocks": self.blocks, "threads": self.threads, "shared_bytes": self.shared_bytes}


def layer_columns(kernel, conv) -> int:
    """The reduction columns a few-channels kernel walks for ``conv``: S*C rounded up to 8 a filter
    row (im2col), S*4 rounded up to 16 (rows)."""
    if kernel.mode != "rows":  # im2col, and the packed kernels' 1x1 layers
        return conv.r * -(-conv.s * conv.c // 8) * 8
    return conv.r * -(-conv.s * 4 // 16) * 16


def layer_fits(kernel, conv) -> str | None:
    """Whether a layer's reduction, and in rows mode its staged input rows, fit the kernel
    (profiler/conv_few_channels.h: im2col columns of S*C rounded up to 8 a filter row, rows-mode
    columns of S*4 rounded up to 16; a tile of ``tile[0]`` pixels spans that many output rows at
    most, plus one, whose input rows of W + 2*pad pixels are staged)."""
    columns = layer_columns(kernel, conv)
    if kernel.mode == "rows":
        if conv.dilation_w != 1:
            return "a rows kernel takes no dilation along W"
        spanned = -(-kernel.tile[0] // conv.q) + 1
        rows = (min(spanned, conv.p) - 1) * conv.stride_h + (conv.r - 1) * conv.dilation_h + 1
        if rows * (conv.w + 2 * conv.pad_w) > kernel.staged:
            return f"stages at most {kernel.staged} input pixels"
    if columns > kernel.reduction:
        return f"a reduction of {columns} columns exceeds the kernel's {kernel.reduction}"
    return None


def check(path, entry, kernel) -> None:
    """Refuse a kernel that cannot be built or cannot run, naming the key at fault."""
    (bm, bn), (wm, wn) = kernel.tile, kernel.warps
    if kernel.mode == "rows" and kernel.staged is None:
        raise SpecError(path, "a rows kernel needs staged: the most input pixels a tile stages", entry, "staged")
    if kernel.mode == "im2col" and kernel.staged is not None:
        raise SpecError(path, "only a rows kernel stages input rows (mode = \"rows\")", entry, "staged")
    if kernel.mode == "rows" and kernel.staged % 2:
        raise SpecError(path, f"staged {kernel.staged} is odd: staged rows hold whole 16-byte pairs of pixels",
                        entry, "staged")
    if kernel.threads > MAX_THREADS_PER_CTA:
        raise SpecError(path, f"{wm}x{wn} warps are {kernel.threads} threads, more than a CTA's "
                        f"{MAX_THREADS_PER_CTA}", entry, "warps")
    if bm % (16 * wm) or bn % (16 * wn):
        raise SpecError(path, f"tile {bm}x{bn} does not split into {wm}x{wn} warp tiles of whole 16 x 16 "
                        "blocks", entry, "tile")
    if kernel.reduction % 16:
        raise SpecError(path, f"reduction {kernel.reduction} is not a multiple of 16 (mma.sync's K)", entry,
                        "reduction")
    if kernel.blocks * kernel.threads > MAX_THREADS_PER_SM:
        raise SpecError(path, f"{kernel.blocks} CTAs of {kernel.threads} threads are more than an SM's "
                        f"{MAX_THREADS_PER_SM} threads", entry, "blocks")
    budget = min(MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM // (kernel.blocks * kernel.threads) // 8 * 8)
    need = registers(bm, bn, wm, wn)
    if need > budget:
        raise SpecError(path, f"a thread of a {bm}x{bn} tile on {wm}x{wn} warps needs about {need} registers; "
                        f"{kernel.blocks} CTAs of {kernel.threads} threads per SM leave it {budget}", entry,
                        "blocks")
    limit = TARGETS[80].shared_memory
    if kernel.shared_bytes > limit and kernel.mode == "rows":
        raise SpecError(path, f"tile {bm}x{bn} with reduction {kernel.reduction} and {kernel.staged} staged pixels "
                        f"needs {kernel.shared_bytes} bytes of shared memory, more than SM80's {limit}",
                        entry, "staged")
    if kernel.shared_bytes > limit:
        raise SpecError(path, f"tile {bm}x{bn} with reduction {kernel.reduction} needs {kernel.shared_bytes} bytes "
                        f"of shared memory, more than SM80's {limit}", entry, "reduction")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Conv2dFpropFewChannels, FAMILY, ENTRY, path, raw, TYPES, check)
