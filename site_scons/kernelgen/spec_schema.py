"""A small schema for kernel family specs: typed keys, closed vocabularies.

A ``Table`` checks one TOML table: unknown keys, missing keys, wrong types and
values outside a vocabulary raise :class:`SpecError` naming the file, the entry
and the key. Every integer fits a C++ ``int``.
"""

import reprlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .errors import SpecError
from .ops.common import INT_MAX

_MISSING = object()
INT_MIN = -INT_MAX - 1


class _Repr(reprlib.Repr):
    def repr_int(self, x, level):
        """An integer wider than 64 bits by its width: repr() refuses one of more than 4300 digits,
        which a TOML hexadecimal literal makes cheaply."""
        return repr(x) if x.bit_length() <= 64 else f"<an integer of {x.bit_length()} bits>"


_REPR = _Repr()  # keyword arguments only from Python 3.12
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 8, 4, 80, 80


def shown(v) -> str:
    """A value as an error message quotes it: repr, cut short (a value nested thousands deep or
    megabytes long is shown in a few dozen characters)."""
    return _REPR.repr(v)


@dataclass(frozen=True)
class Key:
    name: str
    check: Callable[[Any], Any]  # returns the normalised value or raises ValueError
    default: Any = _MISSING
    doc: str = ""


@dataclass(frozen=True)
class Table:
    keys: tuple[Key, ...]

    def read(self, path, raw: Mapping, entry=None) -> dict:
        if not isinstance(raw, Mapping):
            raise SpecError(path, f"expected a table, got {type(raw).__name__}", entry)
        known = {k.name: k for k in self.keys}
        for name in sorted(raw):
            if name not in known:
                raise SpecError(path, f"unknown key (allowed: {', '.join(sorted(known))})", entry, name)
        out = {}
        for k in self.keys:
            if k.name not in raw:
                if k.default is _MISSING:
                    raise SpecError(path, "missing required key", entry, k.name)
                out[k.name] = k.default
                continue
            try:
                out[k.name] = k.check(raw[k.name])
            except ValueError as e:
                raise SpecError(path, str(e), entry, k.name) from None
        return out


def integer(lo: int = INT_MIN, hi: int = INT_MAX) -> Callable[[Any], int]:
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"expected an integer, got {shown(v)}")
        if not lo <= v <= hi:
            raise ValueError(f"{shown(v)} is outside [{lo}, {hi}]")
        return v
    return check


def boolean(v) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {shown(v)}")
    return v


def int_tuple(length: int, lo: int = 1, hi: int = INT_MAX) -> Callable[[Any], tuple]:
    item = integer(lo, hi)

    def check(v):
        if not isinstance(v, list) or len(v) != length:
            raise ValueError(f"expected a list of {length} integers, got {shown(v)}")
        return tuple(item(x) for x in v)
    return check


def choice(vocabulary: Mapping) -> Callable[[Any], Any]:
    def check(v):
        if not isinstance(v, str):
            raise ValueError(f"expected a string, got {shown(v)}")
        if v not in vocabulary:
            raise ValueError(f"{shown(v)} is not one of {', '.join(map(str, sorted(vocabulary)))}")
        return v
    return check


def one_of(values) -> Callable[[Any], int]:
    """An integer from a fixed set (architectures, say)."""
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or v not in values:
            raise ValueError(f"{shown(v)} is not one of {', '.join(map(str, sorted(values)))}")
        return v
    return check


def literal(value: str) -> Callable[[Any], str]:
    def check(v):
        if v != value:
            raise ValueError(f"expected {value!r}, got {shown(v)}")
        return v
    return check


def list_of(item: Callable[[Any], Any], min_len: int = 1, unique: bool = True) -> Callable[[Any], tuple]:
    def check(v):
        if not isinstance(v, list) or len(v) < min_len:
            raise ValueError(f"expected a list of at least {min_len} item(s), got {shown(v)}")
        out = tuple(item(x) for x in v)
        if unique and len(set(out)) != len(out):
            raise ValueError(f"duplicate items in {shown(v)}")
        return out
    return check


def text(v):
    """Free text (descriptions). Never rendered into C++."""
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {shown(v)}")
    return v


def read_entries(path, raw, key: str, table: Table) -> list[tuple[str, dict]]:
    """A key holding a non-empty list of tables: [(entry name such as "tiles[2]", table)]."""
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "expected a non-empty list of tables", None, key)
    return [(f"{key}[{i}]", table.read(path, item, f"{key}[{i}]")) for i, item in enumerate(raw)]
