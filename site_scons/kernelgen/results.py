"""Profile results: one CSV per workload, ``profile_results/<set>/<workload>.csv``.

One row per candidate kernel, including those that cannot run. ``read_csv``
validates a file before anything uses it; ``write_csv`` replaces a file
atomically, so a reader never sees half of one.
"""

import csv
import io
from pathlib import Path

import pandas as pd

from .errors import ResultsError
from .render import write_generated

COLUMNS = (
    "workload", "kernel", "status", "runtime_ms", "min_ms", "max_ms", "iterations", "gflops",
    "rel_l2_error", "rel_max_error", "message", "family", "kernel_hash",
    "gpu", "driver", "cuda", "cutlass", "measured_at",
)
REQUIRED = ("workload", "kernel", "status", "runtime_ms", "kernel_hash", "gpu", "driver", "cuda", "cutlass")
STATUSES = ("ok", "unsupported", "incorrect", "failed", "crashed", "timeout")
NUMERIC = ("runtime_ms", "min_ms", "max_ms", "iterations", "gflops", "rel_l2_error", "rel_max_error")
PROVENANCE = ("gpu", "driver", "cuda", "cutlass")


def read_csv(path) -> pd.DataFrame:
    """Read and validate one results CSV; raise ResultsError naming the file otherwise."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ResultsError(path, f"cannot read: {e.strerror}") from None
    if not text.strip():
        raise ResultsError(path, "empty file")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ResultsError(path, f"not a well-formed CSV: {e}") from None
    if not text.endswith("\n"):
        raise ResultsError(path, "truncated: the last line is incomplete")
    return validate(frame, path)


def validate(frame: pd.DataFrame, path) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ResultsError(path, f"missing required column(s): {', '.join(missing)}")
    unknown = [c for c in frame.columns if c not in COLUMNS]
    if unknown:
        raise ResultsError(path, f"unknown column(s): {', '.join(map(str, unknown))}")
    frame = frame.copy()
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = ""
    frame = frame[list(COLUMNS)]
    for i, row in enumerate(frame.itertuples(index=False), start=2):  # line 1 is the header
        if row.status not in STATUSES:
            raise ResultsError(path, f"line {i}: status {row.status!r} is not one of {', '.join(STATUSES)}")
        if not row.workload or not row.kernel:
            raise ResultsError(path, f"line {i}: empty workload or kernel")
    numbers = {}
    for column in NUMERIC:
        numbers[column] = pd.to_numeric(frame[column].where(frame[column] != ""), errors="coerce")
        bad = numbers[column].isna() & (frame[column] != "")
        if bad.any():
            line = int(bad.to_numpy().nonzero()[0][0]) + 2
            raise ResultsError(path, f"line {line}: {column} {frame[column][bad].iloc[0]!r} is not a number")
        frame[column] = numbers[column]
    ok = frame["status"] == "ok"
    timed = frame["runtime_ms"].notna()
    if (ok & ~(timed & (frame["runtime_ms"] > 0))).any():
        line = int((ok & ~(timed & (frame["runtime_ms"] > 0))).to_numpy().nonzero()[0][0]) + 2
        raise ResultsError(path, f"line {line}: an ok row needs a positive, finite runtime_ms")
    if (~ok & timed).any():
        line = int((~ok & timed).to_numpy().nonzero()[0][0]) + 2
        raise ResultsError(path, f"line {line}: runtime_ms must be empty unless status is ok")
    if ok.any() and not frame.loc[ok, "runtime_ms"].map(lambda v: v < float("inf")).all():
        raise ResultsError(path, "an ok row has an infinite runtime_ms")
    duplicated = frame.duplicated(["workload", "kernel"], keep=False)
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ResultsError(path, f"duplicate rows for workload {first.workload}, kernel {first.kernel}")
    return frame


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
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
