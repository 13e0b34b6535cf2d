"""What a compiled kernel is a function of, and the hash that names it.

A kernel's hash covers its generated source, the project headers that source
includes, the compile flags that shape code (not the machine's include paths)
and the CUTLASS version. A measurement carries the hash of the code it timed,
so a kernel whose code changed is measured again, never judged by old numbers.
"""

import hashlib
import re
from pathlib import Path

from . import inputs
from .errors import InputError, KernelgenError

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_VERSION = re.compile(r"^#define CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)", re.MULTILINE)


def project_headers(source: str, include_dir, read: dict | None = None) -> dict[str, str]:
    """Project headers (found in ``include_dir``) that ``source`` includes, transitively.
    ``read``, where given, keeps what each header of ``include_dir`` that a source includes brings
    (itself and what it includes, transitively) for the next call on the same folder: the kernels
    of one plan share their headers."""
    include_dir = Path(include_dir)
    read = {} if read is None else read
    found = {}
    for name in _INCLUDE.findall(source):
        if name not in read:
            read[name] = _header_closure(name, include_dir)
        found.update(read[name])
    return found


def _header_closure(name: str, include_dir: Path) -> dict[str, str]:
    """The project header ``name`` of ``include_dir`` and those it includes, transitively (name ->
    text); none where it is no file there (a system or CUTLASS header)."""
    found, todo = {}, [name]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = include_dir / name
        if not path.is_file():
            continue
        found[name] = path.read_text()
        todo.extend(_INCLUDE.findall(found[name]))
    return found


def cutlass_version(cutlass_include) -> str:
    path = Path(cutlass_include) / "cutlass" / "version.h"
    try:
        parts = dict(_VERSION.findall(inputs.read_text(path)))
    except InputError as e:
        raise KernelgenError(f"{path}: cannot read CUTLASS's version: {e.detail}") from None
    if not {"MAJOR", "MINOR", "PATCH"} <= set(parts):
        raise KernelgenError(f"{path}: no CUTLASS_MAJOR, CUTLASS_MINOR and CUTLASS_PATCH defines")
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def kernel_hash(source: str, headers: dict[str, str], flags: list[str], cutlass: str) -> str:
    digest = hashlib.sha256()
    for part in [source, *(f"{k}\0{headers[k]}" for k in sorted(headers)), " ".join(flags), cutlass]:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:16]
