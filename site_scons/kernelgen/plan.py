"""The build plan: which kernels this build holds, their sources and their hashes.

Everything here is computed when SConstruct is read, from the specs, the templates
and the options, so that the generated files are SCons Value sources: a file is
rewritten, and its object recompiled, exactly when its text changes.
"""

import json
from dataclasses import dataclass

from . import render, signature
from .ops import shared_type
from .specs import load_catalog, select
from .vocab import verify_tolerance


@dataclass
class BuildPlan:
    kernels: list  # selected descriptors, sorted by name
    sources: dict  # name -> generated .cu text
    hashes: dict  # name -> kernel hash
    manifest_cu: str
    manifest_json: str
    pairs: dict | None = None  # workload -> the kernels a profile measures on it (the manifest's); None: every one
    left_out: tuple = ()  # workloads a build narrowed by KERNELS= serves none of (the manifest's): not profiled


def make_plan(specs_dir, templates_dir, profiler_dir, patterns: str, arch, flags: list[str],
              cutlass_include) -> BuildPlan:
    """The plan of every listed kernel of ``specs_dir`` that ``patterns`` select."""
    return plan_of(select(load_catalog(specs_dir), patterns, arch), templates_dir, profiler_dir, arch, flags,
                   cutlass_include)


def sources_and_hashes(kernels, templates_dir, profiler_dir, flags: list[str], cutlass_include) -> tuple:
    """({name: generated source}, {name: kernel hash}) of ``kernels``: the code the build compiles
    for them, and the hash its measured rows must carry."""
    templates = render.lookup(templates_dir)
    cutlass = signature.cutlass_version(cutlass_include)
    sources, hashes, headers = {}, {}, {}
    for k in kernels:
        text = render.kernel_source(templates, k)
        sources[k.name] = text
        hashes[k.name] = signature.kernel_hash(text, signature.project_headers(text, profiler_dir, headers), flags,
                                               cutlass)
    return sources, hashes


def plan_of(kernels: list, templates_dir, profiler_dir, arch, flags: list[str], cutlass_include,
            pairs: dict | None = None, left_out: tuple = ()) -> BuildPlan:
    """The plan of building ``kernels`` (descriptors, sorted by name); with ``pairs`` (workload name ->
    kernel names), the manifest says which kernels a profile measures on each workload (without,
    every kernel that serves it), and with ``left_out`` (workload names), which it does not profile."""
    sources, hashes = sources_and_hashes(kernels, templates_dir, profiler_dir, flags, cutlass_include)
    return plan_from(kernels, sources, hashes, templates_dir, arch, signature.cutlass_version(cutlass_include), pairs,
                     left_out=left_out)


def _entry(kernel, kernel_hash: str) -> dict:
    """A kernel's manifest entry; with ``shared_type`` where it has one (``reduce.one_code_a_type``)."""
    entry = {"family": kernel.family, "hash": kernel_hash, "op": kernel.op, "element": kernel.element,
             "tolerance": verify_tolerance(kernel)}
    shared = shared_type(kernel)
    if shared is not None:
        entry["shared_type"] = list(shared)
    return entry


def plan_from(kernels: list, sources: dict, hashes: dict, templates_dir, arch, cutlass: str,
              pairs: dict | None = None, part: bool = False, left_out: tuple = ()) -> BuildPlan:
    """``plan_of`` ``kernels`` whose sources and hashes are rendered already (``sources`` and
    ``hashes`` may hold others). With ``part``, the manifest says that its kernels are part of the
    build's (those its profiler links: they need not serve every workload)."""
    templates = render.lookup(templates_dir)
    sources, hashes = {k.name: sources[k.name] for k in kernels}, {k.name: hashes[k.name] for k in kernels}
    manifest = {
        "arch": str(arch),
        "cutlass": cutlass,
        "kernels": {k.name: _entry(k, hashes[k.name]) for k in kernels},
    }
    if pairs is not None:
        manifest["pairs"] = pairs
    if part:
        manifest["part"] = True
    if left_out:
        manifest["left_out"] = sorted(left_out)
    return BuildPlan(kernels, sources, hashes,
                     render.manifest_source(templates, [k.name for k in kernels]),
                     json.dumps(manifest, indent=1, sort_keys=True) + "\n", pairs, tuple(sorted(left_out)))
