"""The GPU architectures kernels are built for: one row per architecture, read by the kernel
families (shared memory, clusters), ``arch`` (``ARCH=``) and the header.

A new architecture is a new row here (and the families and templates that build for it).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    sm: int  # compute capability, major * 10 + minor
    suffix: str  # the arch-specific target's suffix ("a": sm_90a, wgmma and setmaxnreg), "" if none
    shared_memory: int  # bytes of shared memory one CTA may ask for (the opt-in maximum)
    max_cluster_ctas: int  # the largest portable thread-block cluster (1: no clusters)
    cutlass_tag: str  # CUTLASS's architecture tag, as the kernel templates spell it

    @property
    def name(self) -> str:
        return f"SM{self.sm}"


TARGETS = {
    t.sm: t
    for t in (
        Target(75, "", 64 * 1024, 1, "cutlass::arch::Sm75"),
        Target(80, "", 163 * 1024, 1, "cutlass::arch::Sm80"),
        Target(90, "a", 227 * 1024, 8, "cutlass::arch::Sm90"),
    )
}

DEFAULT_ARCH = "90a"  # what ARCH= defaults to: the H200's arch-specific target


def target(sm: int) -> Target:
    """The row of architecture ``sm`` (KeyError for one the table does not hold)."""
    return TARGETS[sm]
