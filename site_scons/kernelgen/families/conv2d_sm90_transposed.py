"""Transposed persistent CUTLASS 3.x conv2d fprop on SM90, for layers with few output channels:
the product computed as Y^T (K x N*P*Q) = W * im2col(X)^T, filters as wgmma's A operand and
activation pixels as its B operand (profiler/conv_sm90_transposed.h). A 64-channel layer then
runs wgmma 64x256 instead of 64x64, which reads shared memory at a quarter of the rate per
multiply-add. Ping-pong schedule, clusters of one CTA.

A spec lists entries as the ``gemm_sm90`` family does; a tile is (channels, pixels, K).
"""

from dataclasses import dataclass

from ..errors import SpecError
from . import conv2d_sm90_persistent, gemm_sm90
from .conv2d_sm90_persistent import Conv2dFpropSm90Persistent
from .gemm_sm90 import expand_entries

KIND = "conv2d_fprop_sm90_transposed"
TEMPLATE = "conv2d_fprop_sm90_transposed.mako"
INCLUDES = (*conv2d_sm90_persistent.INCLUDES[:-1], "conv_sm90_transposed.h")
FAMILY = gemm_sm90.entries_table(KIND)


@dataclass(frozen=True)
class Conv2dFpropSm90Transposed(Conv2dFpropSm90Persistent):
    template = TEMPLATE
    includes = INCLUDES

    @property
    def name(self) -> str:
        return super().name + "_transposed"


def expand(path, raw: dict) -> list:
    kernels = expand_entries(Conv2dFpropSm90Transposed, FAMILY, path, raw)
    for i, k in enumerate(kernels):
        if k.schedule != "pingpong" or k.scheduler != "default" or k.cluster != (1, 1, 1):
            raise SpecError(path, "transposed kernels are ping-pong, with the default tile scheduler and "
                            f"clusters of one CTA; {k.name} is not", f"kernels[{i}]")
    return kernels
