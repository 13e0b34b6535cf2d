"""CUTLASS 3.x ``GemmUniversal`` on SM90 (TMA, wgmma, warp-specialized persistent kernels),
offered for the workloads that are GEMMs: 1x1, stride-1, unpadded convolutions in NHWC
(M = N*H*W, N = K, K = C: activations are A, row-major; filters are B, K-major; the output
is D, row-major) and GEMM workloads.

A spec lists entries, each a tile shape with a schedule (cooperative: two consumer
warpgroups share one tile; pingpong: they alternate tiles), a tile scheduler, the cluster
shapes and epilogue subtiles to build it with, and optionally how many TMA stores of D the
epilogue keeps in flight (``store_stages``). Each entry x cluster x epilogue subtile is one
kernel. The family's ``source`` says whether the epilogue has a source operand C (absent: C
typed as the output and never read; "void": none). With the stream-K tile scheduler an entry
may list ``splits``: one kernel per value, each splitting every output tile's K that many ways
(split-K); without, the scheduler splits as it sees fit (stream-K). Such kernels zero their
workspace's counters before each launch (profiler/stream_k_adapter.h). An entry may list
``launches``: one kernel per value, "stream" (a plain launch, the default) or "pdl"
(programmatic dependent launch: the kernel may start while the kernel before it on the stream
finishes, and waits for it before touching global memory; profiler/dependent_launch.h).
The family's ``store`` says how the epilogue writes D: absent, by TMA from shared memory (D's
rows 16-byte aligned: K a multiple of 8 for 16-bit outputs); "nosmem", each thread its elements
from registers (CUTLASS's DefaultEpilogue: any K, D = alpha acc + beta C only, CUTLASS's tile
scheduler), for the layers of odd output channels that TMA cannot store. A persistent conv
family's ``pad_channels = true`` runs layers of input channels no multiple of 8: each launch pads
the activations and filters into the workspace first (profiler/padded_adapter.h; names end
``_padc``).
"""

from dataclasses import dataclass, replace
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..fusion import fused_adapter, fusion_cpp, includes as fused_includes, reads_c
from ..ops.common import epilogue_suffix, fused_op
from ..targets import TARGETS
from ..vocab import DATA_TYPES
from .common import family_keys

SM90_GEMM_SCHEDULES = TARGETS[90].schedules["gemm"]
SM90_TILE_SCHEDULERS = TARGETS[90].schedules["tile_scheduler"]
SM90_LAUNCHES = TARGETS[90].schedules["launch"]

KIND = "gemm_sm90"
TEMPLATE = "gemm_sm90.mako"
INCLUDES = (
    "cutlass/cutlass.h",
    "cute/tensor.hpp",
    "cutlass/kernel_hardware_info.hpp",
    "cutlass/gemm/dispatch_policy.hpp",
    "cutlass/gemm/collective/collective_builder.hpp",
    "cutlass/epilogue/collective/collective_builder.hpp",
    "cutlass/gemm/kernel/gemm_universal.hpp",
    "cutlass/gemm/kernel/tile_scheduler.hpp",
    "cutlass/gemm/device/gemm_universal_adapter.h",
)


# The epilogue's source operand C. Absent: C has the output's type and points at the output,
# never read (beta = 0). "void": no source operand, as for D = conv(X, W) alone; CUTLASS then
# allocates no shared memory for C and delays each TMA store past the next subtile's.
SOURCES = {"void": "void"}
# How the epilogue stores D: name part, CUTLASS's epilogue schedule (None: the kernel schedule's
# TMA one, SM90_GEMM_SCHEDULES), the output's alignment in elements (None: 16 bytes).
STORES = {"tma": ("_epi_tma", None, None), "nosmem": ("_epi_nosmem", "cutlass::epilogue::NoSmemWarpSpecialized", 1)}
# A kernel of ``searched = true`` (names end ``_searched``): its adapter is its fixed twin's, of
# profiler/searched_adapter_3x.h: the same kernel launched with each of its tile scheduler's settings
# (raster order and swizzle; a stream-K kernel's decomposition and splits) while profiling, the fastest
# recorded in its row (``setting``) and launched so by the header.
SEARCHED_HEADER = "searched_adapter_3x.h"
SEARCHED_SUFFIX = "_searched"


def entries_table(kind: str) -> S.Table:
    """A family of entries: the common keys, then ``kernels``, a list of ENTRY tables."""
    return S.Table((
        *family_keys(kind),
        S.Key("source", S.choice(SOURCES), None),
        S.Key("store", S.choice(STORES), "tma"),
        S.Key("pad_channels", S.boolean, False),
        # the tile scheduler's runtime parameters searched at profile time (SEARCHED_HEADER)
        S.Key("searched", S.boolean, False),
        S.Key("kernels", lambda v: v),  # read entry by entry, by expand_entries
    ))


FAMILY = entries_table(KIND)
ENTRY = S.Table((
    S.Key("tile", S.int_tuple(3, 8, 256)),
    S.Key("schedule", S.choice(SM90_GEMM_SCHEDULES)),
    S.Key("scheduler", S.choice(SM90_TILE_SCHEDULERS), "default"),
    S.Key("clusters", S.list_of(S.int_tuple(3, 1, 8))),
    # The output subtiles the epilogue stores one at a time; absent: CUTLASS picks (EpilogueTileAuto).
    S.Key("epilogue_tiles", S.list_of(S.int_tuple(2, 8, 256)), (None,)),
    # TMA stores of D in flight (profiler/epilogue_sm90.h); absent: CUTLASS's builder, at most two.
    S.Key("store_stages", S.integer(2, 16), None),
    # With the stream-K scheduler: split every output tile's K this many ways (split-K), one
    # kernel per value; absent: as the scheduler chooses (stream-K). profiler/stream_k_adapter.h.
    S.Key("splits", S.list_of(S.integer(2, 64)), (None,)),
    # How each kernel of the entry is launched, one kernel per value (SM90_LAUNCHES).
    S.Key("launches", S.list_of(S.choice(SM90_LAUNCHES)), ("stream",)),
))


@dataclass(frozen=True)
class GemmSm90:
    family: str
    element: str
    accumulator: str
    output: str
    tile: tuple
    cluster: tuple
    schedule: str
    scheduler: str
    epilogue_tile: tuple = None  # None: EpilogueTileAuto
    source: str = None  # None: C typed and placed as the output; "void": none (SOURCES)
    store_stages: int = None  # None: the epilogue CUTLASS's builder makes
    splits: int = None  # with the stream-K scheduler: K split this many ways; None: its own choice
    launch: str = "stream"  # SM90_LAUNCHES: "pdl", programmatic dependent launch
    fusion: str = ""  # the epilogue it computes (kernelgen.fusion); "" for none
    store: str = "tma"  # STORES: how the epilogue writes D ("nosmem": from registers, any K)
    searched: bool = False  # its tile scheduler's settings searched at profile time (SEARCHED_HEADER)

    kernel_op = "gemm"  # what it computes before any epilogue
    arch = 90
    arch_specific = True
    template = TEMPLATE
    family_includes = INCLUDES
    default_adapter = "kernelgen::GemmOperation3x", "gemm_adapter_3x.h"
    stream_k_adapter = "kernelgen::GemmStreamKOperation3x", "stream_k_adapter.h"
    fused_adapter = "kernelgen::FusedGemmOperation3x", "fused_adapter_3x.h"
    fused_stream_k_adapter = "kernelgen::FusedGemmStreamKOperation3x", "fused_adapter_3x.h"

    fuses = True  # its template and adapters take a fusion operation (kernelgen.fusion)
    channels_along_m = False  # D's output channels are the GEMM's M (a bias one value a row), not its N
    name_ends_with_fusion = True  # its name is its unfused twin's and epilogue_suffix(fusion): fusion.fused
    stores = tuple(STORES)  # the stores its template and adapters build
    pads_channels = False  # whether it has an adapter that pads C (``pad_channels``)
    searches = True  # whether it has adapters that search its settings (``searched``)
    pad_channels = False  # this kernel pads C to a multiple of 8 before each launch (a field where pads_channels)

    @property
    def fusible(self) -> bool:
        """Whether a fused variant can be made of it: CUTLASS's builder's epilogue (no store stages)."""
        return (self.fuses and not self.fusion and self.store_stages is None and self.store == "tma"
                and not self.pad_channels)

    @property
    def optional_relu(self) -> bool:
        """Whether a variant of fusion OPTIONAL_RELU (the activation set at launch) can be made of it:
        a fusible one whose settings are not searched (the searched adapters set no activation)."""
        return self.fusible and not self.searched

    @property
    def op(self) -> str:
        """``kernel_op``, and a fused kernel's epilogue: ``<op>:<epilogue>`` (ops.common.fused_op)."""
        return fused_op(self.kernel_op, self.fusion, reads_c(self))

    @property
    def adapter(self) -> str:
        return self._adapter()[0]

    @property
    def adapter_header(self) -> str:
        return self._adapter()[1]

    def _adapter(self) -> tuple:
        """(adapter, its header): the stream-K one for a kernel of the stream-K scheduler; a fused
        kernel's (profiler/fused_adapter_3x.h; of fusion OPTIONAL_RELU, profiler/optional_relu_adapter_3x.h)."""
        if self.fusion:
            adapter, header = self.fused_stream_k_adapter if self.scheduler == "stream_k" else self.fused_adapter
            adapter = fused_adapter(self.fusion, adapter)
        else:
            adapter, header = self.stream_k_adapter if self.scheduler == "stream_k" else self.default_adapter
        if self.searched:  # kernelgen::X -> kernelgen::SearchedX
            return adapter.replace("kernelgen::", "kernelgen::Searched", 1), SEARCHED_HEADER
        return adapter, header

    @property
    def alignment(self) -> int:
        return 128 // DATA_TYPES[self.element].bits

    @property
    def c_alignment(self) -> int:
        """The input channels' alignment it runs: any C where it pads them first."""
        return 1 if self.pad_channels else self.alignment

    @property
    def k_alignment(self) -> int:
        """The output's alignment along its columns (K): what its epilogue can store."""
        return STORES[self.store][2] or self.alignment

    @property
    def includes(self) -> tuple:
        return (self.family_includes + (() if self.store_stages is None else ("epilogue_sm90.h",))
                + (() if self.launch == "stream" else ("dependent_launch.h",))
                + fused_includes(self.fusion))

    @property
    def defines(self) -> tuple:
        """The macros the kernel's translation unit defines before CUTLASS's headers."""
        return SM90_LAUNCHES[self.launch][0]

    @property
    def source_type(self) -> str:
        """The source operand C's type as kernel names spell it."""
        return self.output if self.source is None else self.source

    def operation(self) -> tuple[str, str]:
        """The name's operation and operand part; its layouts part (after the cluster)."""
        e, o = self.element, self.output
        return f"gemm_{e}_{e}_{self.accumulator}_{self.source_type}_{o}", "_tnt"

    name_suffix = ""  # what a subclass's names end with (the transposed kernels': "_transposed")

    @cached_property
    def name(self) -> str:
        """Computed once a descriptor (the fields are frozen): the space's ranking looks it up
        for every kernel on every layer."""
        operation, layouts = self.operation()
        return (f"cutlass3x_sm90_tensorop_{operation}"
                f"_{'x'.join(map(str, self.tile))}_{'x'.join(map(str, self.cluster))}_0{layouts}_align{self.alignment}"
                f"{self.scheduler_suffix}_{SM90_GEMM_SCHEDULES[self.schedule][1]}{STORES[self.store][0]}"
                f"{epilogue_tile_suffix(self.epilogue_tile)}"
                f"{'' if self.store_stages is None else f'_stores{self.store_stages}'}"
                f"{SM90_LAUNCHES[self.launch][1]}{self.name_suffix}{'_padc' if self.pad_channels else ''}"
                f"{SEARCHED_SUFFIX if self.searched else ''}"
                f"{epilogue_suffix(self.fusion)}")

    @cached_property
    def shared_type(self) -> tuple | None:
        """(what names its CUTLASS kernel type, how that type is compiled): kernels of one type but
        their launch (and splits, the adapter's) instantiate one GemmUniversal, compiled with
        CUTLASS's grid-dependency control for a programmatic dependent launch and without it for a
        stream one. One binary holds one code of a kernel type, so a header chooses that type one
        way (``reduce.one_code_a_type``). None for a searched kernel: a type of its own."""
        if self.searched:
            return None
        return replace(self, launch="stream", splits=None).name, self.launch

    @property
    def scheduler_suffix(self) -> str:
        return SM90_TILE_SCHEDULERS[self.scheduler][1] if self.splits is None else f"_splitk{self.splits}"

    def values(self) -> dict:
        kernel, _, epilogue, _ = SM90_GEMM_SCHEDULES[self.schedule]
        _, store_schedule, store_alignment = STORES[self.store]
        output = DATA_TYPES[self.output].cpp
        source = output if self.source is None else SOURCES[self.source]
        return {
            "element": DATA_TYPES[self.element].cpp,
            "accumulator": DATA_TYPES[self.accumulator].cpp,
            "output": DATA_TYPES[self.output].cpp,
            "source": DATA_TYPES[self.output].cpp if self.source is None else SOURCES[self.source],
            "tile": self.tile,
            "cluster": self.cluster,
            "schedule": kernel,
            "epilogue": store_schedule or epilogue,
            # C's and D's alignment in elements, as the epilogue's builder takes it
            "output_alignment": store_alignment or f"128 / cute::sizeof_bits_v<{output}>",
            "scheduler": SM90_TILE_SCHEDULERS[self.scheduler][0],
            "epilogue_tile": epilogue_tile_cpp(self.epilogue_tile),
            "store_stages": self.store_stages,
            # the K split of a stream-K kernel (kernelgen::SplitK): 0, the scheduler's choice; None: not stream-K
            "splits": None if self.scheduler != "stream_k" else (self.splits or 0),
            "pdl": self.launch == "pdl",  # the device operator wrapped in kernelgen::DependentLaunch
            "searched": self.searched,  # a kernel type of its own (sm90_epilogue.mako's device_op)
            # the epilogue's fusion operation (kernelgen.fusion); None: CUTLASS's default, D = alpha acc + beta C
            "fusion": fusion_cpp(self.fusion, output, DATA_TYPES[self.accumulator].cpp, source,
                                 per_row=self.channels_along_m) if self.fusion else None,
        }


def epilogue_tile_suffix(tile) -> str:
    return "" if tile is None else "_" + "x".join(map(str, tile))


def epilogue_tile_cpp(tile) -> str:
    if tile is None:
        return "cutlass::epilogue::collective::EpilogueTileAuto"
    return f"cute::Shape<cute::_{tile[0]}, cute::_{tile[1]}>"


def check_entry(path, entry, fam, spec):
    """An entry's tile fits its schedule and wgmma, its scheduler its schedule, its clusters SM90."""
    m, n, k = spec["tile"]
    min_m = SM90_GEMM_SCHEDULES[spec["schedule"]][3]
    if m % min_m:
        raise SpecError(path, f"a {spec['schedule']} tile's M must be a multiple of {min_m}, not {m}", entry, "tile")
    if n % 8 or n > 256:
        raise SpecError(path, f"tile N {n} must be a multiple of 8 of at most 256 (wgmma)", entry, "tile")
    TARGETS[90].check_tile_k(path, entry, fam["element"], k, "tile")
    if spec["scheduler"] == "stream_k" and spec["schedule"] != "cooperative":
        raise SpecError(path, "stream-K tile scheduling needs the cooperative schedule", entry, "scheduler")
    if spec["splits"] != (None,) and spec["scheduler"] != "stream_k":
        raise SpecError(path, "splits needs the stream-K tile scheduler (scheduler = \"stream_k\")", entry, "splits")
    if "pdl" in spec["launches"] and spec["scheduler"] == "stream_k":
        raise SpecError(path, "a stream-K kernel zeroes its workspace before each launch, which a dependent "
                        "launch would overlap: launches = [\"pdl\"] needs the default tile scheduler", entry, "launches")
    for i, cluster in enumerate(spec["clusters"]):
        TARGETS[90].check_cluster(path, f"{entry}.clusters[{i}]", cluster)
    for i, epi in enumerate(spec["epilogue_tiles"]):
        if epi is None:
            continue
        if m % epi[0] or n % epi[1]:
            raise SpecError(path, f"epilogue tile {epi[0]}x{epi[1]} does not divide the tile {m}x{n}",
                            f"{entry}.epilogue_tiles[{i}]")
        if epi[0] != min_m or epi[1] % 16:  # what CUTLASS's SM90 epilogue builder accepts
            raise SpecError(path, f"a {spec['schedule']} epilogue tile is {min_m} x a multiple of 16, "
                            f"not {epi[0]}x{epi[1]}", f"{entry}.epilogue_tiles[{i}]")
    stages = spec["store_stages"]
    if stages is not None:
        if None in spec["epilogue_tiles"]:
            raise SpecError(path, "store_stages needs explicit epilogue_tiles", entry, "store_stages")
        for epi in spec["epilogue_tiles"]:
            subtiles = (m // epi[0]) * (n // epi[1])
            if stages > subtiles:
                raise SpecError(path, f"{stages} stores in flight, but a {m}x{n} tile has only {subtiles} "
                                f"subtiles of {epi[0]}x{epi[1]}", entry, "store_stages")


def check_store(path, entry, cls, store: str, source, spec):
    """What an epilogue storing D from registers (CUTLASS's DefaultEpilogue) is built with."""
    if store not in cls.stores:
        raise SpecError(path, f"store = \"{store}\" is not built for this family", None, "store")
    if source is not None:
        raise SpecError(path, f"store = \"{store}\" takes C typed as the output (no source = \"void\")", None, "source")
    if spec["scheduler"] != "default":
        raise SpecError(path, f"store = \"{store}\" needs the default tile scheduler", entry, "scheduler")
    if spec["epilogue_tiles"] != (None,) or spec["store_stages"] is not None:
        raise SpecError(path, f"store = \"{store}\" stores from registers: no epilogue_tiles nor store_stages",
                        entry, "epilogue_tiles" if spec["epilogue_tiles"] != (None,) else "store_stages")


def check_plain_launches(path, entry, spec, why: str):
    """An entry of a kernel whose adapter launches copies before it (``why`` says which): the default
    tile scheduler and plain launches only."""
    if spec["scheduler"] != "default" or spec["launches"] != ("stream",):
        raise SpecError(path, f"{why}: the default tile scheduler and plain launches only", entry,
                        "scheduler" if spec["scheduler"] != "default" else "launches")


def check_padding(path, entry, cls, spec):
    """What a kernel that pads C before each launch (profiler/padded_adapter.h) is built with."""
    if not cls.pads_channels:
        raise SpecError(path, "pad_channels is not built for this family", None, "pad_channels")
    check_plain_launches(path, entry, spec, "pad_channels launches its padding first")


def check_searched(path, entry, cls, fam, spec):
    """What a kernel of searched settings (SEARCHED_HEADER) is built with: a family of its
    adapters, the stream-K scheduler's own split (the splits are among its settings), no padding."""
    if not cls.searches:
        raise SpecError(path, "searched = true is not built for this family", None, "searched")
    if fam["pad_channels"]:
        raise SpecError(path, "searched = true with pad_channels: the padding adapter searches no setting",
                        None, "searched")
    if spec["splits"] != (None,):
        raise SpecError(path, "searched = true searches a stream-K kernel's splits at profile time: no splits",
                        entry, "splits")


def expand_entries(cls, table: S.Table, path, raw: dict, check=None) -> list:
    """The kernels of a spec read with ``table``: each entry x cluster x epilogue tile, as ``cls``;
    ``check(path, entry, spec)`` may refuse an entry the family cannot build."""
    fam = table.read(path, raw)
    if DATA_TYPES[fam["element"]].bits != 16:
        raise SpecError(path, "this family is written for 16-bit inputs", None, "element")
    kernels = []
    for entry, spec in S.read_entries(path, fam["kernels"], "kernels", ENTRY):
        check_entry(path, entry, fam, spec)
        if check is not None:
            check(path, entry, spec)
        if fam["store"] != "tma":
            check_store(path, entry, cls, fam["store"], fam["source"], spec)
        padding = {}
        if fam["searched"]:
            check_searched(path, entry, cls, fam, spec)
            padding["searched"] = True
        if fam["pad_channels"]:
            check_padding(path, entry, cls, spec)
            padding["pad_channels"] = True
        kernels += [cls(family=path.stem, element=fam["element"], accumulator=fam["accumulator"],
                        output=fam["output"], tile=spec["tile"], cluster=cluster, schedule=spec["schedule"],
                        scheduler=spec["scheduler"], epilogue_tile=epi, source=fam["source"],
                        store_stages=spec["store_stages"], splits=splits, launch=launch, store=fam["store"], **padding)
                    for cluster in spec["clusters"] for epi in spec["epilogue_tiles"] for splits in spec["splits"]
                    for launch in spec["launches"]]
    return kernels


def expand(path, raw: dict) -> list:
    return expand_entries(GemmSm90, FAMILY, path, raw)
