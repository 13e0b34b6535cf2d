"""The command-line variables of SConstruct and what they resolve to."""

import importlib.util
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from SCons.Script import Variables

from . import importer
from . import plan as plan_module
from .arch import Arch, parse_arch
from .errors import KernelgenError
from .profile import NoGpuError, query_gpu
from .signature import cutlass_version
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
        ("ARCH", "GPU target to compile for: 80, 90, 90a, ... (sm90 kernels need 90a)", "90a"),
        ("CUTLASS", "CUTLASS source root holding include/ and tools/util/include/ "
                    "(default: the nvidia-cutlass package)", default_cutlass_root()),
        ("NVCC", "the CUDA compiler", "nvcc"),
        ("NVCCFLAGS", "flags for every nvcc compile", DEFAULT_NVCCFLAGS),
        ("SPECS", "directory of kernel family specs (*.toml)", "kernel_specs/families"),
        ("RESULTS", "root of the profile results; CSVs go to RESULTS/<set>/", "profile_results"),
        ("BUILD", "directory for generated sources, objects, the profiler and the header", "generated"),
        ("PROFILE_TIMEOUT", "seconds a kernel may run silent before it counts as a timeout", "30"),
        ("PROFILE_ARGS", "extra profiler arguments, e.g. '--repeats 30 --batch-ms 2'", ""),
        ("MODEL", "scons workloads: a torchvision model name (resnet50) or package.module:factory", ""),
        ("BATCH", "scons workloads: the batch size", "1"),
        ("INPUT", "scons workloads: the input's CxHxW", importer.DEFAULT_INPUT),
        ("DTYPE", f"scons workloads: what the layers are profiled as ({' or '.join(importer.DTYPES)})",
         importer.DEFAULT_DTYPE),
        ("NAME", "scons workloads: the set's name (default <model>_b<batch>)", ""),
    )
    return v


def help_text(variables_: Variables, env) -> str:
    return ("Targets:\n"
            "  profile          build the profiler, then verify and time every kernel on every workload (GPU)\n"
            "  best_kernels.h   merge RESULTS/<set>/*.csv into BUILD/best_kernels.h (the default)\n"
            "  compare          time the chosen kernels, cuDNN and the floor side by side (GPU, PyTorch)\n"
            "  profiler         build the profiler only\n"
            "  workloads        record MODEL's convolutions and linear layers at BATCH, INPUT into\n"
            "                   kernel_specs/workloads/<model>_b<batch>.txt (PyTorch and torchvision;\n"
            "                   no CUTLASS, nvcc or GPU; run alone)\n"
            "  -c               remove what the build made (never the results)\n\n"
            "Variables (NAME=value):\n" + variables_.GenerateHelpText(env))


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
    results_dir: Path
    build_dir: str
    profile_timeout: float
    profile_args: list
    toolchain_version: str


def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return "nvcc not found"
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    return lines[-1] if lines else "unknown nvcc"


def resolve(env) -> Config:
    root = ROOT
    cutlass_root = Path(env["CUTLASS"]) if env["CUTLASS"] else None
    if cutlass_root is None or not (cutlass_root / "include" / "cutlass" / "cutlass.h").is_file():
        raise KernelgenError(f"CUTLASS={env['CUTLASS'] or '(unset)'}: no CUTLASS headers there (expected "
                             "include/cutlass/cutlass.h); install nvidia-cutlass or set CUTLASS=")
    includes = [str(cutlass_root / "include"), str(cutlass_root / "tools" / "util" / "include")]
    set_name, workload_file, problems = load_workloads(env["WORKLOADS"], root / "kernel_specs" / "workloads")
    try:
        timeout = float(env["PROFILE_TIMEOUT"])
    except ValueError:
        raise KernelgenError(f"PROFILE_TIMEOUT={env['PROFILE_TIMEOUT']!r} is not a number") from None
    cutlass = cutlass_version(includes[0])
    return Config(
        root=root, workloads=env["WORKLOADS"], set_name=set_name, workload_file=workload_file.resolve(),
        problems=problems, kernels=env["KERNELS"], arch=parse_arch(env["ARCH"]), cutlass_includes=includes,
        cutlass=cutlass, nvcc=env["NVCC"], nvccflags=shlex.split(env["NVCCFLAGS"]),
        specs_dir=(root / env["SPECS"]).resolve(), templates_dir=root / "kernel_specs" / "templates",
        profiler_dir=root / "profiler", results_dir=(root / env["RESULTS"] / set_name).resolve(),
        build_dir=env["BUILD"], profile_timeout=timeout, profile_args=shlex.split(env["PROFILE_ARGS"]),
        toolchain_version=f"{_nvcc_version(env['NVCC'])}; CUTLASS {cutlass}")


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
    return plan


def stale_objects(plan: plan_module.BuildPlan, config: Config) -> list:
    build = config.root / config.build_dir
    return plan_module.stale_objects(plan, build / "kernels", build / "obj")


def _tool_command(module: str, config: Config, extra: list) -> str:
    """The command line of a kernelgen tool run on the built profiler (SOURCES[0]) and manifest."""
    args = [sys.executable, "-m", module, "--manifest", "${SOURCES[1]}", "--profiler", "${SOURCES[0]}",
            "--workloads", str(config.workload_file), "--sets-dir", str(config.root / "kernel_specs" / "workloads"),
            "--results", str(config.results_dir.parent), *extra]
    return " ".join(shlex.quote(a) if not a.startswith("${") else a for a in args)


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
    return {"results": _shown(config.results_dir, config.root), "workload_file": str(config.workload_file),
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
    """The CSVs the header reads that exist (a missing one is reported by the reducer)."""
    paths = (config.results_dir / f"{p.name}.csv" for p in config.problems)
    return [str(p) for p in paths if p.exists()]


def header_dependencies(config: Config) -> list:
    package = Path(__file__).parent
    return sorted(str(p) for p in [*config.templates_dir.glob("*.mako"), *config.specs_dir.glob("*.toml"),
                                   *package.rglob("*.py"), *config.profiler_dir.glob("*.h")])


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
