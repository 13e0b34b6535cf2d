"""Reduce a set's profile CSVs to ``best_kernels.h``.

For each workload: validate its CSV, keep the rows of the kernels given (with the hash of
their current code), and pick the fastest ``ok`` row by a total order (runtime, then kernel
name) among those measured on that code. A row of changed code never competes, nor does one
whose verification errors (``rel_l2_error``, ``rel_max_error``) are missing or over the
kernel's tolerance; a kernel without a row is not measured yet. Both are counted in the chosen
row (``unmeasured``, ``stale``), so the header build says how many candidates it did not
weigh. A kernel type is chosen compiled one way (``one_code_a_type``: a PDL kernel and its
stream twin are one CUTLASS kernel); a workload moved off its fastest row for it names that row's
kernel (``fastest``). A workload with no kernel to choose is an error that names it. The header is written
atomically: on any error the previous one stays as it was.

``choose`` is that policy, with each kernel's own tolerance taken from the kernel itself: the
header, ``kernelgen.report`` and ``kernelgen.compare`` all choose through it, so that they
choose alike.
"""

import math
import re
from collections import namedtuple
from pathlib import Path

import pandas as pd

from . import inputs, outputs, render, results
from .errors import ResultsError
from .fusion import epilogue_cpp, launcher_epilogue_cpp
from .ops.common import OPTIONAL_RELU
from .ops import OPS, check_header_keys, check_served, kernel_ops, serves, shared_type
from .targets import TARGETS
from .vocab import DATA_TYPES, VERIFY_TOLERANCE, verify_tolerance

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"[^\n]*\n', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once[^\n]*\n", re.MULTILINE)


def load_set(results_dir, problems, gpu: str | None = None) -> pd.DataFrame:
    """All CSVs of a set, validated, as one frame (a column ``source``: the file of each row); one
    provenance (GPU and versions) for all. ``gpu``: the slug of the GPU whose folder
    ``results_dir`` is (results.read_csv). The files' columns are checked and joined as lists, and
    made one frame once."""
    results_dir = Path(results_dir)
    merged, sources, first, other = {c: [] for c in results.COLUMNS}, [], None, None
    for problem in problems:
        path = results_dir / f"{problem.name}.csv"
        if inputs.file_kind(path) == "missing":
            raise ResultsError(path, f"no results for workload {problem.name}: run scons profile on a GPU")
        columns = results.read_columns(path, gpu)
        if columns is None:
            raise ResultsError(path, "holds no rows, only a header: run scons profile on a GPU")
        others = sorted(set(columns["workload"]) - {problem.name})
        if others:
            raise ResultsError(path, f"holds rows of another workload ({others[0]})")
        provenance = list(dict.fromkeys(zip(*(columns[c] for c in results.PROVENANCE))))
        if len(provenance) > 1:
            raise ResultsError(path, "mixes measurements from different GPUs or software versions: "
                               + "; ".join(_describe(_Provenance(*p)) for p in provenance))
        if first is None:
            first = (provenance[0], path)
        elif provenance[0] != first[0] and other is None:
            other = (provenance[0], path)
        for c in results.COLUMNS:
            merged[c] += columns[c]
        sources += [str(path)] * len(columns["workload"])
    if first is None:
        raise ValueError("No objects to concatenate")  # as pandas says of a set of no workload
    if other is not None:
        raise ResultsError(other[1], f"measured with {_describe(_Provenance(*other[0]))}, but {first[1]} "
                           f"with {_describe(_Provenance(*first[0]))}: one set must come from one GPU and software stack")
    return results.frame_of(merged, source=sources)


_Provenance = namedtuple("_Provenance", results.PROVENANCE)


def _describe(row) -> str:
    return f"GPU {row.gpu}, driver {row.driver}, CUDA {row.cuda}, CUTLASS {row.cutlass}, timed by {row.timing}"


def of_kernels(rows: pd.DataFrame, kernels) -> pd.DataFrame:
    """The rows whose kernel is one of ``kernels`` (a dict or set of names), by a lookup a row (of
    the column as a list: pandas gives a string column's values one by one slowly)."""
    return rows[pd.array([k in kernels for k in rows["kernel"].tolist()], dtype=bool)]


def verified(rows: pd.DataFrame, tolerances: dict | None) -> pd.Series:
    """Whether each row's recorded errors are within its kernel's tolerance (``tolerances``: kernel
    name -> largest error; without it, the strictest tolerance of any kernel). Missing is not."""
    if tolerances is None:
        limit = pd.Series(min(VERIFY_TOLERANCE.values()), index=rows.index)
    else:
        limit = pd.Series([tolerances.get(k, math.nan) for k in rows["kernel"].tolist()], index=rows.index,
                          dtype=float)
    return ((rows["rel_l2_error"] >= 0) & (rows["rel_l2_error"] <= limit)
            & (rows["rel_max_error"] >= 0) & (rows["rel_max_error"] <= limit))


def fastest_position(columns: dict, positions: list) -> int:
    """The fastest of the rows at ``positions`` (not empty; in their frame's order) of ``columns``
    (column -> list) by the total order every choice uses: the least runtime (a missing one last),
    then kernel name, the first of equals."""
    runtime, kernel = columns["runtime_ms"], columns["kernel"]
    return min(positions, key=lambda i: (math.inf if math.isnan(runtime[i]) else runtime[i], kernel[i]))


def within_tolerance(l2: float, worst: float, limit: float) -> bool:
    """``verified``'s test of one row: both recorded errors within ``limit`` (NaN, missing, is not)."""
    return 0 <= l2 <= limit and 0 <= worst <= limit


def select_best(frame: pd.DataFrame, problems, hashes: dict, tolerances: dict | None = None,
                kernels_by_name: dict | None = None, measured_with: dict | None = None) -> pd.DataFrame:
    """One row per workload (in the set's order): the fastest ok and verified kernel among
    ``hashes``' keys (name -> the hash of its current code; see ``verified`` for ``tolerances``),
    measured on that code; with ``kernels_by_name`` (name -> descriptor), among those that serve
    the workload (its op and dtype, ``ops.serves``). Each row also holds ``unmeasured`` (kernels
    without a row; with ``measured_with``, workload name -> the kernels a profile measures on it,
    the build's manifest ``pairs``, only those of them), ``stale`` (rows of changed code, left out)
    and ``fastest`` (the kernel of its fastest row where ``one_code_a_type`` chose another, else "").

    The rows of each workload are sorted out by position (``_select``), once over the frame's
    columns, rather than by masks of the whole frame for every workload, and the fastest found
    among them by position (``fastest_position``), without sorting a frame for each workload."""
    chosen, oks, unmeasured_counts, stale_counts, every = [], [], [], [], hashes
    problems = list(problems)
    if not problems:
        return pd.DataFrame(chosen)
    positions = frame.groupby("workload", sort=False).indices  # workload -> its rows' positions, in order
    columns = {c: frame[c].tolist() for c in ("kernel", "kernel_hash", "status", "rel_l2_error", "rel_max_error",
                                              "runtime_ms", "source")}
    served = {}  # what ``serves`` decides by (the problem's kernel ops, its dtype) -> those of ``every`` it lets in
    for problem in problems:
        if kernels_by_name is not None:
            key = (tuple(kernel_ops(problem)), problem.dtype)
            hashes = served.get(key)
            if hashes is None:
                hashes = served[key] = {n: h for n, h in every.items()
                                        if n not in kernels_by_name or serves(kernels_by_name[n], problem)}
        where = positions.get(problem.name, [])
        source = columns["source"][where[0]]  # (IndexError where the workload has no row)
        wanted = results.measured_with(measured_with, problem.name, (columns["kernel"][i] for i in where))
        here = hashes if wanted is None else {n: h for n, h in hashes.items() if n in wanted}
        unmeasured, current, stale, ok = _select(columns, where, here, tolerances)
        if not ok:
            rows, stale = frame.iloc[current], frame.iloc[stale]
            trusted = (rows["status"] == "ok") & verified(rows, tolerances)
            statuses = rows["status"].where(~((rows["status"] == "ok") & ~trusted),
                                            "ok but unverified (errors missing or over the tolerance)")
            counts = [f"{n} {s}" for s, n in sorted(statuses.value_counts().items())]
            if len(stale):
                counts.append(f"{len(stale)} measured on code that has changed since (e.g. {stale['kernel'].iloc[0]})")
            if unmeasured:
                counts.append(f"{unmeasured} not measured")
            if not here:  # no kernel to choose among serves it: KERNELS= narrowed them to none of its rows'
                raise ResultsError(source, f"workload {problem.name}: none of the kernels the header chooses among "
                                   f"(those KERNELS= selects) serves it, and its {len(where)} row(s) are of others: "
                                   "give KERNELS= one of them, or leave KERNELS= out")
            raise ResultsError(source, f"workload {problem.name} has no kernel that ran correctly on the current "
                               f"code ({', '.join(counts) or 'no row'}): run scons profile")
        chosen.append(fastest_position(columns, ok))
        oks.append(ok)
        unmeasured_counts.append(unmeasured)
        stale_counts.append(len(stale))
    fastest = chosen
    if kernels_by_name is not None:
        chosen = one_code_a_type(columns, problems, oks, chosen, kernels_by_name)
    best = frame.iloc[chosen].reset_index(drop=True)  # the chosen rows, taken together
    best["unmeasured"], best["stale"] = unmeasured_counts, stale_counts
    # the fastest row's kernel where ``one_code_a_type`` chose another, else ""
    best["fastest"] = ["" if i == j else columns["kernel"][j] for i, j in zip(chosen, fastest)]
    return best


def one_code_a_type(columns: dict, problems, oks: list, chosen: list, kernels_by_name: dict) -> list:
    """``chosen`` (each problem's fastest of its ``oks``, positions in the frame of ``columns``) with
    each kernel type chosen compiled one way (``shared_type``): a kernel of programmatic dependent
    launch and its stream twin instantiate one CUTLASS kernel, and a binary that links both runs
    one of the two codes for both, the one without CUTLASS's grid-dependency control perhaps
    launched as a dependent that reads its input before the kernel before it has written it. Where
    the choices hold a type both ways, each way is tried kept, the problems of the other choosing
    their fastest of the rest, and the way of the least total time (runtime times count) is kept."""
    kernel, runtime = columns["kernel"], columns["runtime_ms"]
    rows = {kernel[i] for ok in oks for i in ok}  # (a fused set's catalog is tens of thousands)
    codes = {n: shared_type(kernels_by_name[n]) for n in rows if n in kernels_by_name}
    codes = {n: code for n, code in codes.items() if code is not None}
    if not codes:
        return chosen
    counts = [getattr(p, "count", 1) or 1 for p in problems]
    banned = set()
    while True:
        ways = {}  # type -> how it is compiled -> the problems that chose it so
        for at, i in enumerate(chosen):
            code = codes.get(kernel[i])
            if code is not None:
                ways.setdefault(code[0], {}).setdefault(code[1], []).append(at)
        clash = next((t for t in sorted(ways) if len(ways[t]) > 1), None)
        if clash is None:
            return chosen
        tried = []
        for keep in sorted(ways[clash]):
            ban = banned | {(clash, way) for way in ways[clash] if way != keep}
            moved = [at for way, ats in ways[clash].items() if way != keep for at in ats]
            trial = _chosen_again(columns, oks, chosen, moved, lambda name: codes.get(name) not in ban)
            if trial is not None:
                tried.append((sum(runtime[i] * n for i, n in zip(trial, counts)), keep, ban, trial))
        if not tried:
            ats = sorted(at for each in ways[clash].values() for at in each)
            names = sorted({kernel[chosen[at]] for at in ats})
            raise ResultsError(columns["source"][chosen[ats[0]]], f"kernels {' and '.join(names)} are one CUTLASS "
                               "kernel compiled two ways, which one binary cannot hold, and workloads "
                               f"{', '.join(problems[at].name for at in ats)} ran no other kernel correctly: "
                               "run scons profile with more kernels")
        _, _, banned, chosen = min(tried, key=lambda t: (t[0], t[1]))


def _chosen_again(columns: dict, oks: list, chosen: list, moved: list, allowed) -> list | None:
    """``chosen`` with each problem of ``moved`` choosing the fastest of its ``oks`` whose kernel
    ``allowed`` lets in; None if one of them has none."""
    out = list(chosen)
    for at in moved:
        rest = [i for i in oks[at] if allowed(columns["kernel"][i])]
        if not rest:
            return None
        out[at] = fastest_position(columns, rest)
    return out


def _select(columns: dict, where, hashes: dict, tolerances: dict | None) -> tuple:
    """(unmeasured, current, stale, ok) of one workload's rows (``where``, their positions in the
    frame whose ``columns`` are lists): how many of ``hashes``' kernels have no row, and the
    positions of the rows of those kernels measured on their current code, of those measured on
    other code, and of the current ones that ran ok and that ``verified`` passes (the same test, on
    one row at a time)."""
    kernels, kernel_hashes, statuses = columns["kernel"], columns["kernel_hash"], columns["status"]
    l2, worst = columns["rel_l2_error"], columns["rel_max_error"]
    rows = [i for i in where if kernels[i] in hashes]
    unmeasured = len(set(hashes) - {kernels[i] for i in rows})
    current, stale = [], []
    for i in rows:
        (current if hashes[kernels[i]] == kernel_hashes[i] else stale).append(i)
    strictest = min(VERIFY_TOLERANCE.values())
    ok = []
    for i in current:
        if statuses[i] != "ok":
            continue
        if tolerances is None:
            limit = strictest
        else:
            limit = tolerances.get(kernels[i])
            limit = math.nan if limit is None else float(limit)
        if within_tolerance(l2[i], worst[i], limit):
            ok.append(i)
    return unmeasured, current, stale, ok


def tolerance_of(kernel) -> float:
    """A kernel's verification tolerance: a descriptor's from its types (``verify_tolerance``), a
    manifest entry's as the build recorded it (the same function, when the manifest was made)."""
    return kernel["tolerance"] if isinstance(kernel, dict) else verify_tolerance(kernel)


def choose(frame: pd.DataFrame, problems, hashes: dict, kernels_by_name: dict,
           measured_with: dict | None = None) -> pd.DataFrame:
    """The choice of every tool: ``select_best`` among ``hashes``' kernels that serve each workload,
    each held to its own tolerance (``tolerance_of`` its entry in ``kernels_by_name``, descriptors
    or manifest entries). A kernel without an entry has no tolerance, so it is never chosen."""
    tolerances = {name: tolerance_of(kernels_by_name[name]) for name in hashes if name in kernels_by_name}
    return select_best(frame, problems, hashes, tolerances, kernels_by_name, measured_with)


HEADER_FILES = outputs.HEADER_FILES  # what a set's header build writes, in BUILD/sets/<set>/


def launch_order(best: pd.DataFrame, problems) -> list:
    """The launcher's kernels in its fallback order: as first chosen, the ops' sections in OPS's
    order (what libbest_kernels.a holds)."""
    return list(dict.fromkeys(kernel for kernel, _ in launchers_of(best, problems)))


def launchers_of(best: pd.DataFrame, problems) -> list:
    """The launcher's (kernel, launch setting) pairs in its fallback order, as ``launch_order``: a
    kernel chosen with two settings (profiler/launch_settings.h) is launched through two of them."""
    chosen = dict(zip((p.name for p in problems), zip(best["kernel"], best["setting"])))
    return list(dict.fromkeys(chosen[p.name] for name in OPS for p in problems if p.op == name))


def header_files(templates, best: pd.DataFrame, problems, kernels_by_name: dict, source: str,
                 project_includes=None, set_name: str = "") -> dict:
    """File name (HEADER_FILES) -> text. best_kernels.h holds the tables and the launcher's
    declarations and includes CUDA's headers only; best_kernels_launcher.cu defines the launcher
    over the factories of the kernels' profiler objects (each kernel behind the adapter it was
    measured through); best_kernels_cutlass.h holds the kernels' CUTLASS types, where a winner's
    include found in ``project_includes`` (a project header, not CUTLASS's) is embedded, so that it
    needs nothing but CUTLASS."""
    winners = sorted(set(best["kernel"]))
    includes, embedded = [], {}

    def include(header):
        path = Path(project_includes) / header if project_includes else None
        if path is None or not path.is_file():
            if header not in includes:
                includes.append(header)
        elif header not in embedded:
            text = _PRAGMA_ONCE.sub("", path.read_text(), count=1)
            for dependency in _INCLUDE.findall(text):
                include(dependency)  # embedded before what needs it
            embedded[header] = _INCLUDE.sub("", text)

    for name in winners:
        for header in kernels_by_name[name].includes:
            include(header)
    for p, row in zip(problems, best.itertuples(index=False)):
        check_setting(p, row, kernels_by_name[row.kernel])
    first = best.iloc[0]
    entries = [
        {"problem": p, "kernel": row.kernel, "setting": row.setting, "runtime_ms": row.runtime_ms,
         "gflops": p.flops / (row.runtime_ms * 1e6),
         # the problem's best_kernels::Epilogue after its other fields (nothing for none)
         "epilogue": f", {epilogue_cpp(p.epilogue)}" if getattr(p, "epilogue", "") else ""}
        for p, row in zip(problems, best.itertuples(index=False))
    ]
    sections = {op.HEADER_SECTION: [e for e in entries if e["problem"].op == name] for name, op in OPS.items()}
    order = launchers_of(best, problems)
    for e in entries:
        e["launcher"] = order.index((e["kernel"], e["setting"]))
    device_arch, arch_specific = target_arch([kernels_by_name[n] for n in winners])
    device_target = f"{device_arch}{TARGETS[device_arch].suffix if arch_specific else ''}"
    comment = render.comment_text  # text from a CSV or a path reaches C++ only inside a comment, escaped
    element = DATA_TYPES[problems[0].dtype]
    common = dict(source=comment(source), gpu=comment(first["gpu"]), driver=comment(first["driver"]),
                  cuda=comment(first["cuda"]), cutlass=comment(first["cutlass"]),
                  timing=results.timing_text(first["timing"]), device_target=device_target, **sections)
    banner = render.BANNER.format(source=comment(f"scons best_kernels.h from {source}"))
    launchers = [{"name": n, "setting": setting, "epilogue": launcher_epilogue_cpp(kernels_by_name[n]),
                  "optional_relu": getattr(kernels_by_name[n], "fusion", "") == OPTIONAL_RELU} for n, setting in order]
    return {
        "best_kernels.h": render.render(
            templates, "best_kernels.h.mako", "best_kernels.h", banner=banner, set_name=comment(set_name),
            element=element.cuda, element_header=element.cuda_header, launchers=launchers, **common),
        "best_kernels_cutlass.h": render.render(
            templates, "best_kernels_cutlass.h.mako", "best_kernels_cutlass.h", banner=banner,
            defines=list(dict.fromkeys(d for n in winners for d in render.defines(kernels_by_name[n]))),
            includes=includes, embedded=embedded, device_arch=device_arch, arch_specific=arch_specific,
            type_definitions=[render.type_definition(templates, kernels_by_name[n]) for n in winners], **common),
        "best_kernels_launcher.cu": render.render(
            templates, "best_kernels_launcher.cu.mako", "best_kernels_launcher.cu", banner=banner,
            launchers=launchers, **sections),
        "best_kernels-config.cmake": render.render(
            templates, "best_kernels-config.cmake.mako", "best_kernels-config.cmake",
            banner=banner.replace("//", "#", 1), set_name=comment(set_name), gpu=comment(first["gpu"])),
    }


def check_setting(problem, row, kernel) -> None:
    """A chosen row records a launch setting exactly where its kernel searches them
    (``searched``): the launcher launches it with that one, and a kernel of none as it is."""
    searched = getattr(kernel, "searched", False)
    if searched != bool(row.setting):
        why = ("searches its launch settings, but its row records none" if searched
               else f"has no launch settings, but its row records {row.setting!r}")
        raise ResultsError(row.source, f"workload {problem.name}: kernel {row.kernel} {why}: run scons profile")


def target_arch(kernels) -> tuple:
    """(compute capability, whether only its ``a`` target runs them) that every device pass of a
    build of the header must target: the arch-specific kernels' (sm_90a), else the newest arch."""
    specific = sorted({k.arch for k in kernels if k.arch_specific})
    if specific:
        return specific[-1], True
    return max(k.arch for k in kernels), False


def build_header(results_dir, problems, hashes: dict, kernels_by_name: dict, templates_dir, output,
                 project_includes=None, workload_file="the workload file", gpu: str | None = None,
                 set_name: str = "", measured_with: dict | None = None) -> pd.DataFrame:
    """Validate, choose, write HEADER_FILES into the folder ``output``; returns the chosen rows. A
    workload that no kernel of ``kernels_by_name`` serves (its op and dtype) is refused first,
    naming ``workload_file`` and its line.
    ``gpu``: the slug of the GPU whose folder ``results_dir`` is; its rows must all be of that GPU.
    ``measured_with``: the build's manifest ``pairs`` (``select_best``)."""
    check_served(problems, list(kernels_by_name.values()), workload_file)
    check_header_keys(problems, workload_file)
    frame = load_set(results_dir, problems, gpu)
    best = choose(frame, problems, hashes, kernels_by_name, measured_with)
    files = header_files(render.lookup(templates_dir), best, problems, kernels_by_name, str(results_dir),
                         project_includes, set_name or Path(results_dir).parent.name)
    for name, text in files.items():
        render.write_generated(Path(output) / name, text)
    return best
