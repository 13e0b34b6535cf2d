"""`scons` runs of the tests, each a process of its own, forked from one Python that has imported
what every run imports first.

A `scons best_kernels.h` run of a committed set spends about half of its second importing SCons,
pandas, numpy, Mako and the project's kernelgen. A helper process imports them once, with the
project's own site_scons on its path (as `scons` run in the project would import them), and forks
a child per run: the child takes the run's folder, environment and arguments, and runs SCons's
main() as the `scons` script does, with its own standard output and error, and exits with SCons's
status. What the child does after the imports is what a fresh `scons` does: it reads the project's
SConstruct, configures, builds and writes its signature database, and its exit functions run as it
exits (it leaves the objects the helper made to the kernel to free, not the interpreter). An import that fails in the helper (a module the project lacks) is left to the child, which
fails as a fresh `scons` would.

``run`` runs one `scons` in a helper kept for the process (each pytest-xdist worker has its own),
``run_all`` several at once in a helper of their own. A run in a copy of the project (a folder with
a site_scons other than this checkout's) imports kernelgen again, from the copy, as `scons` there
would: the helper keeps only what does not depend on which project runs (SCons, pandas, numpy,
Mako). In the checkout's own runs the helper has also expanded the kernel catalog and compiled the
templates, as each run would first (kernelgen keeps both by the state of their files). A run whose
environment gives Python other settings (a PYTHON* variable the helper was not started with) is a
fresh `scons` process, since those act as the interpreter starts.
"""

import json
import locale
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from conftest import STARTING_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[1]

# What a header build imports (SConstruct, kernelgen's builders and the header's reduction) that
# takes time to import; a run that needs none of it loses nothing.
WARM = ("SCons.Script.Main", "SCons.Script", "SCons.Environment", "SCons.Defaults", "SCons.Tool", "SCons.Builder",
        "SCons.Action", "SCons.SConsign", "SCons.Taskmaster", "numpy", "pandas", "mako.lookup", "mako.template",
        "mako.exceptions", "kernelgen.commands", "kernelgen.config", "kernelgen.variables", "kernelgen.outputs",
        "kernelgen.reduce", "kernelgen.results", "kernelgen.render", "kernelgen.profile", "kernelgen.merge")

# The helper: its first arguments are the project and the scons script, then the modules to import,
# then "sets" where its runs build the committed sets (run_all's: it makes their fused catalogs
# first), else "any". It imports them, then forks the child of each request and answers with the child's pid and, once
# the child ended, its exit status (what os.waitstatus_to_exitcode says: minus the signal that
# ended it). ``run_all``'s requests come all at once and run ``jobs`` at a time.
_HELPER = r"""
import gc, importlib, json, os, sys

project, scons, warm, sets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "sets"
requests = os.fdopen(os.dup(0), "r")  # the requests and the answers keep to descriptors that no
answers = os.fdopen(os.dup(1), "w", buffering=1)  # program the runs start inherits (os.dup's are not)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
os.close(null)
sys.path[0] = os.path.dirname(scons)  # as for the scons script: not the current folder
os.chdir(project)
site_scons = os.path.join(project, "site_scons")
sys.path.insert(0, site_scons)  # where SCons's main() puts it (again) before it reads SConstruct
for name in warm:
    try:
        importlib.import_module(name)
    except Exception:
        pass  # the run imports it again, and says what is wrong as a fresh scons would
sys.path.remove(site_scons)
site_scons = os.path.realpath(site_scons)


def warm_up():
    # What each run of the project does first, done once: the kernel catalog of the default specs
    # and space (kernelgen keeps it for the rest of a process by the files' state and text, so that
    # a run whose files differ expands its own), and the templates compiled (a lookup is kept by the
    # state of its folder).
    from kernelgen import commands, render
    from kernelgen.variables import ROOT
    from kernelgen.workloads import parse_workloads
    families, spaces = ROOT / "kernel_specs" / "families", ROOT / "kernel_specs" / "spaces"
    commands.kernel_catalog(families, spaces, [])
    if sets:
        # for runs of the committed sets (run_all's): with the fused variants of each set's
        # epilogues, the catalog a run of the set makes (kept by the set's epilogues, the variants
        # by epilogue: about a dozen catalogs, kernelgen keeps 16)
        for path in sorted((ROOT / "kernel_specs" / "workloads").glob("*.txt")):
            try:
                problems = parse_workloads(path.read_text(), path)
            except Exception:
                continue  # the run says what is wrong
            commands.kernel_catalog(families, spaces, problems)
    templates = ROOT / "kernel_specs" / "templates"
    lookup = render.lookup(templates)
    for template in sorted(templates.glob("*.mako")):
        lookup.get_template(template.name)


try:
    warm_up()
except Exception:
    pass  # the runs say what is wrong, as a fresh scons would
sys.stdout.flush()
sys.stderr.flush()
# What the imports made is left out of the children's garbage collections: a child that exits
# would otherwise go through all of it, copying each page it touches from the helper's (a tenth
# of a second and more a run).
gc.freeze()


def child(request):
    requests.close()
    answers.close()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # TMPDIR is read again, from the run's environment
    if os.path.realpath(os.path.join(request["cwd"], "site_scons")) != site_scons:
        # Another copy of the project: its own kernelgen is imported from its site_scons.
        for name in [m for m in sys.modules if m == "kernelgen" or m.startswith("kernelgen.")]:
            del sys.modules[name]
    for fd, path in ((1, request["out"]), (2, request["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = [scons, *request["args"]]
    try:
        from SCons.Script.Main import main
        main()  # it ends in sys.exit
        code = None
    except SystemExit as e:
        code = e.code
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    exit_as_scons(code)


def exit_as_scons(code):
    # The child exits as a fresh scons exits: it waits for its threads that are not daemons, runs
    # its exit functions (SCons's, and those of weakref.finalize and logging), flushes its standard
    # output and error, and ends with SystemExit's status, as the interpreter would. What it does not
    # do is free each object the helper's imports made, as an exiting interpreter does: that takes
    # longer than most runs (a twentieth of a second, every page it touches copied from the helper's).
    import atexit
    import threading
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120  # what the interpreter exits with where it cannot flush them
    os._exit(status)


running = {}
pending = []
for line in requests:
    message = json.loads(line)
    pending.extend(message["runs"])
    jobs = message.get("jobs", 1)
    while pending or running:
        while pending and len(running) < jobs:
            request = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                child(request)
            running[pid] = request["index"]
            answers.write(json.dumps({"index": request["index"], "pid": pid}) + "\n")
        pid, status = os.wait()
        answers.write(json.dumps({"index": running.pop(pid), "status": os.waitstatus_to_exitcode(status)}) + "\n")
"""



class _Helper:
    """The helper process of ``project``: ``start`` sends it runs, ``answer`` reads what it says."""

    def __init__(self, project: Path, warm=WARM, sets=False):
        self.scons = shutil.which("scons")
        self.process = subprocess.Popen([sys.executable, "-c", _HELPER, str(project), self.scons, json.dumps(warm),
                                         "sets" if sets else "any"],
                                        cwd=project, env=STARTING_ENVIRONMENT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.said = b""  # what the helper wrote that is not read as an answer yet

    def start(self, runs: list, jobs: int = 1) -> None:
        self.process.stdin.write(json.dumps({"runs": runs, "jobs": jobs}).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout=None) -> dict:
        """The helper's next answer; None when none came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.said:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not select.select([self.process.stdout], [], [], wait)[0]:
                return None
            data = os.read(self.process.stdout.fileno(), 65536)
            if not data:
                raise RuntimeError(f"the scons helper ended (status {self.process.wait()})")
            self.said += data
        line, self.said = self.said.split(b"\n", 1)
        return json.loads(line)


def _python_settings(env) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _text(data: bytes) -> str:
    """``data`` as subprocess.run(text=True) gives a program's output: decoded in the locale's
    encoding, its line ends made newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _completed(command, status, out: Path, err: Path, text: bool):
    stdout, stderr = out.read_bytes(), err.read_bytes()
    if text:
        stdout, stderr = _text(stdout), _text(stderr)
    return subprocess.CompletedProcess(command, status, stdout, stderr)


_HELPERS = {}
_LOCK = threading.Lock()


def close() -> None:
    """Ends this process's helper (it ends when its requests end) and waits for it, as a test waits
    for its scons runs (tests/conftest.py calls it as the session finishes)."""
    helper = _HELPERS.pop(os.getpid(), None)
    if helper is not None and helper.process.poll() is None:
        helper.process.stdin.close()
        helper.process.wait()


def run(args, cwd, env=None, timeout=None, text=True) -> subprocess.CompletedProcess:
    """`scons *args` in ``cwd`` with ``env`` (default: this process's), as
    subprocess.run([sys.executable, scons, *args], capture_output=True) would run it: a
    subprocess.CompletedProcess, its output as text where ``text``; subprocess.TimeoutExpired
    after ``timeout`` seconds (the run killed)."""
    return run_together([args], cwd, env, timeout, text)[0]


def run_together(runs: list, cwd, env=None, timeout=None, text=True) -> list:
    """`scons *args` in ``cwd`` with ``env`` for each ``args`` of ``runs``, all started at once, in
    their order (as many subprocess.Popen one after another): a subprocess.CompletedProcess of
    each; subprocess.TimeoutExpired (of the first run still going) after ``timeout`` seconds, the
    runs still going killed."""
    env = dict(os.environ if env is None else env)
    scons = shutil.which("scons")
    commands = [[sys.executable, scons, *map(str, args)] for args in runs]
    if _python_settings(env) != _python_settings(STARTING_ENVIRONMENT):
        return _fresh(commands, cwd, env, timeout, text)
    folder = Path(tempfile.mkdtemp(prefix="kernelgen-scons-run-"))
    try:
        with _LOCK:
            helper = _HELPERS.get(os.getpid())
            if helper is None or helper.process.poll() is not None:
                helper = _HELPERS[os.getpid()] = _Helper(ROOT)
            try:
                statuses = _run_in(helper, [c[2:] for c in commands], str(Path(cwd).resolve()), env, folder,
                                   len(runs), timeout)
            except BaseException as e:
                if helper.process.poll() is None and not isinstance(e, subprocess.TimeoutExpired):
                    helper.process.kill()  # a helper interrupted mid-run is not used again
                raise
        if isinstance(statuses, int):  # the index of the first run the timeout killed
            killed = _completed(commands[statuses], None, folder / f"{statuses}.out", folder / f"{statuses}.err", text)
            raise subprocess.TimeoutExpired(commands[statuses], timeout, killed.stdout, killed.stderr)
        return [_completed(c, statuses[i], folder / f"{i}.out", folder / f"{i}.err", text)
                for i, c in enumerate(commands)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fresh(commands: list, cwd, env, timeout, text) -> list:
    """The runs as processes of their own, each started from scratch."""
    if len(commands) == 1:
        return [subprocess.run(commands[0], cwd=cwd, env=env, capture_output=True, text=text, timeout=timeout)]
    processes = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text)
                 for c in commands]
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        outputs = [p.communicate(timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
                   for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [subprocess.CompletedProcess(c, p.returncode, *o) for c, p, o in zip(commands, processes, outputs)]


def _run_in(helper: _Helper, runs: list, cwd: str, env: dict, folder: Path, jobs: int, timeout):
    """Each run's exit status, the runs made by ``helper`` ``jobs`` at a time, their output in
    ``folder`` (<index>.out and .err); past ``timeout`` seconds, the runs still going are killed
    and the index of the first of them is returned instead."""
    helper.start([{"index": i, "args": list(map(str, args)), "cwd": cwd, "env": env,
                   "out": str(folder / f"{i}.out"), "err": str(folder / f"{i}.err")} for i, args in enumerate(runs)],
                 jobs)
    pids, statuses = {}, {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while len(statuses) < len(runs):
        answer = helper.answer(None if deadline is None else deadline - time.monotonic())
        if answer is None:
            going = sorted(set(pids) - set(statuses))
            for index in going:
                os.kill(pids[index], signal.SIGKILL)
            while len(statuses) < len(runs):  # the killed ones, and any not started yet
                answer = helper.answer()
                if "pid" in answer:
                    os.kill(answer["pid"], signal.SIGKILL)
                    going.append(answer["index"])
                else:
                    statuses[answer["index"]] = answer["status"]
            return min(going)
        if "pid" in answer:
            pids[answer["index"]] = answer["pid"]
        else:
            statuses[answer["index"]] = answer["status"]
    return statuses


def run_all(project: Path, runs: list, jobs: int | None = None, timeout=900) -> list:
    """`scons *args` in ``project`` for each ``args`` of ``runs``, ``jobs`` at a time (default: one
    a core), in a helper of the project's (which makes the committed sets' catalogs first, as their
    header builds would): a subprocess.CompletedProcess of each (its output as text)."""
    folder = Path(tempfile.mkdtemp(prefix="kernelgen-scons-runs-"))
    helper = _Helper(project, sets=True)
    try:
        statuses = _run_in(helper, runs, str(project), dict(os.environ), folder, jobs or os.cpu_count() or 1, timeout)
        assert not isinstance(statuses, int), f"the scons runs took over {timeout} s"
        return [_completed([sys.executable, helper.scons, *map(str, args)], statuses[i], folder / f"{i}.out",
                           folder / f"{i}.err", True) for i, args in enumerate(runs)]
    finally:
        if helper.process.poll() is None:
            helper.process.kill()
        helper.process.wait()
        shutil.rmtree(folder, ignore_errors=True)
