"""Packed 1x1 conv2d fprop for memory-bound layers of few channels, above all those whose input or
output channels are no multiple of 8 (profiler/conv_packed.h: PackedPointwiseFprop): a 1x1 filter
at stride 1 without padding, any C up to the kernel's ``reduction`` (C rounded up to 8, then 16),
any K; fp16 NHWC in and out, fp32 accumulation, SM80's ldmatrix and mma.sync (which SM90 runs
too: arch 80).

An entry of ``stages`` 2 to 4 (profiler/conv_packed_pipelined.h: PackedPipelinedFprop) copies each
tile's contiguous input run whole into a ring of ``stages`` staging buffers (cp.async, 16-byte
pieces), ``stages`` - 1 tiles ahead of the one it computes, and builds the tile's A rows from
there; ``stages`` 1 (the default) builds them from global memory, a thread a pixel. Its name ends
``_stages<n>``. A pipelined entry may take ``launch = "pdl"`` (a programmatic dependent launch,
profiler/dependent_kernel.h, sm_90: ``kernelgen_sm90_..._pdl``).

A tile of ``tile[0]`` consecutive pixels reads one contiguous run of its pixels' inputs and, where
the kernel's ``tile[1]`` output channels hold every K, writes one contiguous run of their outputs:
the kernel loads the run by 16-byte chunks and stores it in 16-byte pieces whatever C and K are,
where kernels of 2- and 4-byte accesses scatter a warp's stores over rows. The few-channels
kernels' persistent CTA (conv2d_few_channels.py: a filter slice kept in shared memory, ldmatrix
and mma.sync on an A tile built there); a spec lists the same ``tile``, ``warps``, ``reduction``
and ``blocks``, refused alike. Other filters, strides or padding and C over the reduction are
``unsupported``. Kernels are named ``..._packed_<tile>_k<reduction>_...``.
"""

from dataclasses import dataclass
from functools import cached_property, partial

from .. import spec_schema as S
from ..errors import SpecError
from .common import expand_fixed_type_entries, fixed_type_family
from .conv2d_few_channels import ENTRY as FEW_CHANNELS_ENTRY, PIECE, TYPES, Conv2dFpropFewChannels, check
from .conv2d_few_channels import shared_bytes as few_channels_shared_bytes

KIND = "conv2d_fprop_packed"
TEMPLATE = "conv2d_fprop_packed.mako"
MODE = "packed"
INT_MAX = (1 << 31) - 1  # packed::fprop_kernel indexes pixels in int

FAMILY = fixed_type_family(KIND)
# the few-channels kernels' keys less the tiling mode and its staged rows
ENTRY = S.Table((*(key for key in FEW_CHANNELS_ENTRY.keys if key.name not in ("mode", "staged")),
                 S.Key("stages", S.integer(1, 4), 1),
                 S.Key("launch", S.choice({"stream": None, "pdl": None}), default="stream")))


def shared_bytes(bm: int, bn: int, reduction: int) -> int:
    """Shared memory a CTA asks for at most (packed::shared_bytes): the few-channels kernel's for a
    1x1 filter less its pixel table (16 bytes a pixel)."""
    return few_channels_shared_bytes(bm, bn, reduction) - 16 * bm


def staged_halves(bm: int, c: int) -> int:
    """Halves a pipelined kernel's staging buffer takes (packed_pipelined::staged_halves): ``bm``
    pixels of ``c`` channels in whole 16-byte pieces, and one piece more."""
    return -(-bm * c // PIECE) * PIECE + PIECE


def reduction_columns(c: int) -> int:
    """The reduction a layer of ``c`` input channels takes: C rounded up to 8, then to 16."""
    return -(-(-(-c // PIECE) * PIECE) // 16) * 16


@dataclass(frozen=True)
class Conv2dFpropPacked(Conv2dFpropFewChannels):
    stages: int = 1  # 2 to 4: staging buffers of the pipelined kernel
    launch: str = "stream"  # "pdl": a programmatic dependent launch (pipelined kernels; sm_90)
    template = TEMPLATE

    @property
    def arch(self) -> int:
        """80 (mma.sync); 90 for a programmatic dependent launch (griddepcontrol)."""
        return 90 if self.launch == "pdl" else 80

    @property
    def includes(self) -> tuple:
        return ("conv_packed_pipelined.h",) if self.stages > 1 else ("conv_packed.h",)

    @cached_property
    def name(self) -> str:
        return (f"kernelgen_sm{self.arch}_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_packed_{self.tile[0]}x{self.tile[1]}"
                f"_k{self.reduction}_warps{self.warps[0]}x{self.warps[1]}_blocks{self.blocks}"
                + (f"_stages{self.stages}" if self.stages > 1 else "") + ("_pdl" if self.launch == "pdl" else ""))

    @property
    def shared_bytes(self) -> int:
        staging = 2 * self.stages * staged_halves(self.tile[0], self.reduction) if self.stages > 1 else 0
        return shared_bytes(*self.tile, self.reduction) + staging

    def values(self) -> dict:
        pipelined = {"type": "PackedPipelinedFprop", "stages": self.stages, "pdl": self.launch == "pdl"} \
            if self.stages > 1 else {"type": "PackedPointwiseFprop"}
        return {**pipelined, "bm": self.tile[0], "bn": self.tile[1], "wm": self.warps[0], "wn": self.warps[1],
                "reduction": self.reduction, "blocks": self.blocks, "threads": self.threads,
                "shared_bytes": self.shared_bytes}

    def refuses(self, conv) -> str | None:
        """Why the kernel cannot compute ``conv`` (PackedPointwiseFprop::unsupported), or None."""
        if (conv.r, conv.s, conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w) != (1, 1, 1, 1, 0, 0):
            return "built for 1x1 filters at stride 1 without padding"
        if reduction_columns(conv.c) > self.reduction:
            return f"C = {conv.c} takes {reduction_columns(conv.c)} reduction columns, more than the kernel's {self.reduction}"
        if conv.n * conv.h * conv.w >= INT_MAX:
            return "the tensors are too large for the kernel's index arithmetic"
        return None


def check_packed(path, entry, kernel) -> None:
    """The few-channels kernels' checks, and a programmatic dependent launch for the pipelined
    kernels alone (conv_packed.h's kernel has none)."""
    check(path, entry, kernel)
    if kernel.launch == "pdl" and kernel.stages == 1:
        raise SpecError(path, "a programmatic dependent launch is the pipelined kernels' (stages 2 to 4)", entry,
                        "launch")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(partial(Conv2dFpropPacked, mode=MODE, staged=None), FAMILY, ENTRY, path, raw,
                                     TYPES, check_packed)
