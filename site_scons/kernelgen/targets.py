"""The GPU architectures kernels are built for: one row per architecture, read by the kernel
families (shared memory, clusters, tile K, the schedules a spec may name), ``arch`` (``ARCH=``)
and the header.

A new architecture is a new row here (its limits, its schedule vocabulary and the rules its
tiles follow) and the families and templates that build for it.
"""

from dataclasses import dataclass, field

from .errors import SpecError
from .vocab import DATA_TYPES

# CUTLASS 3.x SM90 schedules, by kind: spec key -> (C++ tag, name suffix, ...). Every string a
# spec's schedule reaches a template with comes from here.
SM90_SCHEDULES = {
    # conv mainloop schedules: (C++ tag, name suffix)
    "conv": {"warpspecialized": ("cutlass::conv::KernelImplicitTmaWarpSpecializedSm90", "warpspecialized")},
    # epilogue schedules: (C++ tag, name suffix)
    "epilogue": {"tma": ("cutlass::epilogue::TmaWarpSpecialized", "epi_tma")},
    # GEMM kernel schedules: (kernel schedule, name suffix, epilogue schedule, the tile M it needs
    # a multiple of: cooperative splits M over two consumer warpgroups)
    "gemm": {
        "cooperative": ("cutlass::gemm::KernelTmaWarpSpecializedCooperative", "warpspecialized_cooperative",
                        "cutlass::epilogue::TmaWarpSpecializedCooperative", 128),
        "pingpong": ("cutlass::gemm::KernelTmaWarpSpecializedPingpong", "warpspecialized_pingpong",
                     "cutlass::epilogue::TmaWarpSpecialized", 64),
    },
    # tile schedulers: (C++ tag, name suffix)
    "tile_scheduler": {
        "default": ("void", ""),
        "stream_k": ("cutlass::gemm::StreamKScheduler", "_stream_k"),
    },
    # how a kernel is launched: (the macros its translation unit defines before CUTLASS's
    # headers, name suffix). "pdl": programmatic dependent launch, the kernel compiled with
    # CUTLASS's grid-dependency control (profiler/dependent_launch.h)
    "launch": {
        "stream": ((), ""),
        "pdl": (("CUTLASS_ENABLE_GDC_FOR_SM90",), "_pdl"),
    },
}


@dataclass(frozen=True)
class Target:
    sm: int  # compute capability, major * 10 + minor
    suffix: str  # the arch-specific target's suffix ("a": sm_90a, wgmma and setmaxnreg), "" if none
    shared_memory: int  # bytes of shared memory one CTA may ask for (the opt-in maximum)
    max_cluster_ctas: int  # the largest portable thread-block cluster (1: no clusters)
    cutlass_tag: str  # CUTLASS's architecture tag, as the kernel templates spell it
    schedules: dict = field(default_factory=dict)  # kind -> {spec key: C++ spellings}, as SM90_SCHEDULES
    # What a tile's K must be a multiple of: (elements, bytes of a row), or None where no family
    # of this row checks it (wgmma: whole 16-element MMA steps, 32-byte rows for TMA swizzles).
    tile_k: tuple = None

    @property
    def name(self) -> str:
        return f"SM{self.sm}"

    def check_tile_k(self, path, entry, element: str, k: int, key=None) -> None:
        elements, row_bytes = self.tile_k
        if k % elements or (k * DATA_TYPES[element].bits // 8) % row_bytes:
            raise SpecError(path, f"tile K {k} is not a multiple of {elements} elements and {row_bytes} bytes",
                            entry, key)

    def check_cluster(self, path, entry, cluster) -> None:
        """A cluster shape (M, N, K) this architecture launches: K 1, M and N powers of two, at most
        ``max_cluster_ctas`` CTAs."""
        m, n, k = cluster
        if k != 1:
            raise SpecError(path, f"cluster K must be 1, got {k}", entry)
        for v in (m, n):
            if v not in (1, 2, 4, 8):
                raise SpecError(path, f"cluster extent {v} is not a power of two", entry)
        if m * n > self.max_cluster_ctas:
            raise SpecError(path, f"cluster {m}x{n} holds {m * n} CTAs; {self.name} allows at most "
                            f"{self.max_cluster_ctas} portably", entry)


TARGETS = {
    t.sm: t
    for t in (
        Target(75, "", 64 * 1024, 1, "cutlass::arch::Sm75"),
        Target(80, "", 163 * 1024, 1, "cutlass::arch::Sm80"),
        Target(90, "a", 227 * 1024, 8, "cutlass::arch::Sm90", SM90_SCHEDULES, tile_k=(16, 32)),
    )
}

DEFAULT_ARCH = "90a"  # what ARCH= defaults to: the H200's arch-specific target


def target(sm: int) -> Target:
    """The row of architecture ``sm`` (KeyError for one the table does not hold)."""
    return TARGETS[sm]
