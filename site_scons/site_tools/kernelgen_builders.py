"""SCons tool: kernelgen's builders. Glue only; the work is in the kernelgen package.

  env.GeneratedFile(target, env.Value(text))   write a generated source
  env.BestKernelsHeader(targets, [env.Value(config_json), csv files...])   a set's header files
  env.CheckLibrary(library)                    its kernels are those its launcher source names
  env.CompileProgress(kernel_names_to_compile) one-line progress for nvcc compiles
  env.RecordOutputs(targets)                   targets built by commands (nvcc) are recorded first
                                               (RECORD_NOW, with CACHE=: when SConstruct is read)

BUILD_RECORD is BUILD's kernelgen.outputs.Record: every file these builders write in BUILD is in it
before it is written, so that `scons -c` removes exactly those.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import SCons.Action
import SCons.Builder


def _write_value(target, source, env):
    from kernelgen.outputs import write

    write(env["BUILD_RECORD"], target[0].get_abspath(), source[0].read())
    return 0


def _best_kernels_header(target, source, env):
    from kernelgen.catalog import kernel_catalog
    from kernelgen.errors import KernelgenError
    from kernelgen.outputs import write
    from kernelgen.reduce import build_header
    from kernelgen.resolved import load

    config = json.loads(source[0].read())
    if "error" in config:  # no GPU's results could be chosen (commands.reduce_config)
        print(f"scons best_kernels.h: {config['error']}", file=sys.stderr)
        return 1
    try:
        _, _, problems = load(config["resolved"])  # BUILD/workloads.json, the set as SConstruct resolved it
        kernels = {k.name: k for k in kernel_catalog(config["specs"], config["spaces"], problems)}
        with tempfile.TemporaryDirectory() as scratch:  # written here, then into BUILD through its record
            best = build_header(config["results"], problems, config["hashes"], kernels, config["templates"],
                                scratch, config["project_includes"], config["workload_file"],
                                gpu=os.path.basename(config["results"]), set_name=config["set"],
                                measured_with=config.get("pairs"))
            for file in target:
                name = os.path.basename(file.get_abspath())
                write(env["BUILD_RECORD"], file.get_abspath(), Path(scratch, name).read_text(encoding="utf-8"))
    except KernelgenError as e:
        print(f"scons best_kernels.h: {e}", file=sys.stderr)
        return 1
    print(f"{target[0]}: set {config['set']}, {len(problems)} workloads, measured on "
          f"{os.path.basename(config['results'])} ({config['results']})")
    width = max(len(p.name) for p in problems)
    for problem, row in zip(problems, best.itertuples(index=False)):
        print(f"  {problem.name:<{width}}  {row.runtime_ms:8.4f} ms  {row.kernel}" + (f" ({row.setting})" if row.setting else ""))
    moved = [(p, row) for p, row in zip(problems, best.itertuples(index=False)) if row.fastest]
    if moved:
        print(f"  {len(moved)} workload(s) chose a kernel other than their fastest row's, whose CUTLASS kernel "
              "another choice compiles the other way (a binary holds one code of it: docs/header.md):")
        for problem, row in moved:
            print(f"    {problem.name}: not {row.fastest}")
    unmeasured, stale = int(best["unmeasured"].sum()), int(best["stale"].sum())
    if unmeasured or stale:
        print(f"  chosen among the measured rows: {unmeasured} (workload, kernel) pair(s) of this build not "
              f"measured, {stale} row(s) of changed code not counted (scons profile measures them)")
    return 0


def _check_library(target, source, env):
    """The library's pre-action: the kernels it links (LIBRARY_KERNELS, as chosen when SConstruct
    was read) are those its launcher source (LIBRARY_LAUNCHER) names (as chosen when the header was built); they
    differ only where this same run profiled and changed a choice."""
    import re

    text = Path(env["LIBRARY_LAUNCHER"]).read_text(encoding="utf-8")
    # (a kernel chosen with two launch settings is two launchers of one factory)
    named = list(dict.fromkeys(re.findall(r"&kernelgen::make_(\w+),", text)))
    if named != list(env["LIBRARY_KERNELS"]):
        print("scons: the set's choices changed while this run profiled: run the same scons command again "
              f"to link the new ones into {target[0]}", file=sys.stderr)
        return 1
    return 0


def _candidates(target, source, env):
    """BUILD/candidates.csv and candidates.txt from commands.candidates_text, and its summary."""
    from kernelgen.outputs import write

    written = json.loads(source[0].read())
    write(env["BUILD_RECORD"], target[0].get_abspath(), written["csv"])
    write(env["BUILD_RECORD"], target[1].get_abspath(), written["txt"])
    print(f"{written['summary']}: {target[0]}")
    return 0


def estimate_left(elapsed: float, finished: int, total: int):
    """Seconds left at the rate compiles have finished so far (with -j, several run at once), or
    None before the first has finished: the first jobs' start times say nothing of how long one takes."""
    if finished <= 0:
        return None
    return elapsed / finished * max(total - finished, 0)


COMPILE_TIMES = "compile_times.csv"  # in BUILD: each nvcc run of the last build's compile, when it started and ended


def _dry_run() -> bool:
    """Whether this is `scons -n`: commands are printed, none runs, nothing is written."""
    from SCons.Script import GetOption

    return bool(GetOption("no_exec"))


def compile_times(started: list) -> tuple:
    """(CSV text, summary line) of the compiles ``started`` ((object path, wall-clock start, kernels)
    each, their objects written since): each run's start and end (its object's time) in seconds
    from the first start, and how long the whole took against the runs' sum."""
    origin = min(began for _, began, _ in started)
    rows, ends = ["object,kernels,start_s,end_s"], []
    for path, began, kernels in started:
        try:
            end = os.stat(path).st_mtime - origin
        except OSError:
            end = None
        rows.append(f"{Path(path).name},{kernels},{began - origin:.1f},{'' if end is None else f'{end:.1f}'}")
        if end is not None:
            ends.append((end, began - origin))
    if not ends:
        return "\n".join(rows) + "\n", ""
    span, last_start = max(ends)
    busy = sum(end - start for end, start in ends)
    line = (f"compiled {len(started)} objects ({sum(k for _, _, k in started)} kernels) in {span:.0f} s, "
            f"{busy:.0f} s of nvcc runs; the last to end started {last_start:.0f} s in")
    return "\n".join(rows) + "\n", line


class CompileProgress:
    """Prints `[k/N] nvcc NAME (elapsed, ~left)` for kernel compiles (a unit's with its number of
    kernels: kernelgen.units), other commands as they are.
    A compile has finished once its object is written; `~left` appears after the first has. When
    the link that takes them starts, every compile has ended: it prints how long they took and
    writes each run's start and end to BUILD/compile_times.csv (``compile_times``)."""

    def __init__(self, total: int):
        self.total, self.started, self.t0, self.summarized = total, [], None, False

    def __call__(self, line, target, source, env):
        if not line.startswith("nvcc ") or "kernels/" not in line:
            # (an early stage's profiler, SConstruct's PROFILER_STAGE, links while the others compile)
            if (line.startswith("link ") and self.started and not self.summarized and not _dry_run()
                    and not (env is not None and hasattr(env, "get") and env.get("PROFILER_STAGE"))):
                self._summarize(env)
            sys.stdout.write(line + "\n")
            return
        now = time.monotonic()
        self.t0 = self.t0 or now
        finished = sum(_written_since(path, began) for path, began, _ in self.started)
        self.started.append((target[0].get_abspath(), time.time(), int(env.get("KERNELS_IN_UNIT") or 1)))
        elapsed = now - self.t0
        shown = max(self.total, len(self.started))
        left = estimate_left(elapsed, finished, shown)
        estimate = "" if left is None else f", ~{left:.0f} s left"
        name = str(source[0]).rsplit("/", 1)[-1]
        if env.get("KERNELS_IN_UNIT"):
            name += f" ({env['KERNELS_IN_UNIT']} kernels)"
        sys.stdout.write(f"[{len(self.started)}/{shown}] nvcc {name} ({elapsed:.0f} s{estimate})\n")
        sys.stdout.flush()

    def _summarize(self, env):
        from kernelgen.outputs import write

        self.summarized = True
        text, line = compile_times(self.started)
        if line:
            sys.stdout.write(line + "\n")
        record = env.get("BUILD_RECORD") if env is not None and hasattr(env, "get") else None
        if record is not None:
            write(record, str(Path(self.started[0][0]).parent.parent / COMPILE_TIMES), text)


class _RecordTargets(SCons.Action.FunctionAction):
    """RecordOutputs' pre-action: its targets go into BUILD_RECORD before the command that writes
    them runs. It is no part of their signatures: how a file is recorded says nothing of what it
    holds, and a change here must not recompile anything."""

    def __init__(self):
        super().__init__(_record_targets, {"cmdstr": None})

    def get_presig(self, target, source, env, executor=None):
        return b""


def _record_targets(target, source, env):
    env["BUILD_RECORD"].add(t.get_abspath() for t in target)
    return 0


def _written_since(path: str, began: float) -> bool:
    try:
        return os.stat(path).st_mtime >= began - 1  # file systems keep whole seconds at worst
    except OSError:
        return False


def _not_cached(target, source, env):
    """The emitter of the builders that write text through BUILD_RECORD: CACHE= (CacheDir) never
    holds what they write, which costs nothing to write again and must go through the record."""
    env.NoCache(target)
    return target, source


def _record_outputs(env, targets):
    """RecordOutputs: recorded before the command that writes them runs; with RECORD_NOW (CACHE=,
    where an object taken from the cache runs no command) when SConstruct is read."""
    if env.get("RECORD_NOW"):
        env["BUILD_RECORD"].add(t.get_abspath() for t in targets)
    return env.AddPreAction(targets, _RecordTargets())


def generate(env):
    env.SetDefault(GENERATECOMSTR="generate $TARGET", REDUCECOMSTR="reduce profile results -> $TARGET",
                   CANDIDATESCOMSTR="rank the space's kernels for each layer -> $TARGET")
    env["BUILDERS"]["GeneratedFile"] = SCons.Builder.Builder(
        action=SCons.Action.Action(_write_value, "$GENERATECOMSTR"), emitter=_not_cached)
    env["BUILDERS"]["Candidates"] = SCons.Builder.Builder(action=SCons.Action.Action(_candidates, "$CANDIDATESCOMSTR"),
                                                          emitter=_not_cached)
    env["BUILDERS"]["BestKernelsHeader"] = SCons.Builder.Builder(
        action=SCons.Action.Action(_best_kernels_header, "$REDUCECOMSTR"), emitter=_not_cached)
    env.AddMethod(lambda env, total: env.Replace(PRINT_CMD_LINE_FUNC=CompileProgress(total)), "CompileProgress")
    env.AddMethod(lambda env, library: env.AddPreAction(library, SCons.Action.Action(_check_library, None)),
                  "CheckLibrary")
    env.AddMethod(_record_outputs, "RecordOutputs")


def exists(env):
    try:
        import kernelgen  # noqa: F401
        import mako  # noqa: F401
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True
