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
    ``read``, where given, keeps what each name of ``include_dir`` reads as (its text, or None if it
    is no file) for the next call on the same folder: the kernels of one plan share their headers."""
    include_dir = Path(include_dir)
    read = {} if read is None else read
    found, todo = {}, _INCLUDE.findall(source)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        if name not in read:
            path = include_dir / name
            read[name] = path.read_text() if path.is_file() else None
        if read[name] is None:
            continue
        found[name] = read[name]
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
