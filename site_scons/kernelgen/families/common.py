"""What kernel families share: the spec keys every family has, the expansion of a family of
entries written for fixed types, and the SM90 tile and cluster checks."""

from .. import spec_schema as S
from ..errors import SpecError
from ..targets import TARGETS
from ..vocab import DATA_TYPES


def family_keys(kind: str) -> tuple:
    return (
        S.Key("kind", S.literal(kind)),
        S.Key("description", S.text, ""),  # free text, never rendered into C++
        S.Key("element", S.choice(DATA_TYPES)),  # inputs (activations and filters, or A and B)
        S.Key("accumulator", S.choice(DATA_TYPES)),
        S.Key("output", S.choice(DATA_TYPES)),
    )


def fixed_type_family(kind: str) -> S.Table:
    """A family of entries: the common keys, then ``kernels``, a list of entry tables."""
    return S.Table((*family_keys(kind), S.Key("kernels", lambda v: v)))


def expand_fixed_type_entries(cls, family: S.Table, entry: S.Table, path, raw: dict, types: dict, check) -> list:
    """The kernels of a family whose kernels are written for fixed ``types`` (key -> data type):
    one ``cls(family=..., **entry)`` per entry of ``kernels``, refused by ``check(path, entry
    name, kernel)`` if the family cannot build it."""
    fam = family.read(path, raw)
    for key, value in types.items():
        if fam[key] != value:
            raise SpecError(path, f"this family is written for {key} {value}, not {fam[key]}", None, key)
    kernels = []
    for name, spec in S.read_entries(path, fam["kernels"], "kernels", entry):
        kernel = cls(family=path.stem, **spec)
        check(path, name, kernel)
        kernels.append(kernel)
    return kernels


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
    largest = TARGETS[90].max_cluster_ctas
    if m * n > largest:
        raise SpecError(path, f"cluster {m}x{n} holds {m * n} CTAs; SM90 allows at most {largest} portably", entry)
