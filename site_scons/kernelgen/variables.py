"""The command-line variables of SConstruct: the table, the defaults, the help text, and the
checks every value passes before it is used.

No value holds a control character, and flags have balanced quotes. A path a user gives
reaches SCons only with ``$`` escaped (``scons_text``) or as a Literal, so SCons never expands it.
A message quotes a value by its ends only when it is long (``errors.shorten``).
"""

import importlib.util
import os
import re
import shlex
from pathlib import Path

from SCons.Script import Variables
from SCons.Subst import Literal

from . import importer
from .errors import KernelgenError, one_line, shorten
from .targets import DEFAULT_ARCH

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NVCCFLAGS = "-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr"

# Candidates per layer a build compiles (TOP=): docs/search.md, "A cold build's time", says what 4
# and 5 cost and what a build of each measures on networks no set held.
DEFAULT_TOP = "5"


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
        ("SPACES", "directory of generated kernel spaces (*.toml)", "kernel_specs/spaces"),
        ("TOP", "candidates per layer the cost model proposes to compile and profile; 'listed': every "
                "kernel of SPECS, 'all': SPECS and the whole space (narrow with KERNELS=)", DEFAULT_TOP),
        ("ACCUMULATE", "the sums a kernel of the build and the header may keep: 'f32' (fp32 accumulation only) "
                       "or comma-separated accumulators (f16,f32); default: any, each kernel verified within "
                       "its accumulator's tolerance", ""),
        ("RESULTS", "root of the profile results; CSVs go to RESULTS/<set>/<gpu>/", "profile_results"),
        ("BUILD", "directory for generated sources, objects, the profiler and the header", "generated"),
        ("SHARD", "i/n: this machine's share of the build's kernels, for a job array (SLURM_ARRAY_TASK_ID/"
                  "SLURM_ARRAY_TASK_COUNT): a kernel is shard (a hash of its name) mod n's; scons profile "
                  "compiles and measures this share's only; scons merge FROM= joins the shards' results", ""),
        ("GPUS", "scons profile: 'all' or GPU indices (0,1): one profiler process per GPU, of one model, each "
                 "measuring its share of the kernels; default: the one GPU CUDA gives", ""),
        ("OLD_ROWS", "scons profile: 'aside' moves the rows of the set's CSVs measured with another GPU stack "
                     "(driver, CUDA, CUTLASS, timing) that the build would not measure again to "
                     "RESULTS/<set>/<gpu>/aside/, and profiles; default: such a profile is refused", ""),
        ("FROM", "scons merge: comma-separated results roots (each as RESULTS) whose rows join RESULTS's", ""),
        ("CACHE", "a folder of compiled objects shared by builds, machines and clones (SCons's CacheDir): an "
                  "object is taken from it when its source, project headers, flags, nvcc and CUTLASS match", ""),
        ("PROFILE_TIMEOUT", "seconds a kernel may run silent before it counts as a timeout", "30"),
        ("PROFILE_ARGS", "extra profiler arguments, e.g. '--repeats 30 --batch-ms 2'", ""),
        ("MODEL", "scons workloads: a torchvision model name (resnet50) or package.module:factory", ""),
        ("BATCH", "scons workloads: the batch size", "1"),
        ("INPUT", "scons workloads: the input's CxHxW (default: the model's own, as a timm model names it; "
                  "a torchvision video model's clip of 16 frames at its weights' crop size; "
                  f"else {importer.DEFAULT_INPUT})", ""),
        ("DTYPE", f"scons workloads: what the layers are profiled as ({' or '.join(importer.DTYPES)})",
         importer.DEFAULT_DTYPE),
        ("NAME", "scons workloads: the set's name (default <model>_b<batch>)", ""),
        ("REPLACE", "scons workloads: 1 writes NAME.txt again when it exists (its results were measured for the "
                    "old one)", "0"),
        ("EPILOGUES", "scons workloads: 1 writes the epilogue each layer's output goes through (epilogue=bias+relu, "
                      "...) into its line", "0"),
        ("PAD", "scons workloads: 1 pads a channel count no multiple of 8 between two convolutions (the first's "
                "output read by the second alone) to one: zero filters in, zero weights out, the same output; "
                "examples/torch_extension/swap.py pads the network the same way", "0"),
        ("COST_MODEL", "the GPU (a name or its folder name, nvidia_h200) whose fitted cost model ranks the "
                       "candidates: a GPU with no model of its own (kernel_specs/models/) borrows another's; "
                       "default: this machine's GPU's, else GPU='s", ""),
        ("GPU", "GPU whose results best_kernels.h is built from, a name or its folder name (nvidia_h200); "
                "default: this machine's GPU, else the only GPU with results", ""),
    )
    return v


def scons_text(text) -> str:
    """``text`` as SCons must be given it to keep it as it is: ``$`` doubled, so that a path such
    as ``${...}`` is never substituted (which would run Python)."""
    return str(text).replace("$", "$$")


class Word(Literal):
    """One word of a command as a user gave it (a path, a flag): SCons neither substitutes nor
    splits it, and it reaches the program as one argument (commands run without a shell). Its
    ``$`` stay escaped in the command's signature, where a ``$(`` would open a section SCons
    leaves out of it."""

    def for_signature(self):
        return scons_text(self.lstr)


def help_text(variables_: Variables, env) -> str:
    return ("Targets:\n"
            "  profile          build the profiler, then verify and time every kernel on every workload (GPU)\n"
            "  best_kernels.h   merge RESULTS/<set>/<gpu>/*.csv into BUILD/sets/<set>/best_kernels.h (the default;\n"
            "                   beside it best_kernels_cutlass.h, the kernels' CUTLASS types)\n"
            "  library          ... and BUILD/sets/<set>/libbest_kernels.a, the launcher and the chosen kernels\n"
            "                   (nvcc, no GPU), with best_kernels-config.cmake for find_package(best_kernels)\n"
            "  list             the families and kernels of the build, and how many of the set's layers each\n"
            "                   serves (no GPU; KERNELS= narrowed: each kernel and its layers)\n"
            "  candidates       each layer's candidates, ranked by the cost model: BUILD/candidates.csv (no GPU)\n"
            "  -n profile       what a profile would compile and measure (no GPU)\n"
            "  compare          time the chosen kernels, cuDNN and the floor side by side (GPU, PyTorch)\n"
            "  profiler         build the profiler only\n"
            "  workloads        record MODEL's convolutions and linear layers at BATCH, INPUT into\n"
            "                   kernel_specs/workloads/<model>_b<batch>.txt (PyTorch and torchvision;\n"
            "                   no CUTLASS, nvcc or GPU; run alone)\n"
            "  merge            join the rows of FROM=root[,root...] (a job array's shards) into RESULTS\n"
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


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def check_values(env, keys) -> None:
    """No variable holds a control character (a newline would reach a command or a comment)."""
    for key in keys:
        bad = _CONTROL.search(str(env[key]))
        if bad:
            raise KernelgenError(f"{key}={shorten(env[key])!r}: holds the control character {bad.group()!r}")


def split_flags(env, key) -> list:
    try:
        return shlex.split(env[key])
    except ValueError as e:
        raise KernelgenError(f"{key}={shorten(env[key])!r}: {e} (quote as in a shell)") from None
