"""What SConstruct builds and runs, from a resolved ``Config``: the build plan, the commands of
``scons profile``, ``compare`` and ``workloads``, and what the header builder is given.

A command is its argument vector, run as it is (the noshell tool's ArgvAction: no shell, and no
SCons substitution). Paths written into generated text (workloads.json, the header builder's
configuration) are relative to the project when inside it, so that the text does not depend on
where the project is checked out.
"""

import hashlib
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

from . import candidates, cost_model, inputs, outputs, resolved, results, signature
from . import plan as plan_module
from . import units as units_module
from .config import Config
from .errors import KernelgenError, shorten
from .ops import check_header_keys, check_served, shared_type
from .ops import serves as serves_op
from .catalog import kernel_catalog
from .cost_model import serves
from .specs import globs_of, select
from .variables import ROOT, scons_text


def catalog(config: Config) -> list:
    """Every kernel a build may hold: the listed ones (SPECS), and with TOP= other than ``listed``
    the generated space's (SPACES) too, and the fused variants of those for the set's epilogues
    (``fusion.with_fused``), sorted by name; with ACCUMULATE=, those of its accumulators only (what
    the build, the candidates and the header choose among)."""
    kernels = kernel_catalog(config.specs_dir, None if config.top == "listed" else config.spaces_dir, config.problems)
    if config.accumulate is None:
        return kernels
    return [k for k in kernels if k.accumulator in config.accumulate]


def did_not_compile_text(config: Config, name: str) -> str:
    """The source of kernel ``name``'s object where nvcc refused the kernel's own."""
    from .render import did_not_compile_source, lookup
    return did_not_compile_source(lookup(config.templates_dir), name)


def empty_plan() -> plan_module.BuildPlan:
    """The plan of a run that compiles nothing (the header alone is built from measured rows)."""
    return plan_module.BuildPlan([], {}, {}, "", "")


def candidates_text(proposals: list, plan: plan_module.BuildPlan, config: Config, searched: list) -> str:
    """What ``scons candidates`` writes (BUILD/candidates.csv and .txt, a kernel list for KERNELS=@)
    and says, as the JSON of a Value; ``searched`` is the build's catalog (``catalog``)."""
    deeper = sum(1 for p in proposals if any(k.name in p.untried for _, k in p.ranked))
    unranked = {k.family: getattr(k, "searched", False) for p in proposals for _, k in p.ranked
                if k.name in p.unranked - p.untried - p.beyond}
    large = [p for p in proposals if p.beyond]
    large_families = sorted({k.family for p in large for _, k in p.ranked if k.name in p.beyond})
    explored = sorted(f for f, beside in unranked.items() if not beside)
    beside = sorted(f for f, beside in unranked.items() if beside)  # candidates.companions
    fused = sum(1 for k in searched if getattr(k, "fusion", ""))  # the set's epilogues' variants
    summary = (f"{len(searched)} kernels in the space and the listed families"
               + (f" ({fused} of them fused variants for the set's epilogues)" if fused else "")
               + f", {len(plan.kernels)} for "
               f"{config.set_name} (the top {config.top} of each of its {len(proposals)} layers"
               + ("" if len(proposals) == len(config.problems) else f" that KERNELS= serves, of {len(config.problems)}")
               + ", "
               + (f"every kernel of {', '.join(explored)} that serves a layer (the model has no rows of it), "
                  if explored else "")
               + (f"on {len(large)} layer(s) of more than twice the outputs of any the model has rows of for their "
                  f"kind, every kernel of {', '.join(large_families)} that serves them, " if large else "")
               + (f"the kernels of {', '.join(beside)} beside their fixed twins proposed (their launch settings "
                  "searched; the model has no rows of them), " if beside else "")
               + (f"on {deeper} layer(s) the best-ranked kernel of a tile K the model has no rows of for its kind "
                  "beside the top, " if deeper else "")
               + "and what it chose before)")
    pairs = plan.pairs
    if pairs is not None:
        built = set(plan.sources)  # (a shard's pairs name the other shards' kernels too)
        summary += (f"; a profile measures {sum(len(built.intersection(v)) for v in pairs.values())} (layer, kernel) "
                    "pairs at most (each layer's candidates and the build's kernels the model ranks in its top "
                    f"{cost_model.MEASURED_TOP} for it)")
    return json.dumps({"csv": candidates.to_csv_text(proposals),
                       "txt": "".join(f"{k.name}\n" for k in plan.kernels), "summary": summary})


def measured_frames(config: Config) -> dict:
    """Workload name -> the rows its CSV holds, as validated columns (``results.read_columns``:
    column -> list), of every CSV of the set that can be read (one that cannot is the header
    build's to report). Columns, not frames: a set's tens of frames cost more to make than all
    that is done with them."""
    frames = {}
    for path in result_paths(config):
        try:
            columns = results.read_columns(path)
        except KernelgenError:
            continue
        frames[path.stem] = columns or {c: [] for c in results.COLUMNS}  # a CSV is named by its workload
    return frames


def proposal_memo(config: Config):
    """The proposals earlier runs kept in BUILD (``candidates.Memo``; empty if none or unreadable)."""
    path = config.build_path / outputs.PROPOSALS
    try:
        text = inputs.read_text(path) if inputs.file_kind(path) is None else ""
    except (OSError, KernelgenError):
        text = ""
    return candidates.Memo(text)


def narrowed_problems(config: Config, kernels: list) -> tuple:
    """(problems, left out): the set's layers the build's ``kernels`` (those KERNELS= selects) serve,
    and the others. Where KERNELS= narrows the build, a layer none of its kernels serves is left out
    of the build and of the profile (its rows stay as they are: the build measures the new kernels
    of a family on the layers they serve); no layer served is an error. Where KERNELS= selects every
    kernel, every layer stays, and one no kernel serves is an error (``candidates.propose``)."""
    if "*" in globs_of(config.kernels) or not kernels:
        return config.problems, []
    served, left = [], []
    for problem in config.problems:
        (served if any(serves(k, problem) is None for k in kernels) else left).append(problem)
    if not served:
        raise KernelgenError(f"KERNELS={shorten(config.kernels)!r}: none of the {len(kernels)} kernel(s) it selects "
                             f"serves a layer of {_shown(config.workload_file, config.root)} "
                             f"(`scons list WORKLOADS={config.set_name} KERNELS=...` shows what each serves)")
    return served, left


def build_plan(config: Config, everything: list, frames: dict, memo=None) -> tuple:
    """(plan, proposals): the kernels this build compiles, of those of ``everything`` (``catalog``)
    that KERNELS= selects: with TOP=k each layer's k best-ranked (the cost model's candidates,
    ``kernelgen.candidates``) and the set's measured choices among them; with TOP=listed or all,
    every one; the plan's ``left_out``, the layers a narrowed KERNELS= serves none of
    (``narrowed_problems``). ``proposals`` is None unless the model ranked them."""
    flags = config.nvccflags + config.arch.gencode_flags()
    shown = _shown(config.workload_file, config.root)
    proposals, kernels, pairs = None, select(everything, config.kernels, config.arch), None
    problems, left_out = narrowed_problems(config, kernels)
    if isinstance(config.top, int) and kernels:
        model = cost_model.load_model(config.model_gpu)
        proposals, kernels = candidates.pool(problems, kernels, model, config.top, frames, shown, memo)
        pairs = candidates.measured_pairs(proposals, kernels, model)
    if config.shard is not None:
        kernels = [k for k in kernels if shard_of(k.name, config.shard[1]) == config.shard[0]]
        if not kernels:
            return empty_plan(), proposals  # SConstruct says so: nothing is this shard's
    plan = plan_module.plan_of(kernels, config.templates_dir, config.profiler_dir, config.arch, flags,
                               config.cutlass_includes[0], pairs, tuple(p.name for p in left_out))
    if not plan.kernels:
        raise KernelgenError(f"KERNELS={shorten(config.kernels)!r} with ARCH={config.arch} and TOP={config.top} "
                             f"selects no kernel of {config.specs_dir}" + ("" if config.top == "listed" else
                                                                           f" and {config.spaces_dir}"))
    if config.shard is None:  # a shard's kernels serve the layers they serve
        check_served(problems, plan.kernels, shown)
    return plan, proposals


_NVCC_CUDA = re.compile(r"\bcuda_(\d+)\.(\d+)")


def measuring_stack(config: Config) -> tuple | None:
    """The provenance (``results.PROVENANCE``) a profile run here gives its rows, where it can be
    known without the profiler: the GPU's name and driver as nvidia-smi reports them, CUDA's version
    as nvcc's (the profiler's runtime is nvcc's own), CUTLASS's from its headers, and the profiler's
    own timing (``results.PROFILER_TIMING``), which PROFILE_ARGS= may change. None where any part
    is unknown: no GPU, PROFILE_ARGS=, an nvcc whose version is not found."""
    from .profile import NoGpuError, query_gpu

    cuda = _NVCC_CUDA.search(config.toolchain_version)
    if config.profile_args or cuda is None:
        return None
    try:
        gpu, driver = query_gpu()
        cutlass = signature.cutlass_version(config.cutlass_includes[0])
    except KernelgenError:  # NoGpuError among them
        return None
    return gpu, driver, f"{cuda[1]}.{cuda[2]}", cutlass, results.PROFILER_TIMING


def pending_pairs(config: Config, plan: plan_module.BuildPlan, frames: dict, stack: tuple | None) -> list:
    """The (workload name, kernel name) pairs of ``plan``'s kernels (of its hashes, measured on the
    workloads its ``pairs`` names them for) still to measure as a profile plans them
    (``profile.Runner.plan``): a kernel serving the workload that is wanted there and that the
    workload's CSV (``frames``) holds no row of on its current code, measured with ``stack`` (None:
    any stack); none on the workloads the plan leaves out (a narrowed build's, not profiled)."""
    kernels, hashes, pairs = plan.kernels, plan.hashes, plan.pairs
    pending = []
    for problem in config.problems:
        if problem.name in plan.left_out:
            continue
        frame = frames.get(problem.name)
        rows = [] if frame is None else list(zip(frame["kernel"], frame["kernel_hash"],
                                                 zip(*(frame[c] for c in results.PROVENANCE))))
        kept = {k for k, h, provenance in rows if h == hashes.get(k, h)
                and (stack is None or tuple(map(str, provenance)) == stack)}
        wanted = results.measured_with(pairs, problem.name, [k for k, _, _ in rows])
        pending += [(problem.name, k.name) for k in kernels if k.name not in kept and serves_op(k, problem)
                    and (wanted is None or k.name in wanted)]
    return pending


def profiler_plan(config: Config, everything: list, plan: plan_module.BuildPlan, frames: dict, sources: dict,
                  hashes: dict, with_chosen: bool) -> plan_module.BuildPlan:
    """The part of ``plan`` the profiler links: its kernels with a (workload, kernel) pair still to
    measure on this GPU and software stack (``pending_pairs``), and with ``with_chosen``, or where
    none is still to measure, the kernels the set's results choose now (``library_kernels``: what
    compare times again; after a profile, each layer's choice is one of those or one it measured),
    whose generated ``sources`` and ``hashes`` the header's (``header_kernels``) hold. The whole plan
    where the stack cannot be known here (``measuring_stack``) or where that leaves none: a kernel
    whose rows are of another stack is measured again, and must be in the profiler."""
    stack = measuring_stack(config) if plan.kernels and config.results_dir is not None else None
    if stack is None:
        return plan
    names = {kernel for _, kernel in pending_pairs(config, plan, frames, stack)}
    if with_chosen or not names:
        chosen = library_kernels(config, everything, hashes)
        if chosen is None:  # no choice for some layer: compare says so as it always has
            return plan
        # (a shard, SHARD=, compiles only its share of them: the others are other shards' to link)
        names.update(n for n in chosen if config.shard is None or n in plan.hashes)
    if not names or names == set(plan.hashes):
        return plan
    kernels = [k for k in everything if k.name in names]  # sorted by name, as the catalog
    cutlass = stack[results.PROVENANCE.index("cutlass")]  # (read from CUTLASS's headers once, by measuring_stack)
    return plan_module.plan_from(kernels, sources, hashes, config.templates_dir, config.arch, cutlass, plan.pairs,
                                 part=True, left_out=plan.left_out)


def shard_of(name: str, count: int) -> int:
    """The shard of ``count`` that kernel ``name`` belongs to: the same on every machine, and for
    every set of kernels it is in (a kernel proposed or dropped leaves the others where they were)."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big") % count


def check_set(config: Config, everything: list) -> None:
    """The set's workloads are ones some kernel of ``everything`` computes (op and dtype) and the
    header can key (every run checks, before anything is built or read)."""
    shown = _shown(config.workload_file, config.root)
    check_served(config.problems, everything, shown)
    check_header_keys(config.problems, shown)


def header_kernels(config: Config, everything: list, plan: plan_module.BuildPlan, frames: dict) -> tuple:
    """(hashes, sources): the kernels the header chooses among, with the hash of their current code
    (those of ``everything`` that KERNELS= selects and the set's CSVs, ``frames``, hold a row of,
    and those the build compiles), and the generated source of each (what libbest_kernels.a
    compiles of a chosen kernel this build does not profile)."""
    measured = {name for frame in frames.values() for name in frame["kernel"]} - set(plan.hashes)
    # (the measured kernels first: a fused set's catalog is tens of thousands, its CSVs name hundreds)
    kernels = select([k for k in everything if k.name in measured], config.kernels, config.arch)
    flags = config.nvccflags + config.arch.gencode_flags()
    sources, hashes = plan_module.sources_and_hashes(kernels, config.templates_dir, config.profiler_dir, flags,
                                                     config.cutlass_includes[0])
    return {**hashes, **plan.hashes}, {**sources, **plan.sources}


HEADER_FILES = outputs.HEADER_FILES  # what SConstruct's header builder writes


def library_kernels(config: Config, everything: list, hashes: dict) -> list | None:
    """The kernels libbest_kernels.a links, in the launcher's order, as the set's results choose
    them now; None when they choose none (the header build says why)."""
    if config.results_dir is None:
        return None
    from . import reduce  # pandas: only a run that links the library waits for it

    by_name = {k.name: k for k in everything}
    try:
        frame = reduce.load_set(config.results_dir, config.problems, config.results_dir.name)
        best = reduce.choose(frame, config.problems, hashes, by_name)
    except KernelgenError:
        return None
    return reduce.launch_order(best, config.problems)


def lone_kernels(linked: list, units: units_module.Units, everything: list) -> list:
    """The chosen kernels (``linked``) the library compiles each in an object of its own rather than
    linking its unit's: those whose unit holds a kernel of a type chosen (``shared_type``, one way
    a set: ``reduce.one_code_a_type``) compiled the other way. The linker takes a unit's object
    whole, and a binary holds one code of a kernel type: that one might be the other way's."""
    by_name = {k.name: k for k in everything}
    chosen = dict(code for code in (shared_type(by_name.get(n)) for n in linked) if code)
    lone = []
    for name in linked:
        mates = units.members.get(units.objects[name], ())
        if any(code and code[0] in chosen and code[1] != chosen[code[0]]
               for code in (shared_type(by_name.get(m)) for m in mates)):
            lone.append(name)
    return lone


def list_text(config: Config, everything: list) -> str:
    """What `scons list` prints (kernelgen.listing): the kernels of the build that KERNELS= selects;
    each kernel on its own line when KERNELS= narrows them."""
    from .listing import list_text as listing

    kernels = select(everything, config.kernels, config.arch)
    if not kernels:
        raise KernelgenError(f"KERNELS={shorten(config.kernels)!r} with ARCH={config.arch} selects no kernel")
    return listing(config.set_name, config.problems, kernels, each=config.kernels != "*")


def dry_run_text(config: Config, plan: plan_module.BuildPlan, profiled: plan_module.BuildPlan, frames: dict,
                 units: units_module.Units, stages: int = 0) -> str:
    """What `scons -n profile` would do, GPU or not: the kernels it compiles (in how many nvcc
    runs: kernelgen.units) of those the profiler links (``profiled``: ``profiler_plan`` of ``plan``)
    and the (workload, kernel) pairs it measures, less those the set's CSVs hold a row of on the
    current code; and how many ``stages`` measure some of them while the others compile
    (``early_stages``)."""
    compiled = set(units.compiled)
    stale = [name for name in profiled.sources if units.objects[name] in compiled]
    pending = len(pending_pairs(config, profiled, frames, None))
    where = config.results_dir if config.results_dir is not None else config.results_root / config.set_name
    runs = f" in {len(compiled)} nvcc run{'s' if len(compiled) != 1 else ''}" if len(compiled) != len(stale) else ""
    linked = (f"the build's {len(plan.kernels)} kernels" if profiled is plan else
              f"the {len(profiled.kernels)} kernels the profiler links (of the build's {len(plan.kernels)}: those "
              "with a pair to measure, and for compare the set's choices)")
    return (f"scons -n profile: would compile {len(stale)} of {linked}{runs} "
            f"and measure {pending} (workload, kernel) pair(s) of {len(config.problems) - len(profiled.left_out)} "
            f"workload(s) not yet in {_shown(where, config.root)} on the current code"
            + (f", those of the kernels of its first compile waves in {stages} early stage(s) while the others "
               "compile" if stages else ""))


def compile_units(sources: dict, config: Config, jobs: int) -> units_module.Units:
    """Which object holds each kernel of ``sources`` (name -> generated text; kernelgen.units): its
    own, or a unit's."""
    build = config.build_path
    return units_module.plan_units(sources, build / "kernels", build / "obj", jobs, units_module.memory_bytes())


RESOLVED_FILE = "workloads.json"  # BUILD/workloads.json: the set as resolved here, beside kernels.json


STAGES_FOLDER = "stages"  # BUILD/stages/<i>/: an early stage's manifest and profiler (``early_stages``)
MOST_STAGES = 3  # each links a profiler and starts one (CUDA, the references): a few, not one a wave


def early_stages(config: Config, units: units_module.Units, names, jobs: int, targets) -> list:
    """The kernels of ``names`` (the profiler's) each early stage of `scons profile` measures while
    the build compiles the others: where the kernels compiled now take more than one wave of
    ``jobs`` units, the kernels of each wave but the last (the units heaviest first, in the order
    SCons starts them: ``Units.stems``), consecutive waves together where they are more than
    MOST_STAGES, those of up-to-date objects with the first. Each stage
    links a profiler of its own as soon as its wave has compiled and measures what it can (``python
    -m kernelgen.profile --early``), the stages and then the whole profile one after the other. None
    but for `scons profile` or `compare` on one GPU (not GPUS=, not SHARD=)."""
    if not {"profile", "compare"} & set(targets) or config.gpus or config.shard is not None or jobs < 2:
        return []
    stems, now = units.stems(names), set(units.compiled)
    compiled = [stem for stem in stems if stem in now]
    if len(compiled) <= jobs:
        return []
    early = math.ceil(len(compiled) / jobs) - 1  # the waves but the last, in at most MOST_STAGES stages
    count = min(early, MOST_STAGES)
    stages = [set(compiled[jobs * (early * i // count):jobs * (early * (i + 1) // count)]) for i in range(count)]
    stages[0].update(stem for stem in stems if stem not in now)
    return [sorted(n for n in names if units.objects[n] in stage) for stage in stages]


def stage_plan(config: Config, profiled: plan_module.BuildPlan, names: list) -> plan_module.BuildPlan:
    """The plan of an early stage: ``names`` of the profiler's plan ``profiled``, a part of it."""
    names = set(names)
    kernels = [k for k in profiled.kernels if k.name in names]
    cutlass = json.loads(profiled.manifest_json)["cutlass"]
    return plan_module.plan_from(kernels, profiled.sources, profiled.hashes, config.templates_dir, config.arch,
                                 cutlass, profiled.pairs, part=True, left_out=profiled.left_out)


def stage_folder(config: Config, stage: int) -> Path:
    return config.build_path / STAGES_FOLDER / str(stage)


def resolved_workloads(config: Config) -> str:
    """The text of BUILD/workloads.json: the set's problems as parsed once here (op, dtype, count,
    line), which the profile driver, compare and the header builder read."""
    return resolved.as_json(config.set_name, _shown(config.workload_file, config.root), config.problems)


def _tool_command(module: str, config: Config, extra: list, stage: int | None = None) -> list:
    """The argv of a kernelgen tool run on the built profiler, manifest and resolved set (an early
    stage's, ``stage``)."""
    build = config.build_path
    tool = build if stage is None else stage_folder(config, stage)
    return [sys.executable, "-m", module, "--manifest", str(tool / "kernels.json"), "--profiler",
            str(tool / "profiler"), "--resolved", str(build / RESOLVED_FILE), "--results", str(config.results_root),
            *extra]


def stage_command(config: Config, stage: int) -> list:
    """`python -m kernelgen.profile --early` on early stage ``stage``'s profiler (``early_stages``)."""
    extra = ["--timeout", str(config.profile_timeout), "--early"]
    if config.profile_args:
        extra += ["--", *config.profile_args]
    return _tool_command("kernelgen.profile", config, extra, stage)


def profile_command(config: Config) -> list:
    extra = ["--timeout", str(config.profile_timeout), "--specs", str(config.specs_dir), "--spaces", str(config.spaces_dir)]
    if config.shard is not None:
        extra += ["--shard", f"{config.shard[0]}/{config.shard[1]}"]
    if config.gpus:
        extra += ["--gpus", config.gpus]
    if config.old_rows:
        extra += ["--old-rows", config.old_rows]
    if config.profile_args:
        extra += ["--", *config.profile_args]
    return _tool_command("kernelgen.profile", config, extra)


def compare_command(config: Config) -> list:
    return _tool_command("kernelgen.compare", config, [])


def reduce_config(config: Config, hashes: dict, pairs: dict | None = None) -> dict:
    """What the header builder reads (an env.Value: data, never substituted by SCons). With
    ``error``, no GPU's results could be chosen, and building the header reports it. ``pairs``:
    the build's (its manifest's), so that a pair its profile does not measure is not counted as
    one still to measure."""
    if config.header_error is not None:
        return {"error": config.header_error}
    return {"results": _shown(config.results_dir, config.root), "workload_file": str(config.workload_file),
            "set": config.set_name,
            "resolved": str(config.build_path / RESOLVED_FILE),
            "specs": str(config.specs_dir), "spaces": None if config.top == "listed" else str(config.spaces_dir),
            "templates": str(config.templates_dir), "project_includes": str(config.profiler_dir), "hashes": hashes,
            "pairs": pairs}


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to the project when inside it (so that generated text does not
    depend on where the project is checked out), else absolute."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def result_paths(config: Config) -> list:
    """The CSVs the header reads that are regular files (SCons hashes each source: a FIFO would
    block it, a folder stop it). What is missing or not a file is reported by the reducer."""
    if config.results_dir is None:
        return []
    paths = (config.results_dir / f"{p.name}.csv" for p in config.problems)
    return [p for p in paths if inputs.file_kind(p) is None]


def result_files(config: Config) -> list:
    """``result_paths`` as SCons is given them."""
    return [scons_text(p) for p in result_paths(config)]


def header_dependencies(config: Config) -> list:
    package = Path(__file__).parent
    return sorted(scons_text(p) for p in [*config.templates_dir.glob("*.mako"), *config.specs_dir.glob("*.toml"),
                                          *config.spaces_dir.glob("*.toml"), *package.rglob("*.py"),
                                          *config.profiler_dir.glob("*.h")]
                  if inputs.file_kind(p) is None)


def workloads_command(env, targets: list) -> list:
    """The command of `scons workloads`, its variables checked; it needs PyTorch (and torchvision
    for a model named by torchvision) and nothing the other targets need."""
    from . import importer

    others = sorted(set(targets) - {"workloads"})
    if others:
        raise KernelgenError(f"scons workloads runs alone (also asked for: {shorten(', '.join(others))}); "
                             "profile the new set afterwards with WORKLOADS=<its name>")
    request = importer.parse_request(env["MODEL"], env["BATCH"], env["INPUT"], env["DTYPE"], env["NAME"],
                                     env.get("REPLACE", ""), env.get("EPILOGUES", ""), env.get("PAD", ""))
    needed = ("torch",) if request.factory else ("torch", "torchvision")
    if any(importlib.util.find_spec(m) is None for m in needed):
        raise importer.NoTorchError(
            f"scons workloads needs {' and '.join('PyTorch' if m == 'torch' else m for m in needed)} "
            f"(pip install {' '.join(needed)}), not installed here; it is needed for this target only")
    args = [sys.executable, "-m", "kernelgen.importer", "--model", request.model, "--batch", str(request.batch),
            "--input", request.input_text, "--dtype", request.dtype, "--name", request.name,
            "--sets-dir", str(ROOT / "kernel_specs" / "workloads")] + (["--replace"] if request.replace else []) \
        + (["--epilogues", "1"] if request.epilogues else []) + (["--pad", "1"] if request.pad else [])
    return args
