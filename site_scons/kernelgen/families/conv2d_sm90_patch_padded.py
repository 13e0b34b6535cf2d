"""Patch convolutions whose filter row of S*C values is no multiple of 8 (ViT-L/14's, ViT-H/14's and
DINOv2's 14x14 stride-14 patch embeddings of 3 channels, rows of 42 values), by the persistent
CUTLASS 3.x conv kernels of conv2d_sm90_persistent.py through profiler/patch_padded_adapter.h: each
launch copies the input's rows of S*C values and the filter's rows into the workspace padded to a
multiple of 8, then runs the kernel on the copies as N*P images of R rows of W/S pixels, R x 1
filters at stride 1. Before these only the few-channel kernels served such a layer (an im2col tile
built in shared memory for each tile of pixels), and the patch kernels (conv2d_sm90_patch.py) fold
only rows of a multiple of 8 values.

The spec is conv2d_sm90_persistent's (a GEMM-family entry: tile, schedule, clusters, source),
the default tile scheduler and plain launches (the copies are launched first); no fused variants.
Names end in ``_patchpad``. A layer that is no whole-window patch convolution, whose rows are a
multiple of 8 values (the patch kernels take it without a copy), or whose K is no multiple of 8 is
``unsupported``.
"""

from dataclasses import dataclass, replace

from .conv2d_sm90_persistent import Conv2dFpropSm90Persistent
from .gemm_sm90 import check_plain_launches, entries_table, expand_entries

KIND = "conv2d_fprop_sm90_patch_padded"
FAMILY = entries_table(KIND)
PADDED = 8  # a padded filter row's values: a multiple of 16 bytes


def patch_padded_refusal(conv) -> str | None:
    """Why ``conv`` is not a patch convolution of padded filter rows, or None (as
    profiler/patch_padded_adapter.h's patch_padded_unsupported)."""
    if conv.s < 2 or conv.stride_w != conv.s or conv.pad_w or conv.dilation_w != 1 or conv.w % conv.s:
        return ("a padded patch kernel: needs stride along W equal to the filter's width S > 1, no padding nor "
                "dilation along W, W a multiple of S")
    if conv.stride_h != conv.r or conv.pad_h or conv.dilation_h != 1 or conv.h % conv.r:
        return ("a padded patch kernel: needs stride along H equal to the filter's height R, no padding nor "
                "dilation along H, H a multiple of R")
    if conv.s * conv.c % PADDED == 0:
        return "S*C is a multiple of 8: the patch kernels fold it without a copy"
    if conv.k % 8:
        return "K must be a multiple of 8"
    return None


def folded(conv):
    """The convolution the kernel runs for ``conv`` (patch_padded_adapter.h's patch_padded_problem):
    N*P images of R rows of W/S pixels of S*C values padded to a multiple of 8, R x 1 filters at
    stride 1."""
    return replace(conv, n=conv.n * conv.p, h=conv.r, w=conv.w // conv.s, c=-(-conv.s * conv.c // PADDED) * PADDED,
                   s=1, stride_h=1, stride_w=1)


@dataclass(frozen=True)
class Conv2dFpropSm90PatchPadded(Conv2dFpropSm90Persistent):
    fuses = False  # its adapter runs the unfused kernel alone
    searches = False
    pads_channels = False
    name_suffix = "_patchpad"
    patch_padded_adapter = "kernelgen::PatchPaddedConv2dPersistentOperation3x", "patch_padded_adapter.h"

    def _adapter(self) -> tuple:
        return self.patch_padded_adapter

    @property
    def c_alignment(self) -> int:
        """Any C: it pads the filter rows of S*C values first."""
        return 1

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if conv.groups != 1:
            return "a dense convolution kernel: needs groups = 1"
        return patch_padded_refusal(conv)


def check(path, entry, spec) -> None:
    check_plain_launches(path, entry, spec, "a padded patch kernel launches its copies first")


def expand(path, raw: dict) -> list:
    return expand_entries(Conv2dFpropSm90PatchPadded, FAMILY, path, raw, check)
