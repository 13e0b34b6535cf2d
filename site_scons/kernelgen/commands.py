"""What SConstruct builds and runs, from a resolved ``Config``: the build plan, the command lines
of ``scons profile``, ``compare`` and ``workloads``, and what the header builder and ``scons -c``
are given.

Every word of a command that comes from a user is quoted for the shell and escaped for SCons
(``scons_text``). Paths written into generated text (workloads.json, the header builder's
configuration) are relative to the project when inside it, so that the text does not depend on
where the project is checked out.
"""

import importlib.util
import re
import shlex
import sys
from pathlib import Path

from . import importer
from . import inputs
from . import plan as plan_module
from . import resolved
from .config import Config
from .errors import KernelgenError
from .ops import check_header_keys, check_served
from .variables import ROOT, scons_text


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
