"""Patch convolutions by CUTLASS 3.x ``ConvUniversal`` SM90 kernels (profiler/patch_adapter_3x.h): a
layer whose filter is as wide as its stride along W, unpadded and undilated there (ViT's 16x16
stride-16 patch embedding, ConvNeXt's 2x2 stride-2 downsampling) is the dense convolution of S*C
channels a pixel on an image W/S wide, R x 1 filters: the S pixels of a filter row are contiguous in
NHWC, and so are the S*C values of a KRSC filter row. ViT's 3 input channels (no 16-byte tensor
copy starts on a pixel of 6 bytes) become 48, and each K iteration is a whole filter row.

The spec is conv2d_sm90's (types, schedule, epilogue, stages, tiles x clusters).
"""

from dataclasses import dataclass, replace
from functools import cached_property

from ..fusion import fused_adapter
from ..ops.common import epilogue_suffix
from .conv2d_sm90 import Conv2dFpropSm90, expand as expand_sm90, family_table

KIND = "conv2d_fprop_sm90_patch"
FAMILY = family_table(KIND)


def rows_fold(conv) -> bool:
    """Whether the filter's rows fold too (profiler/patch_adapter_3x.h's patch_rows_fold): a filter
    as tall as its stride along H, unpadded and undilated there, on an image of whole windows is N*P
    images of R rows, the stride along H 1 (TMA's im2col walks a stride of 8 at most)."""
    return conv.stride_h == conv.r and not conv.pad_h and conv.dilation_h == 1 and conv.h % conv.r == 0


def patch_refusal(conv) -> str | None:
    """Why ``conv`` cannot be folded into a convolution of S*C channels a pixel, or None (as
    profiler/patch_adapter_3x.h's patch_unsupported)."""
    if conv.s < 2 or conv.stride_w != conv.s or conv.pad_w or conv.dilation_w != 1 or conv.w < conv.s:
        return ("a patch kernel: needs stride along W equal to the filter's width S > 1, "
                "no padding nor dilation along W")
    if (conv.s * conv.c) % 8 or (conv.w * conv.c) % 8 or conv.k % 8:
        return ("S*C, W*C and K must be multiples of 8 "
                "(16-byte tensor copies of a filter row and of an image row)")
    if conv.stride_h > 8 and not rows_fold(conv):
        return ("a stride along H over 8 needs the filter's rows to fold too "
                "(stride R, no padding nor dilation along H, H a multiple of R)")
    return None


def folded(conv):
    """The convolution the kernel runs for ``conv``: W/S pixels of S*C channels, R x 1 filters (and
    where the rows fold, N*P images of R rows)."""
    flat = replace(conv, w=conv.w // conv.s, c=conv.s * conv.c, s=1, stride_w=1)
    return replace(flat, n=conv.n * conv.p, h=conv.r, stride_h=1) if rows_fold(conv) else flat


@dataclass(frozen=True)
class Conv2dFpropSm90Patch(Conv2dFpropSm90):
    adapter_header = "patch_adapter_3x.h"

    @property
    def adapter(self) -> str:
        return fused_adapter(self.fusion, "kernelgen::FusedPatchConv2dOperation3x") if self.fusion else \
            "kernelgen::PatchConv2dOperation3x"

    @cached_property
    def name(self) -> str:
        """conv2d_sm90's name, ``_patch`` before the epilogue's suffix (a fused kernel's name is its
        unfused twin's and the suffix)."""
        base, suffix = Conv2dFpropSm90.name.func(self), epilogue_suffix(self.fusion)  # computed, not the cached
        return base[:len(base) - len(suffix)] + "_patch" + suffix

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement refuses ``conv``, or None."""
        if conv.groups != 1:
            return "a dense convolution kernel: needs groups = 1"
        return patch_refusal(conv)


def expand(path, raw: dict) -> list:
    return expand_sm90(path, raw, FAMILY, Conv2dFpropSm90Patch)
