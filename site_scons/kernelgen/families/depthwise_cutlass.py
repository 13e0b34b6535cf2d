"""CUTLASS's own depthwise direct convolution (``DefaultDepthwiseDirect2dConvFprop`` run by
``cutlass::conv::device::DirectConvolution``; profiler/depthwise_cutlass_adapter.h): groups = C = K,
NHWC activations, K x R x S filters, f16 in and out, fp32 accumulation (CUTLASS's example
accumulates in f16), SIMT.

A CTA computes an output tile of ``tile`` = [P, Q] pixels of one image by ``groups`` channels;
its warps take ``warp_m`` pixels each (``tile`` P*Q / ``warp_m`` warps), every warp all the CTA's
channels, a thread a kP x kQ block of pixels (CUTLASS's ``SimtWarpShape``) of 2 to 8 channels. Each
CTA keeps ``stages`` input windows in flight (cp.async, 16-byte accesses: C a multiple of 8) and
the tile's taps in shared memory. ``iterator = "fixed"`` is CUTLASS's ``kFixedStrideDilation``
with ``StrideSupport::kFixed``: the stride (``stride``, 1 or 2) and dilation (1) are compiled in,
so the window's shape is too; ``iterator = "optimized"`` is ``kOptimized`` with
``StrideSupport::kStrided``: stride and dilation at run time, the window sized per layer (dynamic
shared memory). The filter's R x S is compiled in (``filter``: 3, 5 or 7, square).

DirectConvolution's grid is (1, C / groups, ``split_k_slices``): despite the name, the slices are the
CTAs along the layer's output tiles (the reduction over R x S is never split), each CTA computing
every slices-th tile in turn, its stages pipelining them. The adapter sets split_k_slices to the
layer's tiles / ``tiles_per_cta`` (rounded up, at most 65535); 1 would leave C / groups CTAs for a
whole layer. The main kernel reads the filter reordered (RS x K) by a kernel DirectConvolution runs
before it each launch; the reordered copy is the kernel's workspace (K x R x S elements, see the
adapter).
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..vocab import DATA_TYPES
from .common import SHARED_MEMORY, expand_fixed_type_entries, fixed_type_family

KIND = "depthwise_cutlass"
TEMPLATE = "depthwise_cutlass.mako"
INCLUDES = (
    "cutlass/cutlass.h",
    "cutlass/epilogue/thread/linear_combination.h",
    "cutlass/conv/kernel/default_depthwise_fprop.h",
    "cutlass/conv/device/direct_convolution.h",
)
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}
ITERATORS = {
    "fixed": ("cutlass::conv::IteratorAlgorithm::kFixedStrideDilation", "cutlass::conv::StrideSupport::kFixed"),
    "optimized": ("cutlass::conv::IteratorAlgorithm::kOptimized", "cutlass::conv::StrideSupport::kStrided"),
}
ALIGNMENT = 8  # 16-byte accesses of f16 along C (DefaultDepthwiseDirect2dConvFprop's AlignmentA/B)
# CUTLASS's SimtWarpShape<warp_m, threads along M>: (kP, kQ), the pixels one thread computes.
THREAD_TILES = {(4, 4): (1, 1), (4, 2): (2, 1), (4, 1): (2, 2), (8, 1): (2, 4), (8, 2): (2, 2), (8, 4): (1, 2),
                (16, 1): (4, 4), (16, 2): (2, 4), (16, 4): (2, 2), (32, 1): (4, 8), (32, 2): (4, 4), (32, 4): (2, 4)}
MAX_ACCUMULATORS = 64  # fp32 sums a thread keeps (kP x kQ pixels x its channels)
MAX_TILE_CTAS = 65535  # grid.z: DirectConvolution::can_implement refuses more slices
# Measured on the H200 (profile_results/efficientnet_b0_b32_fused, tests/test_depthwise_cutlass.py):
# every 3x3 layer at stride 1 came out wrong, with either iterator; the adapter refuses them.
STRIDE1_WRONG = "3x3 at stride 1: wrong outputs on the H200 (every layer measured)"

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("filter", S.one_of((3, 5, 7))),
    S.Key("iterator", S.choice(ITERATORS)),
    S.Key("stride", S.one_of((1, 2)), default=None),  # the fixed iterator's; the optimized one's is the layer's
    S.Key("tile", S.int_tuple(2, 1, 16)),
    S.Key("groups", S.one_of((16, 32, 64, 128))),
    S.Key("warp_m", S.one_of((4, 8, 16, 32))),
    S.Key("stages", S.integer(2, 6)),
    S.Key("tiles_per_cta", S.one_of((1, 2, 4, 8)), default=1),
))


@dataclass(frozen=True)
class DepthwiseCutlass:
    family: str
    filter: int
    iterator: str
    stride: int | None  # compiled in (iterator "fixed"); None: the layer's (iterator "optimized")
    tile: tuple  # output pixels (P, Q) a CTA computes
    groups: int  # channels a CTA computes
    warp_m: int  # pixels a warp computes
    stages: int
    tiles_per_cta: int = 1

    element = "f16"
    accumulator = "f32"
    output = "f16"
    op = "conv2d_fprop_grouped"
    arch = 80  # cp.async multistage mainloop
    arch_specific = False
    template = TEMPLATE
    includes = INCLUDES
    adapter = "kernelgen::DepthwiseCutlassOperation"
    adapter_header = "depthwise_cutlass_adapter.h"
    alignment = ALIGNMENT
    # CUTLASS kernels take 15-60 s each to compile: a build does not measure every one of them on
    # every depthwise layer while the model has no rows of them (candidates.unfitted); they are
    # proposed by their rank, as weighed like this project's depthwise kernels (cost_model.theta_group).
    measure_unfitted = False

    @cached_property
    def name(self) -> str:
        acc = DATA_TYPES[self.accumulator].short
        stride = f"stride{self.stride}" if self.iterator == "fixed" else "strided"  # strided: the layer's
        p, q = self.tile
        return (f"cutlass_simt_{self.output}_{acc}dwfprop_{self.iterator}_{self.element}_{self.filter}x{self.filter}"
                f"_{stride}_{p}x{q}x{self.groups}_{self.warp_m}x{self.stages}_tpc{self.tiles_per_cta}_nhwc_align{ALIGNMENT}")

    def threads(self) -> int:
        """A CTA's: 32 a warp, P*Q / ``warp_m`` warps."""
        return 32 * (self.tile[0] * self.tile[1] // self.warp_m)

    def warp_threads(self) -> tuple:
        """(along the pixels, along the channels) of a warp's 32 lanes, two channels a lane
        (DepthwiseDirectConvMmaCoreWithLaneAccessSize: WarpNumThreadsM, WarpNumThreadsN)."""
        n = min(self.groups // 2, 32)
        return 32 // n, n

    def thread_tile(self):
        """(kP, kQ): the pixels one thread computes; None where CUTLASS has no SimtWarpShape for it."""
        return THREAD_TILES.get((self.warp_m, self.warp_threads()[0]))

    def lane_channels(self) -> int:
        """Channels a thread computes (LaneN: at most 8, 16 bytes of f16)."""
        return min(8, self.groups // self.warp_threads()[1])

    def accumulators(self) -> int:
        kp, kq = self.thread_tile()
        return kp * kq * self.lane_channels()

    def window(self, stride: tuple, dilation: tuple = (1, 1)) -> tuple:
        """Input rows and columns of a tile's window at (stride_h, stride_w), (dilation_h, dilation_w)."""
        return tuple((t - 1) * s + (self.filter - 1) * d + 1 for t, s, d in zip(self.tile, stride, dilation))

    def shared_bytes(self, stride: tuple | None = None, dilation: tuple = (1, 1)) -> int:
        """Shared memory a CTA asks for (DirectConvolutionParams::smem_size_): ``stages`` windows of
        ``groups`` channels and the tile's taps once, each rounded up to whole 16-byte loads of every
        thread (the epilogue's storage is smaller: a union with a window)."""
        h, w = self.window((self.stride, self.stride) if stride is None else stride, dilation)
        vectors = self.groups // ALIGNMENT

        def loads(count):  # vectors a CTA's threads load, in whole rounds of every thread
            return -(-count // self.threads()) * self.threads() * 16

        return self.stages * loads(h * w * vectors) + loads(self.filter ** 2 * vectors)

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement (the adapter's checks and CUTLASS's) refuses ``conv``, or None."""
        if not conv.groups == conv.c == conv.k:
            return "a depthwise kernel: needs groups = C = K"
        if (conv.r, conv.s) != (self.filter, self.filter):
            return f"built for {self.filter}x{self.filter} filters"
        if self.filter == 3 and (conv.stride_h, conv.stride_w) == (1, 1):
            return STRIDE1_WRONG
        if self.iterator == "fixed":
            if (conv.stride_h, conv.stride_w) != (self.stride, self.stride):
                return f"built for stride {self.stride}"
            if (conv.dilation_h, conv.dilation_w) != (1, 1):
                return "built for dilation 1"
        if conv.c % ALIGNMENT:
            return f"C must be a multiple of {ALIGNMENT}"
        need = self.shared_bytes((conv.stride_h, conv.stride_w), (conv.dilation_h, conv.dilation_w))
        if need > SHARED_MEMORY:
            return f"needs {need} bytes of shared memory, more than {SHARED_MEMORY}"
        return None

    def slices(self, conv) -> int:
        """The CTAs along the output tiles (split_k_slices; depthwise_cutlass_adapter.h)."""
        tiles = conv.n * -(-conv.p // self.tile[0]) * -(-conv.q // self.tile[1])
        return min(-(-tiles // self.tiles_per_cta), MAX_TILE_CTAS)

    def values(self) -> dict:
        algorithm, stride_support = ITERATORS[self.iterator]
        return {"element": DATA_TYPES[self.element].cpp, "accumulator": DATA_TYPES[self.accumulator].cpp,
                "output": DATA_TYPES[self.output].cpp, "filter": self.filter, "tile": self.tile,
                "groups": self.groups, "warp_m": self.warp_m, "stages": self.stages, "algorithm": algorithm,
                "stride_support": stride_support, "stride": self.stride, "fixed": self.iterator == "fixed",
                "tiles_per_cta": self.tiles_per_cta, "epilogue_vector": 128 // DATA_TYPES[self.output].bits}


def check(path, entry, kernel) -> None:
    if kernel.iterator == "fixed" and kernel.stride is None:
        raise SpecError(path, "a fixed-stride kernel (iterator \"fixed\") needs its stride", entry, "stride")
    if kernel.iterator == "optimized" and kernel.stride is not None:
        raise SpecError(path, "an optimized kernel takes the layer's stride at run time: give no stride",
                        entry, "stride")
    p, q = kernel.tile
    if (p * q) % kernel.warp_m:
        raise SpecError(path, f"warps of {kernel.warp_m} pixels do not divide the tile's {p}x{q}", entry, "warp_m")
    if kernel.threads() > 1024:
        raise SpecError(path, f"{kernel.threads()} threads exceed 1024 a CTA", entry, "warp_m")
    along_m = kernel.warp_threads()[0]
    shape = kernel.thread_tile()
    if shape is None:
        raise SpecError(path, f"CUTLASS has no thread tile (SimtWarpShape) for warps of {kernel.warp_m} pixels "
                        f"over {along_m} lanes ({kernel.groups} channels a CTA)", entry, "warp_m")
    if p % shape[0] or q % shape[1]:
        raise SpecError(path, f"threads of {shape[0]}x{shape[1]} pixels do not tile the tile's {p}x{q}", entry, "tile")
    if kernel.accumulators() > MAX_ACCUMULATORS:
        raise SpecError(path, f"a thread would keep {kernel.accumulators()} fp32 sums, more than {MAX_ACCUMULATORS}",
                        entry, "warp_m")
    if kernel.iterator == "fixed" and (kernel.filter, kernel.stride) == (3, 1):
        raise SpecError(path, f"a kernel that would serve no layer ({STRIDE1_WRONG})", entry, "stride")
    stride = (kernel.stride or 1,) * 2  # an optimized kernel's least window: stride 1
    if kernel.shared_bytes(stride) > SHARED_MEMORY:
        raise SpecError(path, f"{kernel.stages} stages of the tile's window and its taps need "
                        f"{kernel.shared_bytes(stride)} bytes of shared memory, more than {SHARED_MEMORY}",
                        entry, "stages")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(DepthwiseCutlass, FAMILY, ENTRY, path, raw, TYPES, check)
