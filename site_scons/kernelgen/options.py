"""The command-line variables of SConstruct and what they resolve to.

Every value is checked here, before anything is built: no control characters, numbers as
plain ASCII decimals, flags with balanced quotes, and a BUILD folder that ``scons -c`` may
empty (never the project, a folder above it, or one holding RESULTS or SPECS). A path a user
gives reaches SCons only with ``$`` escaped (``scons_text``), so SCons never expands it.
"""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from SCons.Script import Variables

from . import importer
from . import inputs
from . import plan as plan_module
from . import resolved
from .arch import Arch, parse_arch
from .errors import KernelgenError, ResultsError, one_line
from .ops import check_header_keys, check_served
from .profile import NoGpuError, parse_timeout, query_gpu
from .results import choose_gpu
from .signature import cutlass_version
from .targets import DEFAULT_ARCH
from .workloads import load_workloads

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NVCCFLAGS = "-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr"


def default_cutlass_root() -> str:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return str(Path(list(spec.submodule_search_locations)[0]) / "source")


def variables(arguments) -> Variables:
    v = Variables(None, arguments)
    v.AddVariables(
        ("WORKLOADS", "workload set name (kernel_specs/workloads/NAME.txt) or a workload file", "resnet50"),
        ("KERNELS", "comma-separated globs over kernel names (@FILE: globs listed in FILE); "
                    "only these are built and profiled", "*"),
        ("ARCH", "GPU target to compile for: 80, 90, 90a, ... (sm90 kernels need 90a)", DEFAULT_ARCH),
        ("CUTLASS", "CUTLASS source root holding include/ and tools/util/include/ "
                    "(default: the nvidia-cutlass package)", default_cutlass_root()),
        ("NVCC", "the CUDA compiler", "nvcc"),
        ("NVCCFLAGS", "flags for every nvcc compile", DEFAULT_NVCCFLAGS),
        ("SPECS", "directory of kernel family specs (*.toml)", "kernel_specs/families"),
        ("RESULTS", "root of the profile results; CSVs go to RESULTS/<set>/<gpu>/", "profile_results"),
        ("BUILD", "directory for generated sources, objects, the profiler and the header", "generated"),
        ("PROFILE_TIMEOUT", "seconds a kernel may run silent before it counts as a timeout", "30"),
        ("PROFILE_ARGS", "extra profiler arguments, e.g. '--repeats 30 --batch-ms 2'", ""),
        ("MODEL", "scons workloads: a torchvision model name (resnet50) or package.module:factory", ""),
        ("BATCH", "scons workloads: the batch size", "1"),
        ("INPUT", "scons workloads: the input's CxHxW", importer.DEFAULT_INPUT),
        ("DTYPE", f"scons workloads: what the layers are profiled as ({' or '.join(importer.DTYPES)})",
         importer.DEFAULT_DTYPE),
        ("NAME", "scons workloads: the set's name (default <model>_b<batch>)", ""),
        ("GPU", "GPU whose results best_kernels.h is built from, a name or its folder name (nvidia_h200); "
                "default: this machine's GPU, else the only GPU with results", ""),
    )
    return v


def scons_text(text) -> str:
    """``text`` as SCons must be given it to keep it as it is: ``$`` doubled, so that a path such
    as ``${...}`` is never substituted (which would run Python)."""
    return str(text).replace("$", "$$")


def help_text(variables_: Variables, env) -> str:
    return ("Targets:\n"
            "  profile          build the profiler, then verify and time every kernel on every workload (GPU)\n"
            "  best_kernels.h   merge RESULTS/<set>/<gpu>/*.csv into BUILD/best_kernels.h (the default)\n"
            "  compare          time the chosen kernels, cuDNN and the floor side by side (GPU, PyTorch)\n"
            "  profiler         build the profiler only\n"
            "  workloads        record MODEL's convolutions and linear layers at BATCH, INPUT into\n"
            "                   kernel_specs/workloads/<model>_b<batch>.txt (PyTorch and torchvision;\n"
            "                   no CUTLASS, nvcc or GPU; run alone)\n"
            "  -c               remove what the build made (never the results)\n\n"
            "Variables (NAME=value):\n" + "".join(
                # As Variables.GenerateHelpText, without substituting the values (a value is data).
                variables_.FormatVariableHelpText(env, o.key, o.help, o.default,
                                                  one_line(env[o.key]) if o.key in env else None, o.aliases)
                for o in variables_.options))


def child_environment() -> dict:
    """The environment commands run in: this one's PATH and library path, and kernelgen importable."""
    env = {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH", "HOME", "CUDA_VISIBLE_DEVICES") if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "site_scons"), os.environ.get("PYTHONPATH")]))
    return env


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
    templates_dir: Path
    profiler_dir: Path
    results_dir: Path | None  # RESULTS/<set>/<gpu>/, the CSVs best_kernels.h is built from
    build_dir: str  # BUILD as SCons is given it (absolute, $ escaped)
    profile_timeout: float
    profile_args: list
    toolchain_version: str
    results_root: Path = None  # RESULTS
    build_path: Path = None  # BUILD, resolved
    header_error: str | None = None  # why no GPU's results can be chosen (reported if the header is built)


def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return "nvcc not found"
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    return lines[-1] if lines else "unknown nvcc"


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def check_values(env, keys) -> None:
    """No variable holds a control character (a newline would reach a command or a comment)."""
    for key in keys:
        bad = _CONTROL.search(str(env[key]))
        if bad:
            raise KernelgenError(f"{key}={env[key]!r}: holds the control character {bad.group()!r}")


def split_flags(env, key) -> list:
    try:
        return shlex.split(env[key])
    except ValueError as e:
        raise KernelgenError(f"{key}={env[key]!r}: {e} (quote as in a shell)") from None


def _path(env, key, root: Path) -> Path:
    if not str(env[key]).strip():
        raise KernelgenError(f"{key}= is empty: it names a folder")
    return (root / env[key]).resolve()


def check_build_dir(build: Path, root: Path, keep: dict, given: str) -> None:
    """Refuse a BUILD that ``scons -c`` must not empty, or where the build cannot write its files:
    the project or a folder above it; one holding, or inside, a folder of ``keep`` (name -> path:
    RESULTS, SPECS, the project's sources); a file; outputs of the wrong kind."""
    shown = f"BUILD={given}"
    if build == root or build in root.parents:
        raise KernelgenError(f"{shown} is the project or a folder above it ({build}); the build's folder holds "
                             "only what the build makes (scons -c empties it): name a folder of its own")
    for name, path in keep.items():
        if build == path or build in path.parents:
            raise KernelgenError(f"{shown} holds {name} ({path}); the build's folder holds only what the build "
                                 "makes (scons -c empties it): name a folder of its own")
        if path in build.parents:
            raise KernelgenError(f"{shown} is inside {name} ({path}): name a folder of its own")
    kind = inputs.file_kind(build)
    if kind not in ("missing", "a directory"):
        raise KernelgenError(f"{shown} is {kind or 'a file'}, not a folder")
    for name, wanted in (("best_kernels.h", None), ("profiler", None), ("kernels.json", None), ("workloads.json", None),
                         ("manifest.cu", None), ("kernels", "a directory"), ("obj", "a directory"),
                         ("obj/driver", "a directory")):
        kind = inputs.file_kind(build / name)
        if kind not in ("missing", wanted):
            raise KernelgenError(f"{shown}: {build / name} is {kind or 'a file'}; the build writes "
                                 f"{'a folder' if wanted else 'a file'} there")


def machine_gpu() -> str | None:
    """This machine's GPU (nvidia-smi), or None without one."""
    try:
        return query_gpu()[0]
    except NoGpuError:
        return None


def resolve(env) -> Config:
    root = ROOT
    check_values(env, [key for key in ("WORKLOADS", "KERNELS", "ARCH", "CUTLASS", "NVCC", "NVCCFLAGS", "SPECS",
                                       "RESULTS", "BUILD", "PROFILE_TIMEOUT", "PROFILE_ARGS", "GPU") if key in env])
    if "$" in env["NVCC"]:
        raise KernelgenError(f"NVCC={env['NVCC']!r}: a '$' in the compiler's path is refused (SCons expands the "
                             "first word of a command once more to find the program)")
    if not str(env["ARCH"]).isascii():
        raise KernelgenError(f"ARCH={env['ARCH']!r}: expected a compute capability such as 80, 90 or 90a")
    cutlass_root = Path(env["CUTLASS"]) if env["CUTLASS"] else None
    if cutlass_root is None or inputs.file_kind(cutlass_root / "include" / "cutlass" / "cutlass.h") is not None:
        raise KernelgenError(f"CUTLASS={env['CUTLASS'] or '(unset)'}: no CUTLASS headers there (expected "
                             "include/cutlass/cutlass.h); install nvidia-cutlass or set CUTLASS=")
    includes = [str(cutlass_root / "include"), str(cutlass_root / "tools" / "util" / "include")]
    set_name, workload_file, problems = load_workloads(env["WORKLOADS"], root / "kernel_specs" / "workloads")
    timeout = parse_timeout(env["PROFILE_TIMEOUT"])
    nvccflags, profile_args = split_flags(env, "NVCCFLAGS"), split_flags(env, "PROFILE_ARGS")
    results_root, specs_dir, build = _path(env, "RESULTS", root), _path(env, "SPECS", root), _path(env, "BUILD", root)
    check_build_dir(build, root, {"RESULTS": results_root, "SPECS": specs_dir,
                                  "kernel_specs": root / "kernel_specs", "profiler": root / "profiler",
                                  "site_scons": root / "site_scons"}, env["BUILD"])
    results_dir, header_error = None, None
    try:
        gpu = choose_gpu(results_root / set_name, env.get("GPU") or None, None if env.get("GPU") else machine_gpu())
        results_dir = results_root / set_name / gpu
    except ResultsError as e:
        header_error = str(e)
    cutlass = cutlass_version(includes[0])
    return Config(
        root=root, workloads=env["WORKLOADS"], set_name=set_name, workload_file=workload_file.resolve(),
        problems=problems, kernels=env["KERNELS"], arch=parse_arch(env["ARCH"]), cutlass_includes=includes,
        cutlass=cutlass, nvcc=env["NVCC"], nvccflags=nvccflags,
        specs_dir=specs_dir, templates_dir=root / "kernel_specs" / "templates",
        profiler_dir=root / "profiler", results_dir=results_dir,
        build_dir=scons_text(build), profile_timeout=timeout, profile_args=profile_args,
        toolchain_version=f"{_nvcc_version(env['NVCC'])}; CUTLASS {cutlass}",
        results_root=results_root, build_path=build, header_error=header_error)


def require_gpu(targets: list) -> None:
    try:
        query_gpu()
    except NoGpuError as e:
        raise KernelgenError(f"scons {' and '.join(targets)} needs a CUDA GPU, and none is usable here ({e}). "
                             "`scons best_kernels.h` builds the header from the results already measured.") from None


def build_plan(config: Config) -> plan_module.BuildPlan:
    flags = config.nvccflags + config.arch.gencode_flags()
    plan = plan_module.make_plan(config.specs_dir, config.templates_dir, config.profiler_dir, config.kernels,
                                 config.arch, flags, config.cutlass_includes[0])
    if not plan.kernels:
        raise KernelgenError(f"KERNELS={config.kernels!r} with ARCH={config.arch} selects no kernel of "
                             f"{config.specs_dir}")
    check_served(config.problems, plan.kernels, _shown(config.workload_file, config.root))
    check_header_keys(config.problems, _shown(config.workload_file, config.root))
    return plan


def stale_objects(plan: plan_module.BuildPlan, config: Config) -> list:
    build = config.build_path
    return plan_module.stale_objects(plan, build / "kernels", build / "obj")


RESOLVED_FILE = "workloads.json"  # BUILD/workloads.json: the set as resolved here, beside kernels.json


def resolved_workloads(config: Config) -> str:
    """The text of BUILD/workloads.json: the set's problems as parsed once here (op, dtype, count,
    line), which the profile driver, compare and the header builder read."""
    return resolved.as_json(config.set_name, _shown(config.workload_file, config.root), config.problems)


def _tool_command(module: str, config: Config, extra: list) -> str:
    """The command line of a kernelgen tool run on the built profiler (SOURCES[0]), manifest
    (SOURCES[1]) and resolved set (SOURCES[2]); every other word is quoted for the shell and
    escaped for SCons."""
    sources = ("${SOURCES[0]}", "${SOURCES[1]}", "${SOURCES[2]}")
    args = [sys.executable, "-m", module, "--manifest", sources[1], "--profiler", sources[0],
            "--resolved", sources[2], "--results", str(config.results_root), *extra]
    return " ".join(a if a in sources else scons_text(shlex.quote(a)) for a in args)


def profile_command(config: Config) -> str:
    extra = ["--timeout", str(config.profile_timeout)]
    if config.profile_args:
        extra += ["--", *config.profile_args]
    return _tool_command("kernelgen.profile", config, extra)


def compare_command(config: Config) -> str:
    return _tool_command("kernelgen.compare", config, [])


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise KernelgenError("scons compare needs PyTorch (pip install torch), which is not installed here; "
                             "it is needed for this target only")


def reduce_config(config: Config, plan: plan_module.BuildPlan) -> dict:
    """What the header builder reads (an env.Value: data, never substituted by SCons). With
    ``error``, no GPU's results could be chosen, and building the header reports it."""
    if config.header_error is not None:
        return {"error": config.header_error}
    return {"results": _shown(config.results_dir, config.root), "workload_file": str(config.workload_file),
            "resolved": str(config.build_path / RESOLVED_FILE),
            "specs": str(config.specs_dir), "templates": str(config.templates_dir),
            "project_includes": str(config.profiler_dir), "hashes": plan.hashes}


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to the project when inside it (so that generated text does not
    depend on where the project is checked out), else absolute."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def result_files(config: Config) -> list:
    """The CSVs the header reads that are regular files (SCons hashes each source: a FIFO would
    block it, a folder stop it). What is missing or not a file is reported by the reducer."""
    if config.results_dir is None:
        return []
    paths = (config.results_dir / f"{p.name}.csv" for p in config.problems)
    return [scons_text(p) for p in paths if inputs.file_kind(p) is None]


def header_dependencies(config: Config) -> list:
    package = Path(__file__).parent
    return sorted(scons_text(p) for p in [*config.templates_dir.glob("*.mako"), *config.specs_dir.glob("*.toml"),
                                          *package.rglob("*.py"), *config.profiler_dir.glob("*.h")]
                  if inputs.file_kind(p) is None)


def workloads_command(env, targets: list) -> str:
    """The command of `scons workloads`, its variables checked; it needs PyTorch (and torchvision
    for a model named by torchvision) and nothing the other targets need."""
    others = sorted(set(targets) - {"workloads"})
    if others:
        raise KernelgenError(f"scons workloads runs alone (also asked for: {', '.join(others)}); "
                             "profile the new set afterwards with WORKLOADS=<its name>")
    request = importer.parse_request(env["MODEL"], env["BATCH"], env["INPUT"], env["DTYPE"], env["NAME"])
    needed = ("torch",) if request.factory else ("torch", "torchvision")
    if any(importlib.util.find_spec(m) is None for m in needed):
        raise importer.NoTorchError(
            f"scons workloads needs {' and '.join('PyTorch' if m == 'torch' else m for m in needed)} "
            f"(pip install {' '.join(needed)}), not installed here; it is needed for this target only")
    args = [sys.executable, "-m", "kernelgen.importer", "--model", request.model, "--batch", str(request.batch),
            "--input", request.input_text, "--dtype", request.dtype, "--name", request.name,
            "--sets-dir", str(ROOT / "kernel_specs" / "workloads")]
    return " ".join(shlex.quote(a) for a in args)


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_TEMPORARY = r"\..+\.tmp"  # render.write_generated's, left by a killed write
_BUILD_FILES = {".": re.compile(_TEMPORARY), "kernels": re.compile(rf"{_IDENTIFIER}\.cu|{_TEMPORARY}"),
                "obj": re.compile(rf"{_IDENTIFIER}\.o"), "obj/driver": re.compile(rf"{_IDENTIFIER}\.o")}


def clean_files(config: Config) -> list:
    """What ``scons -c`` removes besides the targets it knows: the files the build made in BUILD
    under its own naming (kernel sources and objects of kernels no longer selected, temporaries
    of an interrupted write), each by name; never a folder, nothing else."""
    found = []
    for folder, pattern in _BUILD_FILES.items():
        try:
            entries = sorted((config.build_path / folder).iterdir())
        except OSError:
            continue
        found += [p for p in entries if pattern.fullmatch(p.name) and (p.is_symlink() or p.is_file())]
    return [scons_text(p) for p in found]
