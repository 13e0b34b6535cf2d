"""Kernel families: each module reads one kind of spec and yields kernel descriptors.

A module has ``KIND`` (the spec's ``kind`` value) and ``expand(path, raw)``, which
validates the parsed TOML and returns descriptors. A descriptor has ``name`` (the
procedural name: file name, C++ symbol, CSV key), ``family``, ``op``, ``arch``,
``template``, ``includes``, ``adapter`` and ``values()``. Whether a kernel can run a
workload is the profiler's question to CUTLASS (``can_implement``), recorded as ``unsupported``.
"""

from . import (conv2d_2x, conv2d_sm90, conv2d_sm90_halo, conv2d_sm90_persistent, conv2d_sm90_pointwise,
               conv2d_sm90_transposed, gemm_sm90, test_faults)

FAMILIES = {m.KIND: m for m in (conv2d_2x, conv2d_sm90, conv2d_sm90_halo, conv2d_sm90_persistent,
                                conv2d_sm90_pointwise, conv2d_sm90_transposed, gemm_sm90, test_faults)}
from . import conv2d_few_channels  # noqa: E402
FAMILIES[conv2d_few_channels.KIND] = conv2d_few_channels
