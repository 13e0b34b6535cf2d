"""Profile results: one CSV per workload and GPU, ``profile_results/<set>/<gpu>/<workload>.csv``.

One row per candidate kernel, including those that cannot run. ``<gpu>`` is the GPU's name
as a plain folder name (``gpu_slug``: "NVIDIA H200" is ``nvidia_h200``), so the results of
one card never replace another's. ``read_csv`` validates a file before anything uses it;
``write_csv`` replaces a file atomically, so a reader never sees half of one, and ``locked``
holds a GPU folder while a writer reads, merges and replaces one of its files.

A CSV is read as UTF-8 (a byte-order mark is dropped), with LF, CRLF or CR line ends and its
columns in any order. Anything else is refused naming the file and the line: bytes that are
not UTF-8, a row with more or fewer fields than the header, the header line again, a control
character in a field, a number that is not plain ASCII decimal or is out of its column's
range (``LIMITS``), an ok row whose runtime is not within its min_ms .. max_ms, and, where the
folder is a GPU's, a row measured on another GPU.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import math
import os
import re
from collections import Counter
from pathlib import Path

from . import inputs
from .errors import InputError, ResultsError
from .render import write_generated

# pandas is imported where a CSV is read: a run that reads none (a refusal, --help, -c, a set
# without results) does not wait for it.

COLUMNS = (
    "workload", "kernel", "status", "runtime_ms", "min_ms", "max_ms", "iterations", "gflops",
    "rel_l2_error", "rel_max_error", "message", "family", "kernel_hash",
    "gpu", "driver", "cuda", "cutlass", "measured_at", "timing", "device", "sm_clock_mhz", "power_w", "setting",
)
REQUIRED = ("workload", "kernel", "status", "runtime_ms", "kernel_hash", "gpu", "driver", "cuda", "cutlass")
STATUSES = ("ok", "unsupported", "incorrect", "failed", "crashed", "timeout")
NUMERIC = ("runtime_ms", "min_ms", "max_ms", "iterations", "gflops", "rel_l2_error", "rel_max_error",
           "sm_clock_mhz", "power_w")
PROVENANCE = ("gpu", "driver", "cuda", "cutlass", "timing")
# ``device``: which GPU of its machine measured a row, "<index> <uuid>" as nvidia-smi names it (empty
# in a file written before the column existed); no part of the provenance: GPUs of one model agree.
# ``sm_clock_mhz``, ``power_w``: the SM clock and the board power NVML read while an ok row's last
# timed batches ran (empty where unknown, for other rows, and in a file written before them): what
# a comparison of rows measured apart in time or on other GPUs needs to see.
# ``setting``: of a kernel with launch settings (profiler/launch_settings.h: a tile scheduler's
# raster order and swizzle, a stream-K decomposition), the one its row measured, the fastest of
# those the profiler tried, and what the header launches it with; empty for other kernels (and in a
# file written before the column existed).
# How runtime_ms was timed: "graph", each batch of launches replayed from a CUDA graph (GPU time),
# or "launches", launched back to back from the host (host cost included); then "-rest<ms>" where
# the GPU idled that long before the timed batches and "-hold<ms>" where the kernel ran that long
# first (the profiler's default: "graph-rest50"). Rows timed one way are not compared with rows
# timed another. A file written before the column existed was timed so: its rows (and an empty
# cell) read as "launches".
TIMINGS = ("graph", "launches")
UNRECORDED_TIMING = "launches"
PROFILER_TIMING = "graph-rest50"  # the profiler's timing given no option (profiler/main.cu: --rest-ms 50)
TIMING = re.compile(f"({'|'.join(TIMINGS)})" + r"(-rest[0-9]{1,5}(\.[0-9]{1,3})?)?(-hold[0-9]{1,5}(\.[0-9]{1,3})?)?")
TIMING_FORMS = f"one of {', '.join(TIMINGS)}, then -rest<ms> and -hold<ms>"  # what TIMING matches, in words


def measured_with(pairs: dict | None, workload: str, with_rows) -> set | None:
    """The kernels a profile measures on ``workload`` where the build's manifest holds ``pairs``
    (workload name -> kernel names; ``candidates.measured_pairs``): those named for it, and every
    kernel of ``with_rows`` (those its CSV holds a row of: measured again where their code changed).
    None without pairs: every kernel that serves the workload."""
    return None if pairs is None else set(pairs.get(workload, ())) | set(with_rows)


# A launch setting as the profiler writes it (profiler/launch_settings.h): words of lower-case letters,
# digits and underscores, each "name=value", one space between; the header puts it in a C++ string.
SETTING = re.compile(r"[a-z_]{1,20}=[a-z0-9_]{1,20}( [a-z_]{1,20}=[a-z0-9_]{1,20}){0,3}")
SETTING_FORMS = "name=value words (lower-case letters, digits, underscores) joined by spaces, at most 4"


def valid_setting(setting: str) -> bool:
    """Whether ``setting`` is a launch setting's text (SETTING)."""
    return SETTING.fullmatch(setting) is not None


def valid_timing(timing: str) -> bool:
    """Whether ``timing`` is a way the profiler times: one of TIMINGS, then -rest<ms>, -hold<ms>."""
    return TIMING.fullmatch(timing) is not None


def timing_text(timing: str) -> str:
    """``timing`` in words, for the header: "GPU time, each batch ... after a rest of 50 ms"."""
    base, *steps = timing.split("-")
    words = {"graph": "GPU time, each batch of launches replayed from a CUDA graph",
             "launches": "launched back to back from the host, the host's cost per launch included"}[base]
    for step in steps:
        words += f", after a rest of {step[4:]} ms" if step.startswith("rest") else f", held {step[4:]} ms first"
    return words

# A number as the profile driver writes it: ASCII decimal or exponent notation, or inf.
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$|^[+-]?inf(?:inity)?$", re.IGNORECASE)
# What each number may be: (least, greatest). A time lies between a nanosecond (1e-6 ms) and
# 1000 s (1e6 ms), beyond what any kernel launch takes either way, so that a header never prints
# one's rate as inf; iterations count launches, a whole number that a double holds exactly; rates
# and errors are not negative. Every number is finite.
MS_RANGE = (1e-6, 1e6)
LIMITS = {"runtime_ms": MS_RANGE, "min_ms": MS_RANGE, "max_ms": MS_RANGE, "iterations": (1, 2 ** 53),
          "gflops": (0, math.inf), "rel_l2_error": (0, math.inf), "rel_max_error": (0, math.inf),
          "sm_clock_mhz": (0, 100000), "power_w": (0, 100000)}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029\ufeff]")  # a BOM past the start: files joined
_SLUG = re.compile(r"[^a-z0-9]+")


def gpu_slug(name: str) -> str:
    """A GPU's name as a folder name: lower case, runs of anything else than a-z and 0-9 as one
    ``_`` ("NVIDIA H200" -> ``nvidia_h200``); a slug is its own slug. Empty if nothing is left."""
    return _SLUG.sub("_", name.lower()).strip("_")[:64]


def gpu_dir(results_root, set_name: str, gpu: str) -> Path:
    """Where the results of ``set_name`` measured on ``gpu`` (a name or a slug) live."""
    return Path(results_root) / set_name / gpu_slug(gpu)


def gpus_with_results(set_dir) -> list[str]:
    """The GPU folders (plain slugs) of a set that hold at least one CSV file, sorted."""
    set_dir = Path(set_dir)
    try:
        folders = [p for p in set_dir.iterdir() if p.is_dir() and gpu_slug(p.name) == p.name]
    except OSError:
        return []
    return sorted(p.name for p in folders
                  if any(q.suffix == ".csv" and inputs.file_kind(q) is None for q in _entries(p)))


def _entries(folder: Path) -> list:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def choose_gpu(set_dir, requested: str | None, machine: str | None, given_as: str = "GPU=") -> str:
    """The GPU folder a header is built from: ``requested`` (GPU=, a name or slug; ``given_as``
    is how an error names it), else this machine's GPU (``machine``, None without one), else
    the only GPU with results."""
    set_dir = Path(set_dir)
    found = gpus_with_results(set_dir)
    listed = ", ".join(found) if found else "none"
    if requested is not None:
        slug = gpu_slug(requested)
        if not slug:
            raise ResultsError(set_dir, f"{given_as}{requested!r} names no GPU (GPUs with results here: {listed})")
        if slug not in found:
            raise ResultsError(set_dir, f"{given_as}{requested} ({slug}) has no results here (GPUs with results: "
                               f"{listed})")
        return slug
    if machine is not None:
        slug = gpu_slug(machine)
        if slug not in found:
            raise ResultsError(set_dir, f"this machine's GPU, {machine} ({slug}), has no results here (GPUs with "
                               f"results: {listed}): run scons profile, or name one with GPU=")
        return slug
    if len(found) == 1:
        return found[0]
    if found:
        raise ResultsError(set_dir, f"results of several GPUs ({listed}) and no GPU here: name one with GPU=")
    loose = sorted(p.name for p in _entries(set_dir) if p.suffix == ".csv")
    if loose:
        raise ResultsError(set_dir, f"holds CSVs outside a GPU folder (e.g. {loose[0]}): results live in "
                           f"{set_dir}/<gpu>/, e.g. {set_dir}/nvidia_h200/; move them there")
    raise ResultsError(set_dir, "no GPU has results for this set here: run scons profile on a GPU")


@contextlib.contextmanager
def locked(folder):
    """Hold ``folder`` (made if missing) exclusively, against every other process that holds it
    so, until the block ends or this process dies: a writer that reads a CSV of it, merges its
    rows in and replaces it loses no row another writer put there meanwhile. The folder itself is
    the lock (flock), so that no lock file lies among the CSVs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_csv(path, gpu: str | None = None) -> pd.DataFrame:
    """Read and validate one results CSV; raise ResultsError naming the file otherwise. With
    ``gpu``, the slug of the GPU folder the file lies in, a row of another GPU is refused.

    What a text validates to is kept for the rest of the process (the build plan and the header's
    build both read a set's CSVs): a text read again is only checked for its rows' GPU. Each call
    returns a frame of its own."""
    columns = read_columns(path, gpu)
    if columns is None:  # a header and no row
        import pandas as pd
        return validate(pd.DataFrame(columns=list(COLUMNS), dtype=str), path)
    return _frame(columns)


def read_rows(path, gpu: str | None = None) -> list[dict]:
    """As ``rows_of(read_csv(path, gpu))``, without pandas: the validated rows as dicts of every
    column (numbers as floats, NaN for empty)."""
    columns = read_columns(path, gpu)
    if columns is None:
        return []
    return [dict(zip(COLUMNS, values)) for values in zip(*(columns[c] for c in COLUMNS))]


def frame_of(columns: dict, **more) -> pd.DataFrame:
    """The frame ``read_csv`` makes of validated ``columns``, and string columns ``more`` (name ->
    list of the same length)."""
    import pandas as pd
    frame = _frame(columns)
    for name, values in more.items():
        frame[name] = pd.array(values, dtype=str)
    return frame


def read_columns(path, gpu: str | None = None) -> dict | None:
    """As ``read_csv``, its validated columns (column -> list, every one of COLUMNS; numbers as
    floats, NaN for empty) without a frame, or None for a file of a header and no row."""
    path = Path(path)
    try:
        text = inputs.read_text(path, inputs.CSV_LIMIT)
    except InputError as e:
        raise ResultsError(path, f"cannot read: {e.detail}") from None
    if not text.strip():
        raise ResultsError(path, "empty file")
    if not text.endswith(("\n", "\r")):
        raise ResultsError(path, "truncated: the last line is incomplete")
    kept = _VALIDATED.get(text)
    if kept is not None:
        columns, lines = kept
        if gpu is not None:  # every other check passed: a row of another GPU is the first error, if any
            _check_gpus(columns["gpu"], path, lambda i: lines[i], gpu)
        return columns
    header, rows, lines = _parse(text, path)
    if not rows:
        _check_columns(header, path)
        return None
    columns = _validated(dict(zip(header, map(list, zip(*rows)))), len(rows), path, lambda i: lines[i], gpu)
    while len(_VALIDATED) >= _KEPT or sum(len(t) for t in _VALIDATED) + len(text) > _KEPT_CHARACTERS:
        if not _VALIDATED:
            break
        _VALIDATED.pop(next(iter(_VALIDATED)))  # the oldest first
    _VALIDATED[text] = (columns, lines)
    return columns


_VALIDATED = {}  # CSV text -> (its validated columns, the line of each row)
_KEPT, _KEPT_CHARACTERS = 4096, 64 * 2**20  # what is kept at most (the committed results: 1,202 files, 21 MB)


def _parse(text: str, path) -> tuple[list, list, list]:
    """(header, rows, the line each row starts on); every row as long as the header."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header, rows, lines = None, [], []
    while True:
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise ResultsError(path, f"line {start}: not a well-formed CSV: {e}") from None
        if not record:
            continue  # a blank line
        if _CONTROL.search(",".join(record)):  # (a comma is no control character)
            for field in record:
                bad = _CONTROL.search(field)
                if bad:
                    raise ResultsError(path, f"line {start}: control character {bad.group()!r} in the field "
                                       f"{field[:40]!r}")
        if header is None:
            header, header_line = record, start
            seen = set()
            for name in header:
                if name in seen:
                    raise ResultsError(path, f"line {start}: column {name!r} is named twice")
                seen.add(name)
            _check_columns(header, path, start)
            header_names, header_sorted = seen, sorted(header)
            continue
        if record[0] in header_names and sorted(record) == header_sorted:
            raise ResultsError(path, f"line {start}: the header line again (first on line {header_line})")
        if len(record) != len(header):
            raise ResultsError(path, f"line {start}: {len(record)} field(s), but the header has {len(header)}")
        rows.append(record)
        lines.append(start)
    return header, rows, lines


def _check_columns(columns: list, path, line=None) -> None:
    where = "" if line is None else f"line {line}: "
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise ResultsError(path, f"{where}missing required column(s): {', '.join(missing)}")
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ResultsError(path, f"{where}unknown column(s): {', '.join(map(repr, unknown))} (known: "
                           f"{', '.join(COLUMNS)})")


def validate(frame: pd.DataFrame, path, lines=None, gpu: str | None = None) -> pd.DataFrame:
    """Check a frame of strings; ``lines[i]`` is the line row ``i`` came from (default: i + 2);
    ``gpu`` as for ``read_csv``."""
    line_of = (lambda i: lines[i]) if lines is not None else (lambda i: i + 2)
    _check_columns(list(frame.columns), path)
    if len(frame):
        return _frame(_validated({c: frame[c].tolist() for c in frame.columns}, len(frame), path, line_of, gpu))
    frame = frame.copy()
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = ""
    frame = frame[list(COLUMNS)]
    frame["timing"] = frame["timing"].where(frame["timing"] != "", UNRECORDED_TIMING)
    for column in NUMERIC:
        frame[column] = frame[column].astype(float)
    return frame


def _validated(columns: dict, rows: int, path, line_of, gpu: str | None) -> dict:
    """The columns (name -> a list of strings, one a row; ``rows`` > 0) of a frame of strings,
    checked as ``validate`` says, as the frame's columns: every one of COLUMNS (one missing is
    empty, an empty timing ``UNRECORDED_TIMING``), the NUMERIC ones as floats (NaN for empty)."""
    columns = {c: columns[c] if c in columns else [""] * rows for c in COLUMNS}
    columns["timing"] = [t if t != "" else UNRECORDED_TIMING for t in columns["timing"]]  # also a missing column
    slugs = {}  # gpu -> its slug
    for i, (status, workload, kernel, timing, row_gpu) in enumerate(
            zip(*(columns[c] for c in ("status", "workload", "kernel", "timing", "gpu")))):
        if status not in STATUSES:
            raise ResultsError(path, f"line {line_of(i)}: status {status!r} is not one of {', '.join(STATUSES)}")
        if not workload or not kernel:
            raise ResultsError(path, f"line {line_of(i)}: empty workload or kernel")
        if not valid_timing(timing):
            raise ResultsError(path, f"line {line_of(i)}: timing {timing[:40]!r} is not {TIMING_FORMS}")
        if gpu is not None:
            _check_gpu(row_gpu, slugs, path, line_of(i), gpu)
    for i, setting in enumerate(columns["setting"]):
        if setting and not valid_setting(setting):
            raise ResultsError(path, f"line {line_of(i)}: setting {setting[:40]!r} is not {SETTING_FORMS}")
    for column in NUMERIC:
        columns[column] = [math.nan if text == "" else _number(text, column, path, line_of(i))
                           for i, text in enumerate(columns[column])]
    for i, row in enumerate(zip(*(columns[c] for c in ("status", "runtime_ms", "min_ms", "max_ms")))):
        _check_row(*row, path, line_of(i))
    pairs = list(zip(columns["workload"], columns["kernel"]))
    if len(set(pairs)) != len(pairs):
        counts = Counter(pairs)
        workload, kernel = next(p for p in pairs if counts[p] > 1)
        raise ResultsError(path, f"duplicate rows for workload {workload}, kernel {kernel}")
    return columns


def _check_gpus(gpus: list, path, line_of, gpu: str) -> None:
    slugs = {}
    for i, row_gpu in enumerate(gpus):
        _check_gpu(row_gpu, slugs, path, line_of(i), gpu)


def _check_gpu(row_gpu: str, slugs: dict, path, line, gpu: str) -> None:
    """A row measured on ``row_gpu`` lies in the folder of ``gpu`` (``slugs``: gpu -> its slug, so far)."""
    slug = slugs.get(row_gpu)
    if slug is None:
        slug = slugs[row_gpu] = gpu_slug(row_gpu)
    if slug != gpu:
        raise ResultsError(path, f"line {line}: measured on {row_gpu} ({slug or 'no folder'}), but the file lies in the "
                           f"folder of the GPU {gpu}: a GPU's results live in a folder of its own, named by its slug")


def _frame(columns: dict) -> pd.DataFrame:
    """A validated frame of ``_validated``'s columns: strings, and floats for the NUMERIC ones."""
    import numpy as np
    import pandas as pd
    return pd.DataFrame({c: np.array(columns[c], dtype=float) if c in _NUMERIC_COLUMNS else pd.array(columns[c], dtype=str)
                         for c in COLUMNS})


_NUMERIC_COLUMNS = frozenset(NUMERIC)


def _number(text: str, column: str, path, line) -> float:
    """A cell of a NUMERIC column as a float (NaN if empty), within ``LIMITS``. Parsed as a float
    even where it must be whole: a string of thousands of digits is only a number too large."""
    if text == "":
        return math.nan
    least, greatest = LIMITS[column]
    if _NUMBER.match(text):
        value = float(text)
        if least <= value <= greatest and value != math.inf and (column != "iterations" or value.is_integer()):
            return value  # the checks below all pass
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
    if not _NUMBER.match(text):
        raise ResultsError(path, f"line {line}: {column} {shown} is not a number")
    value = float(text)
    if not math.isfinite(value):
        raise ResultsError(path, f"line {line}: {column} {shown} is not finite")
    if column == "iterations" and not (value.is_integer() and least <= value <= greatest):
        raise ResultsError(path, f"line {line}: iterations {shown} is not a whole number from 1 to 2^53")
    if value < least and greatest == math.inf:
        raise ResultsError(path, f"line {line}: {column} {shown} is negative")
    if not least <= value <= greatest:
        unit = " ms" if column.endswith("_ms") else ""
        raise ResultsError(path, f"line {line}: {column} {shown} is out of range ({least:g}{unit} to {greatest:g}{unit})")
    return value


def _check_row(status, runtime_ms, min_ms, max_ms, path, line) -> None:
    """An ok row is timed, within what its batches took (min_ms <= runtime_ms <= max_ms, where
    recorded); a row of another status has no runtime."""
    timed = runtime_ms == runtime_ms
    if status != "ok":
        if timed:
            raise ResultsError(path, f"line {line}: runtime_ms must be empty unless status is ok")
        return
    if not timed:
        raise ResultsError(path, f"line {line}: an ok row needs a positive, finite runtime_ms")
    if min_ms > max_ms:
        raise ResultsError(path, f"line {line}: min_ms {min_ms:g} is above max_ms {max_ms:g}")
    if min_ms > runtime_ms or runtime_ms > max_ms:
        raise ResultsError(path, f"line {line}: runtime_ms {runtime_ms:g} is not within min_ms {min_ms:g}"
                           f" .. max_ms {max_ms:g}")


def _cell(value) -> str:
    """A value as a CSV field: a whole float exactly (a count of iterations stays the count),
    another to six significant digits, NaN as empty."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) <= 2 ** 53 else f"{value:.6g}"
    return str(value)


def to_csv_text(rows: list[dict]) -> str:
    """Rows (dicts keyed by COLUMNS) as CSV text, sorted by kernel name."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in sorted(rows, key=lambda r: (r["workload"], r["kernel"])):
        writer.writerow([_cell(row.get(c)) for c in COLUMNS])
    return out.getvalue()


def write_csv(path, rows: list[dict]) -> None:
    write_generated(path, to_csv_text(rows))


def rows_of(frame: pd.DataFrame) -> list[dict]:
    """A validated frame back as row dicts (numbers as floats, NaN for empty)."""
    return frame.to_dict("records")
