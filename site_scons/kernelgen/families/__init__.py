"""Kernel families: each module reads one kind of spec and yields kernel descriptors.

A module has ``KIND`` (the spec's ``kind`` value) and ``expand(path, raw)``, which
validates the parsed TOML and returns descriptors. A descriptor has ``name`` (the
procedural name: file name, C++ symbol, CSV key), ``family``, ``op``, ``element``, ``arch``,
``template``, ``includes``, ``adapter`` and ``values()``. Whether a kernel can run a
workload is the profiler's question to CUTLASS (``can_implement``), recorded as ``unsupported``.

Every module of this package with a ``KIND`` is a family (found by name, in sorted order); the
others (``common``, ``resident``) hold what families share. A new family is a module here, its
spec and its template: nothing to register.
"""

import importlib
import pkgutil


def _discover() -> dict:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        kind = getattr(module, "KIND", None)
        if kind is None:
            continue
        if kind in found:
            raise ImportError(f"families {found[kind].__name__} and {module.__name__} both have KIND {kind!r}")
        found[kind] = module
    return found


FAMILIES = _discover()
