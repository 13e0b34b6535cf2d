"""Drive the profiler executable over a workload set and keep the CSVs up to date.

    python -m kernelgen.profile --manifest generated/kernels.json --profiler generated/profiler \\
        --workloads resnet50 --sets-dir kernel_specs/workloads --results profile_results

One profiler process runs every job (CUDA start-up and allocation paid once). A
kernel that loses the CUDA context is recorded as ``crashed``, one that stops
answering as ``timeout``; a fresh process carries on with the remaining jobs. A
workload's CSV (``RESULTS/<set>/<gpu>/``, one folder per GPU, named by the GPU the
profiler reports) is replaced atomically as soon as its last kernel is done, so an
interrupted run keeps every finished workload and a later run measures only what is
missing or out of date. Which kernels a workload is measured with: every kernel of the
manifest that serves it, or, where the manifest holds ``pairs`` (a build of the model's
proposals: ``candidates.measured_pairs``), those it names for the workload and every kernel the
workload's CSV holds a row of.

Runs may overlap. Only one at a time times kernels on a GPU (``gpu_lock``: the others
wait, saying for which run), and each CSV write reads the file again, under the lock of
its folder, and merges this run's rows into what is there, so that no run loses a row
another run wrote meanwhile.

Nothing measured is deleted before its replacement is measured: a row of code that
changed since stays until the kernel is measured again; rows of another driver, CUDA
or CUTLASS (a CSV holds one stack) are replaced only once every kernel of the file is
measured with this one, and a run that would not measure them all (``KERNELS=``) is
refused before it starts. The profiler dies with this process, even on SIGKILL.
"""

import argparse
import contextlib
import ctypes
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import inputs, outputs, resolved, results
from .ops import check_served, op_of, serves
from .errors import KernelgenError, one_line, shorten
from .workloads import load_workloads

CRASHED_EXIT = 3


class NoGpuError(KernelgenError):
    pass


@dataclass
class Device:
    gpu: str
    driver: str
    cuda: str
    cutlass: str
    timing: str = "graph"  # how the profiler times (results.TIMINGS)
    device: str = ""  # which GPU of the machine: "<index> <uuid>" (device_label)

    def matches(self, row: dict) -> bool:
        return all(str(row[k]) == getattr(self, k) for k in results.PROVENANCE)


@dataclass
class WorkloadState:
    problem: object
    csv_path: Path
    kept: list  # rows of this stack and of unchanged code, carried over from an earlier run
    pending: list  # kernel names still to measure
    new: list = field(default_factory=list)  # measured, not yet written
    # kernel name -> the launch setting to measure it with (results.SETTING); a kernel of launch
    # settings that has none is measured with each, the fastest recorded
    settings: dict = field(default_factory=dict)


def query_gpu() -> tuple[str, str]:
    """(GPU name, driver version) of GPU 0 from nvidia-smi; NoGpuError when there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise NoGpuError("no NVIDIA driver here (nvidia-smi not found)")
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise NoGpuError("nvidia-smi did not answer within 60 s") from None
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    if out.returncode != 0 or not lines:
        raise NoGpuError(f"nvidia-smi finds no GPU: {(out.stderr or out.stdout).strip() or 'no output'}")
    name, _, driver = lines[0].rpartition(",")
    return name.strip(), driver.strip()


def parse_device_line(fields: list[str], driver: str) -> Device:
    # device NAME CC SMS L2 CUDA_RUNTIME CUDA_DRIVER CUTLASS TIMING
    timing = fields[8] if len(fields) > 8 else results.UNRECORDED_TIMING
    if not results.valid_timing(timing):
        raise KernelgenError(f"the profiler times as {timing[:40]!r}, not {results.TIMING_FORMS}")
    return Device(gpu=fields[1], driver=driver, cuda=fields[5], cutlass=fields[7], timing=timing)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    _LIBC.prctl  # every Linux libc has it; elsewhere the profiler is only killed with its session
except (OSError, AttributeError):
    _LIBC = None
_PARENT = [0]  # the pid the profiler is started from


def _die_with_parent():
    """Make the profiler (between fork and exec) receive SIGKILL when this process dies, however
    it dies: its own session (for killpg) would otherwise outlive a SIGKILL of the driver."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != _PARENT[0]:  # the parent died before prctl took effect
            os._exit(1)


class ProfilerProcess:
    """One running profiler; yields its output records, or None when it stops answering."""

    def __init__(self, command: list[str]):
        _PARENT[0] = os.getpid()
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     bufsize=1, start_new_session=True,
                                     preexec_fn=_die_with_parent if _LIBC is not None else None)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._collect_stderr, daemon=True).start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink.put(line.rstrip("\n"))
        sink.put(None)  # end of output

    def _collect_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def next_record(self, timeout: float):
        """The next record as a list of fields; [] at end of output; None after `timeout` s of silence."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        return [] if line is None else line.split("\t")

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def exit_description(self) -> str:
        code = self.proc.wait()
        if code < 0:
            return f"profiler killed by signal {signal.Signals(-code).name}"
        tail = "; ".join(self.stderr[-3:])
        return f"profiler exited with status {code}" + (f": {tail}" if tail else "")


ASIDE = "aside"  # the folder of a GPU's results where OLD_ROWS=aside moves rows of another stack


def _row_key(row: dict) -> tuple:
    """A row as a key: its every value (NaN as NaN's repr, equal to itself)."""
    return tuple(repr(row[c]) for c in results.COLUMNS)


class Runner:
    def __init__(self, manifest: dict, profiler: Path, results_dir: Path, timeout: float, extra_args: list[str],
                 log=print):
        self.manifest = manifest
        self.kernels = manifest["kernels"]
        self.pairs = manifest.get("pairs")  # workload -> the kernels measured on it (None: every one serving it)
        self.profiler = Path(profiler)
        self.results_dir = Path(results_dir)
        self.timeout = timeout
        self.extra_args = extra_args
        self.log = log
        self.device: Device | None = None
        self.done_pairs = 0
        self.total_pairs = 0
        self.started = time.monotonic()
        self.holds_gpu = False
        self.only: set | None = None  # GPUS=: the kernels this process measures (of the manifest's)
        self.remeasure: Path | None = None  # where a refused plan lists the kernels to measure again
        self.old_rows = ""  # OLD_ROWS=: "aside" moves rows of another stack a plan would lose to ASIDE
        # an early stage of a build's profile (--early): a workload whose CSV holds rows of another
        # stack is left to the build's whole profile, which replaces them or refuses as it always has
        self.early = False
        # the names of every kernel a build of this checkout can hold (called on a refusal only), or None
        self.catalog = None

    @contextlib.contextmanager
    def measuring(self):
        """Hold this GPU (``gpu_lock``) for the block; a block inside another shares its hold."""
        if self.holds_gpu:
            yield
            return
        with gpu_lock(self.log):
            self.holds_gpu = True
            try:
                yield
            finally:
                self.holds_gpu = False

    # ---- planning -------------------------------------------------------------------------
    def plan(self, problems: list) -> list[WorkloadState]:
        """What each workload still needs. Refuses (KernelgenError, nothing measured yet) when a
        CSV holds rows of another stack for kernels this build does not measure: rewriting the
        file for this stack would lose them."""
        states, losses = [], []
        for problem in problems:
            path = self.results_dir / f"{problem.name}.csv"
            kept, foreign, seen = [], [], set()
            for row in self.on_disk(path):
                seen.add(row["kernel"])
                if not self.device.matches(row):
                    foreign.append(row)
                    continue
                info = self.kernels.get(row["kernel"])
                if info is None or info["hash"] == row["kernel_hash"]:
                    kept.append(row)  # a row of changed code stays on disk until measured again
            if foreign and self.early:
                states.append(WorkloadState(problem, path, kept, []))
                continue
            unmeasured = sorted({row["kernel"] for row in foreign} - set(self.kernels))
            if unmeasured:
                losses.append((path, foreign, unmeasured))
            elif foreign:
                self.log(f"  {path}: {len(foreign)} row(s) measured on another GPU or software stack "
                         f"({_stack(foreign[0])}) are replaced once every kernel is measured again")
            measured = {row["kernel"] for row in kept}
            wanted = results.measured_with(self.pairs, problem.name, seen)
            pending = [name for name in sorted(self.kernels)
                       if name not in measured and serves(self.kernels[name], problem)
                       and (self.only is None or name in self.only) and (wanted is None or name in wanted)]
            states.append(WorkloadState(problem, path, kept, pending))
        if losses and self.old_rows == "aside":
            for path, foreign, _ in losses:
                moved, count = self.set_aside(path)
                self.log(f"  {path}: {count} row(s) measured with {_stack(foreign[0])} moved to {moved} "
                         "(OLD_ROWS=aside)")
            losses = []
        if losses:
            path, foreign, unmeasured = losses[0]
            more = f" ({len(losses) - 1} more CSV(s) alike)" if len(losses) > 1 else ""
            lost = sorted({row["kernel"] for _, rows, _ in losses for row in rows})
            known = self.catalog() if self.catalog is not None else None
            gone = [name for name in lost if known is not None and name not in known]
            stated = (f"{path}: {len(foreign)} row(s) were measured with {_stack(foreign[0])}, and {len(unmeasured)} of "
                      f"their kernels are not in this build (e.g. {unmeasured[0]}){more}; measuring with this stack "
                      f"({_stack(vars(self.device))}) would replace the file and lose them. Nothing was profiled: ")
            if gone:
                held = sorted({str(p) for p, rows, _ in losses if any(row["kernel"] in gone for row in rows)})
                raise KernelgenError(
                    stated + f"{len(gone)} of those kernels are no kernel of this checkout (e.g. {gone[0]}), so no "
                    f"build can measure them again: move aside the {len(held)} CSV(s) that hold them (e.g. "
                    f"{held[0]}) to keep their rows, then profile")
            again = self._list_remeasure(lost)
            raise KernelgenError(stated + f"profile every kernel of those rows ({again}), or move the file aside to "
                                 f"keep them, or profile with OLD_ROWS=aside (they move to {self.results_dir / ASIDE})")
        return states

    def set_aside(self, path: Path) -> tuple:
        """Move the rows of ``path`` measured with another stack to the file of its name in the GPU
        folder's ASIDE folder, joined to the rows already there (a row there already is not added
        twice); ``path`` keeps its other rows. Written there first: a run stopped between the two
        writes leaves the rows in both files, never in neither. (That file, how many rows moved.)"""
        aside = self.results_dir / ASIDE / path.name
        try:
            with results.locked(self.results_dir):
                rows = self.on_disk(path)
                foreign = [row for row in rows if not self.device.matches(row)]
                there = self.on_disk(aside)
                seen = {_row_key(row) for row in there}
                results.write_csv(aside, there + [row for row in foreign if _row_key(row) not in seen])
                results.write_csv(path, [row for row in rows if self.device.matches(row)])
        except OSError as e:
            raise KernelgenError(f"{aside}: cannot write ({e.strerror or e}); {path} is as it was") from None
        return aside, len(foreign)

    def _list_remeasure(self, kernels: list) -> str:
        """How to measure ``kernels`` (every kernel of the rows a plan would lose) again: a list of
        them written to ``remeasure`` for KERNELS=@, where there is one; and TOP=listed, where every
        one of them is listed."""
        where = "scons profile TOP=listed without KERNELS=, where they are all listed kernels"
        if self.remeasure is None:
            return where
        try:  # in BUILD, beside the manifest: in the build's record, so that scons -c removes it
            outputs.write(outputs.Record(self.remeasure.parent), self.remeasure, "".join(f"{name}\n" for name in kernels))
        except (OSError, KernelgenError) as e:
            return f"{where}; the list of them could not be written to {self.remeasure}: {one_line(e)}"
        return f"{len(kernels)} kernels: scons profile TOP=all KERNELS=@{self.remeasure}; or {where}"

    def on_disk(self, path: Path) -> list[dict]:
        """The rows of a CSV of this GPU's folder as they are now (none if there is no file)."""
        if inputs.file_kind(path) == "missing":
            return []
        return results.read_rows(path, self.results_dir.name)

    # ---- running ----------------------------------------------------------------------------
    def write_jobs(self, states: list[WorkloadState], path: Path) -> None:
        lines = []
        for s in states:
            if not s.pending:
                continue
            lines.append(op_of(s.problem).job_line(s.problem))
            lines.extend(f"kernel {name} {self.kernels[name]['tolerance']}"
                         + (f" {s.settings[name].replace(' ', ',')}" if s.settings.get(name) else "")
                         for name in s.pending)
        path.write_text("\n".join(lines) + "\n")

    def row(self, problem, kernel: str, status: str, **values) -> dict:
        info = self.kernels[kernel]
        row = {c: None for c in results.COLUMNS}
        row.update(workload=problem.name, kernel=kernel, status=status, family=info["family"],
                   kernel_hash=info["hash"], gpu=self.device.gpu, driver=self.device.driver,
                   cuda=self.device.cuda, cutlass=self.device.cutlass, timing=self.device.timing,
                   measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), device=self.device.device)
        row.update(values)
        return row

    def record(self, state: WorkloadState, row: dict) -> None:
        state.pending.remove(row["kernel"])
        state.new.append(row)
        self.done_pairs += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done_pairs * (self.total_pairs - self.done_pairs)
        timing = f"{row['runtime_ms']:.4f} ms" if row["status"] == "ok" else row["status"]
        self.log(f"  [{self.done_pairs}/{self.total_pairs}, ~{_duration(left)} left] {timing:>11}  {row['kernel']}")
        if not state.pending:
            self.flush(state)

    def flush(self, state: WorkloadState, partial: bool = False) -> None:
        """Write what ``state`` measured into its CSV as the file is now (``merged``). A ``partial``
        write (an interrupted workload) keeps the rows still to be replaced; a file holding rows of
        another stack is left as it was until the workload is done."""
        if not state.new:
            return
        try:
            with results.locked(self.results_dir):
                on_disk = self.on_disk(state.csv_path)
                foreign = sum(1 for row in on_disk if not self.device.matches(row))
                if partial and foreign and state.pending:
                    self.log(f"  {state.csv_path}: left as it was ({foreign} row(s) of another stack); "
                             f"{len(state.new)} new measurement(s) of this workload are not saved")
                    return
                results.write_csv(state.csv_path, self.merged(on_disk, state.new))
        except OSError as e:
            raise KernelgenError(f"{state.csv_path}: cannot write ({e.strerror or e}); the file is as it "
                                 "was before") from None
        state.kept, state.new = state.kept + state.new, []

    def merged(self, on_disk: list, new: list) -> list:
        """``new`` and the rows of ``on_disk`` it leaves. A new row replaces the row of its (workload,
        kernel); rows of another stack go (``flush`` writes over them only once the workload is
        done), but for kernels not in this build, which another run put there meanwhile. Every
        other row stays: a row of changed code until it is measured again, a row of another run."""
        fresh = {(row["workload"], row["kernel"]) for row in new}
        mine = self.kernels if self.only is None else self.only  # another GPU's process replaces its own
        stays = [row for row in on_disk if (row["workload"], row["kernel"]) not in fresh
                 and (self.device.matches(row) or row["kernel"] not in mine)]
        return stays + new

    def result_row(self, state: WorkloadState, fields: list[str]) -> dict:
        # result WORKLOAD KERNEL STATUS RUNTIME MIN MAX ITERATIONS REL_L2 REL_MAX MESSAGE [SM_MHZ POWER_W [SETTING]]
        status, kernel = fields[3], fields[2]
        clock, power = (_reading(fields[11]), _reading(fields[12])) if len(fields) > 12 else (None, None)
        setting = fields[13] if len(fields) > 13 and fields[13] != "-" else ""
        numbers = [float(x) for x in fields[4:10]]
        runtime, low, high, iterations, rel_l2, rel_max = numbers
        ok = status == "ok"
        return self.row(
            state.problem, kernel, status,
            runtime_ms=runtime if ok else None, min_ms=low if ok else None, max_ms=high if ok else None,
            iterations=iterations if ok else None,
            gflops=state.problem.flops / (runtime * 1e6) if ok else None,
            rel_l2_error=_finite(rel_l2), rel_max_error=_finite(rel_max),  # the message says how far off
            message="" if fields[10] == "-" else fields[10],
            sm_clock_mhz=clock if ok else None, power_w=power if ok else None, setting=setting if ok else "")

    def run(self, states: list[WorkloadState]) -> None:
        by_name = {s.problem.name: s for s in states}
        self.total_pairs = sum(len(s.pending) for s in states)
        with self.measuring(), tempfile.TemporaryDirectory() as tmp:
            jobs = Path(tmp) / "jobs.txt"
            while any(s.pending for s in states):
                self.write_jobs(states, jobs)
                proc = ProfilerProcess([str(self.profiler), "--jobs", str(jobs), *self.extra_args])
                try:
                    self.consume(proc, by_name)
                finally:
                    proc.kill()

    def consume(self, proc: ProfilerProcess, by_name: dict) -> None:
        current = None  # (state, kernel) begun but without a result yet
        while True:
            fields = proc.next_record(self.timeout)
            if fields is None:  # silence: the kernel (or the reference) hangs
                proc.kill()
                if current is None:
                    raise KernelgenError(f"the profiler stopped answering for {self.timeout:.0f} s "
                                         "outside any kernel")
                state, kernel = current
                self.record(state, self.row(state.problem, kernel, "timeout",
                                            message=f"no answer within {self.timeout:.0f} s"))
                return
            if not fields:  # the process ended
                description = proc.exit_description()
                if current is not None:
                    state, kernel = current
                    self.record(state, self.row(state.problem, kernel, "crashed", message=description))
                    return
                if proc.proc.returncode == CRASHED_EXIT or not any(s.pending for s in by_name.values()):
                    return  # after a reported crash a fresh process takes the remaining jobs
                raise KernelgenError(f"{description} before finishing its jobs")
            tag = fields[0]
            if tag == "begin":
                current = (by_name[fields[1]], fields[2])
            elif tag == "result":
                state = by_name[fields[1]]
                self.record(state, self.result_row(state, fields))
                current = None
            elif tag == "workload":
                state = by_name[fields[1]]
                self.log(f"{state.problem.name}: {len(state.pending)} kernel(s) to profile, "
                         f"{fields[2]} operand set(s), reference {fields[3]} ms")
            elif tag == "fatal":
                raise KernelgenError(f"profiler: {fields[1] if len(fields) > 1 else 'fatal error'}")


def _finite(value: float):
    """An error as recorded: an output with inf or NaN in it has no finite error (None, empty)."""
    return value if math.isfinite(value) else None


def gpu_key() -> str:
    """Which GPU the profiler runs on, as a file name: CUDA's device 0, the first entry of
    CUDA_VISIBLE_DEVICES (an index or a UUID) when set, else 0."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return re.sub(r"[^A-Za-z0-9-]", "_", visible)[:80] or "0"


@contextlib.contextmanager
def gpu_lock(log=print):
    """Hold the GPU the profiler runs on (``gpu_key``) against every other process on this machine,
    whatever its results folder: timings taken while another run times kernels on the same GPU
    would measure both. A lock file in the system's temporary folder, locked with flock, so that
    the lock goes with the process that holds it, however it ends; it holds that process's pid,
    which a run that waits names."""
    key = gpu_key()
    path = Path(tempfile.gettempdir()) / f"kernelgen-profile-gpu-{key}.lock"
    fd = _open_lock(path)
    try:
        inputs.lock_exclusively(fd, lambda pid: log(f"waiting for the profile run (pid {one_line(pid)}) on GPU "
                                                    f"{key} ..."))
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_lock(path: Path) -> int:
    """The GPU's lock file, made readable and writable by every user (runs of several users share
    a GPU); read-only where another user's cannot be written, which locks all the same."""
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            return os.open(path, os.O_RDONLY)
    except OSError as e:
        raise KernelgenError(f"{path}: cannot open the GPU's lock file ({e.strerror or e})") from None
    if os.fstat(fd).st_uid == os.getuid():
        os.fchmod(fd, 0o666)
    return fd


def _stack(row: dict) -> str:
    return (f"GPU {row['gpu']}, driver {row['driver']}, CUDA {row['cuda']}, CUTLASS {row['cutlass']}, "
            f"timed by {row.get('timing') or results.UNRECORDED_TIMING}")


def _reading(text: str) -> float | None:
    """An NVML reading of the profiler's result line: None where it is unknown (negative, not a
    number)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def device_of(profiler: Path, driver: str, extra_args=()) -> Device:
    """The profiler's device line, as it reports with ``extra_args`` (they say how it times)."""
    out = subprocess.run([str(profiler), "--device", *extra_args], capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == "device":
            return parse_device_line(fields, driver)
        if fields[0] == "fatal":
            raise NoGpuError(fields[1])
    raise KernelgenError(f"{profiler} --device printed no device line (status {out.returncode}): "
                         f"{out.stderr.strip()}")


def load_set_of(workloads, sets_dir, resolved_file=None) -> tuple:
    """(set name, workload file, problems): from the set SConstruct resolved (``resolved_file``,
    BUILD/workloads.json), else from the workload file or set ``workloads`` names."""
    if resolved_file is not None:
        return resolved.load(resolved_file)
    return load_workloads(workloads, sets_dir)


def list_gpus() -> list:
    """(index, name, uuid) of every GPU nvidia-smi sees; NoGpuError when there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise NoGpuError("no NVIDIA driver here (nvidia-smi not found)")
    out = subprocess.run([smi, "--query-gpu=index,name,uuid", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60)
    gpus = [tuple(f.strip() for f in line.split(",")) for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not gpus or any(len(g) != 3 for g in gpus):
        raise NoGpuError(f"nvidia-smi lists no GPU: {(out.stderr or out.stdout).strip() or 'no output'}")
    return gpus


def choose_gpus(requested: str) -> list:
    """GPUS= (``all`` or comma-separated indices) as the (index, name, uuid) of each, all of one
    model (a set's rows come from one GPU model: the CSVs of another go to another folder)."""
    gpus = list_gpus()
    by_index = {g[0]: g for g in gpus}
    wanted = list(by_index) if requested == "all" else [p.strip() for p in requested.split(",") if p.strip()]
    missing = [w for w in wanted if w not in by_index]
    if missing or not wanted or len(set(wanted)) != len(wanted):
        raise KernelgenError(f"GPUS={shorten(requested)!r}: expected 'all' or distinct indices of this machine's GPUs "
                             f"({', '.join(f'{i}: {n}' for i, n, _ in gpus)})")
    chosen = [by_index[w] for w in wanted]
    models = sorted({name for _, name, _ in chosen})
    if len(models) > 1:
        raise KernelgenError(f"GPUS={shorten(requested)!r} mixes GPU models ({', '.join(models)}): a set's results are one "
                             "model's; profile each model's GPUs in a run of its own")
    return chosen


def device_label() -> str:
    """The GPU the profiler runs on, "<index> <uuid>": CUDA's device 0, the first entry of
    CUDA_VISIBLE_DEVICES (an index or a UUID) when set; as much of it as nvidia-smi says."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    try:
        gpus = list_gpus()
    except (NoGpuError, OSError, subprocess.TimeoutExpired):
        return one_line(visible)[:80]
    for index, _, uuid in gpus:
        if visible in (index, uuid):
            return f"{index} {uuid}"
    return one_line(visible)[:80]


def balance(kernels: list, pairs: dict, count: int) -> list:
    """``kernels`` (names) shared among ``count`` processes so that each has about as many pairs
    to measure (``pairs``: kernel -> pending pairs; a pair's timing takes about the same wall time
    whatever the kernel, 20 batches of about 1 ms): the most pairs first, each to the process with
    the fewest so far (ties: the lower index, then the name). Each share sorted by name."""
    shares, loads = [[] for _ in range(count)], [0] * count
    for name in sorted(kernels, key=lambda k: (-pairs.get(k, 0), k)):
        least = min(range(count), key=lambda i: (loads[i], i))
        shares[least].append(name)
        loads[least] += pairs.get(name, 0)
    return [sorted(share) for share in shares]


def pending_pairs(manifest_path, profiler, workloads, sets_dir, results_root, extra_args, resolved_file,
                  old_rows="") -> dict:
    """Kernel -> the pairs a run would measure (``Runner.plan`` on the CSVs as they are now; with
    ``old_rows="aside"``, the rows of another stack it would lose moved aside first)."""
    manifest = json.loads(Path(manifest_path).read_text())
    set_name, _, problems = load_set_of(workloads, sets_dir, resolved_file)
    _, driver = query_gpu()
    device = device_of(profiler, driver, list(extra_args))
    # silent (each GPU's process says what it plans) but for the rows it moves aside, which no process sees after
    runner = Runner(manifest, profiler, results.gpu_dir(results_root, set_name, device.gpu), 0, [],
                    lambda m: print(m, flush=True) if m.endswith("(OLD_ROWS=aside)") else None)
    runner.device = device
    runner.old_rows = old_rows
    counts = {}
    for state in runner.plan(problems):
        for name in state.pending:
            counts[name] = counts.get(name, 0) + 1
    return counts


PROGRESS = re.compile(r"^(\s*)\[(\d+)/(\d+), ~[^\]]*\](.*)$")


class Progress:
    """One progress count and ETA over the GPUs of a GPUS= run: a driver's line
    ``  [done/total, ~t left] ...`` (``Runner.record``) becomes ``  [done/total of all GPUs, ~T left]
    ...``, T the longest of the GPUs' times left at their own pace so far. Other lines pass as they
    are. Thread-safe: one pump thread a GPU."""

    def __init__(self, started: float, planned: dict):
        self.started = started
        self.counts = {index: (0, total) for index, total in planned.items()}  # GPU index -> (done, total)
        self.lock = threading.Lock()

    def line(self, index, text: str, now: float) -> str:
        match = PROGRESS.match(text)
        if not match:
            return text
        indent, done, total, rest = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        with self.lock:
            self.counts[index] = (done, total)
            elapsed = max(now - self.started, 1e-9)
            left = max((t - d) * elapsed / d for d, t in self.counts.values() if d)
            all_done = sum(d for d, _ in self.counts.values())
            all_total = sum(t for _, t in self.counts.values())
        return f"{indent}[{all_done}/{all_total} on {len(self.counts)} GPUs, ~{_duration(left)} left]{rest}"


def profile_on_gpus(gpus: list, argv: list, kernels: list, pairs: dict, log=print) -> int:
    """One driver process per GPU (CUDA_VISIBLE_DEVICES), each measuring its share of ``kernels``
    (``balance``d by their pending ``pairs``) with this run's ``argv``; their rows join the same CSVs
    under the results folder's lock. Each line they print is shown with its GPU; the status is the
    first failure's, else 0."""
    shares = balance(kernels, pairs, len(gpus))
    planned = {index: sum(pairs.get(k, 0) for k in share) for (index, _, _), share in zip(gpus, shares) if share}
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for (index, name, uuid), share in zip(gpus, shares):
            if not share:
                continue
            only = Path(tmp) / f"gpu{index}.txt"
            only.write_text("".join(f"{k}\n" for k in share))
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=index)
            cut = argv.index("--") if "--" in argv else len(argv)  # before the profiler's own arguments
            command = [sys.executable, "-m", "kernelgen.profile", *argv[:cut], "--only", str(only), *argv[cut:]]
            proc = subprocess.Popen(command, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
            log(f"GPU {index} ({name}, {uuid}): {len(share)} of the {len(kernels)} kernels, "
                f"{planned[index]} pair(s) to measure")
            procs.append((index, proc))
        done = queue.Queue()
        progress = Progress(time.monotonic(), planned)

        def pump(index, proc):
            for line in proc.stdout:
                log(f"[GPU {index}] {progress.line(index, line.rstrip(), time.monotonic())}")
            done.put((index, proc.wait()))

        threads = [threading.Thread(target=pump, args=p, daemon=True) for p in procs]
        for t in threads:
            t.start()
        try:
            statuses = [done.get() for _ in procs]
        finally:  # interrupted (SIGTERM, Ctrl-C): each GPU's driver saves what it finished and stops too
            for _, proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for _, proc in procs:
                proc.wait()
    failed = [(i, s) for i, s in statuses if s != 0]
    return failed[0][1] if failed else 0


def profile(manifest_path, profiler, workloads, sets_dir, results_root, timeout=120.0, extra_args=(), log=print,
            resolved_file=None, shard=None, only=None, catalog=None, old_rows="", early=False):
    """Measure what the set's CSVs lack of the build's (workload, kernel) pairs. ``catalog``, where
    given, is a function of the set's problems returning the names of every kernel a build of this
    checkout can hold: a plan refused for rows of another stack says which of their kernels no build
    can measure again. ``old_rows="aside"``: such rows move to the GPU folder's ASIDE folder instead,
    and the plan goes on. ``early``: an early stage of a build's profile (a part of its kernels,
    measured while the others compile), which leaves the workloads holding rows of another stack to
    the build's whole profile."""
    manifest = json.loads(Path(manifest_path).read_text())
    set_name, workload_file, problems = load_set_of(workloads, sets_dir, resolved_file)
    left_out = set(manifest.get("left_out", ()))  # a build narrowed by KERNELS= serves none of these
    problems = [p for p in problems if p.name not in left_out]
    # a shard's kernels (SHARD=) and a part of the build's (those with pairs still to measure,
    # commands.profiler_plan) serve the workloads they serve; the others are other shards' or measured
    if shard is None and not manifest.get("part"):
        check_served(problems, manifest["kernels"].values(), workload_file)  # before the GPU is asked anything
    _, driver = query_gpu()
    device = device_of(profiler, driver, list(extra_args))
    if not results.gpu_slug(device.gpu):
        raise KernelgenError(f"the profiler names the GPU {device.gpu!r}, which gives no folder name for its results")
    # the folder of the GPU each row names, so that the header build finds them alike
    runner = Runner(manifest, profiler, results.gpu_dir(results_root, set_name, device.gpu), timeout,
                    list(extra_args), log)
    runner.device = device
    runner.remeasure = Path(manifest_path).with_name(f"remeasure-{set_name}.txt")
    runner.old_rows = old_rows
    runner.early = early
    if catalog is not None:
        runner.catalog = lambda: catalog(problems)
    device.device = device_label()
    if only is not None:
        runner.only = set(only)
    log(f"profiling {len(problems)} workload(s) of {workload_file} x {len(manifest['kernels'])} kernel(s) "
        f"on {device.gpu} (driver {driver}, CUDA {device.cuda}, CUTLASS {device.cutlass}; timed by {device.timing})")
    with runner.measuring():  # planned once the GPU is ours: what a run before this one measured is kept
        states = runner.plan(problems)
        up_to_date = sum(1 for s in states if not s.pending)
        if up_to_date:
            log(f"{up_to_date} workload(s) already measured for every kernel of this build they are measured with")
        try:
            runner.run(states)
        finally:
            for state in states:
                try:
                    runner.flush(state, partial=True)  # keep what an interrupted workload measured so far
                except KernelgenError as e:
                    log(f"  {e}")
    log(f"profiled {runner.done_pairs} (workload, kernel) pair(s) in {_duration(time.monotonic() - runner.started)}; "
        f"results in {runner.results_dir}")


MIN_TIMEOUT, MAX_TIMEOUT = 1.0, 86400.0
_SECONDS = re.compile(r"^[0-9]+(?:\.[0-9]*)?$|^\.[0-9]+$")


def parse_timeout(text: str, what: str = "PROFILE_TIMEOUT") -> float:
    """Seconds of silence before a kernel is a timeout: a plain decimal from a second (a shorter
    silence is a kernel still starting, not a hang) to a day."""
    value = float(text) if _SECONDS.match(str(text).strip()) else math.nan
    if not MIN_TIMEOUT <= value <= MAX_TIMEOUT:
        raise KernelgenError(f"{what}={shorten(text)!r}: expected a number of seconds from {MIN_TIMEOUT:.0f} "
                             f"to {MAX_TIMEOUT:.0f}")
    return value


def seconds(text: str) -> float:
    """argparse's type for --timeout."""
    try:
        return parse_timeout(text, "--timeout")
    except KernelgenError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def set_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments the tools that run the profiler on a set take (python -m kernelgen.profile and
    kernelgen.compare): the build's manifest and profiler, the set, the results root."""
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--profiler", required=True)
    parser.add_argument("--workloads", help="set name or workload file")
    parser.add_argument("--sets-dir", help="where named sets are (with --workloads)")
    parser.add_argument("--resolved", help="the set as SConstruct resolved it (BUILD/workloads.json), "
                                           "instead of --workloads and --sets-dir")
    parser.add_argument("--results", required=True, help="results root; CSVs go to RESULTS/<set>/<gpu>/")
    return parser


def parse_set_arguments(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """``parser``'s arguments, the set given one way (``set_arguments``) or refused."""
    args = parser.parse_args(argv)
    if (args.resolved is None) == (args.workloads is None or args.sets_dir is None):
        parser.error("give either --resolved, or --workloads and --sets-dir")
    return args


def main(argv=None) -> int:
    parser = set_arguments(argparse.ArgumentParser(prog="python -m kernelgen.profile",
                                                   description=__doc__.split("\n\n")[0]))
    parser.add_argument("--timeout", type=seconds, default=120.0,
                        help="seconds of silence before a kernel is a timeout")
    parser.add_argument("--shard", help="i/n: the build holds this shard's kernels only (SHARD=)")
    parser.add_argument("--gpus", help="'all' or indices: one process per GPU, each measuring its share (GPUS=)")
    parser.add_argument("--only", help="a file of the kernels this process measures (one per line)")
    parser.add_argument("--specs", help="the families' specs (with --spaces: which kernels a build can hold)")
    parser.add_argument("--spaces", help="the generated spaces' files")
    parser.add_argument("--old-rows", choices=["aside"], default="",
                        help="aside: move rows of another stack the build would not measure again to <gpu>/aside/ (OLD_ROWS=)")
    parser.add_argument("--early", action="store_true",
                        help="an early stage of a build's profile: workloads with rows of another stack are left to "
                             "the whole profile")
    parser.add_argument("profiler_args", nargs="*", help="passed to the profiler (after --)")
    args = parse_set_arguments(parser, argv)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.gpus:
            gpus = choose_gpus(args.gpus)
            if len(gpus) > 1:
                kernels = sorted(json.loads(Path(args.manifest).read_text())["kernels"])
                pairs = pending_pairs(args.manifest, args.profiler, args.workloads, args.sets_dir, args.results,
                                      args.profiler_args, args.resolved, args.old_rows)
                rest = list(argv if argv is not None else sys.argv[1:])
                at = rest.index("--gpus")
                del rest[at:at + 2]
                return profile_on_gpus(gpus, rest, kernels, pairs, log=lambda m: print(m, flush=True))
            os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0][0]
        only = Path(args.only).read_text().split() if args.only else None
        catalog = None
        if args.specs and args.spaces:
            def catalog(problems):
                from .catalog import kernel_catalog
                return {k.name for k in kernel_catalog(Path(args.specs), Path(args.spaces), problems)}
        profile(args.manifest, args.profiler, args.workloads, args.sets_dir, args.results, args.timeout,
                args.profiler_args, log=lambda m: print(m, flush=True), resolved_file=args.resolved,
                shard=args.shard, only=only, catalog=catalog, old_rows=args.old_rows, early=args.early)
    except NoGpuError as e:
        print(f"scons profile: no CUDA GPU is usable here ({e}). Profiling needs one; "
              "`scons best_kernels.h` builds the header from the results already measured.", file=sys.stderr)
        return 2
    except KernelgenError as e:
        print(f"scons profile: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a temporary file on a full disk, say
        print(f"scons profile: {one_line(e.filename or '')}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scons profile: interrupted; finished workloads are saved, run the same command to resume",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
