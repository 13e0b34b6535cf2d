"""SCons on hostile input, on a copy of the project with a fake nvcc (it logs each argv and writes
what -o names; the profiler it links runs tests/fakes/profiler): `scons -c` removes only files the
build recorded writing, no value reaches a shell, one scons run at a time uses a BUILD, and a bad
variable is refused in one short line naming it."""

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

import scons_runs
from conftest import FAKES, ROOT
from kernelgen import commands, outputs, units
from kernelgen.config import resolve
from kernelgen.errors import KernelgenError
from kernelgen.variables import default_cutlass_root
from kernelgen.workloads import parse_workloads
from test_hostile_input import env_with, no_traceback, refused
from test_scons_build import copy_project

sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))
import noshell  # noqa: E402

KERNELS = ["cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_32x3_nhwc_align8",
           "cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_64x3_nhwc_align8"]
LAYERS = ["conv2d_fprop n=1 h=8 w=8 c=8 k=8 r=1 s=1", "conv2d_fprop n=1 h=8 w=8 c=16 k=8 r=1 s=1"]
FAKE_PATH = f"{FAKES}{os.pathsep}{os.environ['PATH']}"  # nvidia-smi finds a fake H200

# What the fakes log an argv as: a line of JSON that json.loads reads back as the argv, written
# without importing json (the fakes run hundreds of times a session; -S and no json, shutil or
# time to import start one in about half the time).
JSON_ARGV = '''
def json_argv(words):
    """json.dumps(words), each character outside printable ASCII escaped."""
    quoted = []
    for word in words:
        if word.isascii() and word.isprintable() and '"' not in word and "\\\\" not in word:
            quoted.append('"' + word + '"')
            continue
        text = []
        for c in word:
            code = ord(c)
            if c in '"\\\\':
                text.append("\\\\" + c)
            elif 0x20 <= code < 0x7f:
                text.append(c)
            elif code > 0xffff:
                code -= 0x10000
                text.append("\\\\u%04x\\\\u%04x" % (0xd800 | code >> 10, 0xdc00 | code & 0x3ff))
            else:
                text.append("\\\\u%04x" % code)
        quoted.append('"' + "".join(text) + '"')
    return "[" + ", ".join(quoted) + "]"
'''
FAKE_NVCC = '''#!{python} -S
"""nvcc for tests: logs its argv; writes an object, or links the profiler (a copy of the wrapper)."""
import os, sys
''' + JSON_ARGV.replace("{", "{{").replace("}", "}}") + '''
with open({log!r}, "a") as f:
    f.write(json_argv(sys.argv) + "\\n")
if "--version" in sys.argv:
    print("Cuda compilation tools, release 13.0, V13.0.88 (fake)")
    sys.exit(0)
out = sys.argv[sys.argv.index("-o") + 1]
if "-c" not in sys.argv:
    with open({wrapper!r}, "rb") as source, open(out, "wb") as target:  # shutil.copy: the text and the mode
        target.write(source.read())
    os.chmod(out, os.stat({wrapper!r}).st_mode & 0o7777)
    sys.exit(0)
with open(out, "w") as f:
    f.write("object, half written\\n")
    if os.path.exists({hang!r}) and "{hang_on}" in sys.argv[-1]:
        f.flush()
        import time
        time.sleep(60)
'''
FAKE_PROFILER = '''#!{python} -S
"""The linked profiler: logs its argv, then speaks the protocol as tests/fakes/profiler."""
import os, sys
''' + JSON_ARGV.replace("{", "{{").replace("}", "}}") + '''
with open({log!r}, "a") as f:
    f.write(json_argv(sys.argv) + "\\n")
os.environ["FAKE_LOG"] = {fake_log!r}
os.execv({fake!r}, [{fake!r}, *sys.argv[1:]])
'''


class Toolchain:
    """A fake nvcc in ``folder``; ``argvs()`` are the argvs it and its profilers were run with."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.log, self.hang = folder / "argv.log", folder / "hang"
        wrapper = folder / "profiler-wrapper"
        wrapper.write_text(FAKE_PROFILER.format(python=sys.executable, log=str(self.log), fake=str(FAKES / "profiler"),
                                                fake_log=str(folder / "jobs.log")))
        wrapper.chmod(0o755)
        self.nvcc = folder / "nvcc"
        self.nvcc.write_text(FAKE_NVCC.format(python=sys.executable, log=str(self.log), wrapper=str(wrapper),
                                              hang=str(self.hang), hang_on=KERNELS[1]))
        self.nvcc.chmod(0o755)

    def argvs(self) -> list:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def behave(self, behaviour: dict, settings: dict | None = None) -> None:
        """The profilers the fake nvcc links from now on run with FAKE_BEHAVIOUR ``behaviour`` and
        FAKE_SETTINGS ``settings`` (tests/fakes/profiler; scons runs commands in an environment of its own)."""
        wrapper = self.log.parent / "profiler-wrapper"
        extra = "" if settings is None else f"os.environ['FAKE_SETTINGS'] = {json.dumps(settings)!r}\n"
        wrapper.write_text(wrapper.read_text().replace(
            "os.execv(", f"os.environ['FAKE_BEHAVIOUR'] = {json.dumps(behaviour)!r}\n{extra}os.execv("))


def scons_args(*args):
    """The arguments of `scons` (after the command's name) the runs on a fake build are given."""
    return ["-j2", "SPECS=specs", "TOP=listed", *args]


def scons_command(*args):
    return [sys.executable, shutil.which("scons"), *scons_args(*args)]


def run(project, *args, check=True):
    """scons in ``project`` with the fake GPU on PATH; no traceback, and (``check``) status 0."""
    out = scons_runs.run(scons_args(*args), cwd=project, env=dict(os.environ, PATH=FAKE_PATH), timeout=120)
    no_traceback(out)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def make_fake_build(folder: Path) -> tuple:
    """A copy of the project in ``folder`` (two-kernel specs, the set `pair` of two layers) and a
    fake nvcc."""
    (folder / "project").mkdir()
    project = copy_project(folder / "project")
    (project / "kernel_specs" / "workloads" / "pair.txt").write_text("\n".join(LAYERS) + "\n")
    return project, Toolchain(folder / "toolchain")


@pytest.fixture
def fake_build(tmp_path):
    """A copy of the project (two-kernel specs, the set `pair` of two layers) and a fake nvcc."""
    return make_fake_build(tmp_path)


@pytest.fixture(scope="module")
def profiler_build(tmp_path_factory):
    """BUILD of `scons profiler` on a fake build (both kernels, fake nvcc), made once for the tests
    of `scons -c` below: each cleans a copy of it (its record lists paths relative to BUILD, so a
    copy is that build to clean)."""
    folder = tmp_path_factory.mktemp("profiler-build")
    project, toolchain = make_fake_build(folder)
    run(project, "profiler", f"NVCC={toolchain.nvcc}", f"BUILD={folder / 'build'}")
    return folder / "build"


def files_under(folder: Path) -> set:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


# ---- scons -c removes what the build recorded writing, and only that ----------------------------

def plant(*paths):
    """Files of the user's, planted under BUILD after the build."""
    def make(build, outside):
        for name in paths:
            (build / name).parent.mkdir(parents=True, exist_ok=True)
            (build / name).write_text("mine\n")
    return make


def link_folder(name):
    """BUILD/<name> replaced by a link to a folder outside BUILD holding files of the same names."""
    def make(build, outside):
        target = outside / name.replace("/", "_")
        shutil.copytree(build / name, target)
        shutil.rmtree(build / name)
        (build / name).symlink_to(target)
    return make


def link_file(name):
    """BUILD/<name> replaced by a link to a file outside BUILD."""
    def make(build, outside):
        (outside / "file").write_text("mine\n")
        (build / name).unlink()
        (build / name).symlink_to(outside / "file")
    return make


def record_entries(*entries):
    """The build's record, edited to name paths out of BUILD."""
    def make(build, outside):
        (outside / "file").write_text("mine\n")
        with open(build / outputs.RECORD, "a") as f:
            f.write("".join(json.dumps(e.replace("{outside}", str(outside))) + "\n" for e in entries))
    return make


CLEAN_CASES = [
    # (case, what is done to BUILD after `scons profiler`, more variables for -c, files that stay)
    ("planted look-alikes", plant("kernels/my_conv.cu", "obj/util.o", ".draft.tmp", "obj/driver/old.o",
                                  f"kernels/.{KERNELS[0]}.cu.x1y2.tmp", "keep/a.o", "notes.txt"), [],
     {"kernels/my_conv.cu", "obj/util.o", ".draft.tmp", "obj/driver/old.o", f"kernels/.{KERNELS[0]}.cu.x1y2.tmp",
      "keep/a.o", "notes.txt"}),
    ("kernels no longer selected", plant(), [f"KERNELS={KERNELS[0]}"], set()),
    ("a linked kernels folder", link_folder("kernels"), [], {"kernels"}),
    ("a linked obj/driver folder", link_folder("obj/driver"), [], {"obj/driver"}),
    ("a linked file", link_file("profiler"), [], {"profiler"}),
    ("a record naming paths out of BUILD",
     record_entries("../neighbour.txt", "{outside}/file", "kernels/../../neighbour.txt", "", "."), [], set()),
]


@pytest.mark.parametrize("change, variables, kept", [c[1:] for c in CLEAN_CASES], ids=[c[0] for c in CLEAN_CASES])
def test_clean_removes_only_the_files_the_build_recorded(fake_build, profiler_build, tmp_path, change, variables,
                                                        kept):
    project, toolchain = fake_build
    build, outside = tmp_path / "build", tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "neighbour.txt").write_text("mine\n")
    shutil.copytree(profiler_build, build, symlinks=True)  # `scons profiler` into BUILD
    made = files_under(build)
    assert {f"kernels/{k}.cu" for k in KERNELS} | {f"obj/{k}.o" for k in KERNELS} | {"profiler"} <= made
    change(build, outside)
    outside_before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    out = run(project, "-c", f"NVCC={toolchain.nvcc}", f"BUILD={build}", *variables)
    assert files_under(build) == kept | {outputs.LOCK}, out.stdout
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == outside_before
    assert (tmp_path / "neighbour.txt").read_text() == "mine\n"


def test_clean_of_a_folder_the_build_never_wrote_removes_nothing(fake_build, tmp_path):
    project, toolchain = fake_build
    user = tmp_path / "u"
    plant("kernels/my_conv.cu", "obj/util.o", ".draft.tmp")(user, None)
    run(project, "-c", f"NVCC={toolchain.nvcc}", f"BUILD={user}")
    assert files_under(user) == {"kernels/my_conv.cu", "obj/util.o", ".draft.tmp"}


def test_a_build_killed_mid_way_leaves_a_record_of_all_it_wrote(fake_build, tmp_path):
    """SIGKILL while nvcc writes the second kernel's object: `scons -c` then removes every file
    that run wrote, the half-written object included."""
    project, toolchain = fake_build
    build = tmp_path / "build"
    toolchain.hang.write_text("")
    scons = subprocess.Popen(scons_command("profiler", f"NVCC={toolchain.nvcc}", f"BUILD={build}"),
                             cwd=project, env=dict(os.environ, PATH=FAKE_PATH), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (build / "obj" / f"{KERNELS[1]}.o").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(scons.pid, signal.SIGKILL)
        scons.wait()
    toolchain.hang.unlink()
    assert (build / "obj" / f"{KERNELS[1]}.o").exists() and not (build / "profiler").exists()
    assert f"obj/{KERNELS[1]}.o" in outputs.read_record(build)
    run(project, "-c", f"NVCC={toolchain.nvcc}", f"BUILD={build}")
    assert files_under(build) == {outputs.LOCK}


def test_a_file_that_cannot_be_removed_stays_in_the_record(tmp_path, monkeypatch):
    build = tmp_path / "build"
    (build / "obj").mkdir(parents=True)
    record = outputs.Record(build)
    record.add([build / "profiler", build / "obj" / "a.o"])
    (build / "profiler").write_text("built\n")
    (build / "obj" / "a.o").write_text("built\n")
    unlink = os.unlink

    def busy(path, *, dir_fd=None):
        if path == "a.o":
            raise PermissionError(13, "Permission denied")
        unlink(path, dir_fd=dir_fd)
    monkeypatch.setattr(outputs.os, "unlink", busy)
    said = []
    outputs.clean(build, said.append)
    assert said == [f"Removed {build / 'profiler'}",
                    f"scons: {build / 'obj' / 'a.o'}: cannot remove (Permission denied); it stays in the build's record"]
    assert outputs.read_record(build) == ["obj/a.o"] and not (build / "profiler").exists()


# ---- no value reaches a shell -----------------------------------------------------------------

HOSTILE = "x $(touch PWN) `touch PWN`; touch PWN | touch PWN && touch PWN \"q\" 's' #"
NO_DOLLAR = HOSTILE.replace("$(touch PWN) ", "")  # NVCC may not hold a '$' (config.resolve)
FLAGS = "-O3 -DX=\"1;date>PWN\" '-DY=$(touch PWN) `touch PWN` | a && b'"
PROFILE_ARGS = "--note 'a $(touch PWN); `touch PWN`' --also \"b | c\""


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """`scons profile` (fake GPU) with every path and flag holding shell syntax, in a folder of
    its own (``tmp``) that holds the project, ``folder`` (named HOSTILE) and the fake nvcc."""
    tmp = tmp_path_factory.mktemp("hostile")
    folder = tmp / HOSTILE
    folder.mkdir()
    (folder / "cutlass").symlink_to(default_cutlass_root())
    (folder / "pair.txt").write_text("\n".join(LAYERS) + "\n")
    (tmp / "project").mkdir()
    project = copy_project(tmp / "project")
    toolchain = Toolchain(tmp / NO_DOLLAR)
    out = run(project, "profile", f"NVCC={toolchain.nvcc}", f"BUILD={folder}/build", f"CUTLASS={folder}/cutlass",
              f"RESULTS={folder}/results", f"WORKLOADS={folder}/pair.txt", f"NVCCFLAGS={FLAGS}",
              f"PROFILE_ARGS={PROFILE_ARGS}", "PROFILE_TIMEOUT=20")
    return types.SimpleNamespace(toolchain=toolchain, tmp=tmp, folder=folder, out=out, pwned=list(tmp.rglob("PWN")))


SHELL_CASES = [
    # (case, words that must reach a program one after the other, as they are)
    ("BUILD", ["-o", "{folder}/build/profiler"]),
    ("BUILD in a compile", ["-c", "-o", "{folder}/build/obj/driver/main.o"]),
    ("CUTLASS", ["-isystem", "{folder}/cutlass/include", "-isystem", "{folder}/cutlass/tools/util/include"]),
    ("NVCCFLAGS, double quotes", ["-O3", "-DX=1;date>PWN"]),
    ("NVCCFLAGS, single quotes", ["-DY=$(touch PWN) `touch PWN` | a && b", "-gencode=arch=compute_90a,code=sm_90a"]),
    ("NVCC", ["{nvcc}", "-c", "-o"]),
    ("PROFILE_ARGS", ["--note", "a $(touch PWN); `touch PWN`", "--also", "b | c"]),
    ("the profiler's path", ["{folder}/build/profiler", "--device"]),
]


def consecutive(words, argv) -> bool:
    return any(argv[i:i + len(words)] == words for i in range(len(argv)))


@pytest.mark.parametrize("words", [c[1] for c in SHELL_CASES], ids=[c[0] for c in SHELL_CASES])
def test_every_word_reaches_the_program_as_it_is_and_nothing_runs(hostile_run, words):
    assert hostile_run.pwned == [], "no shell ran a word"
    wanted = [w.format(folder=hostile_run.folder, nvcc=hostile_run.toolchain.nvcc) for w in words]
    assert any(consecutive(wanted, argv) for argv in hostile_run.toolchain.argvs()), hostile_run.out.stdout


def test_results_the_workload_file_and_build_are_the_paths_given(hostile_run):
    measured = list((hostile_run.folder / "results" / "pair" / "nvidia_h200").glob("*.csv"))
    assert len(measured) == len(LAYERS), hostile_run.out.stdout + hostile_run.out.stderr
    assert outputs.read_record(hostile_run.folder / "build"), "BUILD's record is in BUILD"
    assert sorted(p.name for p in hostile_run.tmp.iterdir()) == sorted(["project", HOSTILE, NO_DOLLAR]), \
        "no folder named by a path SCons substituted"


def test_spawn_runs_each_word_as_one_argument_without_a_shell(tmp_path, capsys):
    listed = tmp_path / "argv.json"
    words = [sys.executable, "-c", f"import json, sys; open({str(listed)!r}, 'w').write(json.dumps(sys.argv[1:]))",
             HOSTILE, "$HOME", "", "a\tb"]
    assert noshell.spawn("sh", noshell.as_it_is, words[0], words, dict(os.environ)) == 0
    assert json.loads(listed.read_text()) == words[3:] and not Path("PWN").exists()
    missing = tmp_path / "no such; program"
    assert noshell.spawn("sh", noshell.as_it_is, str(missing), [str(missing)], dict(os.environ)) == 127
    assert capsys.readouterr().err == f"scons: {missing}: No such file or directory\n"


def test_an_argv_action_runs_its_words_unsubstituted_and_without_a_shell(tmp_path):
    from SCons.Environment import Environment
    listed = tmp_path / "argv.json"
    words = [sys.executable, "-c", f"import json, sys; open({str(listed)!r}, 'w').write(json.dumps(sys.argv[1:]))",
             HOSTILE, '${__import__("pathlib").Path("PWN").touch()}', "$HOME $$ $( $)"]
    env = Environment(tools=["noshell"], toolpath=[str(ROOT / "site_scons" / "site_tools")], ENV=dict(os.environ))
    assert env.Execute(env.ArgvAction(words)) == 0
    assert json.loads(listed.read_text()) == words[3:] and not Path("PWN").exists()


def test_the_workloads_command_is_an_argv(monkeypatch):
    env = env_with(MODEL="resnet50", BATCH="8")
    monkeypatch.setattr(commands.importlib.util, "find_spec", lambda name: object())  # as if PyTorch were here
    argv = commands.workloads_command(env, ["workloads"])
    assert argv[:3] == [sys.executable, "-m", "kernelgen.importer"]
    assert argv[argv.index("--model") + 1] == "resnet50" and argv[argv.index("--batch") + 1] == "8"


# ---- one scons run at a time per BUILD --------------------------------------------------------

def header_workloads(build: Path) -> list:
    """The workloads of the header of the sets named pair (both are)."""
    text = (build / "sets" / "pair" / "best_kernels.h").read_text()
    return re.findall(r'^\s*\{"(conv2d_fprop[^"]*)",', text, re.MULTILINE)


def printed_workloads(out: str) -> list:
    return re.findall(r"^  (conv2d_fprop\S+)\s+\d", out, re.MULTILINE)


def problem_names(layers) -> list:
    return [p.name for p in parse_workloads("\n".join(layers) + "\n")]


@pytest.fixture
def measured(fake_build, tmp_path):
    """The project with both layers of `pair` measured (fake GPU), and a one-layer file also named
    pair.txt elsewhere: two sets of one name, whose results are one folder."""
    project, toolchain = fake_build
    one = tmp_path / "elsewhere" / "pair.txt"
    one.parent.mkdir()
    one.write_text(LAYERS[1] + "\n")
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'build'}")
    return project, toolchain, {"pair": problem_names(LAYERS), str(one): problem_names(LAYERS[1:])}


def test_two_runs_on_one_build_take_turns(measured, tmp_path):
    """Two `scons best_kernels.h` of different sets started together on one BUILD: each builds its
    own set's header (the second waits for the first), and a later run rebuilds whatever the last
    one left."""
    project, toolchain, sets = measured
    build = tmp_path / "build"
    common = ["best_kernels.h", f"NVCC={toolchain.nvcc}", f"BUILD={build}", "GPU=nvidia_h200"]
    for attempt in range(3):
        (build / "sets" / "pair" / "best_kernels.h").unlink(missing_ok=True)  # so that both runs build it
        order = list(sets) if attempt % 2 == 0 else list(reversed(sets))
        # two processes started together (forked one after the other: tests/scons_runs.py)
        runs = dict(zip(order, scons_runs.run_together([scons_args(*common, f"WORKLOADS={spec}") for spec in order],
                                                       project, dict(os.environ, PATH=FAKE_PATH), timeout=120)))
        for spec, done in runs.items():
            assert done.returncode == 0 and printed_workloads(done.stdout) == sets[spec], done.stdout + done.stderr
        waited = [spec for spec, done in runs.items() if "scons: waiting for the scons run (pid " in done.stdout]
        assert len(waited) <= 1 and header_workloads(build) in ([sets[w] for w in waited] or list(sets.values()))
    for spec in sets:
        out = run(project, *common, f"WORKLOADS={spec}")
        assert header_workloads(build) == sets[spec], out.stdout


def test_a_run_waits_for_the_one_that_holds_build_and_says_which(tmp_path):
    build = tmp_path / "build"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from kernelgen import outputs; "
                               f"outputs.hold(Path({str(build)!r})); print('held', flush=True); time.sleep(1)"],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "site_scons")), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        said, began = [], time.monotonic()
        assert outputs.hold(build, said.append) is True
        assert time.monotonic() - began > 0.3, "it waited for the holder to end"
        assert said == [f"scons: waiting for the scons run (pid {holder.pid}) that holds BUILD={build}"]
        assert (build / outputs.LOCK).read_text() == f"{os.getpid()}\n"
    finally:
        holder.kill()
        holder.wait()


# ---- variables are refused in one short line naming them --------------------------------------

LONG = "x" * 900_000
SPACED = "x " * 450_000  # no word long enough to be shortened as a word: the value itself must be
WORDS = "x " * 50_000  # as many as shlex splits in a moment
VARIABLE_CASES = [
    ("ARCH beyond the table", {"ARCH": "999"},
     r"^ARCH='999': sm_999 is not an architecture known here \(known: 75, 80, 90, 90a, and later minor versions "
     r"such as 86; kernelgen/targets\.py TARGETS lists them\)$"),
    ("ARCH of a later major", {"ARCH": "100"}, r"^ARCH='100': sm_100 is not an architecture known here"),
    ("ARCH below the table", {"ARCH": "70"}, r"^ARCH='70': sm_70 is not an architecture known here"),
    ("timeout of a microsecond", {"PROFILE_TIMEOUT": "0.0000001"},
     r"^PROFILE_TIMEOUT='0\.0000001': expected a number of seconds from 1 to 86400$"),
    ("timeout under a second", {"PROFILE_TIMEOUT": "0.5"}, r"^PROFILE_TIMEOUT='0\.5': expected .* from 1 to 86400$"),
    ("timeout over a day", {"PROFILE_TIMEOUT": "86401"}, r"^PROFILE_TIMEOUT='86401': expected .* from 1 to 86400$"),
    ("long timeout", {"PROFILE_TIMEOUT": SPACED},
     r"^PROFILE_TIMEOUT='x x .*\.\.\. \(900000 characters\) \.\.\..* x ': expected"),
    ("long ARCH", {"ARCH": "9" * 900_000}, r"^ARCH='9{60}\.\.\. \(900000 characters\) \.\.\.9{20}': expected"),
    ("long NVCCFLAGS", {"NVCCFLAGS": "'" + WORDS},
     r"^NVCCFLAGS=\"'x x .*\(100001 characters\).*\": No closing quotation"),
    ("long PROFILE_ARGS", {"PROFILE_ARGS": '"' + WORDS}, r"^PROFILE_ARGS='\"x .*\(100001 characters\).*': No closing"),
    ("long CUTLASS", {"CUTLASS": SPACED}, r"^CUTLASS=x x .*\(900000 characters\).*: no CUTLASS headers there"),
    ("long BUILD", {"BUILD": "{tmp}/" + SPACED},
     r"^BUILD=/.*\(\d{6} characters\).* is unreadable \(File name too long\)"),
    ("long value with a newline", {"RESULTS": LONG + "\n"},
     r"^RESULTS='x{60}\.\.\. \(900001 characters\) \.\.\.x{19}\\n': holds the control character '\\n'$"),
    ("long NVCC with a $", {"NVCC": "$" + LONG}, r"^NVCC='\$x{59}\.\.\. \(900001 characters\) \.\.\.x{20}': a '\$'"),
]


@pytest.mark.parametrize("values, match", [c[1:] for c in VARIABLE_CASES], ids=[c[0] for c in VARIABLE_CASES])
def test_a_bad_variable_is_refused_in_one_short_line_naming_it(tmp_path, values, match):
    env = env_with(**{k: v.replace("{tmp}", str(tmp_path)) for k, v in values.items()})
    message = refused(lambda: resolve(env), KernelgenError, match)
    assert len(message) < 400, len(message)


def test_scons_refuses_an_unknown_arch_before_building(fake_build, tmp_path):
    project, toolchain = fake_build
    out = run(project, "best_kernels.h", "ARCH=999", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b'}", check=False)
    assert out.returncode == 2 and out.stderr.startswith("scons: ARCH='999': sm_999 is not an architecture known")
    assert not (tmp_path / "b").exists() and toolchain.argvs() == [], "refused before nvcc runs or BUILD is made"


# ---- a kernel nvcc refuses costs its rows, not the build ------------------------------------------

REFUSING_NVCC = '''#!/bin/sh
# nvcc for tests: refuses the source of {kernel} (as CUTLASS's static_asserts would), else as {nvcc}
case "$*" in
  *kernels/{kernel}.cu*) echo "error: static assertion failed with \\"tile too large\\"" >&2; exit 1 ;;
esac
exec {nvcc} "$@"
'''


def test_a_kernel_nvcc_refuses_is_built_as_a_stub_that_says_so(fake_build, tmp_path):
    project, tools = fake_build
    refusing = tmp_path / "refusing-nvcc"
    refusing.write_text(REFUSING_NVCC.format(kernel=KERNELS[1], nvcc=tools.nvcc))
    refusing.chmod(0o755)
    build = tmp_path / "build"
    out = run(project, "profiler", "WORKLOADS=pair", f"NVCC={refusing}", f"BUILD={build}")
    assert "static assertion failed" in out.stdout + out.stderr
    assert f"nvcc refused {KERNELS[1]}.cu (above); its object says so instead" in out.stdout
    stub = build / "obj" / f"{KERNELS[1]}.did_not_compile.cu"
    text = stub.read_text()
    assert f"make_{KERNELS[1]}()" in text and "did not compile" in text
    compiled = [argv for argv in tools.argvs() if "-c" in argv]
    assert [argv[-1] for argv in compiled if argv[argv.index("-o") + 1].endswith(f"{KERNELS[1]}.o")] == [str(stub)]
    assert (build / "profiler").exists(), "the profiler links with the stub's object"
    assert str(stub.relative_to(build)) in (build / ".kernelgen-outputs").read_text(), "scons -c removes it"
    again = run(project, "profiler", "WORKLOADS=pair", f"NVCC={refusing}", f"BUILD={build}")
    assert "nvcc" not in again.stdout.replace("nvcc refused", ""), "an unchanged source is not compiled again"


# ---- compile units: several kernels to one nvcc run (kernelgen.units) ----------------------------

FAKE_LD = '''#!{python}
"""ld for tests: logs its argv and writes what -o names."""
import json, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv) + "\\n")
with open(sys.argv[sys.argv.index("-o") + 1], "w") as f:
    f.write("partially linked\\n")
'''

REFUSING_UNIT_NVCC = '''#!/bin/sh
# nvcc for tests: refuses {kernel}'s source and a unit's that includes it, else as {nvcc}
for last; do :; done
case "$last" in
  */kernels/{kernel}.cu) echo "error: static assertion failed" >&2; exit 1 ;;
  */kernels/unit-*.cu) if grep -q "{kernel}" "$last"; then echo "error: static assertion failed" >&2; exit 1; fi ;;
esac
exec {nvcc} "$@"
'''


def unit_run(project, tools, build, *args, nvcc=None):
    """`scons -j1 profiler` on the pair (one job: both kernels in one unit), the fake ld on PATH."""
    path = f"{tools.log.parent}{os.pathsep}{FAKE_PATH}"
    out = scons_runs.run(scons_args("-j1", "profiler", "WORKLOADS=pair", f"NVCC={nvcc or tools.nvcc}",
                                    f"BUILD={build}", *args), cwd=project, env=dict(os.environ, PATH=path),
                         timeout=120)
    no_traceback(out)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def compiles(tools) -> list:
    return [Path(argv[-1]).name for argv in tools.argvs() if "-c" in argv]


HEAVIER_LATER = {  # two units (their sources open differently): the lighter one's kernels named first
    "conv.toml": ('kind = "conv2d_fprop_sm90"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\n'
                  'schedule = "warpspecialized"\nepilogue = "tma"\nstages = 0\n'
                  'tiles = [[128, 128, 64], [256, 64, 64]]\nclusters = [[1, 1, 1]]\n'),
    "gemm.toml": ('kind = "gemm_sm90"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\nkernels = [\n'
                  '  { tile = [64, 64, 64], schedule = "pingpong", clusters = [[1, 1, 1]] },\n'
                  '  { tile = [128, 64, 64], schedule = "pingpong", clusters = [[1, 1, 1]] },\n'
                  '  { tile = [64, 128, 64], schedule = "pingpong", clusters = [[1, 1, 1]] },\n]\n'),
}


def test_the_heaviest_unit_goes_to_nvcc_first_whatever_its_kernels_are_named(fake_build, tmp_path):
    """SConstruct gives the profiler its objects the heaviest first (``Units.stems``), and SCons
    starts them in that order: the unit of three CUTLASS 3.x GEMM kernels is compiled before the
    unit of two conv kernels, whose names come first (given in the order of the names, the lighter
    unit went first and the heavier one ended the compile last)."""
    project, tools = fake_build
    specs = tmp_path / "two"
    specs.mkdir()
    for name, text in HEAVIER_LATER.items():
        (specs / name).write_text(text)
    (project / "kernel_specs" / "workloads" / "both.txt").write_text(
        "conv2d_fprop n=1 h=8 w=8 c=16 k=16 r=1 s=1\ngemm m=64 n=256 k=256\n")
    build = tmp_path / "build"
    # one job: SCons starts the objects one after the other in the order it is given them (two
    # jobs start both at once), and the two families' kernels still make two units (their sources
    # open differently)
    out = scons_runs.run(["-j1", f"SPECS={specs}", "TOP=listed", "profiler", "WORKLOADS=both",
                          f"NVCC={tools.nvcc}", f"BUILD={build}"], cwd=project,
                         env=dict(os.environ, PATH=f"{tools.log.parent}{os.pathsep}{FAKE_PATH}"), timeout=300)
    no_traceback(out)
    assert out.returncode == 0, out.stdout + out.stderr
    made = {units.unit_members((build / "kernels" / c).read_text())[0].split("_tensorop_")[1][:4]: c
            for c in compiles(tools) if c.startswith("unit-")}
    assert sorted(made) == ["fpro", "gemm"], compiles(tools)
    order = [c for c in compiles(tools) if c.startswith("unit-")]
    assert order == [made["gemm"], made["fpro"]]
    assert len(units.unit_members((build / "kernels" / made["gemm"]).read_text())) == 3


def test_one_job_compiles_both_kernels_in_one_unit_and_links_it_once(fake_build, tmp_path):
    project, tools = fake_build
    build = tmp_path / "build"
    out = unit_run(project, tools, build)
    unit = units.unit_name(KERNELS)
    assert [c for c in compiles(tools) if c.startswith(("unit-", "cutlass"))] == [f"{unit}.cu"]
    assert f"[1/1] nvcc {unit}.cu (2 kernels)" in out.stdout
    assert units.unit_members((build / "kernels" / f"{unit}.cu").read_text()) == KERNELS
    linked = [argv for argv in tools.argvs() if "-c" not in argv and str(build / "profiler") in argv]
    assert len(linked) == 1 and str(build / "obj" / f"{unit}.o") in linked[0]
    assert not any(str(build / "obj" / f"{k}.o") in linked[0] for k in KERNELS)
    before = len(compiles(tools))
    again = unit_run(project, tools, build)
    assert "nvcc" not in again.stdout and compiles(tools)[before:] == [], "an up-to-date unit is linked again"
    two = unit_run(project, tools, tmp_path / "two", "-j2")
    assert all(re.search(rf"\[[12]/2\] nvcc {k}\.cu", two.stdout) for k in KERNELS), "two jobs: each kernel alone"


def test_a_unit_nvcc_refuses_is_compiled_kernel_by_kernel_and_only_the_refused_one_is_a_stub(fake_build, tmp_path):
    project, tools = fake_build
    (tools.log.parent / "ld").write_text(FAKE_LD.format(python=sys.executable, log=str(tools.log)))
    (tools.log.parent / "ld").chmod(0o755)
    refusing = tmp_path / "refusing-nvcc"
    refusing.write_text(REFUSING_UNIT_NVCC.format(kernel=KERNELS[1], nvcc=tools.nvcc))
    refusing.chmod(0o755)
    build = tmp_path / "build"
    out = unit_run(project, tools, build, nvcc=refusing)
    unit = units.unit_name(KERNELS)
    assert f"nvcc refused {unit}.cu (above): its 2 kernels are compiled one at a time" in out.stdout
    assert f"nvcc refused {KERNELS[1]}.cu (above); its object says so instead" in out.stdout
    parts = build / "obj" / f"{unit}.parts"
    assert [c for c in compiles(tools) if not c.startswith(("main", "reference", "manifest"))] == [
        f"{KERNELS[0]}.cu", f"{KERNELS[1]}.did_not_compile.cu"], "the refused ones never reach the fake nvcc"
    ld = [argv for argv in tools.argvs() if Path(argv[0]).name == "ld"]
    assert ld == [[str(tools.log.parent / "ld"), "-r", "-o", str(build / "obj" / f"{unit}.o"),
                   str(parts / f"{KERNELS[0]}.o"), str(parts / f"{KERNELS[1]}.o")]]
    assert (build / "obj" / f"{unit}.o").read_text() == "partially linked\n" and not parts.exists()
    assert (build / "profiler").exists()
    recorded = (build / ".kernelgen-outputs").read_text()
    assert f"obj/{KERNELS[1]}.did_not_compile.cu" in recorded and f"obj/{unit}.o" in recorded
    unit_run(project, tools, build, "-c", nvcc=refusing)
    left = sorted(p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file())
    assert left == [outputs.LOCK], f"scons -c removes the unit, its parts' folder and the stub: {left}"
