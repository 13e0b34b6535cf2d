"""The generated kernel space: SM90 families declared as axes, expanded into kernel descriptors
without rendering or compiling anything.

A space file (``kernel_specs/spaces/*.toml``) names a family kind, its types, and one or more
``[[axes]]`` tables. Each table is a product: every combination of its values is a candidate
descriptor, and a candidate is kept when the family's own checks (``gemm_sm90.check_entry``
and the family's extra check, the ones a listed spec passes) and the space's constraints
(``CONSTRAINTS``: what CUTLASS's builders accept and what fits the SM) all hold. An axis is a
list, or for tile extents a range ``{ from = 16, to = 256, step = 16 }``.

  axis            values
  schedule        pingpong, cooperative
  tile_m/n/k      integers (for a transposed kernel M counts channels and N pixels)
  clusters        [m, n, 1] shapes
  scheduler       default, stream_k (default: [default])
  splits          1 (the scheduler's own split) or the K split of a stream-K kernel (default: [1])
  epilogue_tiles  "auto" (CUTLASS's choice) or [m, n] (default: ["auto"])
  source          "c" (C placed as the output, never read) or "void" (default: ["c"])
  store_stages    0 (CUTLASS's epilogue) or TMA stores in flight (default: [0])
  launches        stream, pdl (default: [stream])
  store           tma, nosmem (D stored from registers, any K; default: [tma])
  pad_channels    false, true (C padded to 8 before each launch: persistent conv; default: [false])

Descriptors are those of the listed families (same classes, names and templates), of family
``<file>_space``; a descriptor whose name a listed spec also defines is the listed one
(``merged``), so measured rows keep their kernel hash.
"""

import itertools
import math
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import inputs
from . import spec_schema as S
from .errors import InputError, SpecError
from .families import conv2d_sm90_persistent, conv2d_sm90_transposed, gemm_sm90
from .families.common import family_keys
from .targets import TARGETS
from .vocab import DATA_TYPES

SM90 = TARGETS[90]

# kind -> (descriptor class, the family's own check beyond gemm_sm90.check_entry)
KINDS = {
    gemm_sm90.KIND: (gemm_sm90.GemmSm90, None),
    conv2d_sm90_persistent.KIND: (conv2d_sm90_persistent.Conv2dFpropSm90Persistent, None),
    conv2d_sm90_transposed.KIND: (conv2d_sm90_transposed.Conv2dFpropSm90Transposed, conv2d_sm90_transposed._check),
}
SOURCES = {"c": None, "void": "void"}
SPACE_SUFFIX = "_space"  # a space file's descriptors are of family <file>_space


def _extents(lo: int, hi: int):
    """A list of integers, or a range table {from, to, step}, each within [lo, hi]."""
    item = S.integer(lo, hi)

    def check(v):
        if isinstance(v, dict):
            unknown = sorted(set(v) - {"from", "to", "step"})
            if unknown or "from" not in v or "to" not in v:
                raise ValueError(f"a range is {{ from = A, to = B, step = C }}, got {S.shown(v)}")
            start, stop, step = item(v["from"]), item(v["to"]), S.integer(1, hi)(v.get("step", 1))
            if stop < start:
                raise ValueError(f"the range runs from {start} down to {stop}")
            return tuple(range(start, stop + 1, step))
        return S.list_of(item)(v)
    return check


def _epilogue_tile(v):
    if v == "auto":
        return None
    return S.int_tuple(2, 8, 256)(v)


AXES = S.Table((
    S.Key("schedule", S.list_of(S.choice(SM90.schedules["gemm"]))),
    S.Key("tile_m", _extents(64, 256)),
    S.Key("tile_n", _extents(8, 256)),
    S.Key("tile_k", _extents(16, 256)),
    S.Key("clusters", S.list_of(S.int_tuple(3, 1, 8))),
    S.Key("scheduler", S.list_of(S.choice(SM90.schedules["tile_scheduler"])), ("default",)),
    S.Key("splits", S.list_of(S.integer(1, 64)), (1,)),
    S.Key("epilogue_tiles", S.list_of(_epilogue_tile), (None,)),
    S.Key("source", S.list_of(S.choice(SOURCES)), ("c",)),
    S.Key("store_stages", S.list_of(S.integer(0, 16)), (0,)),
    S.Key("launches", S.list_of(S.choice(SM90.schedules["launch"])), ("stream",)),
    S.Key("store", S.list_of(S.choice(gemm_sm90.STORES)), ("tma",)),
    S.Key("pad_channels", S.list_of(S.boolean), (False,)),
))


AXES_ORDER = ("schedule", "tile_m", "tile_n", "tile_k", "clusters", "scheduler", "splits", "epilogue_tiles", "source",
              "store_stages", "launches", "store", "pad_channels")
MAX_POINTS = 200_000  # combinations one axes table may hold: enumerated in about a second


def _space_table(kind: str) -> S.Table:
    return S.Table((*family_keys(kind), S.Key("axes", lambda v: v)))


# ---- constraints beyond the family checks: what compiles and fits ------------------------------

ACCUMULATOR_REGISTERS = 192  # fp32 accumulators per consumer thread (128x192 ping-pong builds)
EPILOGUE_N = 16  # tile N a multiple of this: CUTLASS's automatic epilogue subtile stays >= 32 bytes


def _accumulators(k) -> str | None:
    m, n, _ = k.tile
    per_thread = m * n // 128 // (2 if k.schedule == "cooperative" else 1)
    if per_thread > ACCUMULATOR_REGISTERS:
        return f"{per_thread} accumulators a consumer thread (at most {ACCUMULATOR_REGISTERS})"
    return None


def _shared_memory(k) -> str | None:
    """Two mainloop stages of A and B and the epilogue's C and D buffers fit the SM's shared memory."""
    m, n, tk = k.tile
    size = DATA_TYPES[k.element].bits // 8
    stage = (m + n) * tk * size + 32  # operands and the stage's barriers
    epi_m, epi_n = k.epilogue_tile or (min(m, 128 if k.schedule == "cooperative" else 64), min(n, 32))
    buffers = 0 if k.store != "tma" else (1 if k.source == "void" else 2) * max(2, k.store_stages or 2)
    epilogue = epi_m * epi_n * size * buffers
    if 2 * stage + epilogue > SM90.shared_memory:
        return f"two stages of {stage} bytes and {epilogue} of epilogue exceed {SM90.shared_memory} bytes"
    return None


def _epilogue_n(k) -> str | None:
    if k.epilogue_tile is None and k.tile[1] % EPILOGUE_N:
        return f"tile N {k.tile[1]} is not a multiple of {EPILOGUE_N} (the automatic epilogue subtile)"
    return None


SPACE_CLUSTER_CTAS = 4  # larger clusters leave SMs of a GPC idle on the H200 and won no measured layer


def _cluster_size(k) -> str | None:
    cm, cn, _ = k.cluster
    if cm * cn > SPACE_CLUSTER_CTAS:
        return f"cluster {cm}x{cn} holds {cm * cn} CTAs (the space stops at {SPACE_CLUSTER_CTAS})"
    return None


CONSTRAINTS = (
    ("accumulator registers", _accumulators),
    ("shared memory", _shared_memory),
    ("epilogue subtile", _epilogue_n),
    ("cluster size", _cluster_size),
)


@dataclass
class Space:
    kernels: list  # descriptors, sorted by name
    excluded: Counter  # reason -> candidates it excluded
    candidates: int  # combinations before the checks


def expand_file(path) -> Space:
    """The descriptors of one space file. A file's expansion is kept for the rest of the process
    (the header's build and the build plan both expand the space), by its path and text and the
    SM90 row it was checked against; each call returns lists and counts of its own."""
    path = Path(path)
    try:
        text = inputs.read_text(path)
    except InputError as e:
        raise SpecError(path, f"cannot read: {e.detail}") from None
    except ValueError as e:
        raise SpecError(path, f"not valid TOML: {e}") from None
    key = (str(path), text)
    kept = _EXPANDED.get(key)
    if kept is None or kept[0] is not TARGETS[90]:
        space = _expand(path, text)
        if len(_EXPANDED) >= _KEPT:
            _EXPANDED.pop(next(iter(_EXPANDED)))
        kept = _EXPANDED[key] = (TARGETS[90], tuple(space.kernels), dict(space.excluded), space.candidates)
    return Space(list(kept[1]), Counter(kept[2]), kept[3])


_EXPANDED = {}  # (path, text) -> (the SM90 row, kernels, excluded, candidates)
_KEPT = 16  # expansions kept at most (the oldest goes first)


def _expand(path: Path, text: str) -> Space:
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise SpecError(path, f"not valid TOML: {e}") from None
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if kind not in KINDS:
        raise SpecError(path, f"unknown kind {S.shown(kind)} (a space holds: {', '.join(sorted(KINDS))})", None,
                        "kind")
    cls, family_check = KINDS[kind]
    fam = _space_table(kind).read(path, raw)
    if DATA_TYPES[fam["element"]].bits != 16:
        raise SpecError(path, "this family is written for 16-bit inputs", None, "element")
    family = f"{path.stem}{SPACE_SUFFIX}"
    by_name, excluded, candidates = {}, Counter(), 0
    for entry, axes in S.read_entries(path, fam["axes"], "axes", AXES):
        points = math.prod(len(axes[key]) for key in AXES_ORDER)
        if points > MAX_POINTS:
            raise SpecError(path, f"{points} combinations of its axes, more than the {MAX_POINTS} an axes table may "
                            "hold (split it, or narrow a range's step)", entry)
        refusals = {}  # the family checks' answer (None, or the reason), by what they read of a combination
        for combo in itertools.product(*(axes[key] for key in AXES_ORDER)):
            candidates += 1
            schedule, m, n, tk, cluster, scheduler, splits, epi, source, stages, launch, store, pad = combo
            checked = (schedule, m, n, tk, cluster, scheduler, splits, epi, stages, launch, store, pad)  # all but the source
            if checked in refusals:
                refusal = refusals[checked]
            else:
                spec = {"tile": (m, n, tk), "schedule": schedule, "scheduler": scheduler, "clusters": (cluster,),
                        "epilogue_tiles": (epi,), "store_stages": stages or None,
                        "splits": (None,) if splits == 1 else (splits,), "launches": (launch,)}
                try:
                    gemm_sm90.check_entry(path, entry, fam, spec)
                    if family_check is not None:
                        family_check(path, entry, spec)
                    if pad:
                        gemm_sm90.check_padding(path, entry, cls, spec)
                    refusal = None
                except SpecError as e:
                    refusal = _reason(e)
                refusals[checked] = refusal
            if refusal is None and store != "tma":  # it reads the source, which ``checked`` leaves out
                try:
                    gemm_sm90.check_store(path, entry, cls, store, SOURCES[source], {
                        "scheduler": scheduler, "epilogue_tiles": (epi,), "store_stages": stages or None})
                except SpecError as e:
                    refusal = _reason(e)
            if refusal is not None:
                excluded[refusal] += 1
                continue
            kernel = cls(family=family, element=fam["element"], accumulator=fam["accumulator"],
                         output=fam["output"], tile=(m, n, tk), cluster=cluster, schedule=schedule,
                         scheduler=scheduler, epilogue_tile=epi, source=SOURCES[source], store_stages=stages or None,
                         splits=None if splits == 1 else splits, launch=launch, store=store,
                         **({"pad_channels": True} if pad else {}))
            for reason, check in CONSTRAINTS:  # the first that excludes it
                if check(kernel):
                    excluded[reason] += 1
                    break
            else:
                by_name.setdefault(kernel.name, kernel)
    return Space([by_name[n] for n in sorted(by_name)], excluded, candidates)


def _reason(error: SpecError) -> str:
    """A family check's refusal without its numbers: the kind of constraint it is."""
    return " ".join(re.sub(r"\d+", "N", error.message).split())[:72]


def load_space(spaces_dir) -> Space:
    """Every descriptor of every ``*.toml`` under ``spaces_dir``, sorted by name (a folder
    without space files is an empty space)."""
    kernels, excluded, candidates = {}, Counter(), 0
    for path in sorted(Path(spaces_dir).glob("*.toml")):
        space = expand_file(path)
        for k in space.kernels:
            kernels.setdefault(k.name, k)
        excluded += space.excluded
        candidates += space.candidates
    return Space([kernels[n] for n in sorted(kernels)], excluded, candidates)


def merged(listed: list, space: Space) -> list:
    """The listed kernels and the space's others, sorted by name: a name both define is the
    listed kernel (its family, source and hash are those its measured rows carry)."""
    by_name = {k.name: k for k in space.kernels}
    by_name.update({k.name: k for k in listed})
    return [by_name[n] for n in sorted(by_name)]
