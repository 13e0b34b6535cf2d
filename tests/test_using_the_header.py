"""A consumer of the header compiles with the host compiler and CUDA's headers alone; one of its
CUTLASS types compiles with CUTLASS; the launcher compiles and links with the kernels' profiler
sources, and the linked launcher refuses bad input with an error status before it touches the GPU
(the long compiles began in tests/test_header_compile.py)."""

import shutil
import subprocess
import sys

import pytest

import header_builds
from conftest import requires_nvcc
from test_launcher import SM80

POINTWISE = header_builds.POINTWISE


@requires_nvcc
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the host compiler g++")
def test_a_consumer_of_the_committed_header_compiles_with_the_host_compiler_and_cuda_headers_alone(tmp_path):
    directory = header_builds.committed_header()
    (tmp_path / "consumer.cpp").write_text(header_builds.CONSUMER)
    cuda_include = header_builds.cuda_include()
    out = subprocess.run(["g++", "-std=c++17", f"-I{directory}", f"-I{cuda_include}", "-c",
                          "-o", str(tmp_path / "consumer.o"), str(tmp_path / "consumer.cpp")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-5000:]


@requires_nvcc
def test_a_consumer_of_the_committed_headers_cutlass_types_compiles():
    header_builds.start_compiles()  # already running, unless this file runs on its own
    status, output = header_builds.result("types_consumer")
    assert status == 0, output[-5000:]


@requires_nvcc
def test_the_launcher_compiles_and_links():
    header_builds.start_compiles()
    status, output = header_builds.result("launcher")
    assert status == 0, output[-5000:]


# The launcher header's problems (tests/header_builds.py): a 3x3 layer (chosen: SM80), a 1x1
# layer (pointwise), a GEMM (SM80), a strided 1x1 layer (SM80); its fallback order: SM80, pointwise.
LAYER_3X3 = [8, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1]
LAYER_1X1 = [8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1]
OPERANDS = [0x10000, 0x20000, 0x30000]  # 16-byte aligned addresses, never dereferenced by a refusal


def conv(problem, x=OPERANDS[0], w=OPERANDS[1], y=OPERANDS[2], workspace=0, workspace_bytes=0):
    return ["conv", *problem, x, w, y, workspace, workspace_bytes]


def gemm(m, n, k, a=OPERANDS[0], b=OPERANDS[1], d=OPERANDS[2]):
    return ["gemm", m, n, k, a, b, d, 0, 0]


def changed(problem, **fields):
    names = ["n", "h", "w", "c", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w", "dilation_h", "dilation_w"]
    return [fields.get(name, value) for name, value in zip(names, problem)]


INVALID, MISALIGNED, UNSUPPORTED = "Error Invalid Problem", "Error Misaligned Operand", "Error Not Supported"


@requires_nvcc
@pytest.mark.parametrize("args, status, kernel", [
    (conv(LAYER_3X3, x=0), INVALID, SM80),
    (conv(LAYER_3X3, w=0), INVALID, SM80),
    (conv(LAYER_1X1, y=0), INVALID, POINTWISE),  # a profiled problem: its chosen kernel
    (conv(LAYER_3X3, x=OPERANDS[0] + 2), MISALIGNED, SM80),
    (conv(LAYER_3X3, y=OPERANDS[2] + 8), MISALIGNED, SM80),
    (conv(LAYER_3X3, workspace=0x40004, workspace_bytes=1 << 20), MISALIGNED, SM80),
    (conv(changed(LAYER_3X3, n=0), x=0), INVALID, "(none)"),  # the problem is checked first
    (conv(changed(LAYER_3X3, k=-64)), INVALID, "(none)"),
    (conv(changed(LAYER_3X3, pad_h=-1)), INVALID, "(none)"),
    (conv(changed(LAYER_3X3, stride_w=0)), INVALID, "(none)"),
    (conv(changed(LAYER_3X3, dilation_h=0)), INVALID, "(none)"),
    (conv(changed(LAYER_3X3, h=1, w=1, pad_h=0, pad_w=0)), INVALID, "(none)"),  # 3x3 filter, 1x1 input
    (conv(changed(LAYER_3X3, n=32768, h=256, w=256)), UNSUPPORTED, "(none)"),  # 2^37 activations
    (conv(changed(LAYER_3X3, c=3)), UNSUPPORTED, "(none)"),  # no kernel here takes 3 channels
    (conv(changed(LAYER_1X1, n=2, h=7, w=7), x=0), INVALID, SM80),  # not profiled: the first that takes it
    (gemm(256, 1000, 2048, a=0), INVALID, SM80),
    (gemm(256, 1000, 2048, d=OPERANDS[2] + 4), MISALIGNED, SM80),
    (gemm(0, 1000, 2048), INVALID, "(none)"),
    (gemm(256, 1000, 3), UNSUPPORTED, "(none)"),
], ids=["null-x", "null-w", "null-y", "x-off-2-bytes", "y-off-8-bytes", "workspace-off-4-bytes", "batch-0",
        "negative-k", "negative-padding", "stride-0", "dilation-0", "filter-over-input", "2^37-activations",
        "3-channels", "unprofiled-null-x", "gemm-null-a", "gemm-d-off-4-bytes", "gemm-m-0", "gemm-k-3"])
def test_the_launcher_refuses_bad_input_with_a_status(args, status, kernel):
    header_builds.start_compiles()
    built, output = header_builds.result("launcher")
    assert built == 0, output[-5000:]
    out = subprocess.run([str(header_builds.launcher_header() / "launcher"), *map(str, args)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [status, kernel]


@requires_nvcc
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the host compiler g++")
def test_the_readmes_snippet_compiles_against_the_committed_header(tmp_path):
    import re

    readme = (header_builds.ROOT / "README.md").read_text()
    snippet, = re.findall(r"```cpp\n(.*?)```", readme, re.DOTALL)
    (tmp_path / "snippet.cpp").write_text(snippet)
    out = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{header_builds.committed_header()}",
                          f"-I{header_builds.cuda_include()}", "-c", "-o", str(tmp_path / "snippet.o"),
                          str(tmp_path / "snippet.cpp")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-5000:]


@requires_nvcc
def test_the_cmake_examples_source_compiles_against_a_header_with_grouped_layers(tmp_path):
    """examples/cmake/run_best_kernels.cu's reference and operands follow each problem's groups:
    it compiles against the committed efficientnet_b0_b32 header (depthwise layers among its own)."""
    build = tmp_path / "build"
    out = subprocess.run([sys.executable, shutil.which("scons"), "best_kernels.h", "WORKLOADS=efficientnet_b0_b32",
                          f"BUILD={build}"], cwd=header_builds.ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    folder = build / "sets" / "efficientnet_b0_b32"
    assert ", 32}," in (folder / "best_kernels.h").read_text(), "a depthwise layer's groups in the table"
    compiled = subprocess.run(["nvcc", "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", f"-I{folder}",
                               "-c", "-o", str(tmp_path / "run.o"),
                               str(header_builds.ROOT / "examples" / "cmake" / "run_best_kernels.cu")],
                              capture_output=True, text=True, timeout=600)
    assert compiled.returncode == 0, compiled.stderr[-5000:]
