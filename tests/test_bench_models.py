"""The tensor-core kernels of bench/narrow_conv.cu and bench/grouped_direct.cu, checked on the CPU:
each compiled for sm_90a, then `--model` fills every CTA's shared memory and takes every warp's
fragments as ldmatrix and mma.sync define them, from the kernels' own address functions, against a
plain convolution; a wrong address or fragment makes the model's largest difference the size of
the outputs and its exit status 1."""

import subprocess

import pytest

from conftest import ROOT, requires_nvcc


@requires_nvcc
@pytest.mark.parametrize("source", ["narrow_conv.cu", "grouped_direct.cu"])
def test_a_bench_kernels_indexing_passes_its_cpu_model(tmp_path, source):
    binary = tmp_path / "bench"
    built = subprocess.run(["nvcc", "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", source, "-o",
                            str(binary)], cwd=ROOT / "bench", capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    out = subprocess.run([str(binary), "--model"], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines and all(line.startswith("model ") and line.endswith("  ok") for line in lines), \
        out.stdout + out.stderr
