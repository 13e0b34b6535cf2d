"""Load the kernel family specs of a directory into one sorted kernel catalog."""

import fnmatch
import re
import tomllib
from pathlib import Path

from . import inputs
from .errors import InputError, SpecError
from .families import FAMILIES
from .spec_schema import shown


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_family(path: Path) -> list:
    path = Path(path)
    if not _IDENTIFIER.match(path.stem):
        raise SpecError(path, "a family's file name must be a plain identifier (it names the family "
                        "in generated code)")
    try:
        raw = tomllib.loads(inputs.read_text(path))
    except InputError as e:
        raise SpecError(path, f"cannot read: {e.detail}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, f"not valid TOML: {e}") from None
    except RecursionError:
        raise SpecError(path, "not valid TOML: arrays or tables nested too deeply") from None
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in FAMILIES:
        raise SpecError(path, f"unknown kind {shown(kind)} (known: {', '.join(sorted(FAMILIES))})", None, "kind")
    try:
        return FAMILIES[kind].expand(path, raw)
    except RecursionError:
        raise SpecError(path, "values nested too deeply") from None


def load_catalog(specs_dir) -> list:
    """Every kernel of every ``*.toml`` family under ``specs_dir``, sorted by name."""
    files = sorted(Path(specs_dir).glob("*.toml"))
    if not files:
        raise SpecError(specs_dir, "no kernel family specs (*.toml) here")
    by_name = {}
    for path in files:
        for kernel in load_family(path):
            if kernel.name in by_name:
                other = by_name[kernel.name].family
                raise SpecError(path, f"kernel {kernel.name} is also defined by family {other}")
            by_name[kernel.name] = kernel
    return [by_name[n] for n in sorted(by_name)]


def globs_of(patterns: str) -> list[str]:
    """Comma-separated globs; ``@FILE`` reads more from FILE, one per line, ``#`` comments.
    No glob at all (``KERNELS=``, ``KERNELS=,,``, an empty FILE) is an error, not every kernel."""
    globs = []
    for item in (p.strip() for p in patterns.split(",")):
        if item.startswith("@"):
            try:
                lines = inputs.read_text(item[1:]).split("\n")
            except InputError as e:
                raise SpecError(item[1:], f"cannot read the kernel list: {e.detail}") from None
            listed = [l.split("#", 1)[0].strip() for l in lines if l.split("#", 1)[0].strip()]
            if not listed:
                raise SpecError(item[1:], "the kernel list names no kernel (KERNELS=@FILE: one glob a line)")
            globs += listed
        elif item:
            globs.append(item)
    if not globs:
        raise SpecError(f"KERNELS={patterns!r}", "names no kernel glob (KERNELS='*' selects every kernel)")
    return globs


def select(kernels: list, patterns: str, arch) -> list:
    """Kernels whose name matches one of the globs (see ``globs_of``) and that ``arch`` runs."""
    globs = globs_of(patterns)
    return [k for k in kernels
            if arch.runs(k) and any(fnmatch.fnmatchcase(k.name, g) for g in globs)]
