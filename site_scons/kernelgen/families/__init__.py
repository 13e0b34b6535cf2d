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

from ..discovery import by_attribute

FAMILIES = by_attribute(__name__, __path__, "KIND")
