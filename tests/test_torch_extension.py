"""examples/torch_extension built for real against a set's library (its one GEMM kernel compiled
by nvcc): the module imports, lists the header's problems, and refuses bad operands in one line
before asking for a GPU, and run_model.py refuses bad arguments in one line. Needs PyTorch and nvcc;
the GPU checks are check.py's and run_model.py's."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, requires_nvcc

EXTENSION = ROOT / "examples" / "torch_extension"

PROBE = r"""
import json, sys
import torch
import best_conv

half = torch.half
out = {"element": best_conv.element(), "convs": best_conv.profiled(), "fused": best_conv.profiled(fused=True),
       "gemms": best_conv.profiled_gemms(), "refusals": []}
for call in (
    lambda: best_conv.linear(torch.zeros(4, 64, dtype=half), torch.zeros(8, 64, dtype=half)),
    lambda: best_conv.linear_kernel_for(torch.zeros(4, 64, dtype=half), torch.zeros(8, 64, dtype=half)),
    lambda: best_conv.conv2d(torch.zeros(1, 8, 4, 4, dtype=half), torch.zeros(8, 1, 3, 3, dtype=half), groups=8),
    lambda: best_conv.bias_activation_(torch.zeros(2, 8, dtype=half), torch.zeros(8, dtype=half), "silu"),
    lambda: best_conv.linear(torch.zeros(4, 64, dtype=half), torch.zeros(8, 64, dtype=half), activation="tanh"),
):
    try:
        call()
        out["refusals"].append(None)
    except ValueError as e:
        out["refusals"].append(str(e))
print(json.dumps(out))
"""


def cuda_home() -> str:
    """The CUDA toolkit the extension's build includes (CUDA_HOME, else nvcc's, else /usr/local/cuda):
    nvcc on PATH may be a wrapper script outside it."""
    nvcc = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("nvcc"))))
    for home in (os.environ.get("CUDA_HOME"), nvcc, "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    pytest.skip("no CUDA toolkit with include/cuda_runtime.h (set CUDA_HOME)")


@requires_nvcc
def test_the_extension_builds_against_a_sets_library_lists_its_problems_and_refuses_a_cpu_tensor(tmp_path):
    pytest.importorskip("torch", reason="needs PyTorch (pip install -r requirements-compare.txt): the extension "
                                        "is built with torch.utils.cpp_extension")
    build = tmp_path / "build"
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j2", "library", "WORKLOADS=resnet50_fc",
                          f"BUILD={build}"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    env = dict(os.environ, BEST_KERNELS_DIR=str(build / "sets" / "resnet50_fc"), TORCH_CUDA_ARCH_LIST="9.0a")
    env["CUDA_HOME"] = cuda_home()
    lib = tmp_path / "lib"
    out = subprocess.run([sys.executable, "setup.py", "build_ext", f"--build-lib={lib}",
                          f"--build-temp={tmp_path / 'temp'}"], cwd=EXTENSION, env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=lib, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    import json

    got = json.loads(probe.stdout)
    assert got["element"] == "f16" and got["convs"] == [] and got["fused"] == []
    assert [(tuple(p), tuple(e)) for p, e, _ in got["gemms"]] == [((256, 1000, 2048), (False, False, "none"))]
    assert got["gemms"][0][2] > 0
    for argument, message in (("--batch=0", "--batch must be at least 1, got 0"),
                              ("--size=-3", "--size must be at least 1, got -3"),
                              ("--repeats=0", "--repeats must be at least 1, got 0"),
                              ("--breakdown=-1", "--breakdown must be 0 or more, got -1")):
        env_run = dict(os.environ, PYTHONPATH=os.pathsep.join([str(lib), os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, str(EXTENSION / "run_model.py"), argument], cwd=lib, env=env_run,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].endswith(message), out.stderr[-2000:]
    assert got["refusals"] == ["best_conv: x must be a CUDA tensor"] * 3 + [
        "best_conv: y must be a CUDA tensor",
        "best_conv: activation must be one of none, relu, silu, gelu, hardswish, sigmoid, not 'tanh'"]
