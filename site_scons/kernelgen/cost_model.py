"""A model of a kernel's time on a workload, to rank every descriptor of the space without a GPU.

A tiled kernel (the SM90 GEMM, persistent and transposed conv kernels, CUTLASS's one-consumer
SM90 and 2.x conv kernels) computes its implicit GEMM (M x N x K) in tiles; the model counts,
for the busiest SM, what those tiles cost:

  mma     multiply-adds of its tiles, MFLOP (waves of tiles x K iterations x tile volume)
  loads   operand bytes it loads into shared memory, KB (a cluster multicasts a tile's A along N
          and B along M, so each CTA loads its share)
  stores  output bytes of its tiles, KB, and where several CTAs share a tile's K iterations
          (stream-K, split-K) the fp32 partials the last of them reads
  tiles   tiles it runs (a fixed cost each: pipeline fill and drain)
  iterations  main-loop iterations it runs (waves of tiles x K iterations: a fixed cost each, the
          barriers and copies issued a K block, which a deep K in thin tiles pays many times)
  memory  bytes the layer must move at least, MB (the floor: every operand once)
  launch  1 (a launch and the kernel's set-up)

and predicts ``base = sum(theta[f] * feature[f])``, one non-negative ``theta`` per group of
kernels (family class, schedule and tile scheduler: a ping-pong kernel hides its epilogue; the
persistent conv kernels weighed as the GEMM kernels of their schedule, ``theta_group``). What the counts miss (how well a tile shape, cluster, epilogue subtile or
store depth runs in each regime of layer size) is a correction per attribute of the kernel
(``attributes``), fitted as a ridge regression of log(measured / base): ``time = base *
exp(sum of the kernel's corrections)``. An attribute no measured kernel had corrects nothing. Other kernels (this project's direct and matrix-vector kernels) are modelled
by ``memory``, ``mma`` (the layer's flops) and ``launch`` per family. ``serves`` says which
kernels can run a workload at all, as their ``can_implement`` does.

The constants are fitted (``python -m kernelgen.cost_model fit``) to the committed CSVs, every
verified ok row of one GPU, by non-negative least squares on the relative error, and kept in
``kernel_specs/models/<gpu>.json`` with the GPU's SM count. A model fitted on another GPU is
refused (``load_model``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KernelgenError, one_line, shorten
from .families.conv2d_2x import Conv2dFprop2x
from .families.conv2d_gemm_2x import Conv2dFpropGemm2x
from .families.conv2d_grouped_2x import Conv2dFpropGrouped2x
from .families.conv2d_few_channels import Conv2dFpropFewChannels, layer_columns, layer_fits
from .families.conv2d_narrow import Conv2dFpropNarrow, window_pixels
from .families.conv2d_packed import Conv2dFpropPacked
from .families.conv2d_rows_packed import Conv2dFpropRowsPacked
from .families.conv2d_sm90 import Conv2dFpropSm90
from .families.conv2d_sm90_grouped import STREAMS as GROUPED_STREAMS, Conv2dFpropSm90Grouped
from .families.conv2d_sm90_halo import Conv2dFpropSm90Halo
from .families.conv2d_sm90_patch import Conv2dFpropSm90Patch, folded as patch_folded
from .families.conv2d_sm90_patch_padded import Conv2dFpropSm90PatchPadded, folded as patch_padded_folded
from .families.conv2d_sm90_persistent import Conv2dFpropSm90Persistent
from .families.conv2d_sm90_pointwise import Conv2dFpropSm90Pointwise
from .families.conv2d_sm90_transposed import Conv2dFpropSm90Transposed
from .families.gemm_sm90 import GemmSm90
from .families.depthwise import Depthwise
from .families.depthwise_half import DepthwiseHalf
from .families.depthwise_multiplier import DepthwiseMultiplier
from .families.depthwise_mma import DepthwiseMma
from .families.depthwise_cutlass import DepthwiseCutlass
from .families.depthwise_flat import DepthwiseFlat
from .families.depthwise_strip import Strip
from .families.common import DirectKernel
from .families.gemm_thin import GemmThin
from .families.gemv import SHARED_MEMORY, Gemv
from .families.grouped_direct import GroupedDirect
from .families.grouped_mma import GroupedMma
from .kept import ByIdentity
from .ops import serves as serves_op
from .fusion import reads_c

# numpy is imported where it is used: a run that ranks nothing (a refusal, --help, the header
# from measured rows) does not wait for it.

FEATURES = ("mma", "loads", "stores", "tiles", "iterations", "memory", "launch")
# SMs of the GPUs a model may be fitted for (by results folder name)
SM_COUNTS = {"nvidia_h200": 132, "nvidia_h100_80gb_hbm3": 132, "nvidia_a100_sxm4_80gb": 108}
SHARED_MEMORY_2X = 227 * 1024  # bytes of shared memory an SM gives 2.x kernels' CTAs on SM90
MODELS_DIR = Path(__file__).resolve().parents[2] / "kernel_specs" / "models"


class ModelError(KernelgenError):
    """The cost model cannot be used as asked (fitted on another GPU, no model file, ...)."""


# ---- which kernels can run a workload --------------------------------------------------------------

def serves(kernel, problem) -> str | None:
    """Why ``kernel`` cannot run ``problem`` (its ``can_implement`` would refuse), or None. Of a
    kernel of the classes without checks of their own (``_SERVED_BY_KEY``), it reads the
    element, op and alignment only: ``Model.ranking`` asks once a layer for each such key."""
    if kernel.element != problem.dtype:
        return f"built for {kernel.element}, not {problem.dtype}"
    if not serves_op(kernel, problem):
        groups = getattr(problem, "groups", 1)
        epilogue = getattr(problem, "epilogue", "")
        return (f"a {kernel.op} kernel, not for {problem.op}" + (f" with groups={groups}" if groups > 1 else "")
                + (f" with epilogue={epilogue}" if epilogue else ""))
    conv = problem.as_conv()
    if isinstance(kernel, Conv2dFpropGrouped2x):
        return kernel.refuses(conv.c, conv.k, conv.groups)
    if isinstance(kernel, (GroupedMma, DepthwiseCutlass, DirectKernel, DepthwiseMma, DepthwiseMultiplier, Conv2dFpropPacked,
                           Conv2dFpropRowsPacked, Conv2dFpropSm90Grouped, Conv2dFpropSm90Patch, Conv2dFpropSm90PatchPadded,
                           Conv2dFpropGemm2x, Conv2dFpropNarrow)):
        return kernel.refuses(conv)
    if isinstance(kernel, Depthwise):
        if not conv.groups == conv.c == conv.k:
            return "a depthwise kernel: needs groups = C = K"
        return kernel.refuses_window(conv)
    pointwise = conv.r == conv.s == 1 and conv.stride_h == conv.stride_w == 1 and conv.pad_h == conv.pad_w == 0
    if kernel.op.split(":")[0] == "gemm" and not pointwise:
        return "not a GEMM: needs a 1x1, stride-1, unpadded convolution"
    if isinstance(kernel, GemmThin):
        return kernel.refuses(conv.k, conv.c)
    if isinstance(kernel, Gemv):
        if conv.n * conv.p * conv.q > kernel.max_m:
            return f"a matrix-vector kernel for at most {kernel.max_m} rows"
        if conv.c % kernel.vector:
            return f"K must be a multiple of {kernel.vector}"
        return None if kernel.staged_bytes(conv.n * conv.p * conv.q, conv.c) <= SHARED_MEMORY else \
            "A staged in shared memory is more than a CTA has"
    if isinstance(kernel, Conv2dFpropFewChannels):
        if conv.c > 4:
            return "needs 1 to 4 input channels"
        if conv.k % 8:
            return "K must be a multiple of 8"
        return layer_fits(kernel, conv)
    if isinstance(kernel, Conv2dFpropSm90Halo):
        if (conv.r, conv.s, conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w, conv.dilation_h,
                conv.dilation_w) != (3, 3, 1, 1, 1, 1, 1, 1):
            return "needs a 3x3 filter, stride 1, pad 1"
        if conv.c != 64 or conv.k % 64 or conv.q != kernel.width:
            return f"built for 64 input channels, K a multiple of 64, width {kernel.width}"
        return None
    if isinstance(kernel, Conv2dFpropSm90Pointwise):
        if not pointwise:
            return "needs a 1x1 filter, stride 1, no padding"
        return None if conv.c == kernel.channels and conv.k % 64 == 0 else "built for another number of channels"
    alignment = getattr(kernel, "c_alignment", getattr(kernel, "alignment", 8))
    k_alignment = getattr(kernel, "k_alignment", alignment)
    if getattr(kernel, "pad_channels", False) and conv.c % kernel.alignment == 0:
        return "pads C to a multiple of 8: for C no multiple of 8 only"
    if conv.c % alignment or conv.k % k_alignment:
        return (f"channels not a multiple of the alignment {alignment}" if k_alignment == alignment else
                f"C not a multiple of the alignment {alignment} or K of the output's {k_alignment}")
    return None


# The classes (exactly these, not their subclasses) of which ``serves`` reads the element, op and
# alignment only: the space's descriptors and the listed tiled ones. A class with a check of its
# own in ``serves`` is not one of them.
_SERVED_BY_KEY = frozenset((GemmSm90, Conv2dFpropSm90Persistent, Conv2dFpropSm90Transposed, Conv2dFpropSm90,
                            Conv2dFprop2x))


def _serves_key(kernel) -> tuple | None:
    """What ``serves`` reads of ``kernel`` where that is all its answer depends on (the kernels of
    a key are served alike), else None."""
    if type(kernel) not in _SERVED_BY_KEY:
        return None
    return (type(kernel), kernel.element, kernel.op, kernel.alignment, getattr(kernel, "k_alignment", kernel.alignment),
            getattr(kernel, "pad_channels", False), reads_c(kernel))


# ---- features --------------------------------------------------------------------------------------

def group(kernel) -> str:
    """The kernels that share constants: class, schedule and tile scheduler."""
    name = type(kernel).__name__
    if isinstance(kernel, GemmSm90):
        return _scheduled(name, kernel)
    if isinstance(kernel, Conv2dFpropSm90Patch):
        return Conv2dFpropSm90.__name__  # the same kernel, counted on the folded layer (``_features``)
    if isinstance(kernel, Conv2dFpropGemm2x):
        # CUTLASS 2.x's mainloop and epilogue on the same tiles (kept as the conv kernels keep
        # theirs), without the im2col iterator: weighed as the 2.x conv kernels until rows of its own
        return Conv2dFprop2x.__name__
    if isinstance(kernel, Conv2dFpropFewChannels):
        return f"{name}/{kernel.mode}"
    if isinstance(kernel, Gemv) and kernel.lanes == "mma":
        return f"{name}/mma"  # tensor-core fragments, not a lane's fp32 multiply-adds
    if isinstance(kernel, Gemv) and kernel.a == "shared":
        # each CTA copies A first, then walks it from shared memory: weighed apart from the kernels
        # whose lanes read A from global memory (fitted together, the staged rows of batch 32 moved
        # the batch-1 classifiers' ranking: VGG-16 b1's top-5 regret 27%)
        return f"{name}/staged"
    return name


def theta_group(kernel) -> str:
    """The kernels that share the counts' weights: ``group``, but the persistent conv kernels
    weighed as the SM90 GEMM kernels of their schedule (the same collective on an implicit GEMM; a
    correction per ``group`` keeps what differs)."""
    if isinstance(kernel, Conv2dFpropSm90Persistent):
        return _scheduled(GemmSm90.__name__, kernel)
    if isinstance(kernel, DepthwiseCutlass):
        # its counts (fp32 multiply-adds on CUDA cores from shared-memory windows, as this
        # project's depthwise kernels make them) weighed as those kernels'; its corrections (what
        # its rows measured beyond that: 2-4x the time) are its own group's
        return Depthwise.__name__
    return group(kernel)


def _scheduled(name: str, kernel) -> str:
    """``name`` with a GemmSm90 kernel's schedule and tile scheduler."""
    return f"{name}/{kernel.schedule}" + ("" if kernel.scheduler == "default" else "/stream_k")


def _tiling(kernel):
    """(tile M, N, K, cluster M, N, CTAs an SM holds) of a tiled kernel, else None."""
    if isinstance(kernel, (GemmSm90, Conv2dFpropSm90)):
        m, n, k = kernel.tile
        return m, n, k, kernel.cluster[0], kernel.cluster[1], 1
    if isinstance(kernel, Conv2dFprop2x):
        m, n, k = kernel.threadblock
        stage = (m + n) * k * 2
        return m, n, k, 1, 1, max(1, min(4, SHARED_MEMORY_2X // (stage * kernel.stages)))
    if isinstance(kernel, Conv2dFpropFewChannels):
        # a tile of pixels by output channels over the reduction (the layer's: ``_features``), ``blocks`` CTAs a SM
        m, n = kernel.tile
        return m, n, kernel.reduction, 1, 1, kernel.blocks
    return None


def features(kernel, problem, sms: int) -> np.ndarray:
    """The model's features of ``kernel`` on ``problem`` (FEATURES order)."""
    import numpy as np
    return np.array(_features(kernel, _tiling(kernel), _layer(problem, sms), sms))


def _layer(problem, sms: int) -> tuple:
    """What the features take from a layer, whatever the kernel: (the bytes it must move, MB;
    its GEMM's M, N, K; its MFLOP an SM; the convolution it is, None for a GEMM). Kept by the
    layer (its fields, less its count and line, which none of this depends on) for the rest of the
    process: a fit and a record ask it for each of tens of thousands of rows of about a thousand
    layers."""
    try:
        key = (type(problem), problem, sms)
        kept = _LAYERS.get(key)
    except TypeError:  # a problem that cannot be a key (unhashable): made each time
        return _layer_of(problem, sms)
    if kept is None:
        if len(_LAYERS) >= _LAYERS_KEPT:
            _LAYERS.clear()
        kept = _LAYERS[key] = _layer_of(problem, sms)
    return kept


_LAYERS, _LAYERS_KEPT = {}, 1 << 16  # (problem type, problem, sms) -> _layer's tuple; at most so many


def _layer_of(problem, sms: int) -> tuple:
    """``_layer``, made."""
    memory = problem.min_bytes() / 1e6
    conv = problem.as_conv() if problem.op != "gemm" else None
    mnk = conv.gemm_mnk if conv is not None else (problem.m, problem.n, problem.k)
    return memory, mnk, problem.flops / 1e6 / sms, conv


def _outputs_log2(problem, sms: int) -> float:
    """log2 of a layer's outputs, its GEMM's M x N (``Model.reach``)."""
    _, (m, n, _), _, _ = _layer(problem, sms)
    return math.log2(max(m * n, 1))


def _dot(features: list, theta) -> float:
    """The features weighed by theta, summed in order: the one sum ``Model.base`` and
    ``Model.ranking`` both make, so that they agree exactly."""
    total = 0.0
    for f, t in zip(features, theta):
        total += f * t
    return total


def _features(kernel, tiling, layer: tuple, sms: int) -> list:
    """``features`` (as a list) from the kernel's ``_tiling`` and the layer's ``_layer``."""
    memory, (m, n, k), mflop_per_sm, conv = layer
    if isinstance(kernel, Conv2dFpropSm90Patch) and conv is not None:
        conv = patch_folded(conv)  # S pixels of C channels are one of S*C: R x 1 taps of S*C channels
    if isinstance(kernel, Conv2dFpropSm90PatchPadded) and conv is not None:
        conv = patch_padded_folded(conv)  # N*P images of R rows of W/S pixels of S*C padded to 8 channels
    if tiling is None:
        if isinstance(kernel, DIRECT_TILED) and conv is not None:
            return _direct_features(kernel, conv, memory, sms)
        if isinstance(kernel, Gemv):
            return _gemv_features(kernel, m, n, k, memory, sms)
        direct = isinstance(kernel, DirectKernel) and conv is not None
        chain, reads = (_thread_chain(kernel, conv, sms), _thread_reads(kernel, conv) / sms / 1e3) if direct else (0.0, 0.0)
        if isinstance(kernel, DirectKernel) and kernel.any_filter:
            return [ANY_FILTER_WORK * f for f in (mflop_per_sm, reads, 0.0, 0.0, chain, memory, 1.0)]
        return [mflop_per_sm, reads, 0.0, 0.0, chain, memory, 1.0]
    tm, tn, tk, cm, cn, per_sm = tiling
    if isinstance(kernel, Conv2dFpropFewChannels) and conv is not None:
        tk = k = -(-layer_columns(kernel, conv) // 16) * 16  # the layer's, in MMA k-steps of 16
    if isinstance(kernel, Conv2dFpropSm90Transposed):
        m, n = n, m
    launches, tiled_n, grids = 1.0, n, 1
    if isinstance(kernel, Conv2dFpropSm90Grouped) and conv is not None:
        # a dense convolution a group: each group's K/groups output channels tiled on their own,
        # the groups' launches GROUPED_STREAMS at a time
        tiled_n, grids = conv.k // conv.groups, conv.groups
        launches = float(math.ceil(conv.groups / GROUPED_STREAMS))
    # a cluster's CTAs launch together: the grid's tiles along M and N round up to its shape
    tiles = -(-math.ceil(m / tm) // cm) * cm * -(-math.ceil(tiled_n / tn) // cn) * cn * grids
    if (type(kernel) in (Conv2dFprop2x, Conv2dFpropGemm2x) and kernel.iterator != "few_channels" and kernel.split_k_slices == 1
            and tiles < sms * per_sm):
        # a CUTLASS 2.x grid of fewer tiles than the SMs hold runs ceil(tiles / SMs) CTAs on its
        # busiest SM, not as many as it could hold (held out, ReXNet-1.0's 1x1 layers on 7x7 images,
        # 104 tiles of 128x128: their 2.x winners were predicted 1.4-1.6 times their time). The
        # few-channels, grouped and split 2.x kernels keep the count their weights were fitted with
        # (counted so, R(2+1)D-18's 3 -> 45 stem winner fell from 5th to 19th, ResNeXt-50 b1's regret
        # 0.6% -> 2.4%, and a split kernel ranked first on RetinaNet's 13x13 box head, 1.5 times the
        # SM90 kernel's time there)
        per_sm = max(1, math.ceil(tiles / sms))
    few_channels_2x = isinstance(kernel, Conv2dFprop2x) and kernel.iterator == "few_channels"
    if conv is not None and not isinstance(kernel, Conv2dFpropFewChannels) and not few_channels_2x:
        # an implicit GEMM walks each filter tap's channels (a group's) in K tiles of its own: C = 32
        # under a K tile of 64 is half a tile a tap, as many iterations as C = 64
        iterations = conv.r * conv.s * math.ceil(conv.c // conv.groups / tk)
        per_group = conv.k // conv.groups
        if isinstance(kernel, Conv2dFpropGrouped2x) and kernel.group_mode == "multiple" and per_group < tn:
            iterations *= tn // per_group  # a CTA of whole groups walks each group's channels in turn
    else:
        # CUTLASS's few-channels iterator packs the taps of a layer of a few channels into its K
        # tiles: R * S * C in K tiles, as a GEMM's K
        iterations = math.ceil(k / tk)
    cluster = cm * cn
    slots = max(cluster, sms // cluster * cluster) * per_sm
    pieces = 1  # the CTAs that share a tile's K iterations
    stream_k = isinstance(kernel, GemmSm90) and kernel.scheduler == "stream_k"
    split_2x = isinstance(kernel, Conv2dFprop2x) and kernel.split_k_slices > 1
    if stream_k and kernel.splits is None:  # stream-K: the K iterations of every tile shared out evenly
        busiest = math.ceil(tiles * iterations / slots)
        waves = busiest / iterations
        pieces = math.ceil(iterations / busiest)
    elif stream_k or split_2x:
        pieces = kernel.splits if stream_k else kernel.split_k_slices
        waves = math.ceil(tiles * pieces / slots)
        if split_2x and conv is not None:
            # CUTLASS 2.x splits C: each CTA walks every filter tap over its C / splits channels
            busiest = waves * conv.r * conv.s * math.ceil(math.ceil(conv.c / pieces) / tk)
        else:
            busiest = waves * math.ceil(iterations / pieces)
    else:
        waves = math.ceil(tiles / slots)
        busiest = waves * iterations
    size = 2
    # a tile shared by several CTAs is reduced by the last: it reads the others' fp32 partials
    partials = (pieces - 1) * tm * tn * 4 / 1e3
    # an epilogue that stores D from registers writes each thread's elements apart, 2 bytes at a
    # time: a warp's store fills a quarter of each 32-byte sector it touches
    scatter = STORE_SCATTER if getattr(kernel, "store", "tma") == "nosmem" else 1
    # a CUTLASS 2.x kernel of A and B accesses of `alignment` elements issues 8 / alignment copies for
    # each 16 bytes it stages (held out, ReXNet-1.0's 1x1 layers: 59 -> 66 of 76 layers' winners in
    # what a build measures)
    narrow = 8 / kernel.alignment if isinstance(kernel, Conv2dFprop2x) else 1
    if getattr(kernel, "pad_channels", False) and conv is not None:
        # the copy launched before the kernel reads C and writes C padded to 8, which the mainloop reads
        memory += conv.n * conv.h * conv.w * (conv.c + 2 * -(-conv.c // 8) * 8) * size / 1e6
        launches += 1
    if isinstance(kernel, Conv2dFpropSm90PatchPadded) and conv is not None:
        # the copies launched before it: the input's rows read, written padded and read again
        # (about 3 times the padded rows), the filter's rows likewise
        memory += 3 * (conv.n * conv.h * conv.w + conv.k * conv.r) * conv.c * size / 1e6
        launches += 2
    return [
        busiest * tm * tn * tk * 2 / 1e6 * per_sm,
        busiest * (tm * tk / cn + tn * tk / cm) * size / 1e3 * per_sm * narrow,
        waves * tm * tn * size / 1e3 * per_sm * scatter + partials,
        waves * per_sm,
        busiest * per_sm,
        memory,
        launches,
    ]


SHARED_MEMORY_SM = 228 * 1024  # shared memory of an SM on SM90; each CTA also reserves 1 KiB
REGISTERS_SM = 65536


def _resident(threads: int, shared: int, registers: int) -> int:
    """CTAs of ``threads`` threads, ``shared`` bytes of shared memory and ``registers`` a thread
    an SM holds at once, at least one."""
    by_shared = SHARED_MEMORY_SM // (shared + 1024)
    by_registers = REGISTERS_SM // (threads * -(-registers // 8) * 8)
    return max(1, min(2048 // threads, by_shared, by_registers))


def _direct_features(kernel, conv, memory: float, sms: int) -> list:
    """``features`` of a kernel of this project's grouped families, and of the narrow dense ones
    (Conv2dFpropNarrow: a tile of rows x columns pixels by every output channel), on ``conv``, from
    its tiles as the GEMM tiles' are counted: a depthwise tile is ``rows`` x its columns output pixels of 8 x
    ``channel_vectors`` channels, walked by a persistent grid of the CTAs the GPU holds; a
    grouped_mma tile is ``rows`` x ``columns`` pixels of the channels a CTA computes (all C, or a
    slice of them), one CTA each; a CUTLASS depthwise (DepthwiseCutlass) tile is ``tile`` pixels of
    ``groups`` channels, its window and taps loaded for each. A tile's work counts in full where it
    overhangs the layer."""
    size, chain = 2, 0  # chain: the units a grouped_mma warp walks in turn (the other kernels: none)
    if isinstance(kernel, Depthwise):  # tiles of tc output channels (K = C but of a channel multiplier)
        tp, tq, tc = kernel.rows, kernel.tile_columns(), 8 * kernel.channel_vectors
        tiles = conv.n * math.ceil(conv.p / tp) * math.ceil(conv.q / tq) * math.ceil(conv.k / tc)
        per_sm = _resident(kernel.threads, kernel.shared_bytes(), kernel.registers())
        taps = kernel.filter_shape[0] * kernel.filter_shape[1]
        flops, loads = tp * tq * tc * taps * 2, kernel.shared_bytes() // kernel.stages  # a stage a tile
        memory += _run_overfetch(kernel, conv)
    elif isinstance(kernel, DepthwiseMma):
        # its multiply-adds on tensor cores: 16 input columns for 8 outputs a filter row
        tp, tq, tc = kernel.rows, kernel.columns, 8 * kernel.channel_vectors
        tiles = conv.n * math.ceil(conv.p / tp) * math.ceil(conv.q / tq) * math.ceil(conv.c / tc)
        per_sm = _resident(kernel.threads, kernel.shared_bytes(), kernel.registers())
        flops = tp * tq * tc * kernel.filter * 16 * 2
        rows, columns = kernel.window()
        loads = rows * columns * tc * size
    elif isinstance(kernel, DepthwiseCutlass):
        (tp, tq), tc = kernel.tile, kernel.groups
        stride, dilation = (conv.stride_h, conv.stride_w), (conv.dilation_h, conv.dilation_w)
        tiles = conv.n * math.ceil(conv.p / tp) * math.ceil(conv.q / tq) * math.ceil(conv.c / tc)
        # a CTA of ``tiles_per_cta`` tiles, as many a SM as its shared memory and threads allow
        # (registers: about 2 a sum and as many for its window row, as in Depthwise.registers)
        shared = kernel.shared_bytes(stride, dilation)
        per_sm = _resident(kernel.threads(), shared, 2 * kernel.accumulators() + 40)
        flops = tp * tq * tc * kernel.filter ** 2 * 2
        loads = (shared - kernel.filter ** 2 * tc * size) // kernel.stages + kernel.filter ** 2 * tc * size
    elif isinstance(kernel, Conv2dFpropNarrow):
        # a tile of rows x columns pixels by all K, its window (and, a CTA a tile, the filter) loaded
        # for each; its warps' mma.sync k-steps over the 9 taps' C channels
        (tp, tq), tc = kernel.tile, conv.k
        tiles = conv.n * math.ceil(conv.p / tp) * math.ceil(conv.q / tq)
        per_sm = _resident(kernel.threads, kernel.shared_bytes, kernel.registers())
        flops = kernel.warps * kernel.tiles_per_warp * 16 * tc * kernel.k_steps * 16 * 2
        window = window_pixels(tp, tq, kernel.stride) * conv.c * size
        loads = window if kernel.schedule == "persistent" else window + tc * 9 * conv.c * size
    else:
        channels = kernel.slice(conv, sms)
        tp, tq, tc = kernel.rows, kernel.columns, channels
        tiles = kernel.pixel_tiles(conv) * (conv.c // channels)
        per_sm = _resident(256, kernel.window_bytes(channels) * kernel.buffers, kernel.registers())
        # the busiest of the CTA's 8 warps, as if each did its work: a warp takes a unit of output
        # channels in turn (every 8th of the slice's), or, in a spread slice of fewer units than
        # warps, shares its unit's 16-pixel tiles with 8 / units - 1 others (the rest idle)
        out = kernel.unit_channels // 8
        blocks = -(-tp * tq // 16)
        if kernel.units is not None and kernel.units < 8:
            busiest = -(-blocks // (8 // kernel.units))
        else:
            busiest = -(-(channels // out) // 8) * blocks
        flops = busiest * 8 * 16 * out * kernel.channels_per_group * 9 * 2
        loads = kernel.window_bytes(channels) + tc * 9 * kernel.channels_per_group * size
        # a CTA a tile walks its warp's units in turn, each unit's filter loaded from global memory
        # before its mma.sync: a chain of loads that the CTAs of a wave wait on together (RegNetY-
        # 400MF's 55 groups of 8 on 7x7 images, 7 units a warp: 0.029 ms measured where the counts
        # said 0.010). The other schedules load a warp's one unit once.
        chain = -(-(channels // out) // 8) if kernel.schedule == "tile" else 1
    waves = math.ceil(tiles / (sms * per_sm))
    return [waves * flops / 1e6 * per_sm, waves * loads / 1e3 * per_sm, waves * tp * tq * tc * size / 1e3 * per_sm,
            waves * per_sm, float(waves * chain), memory, 1.0]


# A tensor copy asks the L2 for whole lines (CU_TENSOR_MAP_L2_PROMOTION_L2_128B, profiler/depthwise_tma.h)
L2_LINE = 128
L2_BYTES = 50 * 2**20  # the L2 of an H100 or H200 (SXM): 50 MiB


def _run_overfetch(kernel, conv) -> float:
    """The MB beyond its input's bytes that a depthwise kernel of tensor copies (``loader = "tma"``)
    draws from memory on ``conv``. Its CTAs each take a run of one channel block's tiles
    (depthwise_tma.h), so the blocks of a pixel are read far apart in time: where the layer's input
    outgrows the L2, a box row of fewer than L2_LINE bytes of a wider pixel brings its whole line,
    whose rest is gone by the time the next block's run reads it. The cp.async kernels, whose CTAs
    take a pixel tile's blocks together, read each line once. (Held out, on an H100: on Xception-41's
    and EfficientNet-B4's stride-1 depthwise layers of 67-184 MB of input the tensor-copy tiles of 32
    channels ran at 1.4-2.7 times the best, of 16 channels at 2.4-3.9 times; on those the L2 holds,
    at 1.1-1.6 and 1.4-1.6: docs/search.md, "The model's record".)"""
    row, pixel = 16 * kernel.channel_vectors, 2 * conv.c  # bytes: a box row of 8-channel vectors, a pixel
    inputs = conv.n * conv.h * conv.w * pixel
    if kernel.loader != "tma" or pixel <= row or inputs <= L2_BYTES:
        return 0.0
    return (max(1.0, min(L2_LINE, pixel) / row) - 1) * inputs / 1e6  # each line's rest read again


THREADS_SM = 2048  # the threads an SM holds at once (SM80, SM90)
# The classes whose features ``_direct_features`` counts from their tiles.
DIRECT_TILED = (Depthwise, DepthwiseCutlass, GroupedMma, DepthwiseMma, Conv2dFpropNarrow)


def _thread_chain(kernel, conv, sms: int) -> float:
    """The multiply-adds (thousands) one thread of a direct kernel (``DirectKernel``: the depthwise
    narrow, rows, flat and strip kernels, the grouped direct and strip ones) makes in turn on
    ``conv``: the work of its item times the passes its launch makes over the layer's items. Their
    counts are otherwise the layer's work shared by the SMs, which a layer of a few thousand outputs
    (batch 1) does not fill: there a kernel of more threads, each of less work, wins (held out,
    GhostNet-1.0 b1's depthwise layers of 12 to 100 channels had their winners, kernels of one
    output pixel a thread, predicted 2-3 times their time and ranked 20th to 27th)."""
    taps, per_group = conv.r * conv.s, conv.c // conv.groups
    if isinstance(kernel, DepthwiseFlat):
        # a CTA of 256 threads a band of ``rows`` output rows of an image: channel pairs of its columns
        ctas = conv.n * -(-conv.p // kernel.rows)
        per_sm = max(1, min(THREADS_SM // 256, SHARED_MEMORY_SM // (kernel.shared_bytes(conv) + 1024)))
        positions = kernel.rows * conv.q * -(-conv.k // 2)
        return -(-ctas // (sms * per_sm)) * -(-positions // 256) * 2 * taps / 1e3
    if isinstance(kernel, Strip):
        # a CTA a segment of a strip's output rows, walked in turn; segments as many as fill the GPU
        # (strip_conv.h: Ring::segments), a thread ``vector`` channels of ``columns`` columns
        strips = -(-conv.q // (kernel.columns * kernel.lanes))
        threads = -(-(conv.k // kernel.vector) * kernel.lanes // 32) * 32
        resident = max(1, min(THREADS_SM // threads, SHARED_MEMORY_SM // (kernel.shared_bytes(conv) + 1024)))
        base = conv.n * strips
        count = min(max(1, -(-sms * resident // base)), conv.p)
        rows = -(-conv.p // count)
        ctas = base * -(-conv.p // rows)
        return -(-ctas // (sms * resident)) * rows * kernel.columns * kernel.vector * taps * per_group / 1e3
    # a grid-stride walk of items: ``rows`` x ``columns`` output pixels of ``vector`` output channels
    rows = getattr(kernel, "rows", 1)
    items = conv.n * -(-conv.p // rows) * -(-conv.q // kernel.columns) * -(-conv.k // kernel.vector)
    return -(-items // (sms * THREADS_SM)) * rows * kernel.columns * kernel.vector * taps * per_group / 1e3


def _thread_reads(kernel, conv) -> int:
    """The input elements a direct kernel's threads read over ``conv`` (from global memory, or a
    flat or strip kernel's shared memory): a narrow or grouped item each tap of each of its columns
    (and a group's channels), a row kernel's item each column of its rows' window once, a strip
    kernel's thread each column of its window once an output row, a flat kernel's each tap of a
    pixel (and its band's input rows staged). The loads feature (the ``loads`` of the tiled kernels,
    their staged operand bytes): a kernel that reuses what it read wins the layers of many
    channels (ReXNet-1.0's 162 on 56x56, where a row kernel of 4 rows a thread ran in 0.044 ms and
    those of one in 0.053-0.056)."""
    taps, per_group = conv.r * conv.s, conv.c // conv.groups
    stride_h, stride_w = conv.stride_h, conv.stride_w
    if isinstance(kernel, DepthwiseFlat):
        staged = conv.n * -(-conv.p // kernel.rows) * kernel.input_rows() * conv.w * conv.c
        return conv.n * conv.p * conv.q * conv.k * taps + staged
    columns = -(-conv.q // kernel.columns)
    window = (kernel.columns - 1) * stride_w + conv.s
    if isinstance(kernel, Strip):
        return conv.n * conv.p * columns * -(-conv.k // kernel.vector) * conv.r * window * kernel.vector * per_group
    rows = getattr(kernel, "rows", None)
    if rows is not None:
        return (conv.n * -(-conv.p // rows) * columns * -(-conv.k // kernel.vector) * ((rows - 1) * stride_h + conv.r)
                * window * kernel.vector)
    return conv.n * conv.p * columns * -(-conv.k // kernel.vector) * taps * kernel.columns * kernel.vector * per_group


def _gemv_features(kernel, m: int, n: int, k: int, memory: float, sms: int) -> list:
    """``features`` of a matrix-vector kernel (profiler/gemv*.h) on D (m x n) = A (m x k) B^T: a CTA
    computes ``rows`` columns of D for ``max_m`` rows of A, its threads (lanes "k") or its warps
    (lanes "m", "mma") striding over K in chunks of ``vector`` elements (lanes "mma": groups of
    ``unroll`` blocks of 4 x ``vector``, a tile's mma.sync each 16 K its work). Its time is B streamed once
    (``memory``) where that dominates, else the chain of chunks the busiest thread walks in turn
    (multiply-adds of every row it keeps, then the CTA's reduction): a product of few columns, or
    of 32 rows, cannot fill the GPU with loads in flight. The bytes, outputs and CTAs are the
    busiest SM's: its share of the CTAs, not as many as it could hold (VGG-16's 4096 x 25088
    classifier runs 512 CTAs of 8 columns, 4 an SM, where 16 fit)."""
    tiles = math.ceil(n / kernel.rows) * math.ceil(m / kernel.max_m)
    shared = kernel.staged_bytes(min(m, kernel.max_m), k) + kernel.sums_bytes()
    per_sm = _resident(kernel.threads, shared, kernel.registers())
    waves = math.ceil(tiles / (sms * per_sm))
    busiest = math.ceil(tiles / sms)  # the CTAs the busiest SM runs, in all its waves
    walkers = kernel.threads if kernel.lanes == "k" else kernel.threads // 32  # what splits K
    if kernel.lanes == "mma":  # a warp's groups of unroll blocks of 4 x vector K: one mma a tile each 16 K
        chain = waves * math.ceil(k / (walkers * kernel.unroll * 4 * kernel.vector))
        work = chain * kernel.unroll * kernel.vector / 4 * (kernel.max_m // 16) * (kernel.rows // 8)
    else:
        chain = waves * math.ceil(k / (walkers * kernel.vector))
        sums = kernel.rows * (1 if kernel.lanes == "m" else min(m, kernel.max_m))  # a thread's, each chunk element
        work = chain * kernel.vector * sums
    read = kernel.rows + (min(m, kernel.max_m) if kernel.a == "shared" else 0)  # rows of B, and A where a CTA stages it
    return [work / 1e3, busiest * read * k * 2 / 1e3,
            busiest * kernel.rows * min(m, kernel.max_m) * 2 / 1e3, busiest, chain, memory, 1.0]


MIN_MS = 1e-4  # no kernel takes less than 0.1 us
# A direct kernel of any filter (profiler/direct_conv_any.h) reads each tap again for each output
# column and bounds its loops at run time: counted as twice the work of its class's fixed-filter
# kernels, so that it is proposed where they serve a layer only behind them (no row measured it yet)
ANY_FILTER_WORK = 2.0
STORE_SCATTER = 4  # the store traffic of an epilogue that stores D from registers, per byte of D
RIDGE = 10.0  # the corrections' ridge penalty (the regret changed by under 0.1% between 1 and 30)
REACH_FACTOR = 2  # Model.beyond: a layer of more than twice the outputs of its group's largest row
REGIMES = ((0.005, "tiny"), (0.02, "small"), (0.1, "mid"), (math.inf, "large"))  # by the base prediction, ms


def attributes(kernel, base_ms: float) -> list:
    """The attributes a correction is fitted for: the group, tile extents, cluster, epilogue
    subtile (as a fraction of the tile's N), source, store depth, launch; each also within the layer's
    regime of size (a tile that wins large layers may lose small ones); and the kernel itself."""
    return _attributes_in(kernel, _regime(base_ms))


def _regime(base_ms: float) -> str:
    return next(label for limit, label in REGIMES if base_ms < limit)


def _attributes_in(kernel, regime: str) -> list:
    """``attributes`` of ``kernel`` on a layer of ``regime``."""
    out, in_regime, own = _attribute_names(kernel)
    # and the kernel's own, in every regime: its bias on the rows of other layers carries to a layer
    # it has not run (a fused variant has its own, its epilogue costing it what it costs)
    return [*out, *in_regime[regime], own]


def _kernel_attributes(kernel) -> list:
    """The attributes of ``_attributes_in`` that do not depend on the layer's regime (its first half)."""
    return list(_attribute_names(kernel)[0])


def _attribute_names(kernel) -> tuple:
    """(``_kernel_attributes``, regime -> those attributes within it, ``kernel=<its name>``): the
    names of ``_attributes_in``, kept by descriptor (``kept.ByIdentity``) for the rest of the
    process: a fit asks them for each of its tens of thousands of rows, of a few thousand kernels,
    and a ranking for each kernel of the space."""
    return _ATTRIBUTES.get(_attribute_names_of, kernel)


def _attribute_names_of(kernel) -> tuple:
    """``_attribute_names``, made."""
    out = tuple(_kernel_attributes_of(kernel))
    return out, {label: tuple(f"{a}|{label}" for a in out) for _, label in REGIMES}, f"kernel={kernel.name}"


_TERMS_KEPT = 1 << 16  # the most kernels a model keeps the terms of (Model._kept_terms)
_ATTRIBUTES = ByIdentity(1 << 16)  # descriptor -> _attribute_names


def _kernel_attributes_of(kernel) -> list:
    """``_kernel_attributes``, made."""
    name = group(kernel)
    out = [f"group={name}"]
    tile = _tiling(kernel)
    if tile is not None:
        tm, tn, tk = tile[:3]
        out += [f"{name}:tile_m={tm}", f"{name}:tile_n={tn}", f"tile_k={tk}", f"{name}:tile_k={tk}", f"{name}:tile={tm}x{tn}"]
    if isinstance(kernel, Depthwise):
        out += [f"{name}:tile={kernel.rows}x{kernel.tile_columns()}x{8 * kernel.channel_vectors}",
                f"{name}:thread={kernel.thread_rows}x{kernel.columns}", f"{name}:stages={kernel.stages}"]
        if kernel.loader == "tma":
            out += [f"{name}:loader=tma", f"{name}:threads={kernel.threads}"]
    if isinstance(kernel, DepthwiseMma):
        out += [f"{name}:tile={kernel.rows}x{kernel.columns}x{8 * kernel.channel_vectors}",
                f"{name}:threads={kernel.threads}", f"{name}:stages={kernel.stages}"]
    if isinstance(kernel, Conv2dFpropGrouped2x):
        out.append(f"{name}:group_mode={kernel.group_mode}")
    if isinstance(kernel, Conv2dFprop2x) and kernel.split_k_slices > 1:
        out.append(f"{name}:splits={kernel.split_k_slices}")
    # accesses narrower than 16 bytes along C or K: what they cost a class beyond its counts, shared
    # by its kernels of that width (held out, CUTLASS 2.x kernels of 2-element accesses had only their
    # own corrections, and R(2+1)D-18's winners of them were predicted 1.4x their time). The
    # transposed GEMMs keep their own: without the im2col iterator, narrow accesses cost them less
    # than they cost the conv kernels they share a group with (held out, ReXNet-1.0's 1x1 layers,
    # which the transposed kernels of 2-element accesses lead: their winners were predicted 1.6x
    # their time, and a build's regret was 3.9%; with their own, 2.0%)
    narrow = type(kernel).__name__ if isinstance(kernel, Conv2dFpropGemm2x) else name
    for field in ("alignment", "c_alignment", "k_alignment", "output_alignment"):
        width = getattr(kernel, field, None)
        if width and width < 8:
            out.append(f"{narrow}:{field}={width}")
    if isinstance(kernel, GroupedMma):
        out += [f"{name}:tile={kernel.rows}x{kernel.columns}", f"{name}:window={kernel.window}",
                f"{name}:schedule={kernel.schedule}"]
    if isinstance(kernel, Conv2dFpropNarrow):
        out += [f"{name}:tile={kernel.tile[0]}x{kernel.tile[1]}", f"{name}:warps={kernel.warps}",
                f"{name}:schedule={kernel.schedule}"]
    if isinstance(kernel, (GroupedMma, DepthwiseHalf)):
        # what a programmatic dependent launch saves, shared with the CUTLASS kernels of it
        out += [f"launch={kernel.launch}", f"{name}:launch={kernel.launch}"]
    if isinstance(kernel, DepthwiseHalf) and kernel.taps != "staged":
        # "first": a run's start, its taps not behind every CTA's windows; "each": a tile's channel
        # blocks in turn, its taps read from global memory a tile
        out.append(f"{name}:taps={kernel.taps}")
    if getattr(kernel, "fusion", ""):
        # what an epilogue costs, by the kernels weighed alike: a class of no fused rows (RetinaNet's
        # fused transposed kernels, held out) takes what it costs the GEMM kernels of its schedule
        out.append(f"{theta_group(kernel)}:fusion={kernel.fusion}")
    if isinstance(kernel, (GemmSm90, Conv2dFpropSm90)):
        out.append(f"cluster={kernel.cluster[0]}x{kernel.cluster[1]}")
    if isinstance(kernel, GemmSm90):
        out.append(f"launch={kernel.launch}")
        out.append(f"{name}:launch={kernel.launch}")
        epi = kernel.epilogue_tile
        out.append("epilogue=auto" if epi is None else f"epilogue={epi[1] / kernel.tile[1]:.2f}")
        out.append(f"{name}:epilogue=" + ("auto" if epi is None else f"{epi[0]}x{epi[1]}"))
        if kernel.source is not None:
            out.append(f"source={kernel.source}")
        # a kernel that holds C's buffers gives up mainloop stages, more so for wide tiles
        out.append(f"{name}:source={kernel.source or 'c'}:tile_n={kernel.tile[1]}")
        if kernel.store_stages is not None:
            out.append(f"store_stages={kernel.store_stages}")
    return out


# What the counts and the corrections miss on one layer mostly holds on its neighbours: a tile that
# runs a 1x1 layer of 256 channels on 56x56 images slower than predicted runs the one of 512 channels
# likewise. So the model keeps each measured row's residual, log(measured / predicted), by kernel and
# layer, and corrects a prediction by the kernel's residuals on the layers near the one it ranks
# (``Model.nearby``): weighed by a Gaussian of NEIGHBOUR_WIDTH over ``layer_point`` (log2 of the
# layer's GEMM M, N and K, filter taps and stride), shrunk toward none by NEIGHBOUR_PRIOR (the weight
# of a residual of 0). Chosen held out (docs/search.md): widths of 0.3-1.0 and priors of 0.1-1.0 all
# put the winner in the top 5 on 83-85% of the committed layers, against 80% without.
NEIGHBOUR_WIDTH = 0.4
NEIGHBOUR_PRIOR = 0.2
# The grouped kernels of this project keep no residuals: how a layer's groups fall into their CTAs'
# units changes from one group count to the next (RegNetX-1.6GF's 17 groups of 24 channels, a
# grouped_mma kernel 35% slower than predicted; RegNetY-1.6GF's 14 groups, faster than predicted),
# and with them, held out, RegNetY-1.6GF's top-5 regret was 8.3%, without them 0.6%.
NO_NEIGHBOURS = (GroupedMma, GroupedDirect)


def layer_point(problem) -> tuple:
    """Where a layer lies for ``Model.nearby``: log2 of its GEMM's M, N, K, its filter's taps and
    its stride (1 and 1 for a GEMM), rounded to 4 places."""
    _, (m, n, k), _, conv = _layer(problem, 1)
    taps, stride = (conv.r * conv.s, conv.stride_h) if conv is not None else (1, 1)
    return tuple(round(math.log2(max(v, 1)), 4) for v in (m, n, k, taps, stride))


_NEARBY_KEPT = 1 << 12  # the layers whose weights Model.nearby keeps (a vector of the measured layers' each)


def _nearby_scaled(ms: float, nearby: float) -> float:
    """A prediction ``ms`` corrected by ``Model.nearby``'s log-time term."""
    return ms * math.exp(nearby) if nearby else ms


# ---- the model ----------------------------------------------------------------------------------------

@dataclass
class Model:
    gpu: str  # the results folder name of the GPU it was fitted on (nvidia_h200)
    sms: int
    theta: dict  # group -> [theta per FEATURES]
    fallback: list  # theta for a group no row was fitted on (the median of each feature's theta)
    corrections: dict = field(default_factory=dict)  # attribute -> log-time correction
    rows: int = 0  # rows it was fitted on
    points: list = field(default_factory=list)  # the measured layers, each its layer_point
    neighbours: dict = field(default_factory=dict)  # kernel name -> [(index into points, residual)]
    families: list | None = None  # the families of the rows it was fitted on (None: a file from before they were kept)
    reach: dict | None = None  # theta group -> log2 of the outputs (GEMM M x N) of the largest layer of its rows

    def base(self, kernel, problem) -> float:
        """The counts' prediction in ms, before corrections."""
        theta = self.theta.get(theta_group(kernel), self.fallback)
        layer = _layer(problem, self.sms)
        return max(_dot(_features(kernel, _tiling(kernel), layer, self.sms), theta) / 1e3, MIN_MS)

    def untried_depth(self, kernel) -> bool:
        """Whether ``kernel`` is a tiled kernel of a tile K its ``group`` was fitted on no row of,
        where the group was fitted on rows of other depths: its tile-K correction is then another
        group's (``tile_k=``, the persistent kernels' mostly), which need not hold for it (a new
        depth of the space, held out: on Inception-v3 on an H100, with the H200's model, the
        transposed kernels of tile K 32 ran a median 1.39 times their prediction, those of K 64
        1.26, the persistent ones 1.11)."""
        tile = _tiling(kernel)
        if tile is None:
            return False
        depths = self.__dict__.get("_depths")
        if depths is None or depths[0] is not self.corrections:
            fitted = {}
            for name in self.corrections:
                head, sep, depth = name.partition(":tile_k=")
                if sep and depth.isdigit():
                    fitted.setdefault(head, set()).add(int(depth))
            depths = self.__dict__["_depths"] = (self.corrections, fitted)
        of_group = depths[1].get(group(kernel))
        return of_group is not None and tile[2] not in of_group

    def beyond(self, kernel, problem) -> bool:
        """Whether ``problem`` has more than REACH_FACTOR times the outputs of the largest layer
        ``kernel``'s theta group was fitted on a row of: its counts and corrections are then carried
        past what the rows measured, and need not order the group's kernels there (held out on an
        H100, Xception-41's depthwise layers of 34 to 92 million outputs at batch 32, 2.3 to 6.4
        times the largest of the depthwise rows (14 million: EfficientNet-B0's 56x56 layer of 144
        channels): the model's first-ranked kernels, tensor-copy tiles of 32 and 64 channels, ran 1.25
        to 2.7 times the best of the family's kernels, which it ranked 16th to 26th). False for a
        group of no rows, or where the model's file is from before reach was kept."""
        reach = (self.reach or {}).get(theta_group(kernel))
        return reach is not None and _outputs_log2(problem, self.sms) > reach + math.log2(REACH_FACTOR)

    def predict(self, kernel, problem) -> float:
        """Predicted time in ms."""
        base = self.base(kernel, problem)
        corrected = base * math.exp(sum(self.corrections.get(a, 0.0) for a in attributes(kernel, base)))
        return _nearby_scaled(corrected, self.nearby(kernel.name, problem))

    def nearby(self, name: str, problem) -> float:
        """The log-time correction of kernel ``name`` on ``problem`` from its residuals on the
        measured layers (``neighbours``): their mean weighed by each layer's closeness to
        ``problem`` (a Gaussian of NEIGHBOUR_WIDTH over ``layer_point``), shrunk toward 0 by
        NEIGHBOUR_PRIOR; 0 for a kernel of no rows."""
        return self._nearby(name, lambda: self._weights(problem))

    def _kept_nearby(self) -> tuple:
        """(the measured layers' points as an array, layer point -> its weights, kernel name -> its
        rows as arrays), kept while ``neighbours`` and ``points`` are the same objects."""
        import numpy as np
        kept = self.__dict__.get("_nearby_kept")
        if kept is None or kept[0] is not self.neighbours or kept[1] is not self.points:
            kept = self.__dict__["_nearby_kept"] = (self.neighbours, self.points, np.array(self.points, dtype=float),
                                                    {}, {})
        return kept[2:]

    def _weights(self, problem):
        """Each measured layer's weight in ``nearby`` on ``problem`` (kept by its layer point)."""
        import numpy as np
        points, weights_by_point, _ = self._kept_nearby()
        point = layer_point(problem)
        weights = weights_by_point.get(point)
        if weights is None:
            if len(weights_by_point) >= _NEARBY_KEPT:
                weights_by_point.clear()
            distance = ((points - np.array(point)) ** 2).sum(axis=1) if len(points) else np.zeros(0)
            weights = weights_by_point[point] = np.exp(-distance / (2 * NEIGHBOUR_WIDTH ** 2))
        return weights

    def _nearby(self, name: str, weights_of) -> float:
        """``nearby`` of kernel ``name``, the layer's weights from ``weights_of()`` (asked only for a
        kernel of rows)."""
        rows = self.neighbours.get(name)
        if not rows:
            return 0.0
        import numpy as np
        arrays = self._kept_nearby()[2]
        pair = arrays.get(name)
        if pair is None:
            pair = arrays[name] = (np.array([i for i, _ in rows], dtype=np.intp), np.array([r for _, r in rows]))
        w = weights_of()[pair[0]]
        return float(w @ pair[1]) / (NEIGHBOUR_PRIOR + float(w.sum()))

    def rank(self, kernels, problem) -> list:
        """[(predicted ms, kernel)] of the kernels that serve ``problem``, fastest first (ties by name)."""
        return self.ranking(kernels)(problem)

    def ranking(self, kernels):
        """``rank`` of ``kernels`` as a function of the problem, for ranking them on many: each
        prediction is ``predict``'s (the same operations on the same values), with what depends on
        the kernel alone (``_terms``) computed once, what depends on the layer alone once a layer,
        and ``serves`` asked once a layer for each kind of kernel served alike (``_serves_key``),
        whose kernels a layer that kind cannot serve are not visited."""
        kernels = list(kernels)
        terms = [None] * len(kernels)
        sms, kept = self.sms, self._kept_terms()
        by_key, alone = {}, []  # the kernels of each key; those whose serves is asked one by one
        for i, kernel in enumerate(kernels):
            key = _serves_key(kernel)
            if key is None:
                alone.append(i)
            else:
                by_key.setdefault(key, []).append(i)

        def rank(problem) -> list:
            layer, scored = _layer(problem, sms), []
            layer_weights = []  # the layer's weights in nearby, made once for its first kernel of rows

            def weights_of():
                if not layer_weights:
                    layer_weights.append(self._weights(problem))
                return layer_weights[0]
            visited = [i for i in alone if serves(kernels[i], problem) is None]
            for indices in by_key.values():
                if serves(kernels[indices[0]], problem) is None:
                    visited += indices
            for i in visited:
                kernel = kernels[i]
                if terms[i] is None:
                    terms[i] = kept.get(self._terms, kernel)
                tiling, theta, name, corrections = terms[i]
                base = max(_dot(_features(kernel, tiling, layer, sms), theta) / 1e3, MIN_MS)
                for limit, label in REGIMES:  # _regime(base)
                    if base < limit:
                        break
                else:
                    label = _regime(base)  # no regime: raises as predict does
                scored.append((_nearby_scaled(base * math.exp(corrections[label]), self._nearby(name, weights_of)), name,
                               kernel))
            # of kernels alike but for the output's accesses, which the counts do not tell apart,
            # the widest first: none narrower was faster on a layer both ran (docs/kernels.md)
            scored.sort(key=lambda t: (t[0], -getattr(t[2], "k_alignment", 0), t[1]))
            return [(ms, kernel) for ms, _, kernel in scored]
        return rank

    def _kept_terms(self) -> ByIdentity:
        """The ``_terms`` of the kernels this model has ranked, by descriptor, kept while its
        constants are the same objects (a model's constants are replaced, never changed in place):
        a search ranks the same space again and again."""
        constants = (self.theta, self.fallback, self.corrections)
        kept = self.__dict__.get("_terms_kept")
        if kept is None or any(a is not b for a, b in zip(kept[0], constants)):
            kept = self.__dict__["_terms_kept"] = (constants, ByIdentity(_TERMS_KEPT))
        return kept[1]

    def _terms(self, kernel) -> tuple:
        """(``_tiling``, theta, name, regime -> the sum of its attributes' corrections, added up
        as ``predict`` adds them) of ``kernel``."""
        get, (out, in_regime, own) = self.corrections.get, _attribute_names(kernel)
        common = sum(get(a, 0.0) for a in out)  # the first terms of each regime's sum, in its order
        mine = get(own, 0.0)
        corrections = {}
        for _, label in REGIMES:
            total = common
            for a in in_regime[label]:
                total += get(a, 0.0)
            corrections[label] = total + mine
        return (_tiling(kernel), self.theta.get(theta_group(kernel), self.fallback), kernel.name, corrections)

    def to_json(self) -> str:
        """The constants as JSON, the layers and each kernel's residuals a line each."""
        text = json.dumps({"gpu": self.gpu, "sms": self.sms, "features": FEATURES, "rows": self.rows,
                           "fallback": self.fallback, "theta": self.theta, "corrections": self.corrections,
                           **({} if self.families is None else {"families": self.families}),
                           **({} if self.reach is None else {"reach": self.reach})},
                          indent=1, sort_keys=True)
        compact = {"separators": (",", ":")}
        points = ",\n  ".join(json.dumps(list(p), **compact) for p in self.points)
        neighbours = ",\n  ".join(f"{json.dumps(name)}: {json.dumps([list(r) for r in rows], **compact)}"
                                  for name, rows in sorted(self.neighbours.items()))
        return (text[:-2] + f',\n "neighbours": {{\n  {neighbours}\n }},\n "points": [\n  {points}\n ]\n}}\n')


def model_gpu(requested: str | None, machine: str | None, models_dir=MODELS_DIR) -> str | None:
    """The GPU (folder name) whose model ranks candidates: GPU= (``requested``, a name or a
    folder name), else this machine's GPU, else the only GPU a model was fitted for; else None."""
    from .results import gpu_slug
    if requested or machine:
        return gpu_slug(requested or machine)
    fitted = fitted_models(models_dir)
    return fitted[0] if len(fitted) == 1 else None


def fitted_models(models_dir=MODELS_DIR) -> list:
    """The GPUs (folder names) a cost model was fitted for."""
    return sorted(p.stem for p in Path(models_dir).glob("*.json"))


def load_model(gpu: str | None, models_dir=MODELS_DIR) -> Model:
    """The model fitted for ``gpu`` (a results folder name), refused if there is none."""
    if gpu is None:
        raise ModelError(f"{models_dir}: no GPU here and no single fitted cost model to rank candidates with: name "
                         "the GPU with GPU=, or build every listed kernel with TOP=listed")
    path = Path(models_dir) / f"{gpu}.json"
    if not path.is_file():
        fitted = fitted_models(models_dir)
        raise ModelError(f"{path}: no cost model fitted for GPU {gpu} (fitted: {', '.join(fitted) or 'none'}); "
                         "profile a set on it with TOP=listed and run python -m kernelgen.cost_model fit"
                         + (f", or rank with another GPU's: COST_MODEL={fitted[0]}" if fitted else ""))
    from .inputs import MODEL_LIMIT, read_text
    try:
        data = json.loads(read_text(path, MODEL_LIMIT))
    except (KernelgenError, ValueError) as e:
        raise ModelError(f"{path}: not a cost model ({shorten(one_line(e))}); fit it again with python -m "
                         "kernelgen.cost_model fit") from None
    if not isinstance(data, dict) or data.get("gpu") != gpu or tuple(data.get("features", ())) != FEATURES:
        fitted_for = data.get("gpu") if isinstance(data, dict) else None
        raise ModelError(f"{path}: fitted for GPU {shorten(repr(fitted_for))} with other features or none, not "
                         f"for {gpu} with {list(FEATURES)}")
    try:
        points = [tuple(float(v) for v in p) for p in data.get("points", [])]
        if any(len(p) != 5 for p in points):
            raise ValueError("points: each 5 numbers")
        neighbours = {str(name): [(int(i), float(r)) for i, r in rows] for name, rows in data.get("neighbours", {}).items()}
        if any(not 0 <= i < len(points) for rows in neighbours.values() for i, _ in rows):
            raise ValueError("neighbours: a residual of a layer not in points")
        families = data.get("families")
        if families is not None and not (isinstance(families, list) and all(isinstance(f, str) for f in families)):
            raise ValueError("families: a list of family names")
        reach = data.get("reach")
        if reach is not None and not (isinstance(reach, dict) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in reach.values())):
            raise ValueError("reach: a number for each group")
        return Model(data["gpu"], int(data["sms"]), {g: [float(v) for v in t] for g, t in data["theta"].items()},
                     [float(v) for v in data["fallback"]], {a: float(v) for a, v in data["corrections"].items()},
                     int(data["rows"]), points, neighbours, families,
                     None if reach is None else {str(g): float(v) for g, v in reach.items()})
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ModelError(f"{path}: not a cost model (missing or malformed {shorten(one_line(e))}); fit it again "
                         "with python -m kernelgen.cost_model fit") from None


def nonnegative_least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a x - b| over x >= 0, by trying every support (few features: exact and fast)."""
    import numpy as np
    best, best_x = math.inf, np.zeros(a.shape[1])
    for size in range(1, a.shape[1] + 1):
        for support in itertools.combinations(range(a.shape[1]), size):
            x_s, *_ = np.linalg.lstsq(a[:, support], b, rcond=None)
            if (x_s < 0).any():
                continue
            x = np.zeros(a.shape[1])
            x[list(support)] = x_s
            residual = float(np.sum((a @ x - b) ** 2))
            if residual < best:
                best, best_x = residual, x
    return best_x


def fit(samples: list, gpu: str, sms: int) -> Model:
    """A model fitted to ``samples`` [(kernel, problem, measured ms)]: per group, theta >= 0
    minimising the squared relative error."""
    import numpy as np
    by_group, reach = {}, {}
    for kernel, problem, ms in samples:
        name, size = theta_group(kernel), round(_outputs_log2(problem, sms), 4)
        by_group.setdefault(name, []).append((features(kernel, problem, sms), ms * 1e3))
        reach[name] = max(reach.get(name, size), size)
    theta = {}
    for name, rows in sorted(by_group.items()):
        x = np.array([f for f, _ in rows])
        t = np.array([us for _, us in rows])
        theta[name] = [round(float(v), 9) for v in nonnegative_least_squares(x / t[:, None], np.ones(len(t)))]
    _share_launch(theta, by_group)
    fallback = [float(np.median([th[i] for th in theta.values()])) for i in range(len(FEATURES))]
    model = Model(gpu, sms, theta, fallback, {}, len(samples), families=sorted({k.family for k, _, _ in samples}),
                  reach=dict(sorted(reach.items())))
    model.corrections = _fit_corrections(model, samples)
    model.points, model.neighbours = _fit_neighbours(model, samples)
    return model


LAUNCH_ROWS_US = 4.0  # a group's launch weight is its own where it has rows faster than this (about two launches)


def _share_launch(theta: dict, by_group: dict) -> None:
    """A group of no row under LAUNCH_ROWS_US has its counts fitted again (in place) with a launch
    weight no larger than the median of the groups that have such rows: its own, fitted on layers of
    tens of microseconds, is what its counts leave unexplained there, and on a layer of a few (batch
    1) it ranks the group behind kernels of the same work (held out, GhostNet-1.0 b1's depthwise
    winners, whose families had rows of batch-32 layers alone, took 3.3 us of launch of their 2.2)."""
    import numpy as np
    at = FEATURES.index("launch")
    fast = {name for name, rows in by_group.items() if min(us for _, us in rows) < LAUNCH_ROWS_US}
    if not fast:
        return
    launch = float(np.median([theta[name][at] for name in fast]))
    for name, rows in by_group.items():
        if name in fast or theta[name][at] <= launch:
            continue
        x = np.delete(np.array([f for f, _ in rows]), at, axis=1)
        t = np.array([us for _, us in rows])
        rest = nonnegative_least_squares(x / t[:, None], (t - launch) / t)
        theta[name] = [round(float(v), 9) for v in np.insert(rest, at, launch)]


def _fit_neighbours(model: Model, samples: list) -> tuple:
    """(``Model.points``, ``Model.neighbours``): each sample's residual, log(measured / predicted)
    by ``model`` (its counts and corrections), by kernel and layer."""
    residuals = {}
    for kernel, problem, ms in samples:
        if isinstance(kernel, NO_NEIGHBOURS):
            continue
        residuals.setdefault(kernel.name, []).append((layer_point(problem), round(math.log(ms / model.predict(kernel, problem)), 4)))
    points = sorted({point for rows in residuals.values() for point, _ in rows})
    index = {point: i for i, point in enumerate(points)}
    return points, {name: sorted((index[point], r) for point, r in rows) for name, rows in residuals.items()}


def _fit_corrections(model: Model, samples: list) -> dict:
    """Ridge regression of log(measured / base) on the kernels' attributes (one-hot). A group's own
    attributes go unpenalised, so that they carry the group's mean and an attribute value no
    measured kernel had counts as the group's average."""
    import numpy as np
    rows = []
    for kernel, problem, ms in samples:
        base = model.base(kernel, problem)
        rows.append((attributes(kernel, base), math.log(ms / base)))
    names = sorted({a for attrs, _ in rows for a in attrs})
    index = {a: i for i, a in enumerate(names)}
    ones = [sorted({index[a] for a in attrs}) for attrs, _ in rows]  # the row's columns that are 1
    row_of = np.repeat(np.arange(len(rows)), [len(c) for c in ones])
    column_of = np.fromiter((j for c in ones for j in c), dtype=np.intp, count=len(row_of))
    y = np.array([r for _, r in rows])
    penalty = np.array([RIDGE * 1e-3 if a.startswith("group=") else RIDGE for a in names])
    # x (rows by attributes, 0/1) is never made: with each kernel's own attribute it would hold
    # thousands of columns. x.T @ x counts the rows two attributes share (whole numbers, exact in
    # any order of summation), made from the distinct rows, each counted as often as it occurs
    # (tens of thousands of samples have a few thousand distinct rows); x.T @ y sums each
    # attribute's rows' y, in the rows' order.
    counts = {}
    for c in ones:
        key = tuple(c)
        counts[key] = counts.get(key, 0) + 1
    pairs = np.concatenate([np.add.outer(np.array(c) * len(names), c).ravel() for c in counts])
    weights = np.repeat(np.array(list(counts.values()), dtype=float), [len(c) ** 2 for c in counts])
    gram = np.bincount(pairs, weights=weights, minlength=len(names) ** 2).reshape(len(names), len(names))
    # gram + diag(penalty), the penalty added to the diagonal in place: off it, the sum would add
    # zeros (to counts: exact), through a second matrix of thousands squared
    gram[np.diag_indices(len(names))] += penalty
    beta = np.linalg.solve(gram, np.bincount(column_of, weights=y[row_of], minlength=len(names)))
    return {a: round(float(b), 6) for a, b in zip(names, beta) if abs(b) > 1e-6}


# ---- the committed measurements ------------------------------------------------------------------------

def measured_samples(results_root, sets_dir, kernels_by_name: dict, gpu: str) -> list:
    """[(kernel, problem, ms, set)] of every verified ok row of ``gpu`` under ``results_root``
    whose kernel is in ``kernels_by_name`` (or is the fused variant of one for an epilogue of the
    row's set), timed from a CUDA graph."""
    from .fusion import epilogues, with_fused
    from .reduce import load_set, of_kernels, verified
    from .results import gpus_with_results
    from .vocab import verify_tolerance
    from .workloads import load_workloads

    samples, catalogs = [], {}  # epilogues -> the catalog with their fused variants
    plain, variants = list(kernels_by_name.values()), {}  # each epilogue's variants, made once
    tolerances = {}  # name -> verify_tolerance of the kernel, of the kernels the sets' rows name
    for set_file in sorted(Path(sets_dir).glob("*.txt")):
        folder = Path(results_root) / set_file.stem
        if gpu not in gpus_with_results(folder):
            continue
        problems = load_workloads(set_file.stem, sets_dir)[2]
        wanted = tuple(epilogues(problems))
        if wanted not in catalogs:  # sets of the same epilogues share one
            kernels = kernels_by_name
            if wanted:
                kernels = {k.name: k for k in with_fused(plain, problems, variants)}
            catalogs[wanted] = kernels
        kernels = catalogs[wanted]
        frame = load_set(folder / gpu, problems)
        # the tolerance of each kernel of the catalog that a row names (a kernel of one name is one
        # kernel in every catalog: a variant's name says its epilogue)
        named = set(frame["kernel"].tolist()) & kernels.keys()
        for name in named - tolerances.keys():
            tolerances[name] = verify_tolerance(kernels[name])
        held = {name: tolerances[name] for name in named}
        frame = of_kernels(frame, held)
        frame = frame[(frame["status"] == "ok") & (frame["timing"].str.startswith("graph")) & verified(frame, held)]
        by_name = {p.name: p for p in problems}
        samples += [(kernels[kernel], by_name[workload], float(ms), set_file.stem) for kernel, workload, ms in
                    zip(frame["kernel"].tolist(), frame["workload"].tolist(), frame["runtime_ms"].tolist())]
    return samples


MEASURED_TOP = 15  # of the build's kernels, those the model ranks this high for a layer are measured on it
# (and the first of each group after them: ``measured_by_rank``)


def measured_by_rank(ranked: list, built, top: int = MEASURED_TOP) -> list:
    """Of a layer's ``ranked`` kernels (the model's best first), those of ``built`` (names) a profile
    measures on it beside its own proposals: those within the first ``top``, and the first of each
    ``group`` after them. A kernel of a group the model ranks low for the layer may still win it
    (VGG-16 b1's matrix-vector kernels on its 25088 -> 4096 classifier: docs/search.md)."""
    out, groups = [], set()
    for rank, kernel in enumerate(ranked):
        if kernel.name in built and (rank < top or group(kernel) not in groups):
            out.append(kernel)
            groups.add(group(kernel))
    return out


def measured_kernels(specs_dir, spaces_dir) -> dict:
    """name -> descriptor of every kernel whose committed rows the fit and the record take: the
    listed families' and the generated space's (``space.merged``), as a build's catalog holds them."""
    from .space import load_space, merged
    from .specs import load_catalog
    return {k.name: k for k in merged(load_catalog(specs_dir), load_space(spaces_dir))}


def options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of the commands that fit the model to the committed measurements (this
    module's and ``kernelgen.record``'s): where the results, sets, specs and spaces are, and the GPU."""
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--gpu", default="nvidia_h200", help="results folder name of the GPU")
    parser.add_argument("--results", default=str(root / "profile_results"))
    parser.add_argument("--sets-dir", default=str(root / "kernel_specs" / "workloads"))
    parser.add_argument("--specs", default=str(root / "kernel_specs" / "families"))
    parser.add_argument("--spaces", default=str(root / "kernel_specs" / "spaces"))
    return parser


def committed_fit(parser: argparse.ArgumentParser, argv=None) -> tuple:
    """(args, samples, model): ``parser``'s arguments (``options``), ``measured_samples`` of their
    folders and GPU, and the model ``fit`` to them. An unknown GPU, a folder that cannot be read or
    no row ends the command with a line on stderr (status 1)."""
    args = parser.parse_args(argv)
    try:
        if args.gpu not in SM_COUNTS:
            raise KernelgenError(f"--gpu={args.gpu!r}: SM count unknown (known: {', '.join(sorted(SM_COUNTS))})")
    except KernelgenError as e:
        parser.exit(1, f"{one_line(str(e))}\n")
    samples = committed_samples(parser, args)
    return args, samples, fit([s[:3] for s in samples], args.gpu, SM_COUNTS[args.gpu])


def committed_samples(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list:
    """``measured_samples`` of the folders and GPU ``args`` name (``options``); a folder that cannot
    be read or no row ends the command with a line on stderr (status 1)."""
    try:
        samples = measured_samples(args.results, args.sets_dir, measured_kernels(args.specs, args.spaces), args.gpu)
        if not samples:
            raise KernelgenError(f"{args.results}: no verified ok rows of GPU {args.gpu}")
    except KernelgenError as e:
        parser.exit(1, f"{one_line(str(e))}\n")
    return samples


def main(argv=None) -> int:
    parser = options(argparse.ArgumentParser(
        prog="python -m kernelgen.cost_model",
        description="fit the cost model's constants to the committed measurements (its record on them: "
                    "python -m kernelgen.record)"))
    parser.add_argument("command", choices=["fit"], help="fit: write the model")
    parser.add_argument("--out", default=str(MODELS_DIR))
    if (sys.argv[1:] if argv is None else argv)[:1] == ["record"]:
        parser.exit(2, "python -m kernelgen.cost_model record: the record is a command of its own, "
                       "python -m kernelgen.record\n")
    args, samples, model = committed_fit(parser, argv)
    out = Path(args.out) / f"{args.gpu}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(model.to_json())
    print(f"{out}: {len(model.theta)} groups fitted to {len(samples)} measured rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
