"""Several `scons` runs of one project, each a process of its own, started from one Python that has
imported what every run imports first.

A `scons best_kernels.h` run of a committed set spends about half of its second importing SCons,
pandas, numpy, Mako and the project's kernelgen. ``run_all`` imports them once, in a helper process
of the project's own site_scons (as `scons` run in the project would import them), and forks a
child per run: the child runs SCons's main() on the run's arguments in the project, as the `scons`
script does, with its own standard output and error, and exits with SCons's status. What the child
does after the imports is what a fresh `scons` does: it reads the project's SConstruct, configures,
builds and writes its signature database. An import that fails in the helper (a module the project
lacks) is left to the child, which fails as a fresh `scons` would.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# What a header build imports (SConstruct, kernelgen's builders and the header's reduction) that
# takes time to import; a run that needs none of it loses nothing.
WARM = ("SCons.Script.Main", "SCons.Script", "SCons.Environment", "SCons.Defaults", "numpy", "pandas",
        "mako.lookup", "mako.template", "mako.exceptions", "kernelgen.commands", "kernelgen.config",
        "kernelgen.variables", "kernelgen.outputs", "kernelgen.reduce", "kernelgen.results", "kernelgen.render")

_HELPER = r"""
import importlib, json, os, sys

project, runs, jobs, folder, scons = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.path[0] = os.path.dirname(scons)  # as for the scons script: not the current folder
os.chdir(project)
site_scons = os.path.join(project, "site_scons")
sys.path.insert(0, site_scons)  # where SCons's main() puts it (again) before it reads SConstruct
for name in json.loads(sys.argv[6]):
    try:
        importlib.import_module(name)
    except Exception:
        pass  # the run imports it again, and says what is wrong as a fresh scons would
sys.path.remove(site_scons)
sys.stdout.flush()
sys.stderr.flush()


def child(index, args):
    for fd, name in ((1, "out"), (2, "err")):
        target = os.open(os.path.join(folder, f"{index}.{name}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = [scons, *args]
    try:
        from SCons.Script.Main import main
        sys.exit(main())
    except SystemExit:
        raise  # the interpreter exits as a fresh scons exits: its exit functions run, its files are flushed
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


running, statuses = {}, {}
pending = list(enumerate(runs))
while pending or running:
    while pending and len(running) < jobs:
        index, args = pending.pop(0)
        pid = os.fork()
        if pid == 0:
            child(index, args)
        running[pid] = index
    pid, status = os.wait()
    statuses[running.pop(pid)] = os.waitstatus_to_exitcode(status)
print(json.dumps([statuses[i] for i in range(len(runs))]))
"""


def run_all(project: Path, runs: list, jobs: int | None = None, timeout=900) -> list:
    """`scons *args` in ``project`` for each ``args`` of ``runs``, ``jobs`` at a time (default: one
    a core): a subprocess.CompletedProcess of each (its output as text)."""
    folder = Path(tempfile.mkdtemp(prefix="kernelgen-scons-runs-"))
    try:
        scons = shutil.which("scons")
        helper = subprocess.run([sys.executable, "-c", _HELPER, str(project), json.dumps(runs),
                                 str(jobs or os.cpu_count() or 1), str(folder), scons, json.dumps(WARM)],
                                cwd=project, capture_output=True, text=True, timeout=timeout)
        assert helper.returncode == 0, helper.stdout + helper.stderr
        statuses = json.loads(helper.stdout.splitlines()[-1])
        return [subprocess.CompletedProcess([sys.executable, scons, *args], status,
                                            (folder / f"{i}.out").read_text(errors="replace"),
                                            (folder / f"{i}.err").read_text(errors="replace"))
                for i, (args, status) in enumerate(zip(runs, statuses))]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
