"""Load the kernel family specs of a directory into one sorted kernel catalog."""

import fnmatch
import re
import tomllib
from pathlib import Path

from . import inputs
from .errors import InputError, SpecError, shorten
from .families import FAMILIES
from .spec_schema import shown
from .targets import TARGETS


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_FAMILIES_LOADED = {}  # (path, text) -> the kernels load_family made of them (a run loads each file many times)
_FAMILIES_KEPT = 256


def load_family(path: Path) -> list:
    path = Path(path)
    if not _IDENTIFIER.match(path.stem):
        raise SpecError(path, "a family's file name must be a plain identifier (it names the family "
                        "in generated code)")
    try:
        text = inputs.read_text(path)
    except InputError as e:
        raise SpecError(path, f"cannot read: {e.detail}") from None
    # The kernels are frozen descriptors made from the path, the text and the architectures' table
    # (kernelgen.targets, which the checks read): the same file read again (the same text) against
    # the same table gives the same kernels; a changed file, or table, is expanded again.
    key = (str(path), text, repr(TARGETS))
    kernels = _FAMILIES_LOADED.get(key)
    if kernels is None:
        kernels = _expand(path, text)
        if len(_FAMILIES_LOADED) >= _FAMILIES_KEPT:
            _FAMILIES_LOADED.pop(next(iter(_FAMILIES_LOADED)))
        _FAMILIES_LOADED[key] = kernels
    return list(kernels)


def _expand(path: Path, text: str) -> tuple:
    raw = parse_toml(path, text)
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in FAMILIES:
        raise SpecError(path, f"unknown kind {shown(kind)} (known: {', '.join(sorted(FAMILIES))})", None, "kind")
    try:
        return tuple(FAMILIES[kind].expand(path, raw))
    except RecursionError:
        raise SpecError(path, "values nested too deeply") from None


def parse_toml(path, text: str) -> dict:
    """``text`` as TOML. Whatever stops the parser is one line naming the file: a syntax error,
    nesting deeper than Python's stack, an integer literal of more than 4300 digits (which
    ``int()`` refuses with a ValueError that is no TOMLDecodeError), anything else."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, f"not valid TOML: {e}") from None
    except RecursionError:
        raise SpecError(path, "not valid TOML: arrays or tables nested too deeply") from None
    except ValueError:  # int()'s, not the parser's: the one it does not turn into a TOMLDecodeError
        raise SpecError(path, "not valid TOML: an integer literal of more than 4300 digits (TOML's are "
                        "64-bit)") from None
    except Exception as e:  # whatever else stops the parser is the file's too
        raise SpecError(path, f"not valid TOML: {type(e).__name__}: {e}") from None


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
            globs += listed_globs(item[1:])
        elif item:
            globs.append(item)
    if not globs:
        raise SpecError(f"KERNELS={shorten(patterns)!r}", "names no kernel glob (KERNELS='*' selects every kernel)")
    return globs


def listed_globs(path: str) -> list[str]:
    """The globs a kernel list (``KERNELS=@FILE``) holds, one a line. As in a workload file, a
    line holding a control character (a NUL, an escape sequence) is refused with its number."""
    if not path:
        raise SpecError("KERNELS=@", "names no file (KERNELS=@FILE reads the globs FILE lists, one a line)")
    try:
        lines = inputs.read_text(path).split("\n")
    except InputError as e:
        raise SpecError(path, f"cannot read the kernel list: {e.detail}") from None
    for lineno, line in enumerate(lines, start=1):
        bad = inputs.control_character(line.removesuffix("\r"))
        if bad:
            raise SpecError(path, f"line {lineno}: control character {bad!r} in the kernel list")
    listed = [l.split("#", 1)[0].strip() for l in lines if l.split("#", 1)[0].strip()]
    if not listed:
        raise SpecError(path, "the kernel list names no kernel (KERNELS=@FILE: one glob a line)")
    return listed


def select(kernels: list, patterns: str, arch) -> list:
    """Kernels whose name matches one of the globs (see ``globs_of``) and that ``arch`` runs."""
    globs = globs_of(patterns)
    if "*" in globs:  # every name matches (the default KERNELS=): a fused set's catalog is tens of thousands
        return [k for k in kernels if arch.runs(k)]
    return [k for k in kernels
            if arch.runs(k) and any(fnmatch.fnmatchcase(k.name, g) for g in globs)]
