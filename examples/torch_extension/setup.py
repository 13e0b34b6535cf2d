"""Builds best_conv, a PyTorch extension running convolutions through best_kernels.h's launcher.

    cd examples/torch_extension && python setup.py build_ext --inplace && python check.py

Finds best_kernels.h in generated/ of this checkout (where `scons best_kernels.h` writes it) and
CUTLASS in the nvidia-cutlass package, unless BEST_KERNELS_DIR or CUTLASS_DIR (a CUTLASS source
root) say otherwise; BEST_KERNELS_GENCODE overrides the device target, compute_90a/sm_90a. Set
CUDA_HOME when PyTorch does not find the CUDA toolkit (a bare nvcc on PATH is not enough: the
extension includes the CUDA runtime's headers). The header's kernels (up to a minute of one core
each) are compiled in BEST_KERNELS_PARTS files (default 8): best_conv.cu with the launcher and
part 0, build/best_kernels_parts/part<i>.cu the others, in parallel where PyTorch builds with ninja
(MAX_JOBS says how many at once).
"""

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
os.chdir(HERE)  # setuptools takes sources relative to the setup script


def cutlass_dir() -> Path:
    if os.environ.get("CUTLASS_DIR"):
        return Path(os.environ["CUTLASS_DIR"])
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("setup.py: no nvidia-cutlass package in this Python (pip install nvidia-cutlass, or set CUTLASS_DIR)")
    return Path(list(spec.submodule_search_locations)[0]) / "source"


header_dir = Path(os.environ.get("BEST_KERNELS_DIR", ROOT / "generated"))
if not (header_dir / "best_kernels.h").is_file():
    sys.exit(f"setup.py: no best_kernels.h in {header_dir}: run `scons best_kernels.h` in {ROOT} first, "
             "or set BEST_KERNELS_DIR")
cutlass = cutlass_dir()
if not (cutlass / "include" / "cutlass" / "cutlass.h").is_file():
    sys.exit(f"setup.py: {cutlass} holds no include/cutlass/cutlass.h (set CUTLASS_DIR)")

parts = os.environ.get("BEST_KERNELS_PARTS", "8")
if not parts.isdigit() or int(parts) < 1:
    sys.exit(f"setup.py: BEST_KERNELS_PARTS={parts!r}: expected a positive number")
part_sources = []
for part in range(1, int(parts)):
    source = Path("build") / "best_kernels_parts" / f"part{part}.cu"
    text = f'#define BEST_KERNELS_PART {part}\n#include "best_kernels.h"\n'
    if not source.is_file() or source.read_text() != text:  # unchanged: not compiled again
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text)
    part_sources.append(str(source))

# The flags the profiler measured the kernels with (best_kernels.h stops with an #error without
# them). Naming the -gencode here keeps PyTorch from adding targets of its own.
TORCH_NVCC_MACROS = ("__CUDA_NO_HALF_OPERATORS__", "__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__",
                     "__CUDA_NO_HALF2_OPERATORS__")
gencode = os.environ.get("BEST_KERNELS_GENCODE", "-gencode=arch=compute_90a,code=sm_90a")
setup(
    name="best_conv",
    ext_modules=[CUDAExtension(
        "best_conv", ["extension.cpp", "best_conv.cu", *part_sources],
        include_dirs=[str(HERE), str(header_dir), str(cutlass / "include"), str(cutlass / "tools" / "util" / "include")],
        # The host compiler keeps the C++ standard PyTorch asks for: its headers built under another
        # one break its own code (a refused input crashed where it should raise).
        # PyTorch's extension builds define __CUDA_NO_HALF_OPERATORS__ and its kin for every nvcc
        # compile; the profiler compiled the kernels without them, so they are undefined again here.
        extra_compile_args={"cxx": ["-O3"],
                            "nvcc": ["-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", gencode,
                                     *(f"-U{m}" for m in TORCH_NVCC_MACROS), f"-DBEST_KERNELS_PARTS={parts}"]})],
    cmdclass={"build_ext": BuildExtension},
)
