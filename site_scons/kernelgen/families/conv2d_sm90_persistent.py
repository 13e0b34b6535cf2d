"""Persistent CUTLASS 3.x conv2d fprop on SM90: CUTLASS's implicit-GEMM conv mainloop (TMA
im2col, wgmma) inside GemmUniversal's persistent kernels with two consumer warpgroups,
cooperative or ping-pong (profiler/conv_sm90_persistent.h). CUTLASS 4.2's conv builder
offers SM90 convolutions with one consumer warpgroup only (family ``conv2d_fprop_sm90``).

A spec lists entries as the ``gemm_sm90`` family does: a tile shape with a schedule, a tile
scheduler and the cluster shapes to build it with. Each entry x cluster is one kernel; each
serves every NHWC convolution whose channels are multiples of 16 bytes (strided, padded,
any filter size).
"""

from dataclasses import dataclass

from . import conv2d_sm90, gemm_sm90
from .gemm_sm90 import GemmSm90, expand_entries

KIND = "conv2d_fprop_sm90_persistent"
TEMPLATE = "conv2d_fprop_sm90_persistent.mako"
# the conv headers the one-consumer conv kernels need, then the GEMM kernel and epilogue ones
INCLUDES = (*conv2d_sm90.INCLUDES[:5], *gemm_sm90.INCLUDES[5:], "conv_sm90_persistent.h")
FAMILY = gemm_sm90.entries_table(KIND)


@dataclass(frozen=True)
class Conv2dFpropSm90Persistent(GemmSm90):
    """A GEMM-family entry (tile, schedule, scheduler, cluster, epilogue tile) that runs the conv
    mainloop: same fields and C++ values, another template, adapter, name and op; and
    ``pad_channels``: C padded to a multiple of 8 before each launch (profiler/padded_adapter.h)."""

    pad_channels: bool = False

    kernel_op = "conv2d_fprop"
    template = TEMPLATE
    family_includes = INCLUDES
    default_adapter = "kernelgen::Conv2dPersistentOperation3x", "conv2d_adapter_3x.h"
    stream_k_adapter = "kernelgen::Conv2dPersistentStreamKOperation3x", "stream_k_adapter.h"
    fused_adapter = "kernelgen::FusedConv2dPersistentOperation3x", "fused_adapter_3x.h"
    fused_stream_k_adapter = "kernelgen::FusedConv2dPersistentStreamKOperation3x", "fused_adapter_3x.h"
    padded_adapter = "kernelgen::PaddedConv2dPersistentOperation3x", "padded_adapter.h"
    pads_channels = True

    def _adapter(self) -> tuple:
        return self.padded_adapter if self.pad_channels else super()._adapter()

    def operation(self) -> tuple[str, str]:
        e, o = self.element, self.output
        return f"fprop_{e}nhwc_{e}nhwc_{self.accumulator}_{self.source_type}_{o}nhwc", ""


def expand(path, raw: dict) -> list:
    return expand_entries(Conv2dFpropSm90Persistent, FAMILY, path, raw)
