"""`scons merge FROM=root[,root...]`: the rows of other results roots (the shards of a job array,
each measured on its own machine into its own RESULTS) joined into RESULTS, one CSV at a time
under the folder's lock, as the profiler's own writes are.

Every CSV of FROM/<set>/<gpu>/ (but compare.csv) is read and validated as the reducer reads one;
its rows join RESULTS/<set>/<gpu>/ of the same name, where a (workload, kernel) pair already there
is replaced only by a row measured later (``measured_at``). Nothing else of RESULTS changes.

The roots must be shards of one build: rows of one set and GPU from two roots that name different
code for a kernel (``kernel_hash``) or a different software stack or timing (driver, CUDA,
CUTLASS, timing) are refused, naming both roots, before anything is written. So are rows whose GPU,
software stack or timing differ from those of the rows RESULTS already holds for their set and GPU
(the reducer takes a set's rows from one stack only: ``reduce.load_set``), naming a file of each."""

from pathlib import Path

from . import inputs, results
from .errors import KernelgenError, ResultsError, shorten

SKIPPED = ("compare.csv",)


def parse_from(text: str, root: Path, results_root: Path) -> list:
    """FROM= as folders: comma-separated, each an existing folder other than RESULTS."""
    folders = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        folder = (root / part).resolve()
        if inputs.file_kind(folder) != "a directory":
            raise KernelgenError(f"FROM={shorten(text)!r}: {shorten(part)} is not a folder of results")
        if folder == results_root:
            raise KernelgenError(f"FROM={shorten(text)!r}: {shorten(part)} is RESULTS itself")
        folders.append(folder)
    if not folders:
        raise KernelgenError("scons merge needs FROM=<results root>[,<root>...]: the roots whose rows join RESULTS")
    return folders


def csvs_of(source: Path) -> list:
    """(set, gpu, path) of every results CSV of ``source``, sorted."""
    found = []
    for path in sorted(source.glob("*/*/*.csv")):
        if path.name not in SKIPPED and inputs.file_kind(path) is None:
            found.append((path.parent.parent.name, path.parent.name, path))
    return found


def merge_file(source_path: Path, destination: Path, gpu: str) -> tuple:
    """Join ``source_path``'s rows into ``destination``; (rows added, rows replaced)."""
    incoming = results.rows_of(results.read_csv(source_path, gpu))
    if any(row["workload"] != source_path.stem for row in incoming):
        raise ResultsError(source_path, f"holds rows of another workload than {source_path.stem}")
    with results.locked(destination.parent):
        present = results.rows_of(results.read_csv(destination, gpu)) if destination.exists() else []
        rows = {(row["workload"], row["kernel"]): row for row in present}
        added = replaced = 0
        for row in incoming:
            key = (row["workload"], row["kernel"])
            if key not in rows:
                added += 1
            elif str(row["measured_at"] or "") > str(rows[key]["measured_at"] or ""):
                replaced += 1
            else:
                continue
            rows[key] = row
        if added or replaced:
            results.write_csv(destination, list(rows.values()))
    return added, replaced


STACK = ("driver", "cuda", "cutlass", "timing")


def check_one_build(sources: list) -> None:
    """Refuse roots whose rows of one set and GPU come from different builds (see the module)."""
    code, stack = {}, {}  # (set, gpu, kernel) -> (hash, root); (set, gpu) -> (stack, root)
    for source in sources:
        for set_name, gpu, path in csvs_of(source):
            for row in results.rows_of(results.read_csv(path, gpu)):
                for key, value, seen in (((set_name, gpu, row["kernel"]), str(row["kernel_hash"]), code),
                                         ((set_name, gpu), tuple(str(row[c]) for c in STACK), stack)):
                    first = seen.setdefault(key, (value, source))
                    if first[0] != value and first[1] != source:
                        what = (f"kernel {shorten(row['kernel'])} from code {first[0]} in one and {value} in the "
                                f"other" if seen is code else
                                f"different software or timing ({', '.join(first[0])} against {', '.join(value)})")
                        raise KernelgenError(f"{shorten(first[1])} and {shorten(source)} hold rows of "
                                             f"different builds for {set_name}/{gpu}: {what}; merge the shards of "
                                             "one build")


def _provenance(path: Path, gpu: str) -> tuple | None:
    """The provenance (``results.PROVENANCE``) of the first row of the CSV ``path``; None if it has none."""
    columns = results.read_columns(path, gpu)
    if not columns or not columns["workload"]:
        return None
    return tuple(str(columns[c][0]) for c in results.PROVENANCE)


def check_destination(sources: list, results_root: Path) -> None:
    """Refuse rows measured on another GPU, software stack or timing than the rows ``results_root``
    holds for their set and GPU (its first CSV's), before anything is written."""
    held = {}  # (set, gpu) -> (provenance, its file) or None
    for source in sources:
        for set_name, gpu, path in csvs_of(source):
            if (set_name, gpu) not in held:
                folder = results_root / set_name / gpu
                present = [p for p in sorted(folder.glob("*.csv")) if p.name not in SKIPPED] if folder.is_dir() else []
                held[(set_name, gpu)] = next(((pv, p) for p in present if (pv := _provenance(p, gpu))), None)
            if held[(set_name, gpu)] is None:
                continue
            (theirs, their_file), columns = held[(set_name, gpu)], results.read_columns(path, gpu) or {}
            for row in zip(*(columns.get(c, ()) for c in results.PROVENANCE)):
                mine = tuple(map(str, row))
                if mine != theirs:
                    raise KernelgenError(f"{shorten(str(source))}: {set_name}/{gpu}/{shorten(path.name)} holds rows "
                                         f"measured with {', '.join(mine)}, but RESULTS' {shorten(their_file.name)} with "
                                         f"{', '.join(theirs)}: a set's rows must come from one GPU, software stack and "
                                         "timing; profile the set again instead")


def merge(sources: list, results_root: Path, log=print) -> None:
    check_one_build(sources)
    check_destination(sources, results_root)
    files = added = replaced = 0
    for source in sources:
        for set_name, gpu, path in csvs_of(source):
            a, r = merge_file(path, results_root / set_name / gpu / path.name, gpu)
            files, added, replaced = files + 1, added + a, replaced + r
    log(f"scons merge: {files} CSV(s) of {len(sources)} root(s) read; {added} row(s) added and {replaced} replaced "
        f"by a later measurement in {results_root}")
