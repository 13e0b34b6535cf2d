"""Kernels of this project launched as programmatic dependents (profiler/dependent_kernel.h: the
depthwise kernels of fp16 sums and the spread pipelined grouped kernels of ``launch = "pdl"``) wait
for the kernel before them: tests/pdl_chain.cu runs each on its own output, back to back in a CUDA
graph, and compares every second output bit for bit with the kernel's output on the same input run
alone. On a GPU only; the CPU tests of the families check what they render and that they compile."""

import subprocess

from conftest import ROOT, requires_gpu
from kernelgen.specs import load_family

# (N H W C R GROUPS) of each family's layers, the output the input's shape (stride 1)
LAYERS = {
    "depthwise_half": [(8, 28, 28, 192, 7, 192), (8, 14, 14, 480, 5, 480), (8, 56, 56, 64, 3, 64)],
    "grouped_mma": [(8, 14, 14, 320, 3, 20), (8, 7, 7, 784, 3, 49), (8, 28, 28, 144, 3, 9)],
}


@requires_gpu
def test_each_dependent_kernel_waits_for_the_kernel_before_it(tmp_path):
    from kernelgen import render

    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    checked = 0
    for family, layers in LAYERS.items():
        kernels = [k for k in load_family(ROOT / "kernel_specs" / "families" / f"{family}.toml") if k.launch == "pdl"]
        assert kernels, family
        folder = tmp_path / family
        folder.mkdir()
        headers = sorted({h for k in kernels for h in k.includes})
        (folder / "kernel_types.h").write_text(
            "#pragma once\n" + "".join(f'#include "{h}"\n' for h in headers)
            + "".join(render.type_definition(templates, k) for k in kernels)
            + "#define KERNELS(X) " + " ".join(f"X({k.name})" for k in kernels) + "\n")
        build = subprocess.run(["nvcc", "-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr",
                                "-gencode=arch=compute_90a,code=sm_90a", f"-I{ROOT / 'profiler'}", f"-I{folder}", "-o",
                                str(folder / "pdl_chain"), str(ROOT / "tests" / "pdl_chain.cu")],
                               capture_output=True, text=True, timeout=1800)
        assert build.returncode == 0, build.stderr[-5000:]
        for layer in layers:
            out = subprocess.run([str(folder / "pdl_chain"), *map(str, layer)], capture_output=True, text=True,
                                 timeout=600)
            assert out.returncode == 0, out.stderr[-3000:]
            lines = out.stdout.splitlines()
            assert len(lines) == len(kernels) and not any(" mismatch" in line or line.startswith("error") for line in lines), \
                (layer, [line for line in lines if not line.endswith(" ok") and " refused " not in line])
            checked += sum(line.endswith(" ok") for line in lines)
    assert checked >= 10, "most dependent kernels ran on one of their layers"
