"""Transposed persistent CUTLASS 3.x conv2d fprop on SM90, for layers with few output channels:
the product computed as Y^T (K x N*P*Q) = W * im2col(X)^T, filters as wgmma's A operand and
activation pixels as its B operand (profiler/conv_sm90_transposed.h). A 64-channel layer then
runs wgmma 64x256 instead of 64x64, which reads shared memory at a quarter of the rate per
multiply-add. Cooperative or ping-pong schedule; clusters along one dimension (multicasting the
pixels to CTAs of other channels, or the filters to CTAs of other pixels).

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
    family_includes = INCLUDES
    name_suffix = "_transposed"
    channels_along_m = True  # D^T: a fused epilogue's bias is one value a row (LinCombPerRowBiasEltAct)
    stores = ("tma",)  # its D is column-major: channels along M
    pads_channels = False  # its own adapter (conv_sm90_transposed.h)
    searches = False  # nor searched settings: measured with the tile scheduler's default ones


def _check(path, entry, spec):
    if spec["scheduler"] != "default":
        raise SpecError(path, "transposed kernels use the default tile scheduler", entry, "scheduler")
    for i, cluster in enumerate(spec["clusters"]):
        if cluster[0] != 1 and cluster[1] != 1:
            raise SpecError(path, f"a transposed kernel's cluster spans one dimension, not "
                            f"{'x'.join(map(str, cluster))} (the mainloop's multicast masks follow its own "
                            "CTA order)", f"{entry}.clusters[{i}]")


def expand(path, raw: dict) -> list:
    return expand_entries(Conv2dFpropSm90Transposed, FAMILY, path, raw, _check)
