"""Results CSVs as other tools write them: a byte-order mark, CRLF or CR line ends and columns
in any order are read as the same rows; bytes that are not UTF-8, the header line twice, a
row with extra or missing fields, and unknown or repeated columns are refused with one line
naming the file and the line."""

import pytest

from kernelgen import results
from kernelgen.errors import ResultsError
from test_reduce import PROBLEMS, SM80, SM80_B, SM90, row

WORKLOAD = PROBLEMS[0].name


def reference_text() -> str:
    rows = [row(WORKLOAD, SM80, runtime=0.5), row(WORKLOAD, SM80_B, runtime=0.4), row(WORKLOAD, SM90, status="incorrect",
                                                                                      message="output differs")]
    rows[2].update(rel_l2_error=0.5, rel_max_error=0.9)
    for r in rows:
        r["measured_at"] = "2026-11-30T03:14:13Z"
    return results.to_csv_text(rows)


def reorder(text: str, order) -> str:
    """The CSV with its columns in ``order`` (indices into the header)."""
    order = list(order)
    lines = [line.split(",") for line in text.splitlines()]
    return "".join(",".join(fields[i] for i in order) + "\n" for fields in lines)


def drop_column(text: str, name: str) -> str:
    index = text.split("\n", 1)[0].split(",").index(name)
    return reorder(text, [i for i in range(len(results.COLUMNS)) if i != index])


ACCEPTED = [
    ("as written", lambda t: t.encode()),
    ("byte-order mark", lambda t: b"\xef\xbb\xbf" + t.encode()),
    ("CRLF line ends", lambda t: t.replace("\n", "\r\n").encode()),
    ("CR line ends", lambda t: t.replace("\n", "\r").encode()),
    ("byte-order mark and CRLF", lambda t: b"\xef\xbb\xbf" + t.replace("\n", "\r\n").encode()),
    ("columns reversed", lambda t: reorder(t, reversed(range(len(results.COLUMNS)))).encode()),
    ("columns rotated", lambda t: reorder(t, [(i + 5) % len(results.COLUMNS) for i in range(len(results.COLUMNS))]).encode()),
    ("an optional column left out", lambda t: drop_column(t, "gflops").encode()),
    ("a blank line at the end", lambda t: (t + "\n").encode()),
]


@pytest.mark.parametrize("variant", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_variants_of_the_format_read_as_the_same_rows(tmp_path, variant):
    expected = tmp_path / "expected.csv"
    expected.write_text(reference_text())
    path = tmp_path / "variant.csv"
    path.write_bytes(variant(reference_text()))
    frame, reference = results.read_csv(path), results.read_csv(expected)
    if "gflops" not in path.read_bytes().decode("utf-8-sig").split("\n", 1)[0]:
        reference["gflops"] = frame["gflops"]  # left out: read as empty
        assert frame["gflops"].isna().all()
    assert frame.equals(reference)
    assert list(frame.columns) == list(results.COLUMNS)


def header_again(where: int):
    def corrupt(text):
        lines = text.splitlines(keepends=True)
        return "".join(lines[:where] + [lines[0]] + lines[where:]).encode()
    return corrupt


REFUSED = [
    ("latin-1 byte", lambda t: t.replace("output differs", "sortie diff\u00e9rente").encode("latin-1"),
     r"line 2: not UTF-8 text \(byte 0xe9 at column \d+\)"),
    ("UTF-16", lambda t: t.encode("utf-16"), r"line 1: not UTF-8 text \(byte 0xff at column 1\)"),
    ("a NUL byte", lambda t: t.replace(",ok,", ",o\x00k,", 1).encode(), r"line 3: control character '\\x00'"),
    ("a byte-order mark inside (files joined)", lambda t: (t + "\ufeff" + t).encode(), r"line 5: control character '\\ufeff'"),
    ("the header line twice", header_again(1), r"line 2: the header line again \(first on line 1\)"),
    ("the header line again at the end", header_again(4), r"line 5: the header line again"),
    ("the header line again, reordered", lambda t: (t + reorder(t, reversed(range(len(results.COLUMNS)))).split("\n", 1)[0] + "\n").encode(),
     r"line 5: the header line again"),
    ("an extra field in a row", lambda t: t.replace(",ok,", ",ok,extra,", 1).encode(), rf"line 3: {len(results.COLUMNS) + 1} field\(s\), but the header has {len(results.COLUMNS)}"),
    ("a field missing in a row", lambda t: t.replace(",ok,", ",", 1).encode(), rf"line 3: {len(results.COLUMNS) - 1} field\(s\), but the header has {len(results.COLUMNS)}"),
    ("an extra column", lambda t: t.replace("\n", ",note\n").encode(), r"line 1: unknown column\(s\): 'note'"),
    ("a trailing comma", lambda t: t.replace("\n", ",\n").encode(), r"line 1: unknown column\(s\): ''"),
    ("a column named twice", lambda t: t.replace("setting\n", "gpu\n", 1).encode(), r"line 1: column 'gpu' is named twice"),
    ("a required column missing", lambda t: drop_column(t, "kernel_hash").encode(),
     r"line 1: missing required column\(s\): kernel_hash"),
    ("an unterminated quote", lambda t: t.replace(",ok,", ',"ok,', 1).encode(), r"truncated|not a well-formed CSV"),
    ("no line end at the end", lambda t: t.rstrip("\n").encode(), r"truncated: the last line is incomplete"),
]


@pytest.mark.parametrize("corrupt, match", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_bad_csvs_are_refused_naming_the_file_and_line(tmp_path, corrupt, match):
    path = tmp_path / f"{WORKLOAD}.csv"
    path.write_bytes(corrupt(reference_text()))
    with pytest.raises(ResultsError, match=match) as info:
        results.read_csv(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and len(message) < 600
