"""What kernel families share: the spec keys every family has, and the SM90 tile and cluster checks."""

from .. import spec_schema as S
from ..errors import SpecError
from ..vocab import DATA_TYPES, SM90_MAX_CLUSTER_CTAS


def family_keys(kind: str) -> tuple:
    return (
        S.Key("kind", S.literal(kind)),
        S.Key("description", S.text, ""),  # free text, never rendered into C++
        S.Key("element", S.choice(DATA_TYPES)),  # inputs (activations and filters, or A and B)
        S.Key("accumulator", S.choice(DATA_TYPES)),
        S.Key("output", S.choice(DATA_TYPES)),
    )


def check_sm90_tile_k(path, entry, element: str, k: int, key=None) -> None:
    """A wgmma tile's K: whole 16-element MMA steps, and rows of 32-byte multiples for TMA swizzles."""
    if k % 16 or (k * DATA_TYPES[element].bits // 8) % 32:
        raise SpecError(path, f"tile K {k} is not a multiple of 16 elements and 32 bytes", entry, key)


def check_sm90_cluster(path, entry, cluster) -> None:
    m, n, k = cluster
    if k != 1:
        raise SpecError(path, f"cluster K must be 1, got {k}", entry)
    for v in (m, n):
        if v not in (1, 2, 4, 8):
            raise SpecError(path, f"cluster extent {v} is not a power of two", entry)
    if m * n > SM90_MAX_CLUSTER_CTAS:
        raise SpecError(path, f"cluster {m}x{n} holds {m * n} CTAs; SM90 allows at most "
                        f"{SM90_MAX_CLUSTER_CTAS} portably", entry)
