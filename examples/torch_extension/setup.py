"""Builds best_conv, a PyTorch extension running convolutions through best_kernels.h's launcher.

    scons library WORKLOADS=resnet50 -j2          (in the project: the header and libbest_kernels.a)
    cd examples/torch_extension && python setup.py build_ext --inplace && python check.py

Links the set's libbest_kernels.a, found with its header in generated/sets/<set>/ of this checkout
(BEST_KERNELS_SET, default resnet50) unless BEST_KERNELS_DIR names the folder: nothing of CUTLASS
is compiled here. Set CUDA_HOME when PyTorch does not find the CUDA toolkit (a bare nvcc on PATH is
not enough: the extension includes the CUDA runtime's headers).
"""

import os
import sys
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
os.chdir(HERE)  # setuptools takes sources relative to the setup script


set_name = os.environ.get("BEST_KERNELS_SET", "resnet50")
header_dir = Path(os.environ.get("BEST_KERNELS_DIR", ROOT / "generated" / "sets" / set_name))
library = header_dir / "libbest_kernels.a"
if not (header_dir / "best_kernels.h").is_file() or not library.is_file():
    sys.exit(f"setup.py: no best_kernels.h and libbest_kernels.a in {header_dir}: run `scons library "
             f"WORKLOADS={set_name}` in {ROOT} first, or set BEST_KERNELS_SET or BEST_KERNELS_DIR")

setup(
    name="best_conv",
    ext_modules=[CUDAExtension(
        "best_conv", ["extension.cpp", "best_conv.cu"],
        include_dirs=[str(HERE), str(header_dir)],
        extra_objects=[str(library)],
        # The host compiler keeps the C++ standard PyTorch asks for: its headers built under another
        # one break its own code (a refused input crashed where it should raise).
        extra_compile_args={"cxx": ["-O3"], "nvcc": ["-std=c++17", "-O3", "-DNDEBUG"]})],
    cmdclass={"build_ext": BuildExtension},
)
