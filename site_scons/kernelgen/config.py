"""What SConstruct's variables resolve to (``Config``), and the GPU whose results are used.

Every value is checked here, before anything is built: numbers as plain ASCII decimals, a
CUTLASS with readable headers, and a BUILD folder of the build's own (never the project, a folder
above it, or one holding RESULTS or SPECS). A message quotes a value by its ends only when it is
long (``errors.shorten``).
"""

import importlib.util
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import inputs, outputs
from .arch import Arch, parse_arch
from .errors import KernelgenError, ResultsError, shorten
from .cost_model import fitted_models, model_gpu
from .ops.common import ascii_integer
from .profile import NoGpuError, parse_timeout, query_gpu
from .results import choose_gpu
from .signature import cutlass_version
from .variables import DEFAULT_TOP, ROOT, check_values, scons_text, split_flags
from .vocab import VERIFY_TOLERANCE
from .workloads import load_workloads


@dataclass
class Config:
    root: Path
    workloads: str
    set_name: str
    workload_file: Path
    problems: list
    kernels: str
    arch: Arch
    cutlass_includes: list
    cutlass: str
    nvcc: str
    nvccflags: list
    specs_dir: Path
    spaces_dir: Path  # SPACES: the generated space's files
    top: object  # TOP: candidates per layer (int), or "listed" / "all"
    model_gpu: str | None  # the GPU (folder name) whose cost model ranks the candidates; None: none here
    model_borrowed: bool  # COST_MODEL= named it: another GPU's model may rank for this one
    templates_dir: Path
    profiler_dir: Path
    results_dir: Path | None  # RESULTS/<set>/<gpu>/, the CSVs best_kernels.h is built from
    build_dir: str  # BUILD as SCons is given it (absolute, $ escaped)
    profile_timeout: float
    profile_args: list
    toolchain_version: str
    results_root: Path = None  # RESULTS
    build_path: Path = None  # BUILD, resolved
    cache_path: Path | None = None  # CACHE, resolved; None: no shared cache
    cache_note: str | None = None  # why CACHE= is not used this run (a folder that cannot be written)
    shard: tuple | None = None  # SHARD=i/n as (i, n); None: every kernel
    gpus: str = ""  # GPUS=: 'all' or comma-separated indices; empty: the one GPU CUDA gives
    old_rows: str = ""  # OLD_ROWS=: "aside", or empty (a profile that would lose rows of another stack is refused)
    accumulate: tuple | None = None  # ACCUMULATE=: the accumulators a kernel may have; None: any
    header_error: str | None = None  # why no GPU's results can be chosen (reported if the header is built)


def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return "nvcc not found"
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    return lines[-1] if lines else "unknown nvcc"


def _path(env, key, root: Path) -> Path:
    if not str(env[key]).strip():
        raise KernelgenError(f"{key}= is empty: it names a folder")
    return (root / env[key]).resolve()


def check_build_dir(build: Path, root: Path, keep: dict, given: str, set_name: str = "") -> None:
    """Refuse a BUILD that is not the build's own, or where the build cannot write its files:
    the project or a folder above it; one holding, or inside, a folder of ``keep`` (name -> path:
    RESULTS, SPECS, the project's sources); a file; outputs of the wrong kind."""
    shown, build_shown = f"BUILD={shorten(given)}", shorten(build)
    if build == root or build in root.parents:
        raise KernelgenError(f"{shown} is the project or a folder above it ({build_shown}); the build's folder "
                             "holds only what the build makes: name a folder of its own")
    for name, path in keep.items():
        if build == path or build in path.parents:
            raise KernelgenError(f"{shown} holds {name} ({shorten(path)}); the build's folder holds only what the "
                                 "build makes: name a folder of its own")
        if path in build.parents:
            raise KernelgenError(f"{shown} is inside {name} ({shorten(path)}): name a folder of its own")
    kind = inputs.file_kind(build)
    if kind not in ("missing", "a directory"):
        raise KernelgenError(f"{shown} is {kind or 'a file'}, not a folder")
    header = [(f"{outputs.SETS_FOLDER}/{set_name}/{name}", None) for name in outputs.HEADER_FILES]
    for name, wanted in (*header, (outputs.SETS_FOLDER, "a directory"), ("profiler", None), ("kernels.json", None), ("workloads.json", None),
                         ("manifest.cu", None), (outputs.RECORD, None), (outputs.LOCK, None),
                         ("kernels", "a directory"), ("obj", "a directory"), ("obj/driver", "a directory")):
        kind = inputs.file_kind(build / name)
        if kind not in ("missing", wanted):
            raise KernelgenError(f"{shown}: {shorten(build / name)} is {kind or 'a file'}; the build writes "
                                 f"{'a folder' if wanted else 'a file'} there")


def parse_top(text) -> object:
    """TOP=: a positive integer (candidates per layer), ``listed`` or ``all``."""
    if text in ("listed", "all"):
        return text
    text = str(text)
    if len(text) > 6 or ascii_integer(text) < 1:
        raise KernelgenError(f"TOP={shorten(text)!r}: expected a positive integer (candidates per layer), "
                             "'listed' (every listed kernel) or 'all' (the whole space)")
    return int(text)


def machine_gpu() -> str | None:
    """This machine's GPU (nvidia-smi), or None without one."""
    try:
        return query_gpu()[0]
    except NoGpuError:
        return None


def resolve(env) -> Config:
    root = ROOT
    check_values(env, [key for key in ("WORKLOADS", "KERNELS", "ARCH", "CUTLASS", "NVCC", "NVCCFLAGS", "SPECS",
                                       "RESULTS", "BUILD", "PROFILE_TIMEOUT", "PROFILE_ARGS", "GPU", "COST_MODEL", "SPACES", "TOP", "CACHE", "SHARD", "GPUS", "OLD_ROWS", "ACCUMULATE")
                       if key in env])
    if "$" in env["NVCC"]:
        raise KernelgenError(f"NVCC={shorten(env['NVCC'])!r}: a '$' in the compiler's path is refused (SCons "
                             "expands the first word of a command once more to find the program)")
    if not str(env["ARCH"]).isascii():
        raise KernelgenError(f"ARCH={shorten(env['ARCH'])!r}: expected a compute capability such as 80, 90 or 90a")
    cutlass_root = Path(env["CUTLASS"]) if env["CUTLASS"] else None
    if cutlass_root is None or inputs.file_kind(cutlass_root / "include" / "cutlass" / "cutlass.h") is not None:
        raise KernelgenError(f"CUTLASS={shorten(env['CUTLASS']) or '(unset)'}: no CUTLASS headers there (expected "
                             "include/cutlass/cutlass.h); install nvidia-cutlass or set CUTLASS=")
    includes = [str(cutlass_root / "include"), str(cutlass_root / "tools" / "util" / "include")]
    set_name, workload_file, problems = load_workloads(env["WORKLOADS"], root / "kernel_specs" / "workloads")
    timeout = parse_timeout(env["PROFILE_TIMEOUT"])
    nvccflags, profile_args = split_flags(env, "NVCCFLAGS"), split_flags(env, "PROFILE_ARGS")
    results_root, specs_dir, build = _path(env, "RESULTS", root), _path(env, "SPECS", root), _path(env, "BUILD", root)
    spaces_dir, top = _path(env, "SPACES", root), parse_top(env.get("TOP", DEFAULT_TOP))
    check_build_dir(build, root, {"RESULTS": results_root, "SPECS": specs_dir,
                                  "SPACES": spaces_dir,
                                  "kernel_specs": root / "kernel_specs", "profiler": root / "profiler",
                                  "site_scons": root / "site_scons"}, env["BUILD"], set_name)
    results_dir, header_error = None, None
    machine = None if env.get("GPU") else machine_gpu()  # asked once (nvidia-smi)
    try:
        gpu = choose_gpu(results_root / set_name, env.get("GPU") or None, machine)
        results_dir = results_root / set_name / gpu
    except ResultsError as e:
        header_error = str(e)
    borrowed = borrowed_model(env.get("COST_MODEL", ""))
    cutlass = cutlass_version(includes[0])
    cache = check_cache_dir(env.get("CACHE", ""), root, build)
    cache_note = None
    if cache is not None:
        cache_note = unwritable(cache)
        if cache_note:
            cache_note, cache = f"CACHE={shorten(env['CACHE'])}: {cache_note}; building without the cache", None
    shard = parse_shard(env.get("SHARD", ""))
    gpus = str(env.get("GPUS", "")).strip()
    if gpus and gpus != "all" and not all(p.strip().isdigit() and p.strip().isascii() and len(p.strip()) <= 3
                                          for p in gpus.split(",")):
        raise KernelgenError(f"GPUS={shorten(gpus)!r}: expected 'all' or comma-separated GPU indices, e.g. GPUS=0,1")
    old_rows = str(env.get("OLD_ROWS", "")).strip()
    if old_rows not in ("", "aside"):
        raise KernelgenError(f"OLD_ROWS={shorten(old_rows)!r}: expected 'aside' (rows of another GPU stack that the "
                             "build would not measure again move to RESULTS/<set>/<gpu>/aside/) or nothing")
    accumulate = parse_accumulate(env.get("ACCUMULATE", ""))
    return Config(
        root=root, workloads=env["WORKLOADS"], set_name=set_name, workload_file=workload_file.resolve(),
        problems=problems, kernels=env["KERNELS"], arch=parse_arch(env["ARCH"]), cutlass_includes=includes,
        cutlass=cutlass, nvcc=env["NVCC"], nvccflags=nvccflags,
        specs_dir=specs_dir, spaces_dir=spaces_dir, top=top,
        model_gpu=borrowed or model_gpu(env.get("GPU") or None, machine), model_borrowed=borrowed is not None,
        templates_dir=root / "kernel_specs" / "templates",
        profiler_dir=root / "profiler", results_dir=results_dir,
        build_dir=scons_text(build), profile_timeout=timeout, profile_args=profile_args,
        toolchain_version=f"{_nvcc_version(env['NVCC'])}; CUTLASS {cutlass}",
        results_root=results_root, build_path=build, header_error=header_error, cache_path=cache, cache_note=cache_note,
        shard=shard, gpus=gpus, old_rows=old_rows, accumulate=accumulate)


def borrowed_model(text) -> str | None:
    """COST_MODEL=: the folder name of a GPU with a fitted cost model, refused if it has none; None
    when empty (the model of this machine's GPU, or GPU='s)."""
    text = str(text).strip()
    if not text:
        return None
    from .results import gpu_slug
    slug, fitted = gpu_slug(text), fitted_models()
    if slug not in fitted:
        raise KernelgenError(f"COST_MODEL={shorten(text)!r}: no cost model fitted for GPU {slug or '(no name)'} "
                             f"(fitted: {', '.join(fitted) or 'none'})")
    return slug


def parse_accumulate(text) -> tuple | None:
    """ACCUMULATE=: comma-separated accumulators (f32, f16) as a tuple; None when empty (any)."""
    text = str(text).strip()
    if not text:
        return None
    names = tuple(part.strip() for part in text.split(","))
    if not all(name in VERIFY_TOLERANCE for name in names):
        raise KernelgenError(f"ACCUMULATE={shorten(text)!r}: expected comma-separated accumulators of "
                             f"{', '.join(sorted(VERIFY_TOLERANCE))} (ACCUMULATE=f32: fp32 sums only)")
    return names


def parse_shard(text) -> tuple | None:
    """SHARD=i/n as (i, n), 0 <= i < n <= 100000; None when empty."""
    text = str(text)
    if not text.strip():
        return None
    index, slash, count = text.partition("/")
    if slash and 0 < len(index) <= 6 and 0 < len(count) <= 6 and index.isdigit() and count.isdigit() \
            and index.isascii() and count.isascii():
        i, n = ascii_integer(index), ascii_integer(count)
        if 0 <= i < n <= 100000:
            return i, n
    raise KernelgenError(f"SHARD={shorten(text)!r}: expected i/n with 0 <= i < n, e.g. SHARD=0/4 "
                         "(SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT)")


def check_cache_dir(given: str, root: Path, build: Path) -> Path | None:
    """CACHE= resolved (None when empty): a folder, or one to be made, outside BUILD (whose files
    are the build's own)."""
    if not str(given).strip():
        return None
    cache = (root / given).resolve()
    shown = f"CACHE={shorten(given)}"
    kind = inputs.file_kind(cache)
    if kind not in ("missing", "a directory"):
        raise KernelgenError(f"{shown} is {kind or 'a file'}, not a folder")
    if cache == build or build in cache.parents or cache in build.parents:
        raise KernelgenError(f"{shown} is BUILD, inside it or above it ({shorten(build)}): name a folder of its own")
    return cache


def unwritable(folder: Path) -> str | None:
    """None if ``folder`` takes a file (a missing one: if the folder it would be made in does);
    else why not, in a few words. Nothing is left behind: a probe file is made and removed."""
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot write there ({shorten(existing)} is no folder)"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".kernelgen-probe-"):
            pass
    except OSError as e:
        return f"cannot write there ({e.strerror or type(e).__name__})"
    return None


def require_gpu(targets: list) -> None:
    try:
        query_gpu()
    except NoGpuError as e:
        raise KernelgenError(f"scons {' and '.join(targets)} needs a CUDA GPU, and none is usable here ({e}). "
                             "`scons best_kernels.h` builds the header from the results already measured.") from None


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise KernelgenError("scons compare needs PyTorch (pip install torch), which is not installed here; "
                             "it is needed for this target only")
