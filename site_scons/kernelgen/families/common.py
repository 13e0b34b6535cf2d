"""What every kernel family's spec has: its kind, a description, and its element types."""

from .. import spec_schema as S
from ..vocab import DATA_TYPES


def family_keys(kind: str) -> tuple:
    return (
        S.Key("kind", S.literal(kind)),
        S.Key("description", S.text, ""),  # free text, never rendered into C++
        S.Key("element", S.choice(DATA_TYPES)),  # inputs (activations and filters, or A and B)
        S.Key("accumulator", S.choice(DATA_TYPES)),
        S.Key("output", S.choice(DATA_TYPES)),
    )
