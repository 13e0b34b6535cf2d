#!/usr/bin/env python3
"""The SASS instruction mix of kernels of the catalog, compiled as the profiler compiles them.

    python bench/sass_mix.py KERNEL [KERNEL ...] [--cuobjdump PATH] [--ops FFMA,HFMA2,...] [--arch 90a]

Each KERNEL (a name or a glob over the listed families' and the space's kernels) is rendered as
the profiler's source of it (``render.kernel_source``), compiled to a cubin with the profiler's
flags (``variables.DEFAULT_NVCCFLAGS``, the kernel's defines) and the nvidia-cutlass headers, and
disassembled by ``cuobjdump -sass`` (CUDA's toolkit, or PyPI's nvidia-cuda-cuobjdump); printed for
each device function of the cubin, a line: its instructions, and of them those of each opcode of ``--ops``
(the opcode before its first dot: ``HFMA2.MMA`` counts as HFMA2). Counts are static (the code as
written out, every unrolled iteration once), not what a launch executes.
"""

import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

DEFAULT_OPS = "FFMA,HFMA2,HMUL2,FADD,HADD2,F2FP,LDS,LDG,STG,HMMA"
_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.MULTILINE)
# an instruction line: /*0040*/  [@P0 | @!UP1 ]OPCODE[.MODIFIERS] operands ;
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]*)?[\s;]",
                          re.MULTILINE)


def instruction_mix(sass: str) -> dict:
    """``cuobjdump -sass`` output -> {function name: Counter of opcodes (without modifiers)}."""
    marks = list(_FUNCTION.finditer(sass))
    mix = {}
    for i, mark in enumerate(marks):
        body = sass[mark.end():marks[i + 1].start() if i + 1 < len(marks) else len(sass)]
        mix[mark.group(1)] = Counter(_INSTRUCTION.findall(body))
    return mix


def compile_cubin(kernel, out: Path, arch: str) -> Path:
    """``kernel``'s profiler source compiled to ``out``/<name>.cubin."""
    from kernelgen import render
    from kernelgen.variables import DEFAULT_NVCCFLAGS, default_cutlass_root

    source = out / f"{kernel.name}.cu"
    source.write_text(render.kernel_source(render.lookup(ROOT / "kernel_specs" / "templates"), kernel))
    cutlass = default_cutlass_root()
    cubin = source.with_suffix(".cubin")
    command = ["nvcc", *DEFAULT_NVCCFLAGS.split(), f"-gencode=arch=compute_{arch},code=sm_{arch}", "-cubin",
               *(f"-D{d}" for d in getattr(kernel, "defines", ())), f"-I{ROOT / 'profiler'}",
               "-isystem", f"{cutlass}/include", "-isystem", f"{cutlass}/tools/util/include", "-o", str(cubin),
               str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{kernel.name}: nvcc failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    return cubin


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="+", help="kernel names or globs")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump"), help="cuobjdump (default: on PATH)")
    parser.add_argument("--ops", default=DEFAULT_OPS, help="comma-separated opcodes to count")
    parser.add_argument("--arch", default="90a", help="the SM the cubin is for (90a)")
    args = parser.parse_args(argv)
    if not args.cuobjdump:
        raise SystemExit("no cuobjdump on PATH: give --cuobjdump (CUDA's toolkit, or pip's nvidia-cuda-cuobjdump)")
    from kernelgen.space import load_space, merged
    from kernelgen.specs import load_catalog

    catalog = merged(load_catalog(ROOT / "kernel_specs" / "families"), load_space(ROOT / "kernel_specs" / "spaces"))
    chosen = [k for k in catalog if any(fnmatch.fnmatchcase(k.name, g) for g in args.kernels)]
    if not chosen:
        raise SystemExit(f"no kernel of the catalog matches {' '.join(args.kernels)}")
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    print("kernel | instructions | " + " | ".join(ops) + " | function")
    with tempfile.TemporaryDirectory() as folder:
        for kernel in chosen:
            cubin = compile_cubin(kernel, Path(folder), args.arch)
            done = subprocess.run([args.cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
            if done.returncode != 0:  # e.g. a cuobjdump without its nvdisasm beside it or on PATH
                lines = done.stderr.strip().splitlines()
                raise SystemExit(f"{kernel.name}: {args.cuobjdump} failed: {lines[-1] if lines else done.returncode}")
            sass = done.stdout
            for function, counts in instruction_mix(sass).items():
                print(f"{kernel.name} | {sum(counts.values())} | " + " | ".join(str(counts[op]) for op in ops)
                      + f" | {function}")


if __name__ == "__main__":
    main()
