"""Grouped 3x3 convolutions of 4 to 64 channels a group on tensor cores, kernels of this project
(profiler/grouped_mma.h): 1 < groups < C, K = C, NHWC activations, KRS(C/groups) filters, fp16 or
bf16 in and out, fp32 accumulation. A CTA of 8 warps computes ``rows`` output rows by ``columns``
output columns of one image for all C channels, or a slice of them where the layer has few tiles,
from its input window in shared memory, ``mma.sync`` m16n8k16 on 16-pixel tiles.

A spec lists entries of ``channels_per_group`` (4, 8, 16, 24, 32, 48, 56 or 64: the layer's C / groups, and its K /
groups), ``stride`` (1 or 2), ``rows`` (1, 2, 4 or 8), ``columns`` (16, 32, 48 or 64, or 8 with
an even number of rows: its 16-pixel mma tiles span two rows of 8, for images 7 or 14 wide) and
``window`` ("plain", or at stride 2 "parity": each row of the window keeps its even columns, then
its odd ones, so that the pixels an ldmatrix reads fall in different banks), and optionally
``max_channels`` (64, 128 or 256: the most channels a CTA computes, profiler/grouped_mma_sliced.h; a
window of fewer channels lets several CTAs share a SM, one loading while another computes) and
``schedule`` ("tile": a CTA a tile; "pipelined", with ``max_channels``: persistent CTAs of one slice
of exactly that many channels each, their filters loaded once and the next tile's window loading
into a second buffer while they compute, profiler/grouped_mma_pipelined.h; "spread", with ``units``
(1 to 8): a CTA a tile and a slice of exactly that many units of output channels, warps sharing a
unit where the slice has fewer than 8, profiler/grouped_mma_spread.h: layers of 9, 20 or 49 units,
which the other schedules never cut; "spread_pipelined", with ``units``: those slices on the
pipelined schedule's persistent CTAs, profiler/grouped_mma_spread_pipelined.h), and for those
``launch`` ("stream", or "pdl": a programmatic dependent launch, profiler/dependent_kernel.h, sm_90:
its CTAs scheduled while the kernel before it finishes, waiting for it before they load; named
``kernelgen_sm90_..._pdl``) and ``loads`` ("indexed": each 16-byte copy of a window finds its place
from its index; "listed", spread_pipelined only: each thread lists its copies once, before its first
tile, profiler/grouped_mma_listed.h; named ``..._listed``). Other
filters, dilation other than 1, K other than C, and layers whose window of C channels exceeds 227
KiB of shared memory are ``unsupported``.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import SHARED_MEMORY, GroupedKernel, expand_fixed_type_entries, fixed_type_family

KIND = "grouped_mma"
TEMPLATE = "grouped_mma.mako"
TYPES = ({"element": "f16", "accumulator": "f32", "output": "f16"},
         {"element": "bf16", "accumulator": "f32", "output": "bf16"})
REGISTERS = {4: 64, 8: 48, 16: 96, 24: 71, 32: 168, 48: 128, 56: 180, 64: 192}  # by channels a group: GroupedMma.registers
WIDE = (48, 56)  # channels a group whose Unit profiler/grouped_mma_wide.h gives

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("channels_per_group", S.one_of((4, 8, 16, 24, 32, 48, 56, 64))),
    S.Key("stride", S.one_of((1, 2))),
    S.Key("rows", S.one_of((1, 2, 4, 8))),
    S.Key("columns", S.one_of((8, 16, 32, 48, 64))),
    S.Key("window", S.choice({"plain": None, "parity": None}), default="plain"),
    S.Key("max_channels", S.one_of((64, 128, 256)), default=None),
    S.Key("schedule", S.choice({"tile": None, "pipelined": None, "spread": None, "spread_pipelined": None}),
          default="tile"),
    S.Key("units", S.one_of(tuple(range(1, 9))), default=None),
    S.Key("launch", S.choice({"stream": None, "pdl": None}), default="stream"),
    S.Key("loads", S.choice({"indexed": None, "listed": None}), default="indexed"),
))


@dataclass(frozen=True)
class GroupedMma(GroupedKernel):
    family: str
    channels_per_group: int
    stride: int
    rows: int
    columns: int
    window: str = "plain"  # "parity": each window row's even columns, then its odd ones (stride 2)
    element: str = "f16"
    max_channels: int | None = None  # the most channels a CTA computes; None: all C
    schedule: str = "tile"  # "pipelined": persistent CTAs of a slice of max_channels, two windows;
    # "spread": a CTA a tile and a slice of ``units`` units; "spread_pipelined": those slices on
    # persistent CTAs, two windows
    units: int | None = None  # the units of output channels a CTA computes (the spread schedules)
    launch: str = "stream"  # "pdl": a programmatic dependent launch (spread_pipelined; sm_90)
    loads: str = "indexed"  # "listed": a thread's window copies listed once (spread_pipelined)

    template = TEMPLATE

    @property
    def arch(self) -> int:
        """80 (mma.sync); 90 for a programmatic dependent launch (griddepcontrol)."""
        return 90 if self.launch == "pdl" else 80

    @property
    def includes(self) -> tuple:
        wide = ("grouped_mma_wide.h",) if self.channels_per_group in WIDE else ()
        if self.schedule == "pipelined":
            return ("grouped_mma_pipelined.h",) + wide
        if self.schedule == "spread":
            return ("grouped_mma_spread.h",) + wide
        if self.schedule == "spread_pipelined":
            return ("grouped_mma_listed.h" if self.loads == "listed" else "grouped_mma_spread_pipelined.h",) + wide
        return (("grouped_mma.h",) if self.max_channels is None else ("grouped_mma_sliced.h",)) + wide

    @property
    def buffers(self) -> int:
        """The windows a CTA holds in shared memory."""
        return 2 if self.schedule in ("pipelined", "spread_pipelined") else 1

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm{self.arch}_tensorop_gconv_{t}nhwc_{t}nhwc_f32_{t}nhwc_g{self.channels_per_group}_3x3"
                f"_stride{self.stride}_tile{self.rows}x{self.columns}" + ("_parity" if self.window == "parity" else "")
                + ("" if self.max_channels is None else f"_slice{self.max_channels}")
                + ("_pipelined" if self.schedule == "pipelined" else "")
                + ("" if self.units is None else f"_units{self.units}")
                + ("_pipelined" if self.schedule == "spread_pipelined" else "") + ("_pdl" if self.launch == "pdl" else "")
                + ("_listed" if self.loads == "listed" else ""))

    def registers(self) -> int:
        """A thread's registers, as ptxas gives them on sm_90a (CUDA 13.0; the tile changes them by
        a few): the filter's fragments for every k-step stay in registers, so they grow with the
        channels a group. 256 threads of 168 make one CTA an SM at 32 channels a group. Listed loads
        keep three more a copy a thread makes of a window."""
        listed = 3 * -(-self.window_pixels * self.fixed_slice // 8 // 256) if self.loads == "listed" else 0
        return min(255, REGISTERS[self.channels_per_group] + listed)

    @property
    def window_pixels(self) -> int:
        """The pixels of a CTA's input window: (rows - 1) x stride + 3 by (columns - 1) x stride + 3."""
        return ((self.rows - 1) * self.stride + 3) * ((self.columns - 1) * self.stride + 3)

    @property
    def fixed_slice(self) -> int | None:
        """The channels a CTA computes whatever the layer: a pipelined kernel's ``max_channels``, a
        spread one's ``units`` units of output channels; None where the layer decides (``slice``)."""
        if self.units is not None:
            return self.units * self.unit_channels // 8
        return self.max_channels if self.schedule == "pipelined" else None

    @property
    def unit_channels(self) -> int:
        """The channels a CTA computes at least: a unit of output channels (Unit::kOut: 16 of a
        group of 16 or 32, else 8) for each of its 8 warps."""
        return 8 * (16 if self.channels_per_group in (16, 32) else 8)

    def window_bytes(self, channels: int) -> int:
        """Shared memory of a CTA's input window of ``channels`` channels (profiler/grouped_mma.h:
        Window::bytes): its pixels, 2 bytes a channel and 16 of padding each."""
        return self.window_pixels * (2 * channels + 16)

    def pixel_tiles(self, conv) -> int:
        """The layer's tiles of ``rows`` x ``columns`` output pixels, over its images."""
        return conv.n * -(-conv.p // self.rows) * -(-conv.q // self.columns)

    def slice(self, conv, ctas: int) -> int:
        """The channels a CTA computes on ``conv`` with ``ctas`` CTAs to fill (profiler/grouped_mma.h
        and grouped_mma_sliced.h: slice): all C, or C halved while over ``max_channels`` or while
        the layer has fewer tiles than two a CTA, as long as each half still holds whole groups and a
        unit of output channels for each of the 8 warps. ``ctas`` = 0: the most a launch gives a CTA.
        A pipelined kernel's CTAs compute ``max_channels``, a spread one's its ``units``, always."""
        if self.fixed_slice is not None:
            return self.fixed_slice
        tiles = self.pixel_tiles(conv)
        most = conv.c if self.max_channels is None else self.max_channels
        channels = conv.c
        while (channels % 2 == 0 and (channels // 2) % self.unit_channels == 0 and (channels // 2) % self.channels_per_group == 0
               and conv.n * (conv.c // channels) * 2 <= 65535 and (channels > most or tiles * (conv.c // channels) < 2 * ctas)):
            channels //= 2
        return channels

    def refuses(self, conv) -> str | None:
        """Why the kernel cannot run the grouped convolution ``conv`` (its can_implement), or None."""
        cg = self.channels_per_group
        if conv.groups < 2 or conv.c % conv.groups or conv.c // conv.groups != cg or conv.k != conv.c:
            return f"built for {cg} channels a group in and out (K = C = {cg} x groups)"
        if (conv.r, conv.s) != (3, 3):
            return "built for 3x3 filters"
        if (conv.stride_h, conv.stride_w) != (self.stride, self.stride):
            return f"built for stride {self.stride}"
        if conv.dilation_h != 1 or conv.dilation_w != 1:
            return "built for dilation 1"
        if conv.c % 8:
            return "C must be a multiple of 8 (16-byte accesses along C)"
        slice_ = self.fixed_slice
        if slice_ is not None:
            if conv.c % slice_:
                return f"C must be a multiple of the slice of {slice_} channels"
            if self.units is not None and (conv.n * (conv.c // slice_) > 65535 or -(-conv.p // self.rows) > 65535):
                return "more images or tile rows than a grid holds"
            return None
        if self.max_channels is None:
            if self.window_bytes(conv.c) > SHARED_MEMORY:
                return f"the input window of {conv.c} channels needs more than {SHARED_MEMORY} bytes of shared memory"
            return None
        most = self.slice(conv, 0)
        if self.window_bytes(most) > SHARED_MEMORY:
            return f"the input window of a slice of {most} channels needs more than {SHARED_MEMORY} bytes of shared memory"
        if conv.n * (conv.c // most) > 65535:
            return "more images or tile rows than a grid holds"
        return None

    def values(self) -> dict:
        return {"element": self.cuda_element(), "channels_per_group": self.channels_per_group, "stride": self.stride,
                "rows": self.rows, "columns": self.columns, "parity": self.window == "parity",
                "slice": self.max_channels, "pipelined": self.buffers == 2,
                "units": self.units, "pdl": self.launch == "pdl", "listed": self.loads == "listed"}


def check(path, entry, kernel) -> None:
    unit = kernel.unit_channels
    if kernel.max_channels is not None and (kernel.max_channels % unit or kernel.max_channels % kernel.channels_per_group):
        raise SpecError(path, f"a slice of {kernel.max_channels} channels is not whole groups of "
                        f"{kernel.channels_per_group} and a unit of {unit // 8} output channels for each of the 8 warps",
                        entry, "max_channels")
    spread = kernel.schedule in ("spread", "spread_pipelined")
    if spread != (kernel.units is not None):
        raise SpecError(path, "units (the units of output channels a CTA computes) is the spread schedule's, and "
                        "it needs them", entry, "units")
    if spread:
        slice_ = kernel.fixed_slice
        if kernel.max_channels is not None:
            raise SpecError(path, "a spread kernel's slice is its units: max_channels does not apply", entry,
                            "max_channels")
        if slice_ % kernel.channels_per_group:
            raise SpecError(path, f"a slice of {kernel.units} units of {unit // 8} output channels is not whole groups "
                            f"of {kernel.channels_per_group}", entry, "units")
    if kernel.loads == "listed" and kernel.schedule != "spread_pipelined":
        raise SpecError(path, "listed window copies are the spread_pipelined schedule's", entry, "loads")
    if kernel.launch == "pdl" and kernel.schedule != "spread_pipelined":
        raise SpecError(path, "a programmatic dependent launch is the spread_pipelined schedule's", entry, "launch")
    if kernel.schedule == "pipelined" and kernel.max_channels is None:
        raise SpecError(path, "a pipelined kernel computes a slice of max_channels: name it", entry, "schedule")
    if kernel.buffers == 2:
        slice_ = kernel.fixed_slice
        need = kernel.buffers * kernel.window_bytes(slice_)
        if need > SHARED_MEMORY:
            raise SpecError(path, f"two windows of {slice_} channels need {need} bytes of shared memory, "
                            f"more than {SHARED_MEMORY}", entry, "schedule")
    if kernel.window == "parity" and kernel.stride != 2:
        raise SpecError(path, "a window split by column parity serves stride 2 only", entry, "window")
    if kernel.columns == 8 and kernel.rows % 2:
        raise SpecError(path, f"a tile of 8 columns takes its 16-pixel mma tiles from two rows: {kernel.rows} rows "
                        "is not a whole number of them", entry, "rows")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(GroupedMma, FAMILY, ENTRY, path, raw, TYPES, check)
