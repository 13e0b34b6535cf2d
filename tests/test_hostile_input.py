"""Broken and hostile input: each case a row. Every bad input is refused with one line that
names the file (and line or key) or the variable, never a traceback; nothing outside the
project is read or written; nothing measured is deleted before its replacement is measured;
no string reaches C++ or SCons substitution unescaped."""

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from conftest import FAKES, ROOT, invocations, write_manifest
from kernelgen import commands, fusion, inputs, reduce, report, results
from kernelgen.config import resolve
from kernelgen.errors import KernelgenError, ResultsError, SpecError, WorkloadError, one_line
from kernelgen.profile import main as profile_main
from kernelgen.profile import profile
from kernelgen.specs import globs_of, load_family
from kernelgen.families import FAMILIES
from kernelgen.variables import default_cutlass_root, scons_text, variables
from kernelgen.vocab import verify_tolerance
from kernelgen.workloads import load_workloads, parse_workloads
from test_reduce import CATALOG, HASHES, PROBLEMS, SM80, SM80_B, SM90, row
from scons_runs import run_all
from test_scons_build import copy_project, scons

SETS = ROOT / "kernel_specs" / "workloads"
TEMPLATES = ROOT / "kernel_specs" / "templates"
# (set, GPU folder) of every committed set that has results
COMMITTED = [(p.stem, gpu) for p in sorted(SETS.glob("*.txt"))
             for gpu in results.gpus_with_results(ROOT / "profile_results" / p.stem)]
LAYER = "conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1\n"


@pytest.fixture
def deadline():
    """A case that blocks (a FIFO read) or reads without end (/dev/zero) fails instead of hanging."""
    def expire(signum, frame):
        raise TimeoutError("the case did not finish within 20 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def refused(call, error, match):
    """call() raises ``error`` whose one-line message matches ``match``; returns the message."""
    with pytest.raises(error, match=match) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and one_line(message) == message, "one line, control characters escaped"
    return message


# ---- files a user hands in: regular files only, bounded, UTF-8 ----------------------------

def valid_csv_text():
    return results.to_csv_text([row(PROBLEMS[0].name, k, runtime=t) for k, t in ((SM80, 0.5), (SM80_B, 0.4), (SM90, 0.3))])


def fifo(path):
    os.mkfifo(path)
    return path


def sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def blocked_os(**errors):
    """inputs' view of ``os`` with the named calls failing as an unreadable file or folder does
    (the tests run as root, for whom chmod takes nothing away)."""
    def failing(name):
        def call(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(args[0]))
        return call
    names = {n: getattr(os, n) for n in dir(os) if not n.startswith("__")}
    return types.SimpleNamespace(**{**names, **{n: failing(n) for n in errors}})


def csv_path(tmp_path):
    return tmp_path / f"{PROBLEMS[0].name}.csv"


BAD_FILES = [
    # (case, make the file at path, error regex)
    ("fifo", fifo, r"not a regular file \(a FIFO\)"),
    ("dev-zero", lambda p: os.symlink("/dev/zero", p), r"not a regular file \(a character device\)"),
    ("directory", lambda p: p.mkdir(), r"not a regular file \(a directory\)"),
    ("non-utf8", lambda p: p.write_bytes(b"# fine\n# \xff\xfe\n"), r":2: .*not UTF-8 text \(byte 0xff at column 3\)"
                                                                   r"|line 2: not UTF-8 text \(byte 0xff at column 3\)"),
    ("too-large", "sparse", "larger than the"),
    ("unreadable", "blocked", "Permission denied"),
]


READERS = {
    # reader name: (file name, read(path), error type, size limit)
    "results csv": (lambda t: csv_path(t), lambda p: results.read_csv(p), ResultsError, inputs.CSV_LIMIT),
    "workload file": (lambda t: t / "layers.txt", lambda p: load_workloads(str(p), SETS), WorkloadError, inputs.TEXT_LIMIT),
    "spec": (lambda t: t / "family.toml", lambda p: load_family(p), SpecError, inputs.TEXT_LIMIT),
    "kernel list": (lambda t: t / "kernels.txt", lambda p: globs_of(f"@{p}"), SpecError, inputs.TEXT_LIMIT),
}
FILE_CASES = [(reader, *case) for reader in READERS for case in BAD_FILES]


@pytest.mark.parametrize("reader, case, make, match", FILE_CASES, ids=[f"{r}-{c}" for r, c, *_ in FILE_CASES])
def test_only_regular_utf8_files_of_bounded_size_are_read(tmp_path, monkeypatch, deadline, reader, case, make, match):
    """T1 (non-UTF-8), T3 (a folder named like the file), T4 (unreadable), H (FIFO, /dev/zero),
    and the size limit, for every reader of user files."""
    name, read, error, limit = READERS[reader]
    path = name(tmp_path)
    if make == "sparse":
        sparse(path, limit + 1)
    elif make == "blocked":
        path.write_text(LAYER)
        monkeypatch.setattr(inputs, "os", blocked_os(open=True))
    else:
        make(path)
    message = refused(lambda: read(path), error, match)
    assert str(path) in message


def test_an_unreadable_results_folder_is_named_not_a_traceback(tmp_path, monkeypatch):
    """T4: os.stat of the CSV fails (its folder cannot be searched)."""
    path = csv_path(tmp_path)
    path.write_text(valid_csv_text())
    monkeypatch.setattr(inputs, "os", blocked_os(stat=True, open=True))
    assert inputs.file_kind(path) == "unreadable (Permission denied)"
    refused(lambda: reduce.load_set(tmp_path, PROBLEMS[:1]), ResultsError, f"{path.name}: cannot read: Permission denied")


# ---- workload files and set names -------------------------------------------------------

WORKLOAD_LINES = [
    ("W2 size over int", "conv2d_fprop n=1000000000000 h=8 w=8 c=8 k=8 r=1 s=1", "'n' must be at most 2147483647"),
    ("W2 input elements", "conv2d_fprop n=256 h=1024 w=1024 c=64 k=8 r=1 s=1",
     r"n\*h\*w\*c \(the input's elements\) = 17179869184 exceeds 2147483647"),
    ("W2 output elements", "conv2d_fprop n=64 h=1024 w=1024 c=8 k=64 r=1 s=1", r"n\*p\*q\*k \(the output's elements\)"),
    ("W2 filter elements", "conv2d_fprop n=1 h=8 w=8 c=65536 k=65536 r=1 s=1", r"k\*r\*s\*c \(the filter's elements\)"),
    ("W2 padded width", "conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1 pad_w=2000000000", r"w\+2\*pad_w = 4000000008 exceeds"),
    ("W2 gemm", "gemm m=65536 n=65536 k=8", r"m\*n \(D's elements\) = 4294967296 exceeds"),
    ("non-ASCII digits", "conv2d_fprop n=\u0662\u0665\u0666 h=8 w=8 c=8 k=8 r=1 s=1", "'n=\u0662\u0665\u0666' is not an integer"),
    ("digit separators", "conv2d_fprop n=1_0 h=8 w=8 c=8 k=8 r=1 s=1", "'n=1_0' is not an integer"),
    ("form feed", "conv2d_fprop n=1 h=8\x0c w=8 c=8 k=8 r=1 s=1", r"control character '\\x0c'"),
    ("line separator", "conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1\u2028gemm m=1 n=1 k=1", r"control character '\\u2028'"),
    ("carriage return inside", "conv2d_fprop n=1 h=8\rw=8 c=8 k=8 r=1 s=1", r"control character '\\r'"),
]


@pytest.mark.parametrize("line, match", [c[1:] for c in WORKLOAD_LINES], ids=[c[0] for c in WORKLOAD_LINES])
def test_workload_lines_are_bounded_and_ascii(line, match):
    message = refused(lambda: parse_workloads("# header\n" + LAYER + line + "\n", "layers.txt"), WorkloadError, match)
    assert message.startswith("layers.txt:3: ")


def test_crlf_workload_files_read_as_lf(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"\xef\xbb\xbf# a byte-order mark and CRLF line ends\r\n" + LAYER.replace("\n", "\r\n").encode())
    assert load_workloads(str(path), SETS)[2] == parse_workloads(LAYER)


SET_NAMES = [
    ("E2 dot-dot set", lambda t: ("..", t), ".."),
    ("E2 dot-dot file", lambda t: (str(t / "...txt"), t), ".."),
    ("dollar in name", lambda t: (str(t / "${HOME}.txt"), t), "${HOME}"),
    ("space in name", lambda t: ("a b", t), "a b"),
    ("hidden name", lambda t: (".hidden", t), ".hidden"),
    ("empty name", lambda t: ("", t), ""),
]


@pytest.mark.parametrize("given, name", [c[1:] for c in SET_NAMES], ids=[c[0] for c in SET_NAMES])
def test_a_set_name_is_a_plain_name(tmp_path, given, name):
    """E2: a set named ``..`` would read CSVs from the project's root and write above RESULTS."""
    spec, sets_dir = given(tmp_path)
    for stem in ("..", "${HOME}", "a b", ".hidden", ""):
        (tmp_path / f"{stem}.txt").write_text(LAYER)
    refused(lambda: load_workloads(spec, sets_dir), WorkloadError, re.escape(f"the set name {name!r} is not a plain name"))


# ---- kernel family specs ----------------------------------------------------------------

SPEC_TEXTS = [
    ("T7 kind a list", 'kind = [1]\n', r"key 'kind': unknown kind \[1\]"),
    ("T7 kind a table", 'kind = {a = 1}\n', r"key 'kind': unknown kind \{'a': 1\}"),
    ("T7 kind an integer", 'kind = 7\n', "key 'kind': unknown kind 7"),
    ("T8 3000 arrays deep", "kind = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ("T8 deep value of a key", 'kind = "conv2d_fprop_2x"\nelement = ' + "[" * 100 + "]" * 100 + "\n",
     r"key 'element': expected a string, got \[\[\[\[\.\.\.\]\]\]\]$"),
    ("huge string value", 'kind = "conv2d_fprop_2x"\nelement = "' + "x" * 100000 + '"\n', r"key 'element': 'xxx.*\.\.\..*' is not one of"),
]


@pytest.mark.parametrize("text, match", [c[1:] for c in SPEC_TEXTS], ids=[c[0] for c in SPEC_TEXTS])
def test_specs_of_the_wrong_shape_are_refused(tmp_path, text, match):
    path = tmp_path / "family.toml"
    path.write_text(text)
    message = refused(lambda: load_family(path), SpecError, match)
    # short whatever the value: the known kinds an unknown kind's message lists are the project's
    known = len(", ".join(FAMILIES)) if "unknown kind" in message else 0
    assert message.startswith(str(path)) and len(message) < 300 + known


# ---- results CSVs -----------------------------------------------------------------------

def replace_line(index, old, new):
    def corrupt(text):
        lines = text.split("\n")
        lines[index] = lines[index].replace(old, new, 1)
        return "\n".join(lines)
    return corrupt


CSV_CASES = [
    ("T1 non-UTF-8", lambda t: t.encode().replace(b"NVIDIA H200", b"NVIDIA H\xff00", 1), r"line 2: not UTF-8 text \(byte 0xff"),
    ("too few fields", replace_line(2, ",NVIDIA H200,", ","), rf"line 3: {len(results.COLUMNS) - 1} field\(s\), but the header has {len(results.COLUMNS)}"),
    ("too many fields", replace_line(1, ",NVIDIA H200,", ",NVIDIA H200,x,"), rf"line 2: {len(results.COLUMNS) + 1} field\(s\), but the header has {len(results.COLUMNS)}"),
    ("E1 newline in the gpu field", replace_line(3, ",NVIDIA H200,", ',"NVIDIA H200\n#include ""/etc/passwd""",'),
     r"line 4: control character '\\n' in the field 'NVIDIA H200\\n#include \"/etc/passwd\"'"),
    ("non-ASCII digits", replace_line(2, ",0.5,", ",\u0660.\u0665,"), "line 3: runtime_ms '\u0660.\u0665' is not a number"),
    ("padded number", replace_line(2, ",0.5,", ", 0.5,"), "line 3: runtime_ms ' 0.5' is not a number"),
    ("nan", replace_line(2, ",0.0004,", ",nan,"), "line 3: rel_max_error 'nan' is not a number"),
    ("unknown timing", lambda t: "\n".join(",".join([line.rsplit(",", 5)[0], "wallclock", *line.rsplit(",", 5)[2:]])
                                           if i == 1 else line for i, line in enumerate(t.split("\n"))),
     "line 2: timing 'wallclock' is not one of graph, launches, then -rest<ms> and -hold<ms>"),
    # the setting reaches a C++ string in the header: words of name=value only
    ("setting with a quote", lambda t: _with_setting(t, 2, 'raster=n"); system("sh'),
     r"line 3: setting 'raster=n\"\); system\(\"sh' is not name=value words"),
    ("setting of one word", lambda t: _with_setting(t, 1, "fastest"), "line 2: setting 'fastest' is not name=value words"),
    ("setting of upper case", lambda t: _with_setting(t, 1, "raster=N"), "line 2: setting 'raster=N' is not name=value words"),
]


def _with_setting(text, index, setting):
    """``text`` with line ``index``'s last field, its setting, replaced by ``setting`` (quoted for CSV)."""
    lines = text.split("\n")
    lines[index] = lines[index].rsplit(",", 1)[0] + ',"' + setting.replace('"', '""') + '"'
    return "\n".join(lines)


@pytest.mark.parametrize("corrupt, match", [c[1:] for c in CSV_CASES], ids=[c[0] for c in CSV_CASES])
def test_csv_rows_are_checked_naming_the_line(tmp_path, corrupt, match):
    path = csv_path(tmp_path)
    text = corrupt(valid_csv_text())
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    message = refused(lambda: results.read_csv(path), ResultsError, match)
    assert message.startswith(str(path))


def test_line_numbers_count_physical_lines_after_a_quoted_field_spanning_lines(tmp_path):
    """The record that starts after a two-line quoted field is reported on its own line."""
    path = csv_path(tmp_path)
    lines = valid_csv_text().split("\n")
    text = "\n".join(lines[:2]) + "\n" + lines[2].replace(",,", ',"two\nlines",', 1) + "\n" + lines[3].replace(",ok,", ",great,") + "\n"
    path.write_text(text)
    refused(lambda: results.read_csv(path), ResultsError, r"line 3: control character '\\n'")
    path.write_text(text.replace('"two\nlines"', '"two, quoted"'))
    refused(lambda: results.read_csv(path), ResultsError, "line 4: status 'great'")


def test_a_csv_of_only_its_header_is_refused_by_the_reducer(tmp_path):
    """T2: the profile driver reads it as empty; the reducer says what is wrong."""
    path = csv_path(tmp_path)
    path.write_text(valid_csv_text().split("\n", 1)[0] + "\n")
    assert results.read_csv(path).empty
    refused(lambda: reduce.load_set(tmp_path, PROBLEMS[:1]), ResultsError, f"{path.name}: holds no rows, only a header")


TOLERANCE = {name: 1e-3 for name in HASHES}
VERIFICATION = [
    # W1: an ok row with a tiny runtime is chosen only if its recorded verification passed.
    ("error over the tolerance", {"rel_l2_error": 0.9}, SM80_B),
    ("element error over the tolerance", {"rel_max_error": 2e-3}, SM80_B),
    ("no recorded error", {"rel_l2_error": None}, SM80_B),
    ("no recorded element error", {"rel_max_error": None}, SM80_B),
    ("within the tolerance", {"rel_l2_error": 9e-4, "rel_max_error": 1e-3}, SM90),
]


@pytest.mark.parametrize("errors, chosen", [c[1:] for c in VERIFICATION], ids=[c[0] for c in VERIFICATION])
def test_only_verified_ok_rows_are_chosen(tmp_path, errors, chosen):
    rows = [row(PROBLEMS[0].name, SM80, runtime=0.5), row(PROBLEMS[0].name, SM80_B, runtime=0.4),
            row(PROBLEMS[0].name, SM90, runtime=0.001, **errors)]
    results.write_csv(csv_path(tmp_path), rows)
    frame = reduce.load_set(tmp_path, PROBLEMS[:1])
    assert list(reduce.select_best(frame, PROBLEMS[:1], HASHES, TOLERANCE)["kernel"]) == [chosen]
    assert list(reduce.select_best(frame, PROBLEMS[:1], HASHES)["kernel"]) == [chosen], "strictest by default"


def test_a_workload_whose_ok_rows_are_all_unverified_is_an_error(tmp_path):
    rows = [row(PROBLEMS[0].name, k, runtime=0.1, rel_l2_error=None) for k in HASHES]
    results.write_csv(csv_path(tmp_path), rows)
    refused(lambda: reduce.select_best(reduce.load_set(tmp_path, PROBLEMS[:1]), PROBLEMS[:1], HASHES, TOLERANCE),
            ResultsError, r"no kernel that ran correctly on the current code \(3 ok but unverified \(errors missing or over the tolerance\)\)")


def test_the_header_build_holds_each_kernel_to_its_own_tolerance(tmp_path):
    """build_header passes the tolerance of each kernel's accumulator: 1e-3 for these f32 ones."""
    for problem in PROBLEMS:
        results.write_csv(tmp_path / f"{problem.name}.csv", [
            row(problem.name, SM80, runtime=0.5), row(problem.name, SM80_B, runtime=0.4),
            row(problem.name, SM90, runtime=0.1, rel_l2_error=1.5e-3)])
    best = reduce.build_header(tmp_path, PROBLEMS, HASHES, CATALOG, TEMPLATES, tmp_path / "out")
    assert list(best["kernel"]) == [SM80_B, SM80_B]


def test_the_committed_choices_are_those_of_the_fastest_ok_row():
    """The verification re-check changes no choice made from the committed CSVs: each layer's
    choice is its fastest ok row of a kernel the catalog still holds (a set's CSVs keep the rows of
    kernels taken out since)."""
    assert COMMITTED
    catalogs = {}  # a catalog with its fused variants, by the epilogues of a set (several sets share them)
    for stem, gpu in COMMITTED:
        folder = ROOT / "profile_results" / stem / gpu
        problems = load_workloads(stem, SETS)[2]
        frame = reduce.load_set(folder, problems)
        hashes = dict(frame.drop_duplicates("kernel")[["kernel", "kernel_hash"]].itertuples(index=False))
        wanted = tuple(fusion.epilogues(problems))
        if wanted not in catalogs:  # every kernel a build of the set may hold: the listed families', the
            # generated space's and, a fused set's, their fused variants (the catalog the build makes)
            catalogs[wanted] = {k.name: k for k in commands.kernel_catalog(
                ROOT / "kernel_specs" / "families", ROOT / "kernel_specs" / "spaces", problems)}
        kernels = catalogs[wanted]
        tolerances = {name: verify_tolerance(kernels[name]) for name in hashes if name in kernels}
        present = {k: h for k, h in hashes.items() if k in tolerances}
        ok = frame[(frame["status"] == "ok") & frame["kernel"].isin(present)]
        ok = ok.sort_values(["runtime_ms", "kernel"], kind="mergesort")
        first = {}  # each workload's first row in that order
        for workload, kernel in zip(ok["workload"].tolist(), ok["kernel"].tolist()):
            first.setdefault(workload, kernel)
        fastest = [first[p.name] for p in problems]
        assert list(reduce.select_best(frame, problems, present, tolerances)["kernel"]) == fastest


# ---- what reaches C++ ---------------------------------------------------------------------

HOSTILE_TEXT = ['x\n#include "/etc/passwd"\n', "x\\", "x\r\nstatic_assert(false);", "x\u2028y", "x\x00y"]


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=["newline include", "trailing backslash", "crlf", "u2028", "nul"])
def test_text_from_a_path_or_a_csv_reaches_the_header_only_escaped_in_a_comment(tmp_path, text):
    """E1: the RESULTS path and the provenance fields are printed in the header's comments."""
    folder = tmp_path / text.replace("\x00", "0").replace("/", "_")
    folder.mkdir()
    for problem in PROBLEMS:
        results.write_csv(folder / f"{problem.name}.csv", [row(problem.name, k, runtime=0.1) for k in HASHES])
    frame = reduce.load_set(folder, PROBLEMS)
    best = reduce.select_best(frame, PROBLEMS, HASHES)
    best["gpu"] = text  # as if a CSV had held it (read_csv refuses control characters first)
    files = reduce.header_files(reduce.render.lookup(TEMPLATES), best, PROBLEMS, CATALOG, str(folder), set_name="s")
    assert sum(any("GPU " in line for line in header.splitlines()) for header in files.values()) >= 3
    for name, header in files.items():
        mark = "#" if name.endswith(".cmake") else "//"
        comments = [line for line in header.split("\n") if "GPU " in line or "Generated by kernelgen" in line]
        assert comments and all(line.startswith(mark) for line in comments), name
        gpu = [line for line in comments if "GPU " in line]
        assert all("\\x" in line or "\\u" in line for line in gpu), name
        for line in header.splitlines():
            assert not line.lstrip().startswith(("#include \"/etc", "#include \"_etc", "static_assert(false")), line
            assert not (line.startswith("//") and line.endswith("\\")), "no comment continues onto the next line"
    assert "\u2028" not in header and "\x00" not in header and "\r" not in header


# ---- command-line variables ---------------------------------------------------------------

def env_with(**values):
    v = variables({})
    env = {o.key: o.default for o in v.options}
    env.update(values)
    return env


def build_cases(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "b1" / "sets" / "resnet50" / "best_kernels.h").mkdir(parents=True)
    (tmp_path / "b2").mkdir()
    (tmp_path / "b2" / "obj").write_text("")
    (tmp_path / "b3" / "profiler").mkdir(parents=True)


VARIABLES = [
    ("D1 BUILD is RESULTS", {"BUILD": "profile_results"}, r"BUILD=profile_results holds RESULTS"),
    ("D1 BUILD holds RESULTS", {"BUILD": "{tmp}", "RESULTS": "{tmp}/results"}, r"BUILD=.* holds RESULTS"),
    ("BUILD inside RESULTS", {"BUILD": "profile_results/generated"}, r"is inside RESULTS"),
    ("BUILD holds SPECS", {"BUILD": "{tmp}", "SPECS": "{tmp}/specs"}, r"BUILD=.* holds SPECS"),
    ("BUILD is SPECS", {"BUILD": "kernel_specs/families"}, r"BUILD=kernel_specs/families holds SPECS"),
    ("BUILD holds the specs", {"BUILD": "kernel_specs"}, r"BUILD=kernel_specs holds SPECS"),
    ("BUILD is the profiler sources", {"BUILD": "profiler"}, r"BUILD=profiler holds profiler"),
    ("BUILD inside site_scons", {"BUILD": "site_scons/gen"}, r"BUILD=site_scons/gen is inside site_scons"),
    ("dollar in NVCC", {"NVCC": "/opt/${HOME}/nvcc"}, r"NVCC='/opt/\$\{HOME\}/nvcc': a '\$' in the compiler's path"),
    ("D2 BUILD is the parent", {"BUILD": ".."}, r"BUILD=\.\. is the project or a folder above it"),
    ("D2 BUILD is the root", {"BUILD": "/"}, r"BUILD=/ is the project or a folder above it"),
    ("T3 BUILD is the project", {"BUILD": "."}, r"BUILD=\. is the project"),
    ("T3 BUILD is a file", {"BUILD": "{tmp}/file"}, r"BUILD=.*/file is a file, not a folder"),
    ("T3 best_kernels.h is a folder", {"BUILD": "{tmp}/b1"}, r"b1/sets/resnet50/best_kernels.h is a directory; the build writes a file"),
    ("obj is a file", {"BUILD": "{tmp}/b2"}, r"b2/obj is a file; the build writes a folder"),
    ("the profiler is a folder", {"BUILD": "{tmp}/b3"}, r"b3/profiler is a directory"),
    ("BUILD empty", {"BUILD": ""}, r"BUILD= is empty"),
    ("T5 NVCCFLAGS quote", {"NVCCFLAGS": "-O3 '-DX=1"}, r"NVCCFLAGS=\"-O3 '-DX=1\": No closing quotation"),
    ("T5 PROFILE_ARGS quote", {"PROFILE_ARGS": '--repeats "3'}, r"PROFILE_ARGS='--repeats \"3': No closing quotation"),
    ("T6 timeout negative", {"PROFILE_TIMEOUT": "-1"}, r"PROFILE_TIMEOUT='-1': expected a number of seconds"),
    ("T6 timeout inf", {"PROFILE_TIMEOUT": "inf"}, r"PROFILE_TIMEOUT='inf': expected"),
    ("T6 timeout nan", {"PROFILE_TIMEOUT": "nan"}, r"PROFILE_TIMEOUT='nan': expected"),
    ("T6 timeout zero", {"PROFILE_TIMEOUT": "0"}, r"PROFILE_TIMEOUT='0': expected"),
    ("T6 timeout huge", {"PROFILE_TIMEOUT": "1e400"}, r"PROFILE_TIMEOUT='1e400': expected"),
    ("T6 timeout non-ASCII", {"PROFILE_TIMEOUT": "\u0663\u0660"}, r"PROFILE_TIMEOUT='\u0663\u0660': expected"),
    ("E1 newline in RESULTS", {"RESULTS": 'x\n#include "/etc/passwd"'}, r"RESULTS='x\\n#include \"/etc/passwd\"': holds the control"),
    ("newline in BUILD", {"BUILD": "a\rb"}, r"BUILD='a\\rb': holds the control character"),
    ("escape sequence in WORKLOADS", {"WORKLOADS": "\x1b[2J"}, r"WORKLOADS='\\x1b\[2J': holds the control"),
    ("non-ASCII ARCH", {"ARCH": "\u0669\u0660a"}, r"ARCH='\u0669\u0660a': expected a compute capability"),
    ("E2 set name", {"WORKLOADS": ".."}, r"the set name '\.\.' is not a plain name"),
    ("OLD_ROWS unknown", {"OLD_ROWS": "keep"}, r"OLD_ROWS='keep': expected 'aside' \(rows of another GPU stack"),
    ("ACCUMULATE unknown", {"ACCUMULATE": "f64"}, r"ACCUMULATE='f64': expected comma-separated accumulators of bf16, f16, f32"),
    ("ACCUMULATE a list with an empty", {"ACCUMULATE": "f32,"}, r"ACCUMULATE='f32,': expected comma-separated"),
    ("a list of sets", {"WORKLOADS": "resnet50,vgg16_b1"}, r"resnet50,vgg16_b1: no such set or workload file: WORKLOADS= takes one set or file a call, not a list"),
    ("a list of files", {"WORKLOADS": "{tmp}/a.txt,{tmp}/b.txt"}, r"b\.txt: no such set or workload file: .* not a list"),
]


@pytest.mark.parametrize("values, match", [c[1:] for c in VARIABLES], ids=[c[0] for c in VARIABLES])
def test_variables_are_checked_before_anything_is_built(tmp_path, values, match):
    build_cases(tmp_path)
    env = env_with(**{k: v.replace("{tmp}", str(tmp_path)) for k, v in values.items()})
    refused(lambda: resolve(env), KernelgenError, match)


def fake_cutlass(tmp_path, version_h):
    root = tmp_path / "cutlass"
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("")
    if version_h is not None:
        (root / "include" / "cutlass" / "version.h").write_bytes(version_h)
    return str(root)


@pytest.mark.parametrize("version_h, match", [
    (None, r"version.h: cannot read CUTLASS's version: No such file"),
    (b"#define CUTLASS_MAJOR 4\n", "no CUTLASS_MAJOR, CUTLASS_MINOR and CUTLASS_PATCH defines"),
    (b"#define CUTLASS_MAJOR \xff\n", r"cannot read CUTLASS's version: line 1: not UTF-8"),
], ids=["missing", "incomplete", "non-utf8"])
def test_a_cutlass_without_a_readable_version_is_named(tmp_path, version_h, match):
    refused(lambda: resolve(env_with(CUTLASS=fake_cutlass(tmp_path, version_h))), KernelgenError, match)


def test_a_build_folder_of_its_own_is_accepted(tmp_path):
    config = resolve(env_with(BUILD=str(tmp_path / "b")))
    assert config.build_path == tmp_path / "b" and config.build_dir == str(tmp_path / "b")


KERNELS = [
    ("only commas", ",,,", r"KERNELS=',,,': names no kernel glob"),
    ("empty", "", r"KERNELS='': names no kernel glob"),
    ("spaces", " , ", r"KERNELS=' , ': names no kernel glob"),
    ("/dev/null", "@/dev/null", r"/dev/null: cannot read the kernel list: not a regular file \(a character device\)"),
    ("an empty list", "@{tmp}/empty.txt", r"empty.txt: the kernel list names no kernel"),
    ("a list of comments", "@{tmp}/comments.txt", r"comments.txt: the kernel list names no kernel"),
]


@pytest.mark.parametrize("patterns, match", [c[1:] for c in KERNELS], ids=[c[0] for c in KERNELS])
def test_an_empty_kernel_selection_is_an_error_not_every_kernel(tmp_path, patterns, match):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "comments.txt").write_text("# nothing yet\n\n")
    refused(lambda: globs_of(patterns.replace("{tmp}", str(tmp_path))), SpecError, match)


def test_scons_values_are_escaped_so_scons_never_substitutes_them():
    assert scons_text('/a/${__import__("os").getcwd()}/b') == '/a/$${__import__("os").getcwd()}/b'
    from SCons.Environment import Environment
    env = Environment(tools=[])
    hostile = '${__import__("os").getcwd()}/$x'
    assert env.subst(scons_text(hostile)) == hostile


# ---- the profile driver (fake profiler) -------------------------------------------------------

KERNEL_HASHES = {"kernel_a": "aaaa", "kernel_b": "bbbb", "kernel_c": "cccc"}


def profile_run(tmp_path, workload_file, kernels=KERNEL_HASHES, log=None):
    """One run of the profile driver with the fake profiler (the fake_gpu fixture puts it on PATH)."""
    manifest = write_manifest(tmp_path / "kernels.json", kernels)
    logs = []
    profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results", timeout=20.0,
            log=log or logs.append)
    return logs


def results_of(tmp_path, workload_file):
    folder = tmp_path / "results" / workload_file.stem / "nvidia_h200"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv"))}


def test_d3_a_selection_after_a_driver_change_is_refused_before_anything_is_lost(tmp_path, fake_gpu, workload_file,
                                                                                  monkeypatch):
    _, log = fake_gpu
    profile_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    message = refused(lambda: profile_run(tmp_path, workload_file, kernels={"kernel_a": "aaaa"}), KernelgenError,
                      r"3 row\(s\) were measured with GPU NVIDIA H200, driver 580\.159\.04, CUDA 13\.0, CUTLASS "
                      r"4\.2\.0, timed by graph, and 2 of their kernels are not in this build \(e\.g\. kernel_b\) \(1 more CSV\(s\) alike\)")
    assert "Nothing was profiled" in message and "without KERNELS=" in message and "move the file aside" in message
    assert "or profile with OLD_ROWS=aside (they move to " in message
    listed = tmp_path / f"remeasure-{workload_file.stem}.txt"  # beside the manifest, in BUILD
    assert f"3 kernels: scons profile TOP=all KERNELS=@{listed}" in message
    assert listed.read_text() == "kernel_a\nkernel_b\nkernel_c\n", "every kernel of the rows it would lose"
    from kernelgen import outputs
    assert listed.name in outputs.read_record(tmp_path), "in the build's record: scons -c removes it"
    assert results_of(tmp_path, workload_file) == before, "every row is still there"
    assert len(invocations(log)) == 1, "no profiler run"
    profile_run(tmp_path, workload_file)  # every kernel: each old row gets its replacement
    for text in results_of(tmp_path, workload_file).values():
        assert text.count(b",590.10,") == 3 and b",580.159.04," not in text


def test_d3_old_rows_aside_moves_the_rows_a_selection_would_lose_and_profiles(tmp_path, fake_gpu, workload_file,
                                                                               monkeypatch):
    """OLD_ROWS=aside: rows of another stack of kernels the build would not measure again move to
    the GPU folder's aside/ (joined to the rows there, none twice: a run stopped between its two
    writes leaves them in both files), the CSVs keep this stack's rows and gain the build's."""
    profile_run(tmp_path, workload_file)
    folder = tmp_path / "results" / workload_file.stem / "nvidia_h200"
    old = {p.name: results.read_rows(p) for p in sorted(folder.glob("*.csv"))}
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    manifest = write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"})
    logs = []

    def run():
        profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results", timeout=20.0,
                log=logs.append, old_rows="aside")
    run()
    assert sum("row(s) measured with GPU NVIDIA H200, driver 580.159.04" in m and "(OLD_ROWS=aside)" in m
               for m in logs) == len(old)

    def keys(rows):
        return sorted(tuple(repr(r[c]) for c in results.COLUMNS) for r in rows)
    aside = {p.name: results.read_rows(p) for p in sorted((folder / "aside").glob("*.csv"))}
    assert {name: keys(rows) for name, rows in aside.items()} == {name: keys(rows) for name, rows in old.items()}
    for path in folder.glob("*.csv"):
        assert [(r["kernel"], r["driver"]) for r in results.read_rows(path)] == [("kernel_a", "590.10")]
    name = sorted(old)[0]  # stopped after the first write: the old rows in both files
    shutil.copy(folder / "aside" / name, folder / name)
    run()
    assert keys(results.read_rows(folder / "aside" / name)) == keys(old[name]), "none twice"
    assert [(r["kernel"], r["driver"]) for r in results.read_rows(folder / name)] == [("kernel_a", "590.10")]


def test_d3_old_rows_that_cannot_be_set_aside_stay_where_they_are(tmp_path, fake_gpu, workload_file, monkeypatch):
    profile_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)
    folder = tmp_path / "results" / workload_file.stem / "nvidia_h200"
    (folder / "aside").write_text("a file where the folder goes\n")
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    manifest = write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"})
    refused(lambda: profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results",
                            timeout=20.0, log=lambda m: None, old_rows="aside"), KernelgenError,
            r"aside/conv2d_fprop_\S+\.csv: cannot write \(.+\); \S+\.csv is as it was$")
    assert results_of(tmp_path, workload_file) == before


def test_d3_rows_of_kernels_no_build_can_hold_are_named_and_their_files_are_to_be_moved_aside(tmp_path, fake_gpu,
                                                                                             workload_file, monkeypatch):
    """A refused plan whose old rows are of kernels the checkout no longer has (a family's kernel
    dropped, renamed): measuring every kernel of those rows cannot be done, so the refusal names
    them and the files to move aside instead, and loses nothing."""
    profile_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    manifest = write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"})
    asked = []

    def catalog(problems):
        asked.append(len(problems))
        return {"kernel_a", "kernel_c"}  # kernel_b is gone
    message = refused(lambda: profile(manifest, FAKES / "profiler", str(workload_file), tmp_path, tmp_path / "results",
                                      timeout=20.0, log=lambda m: None, catalog=catalog), KernelgenError,
                      r"1 of those kernels are no kernel of this checkout \(e\.g\. kernel_b\), so no build can "
                      r"measure them again: move aside the 2 CSV\(s\) that hold them \(e\.g\. ")
    assert "KERNELS=@" not in message and asked == [2], "the catalog asked once, for the set's problems"
    assert not (tmp_path / f"remeasure-{workload_file.stem}.txt").exists()
    assert results_of(tmp_path, workload_file) == before, "every row is still there"


def test_the_profile_command_tells_the_driver_where_the_catalog_is(tmp_path):
    from kernelgen import commands
    config = types.SimpleNamespace(profile_timeout=30.0, specs_dir=tmp_path / "specs", spaces_dir=tmp_path / "spaces",
                             shard=None, gpus=None, profile_args=[], build_path=tmp_path / "build",
                             results_root=tmp_path / "results", old_rows="")
    argv = commands.profile_command(config)
    assert argv[argv.index("--specs") + 1] == str(tmp_path / "specs")
    assert argv[argv.index("--spaces") + 1] == str(tmp_path / "spaces")
    assert "--old-rows" not in argv
    config.old_rows = "aside"
    argv = commands.profile_command(config)
    assert argv[argv.index("--old-rows") + 1] == "aside"


def interrupt_after(records: int):
    """A log that interrupts the run (as Ctrl-C would) after ``records`` measured pairs."""
    seen = []

    def log(line):
        if line.lstrip().startswith("["):
            seen.append(line)
            if len(seen) == records:
                raise KeyboardInterrupt
    return log


def test_an_interrupted_run_keeps_rows_of_another_stack_until_replaced(tmp_path, fake_gpu, workload_file, monkeypatch):
    profile_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    with pytest.raises(KeyboardInterrupt):
        profile_run(tmp_path, workload_file, log=interrupt_after(2))
    assert results_of(tmp_path, workload_file) == before, "a half-measured file of another stack stays as it was"


def test_an_interrupted_run_keeps_rows_of_changed_code_until_measured_again(tmp_path, fake_gpu, workload_file):
    profile_run(tmp_path, workload_file)
    changed = {**KERNEL_HASHES, "kernel_b": "b222", "kernel_c": "c222"}
    with pytest.raises(KeyboardInterrupt):
        profile_run(tmp_path, workload_file, kernels=changed, log=interrupt_after(1))
    first = parse_workloads(workload_file.read_text())[0]
    frame = results.read_csv(tmp_path / "results" / workload_file.stem / "nvidia_h200" / f"{first.name}.csv")
    frame = frame.set_index("kernel")
    assert list(frame.index) == ["kernel_a", "kernel_b", "kernel_c"], "nothing measured is lost"
    assert list(frame["kernel_hash"]) == ["aaaa", "b222", "cccc"], "kernel_c's old row waits for its replacement"


def test_t9_a_full_disk_while_writing_a_csv_is_one_line_and_the_csv_stays(tmp_path, fake_gpu, workload_file,
                                                                          monkeypatch):
    profile_run(tmp_path, workload_file)
    before = results_of(tmp_path, workload_file)

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(results, "write_generated", full)
    message = refused(lambda: profile_run(tmp_path, workload_file, kernels={**KERNEL_HASHES, "kernel_b": "b222"}),
                      KernelgenError, r"\.csv: cannot write \(No space left on device\); the file is as it was before")
    assert str(tmp_path / "results") in message
    assert results_of(tmp_path, workload_file) == before


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "\u0663"])
def test_t6_the_profile_driver_refuses_a_timeout_that_never_or_always_expires(value, capsys):
    with pytest.raises(SystemExit) as info:
        profile_main(["--manifest", "m", "--profiler", "p", "--workloads", "w", "--sets-dir", ".", "--results", "r",
                      "--timeout", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--timeout={value!r}: expected a number of seconds" in err and "Traceback" not in err


def _profilers(pid: int) -> list:
    """The children of ``pid`` running the profiler's jobs (not its `--device` query)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return [c for c in found if b"--jobs" in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc (Linux)")
def test_a_sigkill_of_the_profile_driver_takes_the_profiler_with_it(tmp_path, fake_gpu, workload_file):
    profiler, _ = fake_gpu
    manifest = write_manifest(tmp_path / "kernels.json", KERNEL_HASHES)
    first = parse_workloads(workload_file.read_text())[0]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "site_scons"),
               FAKE_BEHAVIOUR=json.dumps({f"{first.name}/kernel_b": "hang"}))
    driver = subprocess.Popen([sys.executable, "-m", "kernelgen.profile", "--manifest", str(manifest), "--profiler",
                               str(profiler), "--workloads", str(workload_file), "--sets-dir", str(tmp_path),
                               "--results", str(tmp_path / "results")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    children = []
    try:
        deadline = time.monotonic() + 15
        while not children and time.monotonic() < deadline:
            children = _profilers(driver.pid)
            time.sleep(0.05)
        assert children, "the driver started a profiler"
        time.sleep(0.5)  # inside the hanging kernel
        driver.send_signal(signal.SIGKILL)
        driver.communicate(timeout=10)
        deadline = time.monotonic() + 10
        while any(map(_alive, children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, children)), "no profiler left running"
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# ---- scons itself, on a copy of the project (few, fast) -----------------------------------------

PYTHON_RAN = "PYTHON_RAN"
INJECT = '${__import__("pathlib").Path("' + PYTHON_RAN + '").touch()}'


@pytest.fixture
def project(tmp_path):
    """A copy of the project (two-kernel specs) with a measured CSV, and a file beside it."""
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project")
    csv = project / "profile_results" / "resnet50" / "measured.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("measured\n")
    (tmp_path / "neighbour.txt").write_text("outside the project\n")
    return project


def no_traceback(out):
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return out


SCONS_REFUSALS = [
    ("D1 build into RESULTS", ["best_kernels.h", "BUILD=profile_results"], "BUILD=profile_results holds RESULTS"),
    ("D1 clean RESULTS", ["-c", "BUILD=profile_results"], "BUILD=profile_results holds RESULTS"),
    ("D2 clean the parent", ["-c", "BUILD=.."], r"BUILD=.. is the project or a folder above it"),
    ("T3 clean the project", ["-c", "BUILD=."], r"BUILD=. is the project or a folder above it"),
    ("T5 flags", ["profiler", "NVCCFLAGS=-O3 '"], "NVCCFLAGS=\"-O3 '\": No closing quotation"),
    ("T6 timeout", ["profiler", "PROFILE_TIMEOUT=nan"], "PROFILE_TIMEOUT='nan': expected a number of seconds"),
]


@pytest.mark.parametrize("args, message", [c[1:] for c in SCONS_REFUSALS], ids=[c[0] for c in SCONS_REFUSALS])
def test_scons_refuses_before_building_or_cleaning(project, args, message):
    out = no_traceback(scons(project, *args, check=False))
    assert out.returncode == 2 and f"scons: {message}" in out.stderr
    assert (project / "profile_results" / "resnet50" / "measured.csv").read_text() == "measured\n"
    assert (project.parent / "neighbour.txt").exists() and (project / "SConstruct").exists()
    assert not (project / "profile_results" / "kernels").exists()


def test_e3_user_paths_never_go_through_scons_substitution(project, tmp_path):
    """A BUILD, RESULTS, workload file, NVCC or flag holding ${...} would run Python in SCons."""
    hostile = tmp_path / INJECT
    hostile.mkdir()
    (hostile / "set.txt").write_text(LAYER)
    (hostile / "cutlass").symlink_to(default_cutlass_root())
    fake_gpu_path = f"{FAKES}{os.pathsep}{os.environ['PATH']}"
    for args, path in (
            (["best_kernels.h", f"BUILD={INJECT}"], None),
            (["best_kernels.h", f"RESULTS={INJECT}"], None),
            (["best_kernels.h", f"WORKLOADS={hostile / 'set.txt'}"], None),
            (["--help", f"NVCC={INJECT}", f"BUILD={INJECT}"], None),
            (["-n", "profile", f"WORKLOADS={hostile / 'set.txt'}", f"RESULTS={INJECT}", f"CUTLASS={hostile}/cutlass",
              f"NVCCFLAGS=-O3 -DX={INJECT}", f"PROFILE_ARGS=--note {INJECT}", f"BUILD={hostile}/build"], fake_gpu_path)):
        out = no_traceback(scons(project, *args, check=False, path=path))
        ran = list(project.rglob(PYTHON_RAN)) + list(tmp_path.rglob(PYTHON_RAN))
        assert not ran, (args, out.stdout, out.stderr)
    assert INJECT in out.stdout, "the dry run shows the paths as they are"
    assert (project / INJECT).is_dir(), "BUILD is the folder named so, literally"


def test_t3_a_folder_named_like_a_csv_is_named_not_a_traceback(project):
    problem = load_workloads("resnet50", SETS)[2][0]
    (project / "res" / "resnet50" / "nvidia_h200" / f"{problem.name}.csv").mkdir(parents=True)
    (project / "res" / "resnet50" / "nvidia_h200" / "other.csv").write_text("workload\n")
    out = no_traceback(scons(project, "best_kernels.h", "RESULTS=res", check=False))
    assert out.returncode != 0
    assert f"res/resnet50/nvidia_h200/{problem.name}.csv: cannot read: not a regular file (a directory)" in out.stderr


def test_clean_removes_only_what_the_build_made(project, tmp_path):
    """`scons -c` removes the files a build wrote, those of kernels no longer selected too, and no
    file the build did not write, however it is named."""
    build = tmp_path / "build"
    kernels = ["cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_32x3_nhwc_align8",
               "cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_64x3_nhwc_align8"]
    made = [build / "kernels.json", build / "manifest.cu", build / "workloads.json",
            *(build / "kernels" / f"{k}.cu" for k in kernels)]
    no_traceback(scons(project, f"BUILD={build}", *map(str, made)))  # generated sources: no nvcc needed
    kept = [build / "kernels" / "cutlass_old_kernel.cu", build / "obj" / "cutlass_old_kernel.o",
            build / "obj" / "driver" / "main.o", build / "sets" / "resnet50" / "best_kernels.h", build / "profiler",
            build / "sets" / "resnet50" / ".best_kernels.h.x1y2.tmp", build / "sets" / "mine" / "libbest_kernels.a", build / "notes.txt", build / "kernels" / "README",
            build / "obj" / "mine.obj", build / "keep" / "a.o", build / "kernels" / "my file.cu"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    out = no_traceback(scons(project, "-c", f"BUILD={build}", f"KERNELS={kernels[0]}", "profiler", "best_kernels.h",
                             check=False))
    assert out.returncode == 0, out.stderr
    assert [p for p in made if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


# ---- CI: every committed set builds its header on a clean clone ----------------------------------

@pytest.fixture(scope="module")
def clean_clone(tmp_path_factory):
    """The files of this checkout that git keeps (tracked, or new and not ignored), as a clone of it
    holds them: no generated/, no .sconsign, no .venv."""
    dest = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode != 0:
        pytest.skip("needs git to list the tracked files")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def committed_headers(clean_clone, tmp_path_factory):
    """`scons best_kernels.h` of every committed set on the clean clone, as many at once as this
    machine has cores (each in a BUILD of its own, each a scons process of its own forked from one
    that imported SCons and kernelgen once: tests/scons_runs.py): (set, gpu) -> (the run, its BUILD)."""
    folders = [tmp_path_factory.mktemp(f"header-{set_name}") for set_name, _ in COMMITTED]
    runs = run_all(clean_clone, [["best_kernels.h", f"WORKLOADS={set_name}", f"GPU={gpu}", f"BUILD={folder}"]
                                 for (set_name, gpu), folder in zip(COMMITTED, folders)], timeout=1200)
    return dict(zip(COMMITTED, zip(runs, folders)))


@pytest.mark.parametrize("set_name, gpu", COMMITTED)
def test_every_committed_set_builds_its_header_on_a_clean_clone(committed_headers, set_name, gpu):
    out, folder = committed_headers[(set_name, gpu)]
    no_traceback(out)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "#pragma once" in (folder / "sets" / set_name / "best_kernels.h").read_text()


def report_choice(*args) -> list:
    """The kernels `python -m kernelgen.report *args` lists, a layer each in the set's order."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report.main(list(args)) == 0
    return re.findall(r"^\| \d+ \| [^|]+ \| `([^`]+)`", out.getvalue(), re.MULTILINE)


@pytest.mark.parametrize("set_name, gpu", COMMITTED)
def test_the_report_chooses_what_the_clean_clones_header_holds(committed_headers, set_name, gpu):
    """One selection policy: the report's kernel for each layer is the one the header the clean
    clone built holds (resnet50_bf16 among the sets: its kernels held to bf16's tolerance, not the
    strictest)."""
    out, folder = committed_headers[(set_name, gpu)]
    assert out.returncode == 0, out.stdout + out.stderr
    header = (folder / "sets" / set_name / "best_kernels.h").read_text()
    held = dict(re.findall(r'^ +\{"(\w+)",\s+\{[^\n]*?\},\s+"(\w+)",\s+"[^"]*",\s+[-+.e\d]+, ', header, re.MULTILINE))
    layers = [p.name for p in parse_workloads((SETS / f"{set_name}.txt").read_text())]
    assert report_choice(set_name, "--gpu", gpu) == [held.get(name) for name in layers]
