"""Compile units: the kernels a build compiles now, several to one nvcc run.

An SM90 CUTLASS kernel takes 40-50 s of one core to compile, most of it parsing the same headers
and instantiating templates the kernels of a family share (CuTe's layouts, the collective
mainloop and epilogue, the adapter): nvcc on one source of two SM90 GEMM kernels took 55 s of one
core where their two compiles took 83 (docs/search.md, "Compile units"). So the kernels that have
no up-to-date object are compiled in units: BUILD/kernels/unit-<digest>.cu includes their
generated sources, BUILD/obj/unit-<digest>.o holds them all, and the profiler and a set's library
link it as they link a kernel's own object. A kernel compiled alone has its own object
(BUILD/obj/<name>.o from BUILD/kernels/<name>.cu), as every kernel had before units.

How many units: of the fewest that keep each to what the memory allows one job (``max_weight``),
each preamble its own, up to the next multiple of the jobs, those that end soonest (``runs_span``: their
seconds, ``seconds``, on the jobs the heaviest first; the fewer where they end together), so that
the jobs finish their last units together and no job compiles a wave of small units the others
do not; each a run of the kernels sorted by name (a family's neighbours share the most), the runs
of about equal weight (``weight``: a kernel's share of a unit's compile, in seconds of one core), a
run of more than MOST_KERNELS kernels cut again into as few as keep to it (light kernels weigh
little, but each takes nvcc memory). Where no more kernels than jobs need compiling, each is
compiled alone.
The units compiled now go to nvcc the heaviest first (``Units.stems``, the order SConstruct gives
the profiler's objects), so that no job starts a unit of CUTLASS 3.x kernels after the others
have taken the light ones.

A later build links a unit again, for those of its kernels it needs, while the unit is up to
date: its object newer than its source and its kernels' sources, and each kernel's source the
text the build would write now. Two units linked together never share a kernel, and a kernel of
a linked unit is linked from it alone.
"""

import hashlib
import heapq
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "unit-"
# A kernel's weight: about the seconds of one core it costs a unit, its share of the unit's own
# included, from the 208 nvcc runs of four cold builds at -j16 (`python bench/compile_units.py
# BUILD...`; docs/search.md, "Compile units"): a unit of CUTLASS 3.x kernels 48 s and 13 s a kernel
# (29 s a kernel in units of three, 25 in units of four), a CUTLASS 2.x kernel
# about 4 s, one of this project's own (CUDA-core and 2.x-based) about 1.4.
HEAVY, CUTLASS2, OWN = 28, 3, 1
WEIGHTS = {"cutlass3x": HEAVY, "cutlass2x": CUTLASS2, "own": OWN}
# The same fit as seconds of a run (``seconds``): its own (one of CUTLASS 3.x kernels, else one of
# CUTLASS 2.x ones), then each kernel's by kind; what the number of runs is chosen by (``_runs``).
RUN_SECONDS = {"cutlass3x": 47.6, "cutlass2x": 4.3, "own": 0.0}
KERNEL_SECONDS = {"cutlass3x": 12.8, "cutlass2x": 3.9, "own": 1.4}
MOST_HEAVY = 8  # a unit holds at most this many CUTLASS 3.x kernels' weight
MOST_KERNELS = 24  # and at most this many kernels (light ones weigh little, but each takes nvcc memory)
# nvcc's peak memory on a unit of k CUTLASS 3.x kernels, at most about BASE_GIB + k * KERNEL_GIB
# (`/usr/bin/time -v`, the profiler's flags, units of EfficientNetV2-S's and ViT-B/16's kernels:
# 3.6 GiB for one, 3.7 for two, 5.9 and 6.1 for four conv kernels, 7.9 for three GEMM and three conv
# kernels of the largest tiles, 8.4 for eight conv kernels; docs/search.md, "Compile units"); the
# jobs' units together keep to MEMORY_SHARE of memory.
BASE_GIB, KERNEL_GIB, MEMORY_SHARE = 2.4, 0.9, 0.85
_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_]+)\.cu"$', re.MULTILINE)


def kind(name: str) -> str:
    """What a kernel's compile costs like, from its name: "cutlass3x", "cutlass2x" or "own"."""
    return "cutlass3x" if name.startswith("cutlass3x_") else "cutlass2x" if name.startswith("cutlass_") else "own"


def weight(name: str) -> int:
    return WEIGHTS[kind(name)]


def memory_bytes():
    """This machine's memory, or its control group's limit where lower; None where unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):  # v2, v1
        try:
            limit = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def seconds(run: list) -> float:
    """About the seconds of one core nvcc takes on a run of kernels (``RUN_SECONDS``)."""
    kinds = {kind(name) for name in run}
    own = next((RUN_SECONDS[k] for k in WEIGHTS if k in kinds), 0.0)  # the heaviest kind's headers, parsed once
    return own + sum(KERNEL_SECONDS[kind(name)] for name in run)


def span(costs, jobs: int) -> float:
    """When the last of ``costs`` (seconds) ends, each started in the order given on the first free
    of ``jobs``."""
    free = [0.0] * max(jobs, 1)
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def runs_span(runs: list, jobs: int) -> float:
    """About when the last of ``runs`` ends, each started the heaviest first (as SCons starts them:
    ``Units.stems``) on the first free of ``jobs``."""
    return span(sorted(map(seconds, runs), reverse=True), jobs)


def max_weight(jobs: int, memory) -> int:
    """The most weight one unit holds where ``jobs`` compile at once in ``memory`` bytes (None: unknown)."""
    if not memory:
        return MOST_HEAVY * HEAVY
    per_job = MEMORY_SHARE * memory / 2**30 / max(jobs, 1)
    return max(1, min(MOST_HEAVY, int((per_job - BASE_GIB) / KERNEL_GIB))) * HEAVY


def unit_name(members) -> str:
    return PREFIX + hashlib.sha256("\n".join(sorted(members)).encode()).hexdigest()[:16]


def unit_source(members) -> str:
    """The text of a unit's source: an #include of each kernel's generated source (beside it)."""
    members = sorted(members)
    return ("// Generated by kernelgen: one nvcc run for the kernels below, each in its own source beside\n"
            f"// this one. Do not edit: the build writes it again. {len(members)} kernels.\n"
            + "".join(f'#include "{m}.cu"\n' for m in members))


def unit_members(text: str) -> list:
    return _INCLUDE.findall(text)


def preamble(text: str) -> tuple:
    """The directives a kernel's source opens with (#define, #include, ... up to its first code):
    kernels share a unit only where these are the same, since a header one kernel includes can
    change another's code or clash with its headers (CUTLASS_ENABLE_GDC_FOR_SM90 before any CUTLASS
    header for a kernel of dependent launch; CUTLASS 2.x's GemmUniversal beside a 3.x conv kernel)."""
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            lines.append(line)
        elif line and not line.startswith("//"):
            break
    return tuple(lines)


@dataclass
class Units:
    objects: dict  # kernel name -> the stem of the object that holds it (its own name, or a unit's)
    members: dict  # unit name -> its kernels (the units linked: compiled now or up to date)
    compiled: list = field(default_factory=list)  # stems compiled now: units and kernels alone

    def stems(self, names=None) -> list:
        """Each object to link once (of those holding ``names``, where given): those compiled now
        first (the heaviest first, so that the jobs finish together: SCons starts a program's
        objects in the order it is given them), then the others in the order of the kernels' names."""
        heaviest = sorted(self.compiled, key=lambda stem: -sum(map(weight, self.members.get(stem, [stem]))))
        every = list(dict.fromkeys(heaviest + [self.objects[n] for n in sorted(self.objects)]))
        if names is None:
            return every
        held = {self.objects[n] for n in names}
        return [stem for stem in every if stem in held]


def _mtime(path: Path):
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _own_object_stale(name: str, text: str, kernels_dir: Path, objects_dir: Path) -> bool:
    src, obj = kernels_dir / f"{name}.cu", objects_dir / f"{name}.o"
    made, written = _mtime(obj), _mtime(src)
    return made is None or written is None or made < written or src.read_text() != text


def _unit_up_to_date(name: str, members: list, sources: dict, kernels_dir: Path, objects_dir: Path) -> bool:
    made = _mtime(objects_dir / f"{name}.o")
    if made is None:
        return False
    for path in [kernels_dir / f"{name}.cu"] + [kernels_dir / f"{m}.cu" for m in members]:
        written = _mtime(path)
        if written is None or written > made:
            return False
    return all(m not in sources or (kernels_dir / f"{m}.cu").read_text() == sources[m] for m in members)


def existing_units(sources: dict, kernels_dir, objects_dir) -> dict:
    """The units in BUILD that are up to date for ``sources`` (name -> generated text): name -> kernels."""
    kernels_dir, objects_dir = Path(kernels_dir), Path(objects_dir)
    found = {}
    for path in sorted(kernels_dir.glob(f"{PREFIX}*.cu")) if kernels_dir.is_dir() else []:
        try:
            members = unit_members(path.read_text())
        except (OSError, UnicodeDecodeError):
            continue
        if len(members) > 1 and path.stem == unit_name(members) and _unit_up_to_date(
                path.stem, members, sources, kernels_dir, objects_dir):
            found[path.stem] = members
    return found


def partition(names: list, count: int) -> list:
    """``names`` (sorted) cut into ``count`` runs of about equal weight, none empty."""
    names = sorted(names)
    count = max(1, min(count, len(names)))
    total = sum(weight(n) for n in names)
    runs, run, done = [], [], 0
    for i, name in enumerate(names):
        run.append(name)
        done += weight(name)
        left_runs, left_names = count - len(runs) - 1, len(names) - i - 1
        # close the run at its share of the weight, keeping a name for each run still to come
        if left_runs > 0 and (done >= total * (len(runs) + 1) / count or left_names == left_runs):
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return runs


def plan_units(sources: dict, kernels_dir, objects_dir, jobs: int, memory=None) -> Units:
    """Which object holds each kernel of ``sources`` (name -> generated text) in a build whose
    files are in ``kernels_dir`` and ``objects_dir`` and which runs ``jobs`` compiles at once in
    ``memory`` bytes (None: unknown, units of up to MOST_HEAVY CUTLASS 3.x kernels)."""
    kernels_dir, objects_dir = Path(kernels_dir), Path(objects_dir)
    stale = {n for n, text in sources.items() if _own_object_stale(n, text, kernels_dir, objects_dir)}
    objects, members, taken = {}, {}, set()
    existing = existing_units(sources, kernels_dir, objects_dir) if stale else {}
    for name, kernels in sorted(existing.items(), key=lambda kv: (-len(stale.intersection(kv[1])), kv[0])):
        if not (stale.intersection(kernels) - objects.keys()) or taken.intersection(kernels):
            continue
        members[name] = kernels
        taken.update(kernels)
        objects.update((k, name) for k in kernels)  # the unit's other kernels too: linked from it alone
    for name in sources:
        if name not in objects and name not in stale:
            objects[name] = name
    todo = sorted(n for n in stale if n not in objects)
    compiled = []
    for run in _runs(todo, sources, jobs, max_weight(jobs, memory)):
        stem = run[0] if len(run) == 1 else unit_name(run)
        if len(run) > 1:
            members[stem] = run
        objects.update((k, stem) for k in run)
        compiled.append(stem)
    return Units(objects, members, compiled)


def _runs(todo: list, sources: dict, jobs: int, most: int) -> list:
    """``todo`` (sorted) cut into the runs compiled together, shared out among the kernels of each
    preamble by their weight, none over ``most``: as many as end soonest (``runs_span``) of the fewest
    that keep to ``most`` up to the next multiple of the jobs (each job its share of runs of about
    equal weight; fewer, where the preambles' runs are not a multiple, each paying its own once);
    each kernel alone where no more than ``jobs`` are to be compiled."""
    if len(todo) <= jobs:
        return [[n] for n in todo]
    by_preamble = {}
    for name in todo:
        by_preamble.setdefault(preamble(sources[name]), []).append(name)
    groups = sorted(by_preamble.values())
    shares = [sum(map(weight, names)) for names in groups]
    low = [max(1, math.ceil(share / most)) for share in shares]  # none over ``most``
    fewest = max(math.ceil(sum(shares) / most), sum(low))

    def cut(count: int) -> list:
        return [piece for names, n in zip(groups, _counts(count, shares, low, [len(g) for g in groups]))
                for run in partition(names, n) for piece in _at_most(run, MOST_KERNELS)]

    cuts = [cut(count) for count in range(fewest, jobs * math.ceil(fewest / jobs) + 1)]
    return min(cuts, key=lambda runs: (runs_span(runs, jobs), len(runs)))


def _at_most(run: list, most: int) -> list:
    """``run`` cut into the fewest runs of about equal length of at most ``most`` kernels."""
    pieces = math.ceil(len(run) / most)
    return [run[len(run) * i // pieces:len(run) * (i + 1) // pieces] for i in range(pieces)]


def _counts(count: int, shares: list, low: list, high: list) -> list:
    """``count`` runs shared out by ``shares`` (largest remainders), each between its ``low`` and
    ``high``: the total is ``count`` unless the bounds forbid it."""
    total = sum(shares)
    ideal = [count * share / total for share in shares]
    counts = [min(max(math.floor(x), lo), hi) for x, lo, hi in zip(ideal, low, high)]
    by_remainder = sorted(range(len(shares)), key=lambda i: counts[i] - ideal[i])
    while sum(counts) < count and any(c < hi for c, hi in zip(counts, high)):
        for i in by_remainder:
            if sum(counts) < count and counts[i] < high[i]:
                counts[i] += 1
    while sum(counts) > count and any(c > lo for c, lo in zip(counts, low)):
        for i in reversed(by_remainder):
            if sum(counts) > count and counts[i] > low[i]:
                counts[i] -= 1
    return counts
